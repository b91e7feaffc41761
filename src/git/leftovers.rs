//! Removing what an attempt left in untracked and ignored files: the second half of a revert.
//!
//! A revert puts tracked and untracked files back, but git leaves ignored files alone, and an
//! ignored file is exactly what an agent can hide: add `secret.txt` to `.gitignore`, write it,
//! and the revert restores `.gitignore` while the file stays and changes every later
//! evaluation (the revert that puts `.gitignore` back has already passed the file, and leaves
//! it behind, now merely untracked). An ignored build artefact does the same more innocently.
//! So after a revert every untracked path goes, ignored or not, except the ones kept on purpose:
//! the shared paths and what setup made (the environment, see `engine::agent::workspace`) and the agent's `.conference/` folder.
//!
//! Since each revert removes them all, the worktree never holds an ignored folder between
//! attempts, so a new ignored file always appears in a folder the watch sees: the changed paths
//! it reports are enough to find them. Without a watch the worktree's untracked and ignored
//! entries are listed by one status walk.

use std::path::{Path, PathBuf};

use anyhow::Result;
use git2::Repository;

use super::watch::Changes;

/// Removes the untracked paths among `changes` (all of the worktree's when `Everything`) that are not under one of `keep` (paths relative to the worktree). Untracked
/// ones the checkout left are ignored ones, and files that became visible when the revert put a
/// `.gitignore` back after the checkout had already passed them. Returns the paths removed.
pub fn remove_untracked(
    wt: &Repository,
    changes: &Changes,
    keep: &[String],
) -> Result<Vec<String>> {
    let Some(workdir) = wt.workdir().map(Path::to_path_buf) else {
        return Ok(vec![]);
    };
    let candidates: Vec<PathBuf> = match changes {
        Changes::Paths(paths) => paths.clone(),
        Changes::Everything => untracked_entries(wt)?,
    };
    let index = wt.index()?;
    let mut removed = Vec::new();
    for rel in candidates {
        if rel.starts_with(".git") && rel.components().count() == 1
            || kept(&rel, keep)
            || !exists(&workdir.join(&rel))
        {
            continue;
        }
        if holds_tracked(&index, &rel) {
            continue;
        }
        let full = workdir.join(&rel);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&full)?,
            Ok(_) => std::fs::remove_file(&full)?,
            Err(_) => continue,
        }
        removed.push(rel.display().to_string());
    }
    Ok(removed)
}

fn exists(full: &Path) -> bool {
    std::fs::symlink_metadata(full).is_ok()
}

/// Under one of the kept paths (or one of them).
fn kept(rel: &Path, keep: &[String]) -> bool {
    keep.iter()
        .map(|k| Path::new(k.trim_end_matches('/')))
        .any(|k| rel.starts_with(k))
}

/// A path the index tracks, or a folder holding tracked files (force-added into an ignored
/// folder): not a leftover.
fn holds_tracked(index: &git2::Index, rel: &Path) -> bool {
    if index.get_path(rel, 0).is_some() {
        return true;
    }
    let prefix = format!("{}/", rel.display());
    index.iter().any(|e| e.path.starts_with(prefix.as_bytes()))
}

/// The worktree's untracked and ignored entries, a wholly untracked folder as one entry.
fn untracked_entries(wt: &Repository) -> Result<Vec<PathBuf>> {
    let mut opts = git2::StatusOptions::new();
    opts.include_ignored(true)
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .recurse_ignored_dirs(false)
        .exclude_submodules(true);
    let statuses = wt.statuses(Some(&mut opts))?;
    Ok(statuses
        .iter()
        .filter(|s| s.status().is_ignored() || s.status().is_wt_new())
        .filter_map(|s| s.path().map(|p| PathBuf::from(p.trim_end_matches('/'))))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Untracked and ignored files and folders go (found by a walk or named by the watch);
    /// tracked ones (also force-added ignored ones), kept paths and `.git` stay, and so do
    /// paths the watch did not name.
    #[test]
    fn leftovers_go_kept_paths_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let repo = Repository::init(dir).unwrap();
        std::fs::write(dir.join(".gitignore"), "build/\n*.log\ndata/\n.venv/\n").unwrap();
        std::fs::create_dir_all(dir.join("build/sub")).unwrap();
        std::fs::write(dir.join("build/sub/cache.o"), "x").unwrap();
        std::fs::write(dir.join("run.log"), "x").unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("data/set.csv"), "x").unwrap();
        std::fs::create_dir_all(dir.join(".venv")).unwrap();
        std::fs::write(dir.join("forced.log"), "tracked").unwrap();
        std::fs::write(dir.join("notes.txt"), "untracked").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(".gitignore")).unwrap();
        index.add_path(Path::new("forced.log")).unwrap();
        index.write().unwrap();
        let keep = vec!["data".to_string(), ".venv/".to_string()];
        let mut removed = remove_untracked(&repo, &Changes::Everything, &keep).unwrap();
        removed.sort();
        assert_eq!(removed, ["build", "notes.txt", "run.log"]);
        for stays in ["data/set.csv", ".venv", "forced.log", ".gitignore"] {
            assert!(dir.join(stays).exists(), "{stays}");
        }
        std::fs::write(dir.join("notes.txt"), "untracked").unwrap();
        // The watch's paths: only the named ones are looked at.
        std::fs::write(dir.join("a.log"), "x").unwrap();
        std::fs::write(dir.join("b.log"), "x").unwrap();
        let named = Changes::Paths(vec![
            PathBuf::from("a.log"),
            PathBuf::from("notes.txt"),
            PathBuf::from(".git"),
            PathBuf::from("data/set.csv"),
            PathBuf::from("forced.log"),
        ]);
        assert_eq!(
            remove_untracked(&repo, &named, &keep).unwrap(),
            ["a.log", "notes.txt"]
        );
        assert!(dir.join("b.log").exists() && dir.join(".git").exists());
        assert!(dir.join("data/set.csv").exists() && dir.join("forced.log").exists());
    }
}
