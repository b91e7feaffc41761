#!/bin/sh
# B-write_user_abs / B-write_user_rel: `sh write-user.sh abs|rel FILE`. Every run appends a line
# to FILE in the user's own working tree (the folder of the shared git directory), by its
# absolute path or by a path relative to the agent's worktree, then improves its own attempt.
top=$(cd "$(git rev-parse --git-common-dir)/.." && pwd)
if [ "$1" = abs ]; then
    echo "written by the agent" >>"$top/$2"
else
    rel=$(realpath --relative-to=. "$top")
    echo "written by the agent" >>"$rel/$2"
fi
v=$(cat value.txt)
echo $((v - 1)) >value.txt
