#!/usr/bin/env python3
"""Compare builtin:tune with random search and Optuna TPE on the tuning fixtures.

Why: the issue requires builtin:tune to beat random search and be no worse than TPE at the same
evaluation budget. Every method evaluates the real fixture, and every run of its `eval.sh` counts:
the fixture's evaluation is wrapped so that each run is logged, and the table's `evals` column is
that count. builtin:tune runs as a real conference through the `git-conference` binary, so its
evaluations include the baseline, the peer review's re-runs and the knowledge transfer's checks; its
attempt budget (`Max total iterations`) is lowered until the conference's total stays within the
budget. Each seed draws one start point within the bounds, the same for every method, and is also
the seed of builtin:tune's search, of random search and of TPE.

    python3 bench/tune_quality.py [--budget 60] [--seeds 20] [--binary PATH]
                                  [--fixtures tune-2d,tune-6d,multimodal,rugged-5d,rugged-8d]
                                  [--methods random,tpe,builtin1,builtin3,builtin1-bf,builtin3-bf]
                                  [--cache FILE] [--jobs N]

Optuna is installed into bench/.venv (from PyPI, with pip) when it is not importable.
"""

import argparse
import atexit
import concurrent.futures
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(HERE, ".venv")

FIXTURES = {
    # name: (metric, known optimum, conference target that is never reached)
    "tune-2d": ("f", -1.5186858, -10),
    "tune-6d": ("loss", 0.0, -10),
    "multimodal": ("f", 0.0, -10),
    # Rugged fixtures (issue 41): train.py scripts, shifted and rotated published test functions.
    "rugged-5d": ("loss", 0.0, -10),
    "rugged-8d": ("loss", 0.0, -10),
}

# Conference shapes: researchers and rounds. Two rounds: knowledge transfer between them, and the
# peer review's re-runs (which count as evaluations) twice, not once per handful of attempts.
# builtin1-bf: builtin1 with `Branching: best-first` (the tree of ideas, issue 41).
# builtin3-bf: builtin3 with best-first.
SHAPES = {"builtin1": (1, 2), "builtin3": (3, 2), "builtin1-bf": (1, 2), "builtin3-bf": (3, 2),
          "builtin1-b4": (1, 2)}
BRANCHING = {"builtin1-bf": "best-first", "builtin3-bf": "best-first"}
# Points per iteration (`- sweep: q` under `## Agent`): builtin1-b4 proposes batches of 4, each
# iteration 4 evaluations, so it has a quarter of the iterations at equal evaluations.
BATCH = {"builtin1-b4": 4}


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
    r"^(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>\S+)\s*#\s*tune:?\s*(?P<int>int)?\s*"
    r"(?:\[\s*(?P<lo>[^,\]]+),\s*(?P<hi>[^\]]+)\])?"
)


def params_file(fixture_dir):
    """The file whose marked literals are tuned: params.sh (shell fixtures) or train.py."""
    return "params.sh" if os.path.exists(os.path.join(fixture_dir, "params.sh")) else "train.py"


def read_space(fixture_dir):
    """The marked parameters of the params file: name -> (lo, hi, integer, log)."""
    space = {}
    with open(os.path.join(fixture_dir, params_file(fixture_dir))) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            lo, hi = float(m["lo"]), float(m["hi"])
            integer = bool(m["int"])
            log = lo > 0 and hi / lo >= 20  # the same rule builtin:tune uses
            space[m["name"]] = (lo, hi, integer, log)
    return space


def fmt(v, integer=False):
    if integer:
        return str(int(round(v)))
    return f"{v:.6g}" if abs(v) < 1e-3 and v != 0 else f"{v:.4f}"


def sample(space, rng):
    vals = {}
    for name, (lo, hi, integer, log) in space.items():
        v = math.exp(rng.uniform(math.log(lo), math.log(hi))) if log else rng.uniform(lo, hi)
        vals[name] = round(v) if integer else v
    return vals


def start_point(space, seed):
    """The seed's start, within the bounds, written as a person would (a few digits)."""
    vals = sample(space, random.Random(f"start-{seed}"))
    return {k: float(fmt(v, space[k][2])) for k, v in vals.items()}


def write_params(path, space, values):
    with open(path) as f:
        text = f.read()
    for name, v in values.items():
        written = fmt(v, space[name][2])
        text = re.sub(rf"(?m)^({name}\s*=\s*)\S+", lambda m: m.group(1) + written, text)
    with open(path, "w") as f:
        f.write(text)


def counted_fixture(fixture_dir, dest, log_path):
    """A copy of the fixture whose eval.sh logs every run (and its output) to `log_path`."""
    shutil.copytree(fixture_dir, dest, dirs_exist_ok=True)
    os.rename(os.path.join(dest, "eval.sh"), os.path.join(dest, "measure.sh"))
    with open(os.path.join(dest, "eval.sh"), "w") as f:
        f.write(
            "#!/bin/sh\n"
            "# Benchmark wrapper: runs the fixture's evaluation and logs the run.\n"
            'out=$(./measure.sh); code=$?\n'
            f'printf "%s\\n" "$out" >> "{log_path}"\n'
            'printf "%s\\n" "$out"; exit $code\n'
        )
    os.chmod(os.path.join(dest, "eval.sh"), 0o755)


def count_runs(log_path):
    if not os.path.exists(log_path):
        return 0
    with open(log_path) as f:
        return sum(1 for line in f if line.strip())


class Evaluator:
    """Runs the (counted) eval.sh for parameter values, in a private copy of the fixture."""

    def __init__(self, fixture_dir, metric, space):
        self.tmp = tempfile.mkdtemp(prefix="tunebench-")
        self.dir = os.path.join(self.tmp, "fx")
        self.log = os.path.join(self.tmp, "runs.log")
        counted_fixture(fixture_dir, self.dir, self.log)
        self.metric = metric
        self.space = space

    def __call__(self, values):
        write_params(os.path.join(self.dir, params_file(self.dir)), self.space, values)
        out = subprocess.run(["./eval.sh"], cwd=self.dir, capture_output=True, text=True)
        m = re.search(rf"^{self.metric}:\s*(\S+)", out.stdout, re.M)
        if out.returncode != 0 or not m:
            return math.inf
        return float(m.group(1))

    def runs(self):
        return count_runs(self.log)

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_random(space, evaluate, budget, seed, start):
    rng = random.Random(seed)
    best = evaluate(start)
    for _ in range(budget - 1):
        best = min(best, evaluate(sample(space, rng)))
    return best


def run_tpe(space, evaluate, budget, seed, start):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial(start)

    def objective(trial):
        vals = {}
        for name, (lo, hi, integer, log) in space.items():
            if integer:
                vals[name] = trial.suggest_int(name, int(lo), int(hi), log=log)
            else:
                vals[name] = trial.suggest_float(name, lo, hi, log=log)
        return evaluate(vals)

    study.optimize(objective, n_trials=budget)
    return study.best_value


def conference_md(metric, target, attempts, seed, count, rounds, branching="off",
                  params="params.sh", batch=1):
    """The conference.md builtin:tune runs with (one place, so the shape is easy to adjust)."""
    per_round = math.ceil(attempts / (count * rounds))
    tree = "" if branching == "off" else f"- **Branching:** {branching}\n"
    sweep = "" if batch == 1 else f"- sweep: {batch}\n"
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
- **Iterations per round:** {per_round}
- **Max rounds:** {rounds}
{tree}## Search Space
**Allowed changes:**
- {params}
## Search Space Partitioning
**Strategy:** free
## Constraints
- **Max total iterations:** {attempts}
## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh, measure.sh
## Agent
- command: builtin:tune
- seed: {seed}
{sweep}"""


def run_conference(fixture_dir, space, start, metric, target, attempts, seed, env, count, rounds,
                   branching="off", batch=1):
    """One conference; returns (best metric, eval.sh runs)."""
    tmp = tempfile.mkdtemp(prefix="tunebench-repo-")
    try:
        repo = os.path.join(tmp, "repo")
        log = os.path.join(tmp, "runs.log")
        counted_fixture(fixture_dir, repo, log)
        params = params_file(repo)
        write_params(os.path.join(repo, params), space, start)
        with open(os.path.join(repo, "conference.md"), "w") as f:
            f.write(conference_md(metric, target, attempts, seed, count, rounds, branching, params,
                                  batch))
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
        subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
        subprocess.run(git + ["commit", "-q", "-m", "fixture"], cwd=repo, check=True)
        started = subprocess.run(
            ["git", "conference", "start", "--yes"], cwd=repo, env=env, capture_output=True, text=True
        )
        if started.returncode not in (0, 3):
            raise RuntimeError(
                f"git conference start failed ({started.returncode}): {started.stderr[-500:]}"
            )
        status = subprocess.run(
            ["git", "conference", "status", "--format", "json"],
            cwd=repo, env=env, capture_output=True, text=True, check=True,
        )
        return float(json.loads(status.stdout)["best"]["metric"]), count_runs(log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_builtin(fixture_dir, space, start, metric, target, budget, seed, env, count, rounds,
                branching="off", batch=1):
    """A conference whose total evaluations stay within `budget`: the attempt budget starts at the
    budget minus the expected overhead (baseline, review re-runs) and is lowered by any excess.
    With batches of q, an attempt is q evaluations."""
    attempts = (budget - 1 - rounds * (count + 1)) // batch
    for _ in range(6):
        best, runs = run_conference(
            fixture_dir, space, start, metric, target, attempts, seed, env, count, rounds, branching,
            batch,
        )
        if runs <= budget:
            return best, runs
        attempts -= math.ceil((runs - budget) / batch)
    return best, runs


def builtin_env(binary):
    """An environment where `git conference` finds the binary, or None if it is not available."""
    env = dict(os.environ)
    if binary:
        binary = os.path.abspath(binary)
        if not os.access(binary, os.X_OK):
            return None
        d = os.path.join(tempfile.mkdtemp(prefix="tunebench-bin-"), "")
        atexit.register(shutil.rmtree, d, True)
        os.symlink(binary, os.path.join(d, "git-conference"))
        env["PATH"] = d + os.pathsep + env.get("PATH", "")
        return env
    return env if shutil.which("git-conference") else None


def summary(gaps):
    """Median, quartiles, best, worst, and the mean of the worst tenth of the seeds (a tail that
    one seed does not decide: the worst of 40 moves by a factor of two between runs)."""
    gaps = sorted(gaps)
    q = statistics.quantiles(gaps, n=4) if len(gaps) > 1 else [gaps[0]] * 3
    tenth = max(1, len(gaps) // 10)
    return statistics.median(gaps), q[0], q[2], gaps[0], gaps[-1], statistics.mean(gaps[-tenth:])


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--binary", help="path to git-conference (default: found on PATH)")
    ap.add_argument("--fixtures", default="tune-2d,tune-6d")
    ap.add_argument("--methods", default="random,tpe,builtin1,builtin3",
                    help="random, tpe, builtin1 (1-researcher conference), builtin3 (3 researchers), "
                    "builtin1-bf (builtin1 with Branching: best-first), builtin1-b4 (builtin1 proposing "
                    "batches of 4: - sweep: 4)")
    ap.add_argument("--cache", help="a JSON lines file of finished runs (every seed is "
                    "deterministic): kept, and reused by a rerun")
    ap.add_argument("--jobs", type=int, default=1, help="seeds measured at once (default 1)")
    args = ap.parse_args()
    lock = threading.Lock()
    cache = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    cache[r["key"]] = (r["best"], r["runs"])
    methods = args.methods.split(",")
    builtins = [m for m in methods if m in SHAPES]
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
            def one(seed):
                """One seed's (best, runs): from the cache, or measured (and cached)."""
                start = start_point(space, seed)
                key = f"{name}|{method}|{seed}|{args.budget}"
                if key in cache:
                    return cache[key]
                if method in SHAPES:
                    count, rounds = SHAPES[method]
                    try:
                        best, runs = run_builtin(
                            fdir, space, start, metric, target, args.budget, seed, env, count, rounds,
                            BRANCHING.get(method, "off"), BATCH.get(method, 1),
                        )
                    except (RuntimeError, subprocess.CalledProcessError, KeyError, ValueError) as e:
                        print(f"{name} {method} seed {seed}: {e}", file=sys.stderr)
                        best, runs = math.inf, 0
                else:
                    ev = Evaluator(fdir, metric, space)
                    try:
                        run = run_random if method == "random" else run_tpe
                        best = run(space, ev, args.budget, seed, start)
                        runs = ev.runs()
                    finally:
                        ev.close()
                with lock:
                    if args.cache and math.isfinite(best):
                        cache[key] = (best, runs)
                        with open(args.cache, "a") as f:
                            f.write(json.dumps({"key": key, "best": best, "runs": runs}) + "\n")
                    print(f"{name} {method} seed {seed}: best {best:.6f} evals {runs}",
                          file=sys.stderr)
                return best, runs

            # Seeds are independent (each in its own temp folders): --jobs runs several at once;
            # the figures do not depend on it.
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = list(pool.map(one, range(args.seeds)))
            gaps = [best - optimum for best, _ in results]
            evals = [runs for _, runs in results]
            rows.append((name, method, min(evals), max(evals)) + summary(gaps))

    print(f"budget {args.budget} evaluations (eval.sh runs), {args.seeds} seeds, a random start per seed")
    print(f"machine: {machine()}")
    print("gap = best metric - known optimum; q25/q75: quartiles of the gap; "
          "worst 10%: mean gap of the worst tenth of the seeds")
    print(f"{'fixture':<10} {'method':<9} {'evals':>7} {'median gap':>11} {'q25':>9} {'q75':>9} "
          f"{'best':>9} {'worst':>9} {'worst 10%':>10}")
    for name, method, emin, emax, med, q1, q3, best, worst, tail in rows:
        ev = f"{emin}" if emin == emax else f"{emin}-{emax}"
        print(f"{name:<10} {method:<9} {ev:>7} {med:>11.4f} {q1:>9.4f} {q3:>9.4f} {best:>9.4f} "
              f"{worst:>9.4f} {tail:>10.4f}")
    if builtins and not any(m in SHAPES for m in methods):
        print("builtin:tune: skipped (binary not available)")


if __name__ == "__main__":
    main()
