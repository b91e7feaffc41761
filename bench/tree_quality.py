#!/usr/bin/env python3
"""Search quality with the tree of ideas (issue 41): `Branching: off`, `best-first` and
`agent-decided`, each a real conference through the `git-conference` binary with the stochastic
scripted researcher bench/tree_agent.py (no LLM; seeded by the seed), at equal attempts.

- mechanism: fixtures/tree, where the first gain (x) leads into a dead end and the way to the best
  starts with a smaller gain (y) from the same node. Reported: the share of seeds whose best
  reaches the best region (loss <= 0.45), and the median best.
- cost: fixtures tune-2d, tune-6d and multimodal (2-D Rastrigin) with the agent as a random-step
  hill climber from a random start per seed: the median (and quartiles) of the gap between the
  best and the known optimum, off against best-first.

Every conference has one researcher, `Max total iterations` attempts and `Stall rounds: never`,
so every mode makes the same number of attempts (a researcher stuck at level 3 ends its round;
the next round starts from best). builtin:tune with best-first is measured by
bench/tune_quality.py (--methods builtin1,builtin1-bf).

    python3 bench/tree_quality.py --binary target/release/git-conference
                                  [--part mechanism,cost] [--seeds 20] [--attempts 24]
                                  [--cost-attempts 30] [--fixtures tune-2d,tune-6d,multimodal]
                                  [--modes off,best-first,agent-decided] [--jobs 1]
                                  [--cache FILE]

Every seed is deterministic (the agent's draws, the start point), so a conference's result can be
kept: with --cache FILE each one is appended there as a JSON line and a rerun (after the machine
killed a long run, say) takes it from there instead of running it again.
"""

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from tune_quality import builtin_env, machine, read_space, start_point, write_params  # noqa: E402

# Known optima of the cost fixtures: (metric, optimum).
COST = {"tune-2d": ("f", -1.5186858), "tune-6d": ("loss", 0.0), "multimodal": ("f", 0.0)}
BEST_REGION = 0.45


def conference_md(metric, allowed, mode, attempts, per_round):
    branching = "" if mode == "off" else f"- **Branching:** {mode}\n"
    return f"""# Conference: Tree bench
## Goal
Minimise {metric}.
## Mode
metric
## Success Metric
- **Metric:** {metric}
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 1
- **Iterations per round:** {per_round}
- **Max rounds:** {attempts}
{branching}## Search Space
**Allowed changes:**
- {allowed}
## Constraints
- **Max total iterations:** {attempts}
- **Stall rounds:** never
## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh
## Agent
- command: python3 {os.path.join(HERE, "tree_agent.py")}
"""


def run(fixture, config, seed, env, start=None, space=None):
    """One conference in a fresh repository; returns (best metric, attempts)."""
    tmp = tempfile.mkdtemp(prefix="treebench-")
    try:
        repo = os.path.join(tmp, "repo")
        shutil.copytree(os.path.join(ROOT, "fixtures", fixture), repo)
        for extra in ("conference.md", "agent.sh"):
            if os.path.exists(os.path.join(repo, extra)):
                os.remove(os.path.join(repo, extra))
        if start is not None:
            write_params(os.path.join(repo, "params.sh"), space, start)
        with open(os.path.join(repo, "conference.md"), "w") as f:
            f.write(config)
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
        subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
        subprocess.run(git + ["commit", "-q", "-m", "fixture"], cwd=repo, check=True)
        run_env = dict(env, TREE_SEED=str(seed), TREE_MEMORY=os.path.join(tmp, "memory.json"))
        started = subprocess.run(["git", "conference", "start", "--yes"], cwd=repo, env=run_env,
                                 capture_output=True, text=True)
        if started.returncode not in (0, 3):
            raise RuntimeError(f"start failed ({started.returncode}): {started.stderr[-800:]}")
        status = json.loads(subprocess.run(
            ["git", "conference", "status", "--format", "json"], cwd=repo, env=run_env,
            capture_output=True, text=True, check=True).stdout)
        return float(status["best"]["metric"]), int(status["total_iterations"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Cache:
    """Results of finished conferences by (fixture, branching, seed, attempts), kept in a JSON
    lines file when one is given."""

    def __init__(self, path):
        self.path, self.done, self.lock = path, {}, threading.Lock()
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        self.done[r["key"]] = (r["best"], r["attempts"])

    def get(self, key, compute):
        if key not in self.done:
            result = compute()
            with self.lock:
                self.done[key] = result
                if self.path:
                    best, attempts = result
                    with open(self.path, "a") as f:
                        f.write(json.dumps({"key": key, "best": best, "attempts": attempts}) + "\n")
        return self.done[key]


def quartiles(values):
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return statistics.median(values), q[0], q[2]


def each_seed(args, compute):
    """compute(seed) for every seed, --jobs at a time, in seed order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        return list(pool.map(compute, range(args.seeds)))


def mechanism(args, env):
    print(f"mechanism: fixtures/tree, {args.attempts} attempts, {args.seeds} seeds; "
          f"best region: loss <= {BEST_REGION}")
    print(f"{'branching':<14} {'attempts':>8} {'reached':>8} {'median best':>12} {'q25':>6} {'q75':>6}")
    for mode in args.modes:
        def one(seed):
            config = conference_md("loss", "path.txt", mode, args.attempts, 8)
            key = f"tree|{mode}|{seed}|{args.attempts}"
            best, made = args.cache.get(key, lambda: run("tree", config, seed, env))
            print(f"tree {mode} seed {seed}: best {best} attempts {made}", file=sys.stderr)
            return best, made
        bests, attempts = map(list, zip(*each_seed(args, one)))
        reached = sum(b <= BEST_REGION for b in bests)
        med, q1, q3 = quartiles(bests)
        span = f"{min(attempts)}" if min(attempts) == max(attempts) else f"{min(attempts)}-{max(attempts)}"
        print(f"{mode:<14} {span:>8} {reached:>4}/{len(bests):<3} {med:>12.2f} {q1:>6.2f} {q3:>6.2f}")


def cost(args, env):
    print(f"cost: random-step hill climber, {args.cost_attempts} attempts, {args.seeds} seeds, "
          f"a random start per seed; gap = best - known optimum")
    print(f"{'fixture':<11} {'branching':<11} {'median gap':>11} {'q25':>9} {'q75':>9} {'worst':>9}")
    for name in args.fixtures.split(","):
        metric, optimum = COST[name]
        space = read_space(os.path.join(ROOT, "fixtures", name))
        for mode in (m for m in args.modes if m != "agent-decided"):
            def one(seed):
                start = start_point(space, seed)
                config = conference_md(metric, "params.sh", mode, args.cost_attempts, 10)
                key = f"{name}|{mode}|{seed}|{args.cost_attempts}"
                best, made = args.cache.get(
                    key, lambda: run(name, config, seed, env, start, space))
                print(f"{name} {mode} seed {seed}: best {best:.6f} attempts {made}", file=sys.stderr)
                return best - optimum
            gaps = each_seed(args, one)
            med, q1, q3 = quartiles(gaps)
            print(f"{name:<11} {mode:<11} {med:>11.4f} {q1:>9.4f} {q3:>9.4f} {max(gaps):>9.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", help="path to git-conference (default: found on PATH)")
    ap.add_argument("--part", default="mechanism,cost")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--attempts", type=int, default=24)
    ap.add_argument("--cost-attempts", type=int, default=30)
    ap.add_argument("--fixtures", default=",".join(COST))
    ap.add_argument("--cache", help="a JSON lines file of finished conferences (kept, reused)")
    ap.add_argument("--modes", default="off,best-first,agent-decided",
                    help="the Branching values measured (cost: all but agent-decided)")
    ap.add_argument("--jobs", type=int, default=1, help="conferences run at once")
    args = ap.parse_args()
    args.modes = args.modes.split(",")
    args.cache = Cache(args.cache)
    env = builtin_env(args.binary)
    if env is None:
        sys.exit("git-conference not found (use --binary PATH)")
    random.seed(0)
    print(f"machine: {machine()}")
    parts = args.part.split(",")
    if "mechanism" in parts:
        mechanism(args, env)
    if "cost" in parts:
        cost(args, env)


if __name__ == "__main__":
    main()
