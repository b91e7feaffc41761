//! The notes on snapshot commits (`refs/notes/conference`), one struct per kind of note, each
//! built in one place of the engine. A note is stored as a JSON object with its keys in sorted
//! order (`Note` holds a `serde_json::Value`), so the bytes are those the `json!` literals of
//! earlier releases wrote: a field that was written as `null` stays an `Option` without
//! `skip_serializing_if`; one that was left out when empty keeps it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::event::Note;
use super::{CommitId, EvalStatus, PickResult, Placement, Pruned, ReviewVerdict, Verdict, Word};

/// The note on an attempt's commit: its verdict and measurements, and how long it ran.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptNote {
    pub commit: CommitId,
    pub conference: String,
    pub researcher: String,
    pub round: u32,
    pub iteration: u32,
    pub verdict: Word<Verdict>,
    pub metric: Option<f64>,
    pub runs: Vec<f64>,
    pub sub_metrics: BTreeMap<String, f64>,
    pub reason: Option<String>,
    pub agent_s: Option<f64>,
    pub eval_s: Option<f64>,
    /// The intermediate readings, only when there are (older notes lack them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<(u64, f64)>,
    /// Where pruning stopped the run, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pruned: Option<Pruned>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// The note on an attempt an interrupted run left in the worktree (`attempt.interrupted`).
#[derive(Debug, Clone, Serialize)]
pub struct InterruptedNote {
    pub commit: CommitId,
    pub conference: String,
    pub researcher: String,
    pub round: u32,
    pub iteration: u32,
    pub verdict: EvalStatus,
}

/// The note on a commit found on a branch moved by hand, set aside by `resume --force`
/// (`branch.set_aside`).
#[derive(Debug, Clone, Serialize)]
pub struct BranchSetAsideNote {
    pub commit: CommitId,
    pub conference: String,
    /// Always `set_aside`.
    pub verdict: &'static str,
    pub branch: String,
    pub researcher: Option<String>,
    pub round: u32,
    /// The commit the branch was recorded at.
    pub expected: CommitId,
}

/// The note on the baseline commit (`baseline.measured`).
#[derive(Debug, Clone, Serialize)]
pub struct BaselineNote {
    pub commit: CommitId,
    pub conference: String,
    /// Always `baseline`.
    pub verdict: &'static str,
    pub metric: f64,
    pub runs: Vec<f64>,
    pub sub_metrics: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<(u64, f64)>,
}

/// The note on a finding's commit after peer review (`round.peer_review`).
#[derive(Debug, Clone, Serialize)]
pub struct ReviewNote {
    pub commit: CommitId,
    pub conference: String,
    pub researcher: String,
    pub round: u32,
    pub verdict: Word<ReviewVerdict>,
    pub metric: Option<f64>,
    pub runs: Vec<f64>,
    pub claimed: Option<f64>,
    pub reason: String,
}

/// The note on a knowledge-transfer pick's combined commit (`transfer.pick`).
#[derive(Debug, Clone, Serialize)]
pub struct TransferNote {
    pub commit: CommitId,
    pub conference: String,
    pub researcher: String,
    pub round: u32,
    /// `kept` when the pick stayed on best, else `reverted`.
    pub verdict: Verdict,
    pub transfer: PickResult,
    pub metric: Option<f64>,
    pub runs: Option<Vec<f64>>,
    pub reason: String,
}

/// Every note becomes the open JSON object the notes store holds.
fn note(fields: &impl Serialize) -> Note {
    Note(serde_json::to_value(fields).expect("a note is plain data"))
}

impl From<AttemptNote> for Note {
    fn from(n: AttemptNote) -> Note {
        note(&n)
    }
}

impl From<InterruptedNote> for Note {
    fn from(n: InterruptedNote) -> Note {
        note(&n)
    }
}

impl From<BranchSetAsideNote> for Note {
    fn from(n: BranchSetAsideNote) -> Note {
        note(&n)
    }
}

impl From<BaselineNote> for Note {
    fn from(n: BaselineNote) -> Note {
        note(&n)
    }
}

impl From<ReviewNote> for Note {
    fn from(n: ReviewNote) -> Note {
        note(&n)
    }
}

impl From<TransferNote> for Note {
    fn from(n: TransferNote) -> Note {
        note(&n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A full commit id of the digit `d` repeated.
    fn id(d: char) -> CommitId {
        CommitId::try_from(d.to_string().repeat(40)).unwrap()
    }

    fn text(n: impl Into<Note>) -> String {
        serde_json::to_string(&n.into().0).unwrap()
    }

    /// Each note is byte for byte what the `json!` literal of earlier releases wrote: the same
    /// keys, sorted, `null` where it wrote `null`, left out where it left out.
    #[test]
    fn notes_are_the_bytes_earlier_releases_wrote() {
        let mut sub = BTreeMap::new();
        sub.insert("acc".to_string(), 0.5);
        let attempt = AttemptNote {
            commit: id('c'),
            conference: "x".into(),
            researcher: "A".into(),
            round: 2,
            iteration: 3,
            verdict: Verdict::Kept.into(),
            metric: Some(1.5),
            runs: vec![1.5],
            sub_metrics: sub.clone(),
            reason: None,
            agent_s: Some(0.1),
            eval_s: None,
            curve: vec![],
            pruned: None,
            placement: None,
        };
        let old = json!({"commit": id('c'), "conference": "x", "researcher": "A", "round": 2,
            "iteration": 3, "verdict": "kept", "metric": 1.5, "runs": [1.5], "sub_metrics": sub,
            "reason": null, "agent_s": 0.1, "eval_s": null});
        assert_eq!(text(attempt.clone()), old.to_string());
        let pruned = Pruned {
            step: 4,
            value: 2.0,
            reference: 1.0,
        };
        let mut old_curved = old.clone();
        old_curved["curve"] = json!([(1u64, 2.5), (4u64, 2.0)]);
        old_curved["pruned"] = json!(pruned);
        let curved = AttemptNote {
            curve: vec![(1, 2.5), (4, 2.0)],
            pruned: Some(pruned),
            ..attempt
        };
        assert_eq!(text(curved), old_curved.to_string());

        let interrupted = InterruptedNote {
            commit: id('c'),
            conference: "x".into(),
            researcher: "A".into(),
            round: 1,
            iteration: 2,
            verdict: EvalStatus::Interrupted,
        };
        let old = json!({"commit": id('c'), "conference": "x", "researcher": "A", "round": 1,
            "iteration": 2, "verdict": EvalStatus::Interrupted});
        assert_eq!(text(interrupted), old.to_string());

        let baseline = BaselineNote {
            commit: id('b'),
            conference: "x".into(),
            verdict: "baseline",
            metric: 3.0,
            runs: vec![3.0, 3.0],
            sub_metrics: BTreeMap::new(),
            curve: vec![],
        };
        let old = json!({"commit": id('b'), "conference": "x", "verdict": "baseline", "metric": 3.0,
            "runs": [3.0, 3.0], "sub_metrics": {}});
        assert_eq!(text(baseline), old.to_string());

        let set_aside = BranchSetAsideNote {
            commit: id('d'),
            conference: "x".into(),
            verdict: "set_aside",
            branch: "conference/x/researcher-A".into(),
            researcher: None,
            round: 2,
            expected: id('e'),
        };
        let old = json!({"commit": id('d'), "conference": "x", "verdict": "set_aside",
            "branch": "conference/x/researcher-A", "researcher": null, "round": 2,
            "expected": id('e')});
        assert_eq!(text(set_aside), old.to_string());

        let review = ReviewNote {
            commit: id('c'),
            conference: "x".into(),
            researcher: "B".into(),
            round: 1,
            verdict: ReviewVerdict::Validated.into(),
            metric: None,
            runs: vec![],
            claimed: Some(2.0),
            reason: "why".into(),
        };
        let old = json!({"commit": id('c'), "conference": "x", "researcher": "B", "round": 1,
            "verdict": "validated", "metric": null, "runs": [], "claimed": 2.0, "reason": "why"});
        assert_eq!(text(review), old.to_string());

        let transfer = TransferNote {
            commit: id('c'),
            conference: "x".into(),
            researcher: "B".into(),
            round: 1,
            verdict: Verdict::Reverted,
            transfer: PickResult::Dropped,
            metric: None,
            runs: None,
            reason: "worse".into(),
        };
        let old = json!({"commit": id('c'), "conference": "x", "researcher": "B", "round": 1,
            "verdict": Verdict::Reverted, "transfer": PickResult::Dropped, "metric": null,
            "runs": null, "reason": "worse"});
        assert_eq!(text(transfer), old.to_string());
    }
}
