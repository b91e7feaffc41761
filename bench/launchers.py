#!/usr/bin/env python3
"""Dispatch overhead of the launchers (issue #24): what running an evaluation through `ssh` or
`slurm` costs on top of running the same evaluation locally.

    python3 bench/launchers.py [--binary target/debug/git-conference] [--repeats 3]

Starts what the end-to-end tests start (tests/e2e/launchers/servers.rs), all private and on
loopback under a temporary folder, stopped at the end: one OpenSSH server (`sshd -D`, generated
host and user keys, a private ssh_config given through `- ssh command:`), and a single-node Slurm
cluster (munged as user munge with a private key and socket, slurmctld and slurmd as root with a
private slurm.conf; the node declares 8 CPUs so that 8 jobs can run at once; the main scheduling
loop may run every 50 ms, `SchedulerParameters=sched_min_interval=50000`, instead of Slurm's
default of at most every 2 s: --sched-min-interval-us 2000000 measures the default).

Each scenario runs the same conference to its end with `launcher: local`, `ssh` and `slurm`:

- sequential: 1 researcher, 10 iterations (11 evaluations and the review's readings);
- 8 in flight: 8 researchers, 3 iterations each, `max parallel evaluations: 8` (ssh: one host
  with `devices: 0,…,7`, one evaluation per device).

The agent lowers a number in a file (no model), the evaluation prints it (`sh eval.sh`, a few
ms). Overhead per evaluation = (wall time with the launcher − wall time locally) / number of
evaluations, median of --repeats runs; in the 8-in-flight scenario that is per evaluation of
wall time, with 8 at once. Slurm's own share is measured apart: `sbatch` of a job that writes
the time it starts, the latency from submission to that start (scheduling and launch by
slurmctld/slurmd) and to the job leaving `squeue`, median of 10, a second apart (as between two
evaluations, where an agent runs in between). And ssh's own: `ssh host true`, median of 10.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

EVAL = """#!/bin/sh
echo "$(cat value.txt)" >>"$1"
echo "score: $(cat value.txt)"
"""
# Each researcher's attempts make trees of their own (no evaluation is served from the cache).
AGENT = ("#!/bin/sh\nv=$(cat value.txt)\necho $((v - 1)) >value.txt\n"
         "echo \"$CONFERENCE_RESEARCHER $CONFERENCE_ITERATION\" >>who.txt\n")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port):
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


class Servers:
    def __init__(self, root):
        self.root = root
        self.procs = []

    def spawn(self, cmd, **kw):
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            p.kill()
            p.wait()

    def sshd(self):
        d = os.path.join(self.root, "ssh")
        os.makedirs(d)
        os.makedirs("/run/sshd", exist_ok=True)
        for key in ["host_key", "id"]:
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{d}/{key}"])
        shutil.copy(f"{d}/id.pub", f"{d}/authorized_keys")
        port = free_port()
        with open(f"{d}/sshd_config", "w") as f:
            f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
                    f"PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n"
                    "StrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nUsePAM no\nMaxStartups 100\nMaxSessions 100\n")
        self.spawn(["/usr/sbin/sshd", "-D", "-e", "-f", f"{d}/sshd_config"])
        wait_port(port)
        user = os.environ.get("USER", "root")
        with open(f"{d}/ssh_config", "w") as f:
            f.write(f"Host bench\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
                    f"  IdentityFile {d}/id\n  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n"
                    "  StrictHostKeyChecking no\n  LogLevel ERROR\n")
        os.makedirs(f"{d}/staging")
        return d

    def slurm(self, sched_min_interval_us):
        d = os.path.join(self.root, "slurm")
        m = f"{d}/munge"
        for sub in ["state", "spool", "munge"]:
            os.makedirs(f"{d}/{sub}")
        with open(f"{m}/munge.key", "wb") as f:
            f.write(os.urandom(1024))
        run(["sh", "-c", f"chown -R munge:munge {m} && chmod 755 {m} && chmod 400 {m}/munge.key"])
        self.spawn(["setpriv", "--reuid", "munge", "--regid", "munge", "--clear-groups", "munged",
                    "-F", f"--socket={m}/sock", f"--key-file={m}/munge.key",
                    f"--pid-file={m}/pid", f"--log-file={m}/log", f"--seed-file={m}/seed"])
        deadline = time.monotonic() + 20
        while not os.path.exists(f"{m}/sock"):
            if time.monotonic() > deadline:
                sys.exit(f"munged did not start (see {m}/log)")
            time.sleep(0.02)
        conf = f"{d}/slurm.conf"
        with open(conf, "w") as f:
            f.write(f"""ClusterName=gcbench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={m}/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=2
SchedulerParameters=sched_min_interval={sched_min_interval_us}
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
        env = dict(os.environ, SLURM_CONF=conf)
        for daemon in ["slurmctld", "slurmd"]:
            self.spawn([daemon, "-D", "-f", conf], env=env)
        for _ in range(600):
            out = subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%t"], env=env,
                                 capture_output=True, text=True)
            if out.stdout.strip() == "idle":
                return conf
            time.sleep(0.1)
        sys.exit("slurm never came up")


def conference_md(researchers, iterations, log, environment):
    return f"""# Conference: Bench

## Goal
Lower the score.

## Mode
metric

## Success Metric
- **Metric:** score
- **Target:** none
- **Direction:** minimize

## Researchers
- **Count:** {researchers}
- **Iterations per round:** {iterations}
- **Max rounds:** 1

## Search Space Partitioning
**Strategy:** free

## Noise Handling
- **Noise runs:** 1

## Constraints
- **Max total iterations:** 1000

## Evaluation
- command: sh eval.sh {log}
- timeout: 60s
- frozen: eval.sh, agents/**

## Agent
- command: ./agents/improve.sh
- timeout: 60s

## Environment
{environment}"""


def one_run(binary, root, researchers, iterations, environment, env):
    work = tempfile.mkdtemp(dir=root)
    repo = os.path.join(work, "repo")
    os.makedirs(f"{repo}/agents")
    git = ["git", "-C", repo]
    run(["git", "init", "-q", repo])
    run(git + ["config", "user.email", "b@example.com"])
    run(git + ["config", "user.name", "bench"])
    with open(f"{repo}/eval.sh", "w") as f:
        f.write(EVAL)
    with open(f"{repo}/agents/improve.sh", "w") as f:
        f.write(AGENT)
    os.chmod(f"{repo}/agents/improve.sh", 0o755)
    with open(f"{repo}/value.txt", "w") as f:
        f.write("1000\n")
    log = os.path.join(work, "evals.log")
    with open(f"{repo}/conference.md", "w") as f:
        f.write(conference_md(researchers, iterations, log, environment))
    run(git + ["add", "-A"])
    run(git + ["commit", "-qm", "bench"])
    start = time.monotonic()
    out = subprocess.run([binary, "start", "bench"], cwd=repo, env=env, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - start
    if out.returncode != 0:
        sys.exit(f"run failed ({environment!r}):\n{out.stderr}")
    with open(log) as f:
        evaluations = len(f.read().splitlines())
    return wall, evaluations


def ssh_own_latency(ssh_dir, n=10):
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        run(["ssh", "-F", f"{ssh_dir}/ssh_config", "-o", "BatchMode=yes", "bench", "true"])
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def slurm_own_latency(conf, root, n=10):
    env = dict(os.environ, SLURM_CONF=conf)
    to_start, to_gone = [], []
    for i in range(n):
        stamp = os.path.join(root, f"started-{i}")
        t0 = time.time()
        job = subprocess.run(["sbatch", "--parsable", "--output=/dev/null",
                              "--wrap", f"date +%s.%N >{stamp}"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
        while subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True,
                             text=True).stdout.strip():
            time.sleep(0.01)
        t2 = time.time()
        with open(stamp) as f:
            to_start.append(float(f.read()) - t0)
        to_gone.append(t2 - t0)
        # As between two evaluations (an agent runs meanwhile): the node finishes the job first.
        time.sleep(1.0)
    return statistics.median(to_start), statistics.median(to_gone)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/debug/git-conference")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sched-min-interval-us", type=int, default=50000,
                    help="Slurm's SchedulerParameters=sched_min_interval (Slurm's default: "
                         "2000000, a scheduling pass at most every 2 s)")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    root = tempfile.mkdtemp(prefix="gc-launch-bench-")
    os.chmod(root, 0o755)  # munged runs as user munge and must reach its socket folder
    servers = Servers(root)
    try:
        ssh_dir = servers.sshd()
        conf = servers.slurm(args.sched_min_interval_us)
        env = dict(os.environ, SLURM_CONF=conf)
        ssh_env = (f"- launcher: ssh\n- hosts: bench:{ssh_dir}/staging\n"
                   f"- ssh command: ssh -F {ssh_dir}/ssh_config\n")
        mux = (f"-o ControlMaster=auto -o ControlPath={ssh_dir}/mux-%C "
               "-o ControlPersist=60")
        mux_env = (f"- launcher: ssh\n- hosts: bench:{ssh_dir}/staging\n"
                   f"- ssh command: ssh -F {ssh_dir}/ssh_config {mux}\n")
        slurm_env = f"- launcher: slurm\n- staging: {root}/slurm-staging\n"
        scenarios = [
            ("sequential (1 researcher x 10)", 1, 10, "", ""),
            ("8 in flight (8 researchers x 3)", 8, 3, "- max parallel evaluations: 8\n",
             "- devices: 0,1,2,3,4,5,6,7\n"),
        ]
        print(f"{'scenario':34} {'launcher':8} {'evals':>5} {'wall s':>8} {'overhead/eval ms':>17}")
        for name, researchers, iterations, limit, devices in scenarios:
            walls = {}
            for launcher, environment in [("local", limit), ("ssh", ssh_env + devices),
                                          ("ssh+mux", mux_env + devices),
                                          ("slurm", slurm_env + limit)]:
                results = [one_run(binary, root, researchers, iterations, environment, env)
                           for _ in range(args.repeats)]
                walls[launcher] = statistics.median(w for w, _ in results)
                n = results[0][1]
                extra = (walls[launcher] - walls["local"]) / n * 1000
                print(f"{name:34} {launcher:8} {n:5} {walls[launcher]:8.2f} {extra:17.0f}",
                      flush=True)
        connect = ssh_own_latency(ssh_dir)
        print(f"\nssh's own cost (`ssh bench true`, median of 10): {connect * 1000:.0f} ms a "
              "connection")
        subprocess.run(["ssh", "-F", f"{ssh_dir}/ssh_config", *mux.split(), "-O", "exit", "bench"],
                       capture_output=True)
        start, gone = slurm_own_latency(conf, root)
        print(f"\nSlurm's own latency (sbatch of `date`, median of 10): submission to start "
              f"{start * 1000:.0f} ms, to leaving squeue {gone * 1000:.0f} ms")
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
