//! The publication: this machine's new events pushed in one atomic compare-and-swap with its
//! lease renewals, the branches the state names and its own attempts and notes; replayed over
//! the remote's events when the remote moved; and the publisher thread's requests.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use git2::{Oid, Repository};

use super::*;
use crate::model::event::CHAIR;
use crate::model::state::State;
use crate::remote::lease::{self, Held};
use crate::remote::publish::{self, Refused, Replayed};
use crate::remote::push::{push, Expect, Pushed, Update};
use crate::store::cas::Backoff;
use crate::store::NOTES_REF;

impl Link {
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
    pub(super) fn try_publish(&self, repo: &Repository, log: &dyn LocalLog) -> Result<Option<Oid>> {
        // Read before `inner` is locked: the log's writer may hold its lock while it waits for
        // `inner` (a sync).
        let local = log.tip()?;
        // Held across the fetch: a heartbeat renewing a lease in between would make the view's
        // value look like another machine's.
        let mut inner = self.inner.lock().unwrap();
        let view = self.fetch(repo)?;
        self.drop_lost(&mut inner, &view);
        let replayed = match self.rebased(repo, &inner, local, view.events) {
            // Voided just now: the next try replays this machine's events over the voiding one.
            Err(e) if e.is::<super::Voiding>() => return Ok(None),
            rebased => rebased?,
        };
        let tip = replayed.tip;
        let state = state_at(repo, tip)?;
        if !self.push_own_refs(repo, &mut inner)? {
            return Ok(None);
        }
        let mut updates = vec![Update {
            name: self.refs.events(),
            new: Some(tip),
            expect: Expect::At(view.events),
        }];
        let renewed = self.renewals(repo, &inner)?;
        updates.extend(renewed.iter().map(|(_, update, _)| update.clone()));
        updates.extend(self.branch_updates(&state, &view, &inner)?);
        if tip == view.events {
            updates.remove(0);
        }
        // The crash tests' points: a publication of events, before and after the remote took it.
        let with_events = tip != view.events;
        if with_events {
            crate::failpoint::hit("publish.events-before-push");
        }
        match push(&self.dir, &self.remote, &updates)? {
            Pushed::Accepted => {
                if with_events {
                    crate::failpoint::hit("publish.events-pushed");
                }
                self.pushed(&mut inner, &updates);
                for (slot, _, held) in renewed {
                    inner.held.insert(slot, held);
                }
                self.say_dropped(&replayed);
                // Settling may wait for the recorder, which may be waiting for this lock.
                drop(inner);
                if tip == local {
                    return Ok(Some(tip));
                }
                log.settle(local, tip).map(Some)
            }
            Pushed::Rejected(_) => Ok(None),
        }
    }

    /// Pushes this machine's attempts chain and notes where they moved, on their own, before
    /// the event that names their commits. A remote's ref transaction renames its refs one at a
    /// time, in the order of the push's commands (the refs it has, sorted: the events ref before
    /// `machines/*`), and a fetch reads them in that same order: in one push, a fetch in between
    /// would read the new event and the old attempts chain, without the commit the event names,
    /// and that machine would wait for it. Pushed first, they are on the remote before any
    /// event that needs them. False: the remote holds them elsewhere (deleted there by hand);
    /// read again, the next try pushes from there. They are written by this machine alone.
    fn push_own_refs(&self, repo: &Repository, inner: &mut Inner) -> Result<bool> {
        let own = self.own_refs(repo, inner)?;
        match push(&self.dir, &self.remote, &own)? {
            Pushed::Accepted => {
                self.remember(inner, &own);
                Ok(true)
            }
            Pushed::Rejected(_) => {
                self.refresh_own(inner)?;
                Ok(false)
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
        // `from` first: when the remote took none of this machine's events (all of slots it
        // lost), `tip` is an ancestor of `from`, and a log still at `from` is not settled.
        let new = if now == from {
            tip
        } else if repo.graph_descendant_of(now, from)? {
            let held: BTreeSet<String> = self.inner.lock().unwrap().held.keys().cloned().collect();
            // Recorded after `from` was pushed: none of them is on the remote.
            let replayed = publish::replay_since(repo, from, now, tip, &[], |event| {
                held.contains(event.slot())
            })?;
            self.say_dropped(&replayed);
            replayed.tip
        } else if now == tip || repo.graph_descendant_of(now, tip)? {
            return Ok(now);
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
}

impl Link {
    /// The local event log `local` made to continue the remote's `theirs`: as it is when it
    /// already does, else this machine's new events replayed over it, without those of slots it
    /// lost (and a chair's event over other machines', with what follows it: see
    /// `publish::replay_since`). Moves no ref: the local log follows once the remote took it.
    pub(super) fn rebased(
        &self,
        repo: &Repository,
        inner: &Inner,
        local: Oid,
        theirs: Oid,
    ) -> Result<Replayed> {
        let continues = local == theirs || repo.graph_descendant_of(local, theirs)?;
        if continues && self.published_only_held(repo, inner, local, theirs)? {
            return Ok(Replayed {
                tip: local,
                lost: Vec::new(),
                superseded: Vec::new(),
            });
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
    pub(super) fn published_only_held(
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

    /// Says which unpublished events a publication the remote took left out: of slots taken
    /// over while this machine could not publish (the machine that took each goes on from its
    /// last published state), and the chair's phases found over other machines' events (this
    /// machine runs them again from the remote's state).
    fn say_dropped(&self, replayed: &Replayed) {
        let reasons = [
            (&replayed.lost, "of slots another machine took over while this one could not publish (that machine goes on from what was published)"),
            (&replayed.superseded, "of the chair's phases, found over events other machines published meanwhile (this machine runs that phase again from what was published)"),
        ];
        for (dropped, why) in reasons {
            if !dropped.is_empty() {
                crate::errln!(
                    "git-conference: {}: dropped {} unpublished event(s) {why} on {}: {}",
                    self.machine,
                    dropped.len(),
                    self.remote,
                    dropped.join("; ")
                );
            }
        }
    }

    /// A new heartbeat for every lease held: (slot, the push's update, the lease once accepted).
    pub(super) fn renewals(
        &self,
        repo: &Repository,
        inner: &Inner,
    ) -> Result<Vec<(String, Update, Held)>> {
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
    pub(super) fn branch_updates(
        &self,
        state: &State,
        view: &View,
        inner: &Inner,
    ) -> Result<Vec<Update>> {
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
    pub(super) fn own_refs(&self, repo: &Repository, inner: &Inner) -> Result<Vec<Update>> {
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

    /// Records a push the remote took: its leases renewed now, its refs where it put them.
    pub(super) fn pushed(&self, inner: &mut Inner, updates: &[Update]) {
        inner.last_push = Some(Instant::now());
        self.remember(inner, updates);
    }

    /// Records where a push the remote took put this machine's own refs.
    fn remember(&self, inner: &mut Inner, updates: &[Update]) {
        for u in updates {
            if let Some(new) = u.new {
                inner.pushed.insert(u.name.clone(), new);
            }
        }
    }
}
