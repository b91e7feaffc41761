//! The hold-out rule of the peer review: a finding validated on the evaluation is challenged when
//! the hold-out evaluation reads it worse than the round start by more than the tolerance, or
//! fails on it. (The verdict from the interleaved readings, around the tolerance, the noise and
//! consistency, is `engine::noise::judge`; crashes and frozen paths overturn before it.)

use crate::model::Direction;

/// What the hold-out evaluation says of a validated finding.
#[derive(Debug, Clone, PartialEq)]
pub enum Holdout {
    /// Not worse beyond the tolerance: the finding stays validated.
    Agrees,
    /// Worse than the round start beyond the tolerance: challenged.
    Worse { finding: f64, start: f64 },
    /// The hold-out evaluation printed no metric on the finding: challenged.
    Failed,
}

impl Holdout {
    /// The sentence appended to the review's reasoning when the finding is challenged.
    pub fn reasoning(&self) -> Option<String> {
        match self {
            Holdout::Agrees => None,
            Holdout::Worse { finding, start } => Some(format!(
                " The hold-out evaluation gets worse ({finding:.6} against {start:.6}): it may not generalise."
            )),
            Holdout::Failed => Some(" The hold-out evaluation failed on this snapshot.".into()),
        }
    }
}

/// The hold-out check of a validated finding read at `finding` (None: it failed) against the
/// round start read at `start`, with the review's `tolerance`.
pub fn holdout(direction: Direction, finding: Option<f64>, start: f64, tolerance: f64) -> Holdout {
    match finding {
        Some(v) if direction.gain(v, start) < -tolerance => Holdout::Worse { finding: v, start },
        Some(_) => Holdout::Agrees,
        None => Holdout::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    #[test]
    fn holdout_table() {
        type Case = (Direction, Option<f64>, f64, f64, &'static str);
        let cases: &[Case] = &[
            // Better or equal on the hold-out: agrees.
            (Minimize, Some(0.9), 1.0, 0.05, "agrees"),
            (Minimize, Some(1.0), 1.0, 0.05, "agrees"),
            // Worse within the tolerance (and exactly at it): agrees.
            (Minimize, Some(1.04), 1.0, 0.05, "agrees"),
            (Minimize, Some(1.5), 1.0, 0.5, "agrees"),
            // Worse beyond it: challenged.
            (Minimize, Some(1.06), 1.0, 0.05, "worse"),
            (Maximize, Some(0.94), 1.0, 0.05, "worse"),
            (Maximize, Some(0.96), 1.0, 0.05, "agrees"),
            // Zero tolerance (an integer metric): any loss challenges.
            (Maximize, Some(9.0), 10.0, 0.0, "worse"),
            (Maximize, Some(10.0), 10.0, 0.0, "agrees"),
            (Maximize, None, 10.0, 0.0, "failed"),
        ];
        for &(dir, finding, start, tol, want) in cases {
            let got = match holdout(dir, finding, start, tol) {
                Holdout::Agrees => "agrees",
                Holdout::Worse { .. } => "worse",
                Holdout::Failed => "failed",
            };
            assert_eq!(got, want, "{dir:?} {finding:?} against {start} ± {tol}");
        }
        assert_eq!(Holdout::Agrees.reasoning(), None);
        assert_eq!(
            holdout(Minimize, Some(1.2), 1.0, 0.1).reasoning().unwrap(),
            " The hold-out evaluation gets worse (1.200000 against 1.000000): it may not generalise."
        );
    }

    /// The verdict from the interleaved readings (`protocol::noise::judge`), pinned at each of its
    /// thresholds: the minimum delta, the noise margin, one lost pair of three or more, and the
    /// researcher's disagreeing reading as the only noise.
    #[test]
    fn the_review_verdict_at_its_thresholds() {
        use crate::model::ReviewVerdict::{self, Challenged, Overturned, Validated};
        use crate::protocol::noise::{judge, noise_margin, Evidence};
        let judged = |dir, start: &[f64], runs: &[f64], claimed: Option<f64>, min_delta| {
            let j = judge(&Evidence {
                direction: dir,
                start_runs: start,
                runs,
                claimed,
                gain_claimed: 0.0,
                min_delta,
                baseline_runs: &[],
            });
            (
                ReviewVerdict::parse(j.verdict).expect("a review word"),
                j.noisy.is_some(),
                j.needed,
            )
        };
        // The minimum delta: a gain equal to it is challenged, one above it validated.
        assert_eq!(
            judged(Maximize, &[1.0], &[1.5], Some(1.5), 0.5).0,
            Challenged
        );
        assert_eq!(
            judged(Maximize, &[1.0], &[1.625], Some(1.625), 0.5).0,
            Validated
        );
        assert_eq!(
            judged(Maximize, &[1.0], &[1.0], Some(1.0), 0.0).0,
            Overturned
        );
        assert_eq!(
            judged(Minimize, &[1.0], &[0.5], Some(0.5), 0.5).0,
            Challenged
        );
        // The noise margin: readings spread by ±0.25 around each median, five interleaved pairs.
        let spread = |m: f64| [m - 0.25, m + 0.25, m - 0.25, m + 0.25, m];
        let sd = 1.4826 * 0.25;
        let margin = noise_margin(sd, 5);
        assert!((margin - 3.0 * 1.25 * sd * (2.0f64 / 5.0).sqrt()).abs() < 1e-12);
        let (_, _, needed) = judged(Maximize, &spread(10.0), &spread(11.0), None, 0.01);
        assert!((needed - margin).abs() < 1e-9, "{needed} {margin}");
        for (gain, want) in [(margin * 0.999, Challenged), (margin * 1.001, Validated)] {
            let got = judged(Maximize, &spread(10.0), &spread(10.0 + gain), None, 0.01).0;
            assert_eq!(got, want, "gain {gain} against the margin {margin}");
        }
        // Consistency: of three or more pairs one may be lost, not two.
        let ones = [1.0; 5];
        assert_eq!(
            judged(Maximize, &ones, &[2.0, 2.0, 2.0, 2.0, 0.5], None, 0.01).0,
            Validated
        );
        assert_eq!(
            judged(Maximize, &ones, &[2.0, 2.0, 2.0, 0.5, 0.5], None, 0.01).0,
            Challenged
        );
        assert_eq!(
            judged(Maximize, &ones[..3], &[2.0, 2.0, 0.5], None, 0.01).0,
            Validated
        );
        // One reading each: the researcher's reading disagreeing beyond the tolerance is the
        // noise; the gain must beat that disagreement.
        let one = |claimed| judged(Minimize, &[10.0], &[9.9], Some(claimed), 0.01);
        assert_eq!(one(9.9).0, Validated);
        assert!(!one(9.9).1);
        let (v, noisy, needed) = one(9.85);
        assert_eq!((v, noisy), (Validated, true));
        assert!((needed - 0.05).abs() < 1e-9, "{needed}");
        assert_eq!(one(9.75).0, Challenged);
        assert!(one(9.75).1);
    }
}
