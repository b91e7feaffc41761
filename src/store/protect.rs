//! New objects kept from a concurrent `git gc` or `git prune` while a ref comes to name them.
//!
//! libgit2 writes every new object loose, and it stays unreachable until the ref that names it
//! moves. `git prune` (run by `git gc`) reads the refs once, then deletes the loose objects they
//! do not reach whose files are older than its expiry: an object written before the refs were
//! read and named by a ref that moved after that is deleted, and the ref then names a commit
//! whose tree or parent is gone (`git rev-list --all` and `git fsck` fail). Just before a ref
//! moves, [`new_objects`] dates the files of the objects the move makes reachable an hour ahead,
//! so that no prune with an expiry (`git gc`'s two weeks, `--prune=1.minute.ago`) deletes them;
//! one already gone is reported, and the ref stays where it was. `--prune=now` expires every
//! unreachable object whatever its file's time: what it deletes after a move it did not see is
//! found by [`still_there`] once that `git gc` has ended, and the ref goes back (`store::cas`).

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
    walk(repo, new, old, Visit::Date(SystemTime::now() + AHEAD))
}

/// After the move: the objects [`new_objects`] dated are all still there. `git prune
/// --expire=now` (and `git gc --prune=now`) deletes every unreachable loose object whatever its
/// file's time, so a prune that read the refs just before the move deletes them after it.
pub fn still_there(repo: &Repository, new: Oid, old: Option<Oid>) -> Result<()> {
    walk(repo, new, old, Visit::Check)
}

/// What a walk does with each object.
#[derive(Clone, Copy)]
enum Visit {
    /// Dates its loose file at this time.
    Date(SystemTime),
    /// Checks that it exists.
    Check,
}

fn walk(repo: &Repository, new: Oid, old: Option<Oid>, visit: Visit) -> Result<()> {
    let mut todo = vec![new];
    while let Some(commit_id) = todo.pop() {
        if Some(commit_id) == old || !object(repo, commit_id, visit)? {
            continue;
        }
        let Ok(commit) = repo.find_commit(commit_id) else {
            // Not a commit (a ref to a tree or blob): its own file is all there is.
            continue;
        };
        let parent_tree = commit.parents().next().and_then(|p| p.tree().ok());
        tree(repo, &commit.tree()?, parent_tree.as_ref(), visit)?;
        todo.extend(commit.parent_ids());
    }
    Ok(())
}

/// Visits `tree` and what it holds that `base` (the same folder in the parent) does not.
fn tree(repo: &Repository, tree: &Tree, base: Option<&Tree>, visit: Visit) -> Result<()> {
    if base.is_some_and(|b| b.id() == tree.id()) || !object(repo, tree.id(), visit)? {
        return Ok(());
    }
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
                self::tree(repo, &sub, base_sub.as_ref(), visit)?;
            }
            Some(ObjectType::Blob) => {
                object(repo, entry.id(), visit)?;
            }
            // A submodule's commit is not an object of this repository.
            _ => {}
        }
    }
    Ok(())
}

/// Visits object `id`: Ok(true) when it is a new one (loose and recent, or dated ahead), whose
/// contents the walk visits too; Ok(false) when it is packed or old; an error when it is gone.
fn object(repo: &Repository, id: Oid, visit: Visit) -> Result<bool> {
    let path = loose_path(repo, id);
    let Ok(file) = std::fs::File::open(&path) else {
        if in_a_pack(repo, id)? {
            return Ok(false);
        }
        return Err(ObjectGone(id).into());
    };
    let dated = file.metadata()?.modified()?;
    let now = SystemTime::now();
    let ahead = dated >= now + AHEAD / 2;
    match visit {
        Visit::Check => Ok(ahead),
        Visit::Date(_) if ahead || dated + RECENT < now => Ok(false),
        Visit::Date(until) => {
            file.set_times(std::fs::FileTimes::new().set_modified(until))?;
            Ok(true)
        }
    }
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
