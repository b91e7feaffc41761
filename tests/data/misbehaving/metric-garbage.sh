#!/bin/sh
# What a crashing evaluation prints instead of a metric.
echo "Segmentation fault at line 3" >value.txt
