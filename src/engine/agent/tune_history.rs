//! builtin:tune's view of the measured history, kept in memory between its iterations.
//!
//! Each proposal learns from every attempt recorded so far. Re-reading every round's attempts
//! and looking up every past tree for each proposal made an iteration cost grow with the
//! conference (11 → 128 ms by 3,000 iterations). A round's records are stored in chunks that
//! only the last of grows, and a tree's parameters never change, so this module parses each
//! blob of records once: per round it keeps what each blob held, by blob id, and parses only
//! blobs it has not seen. What a researcher may see (the
//! lock-step cut of the current round, `assigned`) is applied on every call, from memory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Result;
use git2::{Oid, Repository};

use crate::agents::call::AgentCall;
use crate::engine::Conference;
use crate::git::snapshot;
use crate::model::AttemptRecord;
use crate::model::Verdict;
use crate::researchers::tune;

/// One recorded attempt as the tuner uses it.
struct Seen {
    researcher: String,
    iteration: u32,
    interrupted: bool,
    kept: bool,
    /// The measured points: its sweep's or batch's other variants (every evaluation is data for
    /// the model), then the attempt's, when it measured one whose tree exists.
    trials: Vec<tune::Trial>,
}

/// What has been read of one round's attempts: its records' blobs (the whole file, or its
/// chunks) with what each held, parsed once per blob.
#[derive(Default)]
struct RoundSeen {
    chunks: Vec<(Oid, Arc<Vec<Seen>>)>,
}

/// By conference run folder, round and the tunable files the parameters were read from.
type Memory = HashMap<(PathBuf, u32, Vec<String>), RoundSeen>;

fn memory() -> &'static Mutex<Memory> {
    static MEMORY: OnceLock<Mutex<Memory>> = OnceLock::new();
    MEMORY.get_or_init(Default::default)
}

/// Brings round `round`'s memory up to date with its records: parses only the blobs it has not
/// seen (in a long round, the chunk that grew; `store::chunks`).
fn refresh(
    conf: &Conference,
    repo: &Repository,
    round: u32,
    paths: &[String],
    mem: &mut RoundSeen,
) -> Result<()> {
    let mut chunks = Vec::new();
    for id in conf.record_blob_ids(&crate::engine::state::files::attempts(round))? {
        let seen = match mem.chunks.iter().find(|(b, _)| *b == id) {
            Some((_, seen)) => seen.clone(),
            None => parse_seen(repo, &conf.read_blob(id)?, paths)?,
        };
        chunks.push((id, seen));
    }
    mem.chunks = chunks;
    Ok(())
}

/// The attempts in one blob of records, as the tuner uses them.
fn parse_seen(repo: &Repository, bytes: &[u8], paths: &[String]) -> Result<Arc<Vec<Seen>>> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(bytes).lines() {
        if let Ok(a) = serde_json::from_str::<AttemptRecord>(line) {
            out.push(seen(repo, a, paths)?);
        }
    }
    Ok(Arc::new(out))
}

fn seen(repo: &Repository, a: AttemptRecord, paths: &[String]) -> Result<Seen> {
    let measured = !matches!(
        a.verdict.known(),
        Some(Verdict::Rejected | Verdict::NoChange)
    );
    let tree = a
        .tree_id()
        .filter(|&t| measured && repo.find_tree(t).is_ok());
    // A sweep's other variants first, the attempt (its best) last: they were all proposed
    // from the same node, so the tuner's step-size replay sees the losers measured against that
    // node and the batch's gain as its latest move (as one point per iteration would).
    let mut trials = match &a.sweep {
        Some(s) => swept_trials(repo, s, paths)?,
        None => Vec::new(),
    };
    if let Some(t) = tree {
        trials.push(tune::Trial {
            params: params_at(repo, t, paths)?,
            metric: a.metric,
        });
    }
    Ok(Seen {
        interrupted: a.is_interrupted(),
        kept: a.verdict == Verdict::Kept,
        researcher: a.researcher,
        iteration: a.iteration,
        trials,
    })
}

/// A sweep's variants other than the attempt, as points: a crash or timeout is a point without
/// a metric (as for an attempt), a variant stopped by halving keeps the reading it stopped at,
/// one that never finished (interrupted) is none.
fn swept_trials(
    repo: &Repository,
    s: &crate::model::sweep::Sweep,
    paths: &[String],
) -> Result<Vec<tune::Trial>> {
    let mut out = Vec::new();
    for (k, v) in s.variants.iter().enumerate() {
        let metric = match v.status.as_str() {
            "ok" | "pruned" => v.metric,
            "crashed" | "timeout" => None,
            _ => continue,
        };
        let Ok(tree) = Oid::from_str(&v.tree) else {
            continue;
        };
        if k == s.chosen || repo.find_tree(tree).is_err() {
            continue;
        }
        out.push(tune::Trial {
            params: params_at(repo, tree, paths)?,
            metric,
        });
    }
    Ok(out)
}

/// Every point the conference has measured that all researchers know at this iteration, in the
/// same order for all: the baseline; then, by round, every researcher's attempts (by iteration,
/// then researcher) — in the current round the round start first and only the iterations before
/// this one (under `assigned`, where researchers do not wait for each other, only its own). Also each researcher's attempts in a row without improvement up to there, counted
/// as the engine counts them (reset by a kept attempt, and at a round start after a round that
/// moved the best or ended the researcher's round as stuck).
pub fn tuner_history(
    conf: &Conference,
    repo: &Repository,
    call: &AgentCall<'_>,
    ids: &[String],
    paths: &[String],
) -> Result<(Vec<tune::Trial>, Vec<u32>)> {
    let st = conf.state();
    let mut trials = Vec::new();
    let mut streaks = vec![0u32; ids.len()];
    let best_after = |round: u32| -> Option<f64> {
        match round {
            0 => st.baseline_metric,
            r => st.round_bests.get(r as usize - 1).copied().flatten(),
        }
    };
    if let Ok(c) = repo.find_commit(st.baseline_commit.oid()) {
        trials.push(tune::Trial {
            params: params_at(repo, c.tree_id(), paths)?,
            metric: st.baseline_metric,
        });
    }
    let order = |id: &str| ids.iter().position(|i| i == id).unwrap_or(usize::MAX);
    let assigned = conf.config.strategy == crate::config::Strategy::Assigned;
    let mut memory = memory().lock().unwrap();
    for round in 1..=st.round {
        let mem = memory
            .entry((conf.run_dir.clone(), round, paths.to_vec()))
            .or_default();
        refresh(conf, repo, round, paths, mem)?;
        let mut attempts: Vec<&Seen> = mem.chunks.iter().flat_map(|(_, c)| c.iter()).collect();
        attempts.sort_by_key(|a| (a.iteration, order(&a.researcher)));
        if round >= 2 {
            let moved = best_after(round - 1) != best_after(round - 2);
            for s in streaks.iter_mut() {
                if *s >= crate::protocol::keep::STUCK_LEVELS[2] || moved {
                    *s = 0;
                }
            }
        }
        if round == st.round {
            let r = st.researcher(call.researcher);
            if let Ok(c) = repo.find_commit(r.round_start.oid()) {
                trials.push(tune::Trial {
                    params: params_at(repo, c.tree_id(), paths)?,
                    metric: r.round_start_metric,
                });
            }
        }
        for a in attempts {
            // This round: what every researcher has recorded before this iteration (they wait
            // for each other), or under `assigned` (no waiting) only this researcher's own.
            let others_now = round == st.round && assigned && a.researcher != call.researcher;
            if (round == st.round && a.iteration >= call.iteration) || others_now {
                continue;
            }
            if a.interrupted {
                continue;
            }
            if let Some(s) = streaks.get_mut(order(&a.researcher)) {
                *s = if a.kept { 0 } else { *s + 1 };
            }
            trials.extend(a.trials.iter().cloned());
        }
    }
    Ok((trials, streaks))
}

/// Parameters of a tree's tunable files, by tree and file list (trees never change).
pub fn params_at(
    repo: &Repository,
    tree: Oid,
    paths: &[String],
) -> Result<std::collections::BTreeMap<String, f64>> {
    type Cache =
        std::collections::HashMap<(Oid, Vec<String>), std::collections::BTreeMap<String, f64>>;
    static CACHE: std::sync::OnceLock<std::sync::Mutex<Cache>> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (tree, paths.to_vec());
    if let Some(p) = cache.lock().unwrap().get(&key) {
        return Ok(p.clone());
    }
    let params = tune::extract_params(&snapshot::read_files(repo, tree, paths)?);
    cache.lock().unwrap().insert(key, params.clone());
    Ok(params)
}
