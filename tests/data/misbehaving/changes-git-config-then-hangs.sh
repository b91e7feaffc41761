#!/bin/sh
# Sets the repository's hooks path, then hangs (its sleep's pid goes to agent-sleep.pid in the
# git common dir, for a test that kills the runner meanwhile).
common=$(git rev-parse --git-common-dir)
git config core.hooksPath /tmp/agent-hooks
sleep 600 &
echo $! >"$common/agent-sleep.pid"
wait
