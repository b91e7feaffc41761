#!/usr/bin/env python3
"""Benchmark suite of git-conference: the bookkeeping must cost next to nothing, at any size.

    python3 bench/run.py [--quick] [--binary target/release/git-conference] [--keep]

Builds the release binary (unless --binary) and the two bench helpers (benches/transition.rs,
benches/events.rs) with cargo, builds every repository itself under a temporary folder, and prints
one table with four measurements, their targets and PASS/MISS:

1. Overhead per iteration: a 1-researcher conference whose agent appends a line to one file and
   whose evaluation prints a score, on repositories of 1,000 / 10,000 / 50,000 files, against the
   git command-line loop people run today (agent; git add -A; git commit; eval; git notes add;
   git reset --hard HEAD~1 when not kept), and against the cheapest git command-line loop that
   records the same (agent; git add -A; git commit; eval; git notes add; one event commit made
   with hash-object / mktree / commit-tree; git update-ref of the events ref). All loops run the
   SAME agent and evaluation scripts;
   each agent run writes a timestamp, the time per iteration is the median interval between two
   agent starts, and the overhead is that minus the same interval of a loop that only runs the
   agent and the evaluation (so what is left is bookkeeping).
2. Round transition: N researcher worktrees moved to a commit that changed 10 files, through the
   code a round start runs (benches/transition.rs: branch move, open, snapshot::advance over the
   tree difference and what the worktree's watch saw), against a fresh `git worktree add` of the
   same tree; and, for context, the full checkout the first round of a run does.
3. Status and resume latency at 100 / 10,000 / 100,000 events (benches/events.rs appends
   synthetic events through Conference::record, the engine's own recording path, to a real paused
   conference): wall time of `git conference status` (median of 5), and of `git conference resume`
   from launch until its agent starts (median of 3); then the same resume with 3,000 events in
   the current round (all after the latest checkpoint).
4. Parallel efficiency: 1, 2, 4, 8 researchers, 3 iterations each, an evaluation that sleeps;
   efficiency = research-phase wall time with 1 researcher / with N (same work per researcher).

Nothing is deleted until the end of the run, and the repositories are written with
`git fast-import` (no loose objects for a `git gc` to delete): on ext4 a burst of deletions slows
every file creation for a minute or two after it (the inode allocator skips recently freed
inodes), which would charge each measurement for the cleanup of the one before it. For the same
reason, leave a minute or two after a run that deleted many files (a previous run, `cargo test`)
before starting one.

--quick runs smaller sizes (a smoke run for CI, under a minute once built); its PASS/MISS
refers to the smaller sizes and is indicative only.

--idle-processes N starts N idle processes for the whole run (a GPU server runs about a
thousand, kernel threads included; this machine about 70), and $TMPDIR chooses the filesystem
the repositories are written to.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------------
# Environment and helpers

class Env:
    def __init__(self, tmp, binary):
        self.tmp = tmp
        self.binary = os.path.abspath(binary)
        self.bin_dir = os.path.join(tmp, "bin")
        self.home = os.path.join(tmp, "home")
        os.makedirs(self.bin_dir, exist_ok=True)
        os.makedirs(self.home, exist_ok=True)
        os.symlink(self.binary, os.path.join(self.bin_dir, "git-conference"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update({
            "PATH": self.bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "HOME": self.home,
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
            "TZ": "UTC", "LC_ALL": "C",
        })
        self.env = env

    def run(self, args, cwd, check=True, extra_env=None, capture=True):
        env = dict(self.env)
        if extra_env:
            env.update(extra_env)
        p = subprocess.run(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                           stderr=subprocess.PIPE if capture else subprocess.DEVNULL, text=True)
        if check and p.returncode != 0:
            raise RuntimeError("%s failed (%d) in %s:\n%s%s" % (" ".join(args), p.returncode, cwd,
                                                                 p.stdout or "", p.stderr or ""))
        return p

    def git(self, cwd, *args, check=True):
        return self.run(["git", *args], cwd, check=check).stdout

    def timed(self, args, cwd, extra_env=None, check=True):
        t = time.perf_counter()
        p = self.run(args, cwd, check=check, extra_env=extra_env)
        return time.perf_counter() - t, p


def write(path, text, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if mode:
        os.chmod(path, mode)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def read_stamps(path):
    """Nanosecond timestamps (one per line) as seconds."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(l.split()[0]) / 1e9 for l in f if l.strip()]


def intervals(stamps):
    return [b - a for a, b in zip(stamps, stamps[1:])]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# The evaluation: kept on odd iterations (score = iteration, strictly better), reverted on even
# ones (score 0), so the loop alternates keep and revert and never gets stuck. Review and
# baseline runs (iteration 0) print 0. With BENCH_EVAL_LINES the score is the number of lines of
# work.txt instead (every attempt improves, and the review reproduces it: no plateau). With BENCH_EVAL_SLEEP it sleeps first; with
# BENCH_EVAL_STAMPS research runs log when they end.
EVAL_SH = """#!/bin/sh
i=${CONFERENCE_ITERATION:-0}
[ -n "$BENCH_EVAL_SLEEP" ] && sleep "$BENCH_EVAL_SLEEP"
if [ -n "$BENCH_EVAL_LINES" ]; then echo "score: $(wc -l < work.txt)"
elif [ $((i % 2)) -eq 1 ]; then echo "score: $i"; else echo "score: 0"; fi
if [ -n "$BENCH_EVAL_STAMPS" ]; then
  case "$CONFERENCE_RESEARCHER" in review|baseline|"") ;; *) date +%s%N >> "$BENCH_EVAL_STAMPS" ;; esac
fi
"""

# The agent: logs when it starts, then changes one file (a new tree every iteration).
AGENT_SH = """#!/bin/sh
date +%s%N >> "$BENCH_STAMPS"
echo "iteration ${CONFERENCE_ITERATION} of ${CONFERENCE_RESEARCHER}" >> work.txt
"""

# The git command-line loop of a careful autoresearch script, same agent and evaluation.
CLI_LOOP_SH = """#!/bin/sh
# usage: cli-loop.sh N AGENT   (run in the repository)
n=$1; agent=$2; best=0; i=1
export CONFERENCE_RESEARCHER=A
while [ $i -le $n ]; do
  export CONFERENCE_ITERATION=$i
  sh "$agent"
  git add -A
  git commit -q -m "attempt $i"
  score=$(./eval.sh | sed -n 's/^score: //p')
  if [ "$score" -gt "$best" ]; then best=$score; verdict=kept; else verdict=reverted; fi
  git notes add -m "{\\"iteration\\": $i, \\"metric\\": $score, \\"verdict\\": \\"$verdict\\"}" HEAD
  [ $verdict = reverted ] && git reset -q --hard HEAD~1
  i=$((i + 1))
done
"""

# The cheapest git command-line loop recording what git-conference records per attempt: the
# attempt as a commit, its verdict as a note, one event commit on an events ref (its tree holds
# the event as state.json) and the ref moved with compare-and-swap. No revert, no status, no
# worktree of its own: the floor a recorder built on the git CLI cannot go below.
CHEAP_LOOP_SH = """#!/bin/sh
# usage: cheap-loop.sh N AGENT   (run in the repository)
n=$1; agent=$2; best=0; i=1; ev=refs/conference/cheap/events; parent=
export CONFERENCE_RESEARCHER=A
while [ $i -le $n ]; do
  export CONFERENCE_ITERATION=$i
  sh "$agent"
  git add -A
  git commit -q -m "attempt $i"
  score=$(./eval.sh | sed -n 's/^score: //p')
  if [ "$score" -gt "$best" ]; then best=$score; verdict=kept; else verdict=reverted; fi
  git notes add -m "{\\"iteration\\": $i, \\"metric\\": $score, \\"verdict\\": \\"$verdict\\"}" HEAD
  event="{\\"event\\": \\"researcher.iteration\\", \\"payload\\": {\\"iteration\\": $i, \\"status\\": \\"$verdict\\"}}"
  blob=$(printf '%s\\n' "$event" | git hash-object -w --stdin)
  tree=$(printf '100644 blob %s\\tstate.json\\n' "$blob" | git mktree)
  if [ -n "$parent" ]; then
    commit=$(git commit-tree "$tree" -p "$parent" -m "$event")
  else
    commit=$(git commit-tree "$tree" -m "$event")
  fi
  git update-ref "$ev" "$commit" $parent
  parent=$commit
  i=$((i + 1))
done
"""

# The same loop without any git: what the agent and the evaluation cost by themselves.
BARE_LOOP_SH = """#!/bin/sh
n=$1; agent=$2; best=0; i=1
export CONFERENCE_RESEARCHER=A
while [ $i -le $n ]; do
  export CONFERENCE_ITERATION=$i
  sh "$agent"
  score=$(./eval.sh | sed -n 's/^score: //p')
  if [ "$score" -gt "$best" ]; then best=$score; verdict=kept; else verdict=reverted; fi
  i=$((i + 1))
done
"""


def conference_md(title, agent, count=1, iterations=3, rounds=1, max_total=1000, extra_constraints="",
                  extra_researchers=""):
    return f"""# Conference: {title}

## Goal
Benchmark the bookkeeping.

## Mode
metric

## Success Metric
- **Metric:** score
- **Target:** none
- **Direction:** maximize

## Researchers
- **Count:** {count}
- **Iterations per round:** {iterations}
- **Max rounds:** {rounds}
{extra_researchers}
## Search Space Partitioning
**Strategy:** free

## Noise Handling
- **Noise runs:** 1

## Constraints
- **Max total iterations:** {max_total}
{extra_constraints}
## Evaluation
- command: ./eval.sh
- timeout: 120s
- frozen: eval.sh

## Agent
- command: sh {agent}
- timeout: 120s
"""


def make_repo(E, path, nfiles):
    """A committed, packed repository of `nfiles` files (100 per folder, ~200 bytes each), with no
    working tree (it is only cloned from).

    Written with `git fast-import`, straight into a pack: `git add` + `git gc` would write and then
    delete one loose object per file, and on ext4 a burst of deletions slows every file creation
    for a minute or two after it (the allocator skips recently freed inodes) — the measurements
    that follow would be charged for it, the conference's more than the CLI loop's.
    """
    os.makedirs(path)
    E.git(path, "init", "-q", "-b", "main")
    body = "x" * 160
    chunks = []
    files = []
    for i in range(nfiles):
        data = ("file %d\n%s\n" % (i, body)).encode()
        chunks.append(b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(data), data))
        files.append((b"100644", i + 1, b"src/d%04d/f%05d.txt" % (i // 100, i)))
    for mode, name, text in ((b"100755", b"eval.sh", EVAL_SH), (b"100644", b"work.txt", "start\n")):
        mark = len(files) + 1
        data = text.encode()
        chunks.append(b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(data), data))
        files.append((mode, mark, name))
    msg = b"bench repository (%d files)" % nfiles
    chunks.append(b"commit refs/heads/main\ncommitter Bench <bench@example.com> 1700000000 +0000\n"
                  b"data %d\n%s\n" % (len(msg), msg))
    chunks.extend(b"M %s :%d %s\n" % f for f in files)
    chunks.append(b"\n")
    p = subprocess.run(["git", "fast-import", "--quiet"], cwd=path, env=E.env, input=b"".join(chunks),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError("git fast-import failed in %s:\n%s" % (path, p.stderr.decode()))
    return path


def repo_of_size(E, cache, nfiles):
    """A pristine repository of `nfiles` files, copied (with `git clone`) for each use."""
    if nfiles not in cache:
        cache[nfiles] = make_repo(E, os.path.join(E.tmp, "pristine-%d" % nfiles), nfiles)
    return cache[nfiles]


def clone(E, src, dst):
    E.run(["git", "clone", "-q", "--no-hardlinks", src, dst], E.tmp)
    return dst


# ---------------------------------------------------------------------------------------------
# 1. Overhead per iteration

def bench_overhead(E, cache, sizes, iterations):
    rows = []
    agent = os.path.join(E.tmp, "agent.sh")
    write(agent, AGENT_SH, 0o755)
    cli_loop = os.path.join(E.tmp, "cli-loop.sh")
    write(cli_loop, CLI_LOOP_SH, 0o755)
    bare_loop = os.path.join(E.tmp, "bare-loop.sh")
    write(bare_loop, BARE_LOOP_SH, 0o755)
    cheap_loop = os.path.join(E.tmp, "cheap-loop.sh")
    write(cheap_loop, CHEAP_LOOP_SH, 0o755)
    for n in sizes:
        log("overhead: %d files" % n)
        src = repo_of_size(E, cache, n)
        res = {}
        for kind in ("bare", "cli", "cheap", "conf"):
            work = clone(E, src, os.path.join(E.tmp, "ovh-%s-%d" % (kind, n)))
            stamps = os.path.join(E.tmp, "ovh-%s-%d.stamps" % (kind, n))
            env = {"BENCH_STAMPS": stamps}
            if kind == "bare":
                wall, _ = E.timed(["sh", bare_loop, str(iterations), agent], work, env)
            elif kind == "cli":
                wall, _ = E.timed(["sh", cli_loop, str(iterations), agent], work, env)
            elif kind == "cheap":
                wall, _ = E.timed(["sh", cheap_loop, str(iterations), agent], work, env)
                recorded = E.git(work, "rev-list", "--count", "refs/conference/cheap/events").strip()
                if int(recorded) != iterations:
                    raise RuntimeError("cheapest loop recorded %s events, expected %d" % (recorded, iterations))
            else:
                write(os.path.join(work, "conference.md"),
                      conference_md("Bench overhead", agent, iterations=iterations, max_total=iterations))
                E.git(work, "add", "conference.md")
                E.git(work, "commit", "-q", "-m", "conference.md")
                wall, p = E.timed(["git", "conference", "start", "ovh", "--yes"], work, env, check=False)
                if p.returncode != 0:
                    raise RuntimeError("conference failed:\n" + p.stdout + p.stderr)
                st = json.loads(E.run(["git", "conference", "status", "ovh", "--format", "json"], work).stdout)
                if st["total_iterations"] != iterations:
                    raise RuntimeError("conference ran %s iterations, expected %d" % (st["total_iterations"], iterations))
            iv = intervals(read_stamps(stamps))
            if len(iv) != iterations - 1:
                raise RuntimeError("%s loop: %d agent runs, expected %d" % (kind, len(iv) + 1, iterations))
            # The first interval includes warm-up (page cache, first index write): drop it.
            res[kind] = median(iv[1:]) * 1000
            res[kind + "_wall"] = wall
        conf_over = res["conf"] - res["bare"]
        cli_over = res["cli"] - res["bare"]
        cheap_over = res["cheap"] - res["bare"]
        rows.append({"files": n, "bare_ms": res["bare"], "cli_ms": res["cli"], "conf_ms": res["conf"],
                     "cheap_ms": res["cheap"], "cli_overhead_ms": cli_over, "conf_overhead_ms": conf_over,
                     "cheap_overhead_ms": cheap_over,
                     "ratio": conf_over / cli_over if cli_over > 0 else float("nan"),
                     "ratio_cheap": conf_over / cheap_over if cheap_over > 0 else float("nan")})
    return rows


# ---------------------------------------------------------------------------------------------
# 2. Round transition

def bench_transition(E, cache, sizes, researchers, reps, transition_exe):
    rows = []
    for n in sizes:
        log("transition: %d files" % n)
        work = clone(E, repo_of_size(E, cache, n), os.path.join(E.tmp, "tr-%d" % n))
        c0 = E.git(work, "rev-parse", "HEAD").strip()
        # The new best: 10 files changed.
        for i in range(10):
            f = os.path.join(work, "src", "d%04d" % ((i * 7919 % n) // 100), "f%05d.txt" % (i * 7919 % n))
            with open(f, "a") as fh:
                fh.write("changed by the new best\n")
        E.git(work, "commit", "-q", "-am", "new best: 10 files")
        c1 = E.git(work, "rev-parse", "HEAD").strip()
        wts = []
        for r in range(researchers):
            path = os.path.join(E.tmp, "tr-%d-wt-%d" % (n, r))
            branch = "conference/bench/researcher-%s" % chr(65 + r)
            E.git(work, "worktree", "add", "-q", "-b", branch, path, c0)
            wts.append((path, branch))
        # Worktrees made long ago, as a conference's are: no racily-clean index entries.
        time.sleep(1.1)
        for path, _ in wts:
            E.git(path, "status", "--porcelain")
        moves = {"--watched": [], "--full": []}
        targets = [c1, c0] * reps
        for mode in moves:
            for target in targets:
                args = [transition_exe, mode, work, target]
                for path, branch in wts:
                    args += [path, branch]
                out = E.run(args, work).stdout
                moves[mode] += json.loads(out)["ms"]
        for path, _ in wts:  # the move really happened
            if E.git(path, "rev-parse", "HEAD").strip() != targets[-1] or E.git(path, "status", "--porcelain").strip():
                raise RuntimeError("transition left %s dirty or at the wrong commit" % path)
        # The CLI's own way, for context: `git reset --hard` in an existing worktree.
        cli_reset = []
        for target in [c1, c0] * reps:
            t, _ = E.timed(["git", "reset", "-q", "--hard", target], wts[0][0])
            cli_reset.append(t * 1000)
        fresh = []
        for k in range(reps):
            path = os.path.join(E.tmp, "tr-%d-fresh-%d" % (n, k))
            t, _ = E.timed(["git", "worktree", "add", "-q", "--detach", path, c1], work)
            fresh.append(t * 1000)
        per = median(moves["--watched"])
        rows.append({"files": n, "researchers": researchers, "per_worktree_ms": per,
                     "all_worktrees_ms": per * researchers,
                     "full_checkout_ms": median(moves["--full"]),
                     "cli_reset_ms": median(cli_reset), "fresh_add_ms": median(fresh),
                     "ratio": per / median(fresh)})
    return rows


# ---------------------------------------------------------------------------------------------
# 3. Status and resume latency

def bench_events(E, cache, levels, events_exe, status_reps, resume_reps, round_events):
    log("events: building the conference")
    work = clone(E, repo_of_size(E, cache, 100), os.path.join(E.tmp, "ev"))
    agent = os.path.join(E.tmp, "agent.sh")
    write(agent, AGENT_SH, 0o755)
    stamps = os.path.join(E.tmp, "ev.stamps")
    write(os.path.join(work, "conference.md"),
          conference_md("Bench events", agent, iterations=1, rounds=100000, max_total=100000,
                        extra_constraints="- **Pause every:** 1\n"))
    E.git(work, "add", "conference.md")
    E.git(work, "commit", "-q", "-m", "conference.md")
    ev_env = {"BENCH_STAMPS": stamps, "BENCH_EVAL_LINES": "1"}
    p = E.run(["git", "conference", "start", "ev", "--yes"], work, check=False, extra_env=ev_env)
    if p.returncode != 3:
        raise RuntimeError("expected the conference to pause (exit 3), got %d:\n%s%s" % (p.returncode, p.stdout, p.stderr))

    def events_now():
        return json.loads(E.run(["git", "conference", "status", "ev", "--format", "json"], work).stdout)["events"]

    def timed_resume():
        """One `resume` of the paused conference: (ms until its agent starts, ms in all)."""
        if os.path.exists(stamps):
            os.remove(stamps)
        t0 = time.time()
        t, p = E.timed(["git", "conference", "resume", "ev"], work, ev_env, check=False)
        if p.returncode != 3:
            raise RuntimeError("resume: expected exit 3 (paused), got %d:\n%s%s" % (p.returncode, p.stdout, p.stderr))
        return (read_stamps(stamps)[0] - t0) * 1000, t * 1000

    rows = []
    for level in levels:
        have = events_now()
        if level > have:
            log("events: appending %d events (to %d)" % (level - have, level))
            out = E.run([events_exe, work, "ev", str(level - have)], work).stdout
            append_rate = json.loads(out)
        status = []
        for _ in range(status_reps):
            t, p = E.timed(["git", "conference", "status", "ev"], work)
            status.append(t * 1000)
        at = events_now()
        resume = []
        resume_wall = []
        for _ in range(resume_reps):
            to_agent, wall = timed_resume()
            resume.append(to_agent)
            resume_wall.append(wall)
        rows.append({"events": at, "status_ms": median(status), "status_min_ms": min(status),
                     "resume_to_agent_ms": median(resume), "resume_round_ms": median(resume_wall)})
    # The same resume when the current round is long: its events are all after the latest
    # checkpoint (round.completed, conference.resumed), which resume's note replay used to walk.
    log("events: appending %d events in one round" % round_events)
    E.run([events_exe, work, "ev", str(round_events), "--one-round"], work)
    at = events_now()
    resume = []
    for _ in range(resume_reps):
        resume.append(timed_resume()[0])
        # Each resume records conference.resumed: put the long round back after it.
        E.run([events_exe, work, "ev", str(round_events), "--one-round"], work)
    rows.append({"events": at, "round_events": round_events, "resume_to_agent_ms": median(resume)})
    return rows


# ---------------------------------------------------------------------------------------------
# 4. Parallel efficiency

def bench_parallel(E, cache, counts, sleep_s, iterations, reps):
    rows = []
    agent = os.path.join(E.tmp, "agent.sh")
    write(agent, AGENT_SH, 0o755)
    for count in counts:
        phases, walls = [], []
        for rep in range(reps):
            log("parallel: %d researchers (run %d of %d)" % (count, rep + 1, reps))
            work = clone(E, repo_of_size(E, cache, 100), os.path.join(E.tmp, "par-%d-%d" % (count, rep)))
            write(os.path.join(work, "conference.md"),
                  conference_md("Bench parallel", agent, count=count, iterations=iterations,
                                max_total=count * iterations))
            E.git(work, "add", "conference.md")
            E.git(work, "commit", "-q", "-m", "conference.md")
            starts = os.path.join(E.tmp, "par-%d-%d.agent" % (count, rep))
            ends = os.path.join(E.tmp, "par-%d-%d.eval" % (count, rep))
            wall, p = E.timed(["git", "conference", "start", "par", "--yes"], work,
                              {"BENCH_STAMPS": starts, "BENCH_EVAL_STAMPS": ends,
                               "BENCH_EVAL_SLEEP": str(sleep_s)}, check=False)
            if p.returncode != 0:
                raise RuntimeError("parallel conference failed:\n" + p.stdout + p.stderr)
            s, e = read_stamps(starts), read_stamps(ends)
            if len(s) != count * iterations or len(e) != count * iterations:
                raise RuntimeError("parallel: %d agent runs, %d evaluations; expected %d" % (len(s), len(e), count * iterations))
            phases.append(max(e) - min(s))
            walls.append(wall)
        rows.append({"researchers": count, "phase_s": median(phases), "run_s": median(walls),
                     "phases_s": phases})
    base = rows[0]["phase_s"]
    for r in rows:
        r["ideal_s"] = base
        r["efficiency"] = base / r["phase_s"]
    return rows


# ---------------------------------------------------------------------------------------------
# Build, machine, table

def build(binary, helpers=True):
    """The binary, and the two bench helpers' executables (None when `helpers` is false: only
    the transition and events measurements need them)."""
    if binary is None:
        log("building the release binary (cargo build --release)")
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
        binary = os.path.join(ROOT, "target", "release", "git-conference")
    if not helpers:
        return binary, None, None
    log("building the bench helpers (cargo bench --no-run)")
    out = subprocess.run(["cargo", "bench", "--no-run", "--quiet", "--bench", "transition", "--bench", "events",
                          "--message-format=json"], cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    exes = {}
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and "bench" in msg["target"]["kind"]:
            exes[msg["target"]["name"]] = msg["executable"]
    return binary, exes["transition"], exes["events"]


def machine(tmp):
    def first(path, key):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"
    mem = first("/proc/meminfo", "MemTotal")
    try:
        mem = "%.1f GiB" % (int(mem.split()[0]) / 1024 / 1024)
    except (ValueError, IndexError):
        pass
    git = subprocess.run(["git", "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", tmp], stdout=subprocess.PIPE, text=True).stdout.strip()
    processes = sum(1 for name in os.listdir("/proc") if name.isdigit())
    return {"cpu": first("/proc/cpuinfo", "model name"), "nproc": os.cpu_count(), "memory": mem,
            "git": git, "kernel": platform.release(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "filesystem": fs or "?", "processes": processes}


def verdict(ok):
    return "PASS" if ok else "MISS"


def table(m, ovh, tr, ev, par, args, targets):
    L = []
    L.append("- Machine: %s · %s cores · %s · %s · Linux %s · %s" % (
        m["cpu"], m["nproc"], m["memory"], m["git"], m["kernel"], m["date"]))
    L.append("- Repositories on %s; %d processes on the machine" % (m["filesystem"], m["processes"]))
    L.append("- Command: python3 bench/run.py%s%s" % (" --quick" if args.quick else "",
             " --idle-processes %d" % args.idle_processes if args.idle_processes else ""))
    L.append("")
    L.append("1. Overhead per iteration (ms; median interval between agent starts; overhead = minus the agent+eval-only loop)")
    L.append("")
    L.append("| files | agent+eval only | git CLI loop | git-conference | CLI overhead | git-conference overhead | ratio |")
    L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in ovh:
        L.append("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |" % (
            r["files"], r["bare_ms"], r["cli_ms"], r["conf_ms"], r["cli_overhead_ms"], r["conf_overhead_ms"], r["ratio"]))
    L.append("")
    L.append("1b. The same overhead against the cheapest git command-line loop recording the same (per iteration: "
             "`git add -A`, `git commit`, `git notes add`, one event commit with hash-object / mktree / commit-tree, "
             "`git update-ref`; no revert)")
    L.append("")
    L.append("| files | cheapest CLI loop | cheapest CLI overhead | git-conference overhead | ratio |")
    L.append("| ---: | ---: | ---: | ---: | ---: |")
    for r in ovh:
        L.append("| %d | %.1f | %.1f | %.1f | %.2f |" % (
            r["files"], r["cheap_ms"], r["cheap_overhead_ms"], r["conf_overhead_ms"], r["ratio_cheap"]))
    L.append("")
    L.append("Goal of the recorder's redesign (issue #16; a figure, not yet a target): git-conference "
             "overhead at 10,000 files ≤ ¼ of the cheapest loop's.")
    L.append("")
    L.append("2. Round transition (ms; a new best that changed 10 files)")
    L.append("")
    L.append("| files | per worktree (git-conference) | %s worktrees | first round of a run (full checkout) | `git reset --hard` (CLI, 1 worktree) | fresh `git worktree add` | ratio |" % (tr[0]["researchers"] if tr else "N"))
    L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in tr:
        L.append("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |" % (
            r["files"], r["per_worktree_ms"], r["all_worktrees_ms"], r["full_checkout_ms"], r["cli_reset_ms"],
            r["fresh_add_ms"], r["ratio"]))
    L.append("")
    L.append("3. Status and resume latency (ms; process wall time)")
    L.append("")
    L.append("| events | `status` (median) | `status` (min) | `resume` until its agent starts | `resume` of one paused round, whole |")
    L.append("| ---: | ---: | ---: | ---: | ---: |")
    for r in ev:
        if "round_events" not in r:
            L.append("| %d | %.1f | %.1f | %.1f | %.1f |" % (
                r["events"], r["status_ms"], r["status_min_ms"], r["resume_to_agent_ms"], r["resume_round_ms"]))
    for r in ev:
        if "round_events" in r:
            L.append("")
            L.append("`resume` until its agent starts, %d events in the current round (of %d): %.1f ms" % (
                r["round_events"], r["events"], r["resume_to_agent_ms"]))
    L.append("")
    L.append("4. Parallel efficiency (research phase: first agent start to last evaluation end, median of runs; eval sleeps %.1f s, %d iterations per researcher)" % (
        args.sleep, args.par_iterations))
    L.append("")
    L.append("| researchers | research phase (s) | ideal (s) | efficiency | whole run (s) |")
    L.append("| ---: | ---: | ---: | ---: | ---: |")
    for r in par:
        L.append("| %d | %.2f | %.2f | %.2f | %.2f |" % (r["researchers"], r["phase_s"], r["ideal_s"], r["efficiency"], r["run_s"]))
    L.append("")
    L.append("Targets")
    L.append("")
    L.append("| target | measured | result |")
    L.append("| --- | --- | --- |")
    for name, measured, ok in targets:
        L.append("| %s | %s | %s |" % (name, measured, verdict(ok)))
    return "\n".join(L)


def evaluate_targets(ovh, tr, ev, par, sizes):
    targets = []
    mid = [r for r in ovh if r["files"] == sizes["overhead_target"]]
    if mid:
        r = mid[0]
        targets.append(("overhead per iteration at %d files ≤ ¼ of the git CLI loop's" % r["files"],
                        "%.1f ms vs %.1f ms (ratio %.2f)" % (r["conf_overhead_ms"], r["cli_overhead_ms"], r["ratio"]),
                        r["ratio"] <= 0.25))
    big = [r for r in tr if r["files"] == sizes["transition_target"]]
    if big:
        r = big[0]
        targets.append(("round transition (10 files changed) at %d files ≤ ⅕ of a fresh `git worktree add`" % r["files"],
                        "%.1f ms vs %.1f ms per worktree (ratio %.3f)" % (r["per_worktree_ms"], r["fresh_add_ms"], r["ratio"]),
                        r["ratio"] <= 0.2))
    levels = [r for r in ev if "round_events" not in r]
    if levels:
        last, first = levels[-1], levels[0]
        targets.append(("`status` at %d events < 100 ms" % last["events"], "%.1f ms" % last["status_ms"],
                        last["status_ms"] < 100))
        # "does not grow with the number of events": the largest log within noise of the smallest.
        growth = last["status_ms"] - first["status_ms"]
        targets.append(("`status` time does not grow with the events (%d → %d)" % (first["events"], last["events"]),
                        "%+.1f ms (%.1f → %.1f)" % (growth, first["status_ms"], last["status_ms"]),
                        growth <= max(5.0, 0.25 * first["status_ms"])))
    if par:
        r = par[-1]
        targets.append(("parallel efficiency at %d researchers ≥ 0.9" % r["researchers"], "%.2f" % r["efficiency"],
                        r["efficiency"] >= 0.9))
    return targets


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run for CI")
    ap.add_argument("--binary", help="the git-conference binary (default: cargo build --release)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--only", default="overhead,transition,events,parallel",
                    help="comma-separated subset of overhead,transition,events,parallel")
    ap.add_argument("--json", help="also write the raw results to this file")
    ap.add_argument("--sizes", help="comma-separated repository sizes (files) instead of the defaults")
    ap.add_argument("--idle-processes", type=int, default=0, metavar="N",
                    help="keep N idle processes running beside the measurements")
    args = ap.parse_args()
    if args.quick:
        sizes = {"overhead": [300, 2000], "overhead_target": 2000, "transition": [300, 2000],
                 "transition_target": 2000, "events": [100, 500, 2000], "round_events": 1000}
        iterations, reps, researchers = 6, 1, 2
        counts, args.sleep, args.par_iterations = [1, 2, 4], 0.2, 2
        status_reps, resume_reps = 3, 1
    else:
        sizes = {"overhead": [1000, 10000, 50000], "overhead_target": 10000, "transition": [1000, 10000, 50000],
                 "transition_target": 50000, "events": [100, 10000, 100000], "round_events": 3000}
        iterations, reps, researchers = 30, 3, 4
        counts, args.sleep, args.par_iterations = [1, 2, 4, 8], 0.5, 3
        status_reps, resume_reps = 5, 3
    if args.sizes:
        custom = [int(x) for x in args.sizes.split(",")]
        sizes.update({"overhead": custom, "transition": custom,
                      "overhead_target": custom[-1], "transition_target": custom[-1]})
    only = set(args.only.split(","))
    binary, transition_exe, events_exe = build(args.binary, bool(only & {"transition", "events"}))
    tmp = tempfile.mkdtemp(prefix="git-conference-bench-")
    idle = [subprocess.Popen(["sleep", "86400"], stdin=subprocess.DEVNULL)
            for _ in range(args.idle_processes)]
    try:
        E = Env(tmp, binary)
        cache = {}
        ovh = bench_overhead(E, cache, sizes["overhead"], iterations) if "overhead" in only else []
        tr = bench_transition(E, cache, sizes["transition"], researchers, reps, transition_exe) if "transition" in only else []
        ev = bench_events(E, cache, sizes["events"], events_exe, status_reps, resume_reps, sizes["round_events"]) if "events" in only else []
        par = bench_parallel(E, cache, counts, args.sleep, args.par_iterations, 1 if args.quick else 3) if "parallel" in only else []
        m = machine(tmp)
        targets = evaluate_targets(ovh, tr, ev, par, sizes)
        print(table(m, ovh, tr, ev, par, args, targets))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": m, "overhead": ovh, "transition": tr, "events": ev, "parallel": par,
                           "targets": [[n, v, ok] for n, v, ok in targets]}, f, indent=2)
        return 0 if all(ok for _, _, ok in targets) else 1
    finally:
        for p in idle:
            p.kill()
            p.wait()
        if args.keep:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
