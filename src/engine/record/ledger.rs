//! The one reader of the state tree's records: a round's attempts, the review's findings and
//! start readings, the knowledge-transfer picks. The phases write these files (through the
//! recorder) and read each other's through here, so no phase imports another for its records;
//! the paths are `state::files`, the records `model::records`.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::engine::state::{files, State};
use crate::engine::Conference;
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

/// Reads a JSON file of the state tree; an absent file is the default. A file that does not
/// parse is an error naming it (and, for a commit id that is not a full one, the field).
fn read_json<T: for<'de> Deserialize<'de> + Default>(conf: &Conference, path: &str) -> Result<T> {
    Ok(conf
        .read_state_file(path)?
        .map(|b| serde_json::from_slice(&b))
        .transpose()
        .with_context(|| path.to_string())?
        .unwrap_or_default())
}

/// All attempts of a round, in the order they were recorded.
pub fn round_attempts(conf: &Conference, round: u32) -> Result<Vec<AttemptRecord>> {
    let path = files::attempts(round);
    let mut all = Vec::new();
    for id in conf.record_blob_ids(&path)? {
        all.extend(parsed_chunk(conf, id)?.iter().cloned());
    }
    Ok(all)
}

/// The latest `n` attempts of a round that `keep` holds, oldest first, among its latest
/// [`CHUNKS_SCANNED`] chunks. Read from the last chunk backwards, so that a briefing late in a
/// long round costs what it did early on — also when few or none match (the other researchers'
/// attempts, with one researcher): the scan stops where the parsed chunks kept end.
pub fn latest_round_attempts(
    conf: &Conference,
    round: u32,
    n: usize,
    keep: impl Fn(&AttemptRecord) -> bool,
) -> Result<Vec<AttemptRecord>> {
    let mut latest = Vec::new();
    for id in conf
        .record_blob_ids(&files::attempts(round))?
        .into_iter()
        .rev()
        .take(CHUNKS_SCANNED)
    {
        if latest.len() >= n {
            break;
        }
        let chunk = parsed_chunk(conf, id)?;
        let wanted = n - latest.len();
        latest.extend(chunk.iter().rev().filter(|a| keep(a)).take(wanted).cloned());
    }
    latest.reverse();
    Ok(latest)
}

/// How far back in a round [`latest_round_attempts`] looks: a round's latest 1,024 attempts (64
/// a chunk), all of them kept parsed.
pub const CHUNKS_SCANNED: usize = 16;

/// The chunks of records kept parsed: every chunk a scan reads, and the last chunk's version
/// before this iteration's.
const CHUNKS_KEPT: usize = CHUNKS_SCANNED + 2;

/// Parsed chunks by blob id, the one used last at the end: a chunk read again moves there, so
/// the versions of the growing last chunk that no scan reads any more go first. (Dropping the
/// chunk parsed first instead let those versions push out the older chunks a scan reads every
/// iteration: from the round's 16th chunk on, a briefing parsed 15 chunks again each time.)
#[derive(Default)]
struct ParsedChunks(Vec<(git2::Oid, Arc<Vec<AttemptRecord>>)>);

impl ParsedChunks {
    fn get(&mut self, id: git2::Oid) -> Option<Arc<Vec<AttemptRecord>>> {
        let at = self.0.iter().position(|(b, _)| *b == id)?;
        let entry = self.0.remove(at);
        let found = entry.1.clone();
        self.0.push(entry);
        Some(found)
    }

    fn put(&mut self, id: git2::Oid, parsed: Arc<Vec<AttemptRecord>>) {
        self.0.push((id, parsed));
        let excess = self.0.len().saturating_sub(CHUNKS_KEPT);
        self.0.drain(..excess);
    }
}

/// One blob of a round's records, parsed. The chunks read last are kept by blob id (a round's
/// records are stored in chunks of 64 lines, `store::chunks`; only the last one
/// changes), so an iteration parses the one chunk that grew; the bound keeps a never-stop
/// round's memory flat.
fn parsed_chunk(conf: &Conference, id: git2::Oid) -> Result<Arc<Vec<AttemptRecord>>> {
    static PARSED: Mutex<ParsedChunks> = Mutex::new(ParsedChunks(Vec::new()));
    if let Some(found) = PARSED.lock().unwrap().get(id) {
        return Ok(found);
    }
    let parsed = Arc::new(parse_jsonl(&conf.read_blob(id)?));
    PARSED.lock().unwrap().put(id, parsed.clone());
    Ok(parsed)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A line that does not read (here one with an abbreviated commit) is skipped, as any
    /// unreadable line always was: the round's other attempts still read.
    #[test]
    fn an_attempt_line_with_a_short_commit_is_skipped_and_the_others_read() {
        let line = |iteration: u32, commit: &str| {
            format!(
                r#"{{"round":1,"researcher":"A","iteration":{iteration},"commit":"{commit}","tree":"","metric":1.0,"delta":null,"verdict":"kept","description":"x","reason":null,"timestamp":"t","sub_metrics":{{}}}}"#
            )
        };
        let bytes = [
            line(1, &"a".repeat(40)),
            line(2, "abc1234"),
            line(3, ""),
            line(4, &"b".repeat(40)),
        ]
        .join("\n");
        let read: Vec<AttemptRecord> = parse_jsonl(bytes.as_bytes());
        let iterations: Vec<u32> = read.iter().map(|a| a.iteration).collect();
        assert_eq!(iterations, [1, 3, 4]);
        assert_eq!(read[1].commit, None);
    }

    /// A never-stop round: each iteration a scan reads the last chunk's new version, then the
    /// 15 chunks before it. Every one of those stays parsed; only old versions of the last
    /// chunk are dropped.
    #[test]
    fn a_scan_of_the_latest_chunks_keeps_them_all_while_the_last_one_grows() {
        let id = |n: u8| git2::Oid::from_bytes(&[n; 20]).unwrap();
        let mut kept = ParsedChunks::default();
        let mut parsed = 0;
        for iteration in 0..40u8 {
            let scan = std::iter::once(100 + iteration).chain((1..CHUNKS_SCANNED as u8).rev());
            for chunk in scan {
                if kept.get(id(chunk)).is_none() {
                    kept.put(id(chunk), Arc::new(Vec::new()));
                    parsed += 1;
                }
            }
        }
        // The 15 older chunks once, then one new version of the last chunk an iteration.
        assert_eq!(parsed, CHUNKS_SCANNED - 1 + 40);
        assert!(kept.0.len() <= CHUNKS_KEPT);
    }
}
