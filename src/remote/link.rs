//! This machine's link to a conference that runs on several machines: which slots (researchers,
//! and the chair's phases) it holds, and the three moves it makes against the shared remote.
//!
//! - **publish** — after every recorded event, on the run's publisher thread (outside the
//!   recorder's lock: researchers go on recording meanwhile), one atomic push: the event log
//!   (compare-and-swap from the remote's tip, this machine's new events replayed over other
//!   machines' when it moved), a renewed heartbeat for every lease held (so a machine whose
//!   lease was taken over publishes nothing more for it), the conference branches as the new
//!   state says, and this machine's own attempts chain and notes. The remote never holds an
//!   event whose attempt, branch or note is missing.
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

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use super::lease::{self, Expiry, Held, Leases};
use super::publish::{self, Refused};
use super::push::{push, Expect, Pushed, Update};
use crate::model::event::CHAIR;
use crate::model::state::{files, State};
use crate::store::cas::Backoff;
use crate::store::events::read_path;
use crate::store::{ConferenceRefs, NOTES_REF};

/// How many times a publication is tried (each try after a refusal or a failure).
const TRIES: u32 = 40;

/// The first wait after a publication failed; waits double from there (see [`Backoff`]).
const FIRST_RETRY: Duration = Duration::from_secs(2);

/// How long one publication keeps retrying a remote that fails before it gives up: its events
/// stay here and go out with the next publication.
const RETRY_CAP: Duration = Duration::from_secs(120);

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
    /// One of them is not one the conference could have recorded: why, naming its machine.
    Refused(String),
    /// A commit they name has not arrived yet (a fetch reads refs one by one, so it may see an
    /// event before the branch pushed with it): the next fetch brings it.
    NotHereYet(String),
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

    /// The events after `from` up to `to`, which another machine published, checked; refused
    /// with the reason (this machine stops: it cannot follow them, and no retry changes that).
    fn check_arrivals(&self, repo: &Repository, from: Oid, to: Oid) -> Result<()> {
        let Some(check) = self.arrivals.get() else {
            return Ok(());
        };
        match check(repo, from, to) {
            Ok(()) => Ok(()),
            Err(NotFollowed::NotHereYet(what)) => {
                bail!("waiting for {what} to arrive from {}", self.remote)
            }
            Err(NotFollowed::Refused(why)) => Err(Refused(format!(
                "{}: {why}. This machine follows nothing of it and stops; once that event is gone from {0} (its events ref put back at the event before it), `git conference join {0} {}` takes part again",
                self.remote, self.refs.name
            ))
            .into()),
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

    /// Publishes a new conference: its event log, branches, attempts and notes, create-only (a
    /// remote that has a conference of this name already refuses it).
    pub fn publish_new(&self, repo: &Repository) -> Result<()> {
        let tip = repo.refname_to_id(&self.refs.events())?;
        let state = state_at(repo, tip)?;
        let mut updates = vec![Update {
            name: self.refs.events(),
            new: Some(tip),
            expect: Expect::Absent,
        }];
        for (name, value) in branches_of(&self.refs, &state, None) {
            updates.push(Update {
                name,
                new: Some(value),
                expect: Expect::Absent,
            });
        }
        let mut inner = self.inner.lock().unwrap();
        updates.extend(self.own_refs(repo, &inner)?);
        match push(&self.dir, &self.remote, &updates)? {
            Pushed::Accepted => {
                self.pushed(&mut inner, &updates);
                Ok(())
            }
            Pushed::Rejected(_) => bail!(
                "{} already has a conference named `{}`: take part with `git conference join {} {}`, or start this one under another name",
                self.remote,
                self.refs.name,
                self.remote,
                self.refs.name
            ),
        }
    }

    /// Publishes every local event the remote does not have, moving the local log itself when
    /// they were replayed over other machines' events (for callers that hold the only writer of
    /// the log: the tests and the coordination bench; a run publishes with [`Link::publish_from`]
    /// on its publisher's thread).
    pub fn publish(&self, repo: &Repository) -> Result<Oid> {
        let direct = Direct { link: self, repo };
        self.publish_from(repo, &direct)
    }

    /// Publishes every event of `local`'s log the remote does not have (see the module's doc).
    /// Returns the event log's tip after it, which the local events ref then points at
    /// ([`LocalLog::settle`] moved it when this machine's events were replayed).
    ///
    /// Nothing moves here before the remote took the push: a push that fails (the remote out of
    /// reach, a hook or a permission refusing it) leaves the local log, branches and leases as
    /// they were, and is tried again with [`Backoff`], saying so on stderr, for up to
    /// [`RETRY_CAP`]; then the events wait for the next publication. Meanwhile no lease is renewed
    /// ([`Link::heartbeat`]): a machine that cannot publish lets its slots go to one that can.
    pub fn publish_from(&self, repo: &Repository, local: &dyn LocalLog) -> Result<Oid> {
        let mut races = Backoff::new(Duration::from_millis(10), Duration::from_secs(1), None);
        let mut failures = Backoff::new(FIRST_RETRY, Duration::from_secs(30), Some(RETRY_CAP));
        for _ in 0..TRIES {
            let failure = match self.try_publish(repo, local) {
                Ok(Some(tip)) => {
                    self.inner.lock().unwrap().failing = None;
                    return Ok(tip);
                }
                Ok(None) => {
                    std::thread::sleep(races.next_delay().unwrap_or_default());
                    continue;
                }
                Err(e) if e.is::<Refused>() => return Err(e),
                Err(e) => e,
            };
            let since = *self
                .inner
                .lock()
                .unwrap()
                .failing
                .get_or_insert_with(Instant::now);
            let Some(wait) = failures.next_delay() else {
                return Err(failure.context(format!(
                    "publishing to {} failed for {}s",
                    self.remote,
                    since.elapsed().as_secs()
                )));
            };
            crate::errln!(
                "git-conference: publishing to {} failed: {}; retrying in {}",
                self.remote,
                one_line(&failure),
                seconds(wait)
            );
            // A Ctrl-C meanwhile stops the wait: the events stay here for `join` to publish.
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if crate::exec::process::cancelled() {
                    return Err(failure);
                }
                std::thread::sleep(Duration::from_millis(50).min(wait));
            }
        }
        bail!(
            "{}: {} kept moving for {TRIES} tries; this machine publishes again with its next event",
            self.refs.events(),
            self.remote
        )
    }

    /// One try of [`Link::publish`]: Some(the new tip) when the remote took it, None when another
    /// machine moved a ref first (fetch and try again); the local refs move only in the first case.
    fn try_publish(&self, repo: &Repository, log: &dyn LocalLog) -> Result<Option<Oid>> {
        // Read before `inner` is locked: the log's writer may hold its lock while it waits for
        // `inner` (a sync).
        let local = log.tip()?;
        // Held across the fetch: a heartbeat renewing a lease in between would make the view's
        // value look like another machine's.
        let mut inner = self.inner.lock().unwrap();
        let view = self.fetch(repo)?;
        self.drop_lost(&mut inner, &view);
        let tip = self.rebased(repo, &inner, local, view.events)?;
        let state = state_at(repo, tip)?;
        let mut updates = vec![Update {
            name: self.refs.events(),
            new: Some(tip),
            expect: Expect::At(view.events),
        }];
        let renewed = self.renewals(repo, &inner)?;
        updates.extend(renewed.iter().map(|(_, update, _)| update.clone()));
        updates.extend(self.branch_updates(&state, &view, &inner)?);
        updates.extend(self.own_refs(repo, &inner)?);
        if tip == view.events {
            updates.remove(0);
        }
        match push(&self.dir, &self.remote, &updates)? {
            Pushed::Accepted => {
                self.pushed(&mut inner, &updates);
                for (slot, _, held) in renewed {
                    inner.held.insert(slot, held);
                }
                // Settling may wait for the recorder, which may be waiting for this lock.
                drop(inner);
                if tip == local {
                    return Ok(Some(tip));
                }
                log.settle(local, tip).map(Some)
            }
            Pushed::Rejected(_) => {
                // This machine's own refs are written by it alone: one the remote lost (deleted
                // there by hand) or holds elsewhere is pushed from what the remote holds now.
                self.refresh_own(&mut inner)?;
                Ok(None)
            }
        }
    }

    /// Moves the local event log over `tip`, which the remote took in place of its `from`
    /// (this machine's events replayed over other machines'): events recorded here after `from`
    /// meanwhile are replayed over `tip` in turn (those of slots this machine lost dropped), and
    /// the conference branches follow. Returns the local log's new tip. The caller keeps the
    /// log's writer out meanwhile ([`LocalLog::settle`]).
    pub fn settle(&self, repo: &Repository, from: Oid, tip: Oid) -> Result<Oid> {
        let now = repo.refname_to_id(&self.refs.events())?;
        if now == tip || repo.graph_descendant_of(now, tip)? {
            return Ok(now);
        }
        let new = if now == from {
            tip
        } else if repo.graph_descendant_of(now, from)? {
            let held: BTreeSet<String> = self.inner.lock().unwrap().held.keys().cloned().collect();
            publish::replay_since(repo, from, now, tip, |event| held.contains(event.slot()))?
        } else {
            bail!(
                "{} moved to {now} while this machine published it from {from}",
                self.refs.events()
            );
        };
        crate::store::cas::update(
            repo,
            &self.refs.events(),
            new,
            Some(now),
            "git conference: published over the shared remote's events",
        )?;
        self.follow_branches(repo, new)?;
        Ok(new)
    }

    /// Asks this machine's publisher for a publication (after every recorded event).
    pub fn request_publication(&self) {
        self.requests.state.lock().unwrap().asked = true;
        self.requests.changed.notify_all();
    }

    /// Says that a publisher takes requests from now on.
    pub fn publisher_started(&self) {
        let mut state = self.requests.state.lock().unwrap();
        state.running = true;
        state.stopping = false;
    }

    /// Asks the publisher for one last publication (of everything recorded so far), after
    /// which [`Link::take_request`] tells it to stop.
    pub fn stop_publisher(&self) {
        let mut state = self.requests.state.lock().unwrap();
        state.stopping = true;
        state.asked = true;
        self.requests.changed.notify_all();
    }

    /// Waits for a publication to be asked for and takes the request (the publisher is busy
    /// until [`Link::publication_done`]): true. False once the publisher is to stop and nothing
    /// is asked any more (it then no longer counts as running).
    pub fn take_request(&self) -> bool {
        let state = self.requests.state.lock().unwrap();
        let mut state = self
            .requests
            .changed
            .wait_while(state, |s| !s.asked && !s.stopping)
            .unwrap();
        if std::mem::take(&mut state.asked) {
            state.busy = true;
            return true;
        }
        state.running = false;
        self.requests.changed.notify_all();
        false
    }

    /// Ends what [`Link::take_request`] started.
    pub fn publication_done(&self) {
        self.requests.state.lock().unwrap().busy = false;
        self.requests.changed.notify_all();
    }

    /// Asks for a publication and waits up to `wait` until the publisher has done it (at once
    /// without a publisher). What is still unpublished then, [`Link::sync`] says.
    pub fn flush_publications(&self, wait: Duration) {
        let mut state = self.requests.state.lock().unwrap();
        if !state.running {
            return;
        }
        state.asked = true;
        self.requests.changed.notify_all();
        let _ = self
            .requests
            .changed
            .wait_timeout_while(state, wait, |s| s.running && (s.asked || s.busy))
            .unwrap();
    }

    /// Remembers why a publication was refused ([`Refused`]): the next [`Link::sync`] stops the
    /// run with it.
    pub fn refuse(&self, why: String) {
        *self.requests.refused.lock().unwrap() = Some(why);
    }

    /// Brings the local event log and branches up to the remote's when it moved on (another
    /// machine published). Returns the new tip when the local log moved; [`Unpublished`] when
    /// this machine has events the remote lacks (its publisher is asked to publish them), and
    /// [`Refused`] once a publication was refused for good.
    pub fn sync(&self, repo: &Repository) -> Result<Option<Oid>> {
        if let Some(why) = self.requests.refused.lock().unwrap().clone() {
            return Err(Refused(why).into());
        }
        let local = repo.refname_to_id(&self.refs.events())?;
        let mut inner = self.inner.lock().unwrap();
        let view = self.fetch(repo)?;
        self.drop_lost(&mut inner, &view);
        if view.events == local {
            // Everything recorded here is published: leases are renewed again.
            inner.failing = None;
            return Ok(None);
        }
        drop(inner);
        if !repo.graph_descendant_of(view.events, local)? {
            // This machine has events the remote lacks: its publisher replays them over the
            // remote's and moves the local log (the caller flushes publications before it
            // syncs). Until then this machine takes nothing over: its state may lack events
            // other machines published, of a researcher it would take (which it would run
            // again).
            self.request_publication();
            return Err(Unpublished(format!(
                "{}: events recorded here are not published to {} yet; this machine publishes them before it takes anything more",
                self.machine, self.remote
            ))
            .into());
        }
        self.check_arrivals(repo, local, view.events)?;
        crate::store::cas::update(
            repo,
            &self.refs.events(),
            view.events,
            Some(local),
            "git conference: the shared remote's events",
        )?;
        self.follow_branches(repo, view.events)?;
        Ok(Some(view.events))
    }

    /// Renews every lease this machine holds when nothing was published for a third of the
    /// lease, unless its publications fail (a lease is held by a machine that publishes); a
    /// lease found taken over is dropped (and reported by [`Link::take_lost`]).
    pub fn heartbeat(&self, repo: &Repository) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        let due = inner
            .last_push
            .is_none_or(|at| at.elapsed() >= self.lease / 3);
        if !due || inner.held.is_empty() || inner.failing.is_some() {
            return Ok(());
        }
        let renewed = self.renewals(repo, &inner)?;
        let updates: Vec<Update> = renewed.iter().map(|(_, u, _)| u.clone()).collect();
        match push(&self.dir, &self.remote, &updates)? {
            Pushed::Accepted => {
                inner.last_push = Some(Instant::now());
                for (slot, _, held) in renewed {
                    inner.held.insert(slot, held);
                }
            }
            Pushed::Rejected(_) => {
                let view = self.fetch(repo)?;
                self.drop_lost(&mut inner, &view);
            }
        }
        Ok(())
    }

    /// Claims what this machine may run among `researchers` and the chair: free slots it wants,
    /// its own leases a killed run of it left, and leases expired elsewhere. Returns the slots
    /// newly held, with the machine each was taken from (None: it was free).
    ///
    /// Reads the leases as the last [`Link::sync`] fetched them, without a round trip of its
    /// own: every claim is a compare-and-swap push, so a lease that moved since only makes that
    /// claim fail, and a later pass sees it.
    ///
    /// A researcher in `released` (one that ran, and whose machine gave it back: stopped with
    /// Ctrl-C) is taken by any machine once it has stayed free for longer than the lease plus
    /// the grace period, whatever `--researchers` said, so a round never waits for a machine that
    /// left.
    pub fn claim(
        &self,
        repo: &Repository,
        researchers: &[String],
        released: &BTreeSet<String>,
    ) -> Result<Vec<(String, Option<String>)>> {
        let mut inner = self.inner.lock().unwrap();
        let view = self.view(repo)?;
        let leases = self.leases(repo);
        let mut taken = Vec::new();
        let slots = std::iter::once(CHAIR.to_string()).chain(researchers.iter().cloned());
        for slot in slots {
            if inner.held.contains_key(&slot) || !self.has_room(&inner, &slot) {
                continue;
            }
            let got = match view.leases.get(&slot) {
                None if self.wants(&slot) => leases.claim(&slot)?.map(|h| (h, None)),
                None if released.contains(&slot) => {
                    let free = inner.expiry.entry(slot.clone()).or_default();
                    match free.check(Oid::zero(), self.lease, self.lease / 2) {
                        Some(_) => leases.claim(&slot)?.map(|h| (h, None)),
                        None => None,
                    }
                }
                None => None,
                Some(&value) => {
                    let holder = lease::holder(repo, value);
                    let expired = inner.expiry.entry(slot.clone()).or_default().check(
                        value,
                        self.lease,
                        self.lease / 2,
                    );
                    if holder.as_deref() == Some(self.machine.as_str()) || expired.is_some() {
                        leases.take_over(&slot, value)?.map(|h| (h, holder))
                    } else {
                        None
                    }
                }
            };
            if let Some((held, from)) = got {
                inner.held.insert(slot.clone(), held);
                inner.expiry.remove(&slot);
                taken.push((slot, from.filter(|m| *m != self.machine)));
            }
        }
        Ok(taken)
    }

    /// Another clone taking part under this machine's name (a copy of this clone, `cp -a`): a
    /// slot whose lease names this machine and is renewed while this one holds nothing. Two
    /// clones under one name would take each other's leases back and forth, so the caller
    /// refuses to run. Leases a killed run of this clone left are not renewed: they are waited
    /// on for half a lease and a second, then taken back by [`Link::claim`].
    pub fn running_elsewhere(&self, repo: &Repository) -> Result<Option<String>> {
        let own = |view: &View| -> BTreeMap<String, Oid> {
            view.leases
                .iter()
                .filter(|(_, value)| lease::holder(repo, **value).as_deref() == Some(&self.machine))
                .map(|(slot, value)| (slot.clone(), *value))
                .collect()
        };
        let fetched = || -> Result<View> {
            let _one_fetch_at_a_time = self.inner.lock().unwrap();
            self.fetch(repo)
        };
        let before = own(&fetched()?);
        if before.is_empty() {
            return Ok(None);
        }
        std::thread::sleep(self.lease / 2 + Duration::from_secs(1));
        let after = own(&fetched()?);
        Ok(before
            .into_iter()
            .find(|(slot, value)| after.get(slot).is_some_and(|now| now != value))
            .map(|(slot, _)| slot))
    }

    /// The machine holding each slot, as the last fetch saw the leases.
    pub fn holders(&self, repo: &Repository) -> BTreeMap<String, String> {
        let Ok(view) = self.view(repo) else {
            return BTreeMap::new();
        };
        view.leases
            .into_iter()
            .filter_map(|(slot, value)| Some((slot, lease::holder(repo, value)?)))
            .collect()
    }

    /// Gives back every lease held, so other machines may claim them at once.
    pub fn release_all(&self, repo: &Repository) {
        let mut inner = self.inner.lock().unwrap();
        let leases = self.leases(repo);
        for (_, held) in std::mem::take(&mut inner.held) {
            let _ = leases.release(held);
        }
    }

    fn leases<'a>(&'a self, repo: &'a Repository) -> Leases<'a> {
        Leases {
            repo,
            dir: &self.dir,
            remote: &self.remote,
            refs: self.refs.clone(),
            machine: &self.machine,
        }
    }

    fn wants(&self, slot: &str) -> bool {
        slot == CHAIR
            || self
                .wanted
                .researchers
                .as_ref()
                .is_none_or(|r| r.contains(slot))
    }

    fn has_room(&self, inner: &Inner, slot: &str) -> bool {
        let researchers = inner.held.keys().filter(|s| *s != CHAIR).count();
        slot == CHAIR || self.wanted.slots.is_none_or(|n| researchers < n)
    }

    /// Drops the leases the remote no longer holds for this machine.
    fn drop_lost(&self, inner: &mut Inner, view: &View) {
        let lost: Vec<String> = inner
            .held
            .iter()
            .filter(|(slot, held)| view.leases.get(*slot) != Some(&held.value))
            .map(|(slot, _)| slot.clone())
            .collect();
        for slot in lost {
            inner.held.remove(&slot);
            inner.lost.insert(slot);
        }
    }

    /// The local event log `local` made to continue the remote's `theirs`: as it is when it
    /// already does, else this machine's new events replayed over it, without those of slots it
    /// lost. Moves no ref: the local log follows once the remote took the result.
    fn rebased(&self, repo: &Repository, inner: &Inner, local: Oid, theirs: Oid) -> Result<Oid> {
        let continues = local == theirs || repo.graph_descendant_of(local, theirs)?;
        if continues && self.published_only_held(repo, inner, local, theirs)? {
            return Ok(local);
        }
        let Ok(base) = repo.merge_base(local, theirs) else {
            return Err(Refused(format!(
                "the event log of `{}` on {} shares no history with this machine's: it was replaced (a forced push?), so this machine stops; keep this clone's events with `git update-ref refs/conference-saved/{0}/events {}`",
                self.refs.name,
                self.remote,
                self.refs.events()
            ))
            .into());
        };
        self.check_arrivals(repo, base, theirs)?;
        publish::replay_onto(repo, local, theirs, |event| {
            inner.held.contains_key(event.slot())
        })
    }

    /// Whether every event between `theirs` and `local` belongs to a slot this machine holds.
    fn published_only_held(
        &self,
        repo: &Repository,
        inner: &Inner,
        local: Oid,
        theirs: Oid,
    ) -> Result<bool> {
        let mut at = local;
        while at != theirs {
            let commit = repo.find_commit(at)?;
            let logged =
                crate::store::events::parse_event_commit(at, commit.message().unwrap_or(""))?;
            if let Some(event) = crate::model::event::Event::parse(&logged.event) {
                if !inner.held.contains_key(event.slot()) {
                    return Ok(false);
                }
            }
            at = commit.parent_id(0)?;
        }
        Ok(true)
    }

    /// A new heartbeat for every lease held: (slot, the push's update, the lease once accepted).
    fn renewals(&self, repo: &Repository, inner: &Inner) -> Result<Vec<(String, Update, Held)>> {
        inner
            .held
            .iter()
            .map(|(slot, held)| {
                let beat = held.beat + 1;
                let value = lease::heartbeat(repo, slot, &self.machine, beat)?;
                let update = Update {
                    name: held.refname.clone(),
                    new: Some(value),
                    expect: Expect::At(held.value),
                };
                let renewed = Held {
                    value,
                    beat,
                    ..held.clone()
                };
                Ok((slot.clone(), update, renewed))
            })
            .collect()
    }

    /// The branches `state` moves on the remote: the researchers' this machine holds, and all
    /// of them with best when it holds the chair (which starts rounds and merges findings).
    fn branch_updates(&self, state: &State, view: &View, inner: &Inner) -> Result<Vec<Update>> {
        let chair = inner.held.contains_key(CHAIR);
        let held = |id: &str| chair || inner.held.contains_key(id);
        Ok(branches_of(&self.refs, state, Some(&held))
            .into_iter()
            .filter_map(|(name, value)| {
                let short = name.strip_prefix("refs/heads/")?;
                let theirs = view.heads.get(short).copied();
                (theirs != Some(value)).then(|| Update {
                    name,
                    new: Some(value),
                    expect: theirs.map_or(Expect::Absent, Expect::At),
                })
            })
            .collect())
    }

    /// This machine's attempts chain and notes, where they moved since pushed last.
    fn own_refs(&self, repo: &Repository, inner: &Inner) -> Result<Vec<Update>> {
        let pairs = [
            (
                self.refs.attempts(),
                self.refs.machine_attempts(&self.machine),
            ),
            (
                NOTES_REF.to_string(),
                self.refs.machine_notes(&self.machine),
            ),
        ];
        let mut updates = Vec::new();
        for (local, remote) in pairs {
            let Ok(value) = repo.refname_to_id(&local) else {
                continue;
            };
            let last = inner.pushed.get(&remote).copied();
            if last != Some(value) {
                updates.push(Update {
                    name: remote,
                    new: Some(value),
                    expect: last.map_or(Expect::Absent, Expect::At),
                });
            }
        }
        Ok(updates)
    }

    fn pushed(&self, inner: &mut Inner, updates: &[Update]) {
        inner.last_push = Some(Instant::now());
        for u in updates {
            if let Some(new) = u.new {
                inner.pushed.insert(u.name.clone(), new);
            }
        }
    }

    /// Moves the local conference branches to where the state at `tip` says.
    fn follow_branches(&self, repo: &Repository, tip: Oid) -> Result<()> {
        let state = state_at(repo, tip)?;
        for (name, value) in branches_of(&self.refs, &state, None) {
            if repo.refname_to_id(&name).ok() != Some(value) && repo.find_commit(value).is_ok() {
                repo.reference(
                    &name,
                    value,
                    true,
                    "git conference: the shared remote's state",
                )?;
            }
        }
        Ok(())
    }

    /// Fetches the remote's event log, leases and branches of this conference (a few refs,
    /// whatever the number of attempts) into this machine's view of them. Callers hold the
    /// lock on `inner`: one fetch at a time, and no lease renewed meanwhile.
    fn fetch(&self, repo: &Repository) -> Result<View> {
        let name = &self.refs.name;
        let seen = publish::tracking_ref(&self.remote, &self.refs);
        let base = seen.trim_end_matches("/events").to_string();
        let specs = [
            format!("+{}:{seen}", self.refs.events()),
            format!("+refs/conference/{name}/leases/*:refs/conference/{name}/leases/*"),
            format!("+refs/heads/conference/{name}/*:{base}/heads/*"),
        ];
        let mut argv = vec![
            "fetch",
            "-q",
            "--prune",
            "--no-tags",
            "--no-write-fetch-head",
            super::ONLY_THE_REFSPECS,
        ];
        argv.push(&self.remote);
        argv.extend(specs.iter().map(String::as_str));
        crate::git::git_remote(&self.dir, &argv)
            .with_context(|| format!("cannot reach {}", self.remote))?;
        self.view(repo)
    }

    /// The remote's refs as the last fetch brought them.
    fn view(&self, repo: &Repository) -> Result<View> {
        let name = &self.refs.name;
        let seen = publish::tracking_ref(&self.remote, &self.refs);
        let base = seen.trim_end_matches("/events");
        let events = repo.refname_to_id(&seen)?;
        let leases = refs_under(repo, &format!("refs/conference/{name}/leases/"))?;
        let heads = refs_under(repo, &format!("{base}/heads/"))?
            .into_iter()
            .map(|(branch, oid)| (format!("conference/{name}/{branch}"), oid))
            .collect();
        Ok(View {
            events,
            leases,
            heads,
        })
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
