//! The evaluation cache entries an arriving event writes (`evaluations/<settings>/<tree>` in the
//! state tree) are input too: an honest machine reads a cached result instead of evaluating the
//! same tree again, so a participant that planted one would have its number taken for a
//! measurement. An event may add only the entries of the trees it measured — an iteration's
//! candidate and, for a sweep, each of its variants; the baseline — under the evaluation settings
//! in force, each holding the metric the event itself records; it never changes or deletes an
//! entry.

use git2::{Oid, Repository};

use crate::engine::measure::evaluate::EvalResult;
use crate::model::event::Event;
use crate::model::state::{files, State};
use crate::model::EvalStatus;

/// Checks the cache entries `commit` (an event whose parent is `parent`, whose state before was
/// `before`) adds, changes or deletes; why not, in words.
pub fn check(
    repo: &Repository,
    parent: Oid,
    commit: Oid,
    before: &State,
    event: &Event,
) -> Result<(), String> {
    let tree = |c: Oid| {
        repo.find_commit(c)
            .and_then(|c| c.tree())
            .map_err(|e| e.to_string())
    };
    let (old, new) = (tree(parent)?, tree(commit)?);
    let mut options = git2::DiffOptions::new();
    options.pathspec(files::EVAL_CACHE_DIR);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut options))
        .map_err(|e| e.to_string())?;
    let allowed = allowed_entries(repo, before, event);
    for delta in diff.deltas() {
        let path = delta
            .new_file()
            .path()
            .or(delta.old_file().path())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if delta.new_file().id().is_zero() {
            return Err(format!("it deletes the evaluation cache entry {path}"));
        }
        if allowed.is_empty() {
            return Err(format!(
                "a {} event writes the evaluation cache entry {path}",
                event.name()
            ));
        }
        let metrics: Vec<Option<f64>> = (allowed.iter())
            .filter(|(p, _)| *p == path)
            .map(|(_, m)| *m)
            .collect();
        if metrics.is_empty() {
            return Err(format!(
                "it writes the evaluation cache entry {path}, not the one of the tree it measured"
            ));
        }
        // An entry written again (the tree measured before) must still hold the same metric.
        let mut ids = vec![delta.new_file().id()];
        if !delta.old_file().id().is_zero() {
            ids.push(delta.old_file().id());
        }
        for id in ids {
            let held = cached_metric(repo, id, &path)?;
            if !metrics.contains(&held) {
                let metric = metrics[0];
                return Err(format!(
                    "its evaluation cache entry {path} holds metric {held:?}, the event {metric:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The metric the cache entry blob `id` holds (its runs all finite).
fn cached_metric(repo: &Repository, id: Oid, path: &str) -> Result<Option<f64>, String> {
    let blob = repo.find_blob(id).map_err(|e| e.to_string())?;
    let cached: EvalResult = serde_json::from_slice(blob.content())
        .map_err(|e| format!("its evaluation cache entry {path} cannot be read: {e}"))?;
    if !cached.runs.iter().all(|r| r.is_finite()) {
        return Err(format!(
            "its evaluation cache entry {path} holds a run that is not a number"
        ));
    }
    Ok(cached.metric)
}

/// The entries `event` may write (each path and the metric it must hold): an iteration's
/// candidate and its sweep's variants, the baseline.
fn allowed_entries(repo: &Repository, before: &State, event: &Event) -> Vec<(String, Option<f64>)> {
    let trees: Vec<(String, Option<f64>)> = match event {
        Event::Iteration(e) => {
            let variants = (e.sweep.as_deref())
                .and_then(|s| s.ran())
                .map(|s| s.variants.as_slice())
                .unwrap_or_default();
            // A variant stopped early (pruned) measured nothing: it has no entry.
            let measured = variants.iter().filter(|v| EvalStatus::is_cached(&v.status));
            let each = measured.map(|v| (v.tree.clone(), v.metric));
            std::iter::once((e.tree.clone(), e.metric_value))
                .chain(each)
                .collect()
        }
        Event::BaselineMeasured(e) => match repo.find_commit(e.commit.oid()) {
            Ok(commit) => vec![(commit.tree_id().to_string(), Some(e.metric_value))],
            Err(_) => vec![],
        },
        _ => vec![],
    };
    let hex = |tree: &str| tree.len() >= 3 && tree.bytes().all(|b| b.is_ascii_hexdigit());
    (trees.into_iter())
        .filter(|(tree, _)| hex(tree))
        .map(|(tree, metric)| (files::eval_cache(&before.eval_settings, &tree), metric))
        .collect()
}
