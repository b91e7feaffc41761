//! Round completion: whether a round made progress beyond the noise threshold, and the streak
//! counters the stop rules read (`stop_rules`): rounds without progress (the plateau), rounds in
//! which every researcher was stalled, rounds with every qualitative score high.

use crate::model::{Direction, Tolerance};

/// A qualitative score at least this high counts as high (the seed's "all scores ≥ 8/10").
pub const HIGH_SCORE: f64 = 8.0;

/// The noise threshold for the plateau rule and peer review: Min consensus delta when set (an
/// absolute value, or a percentage of the baseline), else 0.1% of the baseline, and 0 for a
/// metric measured in whole numbers (every baseline reading an integer: one unit better is
/// progress).
pub fn noise_threshold(
    min_consensus_delta: Option<Tolerance>,
    baseline: Option<f64>,
    baseline_runs: &[f64],
) -> f64 {
    if let Some(t) = min_consensus_delta {
        return t.resolve(baseline.unwrap_or(0.0));
    }
    let integer = !baseline_runs.is_empty() && baseline_runs.iter().all(|v| v.fract() == 0.0);
    if integer {
        return 0.0;
    }
    Tolerance::Percent(0.1).resolve(baseline.unwrap_or(0.0))
}

/// Whether the best after the round (`now`) moved beyond `threshold` from the best before it
/// (the previous round's, or the baseline); a first measured best is progress.
pub fn progressed(
    now: Option<f64>,
    before: Option<f64>,
    direction: Option<Direction>,
    threshold: f64,
) -> bool {
    match (now, before, direction) {
        (Some(now), Some(before), Some(dir)) => dir.gain(now, before) > threshold,
        (Some(_), None, _) => true,
        _ => false,
    }
}

/// The streak counters the stop rules read (model data: the round's event carries them).
pub use crate::model::event::Streaks;

/// The counters after a round: each grows by one when its condition held this round and starts
/// again from 0 when it did not.
pub fn streaks_after(
    before: Streaks,
    progressed: bool,
    all_stalled: bool,
    all_high: bool,
) -> Streaks {
    let next = |n: u32, holds: bool| if holds { n + 1 } else { 0 };
    Streaks {
        plateau_rounds: next(before.plateau_rounds, !progressed),
        stalled_rounds: next(before.stalled_rounds, all_stalled),
        high_score_rounds: next(before.high_score_rounds, all_high),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    #[test]
    fn noise_threshold_table() {
        type Case = (Option<Tolerance>, Option<f64>, &'static [f64], f64);
        let cases: &[Case] = &[
            // The default: 0.1% of the baseline (of its magnitude).
            (None, Some(2.0), &[2.0, 2.5], 0.002),
            (None, Some(-50.0), &[-50.5], 0.05),
            (None, None, &[], 0.0),
            // A metric in whole numbers: 0.
            (None, Some(60.0), &[60.0, 60.0], 0.0),
            (None, Some(60.0), &[], 0.06),
            // Min consensus delta wins, even for whole numbers.
            (Some(Tolerance::Absolute(0.5)), Some(60.0), &[60.0], 0.5),
            (Some(Tolerance::Absolute(-0.5)), Some(60.0), &[60.0], 0.5),
            (Some(Tolerance::Percent(1.0)), Some(200.0), &[200.5], 2.0),
        ];
        for &(delta, baseline, runs, want) in cases {
            let got = noise_threshold(delta, baseline, runs);
            assert!(
                (got - want).abs() < 1e-12,
                "{delta:?} {baseline:?} {runs:?}: {got}"
            );
        }
    }

    #[test]
    fn progress_table() {
        type Case = (Option<f64>, Option<f64>, Option<Direction>, f64, bool);
        let cases: &[Case] = &[
            (Some(99.0), Some(60.0), Some(Maximize), 0.0, true),
            // Beyond the threshold, strictly.
            (Some(60.5), Some(60.0), Some(Maximize), 0.5, false),
            (Some(60.625), Some(60.0), Some(Maximize), 0.5, true),
            (Some(60.0), Some(60.0), Some(Maximize), 0.0, false),
            (Some(0.5), Some(1.0), Some(Minimize), 0.25, true),
            (Some(0.75), Some(1.0), Some(Minimize), 0.25, false),
            (Some(1.5), Some(1.0), Some(Minimize), 0.0, false),
            // A first measured best is progress; no best is none; qualitative mode has no
            // direction and no plateau.
            (Some(1.0), None, Some(Minimize), 0.0, true),
            (None, Some(1.0), Some(Minimize), 0.0, false),
            (Some(9.0), Some(1.0), None, 0.0, false),
        ];
        for &(now, before, dir, threshold, want) in cases {
            assert_eq!(
                progressed(now, before, dir, threshold),
                want,
                "{now:?} from {before:?} ({dir:?}) beyond {threshold}"
            );
        }
    }

    #[test]
    fn streaks_grow_while_their_condition_holds_and_restart_otherwise() {
        let s = Streaks {
            plateau_rounds: 1,
            stalled_rounds: 2,
            high_score_rounds: 3,
        };
        assert_eq!(
            streaks_after(s, false, true, true),
            Streaks {
                plateau_rounds: 2,
                stalled_rounds: 3,
                high_score_rounds: 4
            }
        );
        assert_eq!(streaks_after(s, true, false, false), Streaks::default());
        assert_eq!(HIGH_SCORE, 8.0);
    }
}
