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

use crate::engine::commands::apply;
use crate::engine::Conference;
use crate::error::usage;

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
    let top = crate::engine::run::settings::workdir(&repo)?;
    let name = super::resolve_name(&repo, args.name)?;
    let conf = Conference::view(repo.path(), &name)?;
    // Shown by its branch name, but always handed to git fully qualified: a tag or a fetched
    // `refs/conference/<name>/best` of the same short name must never be what gets merged.
    let best = conf.refs().best_branch();
    let best_ref = conf.refs().best();
    if apply::has_uncommitted_changes(&top)? {
        return Err(usage(
            "you have uncommitted changes: commit or stash them before `git conference apply`",
        ));
    }
    let stat = apply::diff_stat(&top, &best_ref)?;
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
    if let Some(files) = apply::conflicts(&top, &best_ref)? {
        return Err(anyhow::anyhow!(
            "not applied: merging {best} into your branch would conflict in {} (your branch \
             changed the same lines since the conference's baseline). Nothing was changed. To merge by \
             hand: `git merge {best}`, resolve the conflicts, `git commit`; or start a new \
             conference from your current branch.",
            files.join(", ")
        ));
    }
    if let Some((reason, aborted)) = apply::merge(&top, &message, &best_ref)? {
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
