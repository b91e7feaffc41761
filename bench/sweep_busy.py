#!/usr/bin/env python3
"""Sweeps keep accelerators busy (issue 41): evaluations per wall-hour and the devices' busy
fraction of real conferences through the `git-conference` binary on fixtures/sweep, with a
stand-in agent that thinks T_a seconds (sleeps, then edits WIDTH, unique per researcher and
iteration, and with --sweep N ends its note with a SWEEP line of N learning rates) and stand-in
evaluations that sleep T_e seconds, on `devices: 0..D-1`.

The issue's figures are T_a = 12 s, T_e = 10 s; the defaults here scale them by 1/10 (1.2 s,
1.0 s) so that a run takes a minute, not ten. Measured from a log each evaluation writes (start,
end, who, device): the research phase is the window from the end of the baseline's evaluation to
the end of the last researcher evaluation (peer review and transfer come after and are left
out); evaluations per hour = researcher evaluations / window; busy = their summed seconds /
(devices x window). The bound a lone researcher without sweeps allows is T_e / (T_a + T_e) for
the one device it can use, T_e / (D (T_a + T_e)) of all D devices.

    python3 bench/sweep_busy.py --binary target/release/git-conference
                                [--ta 1.2] [--te 1.0] [--devices 4] [--iterations 8]

With --tuner the researcher is builtin:tune (it thinks no time) on the same fixture and
evaluations, one point per iteration against batches of 4 (`- sweep: 4` under `## Agent`).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

AGENT = r"""#!/bin/sh
sleep "$BENCH_TA"
r=$CONFERENCE_RESEARCHER
w=$(( CONFERENCE_ROUND * 1000 + CONFERENCE_ITERATION * 10 + $(printf '%d' "'$r") % 10 ))
sed "s/^WIDTH = .*/WIDTH = $w/" train.py > train.py.new && mv train.py.new train.py
echo "width $w" > "$CONFERENCE_NOTE_FILE"
if [ "$BENCH_SWEEP" -gt 0 ]; then
  values=$(echo "0.01 0.001 0.0001 0.003 0.03 0.0003 0.002 0.02" | tr ' ' '\n' | head -n "$BENCH_SWEEP" | paste -sd, - | sed 's/,/, /g')
  echo "SWEEP: train.py:LEARNING_RATE = $values" >> "$CONFERENCE_NOTE_FILE"
fi
"""

EVAL = r"""#!/bin/sh
t0=$(date +%s.%N)
./eval.sh
rc=$?
t1=$(date +%s.%N)
echo "$t0 $t1 $CONFERENCE_RESEARCHER ${CONFERENCE_DEVICE:--}" >> "$BENCH_LOG"
exit $rc
"""


def config(researchers, iterations, devices, sweep, tmp, tuner=False):
    sweep_line = "- **Parameter sweep:** on\n" if sweep and not tuner else ""
    agent = f"- command: sh {tmp}/agent.sh\n"
    if tuner:
        agent = "- command: builtin:tune\n- seed: 1\n" + (f"- sweep: {sweep}\n" if sweep else "")
    device_list = ",".join(str(d) for d in range(devices))
    return f"""# Conference: Sweep busy bench
## Goal
Lower the loss.
## Mode
metric
## Success Metric
- **Metric:** loss
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** {researchers}
- **Iterations per round:** {iterations}
- **Max rounds:** 1
{sweep_line}## Pre-Flight Gate
- **Critic / Devil's Advocate:** disabled
- **Final confirmation:** confirmed
## Search Space
**Allowed changes:**
- train.py
## Noise Handling
- **Noise runs:** 1
## Evaluation
- command: sh {tmp}/eval.sh
- timeout: 60s
- frozen: eval.sh, agent.sh
## Environment
- devices: {device_list}
## Agent
{agent}- timeout: 60s
"""


def run(args, researchers, sweep):
    tmp = tempfile.mkdtemp(prefix="sweepbench-")
    try:
        repo = os.path.join(tmp, "repo")
        shutil.copytree(os.path.join(ROOT, "fixtures", "sweep"), repo)
        for name, text in (("agent.sh", AGENT), ("eval.sh", EVAL)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        with open(os.path.join(repo, "conference.md"), "w") as f:
            f.write(config(researchers, args.iterations, args.devices, sweep, tmp, args.tuner))
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
        subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
        subprocess.run(git + ["commit", "-q", "-m", "fixture"], cwd=repo, check=True)
        log = os.path.join(tmp, "evals.log")
        env = dict(os.environ, BENCH_TA=str(args.ta), BENCH_SWEEP=str(sweep),
                   SWEEP_EVAL_SLEEP=str(args.te), BENCH_LOG=log,
                   PATH=os.path.dirname(os.path.abspath(args.binary)) + ":" + os.environ["PATH"])
        started = subprocess.run(["git", "conference", "start", "--yes"], cwd=repo, env=env,
                                 capture_output=True, text=True)
        if started.returncode not in (0, 3):
            raise RuntimeError(f"start failed ({started.returncode}): {started.stderr[-1500:]}")
        rows = []
        with open(log) as f:
            for line in f:
                t0, t1, who, device = line.split()
                rows.append((float(t0), float(t1), who, device))
        baseline = [r for r in rows if r[2] == "baseline"] or rows[:1]
        research = [r for r in rows if len(r[2]) == 1]  # researchers A, B, …
        start = max(r[1] for r in baseline)
        end = max(r[1] for r in research)
        window = end - start
        busy = sum(r[1] - r[0] for r in research)
        return len(research), window, busy
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "git-conference"))
    p.add_argument("--ta", type=float, default=1.2)
    p.add_argument("--te", type=float, default=1.0)
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--tuner", action="store_true",
                   help="builtin:tune, one point per iteration against batches of 4")
    args = p.parse_args()
    bound = args.te / (args.ta + args.te)
    if args.tuner:
        print(f"builtin:tune (thinks no time), T_e {args.te}s, {args.devices} devices, "
              f"{args.iterations} iterations")
    else:
        print(f"T_a {args.ta}s, T_e {args.te}s, {args.devices} devices, {args.iterations} "
              f"iterations per researcher; lone-researcher bound T_e/(T_a+T_e) = {bound:.0%}")
    print(f"{'setup':<28} {'evals':>5} {'window s':>9} {'evals/hour':>10} "
          f"{'busy (all devices)':>18} {'busy per device used':>20}")
    results = {}
    setups = (("1 researcher, no sweep", 1, 0),
              ("1 researcher, sweeps of 4", 1, 4),
              ("4 researchers, no sweep", 4, 0),
              ("4 researchers, sweeps of 4", 4, 4))
    if args.tuner:
        setups = (("1 tuner, one point", 1, 0), ("1 tuner, batches of 4", 1, 4))
    for name, researchers, sweep in setups:
        n, window, busy = run(args, researchers, sweep)
        per_hour = n / window * 3600
        used = min(args.devices, researchers * max(sweep, 1))
        results[name] = per_hour
        print(f"{name:<28} {n:>5} {window:>9.1f} {per_hour:>10.0f} "
              f"{busy / (args.devices * window):>18.0%} {busy / (used * window):>20.0%}")
        sys.stdout.flush()
    if args.tuner:
        ratio = results["1 tuner, batches of 4"] / results["1 tuner, one point"]
        print(f"batches of 4 against one point, builtin:tune: {ratio:.2f}x evaluations per wall-hour")
        return
    ratio = results["1 researcher, sweeps of 4"] / results["1 researcher, no sweep"]
    print(f"sweeps of 4 against none, one researcher: {ratio:.2f}x evaluations per wall-hour")


if __name__ == "__main__":
    main()
