//! Working-tree operations: researcher worktrees (`worktree`), and taking a snapshot of what an
//! agent changed or putting a worktree back to a kept snapshot (`snapshot`); merging findings
//! (`merge`); noticing refs an agent left in the user's repository (`traces`). Ref names and the
//! event log live in `store`; this module only moves files, indexes and commits.

pub mod merge;
pub mod snapshot;
pub mod traces;
pub mod watch;
pub mod worktree;

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs the user's own `git` (for remotes and worktree registration), failing with what it
/// printed: its stderr, or its stdout when stderr is empty (`git merge` reports a conflict there).
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = git_output(dir, args)?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), failure_reason(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the user's own `git` and returns whatever happened, for callers that read a non-zero
/// exit status as an answer (`git merge-tree` exits 1 on conflicts).
pub fn git_output(dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .with_context(|| format!("cannot run git {}", args.join(" ")))
}

/// Why a git command failed, never empty.
pub fn failure_reason(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match (stderr.is_empty(), stdout.is_empty()) {
        (false, _) => stderr,
        (true, false) => stdout,
        (true, true) => format!("{} with no message", out.status),
    }
}
