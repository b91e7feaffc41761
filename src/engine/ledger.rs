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
    Ok(parse_jsonl(&bytes))
}

fn parse_jsonl<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Vec<T> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
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
///
/// Each iteration reads its round's attempts (briefing, the tuner, the stuck rule): parsed chunks
/// are kept by blob id (`PARSED_ROUNDS`), so that an iteration parses the one chunk that grew, not
/// the whole round (a round's records are stored in chunks: `store::events::append_target`).
pub fn round_attempts(conf: &Conference, round: u32) -> Result<Vec<AttemptRecord>> {
    type Chunks = Vec<(git2::Oid, std::sync::Arc<Vec<AttemptRecord>>)>;
    /// The chunks last read for the few most recent paths (a bound: a round's attempts, not all).
    static PARSED_ROUNDS: std::sync::Mutex<Vec<(String, Chunks)>> =
        std::sync::Mutex::new(Vec::new());
    const ROUNDS_KEPT: usize = 4;
    let path = files::attempts(round);
    let before: Chunks = {
        let mut kept = PARSED_ROUNDS.lock().unwrap();
        match kept.iter().position(|(p, _)| *p == path) {
            Some(i) => kept.remove(i).1,
            None => Vec::new(),
        }
    };
    let chunks = conf.read_record_blobs(
        &path,
        |id| before.iter().find(|(b, _)| *b == id).map(|(_, p)| p.clone()),
        |bytes| std::sync::Arc::new(parse_jsonl(bytes)),
    )?;
    let attempts = chunks.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
    let mut kept = PARSED_ROUNDS.lock().unwrap();
    kept.push((path, chunks));
    let excess = kept.len().saturating_sub(ROUNDS_KEPT);
    kept.drain(..excess);
    Ok(attempts)
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
