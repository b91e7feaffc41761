#!/usr/bin/env python3
"""builtin:tune's cost per iteration as a conference grows (issue #27).

One researcher runs builtin:tune on the 2-D fixture (a near-instant awk evaluation) for
--iterations attempts in ONE round (`Stall rounds: never`). Each iteration event records how
long the iteration ran (`running_s`, in ms; `agent_s` is rounded to 0.1 s): builtin:tune's step
(reading the history, the proposal, writing the files), the evaluation (a few ms of awk) and the
recording. Prints the median over a window of iterations around each checkpoint (default 100
and the last), and their ratio.

    python3 bench/tune_cost.py --binary target/release/git-conference --iterations 3000
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFERENCE = """# Conference: Tune cost
## Goal
Minimise f.
## Mode
metric
## Success Metric
- **Metric:** f
- **Target:** -100
- **Direction:** minimize
## Researchers
- **Count:** 1
- **Iterations per round:** {n}
- **Max rounds:** 1
## Search Space
**Allowed changes:**
- params.sh
## Constraints
- **Max total iterations:** {n}
- **Stall rounds:** never
## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh
## Agent
- command: builtin:tune
- seed: 1
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/git-conference")
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--at", default="100", help="checkpoints besides the last, comma-separated")
    ap.add_argument("--window", type=int, default=50, help="iterations on each side of a checkpoint")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    tmp = tempfile.mkdtemp(prefix="tunecost-")
    try:
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        os.symlink(binary, os.path.join(bindir, "git-conference"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"])
        repo = os.path.join(tmp, "repo")
        shutil.copytree(os.path.join(ROOT, "fixtures", "tune-2d"), repo)
        with open(os.path.join(repo, "conference.md"), "w") as f:
            f.write(CONFERENCE.format(n=args.iterations))
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
        subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
        subprocess.run(git + ["commit", "-q", "-m", "fixture"], cwd=repo, check=True)
        t0 = time.time()
        started = subprocess.run(["git", "conference", "start", "--yes"], cwd=repo, env=env,
                                 capture_output=True, text=True)
        wall = time.time() - t0
        if started.returncode not in (0, 3):
            sys.exit(f"start failed ({started.returncode}): {started.stderr[-800:]}")
        log = subprocess.run(["git", "conference", "log", "--format", "jsonl"], cwd=repo,
                             env=env, capture_output=True, text=True, check=True).stdout
        agent = {}
        for line in log.splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            p = e.get("payload", e)
            if "running_s" in p and "iteration" in p and "agent_s" in p:
                agent[int(p["iteration"])] = float(p["running_s"])
        n = max(agent) if agent else 0
        print(f"{n} iterations of one round in {wall:.0f} s wall "
              f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
        points = [int(a) for a in args.at.split(",") if a] + [n]
        medians = []
        for at in points:
            lo, hi = max(1, at - args.window), min(n, at + args.window)
            window = [agent[i] * 1000 for i in range(lo, hi + 1) if i in agent]
            med = statistics.median(window)
            q = statistics.quantiles(window, n=4)
            medians.append(med)
            print(f"iterations {lo}-{hi}: iteration median {med:.1f} ms "
                  f"[q25 {q[0]:.1f}, q75 {q[2]:.1f}]")
        print(f"ratio last / first checkpoint: {medians[-1] / medians[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
