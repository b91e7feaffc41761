#!/bin/sh
# The agent of every misbehaving-agents row: `sh run.sh <behaviour>` misbehaves on iteration 1
# (runs <behaviour>.sh from this folder) and makes a plain improvement (value - 1) after, so a
# test sees the conference go on in a worktree that works.
here=$(dirname "$0")
if [ "${CONFERENCE_ITERATION:-1}" = 1 ]; then
    exec sh "$here/$1.sh"
fi
v=$(cat value.txt)
awk -v v="$v" 'BEGIN { print v - 1 }' >value.txt
