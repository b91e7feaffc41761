#!/usr/bin/env python3
"""Dispatch overhead of the `ray` launcher (issue #42): what running an evaluation as a Ray job
costs on top of running the same evaluation locally.

    python3 bench/ray_launcher.py [--binary target/debug/git-conference] [--repeats 3]
                                  [--ray .ci/ray-venv/bin/ray]

Starts what the end-to-end tests start (tests/e2e/launchers/servers.rs, `RayHead`): a single-node
Ray cluster, `ray start --head --block` on loopback with every port chosen free, a private short
temp dir, 8 CPUs and 2 GPUs declared; stopped at the end by signalling its process group.

Each scenario runs the same conference to its end with `launcher: local` and `launcher: ray`
(`ray resources: cpus=1`, each evaluation one job):

- sequential: 1 researcher, 10 iterations (the evaluations of the baseline, the attempts and the
  review's readings);
- 8 in flight: 8 researchers, 3 iterations each, `max parallel evaluations: 8`.

The agent lowers a number in a file, the evaluation prints it (a few ms). Overhead per evaluation
= (wall time with Ray - wall time locally) / evaluations, median of --repeats runs (the start's
check job is in the Ray wall time). Ray's own share is measured apart, over the same Jobs API with
the standard library's HTTP client: a job `true` (no working directory), submitted when the previous
one ended, from the submission to Ray listing it SUCCEEDED (polled every 20 ms), median of 10.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launchers import free_port, one_run  # noqa: E402


def start_ray(ray, root):
    tmp = tempfile.mkdtemp(prefix="gcrb", dir="/tmp")
    ports = set()
    while len(ports) < 60:
        ports.add(free_port())
    ports = iter(sorted(ports))
    dashboard = next(ports)
    cmd = [ray, "start", "--head", "--block", "--disable-usage-stats", "--node-ip-address",
           "127.0.0.1", "--dashboard-host", "127.0.0.1", "--num-gpus", "2", "--num-cpus", "8",
           "--temp-dir", tmp, f"--dashboard-port={dashboard}"]
    for flag in ["--port", "--ray-client-server-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--node-manager-port",
                 "--object-manager-port", "--metrics-export-port"]:
        cmd.append(f"{flag}={next(ports)}")
    cmd.append("--worker-port-list=" + ",".join(str(next(ports)) for _ in range(48)))
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(root, "ray.err"), "w"), env=env,
                            start_new_session=True)
    address = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            nodes = json.load(urllib.request.urlopen(f"{address}/api/v0/nodes", timeout=5))
            if any(n["resources_total"].get("CPU") == 8.0
                   for n in nodes["data"]["result"]["result"]):
                return proc, address, tmp
        except Exception:
            pass
        time.sleep(0.25)
    sys.exit("Ray never came up (see ray.err)")


def stop_ray(proc, tmp):
    for sig in [signal.SIGTERM, signal.SIGKILL]:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        time.sleep(2)
    proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def call(address, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(address + path, data=data,
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))


def ray_own_latency(address, n=10):
    times = []
    for i in range(n):
        job = f"bench-own-{os.getpid()}-{i}"
        t0 = time.monotonic()
        call(address, "/api/jobs/", {"entrypoint": "true", "submission_id": job})
        while call(address, f"/api/jobs/{job}")["status"] not in ("SUCCEEDED", "FAILED"):
            time.sleep(0.02)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/debug/git-conference")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ray", default=".ci/ray-venv/bin/ray")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    root = tempfile.mkdtemp(prefix="gc-ray-bench-")
    proc, address, tmp = start_ray(os.path.abspath(args.ray), root)
    try:
        env = dict(os.environ)
        ray_env = f"- launcher: ray\n- ray address: {address}\n- ray resources: cpus=1\n"
        scenarios = [
            ("sequential (1 researcher x 10)", 1, 10, ""),
            ("8 in flight (8 researchers x 3)", 8, 3, "- max parallel evaluations: 8\n"),
        ]
        print(f"{'scenario':34} {'launcher':8} {'evals':>5} {'wall s':>8} {'overhead/eval ms':>17}")
        for name, researchers, iterations, limit in scenarios:
            walls = {}
            for launcher, environment in [("local", limit), ("ray", ray_env + limit)]:
                results = [one_run(binary, root, researchers, iterations, environment, env)
                           for _ in range(args.repeats)]
                walls[launcher] = statistics.median(w for w, _ in results)
                n = results[0][1]
                extra = (walls[launcher] - walls["local"]) / n * 1000
                print(f"{name:34} {launcher:8} {n:5} {walls[launcher]:8.2f} {extra:17.0f}",
                      flush=True)
        own = ray_own_latency(address)
        print(f"\nRay's own latency (a job `true` over the Jobs API, submission to SUCCEEDED, "
              f"median of 10): {own * 1000:.0f} ms")
    finally:
        stop_ray(proc, tmp)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
