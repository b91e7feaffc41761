//! This machine's link to a conference that runs on several machines: which slots (researchers,
//! and the chair's phases) it holds, and the three moves it makes against the shared remote.
//!
//! - **publish** — after every recorded event, on the run's publisher thread (outside the
//!   recorder's lock: researchers go on recording meanwhile), one atomic push: the event log
//!   (compare-and-swap from the remote's tip, this machine's new events replayed over other
//!   machines' when it moved), a renewed heartbeat for every lease held (so a machine whose
//!   lease was taken over publishes nothing more for it), the conference branches as the new
//!   state says; this machine's own attempts chain and notes go out just before, in a push of
//!   their own (a fetch reads the refs of a push one by one, the events ref first: see
//!   `push_own_refs`). The remote never holds an event whose attempt or note is missing, and a
//!   fetch that reads an event finds the commits it names.
//! - **sync** — between steps: fetch the conference's namespaces (the event log, the leases and
//!   the branches: a few refs, whatever the number of attempts) and move the local copies
//!   forward to the remote's.
//! - **claim** — take free slots (create-only), adopt this machine's own leases left by a
//!   killed run, and take over leases whose value stayed the same for longer than the lease plus
//!   a grace period, as this machine's monotonic clock measures it.
//!
//! A lease found taken at a publication drops this machine's unpublished events of that slot:
//! the new holder continues from the researcher's last published state, so nothing is counted
//! twice.

//!
//! The folder: the link's state and its accessors here; `publication` (publish), `sync` (sync,
//! claim, heartbeat).

mod publication;
mod sync;
mod void;

pub use void::Voiding;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use super::lease::{Expiry, Held};
use super::publish::Refused;
use crate::model::event::CHAIR;
use crate::model::state::{files, State};
use crate::store::events::read_path;
use crate::store::ConferenceRefs;

/// How many times a publication is tried (each try after a refusal or a failure).
const TRIES: u32 = 40;

/// The first wait after a publication failed; waits double from there (see [`Backoff`]).
const FIRST_RETRY: Duration = Duration::from_secs(2);

/// How long one publication keeps retrying a remote that fails before it gives up: its events
/// stay here and go out with the next publication.
const RETRY_CAP: Duration = Duration::from_secs(120);

/// How long an arriving event may name a commit that does not arrive before it is voided (at
/// least four leases).
const MISSING_FOR: Duration = Duration::from_secs(60);

/// Why a sync took nothing of the remote's: this machine's own events are not published yet
/// (its publisher is at it; the next sync tries again).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unpublished(pub String);

/// What this machine runs, as asked on the command line.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    /// Researchers it claims when free (None: any).
    pub researchers: Option<BTreeSet<String>>,
    /// At most this many researchers at once, takeovers included (None: no limit).
    pub slots: Option<usize>,
}

/// Checks the events another machine published, after one commit up to another (see
/// `engine::machines::arriving`).
pub type ArrivalCheck =
    Box<dyn Fn(&Repository, Oid, Oid) -> std::result::Result<(), NotFollowed> + Send + Sync>;

/// Why events that arrived are not followed.
#[derive(Debug)]
pub enum NotFollowed {
    /// They cannot be followed at all (the log is not one chain): why. This machine stops.
    Refused(String),
    /// One of them is not one the conference could have recorded, and no later event voids
    /// it: this machine voids it (see [`Refusal`]) and goes on.
    Voidable(Refusal),
    /// A commit one of them names is not here: an honest machine pushes its attempts chain
    /// before the event (see `Link::push_own_refs`), so this one's never comes, or comes late
    /// (a remote whose refs `git pack-refs` rewrites under a fetch). The refusal's `why` says
    /// which commit; the next fetches look again, and an event whose commit does not arrive
    /// within [`MISSING_FOR`] is voided.
    NotHereYet(Refusal),
}

/// An arriving event refused by the check: what an `event.voided` over it records.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The refused event.
    pub event: Oid,
    /// The event before it, whose state the conference keeps.
    pub after: Oid,
    /// Its first line as published.
    pub summary: String,
    /// The machine that published it, as it names itself.
    pub participant: String,
    /// Why, as a sentence naming the event and its machine.
    pub why: String,
}

/// This machine's part in one conference on one shared remote.
pub struct Link {
    pub remote: String,
    pub machine: String,
    dir: PathBuf,
    refs: ConferenceRefs,
    lease: Duration,
    wanted: Wanted,
    /// Checks every event that arrives before anything follows it (none: everything is taken).
    arrivals: std::sync::OnceLock<ArrivalCheck>,
    inner: Mutex<Inner>,
    /// The arriving event found naming a commit not here yet, and since when.
    missing: Mutex<Option<(Oid, Instant)>>,
    /// The next fetch tells the remote nothing of what this clone has (see [`Link::fetch`]).
    fetch_whole: std::sync::atomic::AtomicBool,
    /// Between the recorder and the publisher (see `engine::machines::publisher`).
    requests: Requests,
}

/// What the recorder asks of the publisher, and what the publisher leaves for the run.
#[derive(Default)]
struct Requests {
    state: Mutex<Publishing>,
    /// Signalled when a publication is asked for and when one ends.
    changed: Condvar,
    /// Why a publication was refused for good (see [`Refused`]).
    refused: Mutex<Option<String>>,
}

#[derive(Default)]
struct Publishing {
    /// A publication is asked for and not started yet.
    asked: bool,
    /// The publisher is publishing.
    busy: bool,
    /// A publisher takes requests (from [`Link::publisher_started`] until it has stopped).
    running: bool,
    /// The publisher is asked to stop after one last publication ([`Link::stop_publisher`]).
    stopping: bool,
}

/// The local side of a publication: the log's tip to publish, and moving the local log over
/// what the remote took instead ([`Link::settle`], with the log's writer kept out).
pub trait LocalLog {
    /// The tip of a log whose every event is whole: its notes and attempts are written.
    fn tip(&self) -> Result<Oid>;
    /// Moves the local log from `from` over `tip` (see [`Link::settle`]); returns its new tip.
    fn settle(&self, from: Oid, tip: Oid) -> Result<Oid>;
}

/// A log nothing else writes while it is published (tests, the coordination bench).
struct Direct<'a> {
    link: &'a Link,
    repo: &'a Repository,
}

impl LocalLog for Direct<'_> {
    fn tip(&self) -> Result<Oid> {
        Ok(self.repo.refname_to_id(&self.link.refs.events())?)
    }
    fn settle(&self, from: Oid, tip: Oid) -> Result<Oid> {
        self.link.settle(self.repo, from, tip)
    }
}

#[derive(Default)]
struct Inner {
    held: BTreeMap<String, Held>,
    /// Slots taken over by another machine since the last [`Link::take_lost`].
    lost: BTreeSet<String>,
    expiry: BTreeMap<String, Expiry>,
    /// This machine's own refs on the remote (attempts, notes) as it pushed them last.
    pushed: BTreeMap<String, Oid>,
    last_push: Option<Instant>,
    /// Since when publications fail (None: the last one went out). No lease is renewed then.
    failing: Option<Instant>,
}

/// The remote's conference refs, as one fetch just brought them.
struct View {
    events: Oid,
    leases: BTreeMap<String, Oid>,
    heads: BTreeMap<String, Oid>,
}

impl Link {
    /// A link from `repo` for conference `refs`. Git runs at the top of its working tree, where
    /// a remote given as a relative path means what it says.
    pub fn new(
        repo: &Repository,
        remote: &str,
        machine: &str,
        refs: ConferenceRefs,
        lease: Duration,
        wanted: Wanted,
    ) -> Result<Link> {
        let link = Link {
            remote: remote.to_string(),
            machine: machine.to_string(),
            dir: repo.workdir().unwrap_or(repo.commondir()).to_path_buf(),
            refs,
            lease,
            wanted,
            arrivals: Default::default(),
            inner: Mutex::new(Inner::default()),
            missing: Mutex::new(None),
            fetch_whole: Default::default(),
            requests: Requests::default(),
        };
        link.refresh_own(&mut link.inner.lock().unwrap())?;
        Ok(link)
    }

    /// Reads where the remote holds this machine's own refs (attempts, notes) now.
    fn refresh_own(&self, inner: &mut Inner) -> Result<()> {
        let own = [
            self.refs.machine_attempts(&self.machine),
            self.refs.machine_notes(&self.machine),
        ];
        let listed =
            crate::git::git_remote(&self.dir, &["ls-remote", &self.remote, &own[0], &own[1]])?;
        for name in &own {
            inner.pushed.remove(name);
        }
        for (name, id) in crate::git::listed_refs(&listed) {
            inner.pushed.insert(name.to_string(), id);
        }
        Ok(())
    }

    /// Checks every event that arrives from the remote with `check` before it is followed or
    /// published over.
    pub fn check_arrivals_with(&self, check: ArrivalCheck) {
        let _ = self.arrivals.set(check);
    }

    /// The events after `from` up to `to`, which another machine published, checked: an event
    /// the conference could not have recorded is voided ([`Voiding`]: try again, the next fetch
    /// brings the voiding event); a log that cannot be followed at all is refused with the
    /// reason (this machine stops: no retry changes that).
    fn check_arrivals(&self, repo: &Repository, from: Oid, to: Oid) -> Result<()> {
        let Some(check) = self.arrivals.get() else {
            return Ok(());
        };
        match check(repo, from, to) {
            Ok(()) => Ok(()),
            Err(NotFollowed::NotHereYet(refusal)) => {
                // A fetch brings only what the remote reckons this clone lacks, from the refs
                // this clone says it has: one whose objects are not all here (a clone copied
                // while it ran, objects deleted under it) hides the commit for ever.
                self.fetch_whole
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let waited = self.missing_for(&refusal);
                if waited > MISSING_FOR.max(self.lease * 4) {
                    let why = format!(
                        "{}, which has not arrived from {} in {}s",
                        refusal.why,
                        self.remote,
                        waited.as_secs()
                    );
                    return self.void(repo, &Refusal { why, ..refusal }, to);
                }
                bail!("waiting for {} to arrive from {}", refusal.why, self.remote)
            }
            Err(NotFollowed::Voidable(refusal)) => self.void(repo, &refusal, to),
            Err(NotFollowed::Refused(why)) => Err(Refused(format!(
                "{}: {why}. This machine follows nothing of it and stops; once that event is gone from {0} (its events ref put back at the event before it), `git conference join {0} {}` takes part again",
                self.remote, self.refs.name
            ))
            .into()),
        }
    }

    /// How long the event `refusal` names has been waited for, by this machine's clock (since
    /// the first time it was seen missing in a row).
    fn missing_for(&self, refusal: &Refusal) -> Duration {
        let mut missing = self.missing.lock().unwrap();
        match *missing {
            Some((event, since)) if event == refusal.event => since.elapsed(),
            _ => {
                *missing = Some((refusal.event, Instant::now()));
                Duration::ZERO
            }
        }
    }

    /// How long another machine waits, after this one fell silent, before taking its slots.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Whether this machine holds `slot` (a researcher's ID, or [`CHAIR`]).
    pub fn holds(&self, slot: &str) -> bool {
        self.inner.lock().unwrap().held.contains_key(slot)
    }

    /// The slots this machine holds.
    pub fn held(&self) -> Vec<String> {
        self.inner.lock().unwrap().held.keys().cloned().collect()
    }

    /// Slots another machine took over since the last call (to say so once).
    pub fn take_lost(&self) -> Vec<String> {
        std::mem::take(&mut self.inner.lock().unwrap().lost)
            .into_iter()
            .collect()
    }
}

/// Every ref under `prefix`: (the rest of its name, its target).
fn refs_under(repo: &Repository, prefix: &str) -> Result<BTreeMap<String, Oid>> {
    let mut out = BTreeMap::new();
    for r in repo.references_glob(&format!("{prefix}*"))? {
        let r = r?;
        if let (Some(name), Some(target)) = (r.name(), r.target()) {
            out.insert(name[prefix.len()..].to_string(), target);
        }
    }
    Ok(out)
}

/// The state stored at event commit `tip`.
fn state_at(repo: &Repository, tip: Oid) -> Result<State> {
    let tree = repo.find_commit(tip)?.tree_id();
    let bytes = read_path(repo, tree, files::STATE)?.context("an event without state.json")?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// The conference branches `state` places (full ref name, commit): each researcher's head (those
/// `only` accepts, when given) and best.
fn branches_of(
    refs: &ConferenceRefs,
    state: &State,
    only: Option<&dyn Fn(&str) -> bool>,
) -> Vec<(String, Oid)> {
    let mut out = Vec::new();
    for (id, r) in &state.researchers {
        if only.is_none_or(|f| f(id)) {
            out.push((refs.researcher(id), r.head.oid()));
        }
    }
    if only.is_none_or(|f| f(CHAIR)) {
        out.push((refs.best(), state.best.commit.oid()));
    }
    out
}

/// The first line of an error's chain, for a one-line message.
fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    text.lines().next().unwrap_or_default().to_string()
}

/// A wait as people say it: `2s`, `1.5s`.
fn seconds(wait: Duration) -> String {
    let tenths = (wait.as_millis() as f64 / 100.0).round() / 10.0;
    format!("{tenths}s")
}

#[cfg(test)]
mod tests;
