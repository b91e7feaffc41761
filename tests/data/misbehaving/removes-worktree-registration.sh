#!/bin/sh
# Removes its own worktree through git: the folder and its registration both go.
here=$(pwd)
common=$(git rev-parse --git-common-dir)
common=$(cd "$common" && pwd)
cd /
git --git-dir="$common" worktree remove --force "$here"
