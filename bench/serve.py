#!/usr/bin/env python3
"""The live page (`git conference serve`) at 10,000 attempts: first paint, update latency, idle
CPU and memory over time. Python 3 standard library only; needs Chromium and ChromeDriver
(/usr/bin/chromium, /usr/bin/chromedriver).

    python3 bench/serve.py                       # builds the release binary and the helper, 10 minutes of events
    python3 bench/serve.py --minutes 60          # the hour the issue asks for
    python3 bench/serve.py --attempts 1000 --minutes 1   # a quick look
    python3 bench/serve.py --binary OTHER/git-conference --grow OTHER/serve_attempts --minutes 0.5   # other builds
    python3 bench/serve.py --compare OLD/git-conference --cold 15   # first paint only, this build against OLD, alternated

What it does, in a temporary folder:
1. A real conference (the complement fixture, two researchers, paused after round 1), grown to
   --attempts attempts by benches/serve_attempts.rs (the store's own event commits, 100 attempts
   a round), then `git conference serve` on it.
2. First paint, cold: --cold times, a fresh `git conference serve` is started and the page is
   opened the moment it prints its address (as `serve --open` does), in a Chromium already
   running (it showed about:blank before): the first load after the server starts. Then warm:
   the same server's page loaded --reps more times. The figures are the browser's own (headless
   Chromium through ChromeDriver's WebDriver endpoints), from the navigation's start: first
   contentful paint, the page's HTML received whole (`responseEnd`), the end of the page's first
   full drawing by its script (its `rendered` mark), and the first paint: the frame that shows
   that drawing, painted (its `painted` mark, set by a task queued from that frame's callback,
   so after its layout and paint; a build whose page lacks it is measured by `rendered`). The git objects are in the OS's page
   cache (the conference was just grown): cold means the server's, not the disk's.
3. Update: --reps times, `git conference steer NAME "…"` records an event while the page is open;
   the figure is from starting that command to the end of the page's drawing that follows
   (its `rendered` mark, on the same clock). It includes starting the command.
4. Idle CPU: the server's CPU ticks (/proc/<pid>/stat, 10 ms each) over --idle seconds with the
   page open and nothing recorded.
5. Memory: one event a second (`steer`) for --minutes, the page open and following; the
   server's resident memory read before each event, and every 10 s the least (what it holds
   between requests, on which the trend is computed) and the most (a request in flight) of
   those readings.

With --own-commits each grown attempt is a commit of its own (a child of its researcher's head),
so that the attempt tree has a node per attempt (10,000 reverted attempts hanging off two heads);
without it the grown attempts name their researcher's head and the tree is a few nodes.

With --compare OLD, only first paint is measured, --cold times for each binary in turn (a fresh
server of this build, then one of OLD, ...; each loaded cold, then once warm), so that both meet
the same load on a shared machine; then, without the browser, each binary's time from starting
`serve` to its address printed, and the page's time to its last byte (Python's http.client on a
new connection: request sent to body read whole) on the first load after start and on the next,
asking for identity, gzip and br in turn. On a build whose page draws the attempt tree, each warm
load also gives the time to the folded tree drawn (asked for after the first paint) and, after a
click on "show the whole tree", to every node drawn.

Prints the figures as Markdown (BENCHMARKS.md has a run); --json FILE writes them raw. Exits 1
when a target is missed: first paint (the painted frame) <= 300 ms (cold and warm medians), update <= 1 s, no CPU while idle (at most one
tick), memory flat (its trend over the second half adds at most 4 MiB, or 10%, an hour).
"""

import argparse
import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "big"


def log(msg):
    print("[serve bench] " + msg, file=sys.stderr, flush=True)


def build(binary=None, grow=None):
    """The release binary and the grow helper's executable (unless given)."""
    if binary is None:
        log("building the release binary")
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    if grow is not None:
        return binary, grow
    log("building benches/serve_attempts.rs")
    out = subprocess.run(["cargo", "bench", "--no-run", "--quiet", "--bench", "serve_attempts",
                          "--message-format=json"], cwd=ROOT, check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    grow = None
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            grow = msg["executable"]
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                                     cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout)
    return binary or os.path.join(meta["target_directory"], "release", "git-conference"), grow


class Env:
    """A hermetic environment: its own HOME, no system git config, the binary on PATH."""

    def __init__(self, tmp, binary):
        self.bin = os.path.join(tmp, "bin")
        self.home = os.path.join(tmp, "home")
        os.makedirs(self.bin)
        os.makedirs(self.home)
        os.symlink(os.path.abspath(binary), os.path.join(self.bin, "git-conference"))
        self.vars = dict(os.environ, HOME=self.home, GIT_CONFIG_NOSYSTEM="1", TZ="UTC",
                         PATH=self.bin + os.pathsep + os.environ.get("PATH", ""),
                         GIT_AUTHOR_NAME="Bench", GIT_AUTHOR_EMAIL="bench@example.com",
                         GIT_COMMITTER_NAME="Bench", GIT_COMMITTER_EMAIL="bench@example.com")

    def run(self, args, cwd, check=True):
        return subprocess.run(args, cwd=cwd, env=self.vars, check=check, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


CONFIG = """# Conference: Big

## Goal
Lower the score.

## Mode
metric

## Success Metric
- **Metric:** score
- **Target:** none
- **Direction:** minimize

## Researchers
- **Count:** 2
- **Iterations per round:** 2
- **Max rounds:** 5000

## Search Space Partitioning
**Strategy:** free

## Noise Handling
- **Noise runs:** 1

## Constraints
- **Max total iterations:** 100000
- **Pause every:** 1

## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh

## Agent
- command: ./agent.sh
- timeout: 30s
"""


def make_conference(E, tmp, grow, attempts, own_commits=False):
    repo = os.path.join(tmp, "repo")
    shutil.copytree(os.path.join(ROOT, "fixtures", "complement"), repo)
    with open(os.path.join(repo, "conference.md"), "w") as f:
        f.write(CONFIG)
    E.run(["git", "init", "-q", "-b", "main"], repo)
    E.run(["git", "add", "-A"], repo)
    E.run(["git", "commit", "-qm", "fixture"], repo)
    started = E.run(["git", "conference", "start", NAME], repo, check=False)
    if started.returncode != 3:
        raise RuntimeError("start did not pause after round 1: " + started.stdout + started.stderr)
    rounds = max(0, -(-(attempts - 4) // 100))
    log("growing the conference by %d rounds of 100 attempts" % rounds)
    E.run([grow, repo, NAME, str(rounds), "100"] + (["--own-commits"] if own_commits else []), repo)
    st = json.loads(E.run(["git", "conference", "status", NAME, "--format", "json"], repo).stdout)
    return repo, st["total_iterations"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """Headless Chromium through ChromeDriver's W3C WebDriver endpoints."""

    def __init__(self, tmp):
        port = free_port()
        self.base = "http://127.0.0.1:%d" % port
        self.driver = subprocess.Popen(["/usr/bin/chromedriver", "--port=%d" % port],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--user-data-dir=" + os.path.join(tmp, "chromium-profile")]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium", "args": args}}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())["value"]

    def open(self, url):
        self.call("POST", "/session/%s/url" % self.session, {"url": url})

    def run(self, script):
        return self.call("POST", "/session/%s/execute/sync" % self.session, {"script": script, "args": []})

    def wait_for(self, script, limit=30):
        end = time.time() + limit
        while time.time() < end:
            v = self.run(script)
            if v:
                return v
            time.sleep(0.02)
        raise RuntimeError("waited %ss for: %s" % (limit, script))

    def close(self):
        try:
            self.call("DELETE", "/session/%s" % self.session)
        finally:
            self.driver.kill()
            self.driver.wait()


def start_server(E, repo):
    proc = subprocess.Popen([os.path.join(E.bin, "git-conference"), "serve", NAME, "--port", "0"],
                            cwd=repo, env=E.vars, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line.startswith("Serving "):
        raise RuntimeError("serve printed %r" % line)
    return proc, line.split(" ", 1)[1].strip()


def ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def load(browser, url):
    """One load of the page: the browser's own figures, from the navigation's start."""
    browser.open(url)
    browser.wait_for("return performance.getEntriesByName('rendered').length > 0")
    try:  # a build before the page marked its painted frame has only `rendered`
        browser.wait_for("return performance.getEntriesByName('painted').length > 0", limit=2)
    except RuntimeError:
        pass
    return browser.run("""
        const nav = performance.getEntriesByType('navigation')[0];
        const fcp = performance.getEntriesByName('first-contentful-paint')[0];
        const painted = performance.getEntriesByName('painted')[0];
        return {response_end: nav.responseEnd, fcp: fcp ? fcp.startTime : null,
                rendered: performance.getEntriesByName('rendered')[0].startTime,
                painted: painted ? painted.startTime : null,
                bytes: nav.transferSize || nav.encodedBodySize, protocol: nav.nextHopProtocol};""")


def first_paint(browser, url, reps):
    rows = []
    for _ in range(reps):
        browser.open("about:blank")
        rows.append(load(browser, url))
    return rows


def cold_paint(E, repo, browser, reps):
    """Each time a fresh server, its page opened as soon as it printed its address."""
    rows = []
    for _ in range(reps):
        browser.open("about:blank")
        server, url = start_server(E, repo)
        try:
            rows.append(load(browser, url))
        finally:
            server.kill()
            server.wait()
    return rows


def update_latency(E, repo, browser, reps):
    out = []
    for i in range(reps):
        text = "bench update %d %f" % (i, time.time())
        browser.run("performance.clearMarks('rendered'); return 1")
        t0 = time.time() * 1000
        E.run(["git", "conference", "steer", NAME, text], repo)
        browser.wait_for("return document.getElementById('guidance') && "
                         "document.getElementById('guidance').textContent.includes(%s)" % json.dumps(text))
        marks = browser.run("return performance.getEntriesByName('rendered')"
                            ".map(m => performance.timeOrigin + m.startTime)")
        out.append(min(m for m in marks if m >= t0) - t0)
        time.sleep(0.5)
    return out


def memory_over_time(E, repo, pid, minutes):
    """One event a second for `minutes`; the server's resident memory read just before each
    event, summed up every 10 s as the least and the most of those readings. The least is what
    the server holds between requests (the trend is computed on it); the most includes a
    request's own buffers caught in flight (a page's data at 10,000 attempts is megabytes)."""
    samples, events, window = [], 0, []
    start = time.time()
    next_sample = start + 10

    def summed_up(window):
        return {"s": round(time.time() - start), "rss_kib": min(window),
                "rss_max_kib": max(window)}

    while time.time() - start < minutes * 60:
        window.append(rss_kib(pid))
        if time.time() >= next_sample:
            samples.append(summed_up(window))
            window = []
            next_sample += 10
        E.run(["git", "conference", "steer", NAME, "memory event %d" % events], repo)
        events += 1
        time.sleep(max(0.0, 1.0 - (time.time() - start) % 1.0))
    window.append(rss_kib(pid))
    samples.append(summed_up(window))
    return samples, events


def growth_per_hour(samples):
    """The resident memory's trend over the second half of the samples (least squares), in MiB an
    hour: the first half holds the warm-up (the page's first loads, the allocator's pools)."""
    half = samples[len(samples) // 2:]
    if len(half) < 3:
        return 0.0
    xs = [s["s"] for s in half]
    ys = [s["rss_kib"] / 1024 for s in half]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope * 3600


def flat(samples):
    """Flat: at that trend, an hour adds at most 4 MiB (or 10% of what it holds)."""
    mean = statistics.mean(s["rss_kib"] / 1024 for s in samples)
    return growth_per_hour(samples) <= max(4.0, 0.10 * mean)


def use(E, binary):
    """Makes `git conference` in the environment run `binary`."""
    link = os.path.join(E.bin, "git-conference")
    os.unlink(link)
    os.symlink(os.path.abspath(binary), link)


def compare(E, repo, browser, binaries, reps):
    """First paint of each binary in turn, `reps` rounds: a fresh server loaded cold, then warm."""
    rows = {b: {"cold": [], "warm": [], "tree": []} for b in binaries}
    for i in range(reps):
        log("round %d of %d" % (i + 1, reps))
        for b in binaries:
            use(E, b)
            browser.open("about:blank")
            server, url = start_server(E, repo)
            try:
                rows[b]["cold"].append(load(browser, url))
                browser.open("about:blank")
                rows[b]["warm"].append(load(browser, url))
                rows[b]["tree"].append(tree_times(browser))
            finally:
                server.kill()
                server.wait()
    return rows


def tree_times(browser):
    """The attempt tree, on a build whose page draws one (None on another): ms from the
    navigation's start to the folded tree drawn (its `tree-drawn` mark; it is asked for after
    the first paint), and from the click on "show the whole tree" to every node drawn."""
    if not browser.run("return typeof treeView !== 'undefined'"):
        return None
    browser.wait_for("return performance.getEntriesByName('tree-drawn').length > 0", limit=60)
    folded = browser.run("return performance.getEntriesByName('tree-drawn')[0].startTime")
    shown = browser.run("return document.querySelectorAll('#tree-table tr.tnode').length")
    t = browser.run("const t = performance.now(); document.getElementById('tree-toggle').click(); return t")
    browser.wait_for("return performance.getEntriesByName('tree-drawn').length > 1", limit=60)
    whole = browser.run("return performance.getEntriesByName('tree-drawn')[1].startTime") - t
    total = browser.run("return treeView.data.total")
    return {"folded": folded, "shown": shown, "whole": whole, "total": total}


def fetch_page(url, encoding):
    """GET the page with `Accept-Encoding: encoding` on a new connection: (ms to its last byte,
    bytes received)."""
    import http.client
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    t0 = time.perf_counter()
    conn.request("GET", u.path + "?" + u.query, headers={"Accept-Encoding": encoding})
    body = conn.getresponse().read()
    took = (time.perf_counter() - t0) * 1000
    conn.close()
    return took, len(body)


def server_side(E, repo, binaries, reps):
    """Per binary, `reps` fresh servers: ms from starting `serve` to its address printed, then
    the page's time to last byte on the first load (cold) and the next (warm), for each
    encoding in turn (a fresh server per encoding for the cold figure)."""
    rows = {b: [] for b in binaries}
    for _ in range(reps):
        for b in binaries:
            use(E, b)
            for encoding in ("identity", "gzip", "br"):
                t0 = time.perf_counter()
                server, url = start_server(E, repo)
                started = (time.perf_counter() - t0) * 1000
                try:
                    cold, size = fetch_page(url, encoding)
                    warm, _ = fetch_page(url, encoding)
                finally:
                    server.kill()
                    server.wait()
                rows[b].append({"encoding": encoding, "started": started, "cold": cold,
                                "warm": warm, "bytes": size})
    return rows


def report_server_side(rows):
    print("| the page's time to last byte, median of %d | encoding | bytes | address printed after start | cold (first load) | warm |"
          % (len(next(iter(rows.values()))) // 3))
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for b, runs in rows.items():
        for encoding in ("identity", "gzip", "br"):
            mine = [r for r in runs if r["encoding"] == encoding]
            median = lambda key: statistics.median(r[key] for r in mine)
            print("| %s | %s | %d | %.0f ms | %.0f ms | %.0f ms |" % (
                b, encoding, mine[0]["bytes"], median("started"), median("cold"), median("warm")))


def report_compare(attempts, binaries, rows):
    median = lambda paint, key: statistics.median(r[key] for r in paint if r[key] is not None)
    print("| at %d attempts, median of %d | HTML received | first contentful paint | page drawn | "
          "its frame painted (each) |" % (attempts, len(rows[binaries[0]]["cold"])))
    print("| --- | ---: | ---: | ---: | --- |")
    for b in binaries:
        for kind in ("cold", "warm"):
            paint = rows[b][kind]
            print("| %s, %s (%.2f MB) | %.0f ms | %.0f ms | %.0f ms | **%s** (%s) |" % (
                b, kind, paint[0]["bytes"] / 1e6, median(paint, "response_end"), median(paint, "fcp"),
                median(paint, "rendered"), ms(median_painted(paint)),
                ", ".join(ms(r["painted"]) for r in paint)))
    for b in binaries:
        trees = [t for t in rows[b]["tree"] if t]
        if not trees:
            continue
        print()
        print("| %s, the attempt tree (warm loads, median of %d) | figure |" % (b, len(trees)))
        print("| --- | ---: |")
        print("| folded tree drawn (%d of %d nodes), from the navigation's start | %.0f ms (%s) |" % (
            trees[0]["shown"], trees[0]["total"], statistics.median(t["folded"] for t in trees),
            ", ".join("%.0f" % t["folded"] for t in trees)))
        print("| whole tree drawn, from the click | %.0f ms (%s) |" % (
            statistics.median(t["whole"] for t in trees), ", ".join("%.0f" % t["whole"] for t in trees)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attempts", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument("--binary", help="measure this git-conference binary instead of building one")
    ap.add_argument("--grow", help="the executable of benches/serve_attempts.rs, instead of building it")
    ap.add_argument("--compare", nargs="+", metavar="OLD",
                    help="first paint only, against these other git-conference binaries")
    ap.add_argument("--own-commits", action="store_true",
                    help="each grown attempt a commit of its own: the attempt tree then has a node per attempt")
    ap.add_argument("--idle", type=int, default=30)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    binary, grow = build(args.binary, args.grow)
    tmp = tempfile.mkdtemp(prefix="serve-bench-")
    E = Env(tmp, binary)
    repo, attempts = make_conference(E, tmp, grow, args.attempts, args.own_commits)
    browser = Browser(tmp)
    if args.compare:
        try:
            rows = compare(E, repo, browser, [binary] + args.compare, args.cold)
        finally:
            browser.close()
        log("the page's time to last byte, fresh servers")
        served = server_side(E, repo, [binary] + args.compare, args.cold)
        report_compare(attempts, [binary] + args.compare, rows)
        print()
        report_server_side(served)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    server = None
    try:
        log("cold first paint at %d attempts, %d fresh servers" % (attempts, args.cold))
        cold = cold_paint(E, repo, browser, args.cold)
        server, url = start_server(E, repo)
        log("warm first paint at %d attempts" % attempts)
        load(browser, url)
        paint = first_paint(browser, url, args.reps)
        log("update latency")
        update = update_latency(E, repo, browser, args.reps)
        log("idle CPU over %d s" % args.idle)
        t = ticks(server.pid)
        time.sleep(args.idle)
        idle = ticks(server.pid) - t
        log("memory over %.1f minutes of one event a second" % args.minutes)
        samples, events = memory_over_time(E, repo, server.pid, args.minutes)
    finally:
        browser.close()
        if server:
            server.kill()
            server.wait()
    report(attempts, cold, paint, update, idle, args.idle, samples, events, args)
    shutil.rmtree(tmp, ignore_errors=True)


def ms(v):
    return "—" if v is None else "%.0f ms" % v


def median_painted(paint):
    """The median time to the painted frame showing the whole page; None for a build whose page
    does not mark it."""
    times = [r["painted"] for r in paint if r.get("painted") is not None]
    return statistics.median(times) if len(times) == len(paint) else None


def paint_rows(label, paint, verdict):
    """The lines of one set of loads; whether its first paint (the frame showing the whole page
    painted; the end of its drawing for a build that does not mark that frame) meets 300 ms."""
    median = lambda key: statistics.median(r[key] for r in paint if r[key] is not None)
    painted = median_painted(paint)
    first = painted if painted is not None else median("rendered")
    ok = first <= 300
    print("| %s: first contentful paint (median of %d) | %.0f ms | | |" % (label, len(paint), median("fcp")))
    print("| %s: the page's HTML received whole (median; %.1f MB, %s) | %.0f ms | | |"
          % (label, paint[0]["bytes"] / 1e6, paint[0]["protocol"], median("response_end")))
    print("| %s: whole page drawn by its script (median; each: %s) | %.0f ms | | |"
          % (label, ", ".join("%.0f" % r["rendered"] for r in paint), median("rendered")))
    print("| %s: first paint, the frame showing it painted (median; each: %s) | %s | <= 300 ms | %s |"
          % (label, ", ".join(ms(r.get("painted")) for r in paint), ms(painted), verdict(ok)))
    return ok


def report(attempts, cold, paint, update, idle, idle_s, samples, events, args):
    res = {"attempts": attempts, "cold": cold, "paint": paint, "update_ms": update,
           "idle_ticks": idle, "idle_s": idle_s, "memory": samples, "events": events}
    verdict = lambda ok: "PASS" if ok else "MISS"
    print("| at %d attempts | figure | target | |" % attempts)
    print("| --- | ---: | ---: | --- |")
    ok_cold = paint_rows("cold (first load after `serve` starts)", cold, verdict)
    ok_paint = paint_rows("warm (the same server again)", paint, verdict) and ok_cold
    ok_update, ok_idle, ok_mem = max(update) <= 1000, idle <= 1, flat(samples)
    print("| update: `steer` started to the page redrawn (median; max %.0f ms) | %.0f ms | <= 1000 ms | %s |"
          % (max(update), statistics.median(update), verdict(ok_update)))
    print("| CPU of `serve` over %d s idle, page open | %d ticks (%d ms) | none | %s |"
          % (idle_s, idle, idle * 10, verdict(ok_idle)))
    first, last = samples[0]["rss_kib"], samples[-1]["rss_kib"]
    print("| resident memory of `serve` between requests, %d events over %.0f min | %.1f → %.1f MiB (with requests in flight at most %.1f); trend %+.1f MiB/hour | flat | %s |"
          % (events, args.minutes, first / 1024, last / 1024, max(s["rss_max_kib"] for s in samples) / 1024,
             growth_per_hour(samples), verdict(ok_mem)))
    print()
    step = samples[1]["s"] - samples[0]["s"] if len(samples) > 1 else 0
    print("Memory between requests (MiB), every %d s: %s" % (step, " ".join("%.1f" % (s["rss_kib"] / 1024) for s in samples)))
    print("Memory at most, requests in flight (MiB), every %d s: %s" % (step, " ".join("%.1f" % (s["rss_max_kib"] / 1024) for s in samples)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    if not (ok_paint and ok_update and ok_idle and ok_mem):
        sys.exit(1)


if __name__ == "__main__":
    main()
