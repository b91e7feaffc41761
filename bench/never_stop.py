"""A never-stop run of git-conference (issue #27): does iteration 10,000 cost what iteration 100 did?

    python3 bench/never_stop.py [--iterations 10000] [--binary target/release/git-conference]
                                [--sizes 1000,10000,100000] [--ratio-iterations 60] [--keep]

One conference, one researcher, ONE round of N iterations, an instant agent (bench/run.py's: it
stamps its start and appends a line) and an instant evaluation, on a repository of 1,000 files.
While it runs, the runner's memory (VmRSS) and the size of `.git` are sampled. Printed:

- bookkeeping per iteration near iteration 100 and near iteration N: the median interval between
  consecutive agent starts over 100 iterations around each (goal: within 1.2x);
- memory of the running conference at iteration 1,000 and at N - 50, before the round's
  closing work (goal: within 1.1x);
- `.git` growth per 1,000 iterations between iteration 1,000 and N, before any gc (goal: <= 15 MB);
- the run logs at the end: files and bytes (capped: see the README's "Run logs");
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


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


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


def long_round(E, cache, n):
    """Runs one round of `n` iterations; returns the samples and the repository."""
    agent = os.path.join(E.tmp, "agent.sh")
    bench.write(agent, bench.AGENT_SH, 0o755)
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
    while p.poll() is None:
        time.sleep(0.5)
        done = count_lines(stamps)
        for mark in marks:
            if marks[mark] is None and done >= mark:
                marks[mark] = (rss_kb(p.pid), du(git_dir))
        bench.log("  %d iterations" % done) if done and done % 1000 < 10 else None
    err.close()
    if p.returncode != 0:
        with open(err_path, errors="replace") as f:
            raise RuntimeError("conference failed: " + f.read()[-4000:])
    if marks[last] is None or marks[last][0] is None:
        marks[last] = (marks[last][0] if marks[last] else None, du(git_dir))
    starts = bench.read_stamps(stamps)
    iv = bench.intervals(starts)
    at = lambda i: bench.median(iv[max(0, i - 50):i + 50]) * 1000  # noqa: E731
    logs = os.path.join(git_dir, "conference", "long", "logs")
    names = os.listdir(logs)
    return {
        "iterations": len(starts),
        "ms_at_100": at(100),
        "ms_at_n": bench.median(iv[-100:]) * 1000,
        "rss_1k_kb": marks[first][0], "rss_n_kb": marks[last][0],
        "git_1k": marks[first][1], "git_n": marks[last][1],
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
    args = ap.parse_args()
    binary, _, _ = bench.build(args.binary, helpers=False)
    tmp = tempfile.mkdtemp(prefix="git-conference-never-stop-")
    try:
        E = bench.Env(tmp, binary)
        cache = {}
        bench.log("one round of %d iterations" % args.iterations)
        r = long_round(E, cache, args.iterations)
        cont = resume_continue(E, r["work"], r["agent"])
        sizes = [int(s) for s in args.sizes.split(",") if s]
        ovh = bench.bench_overhead(E, cache, sizes, args.ratio_iterations) if sizes else []
        n, mb = args.iterations, 1024 * 1024
        growth = (r["git_n"] - r["git_1k"]) / max(1, n - 50 - 1000) * 1000 / mb
        rows = [
            ("bookkeeping+agent+eval per iteration at 100 / at %d (ms)" % n,
             "%.1f / %.1f (%.2fx)" % (r["ms_at_100"], r["ms_at_n"], r["ms_at_n"] / r["ms_at_100"]),
             r["ms_at_n"] <= 1.2 * r["ms_at_100"]),
            ("runner memory at 1,000 / at %d (MB)" % (n - 50),
             "%.1f / %.1f" % (r["rss_1k_kb"] / 1024, (r["rss_n_kb"] or 0) / 1024),
             bool(r["rss_n_kb"]) and r["rss_n_kb"] <= 1.1 * r["rss_1k_kb"]),
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
            print("| %s | %s | %s |" % (name, value, "PASS" if ok else "MISS"))
        return 0
    finally:
        if args.keep:
            bench.log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
