#!/usr/bin/env python3
"""What `prune: on` buys: kept improvements per evaluation-hour, wrongly pruned attempts, and the
final best, with and without pruning, at equal time budgets, over seeds.

The fixture is a learning-rate search whose learning curves cross: `eval.py` trains nothing but
prints a realistic validation-loss curve for the learning rate and weight decay in params.txt
(`loss@step=S: v`, then `loss: v`), sleeping a little per step so that GPU time is simulated by
wall time. A high learning rate starts fast and ends on a higher floor (fast starters sometimes end
worse); weight decay slows the start and lowers the floor (slow starters sometimes end better); a
low learning rate has not converged when training ends. Each reading carries noise seeded by the
parameters, so a tree always prints the same curve.

The researcher is a scripted random search around its best (`agent.py SEED RESEARCHER`), as an
agent works: four proposals in five perturb the best's learning rate and weight decay, one in five
is drawn afresh. `--researcher local` (the fixture until 27 Nov 2026) takes small steps
(×10^N(0, 0.25), +N(0, 0.03)): about a quarter of its attempts are kept over 90 s. `--researcher
night` takes an agent's bolder steps (×10^N(0, 0.5), +N(0, 0.06)): most of its changes are worse,
about 9% of its attempts are kept over 300 s, closer to a real night (most agent changes are worse;
karpathy's autoresearch kept about 20 of 700). A researcher's n-th draw depends only on the seed
and n, so with and without pruning a seed draws the same random numbers, and the arm that evaluates faster gets
further along them. Each conference runs through the real binary
with `- Time budget:` as the equal budget (`Stall rounds: never`, so only the budget ends it).

`--shape plateau` gives the curves the shape a small transformer's loss had on an H100
(BENCHMARKS.md): a fast fall to a plateau that every run shares, left at a time that comes sooner
with the learning rate and later with weight decay, then down to the floor; a run that leaves it
late has less time to get down. There the order of two runs on the plateau says little about
their ends: the run that leaves it first wins.

Curves that cross are counted over the run without pruning (every attempt's curve in full,
against the best's curve at a quarter of the steps): fast starters that ended worse (ahead there,
reverted) and slow starters that ended better (behind there, kept).

Measured per run: kept attempts (`counts.kept`), evaluation seconds (each evaluation process's
lifetime, from a log the fixture writes at its start, after each reading and after each step's
sleep: baseline, review and transfer readings included; a pruned run's lifetime ends here at the
reading that decided it, and the engine's stop adds about 25 ms, measured apart by
`cargo test --lib a_stop_ends -- --nocapture`), pruned attempts, and the final best (`status --format json`).
Wrongly pruned: each pruned attempt's tree (its commit's params.txt) is evaluated in full
afterwards, with no sleep, and counts as wrong when that full reading is strictly better than the
researcher's best at the time it was pruned (it would have been kept).

    python3 bench/prune_quality.py [--binary target/release/git-conference] [--seeds 20]
                                   [--budget 45] [--steps 20] [--step-s 0.06] [--jobs 8]
                                   [--warmup 2] [--prune on|early] [--researcher local|night]
                                   [--shape smooth|plateau] [--json out.json]
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

EVAL_PY = r'''#!/usr/bin/env python3
"""A learning-rate search's validation loss, as a training would print it (see prune_quality.py)."""
import hashlib, math, os, random, time

text = open("params.txt").read()
p = dict(line.split("=", 1) for line in text.split())
x = math.log10(float(p["lr"]))
wd = float(p["wd"])
steps = int(os.environ.get("PRUNE_STEPS", "20"))
step_s = float(os.environ.get("PRUNE_STEP_S", "0.06"))
ticks = os.environ.get("PRUNE_TICKS")
rng = random.Random(int(hashlib.sha256(text.encode()).hexdigest()[:12], 16))
start = 4.0
# The floor: best near lr 10^-2.6, lower with weight decay, unstable (higher) past lr 10^-1.6.
floor = 1.0 + 0.35 * (x + 2.6) ** 2 - 0.8 * wd + (0.6 * (x + 1.6) if x > -1.6 else 0.0)
# The speed: faster with the learning rate, slower with weight decay.
rate = 4.0 * 10 ** (0.55 * (x + 3.0)) * (1.0 - 2.5 * wd)
offset = rng.gauss(0.0, 0.004)
# PRUNE_SHAPE=plateau: as a small transformer's on an H100 (BENCHMARKS.md), the loss first falls
# to a plateau at 2.3, at four times the smooth curve's speed, and leaves it for its floor at a
# time that comes sooner with the learning rate and later with weight decay; a run that leaves it
# late has less time to get down.
plateau = os.environ.get("PRUNE_SHAPE") == "plateau"
escape = 0.35 - 0.45 * (x + 2.6) + 0.5 * wd
def level(t):
    if not plateau:
        return floor + (start - floor) * math.exp(-rate * t)
    u = 0.03 * math.log1p(math.exp((t - escape) / 0.03))
    return floor + (2.3 - floor) * math.exp(-8.0 * u) + (start - 2.3) * math.exp(-4.0 * rate * t)
# The process's own token (its pid and start time): pids are reused on a busy machine.
pid = f"{os.getpid()}-{time.time_ns()}"
def tick():
    if ticks:
        with open(ticks, "a") as f:
            f.write(f"{pid} {time.time():.3f}\n")
tick()
v = start
for s in range(1, steps + 1):
    t = s / steps
    v = level(t) + offset + rng.gauss(0.0, 0.003)
    print(f"loss@step={s}: {v:.5f}", flush=True)
    tick()
    time.sleep(step_s)
    tick()
print(f"loss: {v:.5f}", flush=True)
'''

# The proposal itself, a pure function of (seed, n, the best's params.txt): agent.py runs it,
# and bench/prune_replay.py replays it offline (one text, so the two cannot drift).
PROPOSE_PY = r'''
def propose(seed, n, best_text, researcher):
    """The n-th draw of `seed` around the best's params (log10 of the learning rate, weight
    decay). local: small steps (x10^N(0, 0.25) on the learning rate, +N(0, 0.03) on the weight
    decay); night: an agent's bolder changes (x10^N(0, 0.5), +N(0, 0.06)), most of them worse."""
    import math, random
    sx, swd = {"local": (0.25, 0.03), "night": (0.5, 0.06)}[researcher]
    rng = random.Random(seed * 1_000_003 + n)
    best = dict(line.split("=", 1) for line in best_text.split())
    if rng.random() < 0.2:
        x, wd = rng.uniform(-4.0, -1.0), rng.uniform(0.0, 0.2)
    else:
        x = math.log10(float(best["lr"])) + rng.gauss(0.0, sx)
        wd = float(best["wd"]) + rng.gauss(0.0, swd)
    return min(max(x, -4.0), -1.0), min(max(wd, 0.0), 0.2)


def params_text(x, wd):
    return f"lr={10 ** x:.6g}\nwd={wd:.4f}\n"
'''

AGENT_PY = r'''#!/usr/bin/env python3
"""Random search around the best, as an agent works: the worktree holds the researcher's best
params.txt; most proposals perturb it, one in five is drawn afresh. The n-th draw of seed S is the
same in every run."""
import os, subprocess, sys
''' + PROPOSE_PY + r'''

seed = int(sys.argv[1])
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True,
                        text=True, check=True).stdout.strip()
counter = os.path.join(common, "proposals")
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
x, wd = propose(seed, n, open("params.txt").read(), sys.argv[2] if len(sys.argv) > 2 else "local")
open("params.txt", "w").write(params_text(x, wd))
with open(os.environ["CONFERENCE_NOTE_FILE"], "w") as f:
    f.write(f"lr {10 ** x:.3g}, wd {wd:.3f}\n")
'''

BASELINE_PARAMS = "lr=0.001\nwd=0.0000\n"


def conference_md(seed, budget, prune, warmup, researcher="local"):
    evaluation = f"- prune: {prune}\n- prune warmup: {warmup}\n" if prune else ""
    return f"""# Conference: Prune bench
## Goal
Lower the validation loss.
## Mode
metric
## Success Metric
- **Metric:** loss
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 1
- **Iterations per round:** 200
- **Max rounds:** 1000
## Search Space
**Allowed changes:**
- params.txt
## Search Space Partitioning
**Strategy:** free
## Constraints
- **Max total iterations:** 100000
- **Time budget:** {budget}s
- **Stall rounds:** never
## Evaluation
- command: python3 eval.py
- timeout: 60s
- frozen: eval.py, agent.py
{evaluation}
## Agent
- command: python3 agent.py {seed} {researcher}
- timeout: 60s
"""


def git(args, cwd, **kw):
    base = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    return subprocess.run(base + args, cwd=cwd, check=True, capture_output=True, text=True, **kw)


def make_repo(tmp, seed, budget, prune, warmup, researcher):
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    for name, text in [("eval.py", EVAL_PY), ("agent.py", AGENT_PY),
                       ("params.txt", BASELINE_PARAMS),
                       ("conference.md", conference_md(seed, budget, prune, warmup, researcher))]:
        with open(os.path.join(repo, name), "w") as f:
            f.write(text)
    git(["init", "-q", "-b", "main"], repo)
    git(["add", "-A"], repo)
    git(["commit", "-q", "-m", "fixture"], repo)
    return repo


def full_curve(repo, commit, env, params=None):
    """The readings of the tree of `commit` (or of `params`) evaluated in full (no sleep), the
    final loss last."""
    if params is None:
        params = git(["show", f"{commit}:params.txt"], repo).stdout
    with tempfile.TemporaryDirectory(prefix="prunebench-full-") as d:
        with open(os.path.join(d, "params.txt"), "w") as f:
            f.write(params)
        e = dict(env, PRUNE_STEP_S="0")
        e.pop("PRUNE_TICKS", None)
        out = subprocess.run([sys.executable, "-c", EVAL_PY], cwd=d, env=e, check=True,
                             capture_output=True, text=True).stdout
    return [float(line.split(":")[1]) for line in out.strip().splitlines()]


def full_reading(repo, commit, env):
    """The final loss of the tree of `commit` evaluated in full (no sleep)."""
    return full_curve(repo, commit, env)[-1]


def crossings(repo, events, env, steps):
    """How often curves cross, over the attempts of a run without pruning: (attempts, fast
    starters that ended worse: ahead of the best's curve at a quarter of the steps but not kept,
    slow starters that ended better: behind it there but kept, kept)."""
    q = max(steps // 4, 1) - 1
    fast = slow = kept = n = 0
    best_curve = full_curve(repo, None, env, BASELINE_PARAMS)
    for e in events:
        p = e["payload"]
        if not p.get("commit"):
            continue
        curve = full_curve(repo, p["commit"], env)
        n += 1
        ahead = curve[q] < best_curve[q]
        if p["status"] == "kept":
            kept += 1
            slow += not ahead
            best_curve = curve
        elif p["status"] == "reverted":
            fast += ahead
    return n, fast, slow, kept


def eval_seconds(ticks_path):
    """Each evaluation process's lifetime (first to last tick), summed."""
    spans = {}
    try:
        with open(ticks_path) as f:
            for line in f:
                pid, t = line.split()
                lo, hi = spans.get(pid, (float(t), float(t)))
                spans[pid] = (min(lo, float(t)), max(hi, float(t)))
    except FileNotFoundError:
        return 0.0
    return sum(hi - lo for lo, hi in spans.values())


def wrongly_pruned(repo, events, baseline, env):
    """(pruned attempts, the gains over the best of those whose full evaluation would have been
    kept)."""
    best, pruned, gains = baseline, 0, []
    for e in events:
        p = e["payload"]
        if p["status"] == "kept":
            best = p["metric_value"]
        elif p["status"] == "pruned":
            pruned += 1
            full = full_reading(repo, p["commit"], env)
            if full < best:
                gains.append(best - full)
    return pruned, gains


def run_one(binary_dir, seed, budget, prune, warmup, steps, step_s, researcher, shape="smooth"):
    tmp = tempfile.mkdtemp(prefix="prunebench-")
    try:
        repo = make_repo(tmp, seed, budget, prune, warmup, researcher)
        ticks = os.path.join(tmp, "ticks")
        env = dict(os.environ, PATH=binary_dir + os.pathsep + os.environ["PATH"],
                   PRUNE_STEPS=str(steps), PRUNE_STEP_S=str(step_s), PRUNE_TICKS=ticks,
                   PRUNE_SHAPE=shape)
        started = time.time()
        run = subprocess.run(["git", "conference", "start", "--yes"], cwd=repo, env=env,
                             capture_output=True, text=True)
        wall = time.time() - started
        if run.returncode != 0:
            raise RuntimeError(f"seed {seed} prune {prune}: exit {run.returncode}: {run.stderr[-800:]}")
        st = json.loads(subprocess.run(["git", "conference", "status", "--format", "json"],
                                       cwd=repo, env=env, capture_output=True, text=True,
                                       check=True).stdout)
        log = subprocess.run(["git", "conference", "log", "--format", "jsonl"], cwd=repo, env=env,
                             capture_output=True, text=True, check=True).stdout
        events = [json.loads(l) for l in log.splitlines() if l.strip()]
        iterations = [e for e in events if e["event"] == "researcher.iteration"]
        baseline = next(e for e in events if e["event"] == "baseline.measured")
        counts = st["researchers"]["A"]["counts"]
        pruned, gains = wrongly_pruned(repo, iterations, baseline["payload"]["metric_value"], env)
        cross = None if prune else crossings(repo, iterations, env, steps)
        return {
            "crossings": cross,
            "seed": seed, "prune": prune, "attempts": len(iterations),
            "kept": counts["kept"], "pruned": pruned, "wrong": len(gains), "wrong_gains": gains,
            "best": st["best"]["metric"], "eval_s": eval_seconds(ticks), "wall_s": wall,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def quartiles(values):
    v = sorted(values)
    if len(v) == 1:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], statistics.median(v), q[2]


def fmt_q(values, digits=2):
    lo, mid, hi = quartiles(values)
    return f"{mid:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"


def report(results, args):
    by = {True: [], False: []}
    for r in results:
        by[bool(r["prune"])].append(r)
    rate = lambda r: r["kept"] / (r["eval_s"] / 3600) if r["eval_s"] else 0.0
    print(f"\n{args.seeds} seeds, time budget {args.budget}s, {args.steps} steps × {args.step_s}s "
          f"per full evaluation, researcher {args.researcher}, {args.shape} curves, "
          f"prune: {args.prune}, "
          f"prune warmup {args.warmup}; "
          f"median [quartiles]\n")
    print("| | attempts | kept | pruned | evaluation s | kept per evaluation-hour | final best |")
    print("|---|---|---|---|---|---|---|")
    for prune in (False, True):
        rs = by[prune]
        print(f"| prune {args.prune if prune else 'off'} | {fmt_q([r['attempts'] for r in rs], 0)} | "
              f"{fmt_q([r['kept'] for r in rs], 0)} | {fmt_q([r['pruned'] for r in rs], 0)} | "
              f"{fmt_q([r['eval_s'] for r in rs], 1)} | {fmt_q([rate(r) for r in rs], 0)} | "
              f"{fmt_q([r['best'] for r in rs], 4)} |")
    off = {r["seed"]: r for r in by[False]}
    ratios = [rate(r) / rate(off[r["seed"]]) for r in by[True] if rate(off[r["seed"]]) > 0]
    gaps = [r["best"] - off[r["seed"]]["best"] for r in by[True]]
    pruned = sum(r["pruned"] for r in by[True])
    wrong = sum(r["wrong"] for r in by[True])
    wrong_share = [100 * r["wrong"] / r["pruned"] for r in by[True] if r["pruned"]]
    print(f"\nkept per evaluation-hour, pruning/off per seed: {fmt_q(ratios)}; "
          f"ratio of medians {statistics.median([rate(r) for r in by[True]]) / statistics.median([rate(r) for r in by[False]]):.2f}")
    missed = [g for r in by[True] for g in r.get("wrong_gains", [])]
    print(f"wrongly pruned: {wrong} of {pruned} pruned attempts ({100 * wrong / max(pruned, 1):.1f}%); "
          f"per seed {fmt_q(wrong_share, 1)}%"
          + (f"; the gain they would have kept: {fmt_q(missed, 4)}" if missed else ""))
    cross = [r["crossings"] for r in by[False] if r.get("crossings")]
    if cross:
        n, fast, slow, kept = (sum(c[i] for c in cross) for i in range(4))
        print(f"curves that cross (prune off, against the best's curve at step {max(args.steps // 4, 1)}): "
              f"{fast} of {n} attempts ({100 * fast / max(n, 1):.0f}%) were ahead there and ended worse; "
              f"{slow} of {kept} kept ({100 * slow / max(kept, 1):.0f}%) were behind there and ended better; "
              f"kept share {100 * kept / max(n, 1):.1f}%")
    print(f"final best, pruning minus off per seed (negative = better with pruning): {fmt_q(gaps, 4)}; "
          f"median seed: off {statistics.median(r['best'] for r in by[False]):.4f}, "
          f"{args.prune} {statistics.median(r['best'] for r in by[True]):.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/git-conference")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=45, help="time budget per conference, seconds")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-s", type=float, default=0.06)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prune", default="on", choices=["on", "early"],
                    help="the pruning arm's `prune:` setting")
    ap.add_argument("--researcher", default="local", choices=["local", "night"],
                    help="local: small steps around the best (the fixture until 27 Nov 2026); "
                         "night: bolder changes, most of them worse, as an agent's night")
    ap.add_argument("--shape", default="smooth", choices=["smooth", "plateau"],
                    help="smooth: each curve falls to its floor (the default); "
                         "plateau: to a plateau first, left sooner with the learning rate")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        sys.exit(f"no binary at {binary}: cargo build --release, or pass --binary")
    binary_dir = tempfile.mkdtemp(prefix="prunebench-bin-")
    os.symlink(binary, os.path.join(binary_dir, "git-conference"))
    jobs = [(s, p) for s in range(args.seeds) for p in (False, args.prune)]
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, binary_dir, s, args.budget, p, args.warmup, args.steps,
                               args.step_s, args.researcher, args.shape) for s, p in jobs]
        for f in concurrent.futures.as_completed(futures):
            r = f.result()
            results.append(r)
            print(f"seed {r['seed']:>2} prune {r['prune'] or 'off':<5}: "
                  f"{r['attempts']} attempts, {r['kept']} kept, {r['pruned']} pruned "
                  f"({r['wrong']} wrongly), best {r['best']:.4f}, evaluations {r['eval_s']:.1f}s, "
                  f"wall {r['wall_s']:.0f}s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    report(results, args)


if __name__ == "__main__":
    main()
