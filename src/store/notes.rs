//! Notes on snapshot commits in `refs/notes/conference`: one JSON object per line.
//!
//! A later verdict (peer review) appends a line instead of replacing the note, so notes written on
//! different machines merge with `git notes merge -s cat_sort_uniq`. Notes are written with a
//! two-level fan-out (`ab/cdef…`, as git does for large notes trees) so that adding a note rewrites
//! two small trees, not one tree with an entry per attempt. Several notes go into one notes commit.

use std::sync::Mutex;

use anyhow::Result;
use git2::{build::TreeUpdateBuilder, FileMode, Oid, Repository};

use super::cas;
use super::events::{cas_update, read_path};
use super::refs::NOTES_REF;
use super::signature;
use crate::model::CommitId;

/// The note attached to `commit`, if any (flat or fanned-out layout).
pub fn read_note(repo: &Repository, commit: Oid) -> Result<Option<String>> {
    let Some(tree) = notes_tree(repo)? else {
        return Ok(None);
    };
    for path in note_paths(commit) {
        if let Some(bytes) = read_path(repo, tree, &path)? {
            return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    Ok(None)
}

/// The notes commit this process wrote last: what the notes ref must still lead to after an
/// agent ran (an agent that deletes or rewinds `refs/notes/conference` would lose verdicts).
static LAST_WRITTEN: Mutex<Option<Oid>> = Mutex::new(None);

fn last_written() -> Option<Oid> {
    *LAST_WRITTEN.lock().unwrap()
}

/// Takes the notes ref as it is now as the one this process must keep (when a conference opens).
pub fn remember_current(repo: &Repository) {
    if let Ok(Some(current)) = current_notes_commit(repo) {
        *LAST_WRITTEN.lock().unwrap() = Some(current);
    }
}

/// What the notes writer put back on its own (the ref deleted or moved back under it while an
/// agent ran), to be named in the next agent's attempt.
static UNDONE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The moves of the notes ref the writer undid since the last call.
pub fn take_undone() -> Vec<String> {
    std::mem::take(&mut *UNDONE.lock().unwrap())
}

/// Puts the notes ref back at the notes commit this process wrote last when it was deleted,
/// moved back to an ancestor of it, or moved on by notes commits an agent wrote (see
/// [`lost_since`]); another writer's commits, which build on it, are left. Returns what was
/// undone, for the attempt's reason.
pub fn put_back_if_lost(repo: &Repository) -> Option<String> {
    let last = last_written()?;
    let current = cas::read(repo, NOTES_REF).ok()?;
    let moved = lost_since(repo, current, last)?;
    let restored = cas::try_update(
        repo,
        NOTES_REF,
        last,
        current,
        "git conference: undo a move of the notes",
    );
    Some(match restored {
        Ok(true) => format!("{moved}: put back"),
        Ok(false) => format!("{moved}, and it could not be put back: it kept moving"),
        Err(e) => format!("{moved}, and it could not be put back: {e:#}"),
    })
}

/// What happened to the notes ref, now at `current`, since this process wrote `last`: deleted,
/// moved back off it, or moved on by notes commits an agent wrote (their committer is a
/// researcher's, see `researcher_name`: a forged verdict). None: it is there, or another writer
/// built on it.
fn lost_since(repo: &Repository, current: Option<Oid>, last: Oid) -> Option<String> {
    Some(match current {
        None => format!("deleted {NOTES_REF}"),
        Some(c) if c == last => return None,
        Some(c) if repo.graph_descendant_of(c, last).unwrap_or(true) => {
            let ids = agents_commits(repo, c, last)?;
            format!(
                "wrote {} notes commit(s) of its own to {NOTES_REF} (as researcher {})",
                ids.len(),
                ids[0]
            )
        }
        Some(c) => format!("moved {NOTES_REF} back to {c}"),
    })
}

/// How far back [`agents_commits`] looks for notes commits an agent wrote.
const AGENT_COMMITS_SEARCH: usize = 64;

/// The researchers named as committer of every notes commit from `tip` down its first parents
/// to `last` (None: one of them is not an agent's, or `last` is not found close by).
fn agents_commits(repo: &Repository, tip: Oid, last: Oid) -> Option<Vec<String>> {
    let mut ids = Vec::new();
    let mut at = tip;
    for _ in 0..AGENT_COMMITS_SEARCH {
        if at == last {
            return (!ids.is_empty()).then_some(ids);
        }
        let commit = repo.find_commit(at).ok()?;
        let committer = commit.committer();
        ids.push(super::researcher_of(committer.name()?)?.to_string());
        at = commit.parent_id(0).ok()?;
    }
    None
}

/// The commit the next notes commit builds on, given the ref's value `current`: a notes ref
/// an agent deleted, moved back or wrote on (see [`lost_since`]) while this process was writing
/// is built on from what this process wrote last — not started afresh without every earlier
/// verdict, nor on a forged one — and what was undone is kept to be named.
fn parent_for(repo: &Repository, current: Option<Oid>) -> Option<Oid> {
    let Some(last) = last_written().filter(|c| repo.find_commit(*c).is_ok()) else {
        return current;
    };
    let Some(moved) = lost_since(repo, current, last) else {
        return current;
    };
    let mut undone = UNDONE.lock().unwrap();
    let said = format!("{moved}: put back");
    if !undone.contains(&said) {
        undone.push(said);
    }
    Some(last)
}

/// Trailer of a notes commit written by conference `<name>`: every note of its events up to
/// `<event commit>` is in the notes (see [`noted_through`]).
const NOTED_THROUGH: &str = "Conference-Noted-Through:";
/// How far back [`noted_through`] looks along the notes history (other conferences of the
/// repository write notes commits too).
const NOTED_THROUGH_SEARCH: usize = 64;

/// A flush point that [`append_lines`] writes into its notes commit: conference `name` has every
/// note of its events up to the event commit `through` in the notes.
pub struct Marker<'a> {
    pub name: &'a str,
    pub through: Oid,
    /// Write a notes commit for the marker alone when no note changes.
    pub force: bool,
}

/// Appends one line to the note of each commit, in a single notes commit. Lines already present
/// are not repeated, so replaying the same write (after a crash) changes nothing. A marker goes
/// into the commit's message. Returns whether a notes commit was written.
pub fn append_lines(
    repo: &Repository,
    entries: &[(Oid, String)],
    marker: Option<Marker>,
) -> Result<bool> {
    let forced = marker.as_ref().is_some_and(|m| m.force);
    if entries.is_empty() && !forced {
        return Ok(false);
    }
    // Another process (a second conference) writes notes too: a lost race is retried.
    cas::with_backoff(NOTES_REF, cas::SHARED_TRIES, || {
        let current = current_notes_commit(repo)?;
        let parent = parent_for(repo, current);
        let base = match parent {
            Some(c) => repo.find_commit(c)?.tree()?,
            None => repo.find_tree(repo.treebuilder(None)?.write()?)?,
        };
        let mut update = TreeUpdateBuilder::new();
        let mut changed = false;
        // Entries for the same commit accumulate in `pending` before they are written.
        let mut pending: std::collections::BTreeMap<Oid, String> = Default::default();
        for (commit, line) in entries {
            let existing = match pending.get(commit) {
                Some(text) => Some(text.clone()),
                None => {
                    let mut found = None;
                    for path in note_paths(*commit) {
                        if let Some(bytes) = read_path(repo, base.id(), &path)? {
                            found = Some(String::from_utf8_lossy(&bytes).into_owned());
                            if path.len() == 40 {
                                update.remove(path.as_str());
                            }
                            break;
                        }
                    }
                    found
                }
            };
            let line = line.trim_end();
            let text = match existing {
                Some(text) if text.lines().any(|l| l == line) => text,
                Some(text) => {
                    changed = true;
                    let mut text = text;
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(line);
                    text.push('\n');
                    text
                }
                None => {
                    changed = true;
                    format!("{line}\n")
                }
            };
            pending.insert(*commit, text);
        }
        if !changed && !forced {
            return Ok(Some(false));
        }
        for (commit, text) in &pending {
            let blob = repo.blob(text.as_bytes())?;
            update.upsert(fanout_path(*commit).as_str(), blob, FileMode::Blob);
        }
        let tree = repo.find_tree(update.create_updated(repo, &base)?)?;
        let sig = signature(repo);
        let parents: Vec<git2::Commit> = match parent {
            Some(c) => vec![repo.find_commit(c)?],
            None => vec![],
        };
        let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
        let mut message = format!("Notes added by 'git conference' ({} notes)", pending.len());
        if let Some(m) = &marker {
            message.push_str(&format!("\n\n{NOTED_THROUGH} {} {}\n", m.name, m.through));
        }
        let commit = repo.commit(None, &sig, &sig, &message, &tree, &parent_refs)?;
        crate::failpoint::hit("note.before-ref");
        if !cas::try_update(repo, NOTES_REF, commit, current, "git conference: notes")? {
            return Ok(None);
        }
        *LAST_WRITTEN.lock().unwrap() = Some(commit);
        crate::failpoint::hit("note.written");
        Ok(Some(true))
    })
}

/// The latest event commit of conference `name` through which its notes are all written, as
/// the notes history says (its own notes commits carry it). Looks back along the first parents
/// (a notes merge keeps the local history there) a bounded number of commits: None when no
/// marker is found, and the caller falls back to its checkpoint walk.
pub fn noted_through(repo: &Repository, name: &str) -> Result<Option<Oid>> {
    let Some(mut commit) = current_notes_commit(repo)? else {
        return Ok(None);
    };
    for _ in 0..NOTED_THROUGH_SEARCH {
        let c = repo.find_commit(commit)?;
        let message = c.message_raw().unwrap_or("");
        for line in message.lines() {
            let mut words = line.split_whitespace();
            if words.next() == Some(NOTED_THROUGH) && words.next() == Some(name) {
                if let Some(id) = words.next().and_then(|w| CommitId::try_from(w).ok()) {
                    return Ok(Some(id.oid()));
                }
            }
        }
        match c.parent_id(0) {
            Ok(p) => commit = p,
            Err(_) => break,
        }
    }
    Ok(None)
}

/// Removes conference `name`'s lines from every note (a note left empty goes), in one notes
/// commit; lines of other conferences, and notes written by hand, stay. Returns how many notes
/// changed. For `clean --all`: its commits are about to become unreachable.
pub fn remove_conference(repo: &Repository, name: &str) -> Result<usize> {
    let Some(parent) = current_notes_commit(repo)? else {
        return Ok(0);
    };
    let base = repo.find_commit(parent)?.tree()?;
    let mut update = TreeUpdateBuilder::new();
    let mut changed = 0;
    let mut visit = |path: String, blob: Oid| -> Result<()> {
        let text = String::from_utf8_lossy(repo.find_blob(blob)?.content()).into_owned();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .and_then(|v| {
                        v.get("conference")
                            .and_then(|c| c.as_str())
                            .map(|c| c != name)
                    })
                    .unwrap_or(true)
            })
            .collect();
        if kept.len() == text.lines().count() {
            return Ok(());
        }
        changed += 1;
        if kept.iter().all(|l| l.trim().is_empty()) {
            update.remove(path.as_str());
        } else {
            let blob = repo.blob(format!("{}\n", kept.join("\n")).as_bytes())?;
            update.upsert(path.as_str(), blob, FileMode::Blob);
        }
        Ok(())
    };
    for entry in base.iter() {
        let name = entry.name().unwrap_or("").to_string();
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                for inner in repo.find_tree(entry.id())?.iter() {
                    let rest = inner.name().unwrap_or("");
                    visit(format!("{name}/{rest}"), inner.id())?;
                }
            }
            Some(git2::ObjectType::Blob) => visit(name, entry.id())?,
            _ => {}
        }
    }
    if changed == 0 {
        return Ok(0);
    }
    let tree = repo.find_tree(update.create_updated(repo, &base)?)?;
    let sig = signature(repo);
    let message = format!("Notes of conference '{name}' removed by 'git conference clean --all'");
    let commit = repo.commit(
        None,
        &sig,
        &sig,
        &message,
        &tree,
        &[&repo.find_commit(parent)?],
    )?;
    cas_update(
        repo,
        NOTES_REF,
        commit,
        Some(parent),
        "git conference: clean",
    )?;
    Ok(changed)
}

/// The notes ref exists and holds no note.
pub fn is_empty(repo: &Repository) -> Result<bool> {
    Ok(match notes_tree(repo)? {
        Some(tree) => repo.find_tree(tree)?.is_empty(),
        None => false,
    })
}

fn current_notes_commit(repo: &Repository) -> Result<Option<Oid>> {
    cas::read(repo, NOTES_REF)
}

fn notes_tree(repo: &Repository) -> Result<Option<Oid>> {
    Ok(match current_notes_commit(repo)? {
        Some(c) => Some(repo.find_commit(c)?.tree_id()),
        None => None,
    })
}

fn fanout_path(commit: Oid) -> String {
    let hex = commit.to_string();
    format!("{}/{}", &hex[..2], &hex[2..])
}

fn note_paths(commit: Oid) -> [String; 2] {
    [fanout_path(commit), commit.to_string()]
}
