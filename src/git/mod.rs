//! Working-tree operations: researcher worktrees (`worktree`), and taking a snapshot of what an
//! agent changed or putting a worktree back to a kept snapshot (`snapshot`); merging findings
//! (`merge`); noticing refs an agent left in the user's repository (`traces`) and its writes into
//! the user's working tree (`user_writes`). Ref names and the
//! event log live in `store`; this module only moves files, indexes and commits.

pub mod changes;
pub mod leftovers;
pub mod merge;
pub mod snapshot;
pub mod traces;
pub mod user_writes;
pub mod watch;
pub mod worktree;

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs the user's own `git` (worktree registration, merges), failing with what it printed: its
/// stderr, or its stdout when stderr is empty (`git merge` reports a conflict there).
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    checked(args, git_output(dir, args)?)
}

/// Runs the user's own `git` to talk to a remote. It stays in the terminal's process group: a
/// credential helper or ssh may ask for a password there (a background group would be stopped).
pub fn git_remote(dir: &Path, args: &[&str]) -> Result<String> {
    checked(args, git_remote_output(dir, args)?)
}

/// [`git_remote`], returning whatever happened (a rejected push is an answer, not a failure).
pub fn git_remote_output(dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    command(dir, args).output().with_context(|| cannot(args))
}

/// The refs `git ls-remote` printed: (ref name, object id) for each line it wrote as one.
pub fn listed_refs(printed: &str) -> Vec<(&str, git2::Oid)> {
    printed
        .lines()
        .filter_map(|line| {
            let (id, name) = line.split_once('\t')?;
            Some((name, git2::Oid::from_str(id).ok()?))
        })
        .collect()
}

fn checked(args: &[&str], out: std::process::Output) -> Result<String> {
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), failure_reason(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cannot(args: &[&str]) -> String {
    format!("cannot run git {}", args.join(" "))
}

/// Runs the user's own `git` and returns whatever happened, for callers that read a non-zero
/// exit status as an answer (`git merge-tree` exits 1 on conflicts). It runs in a process group
/// of its own: a Ctrl-C at the terminal reaches the whole foreground group, and must stop the
/// conference gracefully, not kill a `git worktree add` half-way.
pub fn git_output(dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    command(dir, args)
        .process_group(0)
        .output()
        .with_context(|| cannot(args))
}

fn command(dir: &Path, args: &[&str]) -> Command {
    // `-C dir` names the repository: none named by the environment may override it.
    let mut cmd = crate::exec::command("git", crate::exec::GitEnv::Clear);
    cmd.arg("-C").arg(dir).args(args);
    cmd
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
