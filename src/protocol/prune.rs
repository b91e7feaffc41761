//! Pruning: whether an evaluation that is still running is already lost.
//!
//! An evaluation may print intermediate readings of its metric (a learning curve). With `prune:
//! on`, each new reading is compared with the reference curve: the curve of the researcher's
//! current best, the snapshot the attempt must beat to be kept. Once the run has printed at least
//! `warmup` readings, it is stopped when it is behind the reference at its own step by more than
//! the noise margin and even an optimistic extrapolation of its own curve to the reference's last
//! step ends worse than the reference's last reading by more than the noise margin: it cannot be
//! kept any more. When the reference's own curve left a plateau (see below), no run is judged
//! before the step where the reference stopped speeding up.
//!
//! The extrapolation is the most the run can still gain, the smallest of these bounds. It reads
//! three of the run's readings: the latest (step s), the one nearest s/2 (b) and the one nearest
//! s/4 (a), so two windows, [a, b] and [b, s], and their gains.
//!
//! - Decelerating curves (each step gains no more than the one before): the pace of the later
//!   window held to the end. Before the run has two readings before its latest, the pace of the
//!   last two readings.
//! - The larger of two curve families through the three readings, each only when the run's
//!   readings say that it decelerates at least as fast as the family's slowest member:
//!   - exponential decay (a fast start on a floor: loss ~ a + b·e^(-r·step));
//!   - a power law (loss ~ a + b·step^-c, slow to flatten). A run whose later window gained
//!     clearly more per log-step than the earlier one is not on a power law (an exponential's
//!     start looks so), and this family is left out; when the readings cannot tell, the pace
//!     bound stands.
//!
//!   The family's member (r, or c) is the one whose two windows' gains have the run's ratio, and
//!   its gain from s to the reference's last step is the bound. A family the run's readings rule
//!   out is left out too: fitted to all its readings (least squares, over a grid of r or c), it
//!   leaves residuals that the reading noise would give with a chance under 1 in 1,000 (χ² with
//!   readings − 3 degrees of freedom). That is what stops a fast starter early: its readings
//!   are no power law, whose long tail would otherwise keep it going. With the reading noise
//!   unknown, nothing is ruled out.
//!
//! Each window's gain is widened by 2·√2 reading noise sd (see below: the later one up, the
//! earlier one down), so noise makes the bound looser, never tighter.
//!
//! The extrapolation is for curves that cross. A slower start often ends better (a lower
//! learning rate, more regularisation): such a run is behind the best at every early step, but
//! still improving faster than the best did there, and its extrapolation reaches the best's end.
//!
//! A run that is not behind the best's curve at its step goes on, however it extrapolates. The
//! rule of 27 Nov 2026 stopped a fast starter that flattened on a higher floor while it was
//! still ahead; on a real training (a small transformer on an H100, BENCHMARKS.md) that stopped
//! the night's best attempt: its loss sat on a plateau, decelerating like any floor, and dropped
//! from 3.75 to 3.02 after the stop. A plateau that some runs leave sooner than others is no
//! exception in real training, and no extrapolation of readings taken on it can see the drop
//! coming. Being behind the best at the same step, off a plateau, is evidence that does not
//! depend on the curve's shape.
//!
//! On a plateau it is no evidence either: there, runs sit within a little of one another
//! whatever their ends, and the first to leave it wins, so a run behind the best on the plateau
//! may still end better (the offline replay of plateau curves, `bench/prune_replay.py --shape
//! plateau`: 24% of what the behind-and-extrapolation rule stopped would have been kept). A
//! curve that left a plateau shows it: it gains more than [`SPEEDUP`] times as fast per step as
//! it did over an earlier stretch. When the reference's curve did so, no decision is taken up to
//! the last step where it did ([`speedup_end`]): the reference's plateau and its way down are no
//! guide to another run's, and past them the curves flatten again and the rule above holds.
//!
//! The noise margin is the larger of the margin the engine passes (the conference's noise
//! threshold) and 2 times the reading noise sd: the run's end reading may fall that far below
//! its curve by chance (two standard deviations of one reading). The reference's end is no
//! chance any more: it is the best's metric, the number the keep rule compares the run's end
//! with (kept only when strictly better). The reading noise is estimated from the reference's
//! own curve ([`reading_noise`]): the scatter of its readings around local quadratic fits. A run
//! within the margin of the reference's end is never pruned: its full evaluation may still be
//! kept by chance. (Until 27 Nov 2026 the margin was 2·√2 sd, two readings' difference, as if
//! the best's end were still to be drawn; the offline replay `bench/prune_replay.py` found
//! nothing wrongly pruned that the wider margin saved, and it kept near-ties running longer.)
//!
//! `prune: early` compares levels only (as Optuna's pruners do): behind the reference at the same
//! step by more than the margin is enough (here 2·√2 sd: two noisy readings at one step), with no
//! extrapolation. Runs stop sooner, and a slow starter that would have ended better is stopped
//! too.
//!
//! The reference at a step between two of its readings is interpolated linearly; past its last
//! reading it is its last reading (the nearest at or before); before its first there is no
//! reference, and no decision.

use crate::model::Direction;
use crate::model::Pruned;

/// One intermediate reading: the step the evaluation named and the metric's value there.
pub type Point = (u64, f64);

/// What a run is compared with: the reference curve and how far apart readings may be by chance.
#[derive(Debug, Clone, Copy)]
pub struct Rule<'a> {
    /// The reference curve (the researcher's best's readings), in the order printed.
    pub reference: &'a [Point],
    /// Readings a run prints before any decision.
    pub warmup: u32,
    /// The noise margin from the conference (its noise threshold); widened by `noise`.
    pub margin: f64,
    /// One reading's noise sd ([`reading_noise`] of the reference; 0 when unknown).
    pub noise: f64,
    /// None (qualitative mode): nothing is pruned.
    pub direction: Option<Direction>,
    /// `prune: early`: behind the reference at the same step is enough.
    pub early: bool,
}

impl Rule<'_> {
    /// The margin a run must be behind by: the conference's, or, when larger, [`END_WIDTH`]
    /// reading noise sds (the run's end against the best's known end), [`NOISE_WIDTH`] with
    /// `early` (two noisy readings at one step).
    pub fn effective_margin(&self) -> f64 {
        let width = if self.early { NOISE_WIDTH } else { END_WIDTH };
        self.margin.max(0.0).max(width * self.noise_sd())
    }

    /// One reading's noise sd as the rule uses it: 0 when unknown (not finite) or negative.
    fn noise_sd(&self) -> f64 {
        if self.noise.is_finite() {
            self.noise.max(0.0)
        } else {
            0.0
        }
    }
}

/// How many reading-noise sds two single readings may differ by chance before pruning counts
/// them apart: two standard deviations of the difference of two readings (2·√2). The widening
/// of each window's gain in the extrapolation, and `early`'s margin.
pub const NOISE_WIDTH: f64 = 2.0 * std::f64::consts::SQRT_2;

/// How many reading-noise sds a run's end reading may fall below its curve by chance: two
/// standard deviations of one reading. The best's end it is compared with is no chance any
/// more: it is the number the keep rule compares the run's end with (kept only when strictly
/// better), so only the run's own end reading is noisy.
pub const END_WIDTH: f64 = 2.0;

/// The reference curve's value at `step`: linear between the two readings around it, its last
/// reading past its end, None before its first reading (or for an empty curve). `reference` is
/// in the order printed; readings are sorted by step here.
pub fn reference_at(reference: &[Point], step: u64) -> Option<f64> {
    interpolate(&sorted(reference), step as f64, true)
}

/// The finite readings of `curve`, sorted by step.
fn sorted(curve: &[Point]) -> Vec<Point> {
    let mut points: Vec<Point> = curve
        .iter()
        .copied()
        .filter(|(_, v)| v.is_finite())
        .collect();
    points.sort_by_key(|(s, _)| *s);
    points
}

/// The value of sorted `points` at `at` (a fractional step): linear between readings; past the
/// last, the last reading when `hold_end`, else None; None before the first.
fn interpolate(points: &[Point], at: f64, hold_end: bool) -> Option<f64> {
    let after = points.iter().position(|(s, _)| *s as f64 >= at);
    match after {
        Some(i) if points[i].0 as f64 == at => Some(points[i].1),
        Some(0) => None,
        Some(i) => {
            let ((s0, v0), (s1, v1)) = (points[i - 1], points[i]);
            let t = (at - s0 as f64) / (s1 - s0) as f64;
            Some(v0 + t * (v1 - v0))
        }
        None if hold_end => points.last().map(|(_, v)| *v),
        None => None,
    }
}

/// One reading's noise sd, estimated from a curve: each window of five consecutive readings is
/// fitted with a quadratic (least squares), and the median of the windows' residual variances
/// (two degrees of freedom each) gives σ² (the median of χ²₂/2 is ln 2). A smooth curve bends
/// slowly enough that a quadratic follows it over five readings; what is left is the noise. None
/// with fewer than five finite readings.
pub fn reading_noise(curve: &[Point]) -> Option<f64> {
    let points = sorted(curve);
    let mut variances: Vec<f64> = points
        .windows(5)
        .filter_map(|w| quadratic_residuals(w).map(|rss| rss / 2.0))
        .collect();
    if variances.is_empty() {
        return None;
    }
    variances.sort_by(f64::total_cmp);
    let n = variances.len();
    let median = if n % 2 == 1 {
        variances[n / 2]
    } else {
        (variances[n / 2 - 1] + variances[n / 2]) / 2.0
    };
    Some((median / std::f64::consts::LN_2).sqrt())
}

/// The residual sum of squares of the least-squares quadratic through `points` (steps centred
/// and scaled for stability); None when the steps do not determine one.
fn quadratic_residuals(points: &[Point]) -> Option<f64> {
    let (first, last) = (points.first()?.0 as f64, points.last()?.0 as f64);
    let (mid, span) = ((first + last) / 2.0, (last - first).max(1.0));
    let xs: Vec<f64> = points
        .iter()
        .map(|(s, _)| (*s as f64 - mid) / span)
        .collect();
    let moment = |k: i32| xs.iter().map(|x| x.powi(k)).sum::<f64>();
    let target = |k: i32| {
        xs.iter()
            .zip(points)
            .map(|(x, (_, y))| y * x.powi(k))
            .sum::<f64>()
    };
    let m = [
        [moment(0), moment(1), moment(2)],
        [moment(1), moment(2), moment(3)],
        [moment(2), moment(3), moment(4)],
    ];
    let t = [target(0), target(1), target(2)];
    let det = |m: &[[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(&m);
    if d.abs() < 1e-12 {
        return None;
    }
    let coef: Vec<f64> = (0..3)
        .map(|j| {
            let mut mj = m;
            for (row, ti) in mj.iter_mut().zip(t) {
                row[j] = ti;
            }
            det(&mj) / d
        })
        .collect();
    Some(
        xs.iter()
            .zip(points)
            .map(|(x, (_, y))| (y - (coef[0] + coef[1] * x + coef[2] * x * x)).powi(2))
            .sum(),
    )
}

/// Whether the run whose readings so far are `curve` (in the order printed) is pruned after its
/// latest reading under `rule` (see the module's doc): it has at least `warmup` readings (and at
/// least one) and its latest reading is finite, at a step the reference covers, and behind the
/// reference there by more than the margin; unless `early`, even its optimistic extrapolation
/// also ends worse than the reference's last reading by more than the margin. Without a
/// direction (qualitative mode) nothing is pruned.
pub fn decide(curve: &[Point], rule: &Rule) -> Option<Pruned> {
    let direction = rule.direction?;
    let margin = rule.effective_margin();
    if curve.len() < (rule.warmup as usize).max(1) {
        return None;
    }
    let &(step, value) = curve.last()?;
    if !value.is_finite() {
        return None;
    }
    let reference = sorted(rule.reference);
    let at_step = interpolate(&reference, step as f64, true)?;
    let pruned = Pruned {
        step,
        value,
        reference: at_step,
    };
    // Behind the reference at the run's own step, by more than the margin: the first
    // condition with either rule, and all of `early`'s.
    let behind = direction.gain(at_step, value) > margin;
    if rule.early || !behind {
        return behind.then_some(pruned);
    }
    let &(end_step, end) = reference.last()?;
    // Badness: the metric turned so that lower is better.
    let bad = |v: f64| match direction {
        Direction::Minimize => v,
        Direction::Maximize => -v,
    };
    let noise = rule.noise_sd();
    let turned: Vec<Point> = reference.iter().map(|&(s, v)| (s, bad(v))).collect();
    if step <= speedup_end(&turned, noise) {
        return None;
    }
    let own: Vec<Point> = sorted(curve)
        .into_iter()
        .filter(|(s, _)| *s <= step)
        .map(|(s, v)| (s, bad(v)))
        .collect();
    let gain = if step >= end_step {
        0.0
    } else {
        reachable_gain(&own, step, end_step, noise)
    };
    (bad(value) - gain - bad(end) > margin).then_some(pruned)
}

/// Successive halving across a sweep's variants (the same idea at different values, so a fair
/// race): at a rung — the run's `w`-th, `2w`-th, `4w`-th… reading, `w` the rule's warmup (at
/// least 1) — a run whose latest reading is behind the best of the others' readings at that step
/// (each other that reached it, read off its curve) by more than the margin is stopped; unless
/// `early`, only when even its optimistic extrapolation to the evaluation's last step (the
/// reference's) ends behind where that leader already is, by more than the margin (a slow
/// starter may still cross a fast one; without a reference nothing is stopped then). Returns
/// which other led (its index in `others`) and where. Without a direction nothing is stopped.
pub fn race(own: &[Point], others: &[&[Point]], rule: &Rule) -> Option<(usize, Pruned)> {
    let direction = rule.direction?;
    let margin = rule.effective_margin();
    let w = rule.warmup.max(1) as usize;
    let n = own.len();
    if n < w || !n.is_multiple_of(w) || !(n / w).is_power_of_two() {
        return None;
    }
    let &(step, value) = own.last()?;
    if !value.is_finite() {
        return None;
    }
    let at_step = |curve: &[Point]| {
        let curve = sorted(curve);
        // Only a run that reached the step: no extrapolation past another's last reading.
        (curve.last()?.0 >= step)
            .then(|| interpolate(&curve, step as f64, false))
            .flatten()
    };
    let (leader, ahead) = (others.iter().enumerate())
        .filter_map(|(k, c)| at_step(c).filter(|v| v.is_finite()).map(|v| (k, v)))
        .max_by(|a, b| direction.gain(a.1, b.1).total_cmp(&0.0))?;
    if direction.gain(ahead, value) <= margin {
        return None;
    }
    if !rule.early {
        let end_step = sorted(rule.reference).last()?.0;
        let bad = |v: f64| match direction {
            Direction::Minimize => v,
            Direction::Maximize => -v,
        };
        let turned: Vec<Point> = sorted(own).into_iter().map(|(s, v)| (s, bad(v))).collect();
        let gain = match step < end_step {
            true => reachable_gain(&turned, step, end_step, rule.noise_sd()),
            false => 0.0,
        };
        if bad(value) - gain - bad(ahead) <= margin {
            return None;
        }
    }
    let pruned = Pruned {
        step,
        value,
        reference: ahead,
    };
    Some((leader, pruned))
}

/// How much faster per step than over an earlier stretch a curve must gain to have left a
/// plateau ([`speedup_end`]). A schedule's bend is not one: a real training's cosine decay sped
/// its loss up by 1.5× at most (BENCHMARKS.md); leaving a plateau, by 10× and more.
pub const SPEEDUP: f64 = 2.0;

/// The last step at which the curve `points` (sorted, lower is better) gained more than
/// [`SPEEDUP`] times as fast per step as over an earlier stretch (a flat or worsening one counts
/// as no speed), and by more than two readings' noise (2·√2 `noise` sds): where it left a
/// plateau. 0 when it never did: a curve that only flattens as it goes.
fn speedup_end(points: &[Point], noise: f64) -> u64 {
    let mut slowest = f64::INFINITY;
    let mut end = 0;
    for pair in points.windows(2) {
        let [(s0, v0), (s1, v1)] = [pair[0], pair[1]];
        if s1 <= s0 {
            continue;
        }
        let steps = (s1 - s0) as f64;
        if v0 - v1 > SPEEDUP * slowest.max(0.0) * steps + NOISE_WIDTH * noise {
            end = s1;
        }
        slowest = slowest.min((v0 - v1) / steps);
    }
    end
}

/// The most a run can still gain from its latest reading at `step` to `end_step` (its curve
/// `own` sorted, lower is better, the latest reading last): the smallest of the bounds in the
/// module's doc. `noise` is one reading's noise sd (0 when unknown).
fn reachable_gain(own: &[Point], step: u64, end_step: u64, noise: f64) -> f64 {
    let slack = NOISE_WIDTH * noise;
    let s = step as f64;
    let left = (end_step - step) as f64;
    let Some(&(_, now)) = own.last() else {
        return f64::INFINITY;
    };
    // Steps from 1 on (a power law has no value at step 0).
    let before: Vec<Point> = own
        .iter()
        .copied()
        .filter(|(x, _)| *x >= 1 && *x < step)
        .collect();
    let too_early = pace(own) * left + slack;
    if before.len() < 2 {
        // Too early for two windows: the pace of the last two readings.
        return too_early;
    }
    // The readings nearest to s/2 (b) and s/4 (a, before b): actual readings, so that no
    // interpolation across a bend biases the windows.
    let nearest = |points: &[Point], x: f64| {
        points
            .iter()
            .copied()
            .min_by(|p, q| (p.0 as f64 - x).abs().total_cmp(&(q.0 as f64 - x).abs()))
    };
    let Some((sb, vb)) = nearest(&before[1..], s / 2.0) else {
        return too_early;
    };
    let earlier: Vec<Point> = before.iter().copied().filter(|(x, _)| *x < sb).collect();
    let Some((sa, va)) = nearest(&earlier, s / 4.0) else {
        return too_early;
    };
    // Steps as fractions of the latest, so that a family's parameter means the same whatever
    // the step unit.
    let (xa, xb, xe) = (sa as f64 / s, sb as f64 / s, end_step as f64 / s);
    let (g1, g2) = (va - vb, vb - now);
    let (low, high) = (g1 - slack, g2.max(0.0) + slack);
    // Decelerating: no faster than its pace since b.
    let paced = high * left / (s - sb as f64);
    // The run's readings from step 1 on, for the families' fits.
    let fitted: Vec<(f64, f64)> = own
        .iter()
        .filter(|(x, _)| *x >= 1)
        .map(|&(x, v)| (x as f64 / s, v))
        .collect();
    // Each family: the member whose windows' gains have the ratio low/high, continued to the
    // end; None when the run decelerates less than the family's slowest member.
    let family = |phi: &dyn Fn(f64, f64) -> f64| -> Option<f64> {
        if low <= 0.0 {
            return None;
        }
        let ratio = |k: f64| (phi(xa, k) - phi(xb, k)) / (phi(xb, k) - phi(1.0, k));
        let target = low / high;
        let slowest = ratio(1e-9);
        if slowest.is_nan() || target <= slowest {
            return None;
        }
        let k = solve_increasing(ratio, target, 1e-9, 50.0);
        let rest = high * (phi(1.0, k) - phi(xe, k)) / (phi(xb, k) - phi(1.0, k));
        rest.is_finite().then_some(rest)
    };
    // A family the run's readings rule out: even its best fit leaves residuals that the
    // reading noise explains with a chance under 1 in 1,000.
    let ruled_out = |phi: &dyn Fn(f64, f64) -> f64| -> bool {
        let df = fitted.len().saturating_sub(3);
        noise > 0.0 && df > 0 && best_fit(&fitted, phi) > noise * noise * chi2_999(df as f64)
    };
    let exp = |x: f64, r: f64| (-r * x).exp();
    let pow = |x: f64, c: f64| x.powf(-c);
    let exponential = (!ruled_out(&exp)).then(|| family(&exp).unwrap_or(paced));
    let power = if ruled_out(&pow) {
        None
    } else {
        match family(&pow) {
            Some(g) => Some(g),
            // Clearly faster per log-step in the later window: not a power law (an
            // exponential's start looks so).
            None if g1 + slack > 0.0
                && (g2 - slack) / (g1 + slack) > (1.0 / xb).ln() / (xb / xa).ln() =>
            {
                None
            }
            None => Some(paced),
        }
    };
    match (exponential, power) {
        (Some(e), Some(p)) => paced.min(e.max(p)),
        (Some(g), None) | (None, Some(g)) => paced.min(g),
        (None, None) => paced,
    }
}

/// The k in [lo, hi] where the increasing `f` reaches `target` (bisection); `hi` when it never
/// does.
fn solve_increasing(f: impl Fn(f64) -> f64, target: f64, mut lo: f64, mut hi: f64) -> f64 {
    if f(hi) < target {
        return hi;
    }
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The smallest residual sum of squares of `points` fitted with a + b·phi(x, k), over a grid of
/// k from 0.001 to 50 (log-spaced; a and b by least squares for each).
fn best_fit(points: &[(f64, f64)], phi: &dyn Fn(f64, f64) -> f64) -> f64 {
    (0..=120)
        .map(|i| 10f64.powf(-3.0 + 4.7 * i as f64 / 120.0))
        .map(|k| line_residuals(points.iter().map(|&(x, y)| (phi(x, k), y))))
        .fold(f64::INFINITY, f64::min)
}

/// The residual sum of squares of the least-squares line through `points`.
fn line_residuals(points: impl Iterator<Item = (f64, f64)> + Clone) -> f64 {
    let n = points.clone().count() as f64;
    let (mx, my) = points
        .clone()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = points.clone().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.clone().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx.is_nan() || sxx <= 1e-300 {
        return f64::INFINITY;
    }
    let slope = sxy / sxx;
    points
        .map(|(x, y)| (y - my - slope * (x - mx)).powi(2))
        .sum()
}

/// The 99.9% quantile of the χ² distribution with `df` degrees of freedom (Wilson–Hilferty;
/// 3% high at 1 degree of freedom, closer from there on).
fn chi2_999(df: f64) -> f64 {
    let v = 2.0 / (9.0 * df);
    df * (1.0 - v + 3.090_232 * v.sqrt()).powi(3)
}

/// How much the run gained per step between its last two readings (`own`: lower is better; 0
/// when it got worse, or with one reading).
fn pace(own: &[Point]) -> f64 {
    let [.., (s0, v0), (s1, v1)] = own else {
        return 0.0;
    };
    if s1 <= s0 {
        return 0.0;
    }
    ((v0 - v1) / (s1 - s0) as f64).max(0.0)
}

#[cfg(test)]
mod tests;
