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
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    const REF: &[Point] = &[(100, 2.0), (200, 1.5), (300, 1.2)];

    fn rule(
        reference: &[Point],
        warmup: u32,
        margin: f64,
        direction: Option<Direction>,
        early: bool,
    ) -> Rule<'_> {
        Rule {
            reference,
            warmup,
            margin,
            noise: 0.0,
            direction,
            early,
        }
    }

    #[test]
    fn the_reference_between_and_past_its_readings() {
        let cases: &[(&[Point], u64, Option<f64>)] = &[
            (REF, 100, Some(2.0)),
            (REF, 150, Some(1.75)),
            (REF, 250, Some(1.35)),
            (REF, 300, Some(1.2)),
            // Past its last reading: its last reading.
            (REF, 1000, Some(1.2)),
            // Before its first: nothing to compare with.
            (REF, 50, None),
            (&[], 100, None),
            // Printed out of order: sorted by step.
            (&[(200, 1.5), (100, 2.0)], 150, Some(1.75)),
            // A reading that is not a number is left out.
            (&[(100, 2.0), (200, f64::NAN), (300, 1.0)], 200, Some(1.5)),
        ];
        for &(reference, step, want) in cases {
            assert_eq!(
                reference_at(reference, step),
                want,
                "{reference:?} at {step}"
            );
        }
    }

    #[test]
    fn decision_table() {
        type Case = (
            &'static [Point],
            u32,
            f64,
            Option<Direction>,
            Option<Pruned>,
        );
        let pruned = |step, value, reference| {
            Some(Pruned {
                step,
                value,
                reference,
            })
        };
        let cases: &[Case] = &[
            // Worse than the reference by more than the margin after the warmup: pruned.
            (
                &[(100, 2.5), (200, 2.0)],
                2,
                0.1,
                Some(Minimize),
                pruned(200, 2.0, 1.5),
            ),
            // Fewer readings than the warmup: never, however bad.
            (&[(100, 9.0)], 2, 0.1, Some(Minimize), None),
            (&[(100, 9.0), (200, 9.0)], 3, 0.1, Some(Minimize), None),
            // A warmup of 0 still needs one reading to compare.
            (&[], 0, 0.1, Some(Minimize), None),
            (&[(100, 9.0)], 0, 0.1, Some(Minimize), pruned(100, 9.0, 2.0)),
            // Able to end within the margin of the reference's end (1.2): goes on.
            (&[(100, 2.0), (200, 1.55)], 2, 0.1, Some(Minimize), None),
            // Within the margin at its step: goes on, though at its pace it ends at 1.5, 0.3
            // behind the reference's end (stopped once it is behind by more).
            (&[(100, 2.0), (200, 1.75)], 2, 0.25, Some(Minimize), None),
            (
                &[(100, 2.0), (200, 1.76)],
                2,
                0.25,
                Some(Minimize),
                pruned(200, 1.76, 1.5),
            ),
            // Better than the reference: goes on.
            (&[(100, 1.0), (200, 0.9)], 2, 0.0, Some(Minimize), None),
            // Only the latest reading counts: an early bad reading that recovered goes on.
            (&[(100, 9.0), (200, 1.5)], 2, 0.0, Some(Minimize), None),
            // Interpolated reference at step 250 (1.35).
            (
                &[(100, 2.0), (250, 1.5)],
                2,
                0.1,
                Some(Minimize),
                pruned(250, 1.5, 1.35),
            ),
            // Behind, but improving fast enough to end better than the reference's end (1.2):
            // curves that cross, a slow starter goes on.
            (&[(100, 3.0), (200, 2.0)], 2, 0.1, Some(Minimize), None),
            // Behind and improving, not fast enough: pruned.
            (
                &[(100, 2.2), (200, 2.0)],
                2,
                0.1,
                Some(Minimize),
                pruned(200, 2.0, 1.5),
            ),
            // Past the reference's last step there is nothing left to catch up with.
            (
                &[(300, 1.6), (400, 1.5)],
                2,
                0.1,
                Some(Minimize),
                pruned(400, 1.5, 1.2),
            ),
            // Getting worse: no pace at all.
            (
                &[(100, 2.0), (200, 2.1)],
                2,
                0.1,
                Some(Minimize),
                pruned(200, 2.1, 1.5),
            ),
            // Before the reference's first step: no decision.
            (&[(10, 9.0), (20, 9.0)], 2, 0.1, Some(Minimize), None),
            // Qualitative mode: never.
            (&[(100, 9.0), (200, 9.0)], 2, 0.1, None, None),
            // A reading that is not a number decides nothing.
            (&[(100, 9.0), (200, f64::NAN)], 2, 0.1, Some(Minimize), None),
            // A negative margin counts as none.
            (&[(100, 2.0), (200, 1.5)], 2, -1.0, Some(Minimize), None),
        ];
        for &(curve, warmup, margin, direction, want) in cases {
            assert_eq!(
                decide(curve, &rule(REF, warmup, margin, direction, false)),
                want,
                "{curve:?} warmup {warmup} margin {margin} {direction:?}"
            );
        }
        // Maximize: lower is worse, and the pace is a rise.
        let up: &[Point] = &[(100, 0.5), (200, 0.8), (300, 0.9)];
        let max_cases: &[(&[Point], Option<Pruned>)] = &[
            (&[(100, 0.3), (200, 0.4)], pruned(200, 0.4, 0.8)),
            (&[(100, 0.2), (200, 0.6)], None),
            (&[(100, 0.9), (200, 0.85)], None),
        ];
        for &(curve, want) in max_cases {
            assert_eq!(
                decide(curve, &rule(up, 2, 0.1, Some(Maximize), false)),
                want,
                "{curve:?}"
            );
        }
        // `prune: early`: behind at the step is enough, even for a run that would catch up.
        let slow_starter: &[Point] = &[(100, 3.0), (200, 2.0)];
        assert_eq!(
            decide(slow_starter, &rule(REF, 2, 0.1, Some(Minimize), true)),
            pruned(200, 2.0, 1.5)
        );
        assert_eq!(
            decide(slow_starter, &rule(REF, 2, 0.1, Some(Minimize), false)),
            None
        );
        assert_eq!(
            decide(
                &[(100, 2.0), (200, 1.55)],
                &rule(REF, 2, 0.1, Some(Minimize), true)
            ),
            None
        );
        assert_eq!(
            decide(&[(100, 9.0)], &rule(REF, 2, 0.1, Some(Minimize), true)),
            None
        );
        // No reference curve (the best printed no readings): never.
        assert_eq!(
            decide(
                &[(100, 9.0), (200, 9.0)],
                &rule(&[], 2, 0.0, Some(Minimize), false)
            ),
            None
        );
    }

    /// A curve of `steps` readings, `f(t)` at t = step / steps, plus `noise` times a fixed
    /// pseudo-random sequence of unit sd (the same for every call).
    fn curve(steps: u64, noise: f64, f: impl Fn(f64) -> f64) -> Vec<Point> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut unit = move || {
            // Sum of 12 uniforms minus 6: about normal, sd 1.
            (0..12)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 11) as f64 / (1u64 << 53) as f64
                })
                .sum::<f64>()
                - 6.0
        };
        (1..=steps)
            .map(|s| (s, f(s as f64 / steps as f64) + noise * unit()))
            .collect()
    }

    /// The first step at which `run`, printed reading by reading, is pruned.
    fn first_pruned(run: &[Point], rule: &Rule) -> Option<u64> {
        (1..=run.len()).find_map(|n| decide(&run[..n], rule).map(|p| p.step))
    }

    #[test]
    fn reading_noise_is_the_scatter_around_the_curve() {
        // A smooth curve has none; where it bends faster than a quadratic follows over five
        // readings (a steep start), the bend counts as noise: the estimate errs on the wide side.
        let smooth = curve(20, 0.0, |t| 1.0 + 3.0 * (-t).exp());
        assert!(reading_noise(&smooth).unwrap() < 3e-4, "{smooth:?}");
        let steep = curve(20, 0.0, |t| 1.0 + 3.0 * (-4.0 * t).exp());
        assert!(reading_noise(&steep).unwrap() < 0.002, "{steep:?}");
        // Noise of sd 0.003 on a learning curve is never found much smaller; the steeper the
        // start, the more its bend adds (up to 2.2 times here at rate 10: a wider margin, fewer
        // prunes, never more).
        for (rate, sd) in [(4.0, 0.003), (10.0, 0.003), (4.0, 0.01)] {
            let noisy = curve(20, sd, |t| 1.0 + 3.0 * (-rate * t).exp());
            let found = reading_noise(&noisy).unwrap();
            assert!(
                (0.67..2.5).contains(&(found / sd)),
                "rate {rate} sd {sd}: {found}"
            );
        }
        // Uneven steps, printed out of order, a reading that is not a number left out.
        let uneven: &[Point] = &[
            (40, 1.4),
            (10, 2.0),
            (20, 1.7),
            (25, f64::NAN),
            (30, 1.5),
            (80, 1.2),
            (60, 1.3),
        ];
        assert!(reading_noise(uneven).is_some());
        // Fewer than five readings: unknown.
        assert_eq!(reading_noise(&smooth[..4]), None);
        assert_eq!(reading_noise(&[]), None);
    }

    #[test]
    fn the_chi_square_quantile() {
        for (df, want) in [(1.0, 10.828), (2.0, 13.816), (5.0, 20.515), (17.0, 40.790)] {
            let got = chi2_999(df);
            assert!((got / want - 1.0).abs() < 0.035, "{df}: {got} vs {want}");
        }
    }

    #[test]
    fn the_margin_is_widened_to_the_reading_noise() {
        let mut r = rule(REF, 2, 0.001, Some(Minimize), false);
        assert_eq!(r.effective_margin(), 0.001);
        r.noise = 0.01;
        assert!((r.effective_margin() - 0.02).abs() < 1e-12);
        // `early` compares two noisy readings at one step: 2·√2 sd.
        let early = Rule { early: true, ..r };
        assert!((early.effective_margin() - 0.02 * std::f64::consts::SQRT_2).abs() < 1e-12);
        r.noise = f64::NAN;
        assert_eq!(r.effective_margin(), 0.001);
        // A near-tie at the end: 0.005 behind the reference's end, with readings that scatter
        // by 0.003. With the noise known it goes on; with the margin alone it is stopped.
        let reference = curve(20, 0.0, |t| 1.0 + 3.0 * (-6.0 * t).exp());
        let tie = curve(20, 0.0, |t| 1.005 + 3.0 * (-6.0 * t).exp());
        let mut r = rule(&reference, 2, 0.001, Some(Minimize), false);
        assert!(first_pruned(&tie, &r).is_some());
        r.noise = 0.003;
        assert_eq!(first_pruned(&tie, &r), None);
    }

    #[test]
    fn a_run_that_cannot_beat_the_best_by_its_own_end_noise_is_stopped() {
        // The best's end (1.0074) is a known number; the run ends 0.007 behind it, more than its
        // own end reading's two sds (0.006) and less than two readings' difference (0.0085):
        // it is stopped before its end, as the keep rule would revert it.
        let reference = curve(20, 0.0, |t| 1.0 + 3.0 * (-6.0 * t).exp());
        let behind = curve(20, 0.0, |t| 1.007 + 3.0 * (-6.0 * t).exp());
        let r = Rule {
            noise: 0.003,
            ..rule(&reference, 2, 0.001, Some(Minimize), false)
        };
        let step = first_pruned(&behind, &r).expect("pruned");
        assert!(step < 20, "pruned at {step}");
        // Within its end's noise (0.005 behind): it may still be kept by chance, and goes on.
        let tie = curve(20, 0.0, |t| 1.005 + 3.0 * (-6.0 * t).exp());
        assert_eq!(first_pruned(&tie, &r), None);
    }

    /// Curves that cross: the reference (the best) starts fast and ends at 1.055.
    fn crossing_reference() -> Vec<Point> {
        curve(20, 0.003, |t| 1.0 + 3.0 * (-4.0 * t).exp())
    }

    #[test]
    fn a_fast_starter_on_a_higher_floor_is_stopped_once_behind() {
        let reference = crossing_reference();
        let noise = reading_noise(&reference).unwrap();
        let r = Rule {
            noise,
            ..rule(&reference, 2, 0.001, Some(Minimize), false)
        };
        // Fast to its floor of 1.3, ending 0.25 worse than the best: ahead of the best's curve
        // until step 11 or 12, where the curves cross; stopped at the first reading behind.
        let fast = curve(20, 0.003, |t| 1.3 + 2.7 * (-12.0 * t).exp());
        let step = first_pruned(&fast, &r).expect("pruned");
        assert!(step <= 13, "pruned at {step}");
        for &(s, v) in &fast[..step as usize] {
            let at = reference_at(&reference, s).unwrap();
            let behind = v - at > r.effective_margin();
            assert_eq!(behind, s == step, "step {s}: {v} against {at}");
        }
        // Once behind, it cannot catch up: stopped no later than `early`, which compares levels
        // with a wider margin.
        let early = Rule { early: true, ..r };
        assert!(first_pruned(&fast, &early).unwrap() >= step);
    }

    /// A real training's readings: a small character-level transformer on an H100
    /// (`bench/prune_gpu.sh`, 27 Nov 2026), validation loss every 75 steps of 1,500.
    const GPU_BEST: &[Point] = &[
        (75, 3.95515),
        (150, 3.80688),
        (225, 3.77318),
        (300, 3.76125),
        (375, 3.75425),
        (450, 3.74955),
        (525, 3.7449),
        (600, 3.74148),
        (675, 3.73848),
        (750, 3.7343),
        (825, 3.7309),
        (900, 3.72642),
        (975, 3.7229),
        (1050, 3.71986),
        (1125, 3.7177),
        (1200, 3.71655),
        (1275, 3.71537),
        (1350, 3.71461),
        (1425, 3.71441),
        (1500, 3.7144),
    ];

    /// The next attempt of that night, with a higher learning rate.
    const GPU_ESCAPES: &[Point] = &[
        (75, 3.85032),
        (150, 3.77034),
        (225, 3.7528),
        (300, 3.74413),
        (375, 3.73279),
        (450, 3.71089),
        (525, 3.67157),
        (600, 3.60597),
        (675, 3.51849),
        (750, 3.41764),
        (825, 3.32621),
        (900, 3.23953),
        (975, 3.16948),
        (1050, 3.11635),
        (1125, 3.07693),
        (1200, 3.05084),
        (1275, 3.03489),
        (1350, 3.0262),
        (1425, 3.02322),
        (1500, 3.02283),
    ];

    #[test]
    fn a_run_ahead_on_a_plateau_is_never_stopped() {
        // The next attempt, ahead of the best from its first reading, flattening on the
        // plateau near 3.75 like any floor (gains 0.080, 0.017, 0.009), then leaving it at step
        // 450 and ending at 3.02, the night's largest improvement. The rule of 27 Nov stopped
        // it at step 225.
        let r = Rule {
            noise: reading_noise(GPU_BEST).unwrap(),
            ..rule(GPU_BEST, 2, 0.0037, Some(Minimize), false)
        };
        assert_eq!(first_pruned(GPU_ESCAPES, &r), None);
        // Had it stayed on the plateau behind the best, it would have been stopped.
        let stays: Vec<Point> = GPU_ESCAPES[..4]
            .iter()
            .map(|&(s, v)| (s, v + 0.05))
            .collect();
        assert!(first_pruned(&stays, &r).is_some());
    }

    #[test]
    fn once_the_best_left_a_plateau_runs_are_judged_only_after_it_stopped_speeding_up() {
        // The best that left the plateau: from step 375 on it gained more than twice as fast
        // as on the plateau, up to step 1,200. A cosine schedule's bend is no plateau.
        let noise = reading_noise(GPU_ESCAPES).unwrap();
        assert_eq!(speedup_end(GPU_ESCAPES, noise), 1200);
        assert_eq!(speedup_end(GPU_BEST, reading_noise(GPU_BEST).unwrap()), 0);
        // A run of that night behind it from step 375 on, reverted at 3.326: on the plateau it
        // could still have left it sooner, so it is stopped only after step 1,200.
        let later: &[Point] = &[
            (75, 3.86649),
            (150, 3.77438),
            (225, 3.75537),
            (300, 3.74759),
            (375, 3.7403),
            (450, 3.72905),
            (525, 3.71108),
            (600, 3.68457),
            (675, 3.64598),
            (750, 3.59417),
            (825, 3.53909),
            (900, 3.48163),
            (975, 3.43233),
            (1050, 3.39553),
            (1125, 3.36662),
            (1200, 3.34771),
            (1275, 3.33522),
            (1350, 3.32861),
            (1425, 3.32633),
            (1500, 3.32605),
        ];
        let r = Rule {
            noise,
            ..rule(GPU_ESCAPES, 2, 0.0037, Some(Minimize), false)
        };
        assert_eq!(first_pruned(later, &r), Some(1275));
        // `early` compares levels only, and stops it on the plateau.
        let early = Rule { early: true, ..r };
        assert!(first_pruned(later, &early).unwrap() <= 450);
        // The same for a metric to maximize (the curves turned over).
        let turn = |c: &[Point]| c.iter().map(|&(s, v)| (s, -v)).collect::<Vec<_>>();
        let best = turn(GPU_ESCAPES);
        let up = Rule {
            noise,
            ..rule(&best, 2, 0.0037, Some(Maximize), false)
        };
        assert_eq!(first_pruned(&turn(later), &up), Some(1275));
    }

    #[test]
    fn a_slow_starter_that_ends_better_is_never_stopped() {
        let reference = crossing_reference();
        let noise = reading_noise(&reference).unwrap();
        let r = Rule {
            noise,
            ..rule(&reference, 2, 0.001, Some(Minimize), false)
        };
        // Exponential, slower and on a lower floor: ends at 0.96, behind at every early step.
        let slow = curve(20, 0.003, |t| 0.8 + 3.2 * (-3.0 * t).exp());
        assert!(slow[4].1 > reference[4].1);
        assert!(slow[19].1 < reference[19].1);
        assert_eq!(
            first_pruned(&slow, &r),
            None,
            "{slow:?} {reference:?} {noise}"
        );
        // A power law in the step (slow to flatten, unlike any exponential): ends at 1.02.
        let power = curve(20, 0.003, |t| -0.1 + 5.0 * (20.0 * t).powf(-0.5));
        assert!(power[4].1 > reference[4].1);
        assert!(power[19].1 < reference[19].1);
        assert_eq!(first_pruned(&power, &r), None);
        // `early` stops both.
        let early = Rule { early: true, ..r };
        assert!(first_pruned(&slow, &early).is_some());
        assert!(first_pruned(&power, &early).is_some());
        // Where they end worse than the best, they are stopped before the end.
        let slow_worse = curve(20, 0.003, |t| 1.2 + 2.8 * (-3.0 * t).exp());
        assert!(first_pruned(&slow_worse, &r).unwrap() < 20);
        let power_worse = curve(20, 0.003, |t| 0.1 + 5.0 * (20.0 * t).powf(-0.5));
        assert!(first_pruned(&power_worse, &r).unwrap() < 20);
    }
}
