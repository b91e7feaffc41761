//! The records of the state tree's files: one line per attempt (`round-N/attempts.jsonl`) and
//! per knowledge-transfer pick (`round-N/transfer.jsonl`), the review's findings
//! (`round-N/findings.json`) and the conflicts between them. Every phase reads them; none owns
//! them, so they live here, below the engine (`engine/ledger.rs` reads them).

use super::words::{PickResult, ReviewVerdict, Verdict, Word};
use serde::{Deserialize, Serialize};

/// One attempt, as the state's attempts files and the results table have it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub round: u32,
    pub researcher: String,
    pub iteration: u32,
    pub commit: String,
    pub tree: String,
    pub metric: Option<f64>,
    pub delta: Option<f64>,
    pub verdict: Word<Verdict>,
    pub description: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub timestamp: String,
    #[serde(default)]
    pub sub_metrics: std::collections::BTreeMap<String, f64>,
    /// What the agent reported using for this attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<super::Tokens>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Seconds the agent ran, and the evaluation (absent in records of earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_s: Option<f64>,
    /// Where the evaluation ran (absent for local runs without a GPU and in earlier records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<super::Placement>,
}

impl AttemptRecord {
    /// The word of an attempt set aside on resume (its evaluation was interrupted): not a
    /// verdict of the research (no event carries it), recorded so that a resume finds it.
    pub fn interrupted() -> Word<Verdict> {
        Word::Other(super::EvalStatus::Interrupted.as_str().into())
    }

    /// Set aside on resume (see [`AttemptRecord::interrupted`]).
    pub fn is_interrupted(&self) -> bool {
        self.verdict == super::EvalStatus::Interrupted.as_str()
    }
}

/// The GPU models `attempts` were evaluated on, when there is more than one: their numbers
/// are then not measured alike, and the review and the report say so.
pub fn mixed_gpu_models(attempts: &[AttemptRecord]) -> Option<Vec<String>> {
    let models: std::collections::BTreeSet<&str> = attempts
        .iter()
        .filter_map(|a| a.placement.as_ref()?.gpu.as_deref())
        .collect();
    (models.len() > 1).then(|| models.into_iter().map(str::to_string).collect())
}

/// What the review and the report say when evaluations ran on different GPU models.
pub fn mixed_gpu_warning(models: &[String]) -> String {
    format!(
        "evaluations ran on different GPU models ({}): a difference between attempts measured on different models may come from the hardware; compare them on one model before trusting it (e.g. pin the node class with `- slurm args:` or list hosts of one model)",
        models.join(", ")
    )
}

/// What became of one validated finding in knowledge transfer (`round-N/transfer.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PickRecord {
    pub researcher: String,
    pub finding: String,
    pub result: Word<PickResult>,
    pub reason: String,
    /// Files whose changes clashed with best's; best kept them (the seed's conflict rule).
    pub conflicts: Vec<String>,
    pub metric: Option<f64>,
}

/// One researcher's round-best as the review judged it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    pub researcher: String,
    pub commit: String,
    pub round_start: String,
    pub description: String,
    pub files: Vec<String>,
    pub claimed: Option<f64>,
    pub start_metric: Option<f64>,
    pub reproduced: Option<f64>,
    pub runs: Vec<f64>,
    pub start_runs: Vec<f64>,
    pub gain_claimed: f64,
    pub gain_reproduced: f64,
    pub tolerance: f64,
    pub holdout: Option<(f64, f64)>,
    /// Empty (`Word::unset`) while the review has not judged it yet.
    pub verdict: Word<ReviewVerdict>,
    pub reasoning: String,
    /// Noise of one reading as repeated readings measured it (None: not measured).
    #[serde(default)]
    pub noise_sd: Option<f64>,
    /// With one reading per tree: how far the researcher's and the review's readings of this
    /// snapshot disagreed, beyond the tolerance (the evaluation is noisy).
    #[serde(default)]
    pub noisy: Option<f64>,
    /// When noisy: the noise runs that would resolve the claimed gain.
    #[serde(default)]
    pub suggested_noise_runs: Option<u32>,
}

/// A file two validated findings change in ways that do not merge, and who keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conflict {
    pub file: String,
    pub winner: String,
    pub loser: String,
    /// The two gains were equal: the lower letter won the tie.
    pub tie: bool,
}

/// Why a run was pruned: the step, its reading, and the reference's value at that step.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pruned {
    pub step: u64,
    pub value: f64,
    pub reference: f64,
}
