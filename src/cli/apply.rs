//! `apply`: merges the best branch into the current branch — the only command that touches the
//! user's branch. Shows the diff stat, asks on a TTY (`--yes` otherwise), refuses over
//! uncommitted changes, and merges with the user's own `git`.

use anyhow::Result;
use clap::Args;

use crate::engine::Conference;
use crate::error::usage;
use crate::git::git;
use crate::ui::Ui;

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
    let conf = Conference::open(repo.path(), &name, Ui::new(true))?;
    let best = conf.refs.best_branch();
    let dirty = git(&top, &["status", "--porcelain", "--untracked-files=no"])?;
    if !dirty.trim().is_empty() {
        return Err(usage(
            "you have uncommitted changes: commit or stash them before `git conference apply`",
        ));
    }
    let stat = git(&top, &["diff", "--stat", &format!("HEAD...{best}")])?;
    if stat.trim().is_empty() {
        crate::outln!("Nothing to apply: {best} adds nothing to your branch.");
        return Ok(0);
    }
    crate::outln!(
        "{best} (best {}) changes:\n{stat}",
        crate::engine::review::fmt(conf.state().best.metric)
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
        crate::engine::review::fmt(conf.state().best.metric)
    );
    git(&top, &["merge", "--no-ff", "-m", &message, &best])?;
    crate::outln!("Merged {best} into your branch.");
    Ok(0)
}
