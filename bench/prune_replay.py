#!/usr/bin/env python3
"""An offline replay of `bench/prune_quality.py`'s fixture, to design pruning rules cheaply:
ESTIMATES, never the bench's figures.

The fixture is deterministic: a tree's curve depends only on its params.txt, and the scripted
researcher's n-th draw only on the seed and n. So the whole conference can be replayed here
without the binary, the budget counted in simulated seconds: each attempt costs `--overhead`
seconds outside its evaluation (agent, commit, bookkeeping) and its evaluation `--startup` plus a
step's time per reading it printed (a pruned run ends at the reading that decided it, plus the
engine's 25 ms stop). A rule here is a Python port of `src/protocol/prune.rs`'s `decide`, with
knobs; the port is checked against the fixture (`--check`: the curves match `eval.py`'s output)
and its figures for the shipped rule should be near the bench's (BENCHMARKS.md).

    python3 bench/prune_replay.py [--seeds 20] [--budget 90] [--researcher local|night]
                                  [--shape smooth|plateau] [--budget-on wall|eval]
                                  [--rules before,shipped,...] [--check]
    python3 bench/prune_replay.py --log LOG.jsonl [--floor 0.0037] [--rules ahead,shipped]
"""

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prune_quality  # noqa: E402  (the fixture's texts: EVAL_PY, PROPOSE_PY, BASELINE_PARAMS)

NOISE_WIDTH = 2.0 * math.sqrt(2.0)


# --- the fixture, as eval.py and agent.py compute it -------------------------------------------

def fixture_curve(text, steps=20, shape="smooth"):
    """The readings eval.py prints for params `text` (rounded as printed); the last is the metric.
    `shape` is eval.py's PRUNE_SHAPE."""
    p = dict(line.split("=", 1) for line in text.split())
    x = math.log10(float(p["lr"]))
    wd = float(p["wd"])
    rng = random.Random(int(hashlib.sha256(text.encode()).hexdigest()[:12], 16))
    start = 4.0
    floor = 1.0 + 0.35 * (x + 2.6) ** 2 - 0.8 * wd + (0.6 * (x + 1.6) if x > -1.6 else 0.0)
    rate = 4.0 * 10 ** (0.55 * (x + 3.0)) * (1.0 - 2.5 * wd)
    offset = rng.gauss(0.0, 0.004)
    escape = 0.35 - 0.45 * (x + 2.6) + 0.5 * wd

    def level(t):
        if shape != "plateau":
            return floor + (start - floor) * math.exp(-rate * t)
        u = 0.03 * math.log1p(math.exp((t - escape) / 0.03))
        return (floor + (2.3 - floor) * math.exp(-8.0 * u)
                + (start - 2.3) * math.exp(-4.0 * rate * t))

    out = []
    for s in range(1, steps + 1):
        t = s / steps
        v = level(t) + offset + rng.gauss(0.0, 0.003)
        out.append((s, float(f"{v:.5f}")))
    return out


# agent.py's proposal, the very text the bench's agent runs.
_PROPOSAL = {}
exec(prune_quality.PROPOSE_PY, _PROPOSAL)


def draw(seed, n, best_text, researcher):
    """agent.py's n-th proposal for `seed`, around the best's params."""
    return _PROPOSAL["params_text"](*_PROPOSAL["propose"](seed, n, best_text, researcher))


# --- the rule: a port of src/protocol/prune.rs, with knobs ------------------------------------

def div(a, b):
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * (1 if math.copysign(1, b) > 0 else -1)
    return a / b


def interpolate(points, at, hold_end):
    after = next((i for i, (s, _) in enumerate(points) if s >= at), None)
    if after is None:
        return points[-1][1] if hold_end and points else None
    if points[after][0] == at:
        return points[after][1]
    if after == 0:
        return None
    (s0, v0), (s1, v1) = points[after - 1], points[after]
    return v0 + (at - s0) / (s1 - s0) * (v1 - v0)


def det3(m):
    return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))


def quadratic_residuals(points):
    first, last = points[0][0], points[-1][0]
    mid, span = (first + last) / 2.0, max(last - first, 1.0)
    xs = [(s - mid) / span for s, _ in points]
    mom = lambda k: sum(x ** k for x in xs)
    tgt = lambda k: sum(y * x ** k for x, (_, y) in zip(xs, points))
    m = [[mom(0), mom(1), mom(2)], [mom(1), mom(2), mom(3)], [mom(2), mom(3), mom(4)]]
    t = [tgt(0), tgt(1), tgt(2)]
    d = det3(m)
    if abs(d) < 1e-12:
        return None
    coef = []
    for j in range(3):
        mj = [row[:] for row in m]
        for row, ti in zip(mj, t):
            row[j] = ti
        coef.append(det3(mj) / d)
    return sum((y - (coef[0] + coef[1] * x + coef[2] * x * x)) ** 2 for x, (_, y) in zip(xs, points))


def reading_noise(curve):
    points = sorted(curve)
    var = [r / 2.0 for r in (quadratic_residuals(points[i:i + 5]) for i in range(len(points) - 4))
           if r is not None]
    if not var:
        return None
    return math.sqrt(statistics.median(var) / math.log(2))


def line_residuals(points):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    if math.isnan(sxx) or sxx <= 1e-300:
        return math.inf
    slope = sxy / sxx
    return sum((y - my - slope * (x - mx)) ** 2 for x, y in points)


GRID = [10 ** (-3.0 + 4.7 * i / 120.0) for i in range(121)]


def best_fit(points, phi):
    return min(line_residuals([(phi(x, k), y) for x, y in points]) for k in GRID)


def chi2_q(df, z):
    v = 2.0 / (9.0 * df)
    return df * (1.0 - v + z * math.sqrt(v)) ** 3


def pace(own):
    if len(own) < 2:
        return 0.0
    (s0, v0), (s1, v1) = own[-2], own[-1]
    if s1 <= s0:
        return 0.0
    return max((v0 - v1) / (s1 - s0), 0.0)


def solve_increasing(f, target, lo, hi):
    if f(hi) < target:
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def nearest(points, x):
    best = None
    for p in points:
        if best is None or abs(p[0] - x) < abs(best[0] - x):
            best = p
    return best


def exp_phi(x, r):
    return math.exp(-r * x)


def pow_phi(x, c):
    return x ** -c


def profile_end(points, phi, xe, noise, c):
    """The lowest value at `xe` of a + b·phi(x, k) over the members whose residuals are within
    noise²·c of the best fit's (k on the grid; a, b in the fit's confidence ellipse)."""
    n = len(points)
    if n < 3 or noise <= 0:
        return None
    fits = []
    for k in GRID:
        f = [phi(x, k) for x, _ in points]
        sf, sff = sum(f), sum(v * v for v in f)
        sy = sum(y for _, y in points)
        sfy = sum(v * y for v, (_, y) in zip(f, points))
        det = n * sff - sf * sf
        if det <= 1e-300:
            continue
        b = (n * sfy - sf * sy) / det
        a = (sy - b * sf) / n
        rss = sum((y - a - b * v) ** 2 for v, (_, y) in zip(f, points))
        fe = phi(xe, k)
        var = (sff - 2 * fe * sf + n * fe * fe) / det
        fits.append((rss, a + b * fe, var))
    if not fits:
        return None
    budget = min(r for r, _, _ in fits) + noise * noise * c
    return min(pred - math.sqrt(max(budget - rss, 0.0) * var)
               for rss, pred, var in fits if rss <= budget)


def reachable_gain(own, step, end_step, noise, knobs):
    slack = knobs["slack"] * noise
    s, left = float(step), float(end_step - step)
    now = own[-1][1]
    before = [p for p in own if 1 <= p[0] < step]
    too_early = pace(own) * left + slack
    if len(before) < 2:
        return too_early
    b = nearest(before[1:], s / 2.0)
    if b is None:
        return too_early
    sb, vb = b
    a = nearest([p for p in before if p[0] < sb], s / 4.0)
    if a is None:
        return too_early
    sa, va = a
    xa, xb, xe = sa / s, sb / s, end_step / s
    g1, g2 = va - vb, vb - now
    low, high = g1 - slack, max(g2, 0.0) + slack
    paced = high * left / (s - sb)
    fitted = [(x / s, v) for x, v in own if x >= 1]

    def family(phi):
        if low <= 0.0:
            return None
        ratio = lambda k: div(phi(xa, k) - phi(xb, k), phi(xb, k) - phi(1.0, k))
        target = div(low, high)
        slowest = ratio(1e-9)
        if math.isnan(slowest) or target <= slowest:
            return None
        k = solve_increasing(ratio, target, 1e-9, 50.0)
        rest = high * div(phi(1.0, k) - phi(xe, k), phi(xb, k) - phi(1.0, k))
        return rest if math.isfinite(rest) else None

    def ruled_out(phi):
        df = max(len(fitted) - 3, 0)
        return noise > 0 and df > 0 and best_fit(fitted, phi) > noise * noise * chi2_q(df, knobs["z"])

    if knobs.get("profile"):
        # The profile bound: the lowest end of any family member whose fit to all the readings
        # is within the χ²₁ quantile `profile` (in noise variances) of the family's best fit.
        ends = [profile_end(fitted, phi, xe, noise, knobs["profile"])
                for phi in (exp_phi, pow_phi) if not ruled_out(phi)]
        ends = [e for e in ends if e is not None]
        if not ends:
            return paced
        return min(paced, max(now - min(ends), 0.0))
    exponential = None
    if not ruled_out(exp_phi):
        e = family(exp_phi)
        exponential = paced if e is None else e
    power = None
    if not ruled_out(pow_phi):
        g = family(pow_phi)
        if g is not None:
            power = g
        elif g1 + slack > 0.0 and div(g2 - slack, g1 + slack) > math.log(1 / xb) / math.log(xb / xa):
            power = None
        else:
            power = paced
    if exponential is not None and power is not None:
        return min(paced, max(exponential, power))
    if exponential is not None or power is not None:
        return min(paced, exponential if exponential is not None else power)
    return paced


SPEEDUP = 2.0


def speedup_guard(ref, noise, until="last"):
    """Where the reference left a plateau: it gained more than SPEEDUP times as fast per reading
    as over an earlier stretch, and by more than 2·√2 reading-noise sds. `last`: the last such
    step; `peak`: the step of its largest gain from the first such step on. 0 when it never sped
    up."""
    guard, low, first, peak = 0, math.inf, None, (0, -math.inf)
    for (_, v0), (s1, v1) in zip(ref, ref[1:]):
        g = v0 - v1
        if g > SPEEDUP * max(low, 0.0) + NOISE_WIDTH * noise:
            guard = s1
            first = s1 if first is None else first
        if first is not None and g > peak[1]:
            peak = (s1, g)
        low = min(low, g)
    return guard if until == "last" else peak[0]


def decide(curve, reference, noise, knobs):
    """Whether the run with readings `curve` is pruned after its latest reading (minimize)."""
    margin = max(knobs["floor"], knobs["margin"] * noise)
    if len(curve) < max(knobs["warmup"], 1):
        return False
    step, value = curve[-1]
    ref = sorted(reference)
    at = interpolate(ref, step, True)
    if at is None:
        return False
    end_step, end = ref[-1]
    if knobs.get("guard") and step <= speedup_guard(ref, noise, knobs["guard"]):
        return False
    # Only a run behind the reference at its own step, by more than `behind` sds (and the
    # conference's floor), may be stopped.
    if "behind" in knobs and value - at <= max(knobs["floor"], knobs["behind"] * noise):
        return False
    gain = 0.0 if step >= end_step else reachable_gain(sorted(curve), step, end_step, noise, knobs)
    return value - gain - end > margin


# The knobs: `margin` (reading-noise sds the end may be behind by), `slack` (sds each window's
# gain is widened by), `z` (the family fit's χ² quantile, as a normal deviate), `floor` (the
# conference's noise threshold: 0.1% of the fixture's baseline), `warmup`.
BEFORE = {"margin": NOISE_WIDTH, "slack": NOISE_WIDTH, "z": 3.090232, "floor": 0.0011, "warmup": 2}
RULES = {
    # The rule until 27 Nov 2026: the end within 2·√2 sd of the best's end goes on.
    "before": BEFORE,
    # 27 Nov 2026: the best's end is a known number (the keep rule's), so only the run's own end
    # reading is noisy: 2 sd. It stopped runs still ahead of the best's curve, and on a real
    # training that stopped a run on a plateau it was about to leave (BENCHMARKS.md).
    "ahead": dict(BEFORE, margin=2.0),
    # Also behind the reference at the run's own step, by more than `behind` sds.
    "behind0": dict(BEFORE, margin=2.0, behind=0.0),
    "behind2": dict(BEFORE, margin=2.0, behind=2.0),
    "behind28": dict(BEFORE, margin=2.0, behind=NOISE_WIDTH),
    # The rule now: behind by 2 sd too, and no decision before the best's curve
    # stopped speeding up (where it left a plateau: the last step, `speedup_guard`).
    "shipped": dict(BEFORE, margin=2.0, behind=2.0, guard="last"),
    # Tried: judged from the step of the best's fastest gain after it left the plateau on.
    "peak": dict(BEFORE, margin=2.0, behind=2.0, guard="peak"),
    # Tried: narrower margins (sd), narrower windows (slack), a looser family fit (z at 99%).
    "beat1": dict(BEFORE, margin=1.0, floor=0.0),
    "beat0": dict(BEFORE, margin=0.0, floor=0.0),
    "beat2s2": dict(BEFORE, margin=2.0, slack=2.0),
    "beat1s2": dict(BEFORE, margin=1.0, slack=2.0, floor=0.0),
    "beat0s2": dict(BEFORE, margin=0.0, slack=2.0, floor=0.0),
    "beat1s1": dict(BEFORE, margin=1.0, slack=1.0, floor=0.0),
    "beat0s1": dict(BEFORE, margin=0.0, slack=1.0, floor=0.0),
    "beat0z99": dict(BEFORE, margin=0.0, z=2.326348, floor=0.0),
    # The profile bound (see profile_end) with the χ²₁ quantile at 99.9%, 99%, 95%.
    "profile999": dict(BEFORE, margin=2.0, profile=10.83),
    "profile99": dict(BEFORE, margin=2.0, profile=6.63),
    "profile95": dict(BEFORE, margin=2.0, profile=3.84),
    # Oracles (no rule reading curves can do better): stop at reading N every attempt that will
    # not be kept.
    "oracle": 2, "oracle3": 3, "oracle4": 4, "oracle6": 6,
    # Oracles that cannot tell near-ties: (N, GAP) stops at reading N every attempt that ends at
    # least GAP worse than the best, and lets nearer ties finish (a negative GAP also stops
    # attempts that would have been kept by less than -GAP).
    "tie03@4": (4, 0.03), "tie01@4": (4, 0.01), "tie005@4": (4, 0.005), "tie00@4": (4, 0.0),
    "tie-003@4": (4, -0.003), "tie-01@4": (4, -0.01),
}


# --- the conference --------------------------------------------------------------------------

def conference(seed, rule, args):
    """One conference: (kept, evaluation seconds, pruned, wrongly pruned, final best, attempts,
    readings of pruned runs)."""
    best_text = prune_quality.BASELINE_PARAMS
    best_curve = fixture_curve(best_text, args.steps, args.shape)
    best = best_curve[-1][1]
    full_eval = args.startup + args.steps * args.step_s
    clock = eval_s = full_eval
    noise = reading_noise(best_curve) or 0.0
    kept = pruned = wrong = n = 0
    stopped_at = []
    while (eval_s if args.budget_on == "eval" else clock) < args.budget:
        text = draw(seed, n, best_text, args.researcher)
        n += 1
        curve = fixture_curve(text, args.steps, args.shape)
        end = curve[-1][1]
        stop = None
        if isinstance(rule, int) and end >= best:
            stop = rule
        elif isinstance(rule, tuple):
            stop = rule[0] if end - best >= rule[1] else None
        elif isinstance(rule, dict):
            for k in range(1, len(curve) + 1):
                if decide(curve[:k], best_curve, noise, rule):
                    stop = k
                    break
        spent = (args.startup + (stop - 1) * args.step_s + 0.025) if stop else full_eval
        clock += args.overhead + spent
        eval_s += spent
        if stop:
            pruned += 1
            wrong += end < best
            stopped_at.append(stop)
        elif end < best:
            kept += 1
            best, best_text, best_curve = end, text, curve
            noise = reading_noise(best_curve) or 0.0
    return dict(kept=kept, eval_s=eval_s, pruned=pruned, wrong=wrong, best=best, attempts=n,
                stopped_at=stopped_at)


def q(values, d=2):
    v = sorted(values)
    if len(v) < 2:
        return f"{v[0]:.{d}f}" if v else "-"
    a, m, b = statistics.quantiles(v, n=4, method="inclusive")
    return f"{m:.{d}f} [{a:.{d}f}–{b:.{d}f}]"


def check(steps, shape):
    """The port's curves are eval.py's output."""
    for text in [prune_quality.BASELINE_PARAMS, "lr=0.0123\nwd=0.1500\n", "lr=0.0001\nwd=0.0500\n"]:
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "params.txt"), "w").write(text)
            env = dict(os.environ, PRUNE_STEP_S="0", PRUNE_STEPS=str(steps), PRUNE_SHAPE=shape)
            out = subprocess.run([sys.executable, "-c", prune_quality.EVAL_PY], cwd=d, check=True,
                                 env=env, capture_output=True, text=True).stdout.split("\n")
        want = [float(l.split(":")[1]) for l in out if l.strip()][:-1]
        got = [v for _, v in fixture_curve(text, steps, shape)]
        assert got == want, (text, got, want)
    print("curves match eval.py")


def replay_log(path, rules, floor):
    """A real conference's event log (`git conference log NAME --format jsonl`): every attempt's
    recorded curve judged by each rule against the best's curve at the time, and where each rule
    would have stopped it. A pruned attempt's curve ends where it was stopped; a kept one that a
    rule stops is a wrong prune (its end is known)."""
    events = [json.loads(line) for line in open(path) if line.strip()]
    researchers = {e["payload"].get("researcher") for e in events
                   if e["event"] == "researcher.iteration"}
    if len(researchers) > 1:
        print(f"note: {len(researchers)} researchers; each attempt is judged against the last kept "
              "curve of any of them, not its own researcher's best: approximate")
    curve = lambda p: [tuple(x) for n in p.get("notes") or [] if "curve" in n for x in n["curve"]]
    baseline = next(e["payload"] for e in events if e["event"] == "baseline.measured")
    for name in rules:
        knobs = dict(RULES[name], floor=floor)
        reference, best = curve(baseline), baseline["metric_value"]
        noise = reading_noise(reference) or 0.0
        print(f"{name}:")
        for e in events:
            if e["event"] != "researcher.iteration":
                continue
            p = e["payload"]
            c = curve(p)
            stop = next((c[k - 1][0] for k in range(1, len(c) + 1)
                         if decide(c[:k], reference, noise, knobs)), None)
            end = p.get("metric_value")
            wrong = " (would have been kept: wrongly)" if stop and p["status"] == "kept" else ""
            print(f"  {p['status']:<9} {end if end is not None else '-':<8} best then {best}: "
                  f"{len(c)} readings, stopped at {stop or '-'}{wrong}")
            if p["status"] == "kept":
                reference, best = c, end
                noise = reading_noise(reference) or 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=float, default=90)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-s", type=float, default=0.15)
    ap.add_argument("--startup", type=float, default=0.5, help="an evaluation's start, seconds")
    ap.add_argument("--overhead", type=float, default=0.9, help="an attempt's time outside it")
    ap.add_argument("--researcher", default="local", choices=["local", "night"])
    ap.add_argument("--shape", default="smooth", choices=["smooth", "plateau"])
    ap.add_argument("--budget-on", default="wall", choices=["wall", "eval"],
                    help="what the budget counts: wall time (the bench's `Time budget`) or "
                         "evaluation seconds (GPU time)")
    ap.add_argument("--rules", default="ahead,shipped,oracle,oracle4")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--log", help="judge a real conference's recorded curves instead (its "
                    "`log --format jsonl`); --floor is its noise threshold")
    ap.add_argument("--floor", type=float, default=0.0011)
    args = ap.parse_args()
    if args.log:
        replay_log(args.log, args.rules.split(","), args.floor)
        return
    if args.check:
        check(args.steps, args.shape)
    off = {s: conference(s, dict(BEFORE, warmup=10 ** 9), args) for s in range(args.seeds)}
    rate = lambda r: r["kept"] / r["eval_s"] * 3600
    print(f"ESTIMATES (offline replay), {args.seeds} seeds, budget {args.budget}s, researcher "
          f"{args.researcher}, {args.shape} curves, overhead {args.overhead}s, startup {args.startup}s; median [quartiles]")
    print(f"off: kept {q([r['kept'] for r in off.values()], 0)}, attempts "
          f"{q([r['attempts'] for r in off.values()], 0)}, rate {q([rate(r) for r in off.values()], 0)}")
    for name in args.rules.split(","):
        rs = {s: conference(s, RULES[name], args) for s in range(args.seeds)}
        ratio = [rate(rs[s]) / rate(off[s]) for s in rs if rate(off[s]) > 0]
        pr = sum(r["pruned"] for r in rs.values())
        wr = sum(r["wrong"] for r in rs.values())
        gap = [rs[s]["best"] - off[s]["best"] for s in rs]
        at = [k for r in rs.values() for k in r["stopped_at"]]
        print(f"{name:>11}: ratio {q(ratio)}, wrongly {wr}/{pr} ({100 * wr / max(pr, 1):.1f}%), "
              f"best gap {q(gap, 4)}, median best {statistics.median(r['best'] for r in rs.values()):.4f} "
              f"(off {statistics.median(r['best'] for r in off.values()):.4f}), kept "
              f"{q([r['kept'] for r in rs.values()], 0)}, attempts {q([r['attempts'] for r in rs.values()], 0)}, "
              f"stopped at reading {q(at, 0) if at else '-'}", flush=True)


if __name__ == "__main__":
    main()
