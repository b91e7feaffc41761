//! New objects made safe from a concurrent `git gc --prune=now` before a ref names them.
//!
//! libgit2 writes every new object loose, and it stays unreachable until the ref that names it
//! moves. `git prune --expire=now` (what `git gc --prune=now` runs) reads the refs once, then
//! deletes every loose object they do not reach whose file is not newer than the instant it
//! started: an object written before that instant and named by a ref that moved after the refs
//! were read is deleted, and the ref then names a commit whose tree or parent is gone (`git
//! rev-list --all` and `git fsck` fail). Just before a ref moves, [`new_objects`] dates the files
//! of the objects the move makes reachable an hour ahead, so that no prune that could have missed
//! the move deletes them; a prune that starts later reads the moved ref. An object already gone
//! by then is reported, and the ref stays where it was.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use git2::{ObjectType, Oid, Repository, Tree};

/// How far ahead the files of new objects are dated: longer than any write takes to reach its ref.
const AHEAD: Duration = Duration::from_secs(3600);

/// Loose objects older than this are not new: a ref named them long ago (or they are garbage
/// that git's default two-week grace keeps); the walk stops there.
const RECENT: Duration = Duration::from_secs(24 * 3600);

/// Dates ahead the loose objects that moving a ref from `old` to `new` makes reachable: the
/// commits reachable from `new` whose files are recent and not yet dated ahead (those from a
/// fetch are packed, older ones were reachable long ago), each with the trees and blobs it does
/// not share with its first parent. Fails, naming the object, when one of them is gone.
pub fn new_objects(repo: &Repository, new: Oid, old: Option<Oid>) -> Result<()> {
    let until = SystemTime::now() + AHEAD;
    let mut todo = vec![new];
    while let Some(commit_id) = todo.pop() {
        if Some(commit_id) == old || !date_ahead(repo, commit_id, until)? {
            continue;
        }
        let Ok(commit) = repo.find_commit(commit_id) else {
            // Not a commit (a ref to a tree or blob): its own file is all there is to date.
            continue;
        };
        let parent_tree = commit.parents().next().and_then(|p| p.tree().ok());
        tree(repo, &commit.tree()?, parent_tree.as_ref(), until)?;
        todo.extend(commit.parent_ids());
    }
    Ok(())
}

/// Dates ahead `tree` and what it holds that `base` (the same folder in the parent) does not.
fn tree(repo: &Repository, tree: &Tree, base: Option<&Tree>, until: SystemTime) -> Result<()> {
    if base.is_some_and(|b| b.id() == tree.id()) {
        return Ok(());
    }
    date_ahead(repo, tree.id(), until)?;
    for entry in tree.iter() {
        let before = base.and_then(|b| b.get_name(entry.name()?));
        if before.as_ref().is_some_and(|b| b.id() == entry.id()) {
            continue;
        }
        match entry.kind() {
            Some(ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id())?;
                let base_sub = before
                    .filter(|b| b.kind() == Some(ObjectType::Tree))
                    .and_then(|b| repo.find_tree(b.id()).ok());
                self::tree(repo, &sub, base_sub.as_ref(), until)?;
            }
            Some(ObjectType::Blob) => {
                date_ahead(repo, entry.id(), until)?;
            }
            // A submodule's commit is not an object of this repository.
            _ => {}
        }
    }
    Ok(())
}

/// An object git-conference had just written was deleted before a ref could name it.
#[derive(Debug)]
pub struct ObjectGone(pub Oid);

impl std::fmt::Display for ObjectGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "object {} that git-conference had just written is gone (deleted by a `git gc \
             --prune=now` or `git prune` while the conference ran?)",
            self.0
        )
    }
}

impl std::error::Error for ObjectGone {}

/// Whether a pack holds `id`, as the files say now: the repository's own object database may
/// answer from its cache for an object it read before a prune deleted it.
fn in_a_pack(repo: &Repository, id: Oid) -> Result<bool> {
    let fresh = git2::Odb::new()?;
    fresh.add_disk_alternate(&repo.commondir().join("objects").to_string_lossy())?;
    Ok(fresh.exists(id))
}

/// The loose file of object `id`.
fn loose_path(repo: &Repository, id: Oid) -> PathBuf {
    let hex = id.to_string();
    repo.commondir()
        .join("objects")
        .join(&hex[..2])
        .join(&hex[2..])
}

/// Dates the loose file of `id` at `until`. Ok(true) when it was loose, recent and not dated
/// ahead yet; Ok(false) when there was nothing to do (packed, old, or dated already); an error
/// when the object is gone.
fn date_ahead(repo: &Repository, id: Oid, until: SystemTime) -> Result<bool> {
    let path = loose_path(repo, id);
    let Ok(file) = std::fs::File::open(&path) else {
        if in_a_pack(repo, id)? {
            return Ok(false);
        }
        return Err(ObjectGone(id).into());
    };
    let dated = file.metadata()?.modified()?;
    if dated >= until - AHEAD / 2 || dated + RECENT + AHEAD < until {
        return Ok(false);
    }
    file.set_times(std::fs::FileTimes::new().set_modified(until))?;
    Ok(true)
}
