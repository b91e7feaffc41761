#!/bin/sh
echo -inf >value.txt
