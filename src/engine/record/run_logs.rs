//! The run's log folder (`<run dir>/logs`) kept bounded.
//!
//! Every iteration leaves about four files there (agent and evaluation, stdout and stderr): a
//! never-stop run of a week made hundreds of thousands of files in one folder. Only the latest
//! iterations' logs are read again (briefings quote the last attempt's output), so the
//! per-iteration logs (`<researcher>-r<round>-i<iteration>.*`) beyond the newest `KEPT_FILES` are
//! deleted, oldest first; other logs (baseline, setup, hooks, reviews) stay.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Per-iteration log files kept (the cap docs/storage.md states: about 1,000 iterations' logs).
pub const KEPT_FILES: usize = 4000;

/// How many log paths are handed out between two prunings (listing the folder costs a little).
const PRUNE_EVERY: usize = 200;

/// Prunes `dir` every `PRUNE_EVERY` calls (see the module's doc).
pub fn maybe_prune(dir: &Path) {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    if CALLS.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
        prune(dir, KEPT_FILES);
    }
}

/// Whether `name` is one iteration's log: `<researcher>-r<round>-i<iteration>.<what>`.
fn is_iteration_log(name: &str) -> bool {
    let Some(stem) = name.split('.').next() else {
        return false;
    };
    let mut parts = stem.rsplitn(3, '-');
    let (Some(i), Some(r), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let digits = |s: &str, p: char| {
        s.strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    digits(i, 'i') && digits(r, 'r')
}

/// Deletes the oldest per-iteration logs of `dir` beyond the newest `keep`. Errors are ignored:
/// a log that cannot be listed or deleted costs disk space, never the run.
pub fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut logs: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .flatten()
        .filter(|e| is_iteration_log(&e.file_name().to_string_lossy()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if logs.len() <= keep {
        return;
    }
    logs.sort();
    for (_, path) in &logs[..logs.len() - keep] {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_iteration_logs_count() {
        assert!(is_iteration_log("A-r1-i12.agent.out"));
        assert!(is_iteration_log("res-x-r3-i1.eval.0.err"));
        assert!(!is_iteration_log("baseline.eval.0.out"));
        assert!(!is_iteration_log("setup-A.out"));
        assert!(!is_iteration_log("r2-review.eval.0.out"));
        assert!(!is_iteration_log("hook-round.started.log"));
    }

    #[test]
    fn the_oldest_iteration_logs_beyond_the_cap_are_deleted_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for i in 1..=10 {
            let path = dir.path().join(format!("A-r1-i{i}.agent.out"));
            std::fs::write(&path, "x").unwrap();
            let mtime = old + std::time::Duration::from_secs(i);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
        std::fs::write(dir.path().join("baseline.eval.0.out"), "x").unwrap();
        prune(dir.path(), 4);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "A-r1-i10.agent.out",
                "A-r1-i7.agent.out",
                "A-r1-i8.agent.out",
                "A-r1-i9.agent.out",
                "baseline.eval.0.out"
            ]
        );
    }
}
