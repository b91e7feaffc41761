#!/bin/sh
# An evaluation that prints `score: <value>` while value.txt holds a number, and otherwise
# prints whatever value.txt holds, as a crashing program prints its error (issue #14 case 10:
# "Segmentation fault at line 3" must not read as a metric of 3).
v=$(cat value.txt)
case "$v" in
    *[!0-9.-]*) echo "$v" ;;
    *) echo "score: $v" ;;
esac
