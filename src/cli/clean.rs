//! `clean`: removes a conference's worktrees; with `--all`, also its refs, its run folder and
//! its lines in the notes (refs/notes/conference is shared by all conferences: theirs stay).

use anyhow::Result;
use clap::Args;

use crate::git::worktree;
use crate::lock::RunLock;
use crate::store::refs;

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
    let run_dir = worktree::run_dir(&repo, &name);
    let lock = RunLock::acquire(&run_dir, &name)?;
    let root = worktree::worktrees_root(&repo, &name);
    let mut removed = 0;
    if let Ok(entries) = std::fs::read_dir(&root) {
        for entry in entries.flatten() {
            worktree::remove(&repo, &entry.path())?;
            removed += 1;
        }
    }
    // The folders that held them go too when nothing else is in them (`remove_dir` keeps a
    // folder that is not empty): the conference's, then the default `<repo>.conference`.
    if std::fs::remove_dir(&root).is_ok() {
        if let Some(parent) = root.parent() {
            if parent == worktree::default_root(&repo) {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
    crate::outln!("Removed {removed} worktrees of `{name}`.");
    if args.all {
        // Only the refs the conference recorded: the user's commits and HEAD's branch stay.
        let plan = super::clean_refs::plan(&repo, &name)?;
        for n in &plan.delete {
            repo.find_reference(n)?.delete()?;
        }
        let deleted = plan.delete.len();
        let notes = crate::store::notes::remove_conference(&repo, &name)?;
        crate::trust::forget(&repo, &name);
        drop(lock);
        // Never the tool's own folders (a conference named `hooks` by an older version shared
        // the hooks folder): only what the conference put there goes.
        if refs::is_reserved_name(&name) || run_dir == crate::hooks::hooks_dir(&repo) {
            for own in ["worktrees", "logs", "running", "lock"] {
                let path = run_dir.join(own);
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
        } else {
            let _ = std::fs::remove_dir_all(&run_dir);
        }
        crate::outln!(
            "Deleted {deleted} refs of `{name}` and its lines in {notes} notes (other conferences' notes stay)."
        );
        for kept in &plan.kept {
            crate::outln!("Kept {kept}");
        }
    }
    Ok(0)
}
