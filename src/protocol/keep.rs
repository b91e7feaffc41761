//! Keep or revert: an attempt is kept only when its evaluation ran and measured strictly better
//! than the researcher's best (the guard commands, run afterwards, can still reject it). A streak
//! of non-improving attempts gives the stuck levels the prompt advises on.

use crate::model::Direction;
use crate::model::{EvalStatus, Verdict};

/// Consecutive non-improving attempts that reach stuck level 1 (switch strategy), 2 (deep
/// pivot) and 3 (the researcher stops for the round and is respawned the next).
pub const STUCK_LEVELS: [u32; 3] = [3, 5, 7];

/// Whether `metric` improves on `best`: strictly better in the direction; anything improves on
/// no best yet; without a direction (qualitative mode) higher is better.
pub fn improves(metric: f64, best: Option<f64>, direction: Option<Direction>) -> bool {
    match (best, direction) {
        (Some(best), Some(dir)) => dir.better(metric, best),
        (None, _) => true,
        (Some(best), None) => metric > best,
    }
}

/// The verdict on an evaluated attempt, before the guard: kept when the evaluation ran (`ok`)
/// and its metric improves on `best`, reverted when it ran but does not, timeout when it ran out
/// of time, pruned when pruning stopped it, crashed otherwise (including a status this release
/// does not know).
pub fn verdict(
    eval_status: &str,
    metric: Option<f64>,
    best: Option<f64>,
    direction: Option<Direction>,
) -> Verdict {
    match EvalStatus::parse(eval_status) {
        Some(EvalStatus::Ok) if metric.is_some_and(|m| improves(m, best, direction)) => {
            Verdict::Kept
        }
        Some(EvalStatus::Ok) => Verdict::Reverted,
        Some(EvalStatus::Timeout) => Verdict::Timeout,
        Some(EvalStatus::Pruned) => Verdict::Pruned,
        _ => Verdict::Crashed,
    }
}

/// The stuck level (0-3) a streak of `consecutive_fails` non-improving attempts gives.
pub fn stuck_level(consecutive_fails: u32) -> u8 {
    STUCK_LEVELS
        .iter()
        .filter(|&&l| consecutive_fails >= l)
        .count() as u8
}

/// Whether the attempt that made the streak `consecutive_fails` long entered a new stuck level
/// (a `researcher.stuck` event is recorded then).
pub fn enters_a_stuck_level(consecutive_fails: u32) -> bool {
    STUCK_LEVELS.contains(&consecutive_fails)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    #[test]
    fn verdict_table() {
        type Case = (
            &'static str,
            Option<f64>,
            Option<f64>,
            Option<Direction>,
            Verdict,
        );
        let cases: &[Case] = &[
            // Strictly better only: equal is reverted, in both directions.
            ("ok", Some(0.9), Some(1.0), Some(Minimize), Verdict::Kept),
            (
                "ok",
                Some(1.0),
                Some(1.0),
                Some(Minimize),
                Verdict::Reverted,
            ),
            (
                "ok",
                Some(1.1),
                Some(1.0),
                Some(Minimize),
                Verdict::Reverted,
            ),
            ("ok", Some(1.1), Some(1.0), Some(Maximize), Verdict::Kept),
            (
                "ok",
                Some(1.0),
                Some(1.0),
                Some(Maximize),
                Verdict::Reverted,
            ),
            (
                "ok",
                Some(0.9),
                Some(1.0),
                Some(Maximize),
                Verdict::Reverted,
            ),
            // The smallest step counts (no tolerance at keep time: the review has one).
            (
                "ok",
                Some(1.0 - 1e-12),
                Some(1.0),
                Some(Minimize),
                Verdict::Kept,
            ),
            // No best yet: any metric is kept.
            ("ok", Some(5.0), None, Some(Minimize), Verdict::Kept),
            ("ok", Some(5.0), None, None, Verdict::Kept),
            // Qualitative mode: higher is better.
            ("ok", Some(8.0), Some(7.0), None, Verdict::Kept),
            ("ok", Some(7.0), Some(7.0), None, Verdict::Reverted),
            // NaN never improves.
            (
                "ok",
                Some(f64::NAN),
                Some(1.0),
                Some(Minimize),
                Verdict::Reverted,
            ),
            // Ran but no metric: reverted (the evaluator reports a missing metric as crashed).
            ("ok", None, Some(1.0), Some(Minimize), Verdict::Reverted),
            (
                "timeout",
                Some(0.1),
                Some(1.0),
                Some(Minimize),
                Verdict::Timeout,
            ),
            (
                "crashed",
                Some(0.1),
                Some(1.0),
                Some(Minimize),
                Verdict::Crashed,
            ),
            // Stopped early by pruning: pruned, never kept.
            ("pruned", None, Some(1.0), Some(Minimize), Verdict::Pruned),
            (
                "something new",
                Some(0.1),
                Some(1.0),
                Some(Minimize),
                Verdict::Crashed,
            ),
        ];
        for &(status, metric, best, dir, want) in cases {
            assert_eq!(
                verdict(status, metric, best, dir),
                want,
                "{status} {metric:?} against {best:?} ({dir:?})"
            );
        }
    }

    #[test]
    fn stuck_levels_at_3_5_and_7() {
        let levels: Vec<u8> = (0..=9).map(stuck_level).collect();
        assert_eq!(levels, [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]);
        let entered: Vec<u32> = (0..=20).filter(|&n| enters_a_stuck_level(n)).collect();
        assert_eq!(entered, [3, 5, 7]);
    }
}
