//! The knowledge store in git (DESIGN.md §10): the ref [`KNOWLEDGE_REF`], whose tree holds one
//! `<id>.md` file per entry (`model::knowledge` reads and writes their text). Every change is a
//! commit on that ref moved by compare-and-swap, so `git log refs/conference-knowledge/store` says
//! where each entry came from and `git revert` undoes a `forget`.
//!
//! A retrospective's commit names the conference and carries the trailer
//! `Retrospective-Of: <conference> round <N> iterations <M>`: the store is the one commit point
//! of a retrospective, and a retrospective whose trailer is in the ref's history is not stored
//! again (a killed run's `resume`, or a second `resume` of a finished conference).
//!
//! Two clones' stores merge three-way by file: an entry added or changed on one side only is
//! taken, one removed on one side and unchanged on the other stays removed, and one changed on
//! both sides differently keeps both (the other side's under `<id>-<blob>.md`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use git2::{ObjectType, Oid, Repository};

use super::cas;
use super::refs::KNOWLEDGE_REF;
use crate::model::knowledge::{self, Entry};

/// The trailer that marks a retrospective's commit.
pub const TRAILER: &str = "Retrospective-Of";

/// The store as one commit of the ref has it.
#[derive(Debug, Default)]
pub struct Store {
    pub tip: Option<Oid>,
    pub entries: Vec<Entry>,
    /// `<file>:<line>: what is wrong` for each entry that could not be read (left out).
    pub problems: Vec<String>,
}

/// The store at the ref's tip (empty when there is no ref yet).
pub fn read(repo: &Repository) -> Result<Store> {
    read_at(repo, cas::read(repo, KNOWLEDGE_REF)?)
}

/// The store at commit `tip`: every `<id>.md` file of its tree (other files are not entries).
pub fn read_at(repo: &Repository, tip: Option<Oid>) -> Result<Store> {
    let mut store = Store {
        tip,
        ..Store::default()
    };
    let Some(tip) = tip else { return Ok(store) };
    let tree = repo.find_commit(tip)?.tree()?;
    for item in tree.iter() {
        let Some(id) = item.name().and_then(|n| n.strip_suffix(".md")) else {
            continue;
        };
        if item.kind() != Some(ObjectType::Blob) {
            continue;
        }
        let file = format!("{id}.md");
        if !knowledge::is_valid_id(id) {
            store.problems.push(format!(
                "{file}:1: the file name is not a usable id (letters, digits, `-`, `_`, `.`)"
            ));
            continue;
        }
        let blob = repo.find_blob(item.id())?;
        let Ok(text) = std::str::from_utf8(blob.content()) else {
            store.problems.push(format!("{file}:1: not UTF-8 text"));
            continue;
        };
        match knowledge::parse(id, text) {
            Ok(e) => store.entries.push(e),
            Err(m) => store
                .problems
                .push(format!("{file}:{}: {}", m.line, m.message)),
        }
    }
    Ok(store)
}

/// Whether the history of `tip` holds the retrospective `key`.
pub fn has_retrospective(repo: &Repository, tip: Option<Oid>, key: &str) -> Result<bool> {
    let Some(tip) = tip else { return Ok(false) };
    let line = format!("{TRAILER}: {key}");
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    for oid in walk {
        let commit = repo.find_commit(oid?)?;
        if commit
            .message()
            .unwrap_or("")
            .lines()
            .any(|l| l.trim() == line)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What [`add_retrospective`] did.
#[derive(Debug, PartialEq)]
pub enum Added {
    /// The ids added (entries the store already holds are not added again).
    Stored(Vec<String>),
    /// The store already holds this retrospective.
    AlreadyStored,
}

/// Adds `entries` as the retrospective `key` in one commit (`subject` its first line), unless
/// the store already holds it.
pub fn add_retrospective(
    repo: &Repository,
    entries: &[Entry],
    subject: &str,
    key: &str,
) -> Result<Added> {
    if entries.is_empty() {
        // Nothing learned: no commit (and no store made for nothing).
        return Ok(Added::Stored(vec![]));
    }
    cas::with_backoff(KNOWLEDGE_REF, cas::SHARED_TRIES, || {
        let tip = cas::read(repo, KNOWLEDGE_REF)?;
        if has_retrospective(repo, tip, key)? {
            return Ok(Some(Added::AlreadyStored));
        }
        let mut files = files_at(repo, tip)?;
        let mut added = Vec::new();
        for e in entries {
            if let Some((path, e)) = free_path(repo, &files, e)? {
                files.insert(path, repo.blob(knowledge::render(&e).as_bytes())?);
                added.push(e.id);
            }
        }
        let message = format!(
            "{subject}\n\nAdded: {}\n\n{TRAILER}: {key}\n",
            if added.is_empty() {
                "nothing new".to_string()
            } else {
                added.join(", ")
            }
        );
        Ok(
            commit_on(repo, tip, &files, &message, "git conference retrospective")?
                .then(|| Added::Stored(added.clone())),
        )
    })
}

/// Where `e` goes in the store: its own id, or `<id>-2`, `-3`… when another entry holds the
/// id (a conference of the same name run again); None when the store already says the same
/// (`knowledge::same_knowledge`).
fn free_path(
    repo: &Repository,
    files: &BTreeMap<String, Oid>,
    e: &Entry,
) -> Result<Option<(String, Entry)>> {
    for n in 1.. {
        let id = if n == 1 {
            e.id.clone()
        } else {
            format!("{}-{n}", e.id)
        };
        let path = format!("{id}.md");
        let Some(blob) = files.get(&path) else {
            let mut e = e.clone();
            e.id = id;
            return Ok(Some((path, e)));
        };
        let blob = repo.find_blob(*blob)?;
        let text = String::from_utf8_lossy(blob.content());
        if knowledge::parse(&id, &text).is_ok_and(|held| knowledge::same_knowledge(&held, e)) {
            return Ok(None);
        }
    }
    unreachable!("some suffix is free")
}

/// Removes entry `id` in a commit of its own (undone with `git revert`); the removed entry.
pub fn forget(repo: &Repository, id: &str) -> Result<Entry> {
    cas::with_backoff(KNOWLEDGE_REF, cas::SHARED_TRIES, || {
        let tip = cas::read(repo, KNOWLEDGE_REF)?;
        let store = read_at(repo, tip)?;
        let Some(entry) = store.entries.iter().find(|e| e.id == id).cloned() else {
            return Err(crate::error::usage(missing(&store, id)));
        };
        let mut files = files_at(repo, tip)?;
        files.remove(&format!("{id}.md"));
        let message = format!(
            "knowledge: forget {id}\n\nThe {} from conference {} ({}). `git revert` of this commit brings it back.\n",
            entry.kind.word(),
            entry.conference,
            entry.change.clone() + &entry.reason
        );
        Ok(commit_on(
            repo,
            tip,
            &files,
            &message,
            "git conference knowledge forget",
        )?
        .then(|| entry.clone()))
    })
}

/// Why `id` cannot be found, and which ids there are.
pub fn missing(store: &Store, id: &str) -> String {
    if store.entries.is_empty() {
        return format!("no knowledge entry `{id}`: the store is empty (a conference adds entries when it ends)");
    }
    let ids: Vec<&str> = store
        .entries
        .iter()
        .map(|e| e.id.as_str())
        .take(20)
        .collect();
    format!(
        "no knowledge entry `{id}`; `git conference knowledge list` lists them (e.g. {})",
        ids.join(", ")
    )
}

/// What [`merge`] did.
#[derive(Debug, PartialEq)]
pub enum Merged {
    /// The local store already held everything.
    UpToDate,
    /// The local store moved to the other (it held nothing the other lacked).
    FastForward,
    /// A merge commit; how many entries were changed differently on both sides (both kept).
    Merged { both_changed: usize },
}

/// Merges the store at `theirs` (fetched from `from`) into the local ref.
pub fn merge(repo: &Repository, theirs: Oid, from: &str) -> Result<Merged> {
    cas::with_backoff(KNOWLEDGE_REF, cas::SHARED_TRIES, || {
        let ours = cas::read(repo, KNOWLEDGE_REF)?;
        let (new, outcome) = match ours {
            None => (theirs, Merged::FastForward),
            Some(ours) if ours == theirs || repo.graph_descendant_of(ours, theirs)? => {
                return Ok(Some(Merged::UpToDate))
            }
            Some(ours) if repo.graph_descendant_of(theirs, ours)? => (theirs, Merged::FastForward),
            Some(ours) => {
                let base = repo.merge_base(ours, theirs).ok();
                let (files, both) = three_way(
                    &files_at(repo, base)?,
                    &files_at(repo, Some(ours))?,
                    &files_at(repo, Some(theirs))?,
                );
                let message = format!("knowledge: merge the store of {from}\n\nEntries changed on both sides, both kept: {both}\n");
                (commit(repo, &files, &message, &[ours, theirs])?, Merged::Merged { both_changed: both })
            }
        };
        Ok(cas::try_update(repo, KNOWLEDGE_REF, new, ours, "git conference fetch: knowledge")?
            .then_some(outcome))
    })
    .with_context(|| format!("could not merge the knowledge store of {from}"))
}

/// The merge of two sides' files against their base, and how many paths both changed
/// differently (the other side's copy is then kept under a name of its own).
fn three_way(
    base: &BTreeMap<String, Oid>,
    ours: &BTreeMap<String, Oid>,
    theirs: &BTreeMap<String, Oid>,
) -> (BTreeMap<String, Oid>, usize) {
    let mut out = BTreeMap::new();
    let mut both = 0;
    let paths: std::collections::BTreeSet<&String> = base
        .keys()
        .chain(ours.keys())
        .chain(theirs.keys())
        .collect();
    for path in paths {
        let (b, o, t) = (base.get(path), ours.get(path), theirs.get(path));
        let kept = if o == t || t == b {
            o
        } else if o == b {
            t
        } else {
            both += 1;
            if let (Some(_), Some(t)) = (o, t) {
                let stem = path.trim_end_matches(".md");
                out.insert(format!("{stem}-{}.md", &t.to_string()[..7]), *t);
            }
            o.or(t)
        };
        if let Some(kept) = kept {
            out.insert(path.clone(), *kept);
        }
    }
    (out, both)
}

/// The tree of `commit` as path → object (every top-level entry, entries or not).
fn files_at(repo: &Repository, commit: Option<Oid>) -> Result<BTreeMap<String, Oid>> {
    let mut files = BTreeMap::new();
    if let Some(commit) = commit {
        for item in repo.find_commit(commit)?.tree()?.iter() {
            if let Some(name) = item.name() {
                files.insert(name.to_string(), item.id());
            }
        }
    }
    Ok(files)
}

/// Commits `files` on the store's `tip` and moves the ref there if it still stands at `tip`
/// (false when another process moved it first: the caller reads again and retries).
fn commit_on(
    repo: &Repository,
    tip: Option<Oid>,
    files: &BTreeMap<String, Oid>,
    message: &str,
    reflog: &str,
) -> Result<bool> {
    let parents: Vec<Oid> = tip.into_iter().collect();
    let new = commit(repo, files, message, &parents)?;
    cas::try_update(repo, KNOWLEDGE_REF, new, tip, reflog)
}

/// A commit of `files` (top-level blobs and trees) with `parents`.
fn commit(
    repo: &Repository,
    files: &BTreeMap<String, Oid>,
    message: &str,
    parents: &[Oid],
) -> Result<Oid> {
    let mut builder = repo.treebuilder(None)?;
    for (name, oid) in files {
        let mode = match repo.find_object(*oid, None)?.kind() {
            Some(ObjectType::Tree) => 0o040000,
            _ => 0o100644,
        };
        builder.insert(name, *oid, mode)?;
    }
    let tree = repo.find_tree(builder.write()?)?;
    let sig = super::signature(repo);
    let parents: Vec<git2::Commit> = parents
        .iter()
        .map(|p| repo.find_commit(*p))
        .collect::<Result<_, _>>()?;
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    Ok(repo.commit(None, &sig, &sig, message, &tree, &parents)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap()
    }

    #[test]
    fn three_way_takes_each_sides_change_and_keeps_both_on_a_clash() {
        let m = |pairs: &[(&str, u8)]| -> BTreeMap<String, Oid> {
            pairs
                .iter()
                .map(|(p, n)| (p.to_string(), oid(*n)))
                .collect()
        };
        let base = m(&[
            ("kept.md", 1),
            ("forgot.md", 2),
            ("edited.md", 3),
            ("clash.md", 4),
        ]);
        let ours = m(&[
            ("kept.md", 1),
            ("edited.md", 3),
            ("clash.md", 5),
            ("mine.md", 6),
        ]);
        let theirs = m(&[
            ("kept.md", 1),
            ("forgot.md", 2),
            ("edited.md", 7),
            ("clash.md", 8),
            ("yours.md", 9),
        ]);
        let (out, both) = three_way(&base, &ours, &theirs);
        assert_eq!(both, 1);
        assert_eq!(out.get("forgot.md"), None, "a forget on one side holds");
        assert_eq!(out["edited.md"], oid(7));
        assert_eq!(out["clash.md"], oid(5));
        assert_eq!(
            out[&format!("clash-{}.md", &oid(8).to_string()[..7])],
            oid(8)
        );
        assert!(out.contains_key("mine.md") && out.contains_key("yours.md"));
    }
}
