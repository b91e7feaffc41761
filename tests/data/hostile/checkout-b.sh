#!/bin/sh
# B-git_checkout_b: creates a branch (switching its worktree to it) and a ref of another
# namespace in the shared repository, every run; its change is always worse (reverted), so each
# run makes the same refs again at the same commit.
git checkout -q -b agent-branch
git update-ref refs/agent/made HEAD
echo 50 >value.txt
