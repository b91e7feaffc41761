//! What `apply` asks of git in the user's working tree: whether it has uncommitted changes,
//! what the best branch would change, where a merge would conflict, and the merge itself
//! (aborted when it fails half-way). `cli/apply.rs` asks and says.

use std::path::Path;

use anyhow::Result;

use crate::git::{failure_reason, git, git_output};

/// Whether tracked files in the working tree at `top` have uncommitted changes.
pub fn has_uncommitted_changes(top: &Path) -> Result<bool> {
    let dirty = git(top, &["status", "--porcelain", "--untracked-files=no"])?;
    Ok(!dirty.trim().is_empty())
}

/// `git diff --stat` of what `best_ref` changes since it forked from HEAD (empty: nothing).
pub fn diff_stat(top: &Path, best_ref: &str) -> Result<String> {
    git(top, &["diff", "--stat", &format!("HEAD...{best_ref}")])
}

/// Merges `best_ref` into HEAD with `message`. None when it merged; else why git failed and
/// whether the half-made merge was aborted.
pub fn merge(top: &Path, message: &str, best_ref: &str) -> Result<Option<(String, bool)>> {
    let merged = git_output(top, &["merge", "--no-ff", "-m", message, best_ref])?;
    if merged.status.success() {
        return Ok(None);
    }
    let reason = failure_reason(&merged);
    let aborted = git_output(top, &["rev-parse", "-q", "--verify", "MERGE_HEAD"])?
        .status
        .success()
        && git_output(top, &["merge", "--abort"])?.status.success();
    Ok(Some((reason, aborted)))
}

/// The files a merge of `best` into HEAD would conflict in (None: it merges cleanly), from
/// `git merge-tree --write-tree`; None too when this git is older than 2.38 (the merge itself
/// then finds out, and is aborted).
pub fn conflicts(top: &Path, best: &str) -> Result<Option<Vec<String>>> {
    let out = git_output(
        top,
        &[
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "HEAD",
            best,
        ],
    )?;
    match out.status.code() {
        Some(1) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let mut files: Vec<String> = text
                .lines()
                .skip(1)
                .take_while(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            files.dedup();
            Ok(Some(files))
        }
        _ => Ok(None),
    }
}
