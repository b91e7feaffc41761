#!/bin/sh
# Overwrites the worktree's .git link, and improves the value.
echo 5 >value.txt
echo "gitdir: /nonexistent" >.git
