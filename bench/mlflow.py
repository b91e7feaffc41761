"""The MLflow sink's cost to the research loop, and an export's time (issue #43).

    python3 bench/mlflow.py BINARY [--files 1000] [--iterations 100] [--reps 3] [--export 10000]

Starts a real MLflow tracking server (from .ci/mlflow-venv, SQLite backend, proxied artifacts,
a free loopback port). Bookkeeping: bench/run.py's conference loop (one researcher, an instant
agent, an instant evaluation) with the sink off and on in turn, OFF, ON, OFF, ON…, so that both
see the same load; each run's figure is the median interval between consecutive agent starts.
Export: a conference of --export attempts recorded with the sink off, then `git conference export
mlflow` timed into an empty experiment (and once more: the second adds nothing).
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402

VENV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".ci", "mlflow-venv")


def server(tmp):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen(
        [os.path.join(VENV, "bin", "mlflow"), "server", "--backend-store-uri", "sqlite:///%s/db" % tmp,
         "--artifacts-destination", os.path.join(tmp, "art"), "--serve-artifacts", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = "http://127.0.0.1:%d" % port
    for _ in range(600):
        try:
            urllib.request.urlopen(uri + "/health", timeout=2)
            return proc, uri
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("mlflow server did not start")


def conference(E, src, label, iterations, agent, uri):
    work = bench.clone(E, src, os.path.join(E.tmp, label))
    stamps = os.path.join(E.tmp, label + ".stamps")
    md = bench.conference_md("Bench mlflow", agent, iterations=iterations, max_total=iterations)
    if uri:
        md += "\n## Environment\n- mlflow: %s\n- mlflow experiment: %s\n" % (uri, label)
    bench.write(os.path.join(work, "conference.md"), md)
    E.git(work, "add", "conference.md")
    E.git(work, "commit", "-q", "-m", "conference.md")
    _, p = E.timed(["git", "conference", "start", "ovh", "--yes"], work,
                   {"BENCH_STAMPS": stamps, "GIT_CONFERENCE_MLFLOW_FLUSH": "0"}, check=False)
    if p.returncode != 0:
        raise RuntimeError("conference failed:\n" + p.stdout + p.stderr)
    iv = bench.intervals(bench.read_stamps(stamps))
    return work, bench.median(iv[1:]) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--export", type=int, default=10000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="git-conference-mlflow-")
    proc = None
    try:
        proc, uri = server(tmp)
        E = bench.Env(tmp, args.binary)
        agent = os.path.join(tmp, "agent.sh")
        bench.write(agent, bench.AGENT_SH, 0o755)
        src = bench.repo_of_size(E, {}, args.files)
        runs = {"off": [], "on": []}
        for rep in range(args.reps):
            for label in ("off", "on"):
                work, ms = conference(E, src, "%s%d" % (label, rep), args.iterations, agent,
                                      uri if label == "on" else None)
                shutil.rmtree(work, ignore_errors=True)
                runs[label].append(ms)
                print("sink %-3s run %d: %.1f ms per iteration (load %s)" % (
                    label, rep + 1, ms, open("/proc/loadavg").read().split()[0]), flush=True)
        off, on = bench.median(runs["off"]), bench.median(runs["on"])
        print("| sink | ms per iteration (runs) |\n| --- | --- |")
        print("| off | %.1f (%s) |" % (off, ", ".join("%.1f" % x for x in runs["off"])))
        print("| on | %.1f (%s) |" % (on, ", ".join("%.1f" % x for x in runs["on"])))
        print("on / off: %.3f" % (on / off))
        if args.export:
            work, _ = conference(E, src, "export", args.export, agent, None)
            for attempt in (1, 2):
                t0 = time.monotonic()
                p = E.run(["git", "conference", "export", "mlflow", "ovh", "--uri", uri,
                           "--experiment", "export"], work)
                print("export %d of %d attempts: %.1f s — %s" % (
                    attempt, args.export, time.monotonic() - t0, p.stdout.strip().splitlines()[0]), flush=True)
    finally:
        if proc:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
