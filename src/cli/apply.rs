//! `apply`: merges the best branch into the current branch — the only command that touches the
//! user's branch. Shows the diff stat, asks on a TTY (`--yes` otherwise), refuses over
//! uncommitted changes, and merges with the user's own `git`.
//!
//! A merge that would conflict (the user's branch changed the same lines since the baseline) is
//! found beforehand with `git merge-tree --write-tree` (git ≥ 2.38), which touches neither the
//! working tree nor the index, and refused with the files named: the user is never left
//! mid-merge. Should a merge still stop midway (an older git, a hook), it is aborted.

use anyhow::Result;
use clap::Args;

use crate::engine::Conference;
use crate::error::usage;
use crate::git::{failure_reason, git, git_output};

/// Merge the conference's best branch into the current branch.
#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    /// Merge without asking.
    #[arg(long, short)]
    pub yes: bool,
}

pub fn run(args: ApplyArgs) -> Result<i32> {
    let repo = super::discover()?;
    let top = super::workdir(&repo)?;
    let name = super::resolve_name(&repo, args.name)?;
    let conf = Conference::view(repo.path(), &name)?;
    // Shown by its branch name, but always handed to git fully qualified: a tag or a fetched
    // `refs/conference/<name>/best` of the same short name must never be what gets merged.
    let best = conf.refs.best_branch();
    let best_ref = conf.refs.best();
    let dirty = git(&top, &["status", "--porcelain", "--untracked-files=no"])?;
    if !dirty.trim().is_empty() {
        return Err(usage(
            "you have uncommitted changes: commit or stash them before `git conference apply`",
        ));
    }
    let stat = git(&top, &["diff", "--stat", &format!("HEAD...{best_ref}")])?;
    if stat.trim().is_empty() {
        crate::outln!("Nothing to apply: {best} adds nothing to your branch.");
        return Ok(0);
    }
    crate::outln!(
        "{best} (best {}) changes:\n{stat}",
        crate::render::format::fmt(conf.state().best.metric)
    );
    if !args.yes {
        if !super::stdin_is_tty() {
            return Err(usage(
                "pass --yes to merge without a terminal to confirm on",
            ));
        }
        if !super::confirm(&format!("Merge {best} into your current branch?"), false) {
            crate::outln!("Not applied.");
            return Ok(1);
        }
    }
    let message = format!(
        "Merge conference `{name}` best ({})",
        crate::render::format::fmt(conf.state().best.metric)
    );
    if let Some(files) = conflicts(&top, &best_ref)? {
        return Err(anyhow::anyhow!(
            "not applied: merging {best} into your branch would conflict in {} (your branch \
             changed the same lines since the conference's baseline). Nothing was changed. To merge by \
             hand: `git merge {best}`, resolve the conflicts, `git commit`; or start a new \
             conference from your current branch.",
            files.join(", ")
        ));
    }
    let merged = git_output(&top, &["merge", "--no-ff", "-m", &message, &best_ref])?;
    if !merged.status.success() {
        let reason = failure_reason(&merged);
        let aborted = git_output(&top, &["rev-parse", "-q", "--verify", "MERGE_HEAD"])?
            .status
            .success()
            && git_output(&top, &["merge", "--abort"])?.status.success();
        let state = if aborted {
            "the merge was aborted; your branch and files are as they were"
        } else {
            "your branch was not changed"
        };
        return Err(anyhow::anyhow!(
            "not applied: git merge {best} failed: {reason}\n({state})"
        ));
    }
    crate::outln!("Merged {best} into your branch.");
    Ok(0)
}

/// The files a merge of `best` into HEAD would conflict in (None: it merges cleanly), from
/// `git merge-tree --write-tree`; None too when this git is older than 2.38 (the merge itself
/// then finds out, and is aborted).
fn conflicts(top: &std::path::Path, best: &str) -> Result<Option<Vec<String>>> {
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
