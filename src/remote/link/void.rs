//! Voiding: an event another machine published that the conference could not have recorded
//! (refused by the check of arriving events) is not fatal. The first honest machine that
//! refuses it publishes an `event.voided` over the remote's log, whose state is the state
//! before the refused event with the refusal recorded; every machine checks the refusal itself
//! before it follows the voiding event, so one participant cannot stop a conference.

use anyhow::Result;
use git2::{Oid, Repository};

use super::{state_at, Link, Refusal};
use crate::model::event::{Event, Voided};
use crate::model::state::files;
use crate::remote::push::{push, Expect, Pushed, Update};
use crate::store::events::write_commit_over;
use crate::store::StateChange;

/// This machine refused an arriving event and published (or another machine did first) the
/// event that voids it: fetch again and follow it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Voiding(pub String);

impl Link {
    /// Publishes an `event.voided` over `tip` (the remote's log, whose events after
    /// `refusal.after` are voided) in one compare-and-swap push; says so. Always returns
    /// [`Voiding`]: the caller fetches again and follows the remote's log, which voids it now
    /// (or another machine's voiding event, when one was pushed first).
    pub(super) fn void(&self, repo: &Repository, refusal: &Refusal, tip: Oid) -> Result<()> {
        let commit = self.voiding_commit(repo, refusal, tip)?;
        let update = Update {
            name: self.refs.events(),
            new: Some(commit),
            expect: Expect::At(tip),
        };
        let short = crate::model::short_oid(refusal.event);
        if push(&self.dir, &self.remote, &[update])? == Pushed::Accepted {
            crate::errln!(
                "git-conference: {}: voided event {short} of machine `{}` on {}: {}. Every machine skips it; the conference goes on",
                self.machine,
                refusal.participant,
                self.remote,
                refusal.why
            );
        }
        Err(Voiding(format!(
            "event {short} of machine `{}` is voided; following {} again",
            refusal.participant, self.remote
        ))
        .into())
    }

    /// The voiding event's commit: on `tip`, with the state of `refusal.after` and the refusal
    /// recorded (what every machine's check of it recomputes).
    fn voiding_commit(&self, repo: &Repository, refusal: &Refusal, tip: Oid) -> Result<Oid> {
        let event = Event::Voided(Voided {
            after: refusal.after.into(),
            event: refusal.event.into(),
            summary: refusal.summary.clone(),
            participant: refusal.participant.clone(),
            reason: refusal.why.clone(),
        });
        let timestamp = crate::clock::now_iso();
        let mut state = state_at(repo, refusal.after)?;
        event.apply(&mut state);
        state.count_event(&event, &timestamp, Some(&self.machine), None);
        let mut line = event.line(timestamp);
        line.payload["machine"] = self.machine.clone().into();
        let summary = format!(
            "event {} of {} refused [{}]",
            crate::model::short_oid(refusal.event),
            refusal.participant,
            self.machine
        );
        let changes = [StateChange::Put(
            files::STATE.into(),
            serde_json::to_vec_pretty(&state)?,
        )];
        write_commit_over(
            repo,
            Some(tip),
            Some(refusal.after),
            &line,
            &summary,
            &changes,
        )
    }
}
