//! The one reader of the state tree's records: a round's attempts, the review's findings and
//! start readings, the knowledge-transfer picks. The phases write these files (through the
//! recorder) and read each other's through here, so no phase imports another for its records;
//! the paths are `state::files`, the records `model::records`.

use std::sync::{Arc, Mutex};

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
pub fn round_attempts(conf: &Conference, round: u32) -> Result<Vec<AttemptRecord>> {
    with_round_chunks(conf, round, |chunks| {
        chunks.iter().flat_map(|c| c.iter().cloned()).collect()
    })
}

/// The latest `n` attempts of a round that `keep` holds, oldest first: only those are copied, so
/// that a briefing late in a long round costs what it did early on.
pub fn latest_round_attempts(
    conf: &Conference,
    round: u32,
    n: usize,
    keep: impl Fn(&AttemptRecord) -> bool,
) -> Result<Vec<AttemptRecord>> {
    with_round_chunks(conf, round, |chunks| {
        let mut latest: Vec<AttemptRecord> = (chunks.iter().rev())
            .flat_map(|c| c.iter().rev())
            .filter(|a| keep(a))
            .take(n)
            .cloned()
            .collect();
        latest.reverse();
        latest
    })
}

type ParsedChunks = Vec<(git2::Oid, Arc<Vec<AttemptRecord>>)>;

/// Calls `f` with a round's attempts as parsed chunks, in order.
///
/// Each iteration reads its round's attempts (briefing, the tuner, the stuck rule): parsed chunks
/// are kept by blob id (`PARSED_ROUNDS`), so that an iteration parses the one chunk that grew, not
/// the whole round (a round's records are stored in chunks: `store::events::append_target`).
fn with_round_chunks<R>(
    conf: &Conference,
    round: u32,
    f: impl FnOnce(&[Arc<Vec<AttemptRecord>>]) -> R,
) -> Result<R> {
    /// The chunks last read for the few most recent paths (a bound: a round's attempts, not all).
    static PARSED_ROUNDS: Mutex<Vec<(String, ParsedChunks)>> = Mutex::new(Vec::new());
    const ROUNDS_KEPT: usize = 4;
    let path = files::attempts(round);
    let before: ParsedChunks = {
        let mut kept = PARSED_ROUNDS.lock().unwrap();
        match kept.iter().position(|(p, _)| *p == path) {
            Some(i) => kept.remove(i).1,
            None => Vec::new(),
        }
    };
    let chunks = conf.read_record_blobs(
        &path,
        |id| before.iter().find(|(b, _)| *b == id).map(|(_, p)| p.clone()),
        |bytes| Arc::new(parse_jsonl(bytes)),
    )?;
    drop(before);
    let parsed: Vec<_> = chunks.iter().map(|(_, p)| p.clone()).collect();
    let result = f(&parsed);
    let mut kept = PARSED_ROUNDS.lock().unwrap();
    kept.push((path, chunks));
    let excess = kept.len().saturating_sub(ROUNDS_KEPT);
    kept.drain(..excess);
    Ok(result)
}

/// A researcher's recent attempts (bounded), oldest first.
pub fn recent_attempts(conf: &Conference, researcher: &str) -> Result<Vec<AttemptRecord>> {
    // Read from the round files, newest round first, until enough are found: each iteration then
    // writes one attempts file (its round's), not a second per-researcher copy.
    let mut found: Vec<AttemptRecord> = Vec::new();
    for round in (1..=conf.state().round).rev() {
        let wanted = RECENT_ATTEMPTS - found.len();
        let mut batch = latest_round_attempts(conf, round, wanted, |a| a.researcher == researcher)?;
        batch.append(&mut found);
        found = batch;
        if found.len() >= RECENT_ATTEMPTS {
            break;
        }
    }
    Ok(found)
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
