#!/bin/sh
# Leaves a child in a session of its own that keeps writing into the worktree.
setsid sh -c 'while :; do echo x >>spam.txt; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
echo $! >"$(git rev-parse --git-common-dir)/child.pid"
sleep 0.2
