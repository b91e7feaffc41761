#!/bin/sh
# Makes the conference benches/coordination.rs publishes to: fixtures/machines with RESEARCHERS
# researchers (default 16, one per bench machine: production runs one researcher per machine),
# started with the real `git conference` and paused after round 1.
#
#   bench/coordination.sh <dir> [<researchers>]
#   cargo bench --bench coordination -- <dir> bench <workdir> <machines> <events> [<catch-up>]
#
# `git conference` must be on PATH (e.g. PATH=$CARGO_TARGET_DIR/release:$PATH). <dir> must not
# exist; <workdir> must exist and be empty.
set -eu
dir=$1
researchers=${2:-16}
root=$(cd "$(dirname "$0")/.." && pwd)
[ ! -e "$dir" ] || { echo "coordination.sh: $dir exists" >&2; exit 2; }
cp -r "$root/fixtures/machines" "$dir"
cd "$dir"
cat >conference.md <<MD
# Conference: Coordination bench

## Goal
Lower the sum of a.txt, b.txt and c.txt (the bench only needs its researchers).

## Mode
metric

## Success Metric
- **Metric:** score
- **Target:** none
- **Direction:** minimize

## Researchers
- **Count:** $researchers
- **Iterations per round:** 1
- **Max rounds:** 1000

## Pre-Flight Gate
- **Critic / Devil's Advocate:** disabled
- **Final confirmation:** confirmed

## Search Space Partitioning
**Strategy:** free

## Noise Handling
- **Noise runs:** 1

## Constraints
- **Pause every:** 1

## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh, agent.sh

## Agent
- command: sh ./agent.sh
MD
git init -q -b main
git add -A
git -c user.name=Bench -c user.email=bench@example.com commit -q -m "coordination bench"
# Exit 3: paused after round 1, as asked.
status=0
git conference start bench --yes >.git/start.log 2>&1 || status=$?
[ "$status" = 3 ] || { cat .git/start.log >&2; echo "coordination.sh: expected a pause (exit 3), got $status" >&2; exit 1; }
echo "$dir: conference \`bench\` with $researchers researchers, paused after round 1"
