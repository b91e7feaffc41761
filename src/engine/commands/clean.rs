//! What `clean` does to a conference's files and refs, and what a refused `start` undoes: its
//! worktrees (only this repository's own), its refs (see `clean_refs` for which), its lines in
//! the notes, its approval and its run folder. `cli/clean.rs` says what was removed.

use anyhow::Result;
use git2::Repository;

use crate::git::worktree;
use crate::lock::RunLock;
use crate::store::refs;

/// Takes conference `name`'s run lock (no runner of it is alive then) and cancels the
/// evaluation jobs a killed run left submitted; returns the lock and how many were cancelled.
pub fn lock_and_cancel(repo: &Repository, name: &str) -> Result<(RunLock, usize)> {
    let run_dir = worktree::run_dir(repo, name);
    let lock = RunLock::acquire(&run_dir, name)?;
    let cancelled = crate::launch::cancel_left_behind(&run_dir);
    Ok((lock, cancelled))
}

/// Repairs the git links of the conference's worktrees when the repository was moved or copied
/// (see `git::worktree::make_worktrees_own`); what it did, in a sentence.
pub fn make_worktrees_own(repo: &Repository, name: &str) -> Result<Option<String>> {
    worktree::make_worktrees_own(repo, name)
}

/// A `start` refused after the conference was created (git could not check out a worktree):
/// everything it made goes, as `clean --all` would remove it. The caller holds the run lock.
pub fn undo_start(repo: &Repository, name: &str, lock: RunLock) -> Result<()> {
    remove_worktrees(repo, name)?;
    remove_the_rest(repo, name, lock)?;
    // The notes ref and the conferences' folder, when this start made them and nothing else
    // is in them.
    if crate::store::notes::is_empty(repo)? {
        repo.find_reference(refs::NOTES_REF)?.delete()?;
    }
    if let Some(folder) = worktree::run_dir(repo, name).parent() {
        let _ = std::fs::remove_dir(folder);
    }
    Ok(())
}

/// Removes the conference's worktrees, then their folders when nothing else is in them. Only
/// this repository's own: a folder whose git link names another repository (the original of a
/// copy) is left, and returned.
pub fn remove_worktrees(repo: &Repository, name: &str) -> Result<(usize, Vec<std::path::PathBuf>)> {
    let root = worktree::worktrees_root(repo, name);
    let (mut removed, mut left) = (0, Vec::new());
    if let Ok(entries) = std::fs::read_dir(&root) {
        for entry in entries.flatten() {
            let path = entry.path();
            if !worktree::belongs_here(repo, &path) {
                left.push(path);
                continue;
            }
            worktree::remove(repo, &path)?;
            removed += 1;
        }
    }
    // `remove_dir` keeps a folder that is not empty: the conference's, then the default
    // `<repo>.conference`.
    if std::fs::remove_dir(&root).is_ok() {
        if let Some(parent) = root.parent() {
            if parent == worktree::default_root(repo) {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
    Ok((removed, left))
}

/// What `remove_the_rest` deleted, and the refs it kept.
pub struct Removed {
    pub refs: usize,
    pub notes: usize,
    pub kept: Vec<String>,
}

/// Deletes the refs the conference recorded (the user's commits and HEAD's branch stay), its
/// lines in the notes, its approval and its run folder.
pub fn remove_the_rest(repo: &Repository, name: &str, lock: RunLock) -> Result<Removed> {
    let run_dir = worktree::run_dir(repo, name);
    let plan = crate::engine::commands::clean_refs::plan(repo, name)?;
    for n in &plan.delete {
        repo.find_reference(n)?.delete()?;
    }
    let notes = crate::store::notes::remove_conference(repo, name)?;
    crate::trust::forget(repo, name);
    drop(lock);
    // Never the tool's own folders (a conference named `hooks` by an older version shared
    // the hooks folder): only what the conference put there goes.
    if refs::is_reserved_name(name) || run_dir == crate::hooks::hooks_dir(repo) {
        for own in [
            "worktrees",
            "logs",
            "running",
            "lock",
            "staging",
            "launched",
        ] {
            let path = run_dir.join(own);
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    } else {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    Ok(Removed {
        refs: plan.delete.len(),
        notes,
        kept: plan.kept,
    })
}
