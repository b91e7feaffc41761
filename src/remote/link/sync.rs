//! Sync and claim: the remote's namespaces fetched and followed, slots claimed create-only,
//! leases renewed by the heartbeat, taken over when expired, released at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use super::*;
use crate::model::event::CHAIR;
use crate::remote::lease::{self, Leases};
use crate::remote::publish::{self, Refused};
use crate::remote::push::{push, Pushed, Update};

impl Link {
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
        match self.check_arrivals(repo, local, view.events) {
            // Voided just now: the next sync follows the voiding event.
            Err(e) if e.is::<super::Voiding>() => return Ok(None),
            checked => checked?,
        }
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

    /// Takes back the leases a killed run of this machine left (they still name it, as the
    /// last fetch saw them), before that run's unpublished events go out: the events of a slot
    /// that is still this machine's are then published, not dropped as a lost slot's (only
    /// held slots' events are replayed). Returns the slots taken back.
    pub fn take_back_own(&self, repo: &Repository) -> Result<Vec<String>> {
        let mut inner = self.inner.lock().unwrap();
        let view = self.view(repo)?;
        let leases = self.leases(repo);
        let mut taken = Vec::new();
        for (slot, &value) in &view.leases {
            let own = lease::holder(repo, value).as_deref() == Some(self.machine.as_str());
            if !own || inner.held.contains_key(slot) || !self.has_room(&inner, slot) {
                continue;
            }
            if let Some(held) = leases.take_over(slot, value)? {
                inner.held.insert(slot.clone(), held);
                inner.expiry.remove(slot);
                taken.push(slot.clone());
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

    /// Whether the remote takes pushes from this clone, asked without changing anything (`git
    /// push --dry-run`, which still goes through the remote's access check): a machine that
    /// cannot publish takes part in nothing, so `join` says why at once instead of retrying.
    pub fn check_push_access(&self, repo: &Repository) -> Result<()> {
        let tip = repo.refname_to_id(&self.refs.events())?;
        let probe = format!("{tip}:refs/conference/{}/access-check", self.refs.name);
        let argv = [
            "push",
            "--dry-run",
            "--porcelain",
            "--no-verify",
            &self.remote,
            &probe,
        ];
        let out = crate::git::git_remote_output(&self.dir, &argv)?;
        if out.status.success() {
            return Ok(());
        }
        anyhow::bail!(
            "{} does not take pushes from this clone: {}",
            self.remote,
            crate::git::failure_reason(&out)
        )
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

    pub(super) fn leases<'a>(&'a self, repo: &'a Repository) -> Leases<'a> {
        Leases {
            repo,
            dir: &self.dir,
            remote: &self.remote,
            refs: self.refs.clone(),
            machine: &self.machine,
        }
    }

    pub(super) fn wants(&self, slot: &str) -> bool {
        slot == CHAIR
            || self
                .wanted
                .researchers
                .as_ref()
                .is_none_or(|r| r.contains(slot))
    }

    pub(super) fn has_room(&self, inner: &Inner, slot: &str) -> bool {
        let researchers = inner.held.keys().filter(|s| *s != CHAIR).count();
        slot == CHAIR || self.wanted.slots.is_none_or(|n| researchers < n)
    }

    /// Drops the leases the remote no longer holds for this machine.
    pub(super) fn drop_lost(&self, inner: &mut Inner, view: &View) {
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
}

impl Link {
    /// Moves the local conference branches to where the state at `tip` says.
    pub(super) fn follow_branches(&self, repo: &Repository, tip: Oid) -> Result<()> {
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
    pub(super) fn fetch(&self, repo: &Repository) -> Result<View> {
        let name = &self.refs.name;
        let seen = publish::tracking_ref(&self.remote, &self.refs);
        let base = seen.trim_end_matches("/events").to_string();
        let specs = [
            format!("+{}:{seen}", self.refs.events()),
            format!("+refs/conference/{name}/leases/*:refs/conference/{name}/leases/*"),
            format!("+refs/heads/conference/{name}/*:{base}/heads/*"),
            // Every machine's attempts: a head an arriving event moves must be one of them.
            format!("+refs/conference/{name}/machines/*:{base}/machines/*"),
        ];
        // After a commit an arriving event names did not come: everything the wanted refs
        // reach, whatever this clone holds (`noop` sends the remote no `have`).
        let whole = self
            .fetch_whole
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        let mut argv = if whole {
            vec!["-c", "fetch.negotiationAlgorithm=noop"]
        } else {
            Vec::new()
        };
        argv.extend([
            "fetch",
            "-q",
            "--prune",
            "--no-tags",
            "--no-write-fetch-head",
            crate::remote::ONLY_THE_REFSPECS,
        ]);
        argv.push(&self.remote);
        argv.extend(specs.iter().map(String::as_str));
        crate::git::git_remote(&self.dir, &argv)
            .with_context(|| format!("cannot reach {}", self.remote))?;
        self.view(repo)
    }

    /// The remote's refs as the last fetch brought them.
    pub(super) fn view(&self, repo: &Repository) -> Result<View> {
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
