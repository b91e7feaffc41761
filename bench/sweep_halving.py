#!/usr/bin/env python3
"""Successive halving across sweeps (issue 41): real conferences through the `git-conference`
binary, `Parameter sweep: on`, with and without `prune: on`, on curves that cross.

The fixture (written here): train.py holds LEARNING_RATE and WIDTH; the evaluation prints
--steps readings `loss@step=k: v`, --step-s seconds apart, then `loss: <final>`. With
x = log10(LEARNING_RATE): final = 0.6 (x + 3)^2 + (WIDTH - 16)^2 / 64, and the reading at step k
of S is final + 3 exp(-r k / S), r = 6 * 10^(0.5 (x + 3)): a higher learning rate falls faster
and may end worse, so curves cross (a fast starter ahead early, behind at the end).

The researcher (a shell script, no LLM, seeded by --seed, the round and the iteration): each
attempt moves WIDTH by a random step of -3..3 and sweeps 4 learning rates drawn around the
current one (log-uniform within +-0.6 decades). Every conference makes --iterations attempts
(one researcher, one round). Measured per conference: kept attempts, evaluation seconds (each
evaluation process's lifetime from a log the evaluation writes; baseline, review and transfer
included), kept per evaluation-hour, the final best, and wrongly stopped: a variant stopped by the
race whose final loss (computed from its commit's train.py) is strictly better than its sweep's
chosen variant's (it would have won its sweep).

    python3 bench/sweep_halving.py --binary target/release/git-conference
                                   [--seeds 5] [--iterations 6] [--steps 8] [--step-s 0.1]
                                   [--devices 4] [--warmup 1]
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile

EVAL = r"""#!/bin/sh
t0=$(date +%s.%N)
awk -v steps="$BENCH_STEPS" -v pause="$BENCH_STEP_S" '
  /^LEARNING_RATE *=/ { split($0, a, "="); lr = a[2] + 0 }
  /^WIDTH *=/ { split($0, a, "="); w = a[2] + 0 }
  END {
    x = log(lr) / log(10)
    final = 0.6 * (x + 3) ^ 2 + (w - 16) ^ 2 / 64
    r = 6 * 10 ^ (0.5 * (x + 3))
    for (k = 1; k <= steps; k++) {
      system("sleep " pause)
      printf "loss@step=%d: %.5f\n", k, final + 3 * exp(-r * k / steps)
      fflush()
    }
    printf "loss: %.5f\n", final
  }' train.py
rc=$?
echo "$t0 $(date +%s.%N)" >> "$BENCH_LOG"
exit $rc
"""

AGENT = r"""#!/bin/sh
seed=$(( BENCH_SEED * 7919 + CONFERENCE_ROUND * 131 + CONFERENCE_ITERATION * 17 ))
awk -v s="$seed" '
  /^LEARNING_RATE *=/ { split($0, a, "="); lr = a[2] + 0 }
  /^WIDTH *=/ { split($0, a, "="); w = a[2] + 0 }
  END {
    srand(s)
    w2 = w + int(rand() * 7) - 3
    x = log(lr) / log(10)
    line = ""
    for (i = 1; i <= 4; i++) {
      v = 10 ^ (x + (rand() * 1.2 - 0.6))
      if (v > 0.1) v = 0.1
      line = line (i > 1 ? ", " : "") sprintf("%.3g", v)
    }
    print w2 > "width.tmp"
    print "WIDTH " w2 > "/dev/stderr"
    print line > "values.tmp"
  }' train.py
w2=$(cat width.tmp); values=$(cat values.tmp); rm -f width.tmp values.tmp
sed "s/^WIDTH = .*/WIDTH = $w2/" train.py > train.py.new && mv train.py.new train.py
{ echo "width $w2"; echo "SWEEP: train.py:LEARNING_RATE = $values"; } > "$CONFERENCE_NOTE_FILE"
"""


def config(args, prune, tmp):
    prune_lines = f"- prune: on\n- prune warmup: {args.warmup}\n" if prune else ""
    devices = ",".join(str(d) for d in range(args.devices))
    return f"""# Conference: Sweep halving bench
## Goal
Lower the loss.
## Mode
metric
## Success Metric
- **Metric:** loss
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 1
- **Iterations per round:** {args.iterations}
- **Max rounds:** 1
- **Parameter sweep:** on
## Pre-Flight Gate
- **Critic / Devil's Advocate:** disabled
- **Final confirmation:** confirmed
## Search Space
**Allowed changes:**
- train.py
## Noise Handling
- **Noise runs:** 1
## Constraints
- **Stall rounds:** never
## Evaluation
- command: sh {tmp}/eval.sh
- timeout: 120s
{prune_lines}## Environment
- devices: {devices}
## Agent
- command: sh {tmp}/agent.sh
"""


def final_loss(train):
    lr = float(train.split("LEARNING_RATE = ")[1].split()[0])
    w = float(train.split("WIDTH = ")[1].split()[0])
    return 0.6 * (math.log10(lr) + 3) ** 2 + (w - 16) ** 2 / 64


def run(args, seed, prune):
    tmp = tempfile.mkdtemp(prefix="halvingbench-")
    try:
        repo = os.path.join(tmp, "repo")
        os.makedirs(repo)
        with open(os.path.join(repo, "train.py"), "w") as f:
            f.write("LEARNING_RATE = 0.01\nWIDTH = 8\n")
        for name, text in (("eval.sh", EVAL), ("agent.sh", AGENT)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        with open(os.path.join(repo, "conference.md"), "w") as f:
            f.write(config(args, prune, tmp))
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
        subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
        subprocess.run(git + ["commit", "-q", "-m", "fixture"], cwd=repo, check=True)
        log = os.path.join(tmp, "evals.log")
        env = dict(os.environ, BENCH_SEED=str(seed), BENCH_STEPS=str(args.steps),
                   BENCH_STEP_S=str(args.step_s), BENCH_LOG=log,
                   PATH=os.path.dirname(os.path.abspath(args.binary)) + ":" + os.environ["PATH"])
        done = subprocess.run(["git", "conference", "start", "--yes"], cwd=repo, env=env,
                              capture_output=True, text=True)
        if done.returncode not in (0, 3):
            raise RuntimeError(f"start failed ({done.returncode}): {done.stderr[-1500:]}")
        status = json.loads(subprocess.run(["git", "conference", "status", "--format", "json"],
                                           cwd=repo, env=env, capture_output=True, text=True,
                                           check=True).stdout)
        with open(log) as f:
            eval_s = sum(float(b) - float(a) for a, b in (line.split() for line in f))
        kept = status["researchers"]["A"]["counts"]["kept"]
        stopped = wrong = 0
        for line in subprocess.run(["git", "log", "--format=%B%x00", f"refs/conference/{status['name']}/events"],
                                   cwd=repo, capture_output=True, text=True).stdout.split("\0"):
            event = next((json.loads(l) for l in line.splitlines() if l.startswith("{")), None)
            if not event or event.get("event") != "researcher.iteration":
                continue
            sweep = event["payload"].get("sweep") or {}
            variants = sweep.get("variants", [])
            if not variants:
                continue
            chosen = variants[sweep["chosen"]]
            chosen_final = final_loss(subprocess.run(
                ["git", "show", f"{chosen['commit']}:train.py"], cwd=repo, capture_output=True,
                text=True, check=True).stdout)
            for v in variants:
                if v["status"] == "pruned" and "successive halving" in (v.get("reason") or ""):
                    stopped += 1
                    train = subprocess.run(["git", "show", f"{v['commit']}:train.py"], cwd=repo,
                                           capture_output=True, text=True, check=True).stdout
                    wrong += final_loss(train) < chosen_final
        return {"kept": kept, "eval_s": eval_s, "best": status["best"]["metric"],
                "stopped": stopped, "wrong": wrong}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default="target/release/git-conference")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--step-s", type=float, default=0.1)
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    print(f"{args.seeds} seeds, {args.iterations} sweeps of 4 per conference, {args.steps} readings "
          f"{args.step_s}s apart, {args.devices} devices, prune warmup {args.warmup}")
    rows = {}
    for prune in (False, True):
        rows[prune] = [run(args, seed, prune) for seed in range(1, args.seeds + 1)]
    print(f"{'':<12} {'kept':>5} {'eval s':>7} {'kept/eval-hour':>14} {'final best':>10} "
          f"{'stopped':>7} {'wrong':>5}")
    rate = {}
    for prune, rs in rows.items():
        kept = sum(r["kept"] for r in rs)
        eval_s = sum(r["eval_s"] for r in rs)
        rate[prune] = kept / eval_s * 3600
        best = statistics.median(r["best"] for r in rs)
        stopped = sum(r["stopped"] for r in rs)
        wrong = sum(r["wrong"] for r in rs)
        name = "halving" if prune else "no pruning"
        print(f"{name:<12} {kept:>5} {eval_s:>7.1f} {rate[prune]:>14.0f} {best:>10.4f} "
              f"{stopped:>7} {wrong:>5}")
    for seed, (a, b) in enumerate(zip(rows[False], rows[True]), 1):
        print(f"  seed {seed}: best {a['best']:.4f} without, {b['best']:.4f} with")
    print(f"kept per evaluation-hour, halving against none: {rate[True] / rate[False]:.2f}x")


if __name__ == "__main__":
    main()
