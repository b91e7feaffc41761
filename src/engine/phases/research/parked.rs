//! A researcher's worktree between rounds (parked at its head with its watch, so the next round
//! rewrites only what changed) and the watch that sees every change in it.

use anyhow::Result;
use git2::{Oid, Repository};

use crate::engine::Conference;
use crate::git::watch::{Changes, Watch};
use crate::git::worktree;

/// A researcher worktree left exactly at a commit's tree (its head's, or with branching on the
/// node its next attempt would have started from) at the end of a research phase, with
/// the watch that has seen every change since: the next round start rewrites only what the new
/// best changed (`snapshot::advance`) instead of checking out the whole worktree.
pub struct IdleWorktree {
    pub(super) path: std::path::PathBuf,
    pub(super) tree: Oid,
    pub(super) watch: Watch,
}

pub(super) fn take_idle(conf: &Conference, id: &str) -> Option<IdleWorktree> {
    let idle = conf.idle_worktrees.lock().ok()?.remove(id)?;
    idle.path.join(".git").exists().then_some(idle)
}

pub(super) fn park(
    conf: &Conference,
    id: &str,
    path: &std::path::Path,
    watch: Option<Watch>,
    at: &crate::model::CommitId,
) -> Result<()> {
    let Some(watch) = watch else {
        return Ok(());
    };
    let tree = conf.open_repo()?.find_commit(at.oid())?.tree_id();
    if let Ok(mut idle) = conf.idle_worktrees.lock() {
        let path = path.to_path_buf();
        idle.insert(id.to_string(), IdleWorktree { path, tree, watch });
    }
    Ok(())
}

/// Watches the researcher's worktree so that snapshots and reverts touch only what changed.
pub(super) fn start_watch(wt: &Repository, wt_path: &std::path::Path) -> Option<Watch> {
    let index_file = wt.path().join("index");
    let skip = |p: &std::path::Path| wt.is_path_ignored(p).unwrap_or(false);
    Watch::start(wt_path, &index_file, &skip)
}

pub(super) fn take_changes(watch: &mut Option<Watch>) -> Changes {
    watch.as_mut().map_or(Changes::Everything, Watch::take)
}

pub(super) fn settle(watch: &mut Option<Watch>) {
    if let Some(w) = watch.as_mut() {
        w.settle();
    }
}

pub(super) fn open_worktree(conf: &Conference, path: &std::path::Path) -> Result<Repository> {
    let repo = conf.open_repo()?;
    worktree::repair_gitfile(&repo, path)?;
    crate::engine::agent::workspace::open_worktree(conf, path)
}
