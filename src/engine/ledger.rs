//! The one reader of the state tree's records: a round's attempts, the review's findings and
//! start readings, the knowledge-transfer picks. The phases write these files (through the
//! recorder) and read each other's through here, so no phase imports another for its records;
//! the paths are `state::files`, the records `model::records`.

use anyhow::Result;
use serde::Deserialize;

use super::state::{files, State};
use super::Conference;
use crate::model::{AttemptRecord, Finding, PickRecord};

/// How many recent attempts a researcher's briefing reads.
const RECENT_ATTEMPTS: usize = 200;

/// Reads a JSON-lines file of the state tree (a line that does not parse is skipped).
fn read_jsonl<T: for<'de> Deserialize<'de>>(conf: &Conference, path: &str) -> Result<Vec<T>> {
    let bytes = conf.read_state_file(path)?.unwrap_or_default();
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Reads a JSON file of the state tree; an absent file is the default.
fn read_json<T: for<'de> Deserialize<'de> + Default>(conf: &Conference, path: &str) -> Result<T> {
    Ok(conf
        .read_state_file(path)?
        .map(|b| serde_json::from_slice(&b))
        .transpose()?
        .unwrap_or_default())
}

/// All attempts of a round, in the order they were recorded.
pub fn round_attempts(conf: &Conference, round: u32) -> Result<Vec<AttemptRecord>> {
    read_jsonl(conf, &files::attempts(round))
}

/// A researcher's recent attempts (bounded), oldest first.
pub fn recent_attempts(conf: &Conference, researcher: &str) -> Result<Vec<AttemptRecord>> {
    // Read from the round files, newest round first, until enough are found: each iteration then
    // writes one attempts file (its round's), not a second per-researcher copy.
    let mut found: Vec<AttemptRecord> = Vec::new();
    for round in (1..=conf.state().round).rev() {
        let mut batch: Vec<AttemptRecord> = round_attempts(conf, round)?
            .into_iter()
            .filter(|a| a.researcher == researcher)
            .collect();
        batch.append(&mut found);
        found = batch;
        if found.len() >= RECENT_ATTEMPTS {
            break;
        }
    }
    let skip = found.len().saturating_sub(RECENT_ATTEMPTS);
    Ok(found.split_off(skip))
}

/// Every attempt of the conference, round by round.
pub fn all_attempts(conf: &Conference, st: &State) -> Result<Vec<AttemptRecord>> {
    let mut all = Vec::new();
    for round in 1..=st.round {
        all.extend(round_attempts(conf, round)?);
    }
    Ok(all)
}

/// The review's findings of a round; an error when the file cannot be read or parsed.
pub fn findings(conf: &Conference, round: u32) -> Result<Vec<Finding>> {
    read_json(conf, &files::findings(round))
}

/// The review's findings of a round, none when they cannot be read (pages and briefings).
pub fn read_findings(conf: &Conference, round: u32) -> Vec<Finding> {
    findings(conf, round).unwrap_or_default()
}

/// The review's readings of the round start.
pub fn start_runs(conf: &Conference, round: u32) -> Result<Vec<f64>> {
    read_json(conf, &files::start_runs(round))
}

/// The transfer decisions of a round, in the order they were made.
pub fn read_picks(conf: &Conference, round: u32) -> Vec<PickRecord> {
    read_jsonl(conf, &files::picks(round)).unwrap_or_default()
}
