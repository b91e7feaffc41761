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

/// The objects [`new_objects`] visited for one move: those it dated, and those where it stopped
/// (packed, old, or dated ahead by an earlier move). [`still_there`] checks exactly these.
#[derive(Debug, Default)]
pub struct Visited(Vec<Oid>);

/// Dates ahead the loose objects that moving a ref from `old` to `new` makes reachable: the
/// commits reachable from `new` whose files are recent and not yet dated ahead (those from a
/// fetch are packed, older ones were reachable long ago), each with the trees and blobs it does
/// not share with its first parent. Fails, naming the object, when one of them is gone.
pub fn new_objects(repo: &Repository, new: Oid, old: Option<Oid>) -> Result<Visited> {
    let mut visited = Visited::default();
    walk(repo, new, old, SystemTime::now() + AHEAD, &mut visited)?;
    Ok(visited)
}

/// After the move: the objects [`new_objects`] visited are all still there. `git prune
/// --expire=now` (and `git gc --prune=now`) deletes every unreachable loose object whatever its
/// file's time, so a prune that read the refs just before the move deletes them after it.
///
/// Only what the walk visited is checked, not everything below it that an earlier move dated:
/// walking down through those (every attempt of the last half hour) made each move of a long
/// round cost more than the one before (issue #27). A prune that deleted an earlier move's
/// objects deleted the commit where this walk stopped with them (it was as unreachable as they
/// were), and that move's own check puts its ref back.
pub fn still_there(repo: &Repository, visited: &Visited) -> Result<()> {
    for &id in &visited.0 {
        if !loose_path(repo, id).exists() && !in_a_pack(repo, id)? {
            return Err(ObjectGone(id).into());
        }
    }
    Ok(())
}

fn walk(
    repo: &Repository,
    new: Oid,
    old: Option<Oid>,
    until: SystemTime,
    visited: &mut Visited,
) -> Result<()> {
    let mut todo = vec![new];
    while let Some(commit_id) = todo.pop() {
        if Some(commit_id) == old || !object(repo, commit_id, until, visited)? {
            continue;
        }
        let Ok(commit) = repo.find_commit(commit_id) else {
            // Not a commit (a ref to a tree or blob): its own file is all there is.
            continue;
        };
        let parent_tree = commit.parents().next().and_then(|p| p.tree().ok());
        tree(repo, &commit.tree()?, parent_tree.as_ref(), until, visited)?;
        todo.extend(commit.parent_ids());
    }
    Ok(())
}

/// Visits `tree` and what it holds that `base` (the same folder in the parent) does not.
fn tree(
    repo: &Repository,
    tree: &Tree,
    base: Option<&Tree>,
    until: SystemTime,
    visited: &mut Visited,
) -> Result<()> {
    if base.is_some_and(|b| b.id() == tree.id()) || !object(repo, tree.id(), until, visited)? {
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
                self::tree(repo, &sub, base_sub.as_ref(), until, visited)?;
            }
            Some(ObjectType::Blob) => {
                object(repo, entry.id(), until, visited)?;
            }
            // A submodule's commit is not an object of this repository.
            _ => {}
        }
    }
    Ok(())
}

/// Visits object `id` (noted in `visited`): Ok(true) when it is a new one (loose and recent),
/// now dated `until`, whose contents the walk visits too; Ok(false) when it is packed, old, or
/// already dated ahead; an error when it is gone.
fn object(repo: &Repository, id: Oid, until: SystemTime, visited: &mut Visited) -> Result<bool> {
    let path = loose_path(repo, id);
    let Ok(file) = std::fs::File::open(&path) else {
        if in_a_pack(repo, id)? {
            visited.0.push(id);
            return Ok(false);
        }
        return Err(ObjectGone(id).into());
    };
    visited.0.push(id);
    let dated = file.metadata()?.modified()?;
    let now = SystemTime::now();
    if dated >= now + AHEAD / 2 || dated + RECENT < now {
        return Ok(false);
    }
    file.set_times(std::fs::FileTimes::new().set_modified(until))?;
    Ok(true)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repository) {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init(tmp.path()).unwrap();
        (tmp, repo)
    }

    /// Writes a commit (no ref moves) with one file holding `text`.
    fn commit(repo: &Repository, text: &str, parents: &[Oid]) -> Oid {
        let blob = repo.blob(text.as_bytes()).unwrap();
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("file", blob, 0o100644).unwrap();
        let tree = repo.find_tree(tb.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let parents: Vec<git2::Commit> = parents
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(None, &sig, &sig, text, &tree, &parent_refs)
            .unwrap()
    }

    /// Moves `name` to `new` as every conference ref moves (dating, then checking).
    /// The first blob of `commit`'s tree.
    fn first_blob(repo: &Repository, commit: Oid) -> Oid {
        let tree = repo.find_commit(commit).unwrap().tree().unwrap();
        let id = tree.get(0).unwrap().id();
        id
    }

    fn move_ref(repo: &Repository, name: &str, new: Oid) {
        let old = repo.refname_to_id(name).ok();
        assert!(crate::store::cas::try_update(repo, name, new, old, "t").unwrap());
    }

    /// Issue #27: the check after each move walked down through every object an earlier move
    /// had dated ahead (the last half hour of history), so each move of a long round cost more
    /// than the one before. As a conference does: a branch moves to each new attempt, and a
    /// second ref (the attempts chain) keeps each one with a commit whose parents are its own
    /// tip and the attempt. The check of the chain's move visits the same two objects at the
    /// 200th attempt as at the first; an object lost 200 attempts below is none of its concern
    /// (before, it walked down to it and put the ref back).
    #[test]
    fn the_check_after_a_move_visits_the_same_few_objects_however_long_the_history() {
        let (_tmp, repo) = repo();
        let mut attempt = commit(&repo, "0", &[]);
        move_ref(&repo, "refs/heads/work", attempt);
        let early_blob = first_blob(&repo, attempt);
        let mut visits = Vec::new();
        for i in 1..=200 {
            attempt = commit(&repo, &i.to_string(), &[attempt]);
            move_ref(&repo, "refs/heads/work", attempt);
            let tip = repo.refname_to_id("refs/keep").ok();
            let kept = commit(
                &repo,
                "",
                &tip.into_iter().chain([attempt]).collect::<Vec<_>>(),
            );
            visits.push(new_objects(&repo, kept, tip).unwrap().0.len());
            if i == 199 {
                std::fs::remove_file(loose_path(&repo, early_blob)).unwrap();
            }
            move_ref(&repo, "refs/keep", kept);
        }
        assert_eq!(visits[199], visits[1], "{visits:?}");
        assert!(visits[199] <= 4, "{visits:?}");
    }

    /// A prune that deletes what a move made reachable, after the move, is still seen.
    #[test]
    fn the_check_finds_an_object_of_the_move_deleted_after_it() {
        let (_tmp, repo) = repo();
        let first = commit(&repo, "0", &[]);
        move_ref(&repo, "refs/heads/work", first);
        let new = commit(&repo, "1", &[first]);
        let visited = new_objects(&repo, new, Some(first)).unwrap();
        still_there(&repo, &visited).unwrap();
        let blob = first_blob(&repo, new);
        std::fs::remove_file(loose_path(&repo, blob)).unwrap();
        let gone = still_there(&repo, &visited).unwrap_err();
        assert!(gone.is::<ObjectGone>(), "{gone:#}");
    }
}
