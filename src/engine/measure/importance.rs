//! Which change mattered, gathered for the report and the page: each attempt's literal values
//! (of every literal some attempt changed, read from its tree) against its metric, and the files
//! it touched against its gain over its parent; scored by `protocol::importance`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::Result;
use git2::Repository;

use crate::engine::state::State;
use crate::engine::Conference;
use crate::git::changes::{change_of, Change, LiteralCache};
use crate::model::{AttemptRecord, Direction};
use crate::protocol::importance::{rank, Importance, ParallelRow, Point};

/// The newest attempts read (each costs a diff and a few blob reads).
pub const MAX_ATTEMPTS: usize = 2000;
/// Literals drawn on the page's parallel coordinates.
const AXES: usize = 6;

/// The importance tables of `conf` from its attempts.
pub fn of_conference(conf: &Conference, st: &State, all: &[AttemptRecord]) -> Result<Importance> {
    let repo = conf.open_repo()?;
    let direction = conf.config().metric.as_ref().map(|m| m.direction);
    Ok(gather(&repo, st, all, direction))
}

fn gather(
    repo: &Repository,
    st: &State,
    all: &[AttemptRecord],
    direction: Option<Direction>,
) -> Importance {
    let measured: Vec<&AttemptRecord> = all
        .iter()
        .filter(|a| a.commit.is_some() && a.metric.is_some_and(f64::is_finite))
        .collect();
    let recent = &measured[measured.len().saturating_sub(MAX_ATTEMPTS)..];
    let mut cache = LiteralCache::new(crate::researchers::tune::literal_values);
    let changes: Vec<(&AttemptRecord, Change)> = recent
        .iter()
        .filter_map(|a| {
            let oid = a.commit.as_ref()?.oid();
            Some((*a, change_of(repo, oid, 0, &mut cache).ok()?))
        })
        .collect();
    let mut key_paths: BTreeMap<String, String> = BTreeMap::new();
    let mut files: BTreeSet<String> = BTreeSet::new();
    for (_, c) in &changes {
        for l in &c.literals {
            key_paths.insert(l.key.clone(), l.path.clone());
        }
        files.extend(c.files.iter().cloned());
    }
    let mut metric_of: HashMap<String, f64> = measured
        .iter()
        .filter_map(|a| Some((a.commit.as_ref()?.to_string(), a.metric?)))
        .collect();
    if let Some(m) = st.baseline_metric {
        metric_of.insert(st.baseline_commit.to_string(), m);
    }
    let mut literal_points = Vec::new();
    let mut file_points = Vec::new();
    for (a, c) in &changes {
        let metric = a.metric.unwrap_or(f64::NAN);
        literal_points.push(Point {
            values: values_at(repo, a, &key_paths, &mut cache),
            outcome: metric,
        });
        let parent = c.parent.and_then(|p| metric_of.get(&p.to_string()));
        if let (Some(parent), Some(d)) = (parent, direction) {
            let gain = match d {
                Direction::Minimize => parent - metric,
                Direction::Maximize => metric - parent,
            };
            let touched = files
                .iter()
                .map(|f| (f.clone(), c.files.contains(f) as u8 as f64))
                .collect();
            file_points.push(Point {
                values: touched,
                outcome: gain,
            });
        }
    }
    let literals = rank(&literal_points);
    let axes: Vec<String> = literals.iter().take(AXES).map(|f| f.name.clone()).collect();
    let rows = changes
        .iter()
        .zip(&literal_points)
        .map(|((a, _), p)| ParallelRow {
            values: axes.iter().map(|k| p.values.get(k).copied()).collect(),
            metric: p.outcome,
            verdict: a.verdict.to_string(),
            researcher: a.researcher.clone(),
        })
        .collect();
    Importance {
        literals,
        files: rank(&file_points),
        attempts_read: changes.len(),
        attempts_total: measured.len(),
        axes,
        rows,
    }
}

/// The values at attempt `a`'s tree of the literals in `key_paths`.
fn values_at(
    repo: &Repository,
    a: &AttemptRecord,
    key_paths: &BTreeMap<String, String>,
    cache: &mut LiteralCache,
) -> BTreeMap<String, f64> {
    let Some(tree) = (a.commit.as_ref())
        .and_then(|c| repo.find_commit(c.oid()).ok())
        .and_then(|c| c.tree().ok())
    else {
        return BTreeMap::new();
    };
    let paths: BTreeSet<&String> = key_paths.values().collect();
    let mut out = BTreeMap::new();
    for path in paths {
        for (k, v) in cache.of_path(repo, &tree, path) {
            if key_paths.contains_key(&k) {
                out.insert(k, v);
            }
        }
    }
    out
}
