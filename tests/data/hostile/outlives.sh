#!/bin/sh
# A4: an agent that would outlive its runner. It starts a child that stays in its process group
# and one in a session of its own (setsid), each appending a line to alive.log in the git
# common dir every 50 ms, writes their pids to agent.pids, then waits. Once agent.pids exists
# (a later run: the resume), it improves instead.
common=$(git rev-parse --git-common-dir)
if [ -e "$common/agent.pids" ]; then
    v=$(cat value.txt)
    echo $((v - 1)) >value.txt
    exit 0
fi
sh -c "while :; do echo group >>'$common/alive.log'; echo x >>outlived.txt; sleep 0.05; done" &
in_group=$!
setsid sh -c "while :; do echo session >>'$common/alive.log'; sleep 0.05; done" </dev/null >/dev/null 2>&1 &
in_session=$!
echo "$$ $in_group $in_session" >"$common/agent.pids.tmp"
mv "$common/agent.pids.tmp" "$common/agent.pids"
wait
