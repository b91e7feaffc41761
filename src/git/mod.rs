//! Working-tree operations: researcher worktrees (`worktree`), and taking a snapshot of what an
//! agent changed or putting a worktree back to a kept snapshot (`snapshot`). Ref names and the
//! event log live in `store`; this module only moves files, indexes and commits.

pub mod snapshot;
pub mod watch;
pub mod worktree;

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs the user's own `git` (for remotes and worktree registration), failing with its stderr.
/// It runs in a process group of its own: a Ctrl-C at the terminal reaches the whole foreground
/// group, and must stop the conference gracefully, not kill a `git worktree add` half-way.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    use std::os::unix::process::CommandExt;
    let out = Command::new("git")
        .process_group(0)
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .with_context(|| format!("cannot run git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
