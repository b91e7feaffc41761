//! Writes into the user's own working tree while an agent runs: an agent that writes by an
//! absolute path, or by `../..` from its worktree, changes the user's files, not its attempt.
//! Preventing that needs a sandbox; noticing it is cheap: the working tree's status (what
//! `git status` shows, from the index's cached file times: no file is read unless its time
//! changed; ignored files left out) is read before and after every agent run, with the size and
//! time of each path it lists, so that one more write into a file the user had already changed
//! is seen too. A change is reported with the researcher, never undone: the user may be editing
//! at the same time, and the change is theirs to judge.
//!
//! Researchers run in parallel, so one change can fall in several agents' windows. Every change
//! a check reports goes into a ledger; a later check leaves out the entries made since its window
//! opened while the path still reads the same, so one change is reported once.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

/// One listed path: its status bits, size and modification time (files only).
type Stamp = (u32, u64, Option<SystemTime>);

/// The user's working tree as one read saw it.
#[derive(Debug, Default)]
pub struct UserTree {
    paths: BTreeMap<String, Stamp>,
    /// The ledger's length when this was read: its later entries apply to it.
    ledger_len: usize,
    /// False when there is no working tree to read (a bare repository).
    readable: bool,
}

/// Every change a check reported this run: the path and how it read then (None: gone).
static LEDGER: Mutex<Vec<(String, Option<Stamp>)>> = Mutex::new(Vec::new());

/// Reads the status of the working tree of the repository at `git_dir` (nothing when bare).
pub fn read(git_dir: &Path) -> UserTree {
    let ledger_len = LEDGER.lock().map(|l| l.len()).unwrap_or(0);
    let Ok(repo) = git2::Repository::open(git_dir) else {
        return UserTree::default();
    };
    let Some(top) = repo.workdir().map(Path::to_path_buf) else {
        return UserTree::default();
    };
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true)
        .renames_head_to_index(false);
    let Ok(statuses) = repo.statuses(Some(&mut opts)) else {
        return UserTree::default();
    };
    let mut paths = BTreeMap::new();
    for entry in statuses.iter() {
        let Some(path) = entry.path() else { continue };
        let meta = std::fs::symlink_metadata(top.join(path)).ok();
        // A folder (a nested repository) counts by its status alone: its time changes with
        // whatever happens inside it.
        let (len, time) = match meta.filter(|m| !m.is_dir()) {
            Some(m) => (m.len(), m.modified().ok()),
            None => (0, None),
        };
        paths.insert(path.to_string(), (entry.status().bits(), len, time));
    }
    UserTree {
        paths,
        ledger_len,
        readable: true,
    }
}

/// The paths of the working tree that changed since `before` was read and no other check
/// reported yet (sorted), entered into the ledger.
pub fn changed_since(before: &UserTree, git_dir: &Path) -> Vec<String> {
    if !before.readable {
        return Vec::new();
    }
    let now = read(git_dir);
    if !now.readable {
        return Vec::new();
    }
    let mut changed: Vec<String> = now
        .paths
        .iter()
        .filter(|(p, s)| before.paths.get(*p) != Some(s))
        .map(|(p, _)| p.clone())
        .chain(
            before
                .paths
                .keys()
                .filter(|p| !now.paths.contains_key(*p))
                .cloned(),
        )
        .collect();
    changed.sort();
    changed.dedup();
    let Ok(mut ledger) = LEDGER.lock() else {
        return changed;
    };
    let reported = &ledger[before.ledger_len.min(ledger.len())..];
    changed.retain(|p| {
        let reads = now.paths.get(p).copied();
        !reported.iter().any(|(q, s)| q == p && *s == reads)
    });
    for p in &changed {
        ledger.push((p.clone(), now.paths.get(p).copied()));
    }
    changed
}

/// The paths as a short list for a line: the first three, then how many more.
pub fn named(paths: &[String]) -> String {
    let mut text = paths.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if paths.len() > 3 {
        text.push_str(&format!(" and {} more", paths.len() - 3));
    }
    text
}
