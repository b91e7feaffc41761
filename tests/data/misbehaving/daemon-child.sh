#!/bin/sh
# Double-forks a daemon (its parent exits at once, so it is re-parented) that keeps writing.
common=$(git rev-parse --git-common-dir)
sh -c 'setsid sh -c "while :; do echo y >>daemon.txt; sleep 0.05; done" </dev/null >/dev/null 2>&1 &
echo $! >"$1/child.pid"' sh "$common"
sleep 0.2
