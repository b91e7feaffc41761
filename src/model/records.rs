//! The records of the state tree's files: one line per attempt (`round-N/attempts.jsonl`) and
//! per knowledge-transfer pick (`round-N/transfer.jsonl`), the review's findings
//! (`round-N/findings.json`) and the conflicts between them. Every phase reads them; none owns
//! them, so they live here, below the engine (`engine/ledger.rs` reads them).

use super::commit_id::{read_field, read_field_or_empty, write_or_empty};
use super::words::{PickResult, ReviewVerdict, Verdict, Word};
use super::CommitId;
use serde::{Deserialize, Deserializer, Serialize};

/// One attempt, as the state's attempts files and the results table have it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub round: u32,
    pub researcher: String,
    pub iteration: u32,
    /// The attempt's commit; none for an attempt imported from the original conference, which
    /// kept none (stored as `""`, as earlier releases wrote it).
    #[serde(deserialize_with = "attempt_commit", serialize_with = "write_or_empty")]
    pub commit: Option<CommitId>,
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
    /// On several machines: the machine that ran the attempt and read its metric (absent on
    /// one machine and in earlier records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// A sweep's values, their commits and metrics (`Parameter sweep: on`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<super::sweep::Sweep>,
}

impl AttemptRecord {
    /// The word of an attempt set aside on resume (its evaluation was interrupted): not a
    /// verdict of the research (no event carries it), recorded so that a resume finds it.
    pub fn interrupted() -> Word<Verdict> {
        Word::Other(super::EvalStatus::Interrupted.as_str().into())
    }

    /// The tree the attempt measured, as git names it; none for an imported attempt (stored as
    /// `""`: the original kept none).
    pub fn tree_id(&self) -> Option<git2::Oid> {
        git2::Oid::from_str(&self.tree).ok()
    }

    /// Set aside on resume (see [`AttemptRecord::interrupted`]).
    pub fn is_interrupted(&self) -> bool {
        self.verdict == super::EvalStatus::Interrupted.as_str()
    }
}

/// The hardware classes (GPU model and count) `attempts` were evaluated on, when there is more
/// than one: their numbers are then not measured alike, and the review, the report and `status`
/// say so.
pub fn mixed_gpu_models(attempts: &[AttemptRecord]) -> Option<Vec<String>> {
    super::placement::mixed_classes(attempts.iter().filter_map(|a| a.placement.as_ref()))
}

/// How many of `attempts`' readings each hardware class gave, by class.
pub fn readings_by_class(attempts: &[AttemptRecord]) -> std::collections::BTreeMap<String, usize> {
    let mut by = std::collections::BTreeMap::new();
    for class in attempts
        .iter()
        .filter_map(|a| a.placement.as_ref()?.class())
    {
        *by.entry(class).or_insert(0) += 1;
    }
    by
}

/// What the review and the report say when evaluations ran on different GPU models.
pub fn mixed_gpu_warning(models: &[String]) -> String {
    format!(
        "evaluations ran on different GPU models ({}): a difference between attempts measured on different models may come from the hardware; compare them on one model before trusting it (e.g. `- hardware: same` under ## Evaluation, pin the node class with `- slurm args:` or `- ray resources:`, or list hosts of one model)",
        models.join(", ")
    )
}

/// What became of one validated finding in knowledge transfer (`round-N/transfer.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PickRecord {
    pub researcher: String,
    /// The finding's commit.
    #[serde(deserialize_with = "pick_finding")]
    pub finding: CommitId,
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
    /// The researcher's head the review measured.
    #[serde(deserialize_with = "finding_commit")]
    pub commit: CommitId,
    /// Best at the round's start, which the review measured it against.
    #[serde(deserialize_with = "finding_round_start")]
    pub round_start: CommitId,
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

// Each commit id field is read naming itself, so that a record with a short or crafted id is
// refused saying which field holds it.
fn attempt_commit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CommitId>, D::Error> {
    read_field_or_empty(d, "commit")
}

fn pick_finding<'de, D: Deserializer<'de>>(d: D) -> Result<CommitId, D::Error> {
    read_field(d, "finding")
}

fn finding_commit<'de, D: Deserializer<'de>>(d: D) -> Result<CommitId, D::Error> {
    read_field(d, "commit")
}

fn finding_round_start<'de, D: Deserializer<'de>>(d: D) -> Result<CommitId, D::Error> {
    read_field(d, "round_start")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the recorded conference (`tests/data/recorded`, an earlier release) stores them:
    /// a kept and a crashed attempt, a transfer pick, and a review's findings file (its first
    /// finding), copied byte for byte.
    const ATTEMPT_KEPT: &str = r#"{"round":1,"researcher":"C","iteration":1,"commit":"8b8fd983711f6567b497af6f78ba433bf5ead884","tree":"8483c8416feb5b11b9983b70d63163439faf67de","metric":64.0,"delta":4.0,"verdict":"kept","description":"C: c.txt 30 -> 34 (round 1, iteration 1)","reason":null,"timestamp":"2026-11-23T22:34:27Z","sub_metrics":{}}"#;
    const ATTEMPT_CRASHED: &str = r#"{"round":1,"researcher":"C","iteration":2,"commit":"90edbd02eb4e292dbc87a56a798e139b36ec8a86","tree":"89569b9496e29f304bbe50abc8dbb54d363c3b26","metric":null,"delta":null,"verdict":"crashed","description":"change c.txt","reason":"agent exit status 1","timestamp":"2026-11-23T22:34:27Z","sub_metrics":{}}"#;
    const PICK: &str = r#"{"researcher":"C","finding":"c7e28e6c940250c1e2191cb1d185655bffd241a2","result":"merged","reason":"best improves: 60.000000 → 78.000000","conflicts":[],"metric":78.0}"#;
    const FINDINGS: &str = r#"[
  {
    "researcher": "A",
    "commit": "c600f5060ba23a8d9d93dae2e3d11e50a194efca",
    "round_start": "72f76fd99e71bf5e5e737f2efcd16382247a890c",
    "description": "A: a.txt 10 -> 13 (round 1, iteration 2); A: a.txt 13 -> 20 (round 1, iteration 3)",
    "files": [
      "a.txt"
    ],
    "claimed": 70.0,
    "start_metric": 60.0,
    "reproduced": 70.0,
    "runs": [
      70.0,
      70.0
    ],
    "start_runs": [
      60.0,
      60.0
    ],
    "gain_claimed": 10.0,
    "gain_reproduced": 10.0,
    "tolerance": 0.0,
    "holdout": null,
    "verdict": "validated",
    "reasoning": "Gain 10.000000 reproduces (median of 2 interleaved run(s), better in 2 of 2 pairs), beyond the tolerance 0.000000.",
    "noise_sd": 0.0,
    "noisy": null,
    "suggested_noise_runs": null
  }
]"#;
    /// An attempt `git conference import` records: the original kept no commit (nor tree).
    const ATTEMPT_IMPORTED: &str = r#"{"round":1,"researcher":"A","iteration":2,"commit":"","tree":"","metric":0.91,"delta":0.01,"verdict":"kept","description":"raise lr","reason":null,"timestamp":"2026-01-02T03:04:05Z","sub_metrics":{}}"#;

    fn attempt(line: &str) -> Result<AttemptRecord, String> {
        serde_json::from_str(line).map_err(|e| e.to_string())
    }

    #[test]
    fn records_of_earlier_releases_read_and_write_back_byte_for_byte() {
        for line in [ATTEMPT_KEPT, ATTEMPT_CRASHED, ATTEMPT_IMPORTED] {
            let a = attempt(line).unwrap();
            assert_eq!(serde_json::to_string(&a).unwrap(), line);
        }
        let kept = attempt(ATTEMPT_KEPT).unwrap();
        assert_eq!(
            kept.commit.as_deref(),
            Some("8b8fd983711f6567b497af6f78ba433bf5ead884")
        );
        let imported = attempt(ATTEMPT_IMPORTED).unwrap();
        assert_eq!((&imported.commit, imported.tree_id()), (&None, None));

        let pick: PickRecord = serde_json::from_str(PICK).unwrap();
        assert_eq!(serde_json::to_string(&pick).unwrap(), PICK);

        let findings: Vec<Finding> = serde_json::from_str(FINDINGS).unwrap();
        assert_eq!(serde_json::to_string_pretty(&findings).unwrap(), FINDINGS);
        assert_eq!(
            findings[0].round_start.oid().to_string(),
            findings[0].round_start.as_str()
        );
    }

    #[test]
    fn a_short_or_crafted_commit_is_refused_naming_its_field() {
        let short = ATTEMPT_KEPT.replace("8b8fd983711f6567b497af6f78ba433bf5ead884", "8b8fd98");
        let refused = attempt(&short).unwrap_err();
        assert!(
            refused.starts_with("commit is `8b8fd98`, not a full commit id"),
            "{refused}"
        );
        let upper = ATTEMPT_KEPT.replace("8b8fd983711f", "8B8FD983711F");
        assert!(attempt(&upper)
            .unwrap_err()
            .starts_with("commit is `8B8FD983711F"));
        // The tree is not a commit id: only the commit field is checked.
        assert!(attempt(&ATTEMPT_KEPT.replace("8483c8416feb", "")).is_ok());

        let crafted = PICK.replace("c7e28e6c940250c1e2191cb1d185655bffd241a2", "../../x");
        let refused = serde_json::from_str::<PickRecord>(&crafted).unwrap_err();
        assert!(refused
            .to_string()
            .starts_with("finding is `../../x`, not a full commit id"));

        let crafted = FINDINGS.replace("72f76fd99e71bf5e5e737f2efcd16382247a890c", "main");
        let refused = serde_json::from_str::<Vec<Finding>>(&crafted).unwrap_err();
        assert!(refused
            .to_string()
            .starts_with("round_start is `main`, not a full commit id"));
        let crafted = FINDINGS.replace("c600f5060ba23a8d9d93dae2e3d11e50a194efca", "");
        let refused = serde_json::from_str::<Vec<Finding>>(&crafted).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("commit is ``, not a full commit id"),
            "a finding always has a commit: {refused}"
        );
    }
}
