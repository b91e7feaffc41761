"""What one runner carries: a conference of N `builtin:tune` researchers on one machine (issue
#45, D-count_100: the researcher count's maximum is this measurement, not a guess).

    python3 bench/many_researchers.py                    # 16, 64, 100 and 256 researchers
    python3 bench/many_researchers.py --counts 100,256 --iterations 2 --binary target/release/git-conference

Each run, in a temporary folder: the tune-2d fixture (fixtures/tune-2d: an instant awk
evaluation) in a fresh repository, `Count: N`, `builtin:tune`, --iterations iterations per round,
one round, `git conference start --yes`. While it runs, the runner's process (not its children)
is sampled every 20 ms from /proc: its threads, its open files, its resident memory (the peak is
the kernel's VmHWM). The figures: the run's wall time; the research phase's time per attempt
(from the first `researcher.iteration` event's commit time to the last, divided by the attempts
after the first); the peaks. Prints a Markdown table.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def conference_md(count, iterations):
    return f"""# Conference: Many researchers

## Goal
Minimise f on the 2-D fixture with many researchers at once.

## Mode
metric

## Success Metric
- **Metric:** f
- **Target:** none
- **Direction:** minimize

## Researchers
- **Count:** {count}
- **Iterations per round:** {iterations}
- **Max rounds:** 1

## Search Space Partitioning
**Strategy:** free

## Noise Handling
- **Noise runs:** 1

## Evaluation
- command: ./eval.sh
- timeout: 120s
- frozen: eval.sh

## Agent
- command: builtin:tune
"""


class Sampler(threading.Thread):
    """Polls one process's threads, open files and memory until it ends."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.threads, self.fds, self.hwm_kib = pid, 0, 0, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                with open("/proc/%d/status" % self.pid) as f:
                    status = f.read()
                self.threads = max(self.threads, int(re.search(r"Threads:\s+(\d+)", status).group(1)))
                self.hwm_kib = max(self.hwm_kib, int(re.search(r"VmHWM:\s+(\d+)", status).group(1)))
                self.fds = max(self.fds, len(os.listdir("/proc/%d/fd" % self.pid)))
            except (OSError, AttributeError):
                pass
            time.sleep(0.02)


def iteration_times(E, work):
    """Commit times (seconds) of the conference's researcher.iteration events, oldest first."""
    out = E.git(work, "log", "--reverse", "--format=%ct %s", "refs/conference/many/events")
    return [int(l.split()[0]) for l in out.splitlines() if "researcher.iteration" in l]


def one_run(E, count, iterations):
    work = os.path.join(E.tmp, "many-%d" % count)
    os.makedirs(work)
    E.git(work, "init", "-q", "-b", "main")
    for name in ("eval.sh", "params.sh"):
        shutil.copy2(os.path.join(ROOT, "fixtures", "tune-2d", name), os.path.join(work, name))
    bench.write(os.path.join(work, "conference.md"), conference_md(count, iterations))
    E.git(work, "add", ".")
    E.git(work, "commit", "-q", "-m", "the fixture")
    env = dict(E.env)
    start = time.perf_counter()
    p = subprocess.Popen(["git-conference", "start", "many", "--yes"], cwd=work, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    sampler = Sampler(p.pid)
    sampler.start()
    out, err = p.communicate()
    wall = time.perf_counter() - start
    sampler.done.set()
    sampler.join()
    if p.returncode != 0:
        raise RuntimeError("conference of %d failed (%d):\n%s%s" % (count, p.returncode, out[-3000:], err[-3000:]))
    times = iteration_times(E, work)
    expected = count * iterations
    if len(times) != expected:
        raise RuntimeError("%d researchers: %d attempts recorded, expected %d" % (count, len(times), expected))
    per_attempt = (times[-1] - times[0]) / max(1, len(times) - 1)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(work + ".conference", ignore_errors=True)
    return {"count": count, "attempts": len(times), "wall_s": wall, "per_attempt_ms": per_attempt * 1000,
            "threads": sampler.threads, "fds": sampler.fds, "rss_mib": sampler.hwm_kib / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="16,64,100,256")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--binary")
    args = ap.parse_args()
    binary = args.binary
    if binary is None:
        bench.log("building the release binary")
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
        binary = os.path.join(ROOT, "target", "release", "git-conference")
    tmp = tempfile.mkdtemp(prefix="gc-many-")
    try:
        E = bench.Env(tmp, binary)
        print("| researchers | attempts | run wall | research per attempt | threads (peak) | open files (peak) | memory (peak RSS) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
        for count in [int(c) for c in args.counts.split(",")]:
            bench.log("%d researchers, %d iterations each" % (count, args.iterations))
            r = one_run(E, count, args.iterations)
            print("| %d | %d | %.1f s | %.0f ms | %d | %d | %.0f MiB |" % (
                r["count"], r["attempts"], r["wall_s"], r["per_attempt_ms"], r["threads"], r["fds"],
                r["rss_mib"]), flush=True)
        print("\n(nofile soft limit here: %s; %d cores)" % (
            subprocess.run(["sh", "-c", "ulimit -n"], stdout=subprocess.PIPE, text=True).stdout.strip(),
            os.cpu_count()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
