//! Knowledge transfer's rules: the order it picks validated findings in, and the acceptance
//! rule: a validated finding, cherry-picked onto best and measured there, stays only if the
//! combined best is strictly better than best was.

use crate::model::Direction;
use crate::model::{Finding, PickResult, ReviewVerdict};

/// Validated findings in transfer order: larger reproduced gain first, ties to the lower letter.
pub fn transfer_order(findings: &[Finding]) -> Vec<Finding> {
    let mut v: Vec<Finding> = findings
        .iter()
        .filter(|f| f.verdict == ReviewVerdict::Validated)
        .cloned()
        .collect();
    v.sort_by(|a, b| {
        b.gain_reproduced
            .partial_cmp(&a.gain_reproduced)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.researcher.cmp(&b.researcher))
    });
    v
}

/// Whether the pick measured at `metric` stays on a best measured at `best`, and the reason
/// users read. `crash` is why the combined best printed no metric (when it did not).
pub fn decide(
    metric: Option<f64>,
    best: Option<f64>,
    direction: Direction,
    crash: &str,
) -> (PickResult, String) {
    match (metric, best) {
        (Some(m), Some(b)) if direction.gain(m, b) > 0.0 => (
            PickResult::Merged,
            format!("best improves: {b:.6} → {m:.6}"),
        ),
        (Some(m), None) => (PickResult::Merged, format!("best measured at {m:.6}")),
        (Some(m), Some(b)) => (
            PickResult::Dropped,
            format!("combined best {m:.6} is not better than {b:.6}"),
        ),
        (None, _) => (
            PickResult::Dropped,
            format!("combined best crashed: {crash}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    fn finding(researcher: &str, verdict: ReviewVerdict, gain: f64) -> Finding {
        Finding {
            researcher: researcher.into(),
            commit: "1".repeat(40).try_into().unwrap(),
            round_start: "0".repeat(40).try_into().unwrap(),
            description: String::new(),
            files: vec![],
            claimed: None,
            start_metric: None,
            reproduced: None,
            runs: vec![],
            start_runs: vec![],
            gain_claimed: gain,
            gain_reproduced: gain,
            tolerance: 0.0,
            holdout: None,
            verdict: verdict.into(),
            reasoning: String::new(),
            noise_sd: None,
            noisy: None,
            suggested_noise_runs: None,
        }
    }

    /// Validated findings only, the larger reproduced gain first, ties to the lower letter.
    #[test]
    fn transfer_order_table() {
        use ReviewVerdict::{Challenged, Overturned, Validated};
        let findings = [
            finding("C", Validated, 1.0),
            finding("A", Challenged, 9.0),
            finding("B", Validated, 2.0),
            finding("D", Overturned, 5.0),
            finding("E", Validated, 1.0),
        ];
        let order: Vec<String> = transfer_order(&findings)
            .into_iter()
            .map(|f| f.researcher)
            .collect();
        assert_eq!(order, ["B", "C", "E"]);
    }

    #[test]
    fn pick_table() {
        type Case = (
            Option<f64>,
            Option<f64>,
            Direction,
            PickResult,
            &'static str,
        );
        let cases: &[Case] = &[
            (
                Some(99.0),
                Some(89.0),
                Maximize,
                PickResult::Merged,
                "best improves: 89.000000 → 99.000000",
            ),
            (
                Some(89.0),
                Some(89.0),
                Maximize,
                PickResult::Dropped,
                "combined best 89.000000 is not better than 89.000000",
            ),
            (
                Some(88.0),
                Some(89.0),
                Maximize,
                PickResult::Dropped,
                "combined best 88.000000 is not better than 89.000000",
            ),
            (
                Some(0.5),
                Some(0.6),
                Minimize,
                PickResult::Merged,
                "best improves: 0.600000 → 0.500000",
            ),
            (
                Some(0.6),
                Some(0.6),
                Minimize,
                PickResult::Dropped,
                "combined best 0.600000 is not better than 0.600000",
            ),
            (
                Some(0.7),
                Some(0.6),
                Minimize,
                PickResult::Dropped,
                "combined best 0.700000 is not better than 0.600000",
            ),
            // No tolerance: the review already asked for a gain beyond the noise.
            (
                Some(0.6 - 1e-9),
                Some(0.6),
                Minimize,
                PickResult::Merged,
                "best improves: 0.600000 → 0.600000",
            ),
            (
                Some(1.0),
                None,
                Minimize,
                PickResult::Merged,
                "best measured at 1.000000",
            ),
            (
                None,
                Some(1.0),
                Minimize,
                PickResult::Dropped,
                "combined best crashed: exit 1",
            ),
            (
                None,
                None,
                Maximize,
                PickResult::Dropped,
                "combined best crashed: exit 1",
            ),
            (
                Some(f64::NAN),
                Some(1.0),
                Maximize,
                PickResult::Dropped,
                "combined best NaN is not better than 1.000000",
            ),
        ];
        for &(metric, best, dir, result, reason) in cases {
            assert_eq!(
                decide(metric, best, dir, "exit 1"),
                (result, reason.to_string()),
                "{metric:?} on {best:?} ({dir:?})"
            );
        }
    }
}
