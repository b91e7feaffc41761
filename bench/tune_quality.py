#!/usr/bin/env python3
"""Compare builtin:tune with random search and Optuna TPE on the tuning fixtures.

Why: the issue requires builtin:tune to beat random search and be no worse than TPE at the same
evaluation budget. Every method evaluates the real fixture (`eval.sh` run in a copy of the fixture
directory); builtin:tune runs as a real conference through the `git-conference` binary.

    python3 bench/tune_quality.py [--budget 60] [--seeds 20] [--binary PATH] [--fixtures tune-2d,tune-6d]

Optuna is installed into bench/.venv when it is not importable.
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(HERE, ".venv")

FIXTURES = {
    # name: (metric, known optimum, conference target that is never reached)
    "tune-2d": ("f", -1.51868, -10),
    "tune-6d": ("loss", 0.0, -10),
}


def ensure_optuna():
    try:
        import optuna  # noqa: F401

        return
    except ImportError:
        pass
    vpy = os.path.join(VENV, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(vpy):
        sys.exit("optuna is missing from bench/.venv and could not be installed")
    if not os.path.exists(vpy):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([vpy, "-m", "pip", "install", "-q", "optuna"])
    os.execv(vpy, [vpy] + sys.argv)


LINE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*)=(?P<value>\S+)\s*#\s*tune:?\s*(?P<int>int)?\s*"
    r"(?:\[\s*(?P<lo>[^,\]]+),\s*(?P<hi>[^\]]+)\])?"
)


def read_space(fixture_dir):
    """The marked parameters of params.sh: name -> (start, lo, hi, integer, log)."""
    space = {}
    with open(os.path.join(fixture_dir, "params.sh")) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            lo, hi = float(m["lo"]), float(m["hi"])
            integer = bool(m["int"])
            log = lo > 0 and hi / lo >= 20  # the same rule builtin:tune uses
            space[m["name"]] = (float(m["value"]), lo, hi, integer, log)
    return space


class Evaluator:
    """Runs the fixture's eval.sh for parameter values, in a private copy of the fixture."""

    def __init__(self, fixture_dir, metric):
        self.dir = tempfile.mkdtemp(prefix="tunebench-")
        shutil.copytree(fixture_dir, self.dir, dirs_exist_ok=True)
        with open(os.path.join(self.dir, "params.sh")) as f:
            self.template = f.read()
        self.metric = metric

    def __call__(self, values):
        text = self.template
        for name, v in values.items():
            text = re.sub(rf"(?m)^{name}=\S+", f"{name}={fmt(v)}", text)
        with open(os.path.join(self.dir, "params.sh"), "w") as f:
            f.write(text)
        out = subprocess.run(["./eval.sh"], cwd=self.dir, capture_output=True, text=True)
        m = re.search(rf"^{self.metric}:\s*(\S+)", out.stdout, re.M)
        if out.returncode != 0 or not m:
            return math.inf
        return float(m.group(1))

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def fmt(v):
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def sample(space, rng):
    vals = {}
    for name, (_, lo, hi, integer, log) in space.items():
        v = math.exp(rng.uniform(math.log(lo), math.log(hi))) if log else rng.uniform(lo, hi)
        vals[name] = round(v) if integer else v
    return vals


def run_random(space, evaluate, budget, seed):
    rng = random.Random(seed)
    best = evaluate({k: s[0] for k, s in space.items()})  # the same start every method gets
    for _ in range(budget - 1):
        best = min(best, evaluate(sample(space, rng)))
    return best


def run_tpe(space, evaluate, budget, seed):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial({k: s[0] for k, s in space.items()})

    def objective(trial):
        vals = {}
        for name, (_, lo, hi, integer, log) in space.items():
            if integer:
                vals[name] = trial.suggest_int(name, int(lo), int(hi), log=log)
            else:
                vals[name] = trial.suggest_float(name, lo, hi, log=log)
        return evaluate(vals)

    study.optimize(objective, n_trials=budget)
    return study.best_value


def conference_md(metric, target, budget, seed, count=3):
    """The conference.md builtin:tune runs with (one place, so the shape is easy to adjust)."""
    per_round = count * 5
    rounds = max(1, math.ceil(budget / per_round))
    return f"""# Conference: Tune bench
## Goal
Minimise {metric}.
## Mode
metric
## Success Metric
- **Metric:** {metric}
- **Target:** {target}
- **Direction:** minimize
## Researchers
- **Count:** {count}
- **Iterations per round:** 5
- **Max rounds:** {rounds}
## Search Space Partitioning
**Strategy:** free
## Constraints
- **Max total iterations:** {budget}
## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh
## Agent
- command: builtin:tune
- seed: {seed}
"""


def run_builtin(fixture_dir, metric, target, budget, seed, env, count):
    repo = tempfile.mkdtemp(prefix="tunebench-repo-")
    try:
        shutil.copytree(fixture_dir, repo, dirs_exist_ok=True)
        with open(os.path.join(repo, "conference.md"), "w") as f:
            f.write(conference_md(metric, target, budget, seed, count))
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
        subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
        subprocess.run(git + ["commit", "-q", "-m", "fixture"], cwd=repo, check=True)
        start = subprocess.run(
            ["git", "conference", "start", "--yes"], cwd=repo, env=env, capture_output=True, text=True
        )
        if start.returncode not in (0, 3):
            raise RuntimeError(f"git conference start failed ({start.returncode}): {start.stderr[-500:]}")
        status = subprocess.run(
            ["git", "conference", "status", "--format", "json"],
            cwd=repo, env=env, capture_output=True, text=True, check=True,
        )
        return float(json.loads(status.stdout)["best"]["metric"])
    finally:
        shutil.rmtree(repo, ignore_errors=True)


def builtin_env(binary):
    """An environment where `git conference` finds the binary, or None if it is not available."""
    env = dict(os.environ)
    if binary:
        binary = os.path.abspath(binary)
        if not os.access(binary, os.X_OK):
            return None
        d = os.path.join(tempfile.mkdtemp(prefix="tunebench-bin-"), "")
        os.symlink(binary, os.path.join(d, "git-conference"))
        env["PATH"] = d + os.pathsep + env.get("PATH", "")
        return env
    return env if shutil.which("git-conference") else None


def summary(gaps):
    gaps = sorted(gaps)
    q = statistics.quantiles(gaps, n=4) if len(gaps) > 1 else [gaps[0]] * 3
    return statistics.median(gaps), q[2] - q[0], gaps[0], gaps[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--binary", help="path to git-conference (default: found on PATH)")
    ap.add_argument("--fixtures", default=",".join(FIXTURES))
    ap.add_argument("--methods", default="random,tpe,builtin1,builtin3",
                    help="random, tpe, builtin1 (1-researcher conference), builtin3 (3 researchers)")
    args = ap.parse_args()
    methods = args.methods.split(",")
    builtins = [m for m in methods if m.startswith("builtin")]
    if "tpe" in methods:
        ensure_optuna()
    env = builtin_env(args.binary) if builtins else None
    if builtins and env is None:
        print("builtin:tune skipped: git-conference not found (use --binary PATH)", file=sys.stderr)
        methods = [m for m in methods if m not in builtins]

    rows = []
    for name in args.fixtures.split(","):
        metric, optimum, target = FIXTURES[name]
        fdir = os.path.join(ROOT, "fixtures", name)
        space = read_space(fdir)
        for method in methods:
            gaps = []
            for seed in range(args.seeds):
                if method.startswith("builtin"):
                    count = int(method[len("builtin"):] or 3)
                    try:
                        best = run_builtin(fdir, metric, target, args.budget, seed, env, count)
                    except (RuntimeError, subprocess.CalledProcessError, KeyError, ValueError) as e:
                        print(f"{name} builtin seed {seed}: {e}", file=sys.stderr)
                        best = math.inf
                else:
                    ev = Evaluator(fdir, metric)
                    try:
                        run = run_random if method == "random" else run_tpe
                        best = run(space, ev, args.budget, seed)
                    finally:
                        ev.close()
                gaps.append(best - optimum)
                print(f"{name} {method} seed {seed}: best {best:.6f}", file=sys.stderr)
            rows.append((name, method) + summary(gaps))

    print(f"budget {args.budget} evaluations, {args.seeds} seeds; gap = best metric - known optimum")
    print(f"{'fixture':<10} {'method':<9} {'median gap':>12} {'IQR':>10} {'best':>10} {'worst':>10}")
    for name, method, med, iqr, best, worst in rows:
        print(f"{name:<10} {method:<9} {med:>12.4f} {iqr:>10.4f} {best:>10.4f} {worst:>10.4f}")
    if builtins and not any(m.startswith("builtin") for m in methods):
        print("builtin:tune: skipped (binary not available)")


if __name__ == "__main__":
    main()
