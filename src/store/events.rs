//! The event log: an append-only chain of commits on `refs/conference/<name>/events`.
//!
//! Each event is one commit whose message is `<event>: <summary>` followed by the seed's JSON line
//! (`{"event", "timestamp", "payload"}`), and whose tree is the whole conference state after that
//! event (config, state.json, results, posters, reviews, report). Appending is the commit point of
//! every step of the conference: the ref moves by compare-and-swap from the tip we read, so a crash
//! before the swap leaves the previous state intact, and a crash after it has recorded the step.
//! `status` reads one tree (the tip's) instead of replaying the log.

use anyhow::{anyhow, Context, Result};
use git2::{build::TreeUpdateBuilder, FileMode, Oid, Repository, Sort};

use super::chunks;
use super::refs::ConferenceRefs;
use super::signature;

/// One event as the seed's JSON line has it: the stored form of a typed `model::Event`.
pub use crate::model::EventLine;

/// An event read back from the log, with the commit that records it.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    pub commit: Oid,
    pub summary: String,
    pub event: EventLine,
}

/// A change to the state tree made together with an event.
pub enum StateChange {
    Put(String, Vec<u8>),
    /// Adds a line (and its newline) to a JSON-lines file, created when missing.
    AppendLine(String, String),
    Remove(String),
}

/// Handle on one conference's event log and state tree.
pub struct EventLog {
    refs: ConferenceRefs,
    tip: Option<Oid>,
}

impl EventLog {
    /// Reads the current tip (None: the conference has not started).
    pub fn open(repo: &Repository, refs: ConferenceRefs) -> Result<Self> {
        let tip = match repo.find_reference(&refs.events()) {
            Ok(r) => Some(
                r.peel_to_commit()
                    .with_context(|| {
                        format!(
                    "{}: its commit is missing (git lost objects?); `git conference resume {}` \
                     puts it back from its reflog",
                    refs.events(),
                    refs.name
                )
                    })?
                    .id(),
            ),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        Ok(EventLog { refs, tip })
    }

    pub fn tip(&self) -> Option<Oid> {
        self.tip
    }

    pub fn refs(&self) -> &ConferenceRefs {
        &self.refs
    }

    /// The state tree at the tip.
    pub fn state_tree(&self, repo: &Repository) -> Result<Option<Oid>> {
        Ok(match self.tip {
            Some(tip) => Some(repo.find_commit(tip)?.tree_id()),
            None => None,
        })
    }

    /// A file of the current state (None when absent or before the first event).
    pub fn read(&self, repo: &Repository, path: &str) -> Result<Option<Vec<u8>>> {
        let Some(tree) = self.state_tree(repo)? else {
            return Ok(None);
        };
        read_path(repo, tree, path)
    }

    /// Records `event` with `changes` to the state tree; returns the event commit.
    pub fn append(
        &mut self,
        repo: &Repository,
        event: &EventLine,
        summary: &str,
        changes: &[StateChange],
    ) -> Result<Oid> {
        let commit = write_commit(repo, self.tip, event, summary, changes)?;
        crate::failpoint::hit("event.before-ref");
        cas_update(
            repo,
            &self.refs.events(),
            commit,
            self.tip,
            &subject(event, summary),
        )?;
        crate::failpoint::hit(&format!("event.{}", event.event));
        self.tip = Some(commit);
        Ok(commit)
    }

    /// Every event, oldest first.
    pub fn read_all(&self, repo: &Repository) -> Result<Vec<LoggedEvent>> {
        let mut out = Vec::new();
        self.walk(repo, |e| {
            out.push(e);
            true
        })?;
        out.reverse();
        Ok(out)
    }

    /// Walks events newest first until `visit` returns false. Events an `event.voided` voids
    /// are skipped unread (a participant's crafted event may not even parse): the walk goes on
    /// from the event the voiding one continues.
    pub fn walk(
        &self,
        repo: &Repository,
        mut visit: impl FnMut(LoggedEvent) -> bool,
    ) -> Result<()> {
        let Some(tip) = self.tip else { return Ok(()) };
        let mut walk = repo.revwalk()?;
        walk.push(tip)?;
        walk.simplify_first_parent()?;
        walk.set_sorting(Sort::NONE)?;
        let mut skip_to: Option<Oid> = None;
        for oid in walk {
            let oid = oid?;
            if skip_to.is_some_and(|after| after != oid) {
                continue;
            }
            let commit = repo.find_commit(oid)?;
            let logged = parse_event_commit(oid, commit.message_raw().unwrap_or(""))?;
            skip_to = voided_after(&logged.event);
            if !visit(logged) {
                break;
            }
        }
        Ok(())
    }
}

/// The event a voiding event continues (its `after`), when `event` is one.
pub fn voided_after(event: &EventLine) -> Option<Oid> {
    if event.event != crate::model::event::names::VOIDED {
        return None;
    }
    event.payload.get("after")?.as_str()?.parse().ok()
}

/// The first line of an event commit's message (also its reflog message).
fn subject(event: &EventLine, summary: &str) -> String {
    format!("{}: {}", event.event, summary.replace('\n', " "))
}

/// Writes the commit of `event` on top of `parent` (None: the first event), its state tree
/// being the parent's with `changes`; moves no ref.
pub fn write_commit(
    repo: &Repository,
    parent: Option<Oid>,
    event: &EventLine,
    summary: &str,
    changes: &[StateChange],
) -> Result<Oid> {
    write_commit_over(repo, parent, parent, event, summary, changes)
}

/// [`write_commit`] with the state tree of event `base` (an ancestor of `parent`) as the one
/// `changes` apply to: the voiding event's, whose state skips the events it voids.
pub fn write_commit_over(
    repo: &Repository,
    parent: Option<Oid>,
    base: Option<Oid>,
    event: &EventLine,
    summary: &str,
    changes: &[StateChange],
) -> Result<Oid> {
    let base_tree = match base {
        Some(p) => repo.find_commit(p)?.tree()?,
        None => repo.find_tree(repo.treebuilder(None)?.write()?)?,
    };
    let mut update = TreeUpdateBuilder::new();
    for change in changes {
        match change {
            StateChange::Put(path, bytes) => {
                update.upsert(path.as_str(), repo.blob(bytes)?, FileMode::Blob);
            }
            StateChange::AppendLine(path, line) => {
                let (target, mut bytes) = chunks::append_target(repo, &base_tree, path)?;
                bytes.extend_from_slice(line.as_bytes());
                bytes.push(b'\n');
                update.upsert(target.as_str(), repo.blob(&bytes)?, FileMode::Blob);
            }
            StateChange::Remove(path) => {
                update.remove(path.as_str());
            }
        }
    }
    let tree = repo.find_tree(update.create_updated(repo, &base_tree)?)?;
    let message = format!(
        "{}\n\n{}\n",
        subject(event, summary),
        serde_json::to_string(event)?
    );
    let sig = signature(repo);
    let parents: Vec<git2::Commit> = match parent {
        Some(p) => vec![repo.find_commit(p)?],
        None => vec![],
    };
    let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
    Ok(repo.commit(None, &sig, &sig, &message, &tree, &parent_refs)?)
}

/// The blobs that hold the records file `path` in the tree `tree`, in order (`store::chunks`).
pub fn record_blobs(repo: &Repository, tree: Oid, path: &str) -> Result<Vec<Oid>> {
    chunks::blobs(repo, &repo.find_tree(tree)?, path)
}

/// Parses an event commit's message back into the event.
pub fn parse_event_commit(commit: Oid, message: &str) -> Result<LoggedEvent> {
    let (first, body) = message.split_once('\n').unwrap_or((message, ""));
    let summary = first
        .split_once(": ")
        .map(|(_, s)| s.to_string())
        .unwrap_or_default();
    let json = body
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| anyhow!("event commit {commit} has no JSON payload"))?;
    let event: EventLine = serde_json::from_str(json)
        .with_context(|| format!("event commit {commit} has a malformed JSON payload"))?;
    Ok(LoggedEvent {
        commit,
        summary,
        event,
    })
}

/// Reads the blob at `path` inside `tree`; a records file stored in chunks (`store::chunks`) reads
/// as its chunks joined, so every reader sees one file whichever layout wrote it.
pub fn read_path(repo: &Repository, tree: Oid, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = repo.find_tree(tree)?;
    match tree.get_path(std::path::Path::new(path)) {
        Ok(entry) => {
            let blob = repo.find_blob(entry.id())?;
            Ok(Some(blob.content().to_vec()))
        }
        Err(e) if e.code() == git2::ErrorCode::NotFound => read_chunks(repo, &tree, path),
        Err(e) => Err(e.into()),
    }
}

/// The chunks of the records file `path` joined (None when it has none).
fn read_chunks(repo: &Repository, tree: &git2::Tree, path: &str) -> Result<Option<Vec<u8>>> {
    let ids = chunks::blobs(repo, tree, path)?;
    if ids.is_empty() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    for id in ids {
        bytes.extend_from_slice(repo.find_blob(id)?.content());
    }
    Ok(Some(bytes))
}

pub use super::cas::update as cas_update;
