"""Per-iteration bookkeeping of two git-conference binaries, side by side (issue #23: "no slower
than before, before/after on the same machine").

    python3 bench/before_after.py BEFORE AFTER [--sizes 1000,10000] [--iterations 100] [--reps 3]
                                  [--after-branching best-first]

Runs bench/run.py's conference loop (one researcher, an instant agent that stamps its start and
appends a line, an instant evaluation) with each binary in turn, BEFORE, AFTER, BEFORE, AFTER…,
so that both see the same load; each run's figure is the median interval between consecutive
agent starts (the first interval, warm-up, left out). Prints every run's figure, and per size
the median of each binary's runs and their ratio (AFTER / BEFORE).

With --after-branching MODE the AFTER runs have `Branching: MODE` in `## Researchers` (issue 41:
the tree's bookkeeping per attempt against the chain's); BEFORE and AFTER may be one binary.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402


def one_run(E, src, n, iterations, agent, label, branching=None):
    work = bench.clone(E, src, os.path.join(E.tmp, "%s-%d" % (label, n)))
    stamps = os.path.join(E.tmp, "%s-%d.stamps" % (label, n))
    extra = "- **Branching:** %s\n" % branching if branching else ""
    bench.write(os.path.join(work, "conference.md"),
                bench.conference_md("Bench overhead", agent, iterations=iterations, max_total=iterations,
                                    extra_researchers=extra))
    E.git(work, "add", "conference.md")
    E.git(work, "commit", "-q", "-m", "conference.md")
    _, p = E.timed(["git", "conference", "start", "ovh", "--yes"], work, {"BENCH_STAMPS": stamps},
                   check=False)
    if p.returncode != 0:
        raise RuntimeError("conference failed:\n" + p.stdout + p.stderr)
    iv = bench.intervals(bench.read_stamps(stamps))
    if len(iv) != iterations - 1:
        raise RuntimeError("%d agent runs, expected %d" % (len(iv) + 1, iterations))
    shutil.rmtree(work, ignore_errors=True)
    return bench.median(iv[1:]) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--after-branching", help="Branching mode of the AFTER runs (default: none)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="git-conference-before-after-")
    try:
        envs = {}
        for label, binary in (("before", args.before), ("after", args.after)):
            os.makedirs(os.path.join(tmp, label))
            envs[label] = bench.Env(os.path.join(tmp, label), binary)
        agent = os.path.join(tmp, "agent.sh")
        bench.write(agent, bench.AGENT_SH, 0o755)
        cache, results = {}, []
        for n in [int(s) for s in args.sizes.split(",")]:
            src = bench.repo_of_size(envs["before"], cache, n)
            runs = {"before": [], "after": []}
            for rep in range(args.reps):
                for label in ("before", "after"):
                    branching = args.after_branching if label == "after" else None
                    ms = one_run(envs[label], src, n, args.iterations, agent, "%s%d" % (label, rep),
                                 branching)
                    runs[label].append(ms)
                    print("%6d files  %-6s run %d: %.1f ms  (load %s)" % (
                        n, label, rep + 1, ms, open("/proc/loadavg").read().split()[0]), flush=True)
            b, a = bench.median(runs["before"]), bench.median(runs["after"])
            results.append({"files": n, "before": runs["before"], "after": runs["after"],
                            "before_median": b, "after_median": a, "ratio": a / b})
        print()
        print("| files | before, ms per iteration (runs) | after | after / before |")
        print("| ---: | --- | --- | ---: |")
        for r in results:
            print("| %d | %.1f (%s) | %.1f (%s) | %.2f |" % (
                r["files"], r["before_median"], ", ".join("%.1f" % x for x in r["before"]),
                r["after_median"], ", ".join("%.1f" % x for x in r["after"]), r["ratio"]))
        print(json.dumps(results), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
