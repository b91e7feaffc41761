"""A never-stop run of git-conference (issue #27): does iteration 10,000 cost what iteration 100 did?

    python3 bench/never_stop.py [--iterations 10000] [--binary target/release/git-conference]
                                [--sizes 1000,10000,100000] [--ratio-iterations 60] [--keep]

One conference, one researcher, ONE round of N iterations, an instant agent (it stamps its start
and rewrites one line of `work.txt`) and an instant evaluation, on a repository of 1,000 files.
The agent's change has the same size at every iteration, so that `.git` grows by what the
conference stores; with `--appending-agent` it appends its line instead (bench/run.py's agent),
and every snapshot of the researcher's own `work.txt` grows with the run: quadratic storage that
is the project's, as it would be in any loop that commits each attempt. While it runs, the
runner's memory (VmRSS) and the size of `.git` are sampled ten times a second. Printed:

- bookkeeping per iteration near iteration 100 and near iteration N: the median interval between
  consecutive agent starts over 100 iterations around each (goal: within 1.2x);
- CPU time per iteration (the runner's, with the agents and evaluations it ran) over iterations
  50-250 and over the 200 before the last 50: on a shared machine, less swayed by other load
  than the intervals;
- memory of the running conference around iteration 1,000 (the median of its samples from
  iteration 744 to 1,256) and before the end (from N - 562 to N - 50, before the round's closing
  work), with the largest sample of each window (goal: medians within 1.1x). Each window spans
  two whole cycles of the researcher's repository handle, which is opened afresh every 256
  iterations (the recorder's every 32 events), so that neither median depends on where in a
  cycle it fell. Then the medians of its anonymous pages (heap, stacks) and of the files it maps
  (packs, the index): what grows is nearly always the first; and the medians over the narrower
  windows used before 2026-11-28 (900 to 1,100 and N - 250 to N - 50);
- `.git` growth per 1,000 iterations between iteration 1,000 and N, before any gc (goal: <= 15 MB);
- the run logs at the end: files and bytes (capped: see docs/storage.md, "Where things are");
- `resume --continue` of the finished conference: wall time from launch until its agent starts;
- the bookkeeping ratio of bench/run.py's overhead measurement (conference against the cheapest
  git command-line loop recording the same: add, commit, notes add, one event commit,
  update-ref), side by side in one run, at each of --sizes files (goal: <= 0.25).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (bench/run.py: the repositories, scripts and overhead loop)


def memory_kb(pid):
    """The runner's resident set in KiB: {"VmRSS", "RssAnon", "RssFile"} (its heap and stacks
    against the files it maps: libgit2 maps pack files and the index); {} once it has ended."""
    found = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "RssAnon", "RssFile"):
                    found[key] = int(line.split()[1])
    except OSError:
        return {}
    return found


def cpu_s(pid):
    """CPU seconds of process `pid` so far: its threads' and its finished children's, user and
    system (/proc/<pid>/stat: utime, stime, cutime, cstime)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cpu_per_iteration(samples, lo, hi):
    """Milliseconds of CPU per iteration between iterations `lo` and `hi`, from (iterations done,
    CPU seconds) samples: the first sample at or past each."""
    a = next((x for x in samples if x[0] >= lo and x[1] is not None), None)
    b = next((x for x in samples if x[0] >= hi and x[1] is not None), None)
    if not a or not b or b[0] <= a[0]:
        return float("nan")
    return (b[1] - a[1]) / (b[0] - a[0]) * 1000


def du(path):
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
    return total


def count_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def profile(pid, mark, seconds, out_dir):
    """Starts `perf record` on the runner (its threads and the processes it starts) for
    `seconds`, in the background; its data goes to `out_dir/perf-<mark>.data`."""
    out = os.path.join(out_dir, "perf-%d.data" % mark)
    bench.log("  profiling %ds at iteration %d: %s" % (seconds, mark, out))
    return subprocess.Popen(["perf", "record", "-q", "-F", "499", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", out,
                             "--", "sleep", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# The agent of bench/run.py, rewriting its line instead of appending it (see the docstring).
REPLACING_AGENT_SH = bench.AGENT_SH.replace('" >> work.txt', '" > work.txt')
assert REPLACING_AGENT_SH != bench.AGENT_SH, "bench/run.py's agent no longer appends to work.txt"


def window(samples, lo, hi):
    """(median, max) of the values sampled at iterations `lo` to `hi`; None when none was."""
    values = sorted(v for done, v in samples if lo <= done <= hi and v is not None)
    if not values:
        return None
    return values[len(values) // 2], values[-1]


# Seconds between two samples of the runner's memory and CPU time.
SAMPLE_S = 0.1
# Iterations each memory window spans: two cycles of the researcher's handle (256 iterations).
MEMORY_WINDOW = 512


def long_round(E, cache, n, profile_at=(), profile_seconds=10, profile_dir=None, appending=False):
    """Runs one round of `n` iterations; returns the samples and the repository."""
    agent = os.path.join(E.tmp, "agent.sh")
    bench.write(agent, bench.AGENT_SH if appending else REPLACING_AGENT_SH, 0o755)
    work = bench.clone(E, bench.repo_of_size(E, cache, 1000), os.path.join(E.tmp, "long"))
    bench.write(os.path.join(work, "conference.md"),
                bench.conference_md("Never stop", agent, iterations=n, max_total=n))
    E.git(work, "add", "conference.md")
    E.git(work, "commit", "-q", "-m", "conference.md")
    stamps = os.path.join(E.tmp, "long.stamps")
    env = dict(E.env, BENCH_STAMPS=stamps)
    # The binary itself (not through `git`), so that its pid is the runner's. Its progress goes
    # to a file: a pipe nobody reads fills up (64 KiB) and stops the run.
    err_path = os.path.join(E.tmp, "long.stderr")
    err = open(err_path, "wb")
    p = subprocess.Popen([E.binary, "start", "long", "--yes"], cwd=work, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    # Memory "at n" is read 50 iterations before the end, before the round's closing work
    # (review, reports, the chart) adds its own, passing, peak.
    first, last = min(1000, n), max(min(1000, n), n - 50)
    marks = {first: None, last: None}
    git_dir = os.path.join(work, ".git")
    done = 0
    profiles = {m: None for m in profile_at}
    cpu, memory = [], []
    while p.poll() is None:
        time.sleep(SAMPLE_S)
        done = count_lines(stamps)
        cpu.append((done, cpu_s(p.pid)))
        memory.append((done, memory_kb(p.pid)))
        for mark in profiles:
            if profiles[mark] is None and done >= mark:
                profiles[mark] = profile(p.pid, mark, profile_seconds, profile_dir or E.tmp)
        for mark in marks:
            if marks[mark] is None and done >= mark:
                marks[mark] = du(git_dir)
        bench.log("  %d iterations" % done) if done and done % 1000 < 10 else None
    err.close()
    for prof in profiles.values():
        if prof:
            prof.wait()
    if p.returncode != 0:
        with open(err_path, errors="replace") as f:
            raise RuntimeError("conference failed: " + f.read()[-4000:])
    if marks[last] is None:
        marks[last] = du(git_dir)
    starts = bench.read_stamps(stamps)
    iv = bench.intervals(starts)
    at = lambda i: bench.median(iv[max(0, i - 50):i + 50]) * 1000  # noqa: E731
    for i in range(500, len(iv), 500):
        bench.log("  per iteration around %d: %.1f ms" % (i, at(i)))
    logs = os.path.join(git_dir, "conference", "long", "logs")
    names = os.listdir(logs)
    return {
        "iterations": len(starts),
        "ms_at_100": at(100),
        "ms_at_n": bench.median(iv[-100:]) * 1000,
        # CPU of the runner (and the agents and evaluations it ran) per iteration, over 200
        # iterations from 50 and over the 200 before the last 50: less swayed by other load.
        "cpu_at_100": cpu_per_iteration(cpu, 50, 250),
        "cpu_at_n": cpu_per_iteration(cpu, n - 250, n - 50),
        **{"%s_%s_kb" % (key, at): window([(d, m.get(key)) for d, m in memory], lo, hi)
           for key in ("VmRSS", "RssAnon", "RssFile")
           for at, lo, hi in (("1k", first - MEMORY_WINDOW // 2, first + MEMORY_WINDOW // 2),
                              ("n", last - MEMORY_WINDOW, last),
                              ("1k_narrow", first - 100, first + 100), ("n_narrow", last - 200, last))},
        "git_1k": marks[first], "git_n": marks[last],
        "log_files": len(names), "log_bytes": sum(os.path.getsize(os.path.join(logs, x)) for x in names),
        "work": work, "agent": agent,
    }


def resume_continue(E, work, agent):
    """Wall time of `resume --continue` until its agent starts (the run is then interrupted)."""
    # The run ended on its budgets (one round, n iterations): raise them, as a user continuing
    # a never-stop conference would, so that the resumed run starts an attempt.
    n = count_lines(os.path.join(E.tmp, "long.stamps"))
    bench.write(os.path.join(work, "conference.md"),
                bench.conference_md("Never stop", agent, iterations=n, rounds=2, max_total=2 * n))
    E.git(work, "commit", "-q", "-am", "conference.md: one more round")
    stamps = os.path.join(E.tmp, "resume.stamps")
    env = dict(E.env, BENCH_STAMPS=stamps)
    t0 = time.perf_counter()
    p = subprocess.Popen([E.binary, "resume", "long", "--continue"], cwd=work, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while not os.path.exists(stamps) and p.poll() is None:
        time.sleep(0.002)
    took = time.perf_counter() - t0
    p.send_signal(2)
    p.wait(60)
    if not os.path.exists(stamps):
        raise RuntimeError("resume --continue started no agent: " + p.stderr.read().decode())
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=10000)
    ap.add_argument("--binary", help="the git-conference binary (default: cargo build --release)")
    ap.add_argument("--sizes", default="1000,10000,100000", help="repository sizes for the ratio ('' skips it)")
    ap.add_argument("--ratio-iterations", type=int, default=60)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--appending-agent", action="store_true",
                    help="the agent appends its line to work.txt (the researcher's file grows with the run)")
    ap.add_argument("--profile-at", default="", help="iterations at which to `perf record` the runner "
                    "(e.g. 100,3000; data kept in --profile-dir)")
    ap.add_argument("--profile-seconds", type=int, default=10)
    ap.add_argument("--profile-dir", default=None)
    args = ap.parse_args()
    binary, _, _ = bench.build(args.binary, helpers=False)
    tmp = tempfile.mkdtemp(prefix="git-conference-never-stop-")
    try:
        E = bench.Env(tmp, binary)
        cache = {}
        bench.log("one round of %d iterations" % args.iterations)
        marks = [int(m) for m in args.profile_at.split(",") if m]
        r = long_round(E, cache, args.iterations, marks, args.profile_seconds, args.profile_dir,
                       args.appending_agent)
        cont = resume_continue(E, r["work"], r["agent"])
        sizes = [int(s) for s in args.sizes.split(",") if s]
        ovh = bench.bench_overhead(E, cache, sizes, args.ratio_iterations) if sizes else []
        n, mb = args.iterations, 1024 * 1024
        growth = (r["git_n"] - r["git_1k"]) / max(1, n - 50 - 1000) * 1000 / mb
        rows = [
            ("bookkeeping+agent+eval per iteration at 100 / at %d (ms)" % n,
             "%.1f / %.1f (%.2fx)" % (r["ms_at_100"], r["ms_at_n"], r["ms_at_n"] / r["ms_at_100"]),
             r["ms_at_n"] <= 1.2 * r["ms_at_100"]),
            ("CPU per iteration (runner, agent, evaluation) at 50-250 / at %d-%d (ms)" % (n - 250, n - 50),
             "%.1f / %.1f (%.2fx)" % (r["cpu_at_100"], r["cpu_at_n"], r["cpu_at_n"] / r["cpu_at_100"]),
             r["cpu_at_n"] <= 1.2 * r["cpu_at_100"]),
            ("runner memory around 1,000 / before %d, median (largest) (MB)" % n,
             "%.1f (%.1f) / %.1f (%.1f) (%.3fx)" % (*(x / 1024 for x in r["VmRSS_1k_kb"]), *(x / 1024 for x in r["VmRSS_n_kb"]),
                                                   r["VmRSS_n_kb"][0] / r["VmRSS_1k_kb"][0]),
             r["VmRSS_n_kb"][0] <= 1.1 * r["VmRSS_1k_kb"][0]),
            ("... of which anonymous (heap, stacks) / mapped files (packs, index), medians (MB)",
             "%.1f / %.1f -> %.1f / %.1f" % tuple(r["%s_%s_kb" % (k, at)][0] / 1024
                                              for at in ("1k", "n") for k in ("RssAnon", "RssFile")),
             None),
            ("... medians over the windows used before 2026-11-28 (MB)",
             "%.1f / %.1f (%.3fx)" % (r["VmRSS_1k_narrow_kb"][0] / 1024, r["VmRSS_n_narrow_kb"][0] / 1024,
                                      r["VmRSS_n_narrow_kb"][0] / r["VmRSS_1k_narrow_kb"][0]),
             None),
            (".git growth per 1,000 iterations, before gc (MB)", "%.2f" % growth, growth <= 15),
            ("run logs at the end (files, MB)", "%d, %.1f" % (r["log_files"], r["log_bytes"] / mb),
             r["log_files"] <= 4100),
            ("resume --continue until its agent starts (s)", "%.3f" % cont, cont < 0.5),
        ]
        for o in ovh:
            rows.append(("bookkeeping ratio at %d files (conf %.1f ms / cheapest git loop %.1f ms)"
                         % (o["files"], o["conf_overhead_ms"], o["cheap_overhead_ms"]),
                         "%.2f" % o["ratio_cheap"], o["ratio_cheap"] <= 0.25))
        print("| measurement | value | goal |\n|---|---|---|")
        for name, value, ok in rows:
            print("| %s | %s | %s |" % (name, value, "" if ok is None else "PASS" if ok else "MISS"))
        return 0
    finally:
        if args.keep:
            bench.log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
