#!/bin/sh
# B-write_other: `sh write-other.sh FOLDER`. In its first run, researcher A's agent writes a file
# into researcher B's worktree (by a relative path) at the instant B's first attempt has been put
# back (the runner pauses there: it was started with
# GIT_CONFERENCE_FAILPOINT=worktree.put-back:pause=FOLDER; A arms the pause, B's first run waits
# for that, and A waits for the pause). Every run improves.
folder=$1
if [ "${CONFERENCE_ITERATION-}" = 1 ] && [ "${CONFERENCE_RESEARCHER-}" = A ]; then
    : >"$folder/armed"
    n=0
    while [ ! -e "$folder/paused" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n + 1)); done
    echo "planted by A" >../researcher-B/from-a.txt
    rm -f "$folder/paused"
fi
if [ "${CONFERENCE_ITERATION-}" = 1 ] && [ "${CONFERENCE_RESEARCHER-}" = B ]; then
    n=0
    while [ ! -e "$folder/armed" ] && [ ! -e "$folder/paused" ] && [ $n -lt 1200 ]; do
        sleep 0.05
        n=$((n + 1))
    done
fi
v=$(cat value.txt)
awk -v v="$v" 'BEGIN { print v - 1 }' >value.txt
