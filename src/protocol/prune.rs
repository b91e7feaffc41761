//! Pruning: whether an evaluation that is still running is already lost.
//!
//! An evaluation may print intermediate readings of its metric (a learning curve). With `prune:
//! on`, each new reading is compared with the reference curve: the curve of the researcher's
//! current best, the snapshot the attempt must beat to be kept. Once the run has printed at least
//! `warmup` readings, it is stopped when both hold:
//!
//! - its reading is worse than the reference at the same step by more than the noise margin;
//! - it cannot catch up at its current pace: improving from here to the reference's last step at
//!   the rate of its last two readings, it would still end worse than the reference's last
//!   reading by more than the noise margin.
//!
//! The second condition is for curves that cross. A slower start often ends better (a lower
//! learning rate, more regularisation): such a run is behind the best at every early step, but
//! still improving faster than the best did there. Learning curves flatten as they go (each step
//! gains less than the one before), so the pace of the last two readings held to the end bounds
//! what the run can still gain: a run that misses the best's end even at that pace is lost.
//!
//! `prune: early` leaves the second condition out (Optuna's pruners compare levels only): runs
//! stop sooner, and a slow starter that would have ended better is stopped too.
//!
//! The reference at a step between two of its readings is interpolated linearly; past its last
//! reading it is its last reading (the nearest at or before); before its first there is no
//! reference, and no decision.

use crate::model::Direction;
use crate::model::Pruned;

/// One intermediate reading: the step the evaluation named and the metric's value there.
pub type Point = (u64, f64);

/// The reference curve's value at `step`: linear between the two readings around it, its last
/// reading past its end, None before its first reading (or for an empty curve). `reference` is
/// in the order printed; readings are sorted by step here.
pub fn reference_at(reference: &[Point], step: u64) -> Option<f64> {
    let mut points: Vec<Point> = reference
        .iter()
        .copied()
        .filter(|(_, v)| v.is_finite())
        .collect();
    points.sort_by_key(|(s, _)| *s);
    let after = points.iter().position(|(s, _)| *s >= step);
    match after {
        Some(i) if points[i].0 == step => Some(points[i].1),
        Some(0) => None,
        Some(i) => {
            let ((s0, v0), (s1, v1)) = (points[i - 1], points[i]);
            let t = (step - s0) as f64 / (s1 - s0) as f64;
            Some(v0 + t * (v1 - v0))
        }
        None => points.last().map(|(_, v)| *v),
    }
}

/// Whether the run whose readings so far are `curve` (in the order printed) is pruned after its
/// latest reading: it has at least `warmup` readings (and at least one), its latest reading is
/// worse than `reference` at that step by more than `margin` in `direction`, and at its current
/// pace it would still end worse than the reference's last reading by more than `margin` (see
/// the module's doc; not checked when `early`). Without a direction (qualitative mode) nothing is
/// pruned.
pub fn decide(
    curve: &[Point],
    reference: &[Point],
    warmup: u32,
    margin: f64,
    direction: Option<Direction>,
    early: bool,
) -> Option<Pruned> {
    let direction = direction?;
    let margin = margin.max(0.0);
    if curve.len() < (warmup as usize).max(1) {
        return None;
    }
    let &(step, value) = curve.last()?;
    if !value.is_finite() {
        return None;
    }
    let at_step = reference_at(reference, step)?;
    if direction.gain(at_step, value) <= margin {
        return None;
    }
    let pruned = Pruned {
        step,
        value,
        reference: at_step,
    };
    if early {
        return Some(pruned);
    }
    let &(end_step, end) = reference
        .iter()
        .filter(|(_, v)| v.is_finite())
        .max_by_key(|(s, _)| *s)?;
    let gained = pace(curve, direction) * end_step.saturating_sub(step) as f64;
    let reachable = match direction {
        Direction::Minimize => value - gained,
        Direction::Maximize => value + gained,
    };
    (direction.gain(end, reachable) > margin).then_some(pruned)
}

/// How much the run gained per step between its last two readings (0 when it got worse, or
/// with one reading).
fn pace(curve: &[Point], direction: Direction) -> f64 {
    let [.., (s0, v0), (s1, v1)] = curve else {
        return 0.0;
    };
    if s1 <= s0 || !v0.is_finite() {
        return 0.0;
    }
    (direction.gain(*v1, *v0) / (s1 - s0) as f64).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    const REF: &[Point] = &[(100, 2.0), (200, 1.5), (300, 1.2)];

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
            // Within the margin: goes on (exactly at the margin too).
            (&[(100, 2.0), (200, 1.55)], 2, 0.1, Some(Minimize), None),
            (&[(100, 2.0), (200, 1.75)], 2, 0.25, Some(Minimize), None),
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
                decide(curve, REF, warmup, margin, direction, false),
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
                decide(curve, up, 2, 0.1, Some(Maximize), false),
                want,
                "{curve:?}"
            );
        }
        // `prune: early`: behind at the step is enough, even for a run that would catch up.
        let slow_starter: &[Point] = &[(100, 3.0), (200, 2.0)];
        assert_eq!(
            decide(slow_starter, REF, 2, 0.1, Some(Minimize), true),
            pruned(200, 2.0, 1.5)
        );
        assert_eq!(
            decide(slow_starter, REF, 2, 0.1, Some(Minimize), false),
            None
        );
        assert_eq!(
            decide(
                &[(100, 2.0), (200, 1.55)],
                REF,
                2,
                0.1,
                Some(Minimize),
                true
            ),
            None
        );
        assert_eq!(
            decide(&[(100, 9.0)], REF, 2, 0.1, Some(Minimize), true),
            None
        );
        // No reference curve (the best printed no readings): never.
        assert_eq!(
            decide(
                &[(100, 9.0), (200, 9.0)],
                &[],
                2,
                0.0,
                Some(Minimize),
                false
            ),
            None
        );
    }
}
