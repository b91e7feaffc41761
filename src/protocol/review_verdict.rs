//! The hold-out rule of the peer review: a finding validated on the evaluation is challenged when
//! the hold-out evaluation reads it worse than the round start by more than the tolerance, or
//! fails on it. (The verdict from the interleaved readings, around the tolerance, the noise and
//! consistency, is `engine::noise::judge`; crashes and frozen paths overturn before it.)

use crate::config::Direction;

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
}
