//! Where an event is recorded. [`Recorder::record`] applies a typed event to the state (the
//! reducer, `protocol::reduce`), writes the event commit — the commit point, with the new
//! `state.json` and the files the step produced — and only then changes the in-memory state,
//! queues the notes the event implies and tells the observers (hooks are one).
//!
//! Notes and evaluation cache entries go out in batches: between iterations they wait until a
//! batch is old or big enough, any other event writes them at once. Every note is also in its
//! event's payload and every cache entry follows from an iteration event, so a kill before a
//! batch loses nothing (`recovery::reconcile` replays them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::sync::Arc;

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use crate::engine::agent::integrity;
use crate::hooks::Hooks;
use crate::model::state::files;
use crate::model::{Event, EventLine};
use crate::remote::link::Link;
use crate::store::{notes, EventLog, StateChange};

/// Pending notes are written at least this often while researchers iterate…
const NOTES_MAX_DELAY: Duration = Duration::from_secs(2);
/// …and at least every this many iterations; a notes commit says "noted through" at least every
/// this many events. Resume replays notes back to that mark: its cost does not grow with the log.
pub(in crate::engine) const NOTES_MAX_EVENTS: u32 = 128;

/// Told of every event once its commit is written.
pub trait Observer: Send {
    fn recorded(&mut self, conference: &str, line: &EventLine);
    /// Waits (bounded) for work still running, before the program exits.
    fn finish(&mut self) {}
}

impl Observer for Hooks {
    fn recorded(&mut self, conference: &str, line: &EventLine) {
        self.run(conference, line);
    }
    fn finish(&mut self) {
        Hooks::finish(self);
    }
}

/// The recording side of a conference, shared behind a lock by every task of a run.
pub struct Recorder {
    pub repo: Repository,
    pub log: EventLog,
    pub state: crate::model::state::State,
    observers: Vec<Box<dyn Observer>>,
    /// Note lines of recorded events not written yet: notes go out in batches (one notes commit
    /// for many attempts). `record` queues them with the event itself, so a batch written after
    /// an event holds every note of every event up to it.
    pub(in crate::engine) pending_notes: Vec<(Oid, String)>,
    notes_flushed: Instant,
    /// Researcher iterations recorded since the last batch.
    iterations_unflushed: u32,
    /// Events recorded since a notes commit last said "noted through" (see `flush_notes`).
    events_unmarked: u32,
    /// Evaluation cache entries (`evaluations/…`) not in the state tree yet: they join the next
    /// event that writes a batch, not each iteration's (four objects fewer per iteration). Within
    /// a run `Conference::evaluations` serves them; after a kill `reconcile` rebuilds them from
    /// the iteration events, which carry each result.
    pub(in crate::engine) pending_cache: BTreeMap<String, Vec<u8>>,
    /// On several machines: the shared remote every event is published to, as it is recorded.
    pub link: Option<Arc<Link>>,
    /// Events recorded by this recorder (see [`RECORDER_REOPEN_EVERY`]).
    recorded: u64,
}

/// Events after which the recorder's own handle is opened afresh (and the heap's free pages
/// handed back). What it reads are the state's and the notes' trees it has just written
/// (`store::protect` reads each new version to date its objects, and again as the parent of the
/// next one), dead once the next event is in; and those trees grow with the run (the notes'
/// fan-out, the state's folders): reopened every 256 events, its cache held 1.3 MB at its highest
/// around iteration 1,000 of one round and 3.8 MB around 9,000 (heaptrack), and the runner's
/// memory at 10,000 iterations was 22–23 MB (BENCHMARKS.md, "A never-stop run"). A
/// researcher's session keeps 256 (`research::SESSION_REOPEN_EVERY`): it reads the user's trees,
/// again at every iteration (capping libgit2's cache for the whole process instead made a
/// 100,000-file repository's bookkeeping twice as slow).
const RECORDER_REOPEN_EVERY: u64 = 32;

impl Recorder {
    pub fn new(
        repo: Repository,
        log: EventLog,
        state: crate::model::state::State,
        hooks: Hooks,
    ) -> Recorder {
        let mut state = state;
        // A conference from a release that did not record its running time: derived once, from
        // its events as they stand, before this run's time adds to it.
        state.recorded_running_seconds = Some(state.running_seconds());
        crate::clock::start_running();
        Recorder {
            repo,
            log,
            state,
            observers: vec![Box::new(hooks)],
            pending_notes: Vec::new(),
            notes_flushed: Instant::now(),
            iterations_unflushed: 0,
            events_unmarked: 0,
            pending_cache: Default::default(),
            link: None,
            recorded: 0,
        }
    }

    /// Records `event` with the state-tree `files` its step produced. The event commit is the
    /// commit point; the in-memory state changes only once it is written.
    pub fn record(
        &mut self,
        event: &Event,
        summary: &str,
        produced: Vec<StateChange>,
    ) -> Result<()> {
        let mut next = self.state.clone();
        event.apply(&mut next);
        let between_iterations = event.is_between_iterations();
        // On several machines every event goes out at once, with its notes and cache entries.
        let batch_due = !between_iterations
            || self.link.is_some()
            || self.notes_flushed.elapsed() >= NOTES_MAX_DELAY
            || self.iterations_unflushed + 1 >= NOTES_MAX_EVENTS;
        let mut changes = self.hold_back_cache_entries(produced, batch_due);
        let timestamp = crate::engine::now_iso();
        let machine = self.link.as_ref().map(|link| link.machine.as_str());
        // The seconds this run spent since its previous event, by its own monotonic clock: what
        // the time budget counts (never a difference of wall clocks).
        let (running_s, measured_at) = crate::clock::running_segment();
        next.count_event(event, &timestamp, machine, Some(running_s));
        changes.push(StateChange::Put(
            files::STATE.into(),
            serde_json::to_vec_pretty(&next)?,
        ));
        let mut line = event.line(timestamp);
        line.payload["running_s"] = running_s.into();
        let mut summary = summary.to_string();
        if let Some(link) = &self.link {
            line.payload["machine"] = link.machine.clone().into();
            summary = format!("{summary} [{}]", link.machine);
        }
        if event.is_note_checkpoint() {
            self.flush_notes()?;
        }
        // An agent may have moved the log's ref (`git update-ref`): this run is its only writer.
        integrity::events_ref_in_place(&self.repo, &self.log.refs().events(), self.log.tip());
        self.log.append(&self.repo, &line, &summary, &changes)?;
        crate::clock::end_running_segment(measured_at);
        self.state = next;
        self.events_unmarked += 1;
        if between_iterations {
            self.iterations_unflushed += 1;
        }
        self.pending_notes.extend(notes_of_line(&line));
        self.notify(&line);
        if batch_due {
            self.flush_notes()?;
        }
        // On several machines the run's publisher pushes it (`engine::machines::publisher`), outside
        // this lock.
        if let Some(link) = &self.link {
            link.request_publication();
        }
        self.reopen_now_and_then()
    }

    /// Opens the repository afresh every [`RECORDER_REOPEN_EVERY`] events, which drops its
    /// object cache, and hands the heap's free pages back: the live heap stays flat (heaptrack,
    /// iterations 1,000 to 10,000 of one round), but the allocator kept what each thread freed.
    fn reopen_now_and_then(&mut self) -> Result<()> {
        self.recorded += 1;
        if self.recorded.is_multiple_of(RECORDER_REOPEN_EVERY) {
            self.repo = Repository::open(self.repo.path())?;
            crate::os::release_free_heap();
        }
        Ok(())
    }

    /// Reads the event log and state again from the events ref (which publishing or syncing
    /// with the shared remote moved over other machines' events).
    pub fn reload(&mut self) -> Result<()> {
        self.log = EventLog::open(&self.repo, self.log.refs().clone())?;
        let bytes = self
            .log
            .read(&self.repo, files::STATE)?
            .context("the shared event log has no state.json")?;
        // Other machines wrote it: input like any other, checked as `Conference::open` does.
        self.state =
            crate::engine::record::stored::parse(&bytes, &self.state.name).map_err(|why| {
                anyhow::anyhow!(
                    "the shared remote's state of `{}` is not valid: {why}",
                    self.state.name
                )
            })?;
        Ok(())
    }

    /// `produced` less the evaluation cache entries, which wait for a batch; with the batch's
    /// entries when one is due.
    fn hold_back_cache_entries(
        &mut self,
        produced: Vec<StateChange>,
        batch_due: bool,
    ) -> Vec<StateChange> {
        let mut changes = Vec::with_capacity(produced.len() + 1);
        for change in produced {
            match change {
                StateChange::Put(path, bytes) if path.starts_with(files::EVAL_CACHE_DIR) => {
                    self.pending_cache.insert(path, bytes);
                }
                other => changes.push(other),
            }
        }
        if batch_due {
            let batch = std::mem::take(&mut self.pending_cache);
            changes.extend(batch.into_iter().map(|(p, b)| StateChange::Put(p, b)));
        }
        changes
    }

    /// Adds an observer (the tracker's sink) told of every event from now on.
    pub(in crate::engine) fn observe(&mut self, observer: Box<dyn Observer>) {
        self.observers.push(observer);
    }

    /// Tells every observer of an event just recorded.
    pub(in crate::engine) fn notify(&mut self, line: &EventLine) {
        for observer in &mut self.observers {
            observer.recorded(&self.state.name, line);
        }
    }

    /// Writes the pending notes in one notes commit. When no evaluation cache entry waits for a
    /// batch either, everything the events up to the log's tip imply is stored, and the commit
    /// says so ("noted through" the tip): `reconcile` replays notes back to there only. Without
    /// notes to write, a commit for that mark alone is written every `NOTES_MAX_EVENTS` events.
    pub(in crate::engine) fn flush_notes(&mut self) -> Result<()> {
        let through = self
            .log
            .tip()
            .filter(|_| self.pending_cache.is_empty() && self.events_unmarked > 0);
        let marker = through.map(|through| notes::Marker {
            name: &self.state.name,
            through,
            force: self.events_unmarked >= NOTES_MAX_EVENTS,
        });
        let wrote = notes::append_lines(&self.repo, &self.pending_notes, marker)?;
        if wrote && through.is_some() {
            self.events_unmarked = 0;
        }
        self.pending_notes.clear();
        self.notes_flushed = Instant::now();
        self.iterations_unflushed = 0;
        Ok(())
    }

    /// Waits (bounded) for observers still running (hooks), before the program exits.
    pub fn finish_hooks(&mut self) {
        for observer in &mut self.observers {
            observer.finish();
        }
    }
}

/// The note lines an event implies (its payload's `notes`): (snapshot commit, JSON line). One
/// reading for the events recorded now and for those of any earlier release replayed on resume.
pub fn notes_of_line(line: &EventLine) -> Vec<(Oid, String)> {
    let Some(notes) = line.payload.get("notes").and_then(|n| n.as_array()) else {
        return vec![];
    };
    notes
        .iter()
        .filter_map(|n| {
            let commit = n.get("commit")?.as_str()?;
            let commit = crate::model::CommitId::try_from(commit).ok()?;
            Some((commit.oid(), n.to_string()))
        })
        .collect()
}
