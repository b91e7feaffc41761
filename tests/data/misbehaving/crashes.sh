#!/bin/sh
echo 0 >value.txt
echo "crashes.sh: giving up" >&2
exit 3
