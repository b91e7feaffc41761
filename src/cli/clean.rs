//! `clean`: removes a conference's worktrees; with `--all`, also its refs, its run folder and
//! its lines in the notes (refs/notes/conference is shared by all conferences: theirs stay).

use anyhow::Result;
use clap::Args;

use crate::engine::commands::clean::{lock_and_cancel, remove_the_rest, remove_worktrees};

/// Remove a conference's worktrees (its refs stay); --all also deletes its refs.
#[derive(Args, Debug)]
pub struct CleanArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    /// Also delete the conference's refs (event log, attempts, researcher and best branches)
    /// and its lines in the notes.
    #[arg(long)]
    pub all: bool,
}

pub fn run(args: CleanArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, args.name, "clean")?;
    let (lock, cancelled) = lock_and_cancel(&repo, &name)?;
    if cancelled > 0 {
        crate::outln!(
            "Cancelled {cancelled} submitted evaluation(s) and removed what they staged."
        );
    }
    if let Some(said) = crate::engine::commands::clean::make_worktrees_own(&repo, &name)? {
        crate::errln!("warning: {said}");
    }
    let (removed, left) = remove_worktrees(&repo, &name)?;
    crate::outln!("Removed {removed} worktrees of `{name}`.");
    for path in left {
        crate::outln!(
            "Left {}: not a worktree of this repository (its git link names another one, or none)",
            path.display()
        );
    }
    if args.all {
        let removed = remove_the_rest(&repo, &name, lock)?;
        crate::outln!(
            "Deleted {} refs of `{name}` and its lines in {} notes (other conferences' notes stay).",
            removed.refs,
            removed.notes
        );
        for kept in &removed.kept {
            crate::outln!("Kept {kept}");
        }
    }
    Ok(0)
}
