#!/bin/sh
# Sets the repository's hooks path (and a worktrees path) in the shared local config.
git config core.hooksPath /tmp/agent-hooks
git config conference.worktreesPath /tmp/agent-worktrees
echo 5 >value.txt
