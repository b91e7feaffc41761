//! The records of the state tree's JSON-lines files: one line per attempt
//! (`round-N/attempts.jsonl`) and per knowledge-transfer pick (`round-N/transfer.jsonl`).

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
    pub verdict: String,
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
}

/// What became of one validated finding in knowledge transfer (`round-N/transfer.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PickRecord {
    pub researcher: String,
    pub finding: String,
    /// merged | dropped
    pub result: String,
    pub reason: String,
    /// Files whose changes clashed with best's; best kept them (the seed's conflict rule).
    pub conflicts: Vec<String>,
    pub metric: Option<f64>,
}
