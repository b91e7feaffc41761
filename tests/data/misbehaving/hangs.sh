#!/bin/sh
# Changes a file, then never returns.
echo 1 >value.txt
sleep 600
