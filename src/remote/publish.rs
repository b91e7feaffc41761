//! Replaying this machine's events over the shared remote's, for [`super::link::Link`]'s
//! publication (its one path: issue #23 removed an older publish loop here that only a bench
//! used). The event log stays one chain, and the remote serialises it: a machine pushes its new
//! events by compare-and-swap from the tip it last saw there; when another machine got there
//! first, this machine fetches the remote's tip and replays its own new events on top of it —
//! each typed event applied by the reducer to the remote's state, each file it added appended
//! again — and tries again. Nothing is forced and no event is lost or doubled.
//!
//! Only events of the research phase may be replayed: researchers on several machines record
//! them at the same time, and each touches its own researcher's part of the state (and appends
//! to a JSON-lines file). The chair's phases (poster, review, transfer, round start) run on the
//! one machine holding the chair's lease, after every researcher of the round has finished, so
//! an honest machine's events are never concurrent with them; one found over another machine's
//! events (a participant's) is left out with what this machine recorded after it, and the chair
//! runs that phase again from the remote's state (see [`replay_since`]).

use anyhow::{anyhow, Context, Result};
use git2::{Oid, Repository};

/// Why this machine stops taking part: what the remote holds is not a conference this machine
/// can follow, and no retry changes that.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

use crate::model::event::{Event, EventLine};
use crate::model::state::{files, State};
use crate::store::events::{parse_event_commit, read_path, write_commit};
use crate::store::{ConferenceRefs, StateChange};

/// Where this machine keeps the remote's events tip as it last saw it.
pub fn tracking_ref(remote: &str, refs: &ConferenceRefs) -> String {
    let remote: String = remote
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}/events", refs.shared_remote_view(&remote))
}

/// What replaying this machine's events over the remote's made: the new tip, and the events
/// left out (each as its first line), oldest first.
#[derive(Debug)]
pub struct Replayed {
    pub tip: Oid,
    /// Events `keep` refused: of slots this machine lost (another machine took them over).
    pub lost: Vec<String>,
    /// A chair's event found over other machines' events, and every event of this machine
    /// after it (they follow from it): the chair's phase is run again from the remote's state.
    pub superseded: Vec<String>,
}

/// Replays the local events after the last one both chains share onto `onto`, oldest first,
/// those `keep` accepts (see [`replay_since`]).
pub fn replay_onto(
    repo: &Repository,
    local: Oid,
    onto: Oid,
    keep: impl Fn(&Event) -> bool,
) -> Result<Replayed> {
    let base = repo
        .merge_base(local, onto)
        .map_err(|_| anyhow!("the local event log and the remote's share no history"))?;
    // A push the remote took before this machine's log followed it (its run was killed in
    // between, and `join` took the slot back) holds some of these events already.
    let published = event_lines(repo, base, onto)?;
    replay_since(repo, base, local, onto, &published, keep)
}

/// Replays the local events after `base` (an ancestor of `local`) onto `onto`, oldest first,
/// those `keep` accepts and not in `published` (lines `onto` holds already). An event of the
/// chair's phases found over other machines' events (what a participant published meanwhile;
/// the chair's phases run on one machine at a time) is left out with every later one: a
/// participant cannot stop the chair, which runs that phase again from what the remote holds.
pub fn replay_since(
    repo: &Repository,
    base: Oid,
    local: Oid,
    onto: Oid,
    published: &[EventLine],
    keep: impl Fn(&Event) -> bool,
) -> Result<Replayed> {
    let mut mine = Vec::new();
    let mut at = local;
    while at != base {
        mine.push(at);
        at = repo.find_commit(at)?.parent_id(0)?;
    }
    let over_voids_only = only_voids(repo, base, onto)?;
    let mut out = Replayed {
        tip: onto,
        lost: Vec::new(),
        superseded: Vec::new(),
    };
    for commit in mine.into_iter().rev() {
        let c = repo.find_commit(commit)?;
        if published.contains(&parse_event_commit(commit, c.message().unwrap_or(""))?.event) {
            continue;
        }
        let summary = c.summary().unwrap_or_default().to_string();
        if !out.superseded.is_empty() {
            out.superseded.push(summary);
            continue;
        }
        match replay_one(repo, commit, out.tip, over_voids_only, &keep)? {
            Replay::Onto(tip) => out.tip = tip,
            Replay::NotKept => out.lost.push(summary),
            Replay::Superseded => out.superseded.push(summary),
        }
    }
    Ok(out)
}

/// The events of the chain `onto` after `base` (its ancestor), as their lines: a replayed event
/// keeps its line, every field as recorded.
fn event_lines(repo: &Repository, base: Oid, onto: Oid) -> Result<Vec<EventLine>> {
    let mut lines = Vec::new();
    let mut at = onto;
    while at != base {
        let commit = repo.find_commit(at)?;
        if let Ok(logged) = parse_event_commit(at, commit.message().unwrap_or("")) {
            lines.push(logged.event);
        }
        match commit.parent_id(0) {
            Ok(parent) => at = parent,
            Err(_) => break,
        }
    }
    Ok(lines)
}

/// What became of one replayed event.
enum Replay {
    /// Recorded again: the new tip.
    Onto(Oid),
    /// Left out: `keep` refused it.
    NotKept,
    /// Left out: a chair's event over other machines' events.
    Superseded,
}

/// Whether the events after `base` up to `onto` are only events another machine voided and the
/// `event.voided` that voids them: the state they leave differs from `base`'s by the refusals
/// recorded, which no event of the chair's phases depends on, so those may be replayed over them.
fn only_voids(repo: &Repository, base: Oid, onto: Oid) -> Result<bool> {
    let mut at = onto;
    while at != base {
        let commit = repo.find_commit(at)?;
        let voiding = parse_event_commit(at, commit.message().unwrap_or(""))
            .ok()
            .and_then(|l| crate::store::events::voided_after(&l.event));
        match voiding {
            Some(after) if after == base || repo.graph_descendant_of(after, base)? => at = after,
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// The event of `commit` recorded again on top of `parent`: its state applied by the reducer to
/// the parent's state, the files it changed changed again there. Left out when `keep` drops
/// it, and when it is an event of the chair's phases, unless `over_voids_only` (see
/// [`only_voids`]).
fn replay_one(
    repo: &Repository,
    commit: Oid,
    parent: Oid,
    over_voids_only: bool,
    keep: &impl Fn(&Event) -> bool,
) -> Result<Replay> {
    let c = repo.find_commit(commit)?;
    let logged = parse_event_commit(commit, c.message().unwrap_or(""))?;
    let event = Event::parse(&logged.event)
        .ok_or_else(|| anyhow!("event {commit} ({}) cannot be read", logged.event.event))?;
    if !keep(&event) {
        return Ok(Replay::NotKept);
    }
    if !event.may_interleave() && !over_voids_only {
        return Ok(Replay::Superseded);
    }
    let parent_tree = repo.find_commit(parent)?.tree_id();
    let mut state: State = serde_json::from_slice(
        &read_path(repo, parent_tree, files::STATE)?.context("the remote's state.json")?,
    )?;
    event.apply(&mut state);
    let (machine, running_s) = (logged.event.machine(), logged.event.running_s());
    state.count_event(&event, &logged.event.timestamp, machine, running_s);
    let mut changes = files_changed(repo, &c, parent_tree)?;
    changes.push(StateChange::Put(
        files::STATE.into(),
        serde_json::to_vec_pretty(&state)?,
    ));
    write_commit(repo, Some(parent), &logged.event, &logged.summary, &changes).map(Replay::Onto)
}

/// What `commit` changed in the state tree besides state.json, as changes to make on the tree
/// `onto`: a JSON-lines file gets the lines the event added; any other file its new content.
fn files_changed(repo: &Repository, commit: &git2::Commit, onto: Oid) -> Result<Vec<StateChange>> {
    let old = commit.parent(0)?.tree()?;
    let new = commit.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut changes = Vec::new();
    for delta in diff.deltas() {
        let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
            continue;
        };
        let path = path.to_string_lossy().into_owned();
        if path == files::STATE {
            continue;
        }
        if delta.new_file().id().is_zero() {
            changes.push(StateChange::Remove(path));
            continue;
        }
        let after = repo.find_blob(delta.new_file().id())?.content().to_vec();
        let before = match delta.old_file().id() {
            id if id.is_zero() => Vec::new(),
            id => repo.find_blob(id)?.content().to_vec(),
        };
        let bytes = match after.strip_prefix(before.as_slice()) {
            Some(added) if path.ends_with(".jsonl") => {
                let mut theirs = read_path(repo, onto, &path)?.unwrap_or_default();
                theirs.extend_from_slice(added);
                theirs
            }
            _ => after,
        };
        changes.push(StateChange::Put(path, bytes));
    }
    Ok(changes)
}
