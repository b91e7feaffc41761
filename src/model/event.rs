//! Every event a conference records, typed: one variant per event, its payload's fields, its
//! name, and the notes it implies. A new event is added here, and the compiler then finds the
//! reducer (`protocol::reduce`) and every `match` that must handle it.
//!
//! The stored form does not change: an event is the seed's JSON line `{"event", "timestamp",
//! "payload"}` ([`EventLine`]), and each variant's payload serialises to the same object, key for
//! key, that earlier releases wrote (payload keys are sorted, as `serde_json` maps keep them).
//! A few variants carry what their reducer needs beyond the payload (`#[serde(skip)]` fields):
//! the state is stored whole with every event, so it is never rebuilt from payloads alone.
//!
//! Readers of old logs keep reading [`EventLine`]s: a log may hold events, or fields, that a
//! release no longer writes; [`Event::parse`] types the ones it knows.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::talk::{Asked, Waiting};
use super::{CommitId, FinalStatus, PickResult, Tokens, Usage, Verdict, Word};

/// Fields the recorder adds to every payload, whatever the event: the machine that recorded it
/// (on several machines) and the seconds its process ran since its previous event (the time
/// budget's running time). Optional on read; no typed event has them.
pub const RECORDER_FIELDS: [&str; 2] = ["machine", "running_s"];

/// One event as the seed's JSON line has it (the stored form of every [`Event`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventLine {
    pub event: String,
    pub timestamp: String,
    pub payload: Value,
}

impl EventLine {
    /// The machine that recorded it ([`RECORDER_FIELDS`]; none on one machine).
    pub fn machine(&self) -> Option<&str> {
        self.payload
            .get(RECORDER_FIELDS[0])
            .and_then(|m| m.as_str())
    }

    /// The seconds its process ran since its previous event ([`RECORDER_FIELDS`]; none in events
    /// of earlier releases).
    pub fn running_s(&self) -> Option<f64> {
        self.payload
            .get(RECORDER_FIELDS[1])
            .and_then(|s| s.as_f64())
    }
}

/// A note on a snapshot commit (`refs/notes/conference`, one JSON object per line). Notes of
/// different events, and of different releases, carry different fields; readers take the ones
/// they know, so a note stays an open JSON object with a commit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct Note(pub Value);

impl Note {
    /// The note with an attempt's usage (`tokens`, and `cost_usd` when reported), as the
    /// iteration event's payload has it too.
    pub fn with_usage(mut self, usage: Option<Usage>) -> Note {
        if let (Some(u), Some(map)) = (usage, self.0.as_object_mut()) {
            map.insert("tokens".into(), serde_json::json!(Tokens::of(u)));
            if let Some(cost) = u.cost_usd {
                map.insert("cost_usd".into(), serde_json::json!(cost));
            }
        }
        self
    }
}

/// What a conference records, one variant per event name.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Started(Started),
    BaselineMeasured(BaselineMeasured),
    Rebased(Rebased),
    ConfigChanged(ConfigChanged),
    RoundStarted(RoundStarted),
    SetupFailed(SetupFailed),
    Iteration(Iteration),
    Stuck(Stuck),
    AttemptInterrupted(AttemptInterrupted),
    BranchSetAside(BranchSetAside),
    Finished(Finished),
    PosterSession(PosterSession),
    PeerReview(PeerReview),
    PhaseStarted(PhaseStarted),
    TransferPick(TransferPick),
    RoundCompleted(RoundCompleted),
    Paused(Paused),
    Stopped(Stopped),
    Continued(Continued),
    Resumed(Resumed),
    Completed(Completed),
    Guidance(Guidance),
    Answered(Answered),
    StopRequested(StopRequested),
    Approved(Approved),
    KnowledgeBriefed(KnowledgeBriefed),
    Imported(Imported),
    Voided(Voided),
}

/// Every event name, as stored.
pub mod names {
    pub const STARTED: &str = "conference.started";
    pub const BASELINE_MEASURED: &str = "baseline.measured";
    pub const REBASED: &str = "conference.rebased";
    pub const CONFIG_CHANGED: &str = "conference.config_changed";
    pub const ROUND_STARTED: &str = "round.started";
    pub const SETUP_FAILED: &str = "researcher.setup_failed";
    pub const ITERATION: &str = "researcher.iteration";
    pub const STUCK: &str = "researcher.stuck";
    pub const ATTEMPT_INTERRUPTED: &str = "attempt.interrupted";
    pub const BRANCH_SET_ASIDE: &str = "branch.set_aside";
    pub const FINISHED: &str = "researcher.finished";
    pub const POSTER_SESSION: &str = "round.poster_session";
    pub const PEER_REVIEW: &str = "round.peer_review";
    pub const PHASE_STARTED: &str = "round.phase_started";
    pub const TRANSFER_PICK: &str = "transfer.pick";
    pub const ROUND_COMPLETED: &str = "round.completed";
    pub const PAUSED: &str = "conference.paused";
    pub const CONVERGED: &str = "conference.converged";
    pub const STALLED: &str = "conference.stalled";
    pub const BUDGET_STOP: &str = "conference.budget_stop";
    pub const CONTINUED: &str = "conference.continued";
    pub const RESUMED: &str = "conference.resumed";
    pub const COMPLETED: &str = "conference.completed";
    pub const GUIDANCE: &str = "conference.guidance";
    pub const ANSWERED: &str = "question.answered";
    pub const STOP_REQUESTED: &str = "conference.stop_requested";
    pub const APPROVED: &str = "transfer.approved";
    pub const KNOWLEDGE_BRIEFED: &str = "knowledge.briefed";
    pub const IMPORTED: &str = "conference.imported";
    pub const VOIDED: &str = "event.voided";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub researchers: usize,
    pub mode: Value,
    pub goal: String,
    pub config_summary: String,
    pub base: CommitId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineMeasured {
    pub metric_value: f64,
    pub runs: Vec<f64>,
    pub commit: CommitId,
    pub sub_metrics: BTreeMap<String, f64>,
    pub noise_runs: u32,
    pub noise_sd: Option<f64>,
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rebased {
    pub from: CommitId,
    pub to: CommitId,
}

/// One setting an edited conference.md changed, as `config.changed` lists it. Each field has a
/// default so that an entry an earlier or later release wrote with a field less still reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SettingChanged {
    /// The section's name (`Evaluation`, `Rules`, ...).
    pub section: String,
    /// The key as the template spells it, or `text` for a section's prose.
    pub key: String,
    pub old: String,
    pub new: String,
    /// The line in the new copy (0 when the setting was removed).
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigChanged {
    pub changes: Vec<SettingChanged>,
    pub file: String,
    pub round: u32,
    pub diff: String,
    /// The evaluation settings' hash under the new config (keys the evaluation cache).
    #[serde(skip)]
    pub eval_settings: String,
    /// The noise settings changed: the noisy-evaluation warning was about the old ones.
    #[serde(skip)]
    pub noise_settings_changed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundStarted {
    pub round: u32,
    pub researcher_states: Vec<String>,
    pub endgame: bool,
    pub best_metric: Option<f64>,
    pub best_commit: CommitId,
    pub heads: BTreeMap<String, CommitId>,
    /// With branching on: what the round start does to each researcher's tree (absent with
    /// branching off, and in events of earlier releases).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub branches: BTreeMap<String, super::tree::RoundBranches>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupFailed {
    pub researcher: String,
    pub round: u32,
    pub command: String,
    pub status: String,
    pub reason: String,
    pub output_tail: String,
    pub log: PathBuf,
}

/// `researcher.iteration`: the commit point of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    pub researcher: String,
    pub round: u32,
    pub iteration: u32,
    pub metric_value: Option<f64>,
    pub delta: Option<String>,
    /// The verdict: a word a newer release added reads as `Other` (counted as an attempt that was
    /// not kept), never as an unreadable event.
    pub status: Word<Verdict>,
    /// The attempt's commit (None when nothing was committed).
    pub commit: Option<CommitId>,
    pub tree: String,
    pub description: String,
    pub reason: Option<String>,
    pub sub_metrics: BTreeMap<String, f64>,
    /// Whether the attempt's tree was measured (an agent failure is not).
    pub evaluated: bool,
    pub notes: Vec<Note>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Seconds the agent ran, and the evaluation (absent in events of earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_s: Option<f64>,
    /// The questions its note asked (`QUESTION: …`); the reducer numbers them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Asked>,
    /// Where the evaluation ran (absent in events of earlier releases and unmeasured attempts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Box<super::Placement>>,
    /// With branching on: what the attempt did to its researcher's tree (absent with branching
    /// off, and in events of earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<Box<super::tree::TreeStep>>,
    /// With `Parameter sweep: on`, an attempt that swept a literal (each value's commit and
    /// metric, and the one that is the attempt), or the warning of a `SWEEP:` line that could
    /// not be followed (absent otherwise, and in earlier events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Box<super::sweep::SweepStep>>,
}

impl Iteration {
    /// What the attempt's agent run used, when it reported it.
    pub fn usage(&self) -> Option<Usage> {
        self.tokens.map(|t| Usage {
            input: t.input,
            output: t.output,
            cost_usd: self.cost_usd,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stuck {
    pub researcher: String,
    pub round: u32,
    pub stuck_level: u8,
    pub consecutive_non_improving: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptInterrupted {
    pub researcher: String,
    pub round: u32,
    pub commit: CommitId,
    pub tree: String,
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchSetAside {
    pub branch: String,
    pub researcher: Option<String>,
    pub round: u32,
    pub commit: CommitId,
    pub expected: CommitId,
    pub subject: String,
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    pub researcher: String,
    pub round: u32,
    pub reason: String,
    pub iterations: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PosterSession {
    pub round: u32,
    pub summary: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerReview {
    pub round: u32,
    pub validated_count: usize,
    pub challenged_count: usize,
    pub overturned_count: usize,
    pub findings: Value,
    pub conflicts: Value,
    pub notes: Vec<Note>,
    /// The warning that the evaluation is too noisy for the findings, when it is.
    #[serde(skip)]
    pub noisy_evaluation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferPick {
    pub round: u32,
    pub researcher: String,
    pub finding: CommitId,
    /// The commit the pick made on top of best (None when nothing was applied).
    pub commit: Option<CommitId>,
    pub result: PickResult,
    pub metric: Option<f64>,
    pub conflicts: Vec<String>,
    pub reason: String,
    pub notes: Vec<Note>,
}

/// The streak counters the stop rules read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streaks {
    /// Consecutive rounds without progress beyond the noise.
    pub plateau_rounds: u32,
    /// Consecutive rounds in which every researcher was stalled.
    pub stalled_rounds: u32,
    /// Consecutive rounds with every qualitative score high.
    pub high_score_rounds: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundCompleted {
    pub round: u32,
    pub best_metric: Option<f64>,
    pub best_researcher: Option<String>,
    pub best_commit: CommitId,
    pub converged: bool,
    pub shared_knowledge_added: Vec<String>,
    /// The stop rules' streaks once this round counts.
    #[serde(skip)]
    pub streaks: Streaks,
}

/// A shared phase that measures (peer review, knowledge transfer) begins: what it measures, so
/// a terminal and `log --follow` are not silent while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseStarted {
    pub round: u32,
    /// `peer_review` or `knowledge_transfer`.
    pub phase: String,
    pub measuring: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paused {
    pub round: u32,
    pub pause_every: Option<u32>,
    /// What the pause waits for, when it is not `pause_every`'s (a stop asked for, a person's
    /// decision in human-in-the-loop mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<Waiting>,
}

/// `conference.converged`, `conference.stalled` or `conference.budget_stop`: the stop rules
/// ended the conference; synthesis follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    pub final_best_metric: Option<f64>,
    pub round_count: u32,
    /// The stop rule's token (`max_rounds`, `plateau`, …).
    pub reason: String,
    pub detail: String,
    pub status: FinalStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Continued {
    pub round: u32,
    pub previous_status: Option<String>,
    pub previous_reason: Option<String>,
    pub stopped_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resumed {
    pub recovery_point: String,
    pub round: u32,
    pub reverted_researchers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completed {
    pub synthesis_path: String,
    pub final_report_path: String,
    pub total_iterations: u64,
    pub status: Option<String>,
    pub best_metric: Option<f64>,
    pub best_commit: CommitId,
}

/// `conference.guidance`: `git conference steer` gave the researchers guidance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guidance {
    pub text: String,
    pub round: u32,
    /// When the person asked (the command's clock).
    pub requested_at: String,
    /// The request's id (`engine::phases::talk`): a request is recorded once.
    pub request: String,
}

/// `question.answered`: `git conference answer` answered an agent's question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answered {
    /// `Q1`, `Q2`, …
    pub question: String,
    pub text: String,
    pub request: String,
}

/// `conference.stop_requested`: `git conference stop` asked the run to stop after the attempts
/// running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRequested {
    pub round: u32,
    pub requested_at: String,
    pub request: String,
}

/// `transfer.approved`: in human-in-the-loop mode, a person approved a round's candidates for
/// best, less the researchers dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approved {
    pub round: u32,
    pub approved: Vec<String>,
    pub dropped: Vec<String>,
    pub request: String,
}

/// `knowledge.briefed`: what the knowledge store of earlier conferences told this one's
/// researchers (recorded once, before round 1; every prompt carries the same brief).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeBriefed {
    /// The entries briefed, best first.
    pub entries: Vec<String>,
    /// The brief as the prompts show it.
    pub text: String,
    /// Its size as `model::knowledge::tokens` counts it.
    pub tokens: usize,
}

/// `event.voided`: on several machines, events a participant published that the conference
/// could not have recorded (refused by every honest machine's check of arriving events) are
/// voided, not fatal. The first honest machine that refused them records this event over them:
/// its state is the state of `after`, the last event before them, with the refusal added, so
/// every machine's state skips them the same way. Every machine checks the refusal itself
/// before it follows a voiding event; readers of the log skip the voided events.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Voided {
    /// The last event before the voided ones: the state this event continues.
    pub after: CommitId,
    /// The first voided event (the one refused); the events after it, up to this one, are
    /// voided with it.
    pub event: CommitId,
    /// Its first line as published.
    pub summary: String,
    /// The machine that published it, as it names itself.
    pub participant: String,
    /// Why it was refused.
    pub reason: String,
}

/// `conference.imported`: the last event of a conference `git conference import` made from a
/// folder of the original autoconference; the events before it (after `conference.started`)
/// are the original's, each marked `"imported": true`. Its state is the original's, as far as
/// its files say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// The folder imported.
    pub from: String,
    /// Events and result rows taken.
    pub events: usize,
    pub attempts: usize,
    /// What the original's files hold that has no place here, one line each.
    pub not_mapped: Vec<String>,
}

/// The slot of the round's shared phases (start, baseline, poster, review, transfer, synthesis)
/// when a conference runs on several machines: one machine holds it at a time.
pub const CHAIR: &str = "chair";

impl Event {
    /// The stored name (`researcher.iteration`, …).
    pub fn name(&self) -> &'static str {
        use names::*;
        match self {
            Event::Started(_) => STARTED,
            Event::BaselineMeasured(_) => BASELINE_MEASURED,
            Event::Rebased(_) => REBASED,
            Event::ConfigChanged(_) => CONFIG_CHANGED,
            Event::RoundStarted(_) => ROUND_STARTED,
            Event::SetupFailed(_) => SETUP_FAILED,
            Event::Iteration(_) => ITERATION,
            Event::Stuck(_) => STUCK,
            Event::AttemptInterrupted(_) => ATTEMPT_INTERRUPTED,
            Event::BranchSetAside(_) => BRANCH_SET_ASIDE,
            Event::Finished(_) => FINISHED,
            Event::PosterSession(_) => POSTER_SESSION,
            Event::PeerReview(_) => PEER_REVIEW,
            Event::PhaseStarted(_) => PHASE_STARTED,
            Event::TransferPick(_) => TRANSFER_PICK,
            Event::RoundCompleted(_) => ROUND_COMPLETED,
            Event::Paused(_) => PAUSED,
            Event::Stopped(s) => match s.status {
                FinalStatus::Converged => CONVERGED,
                FinalStatus::Stalled => STALLED,
                FinalStatus::BudgetStop => BUDGET_STOP,
            },
            Event::Continued(_) => CONTINUED,
            Event::Resumed(_) => RESUMED,
            Event::Completed(_) => COMPLETED,
            Event::Guidance(_) => GUIDANCE,
            Event::Answered(_) => ANSWERED,
            Event::StopRequested(_) => STOP_REQUESTED,
            Event::Approved(_) => APPROVED,
            Event::KnowledgeBriefed(_) => KNOWLEDGE_BRIEFED,
            Event::Imported(_) => IMPORTED,
            Event::Voided(_) => VOIDED,
        }
    }

    /// The payload as stored: the same object, key for key, earlier releases wrote.
    pub fn payload(&self) -> Value {
        let value = match self {
            Event::Started(p) => serde_json::to_value(p),
            Event::BaselineMeasured(p) => serde_json::to_value(p),
            Event::Rebased(p) => serde_json::to_value(p),
            Event::ConfigChanged(p) => serde_json::to_value(p),
            Event::RoundStarted(p) => serde_json::to_value(p),
            Event::SetupFailed(p) => serde_json::to_value(p),
            Event::Iteration(p) => serde_json::to_value(p),
            Event::Stuck(p) => serde_json::to_value(p),
            Event::AttemptInterrupted(p) => serde_json::to_value(p),
            Event::BranchSetAside(p) => serde_json::to_value(p),
            Event::Finished(p) => serde_json::to_value(p),
            Event::PosterSession(p) => serde_json::to_value(p),
            Event::PeerReview(p) => serde_json::to_value(p),
            Event::PhaseStarted(p) => serde_json::to_value(p),
            Event::TransferPick(p) => serde_json::to_value(p),
            Event::RoundCompleted(p) => serde_json::to_value(p),
            Event::Paused(p) => serde_json::to_value(p),
            Event::Stopped(p) => serde_json::to_value(p),
            Event::Continued(p) => serde_json::to_value(p),
            Event::Resumed(p) => serde_json::to_value(p),
            Event::Completed(p) => serde_json::to_value(p),
            Event::Guidance(p) => serde_json::to_value(p),
            Event::Answered(p) => serde_json::to_value(p),
            Event::StopRequested(p) => serde_json::to_value(p),
            Event::Approved(p) => serde_json::to_value(p),
            Event::KnowledgeBriefed(p) => serde_json::to_value(p),
            Event::Imported(p) => serde_json::to_value(p),
            Event::Voided(p) => serde_json::to_value(p),
        };
        // Plain data with string keys always serialises.
        value.expect("an event payload serialises")
    }

    /// The stored line of this event at `timestamp`.
    pub fn line(&self, timestamp: String) -> EventLine {
        EventLine {
            event: self.name().to_string(),
            timestamp,
            payload: self.payload(),
        }
    }

    /// An iteration between others: its notes and cache entries may wait for a batch.
    pub fn is_between_iterations(&self) -> bool {
        matches!(self, Event::Iteration(_) | Event::Stuck(_))
    }

    /// Events researchers record during the research phase, on several machines at once: each
    /// changes only its researcher's part of the state (and appends to JSON-lines files), so
    /// two machines' events of this kind apply in either order.
    pub fn may_interleave(&self) -> bool {
        self.slot() != CHAIR || self.is_request()
    }

    /// Events that record what a person asked (`steer`, `answer`, `stop`, `approve`): they
    /// change only the state's conversation fields, so they apply in either order with the
    /// researchers' events. The machine holding the chair records them.
    pub fn is_request(&self) -> bool {
        matches!(
            self,
            Event::Guidance(_) | Event::Answered(_) | Event::StopRequested(_) | Event::Approved(_)
        )
    }

    /// Which part of a conference on several machines records this event: its researcher's ID
    /// for the research phase's events, [`CHAIR`] for the round's shared phases.
    pub fn slot(&self) -> &str {
        match self {
            Event::Iteration(e) => &e.researcher,
            Event::Stuck(e) => &e.researcher,
            Event::Finished(e) => &e.researcher,
            Event::SetupFailed(e) => &e.researcher,
            Event::AttemptInterrupted(e) => &e.researcher,
            _ => CHAIR,
        }
    }

    /// Events before which every pending note is written: resume replays notes only back to
    /// the latest of these.
    pub fn is_note_checkpoint(&self) -> bool {
        matches!(
            self,
            Event::RoundCompleted(_) | Event::Resumed(_) | Event::Completed(_)
        )
    }

    /// Types a stored line this release knows (None: an unknown event, or a payload missing
    /// fields this release needs).
    pub fn parse(line: &EventLine) -> Option<Event> {
        use names::*;
        fn typed<T: serde::de::DeserializeOwned>(line: &EventLine) -> Option<T> {
            serde_json::from_value(line.payload.clone()).ok()
        }
        Some(match line.event.as_str() {
            STARTED => Event::Started(typed(line)?),
            BASELINE_MEASURED => Event::BaselineMeasured(typed(line)?),
            REBASED => Event::Rebased(typed(line)?),
            CONFIG_CHANGED => Event::ConfigChanged(typed(line)?),
            ROUND_STARTED => Event::RoundStarted(typed(line)?),
            SETUP_FAILED => Event::SetupFailed(typed(line)?),
            ITERATION => Event::Iteration(typed(line)?),
            STUCK => Event::Stuck(typed(line)?),
            ATTEMPT_INTERRUPTED => Event::AttemptInterrupted(typed(line)?),
            BRANCH_SET_ASIDE => Event::BranchSetAside(typed(line)?),
            FINISHED => Event::Finished(typed(line)?),
            POSTER_SESSION => Event::PosterSession(typed(line)?),
            PEER_REVIEW => Event::PeerReview(typed(line)?),
            PHASE_STARTED => Event::PhaseStarted(typed(line)?),
            TRANSFER_PICK => Event::TransferPick(typed(line)?),
            ROUND_COMPLETED => Event::RoundCompleted(typed(line)?),
            PAUSED => Event::Paused(typed(line)?),
            CONVERGED | STALLED | BUDGET_STOP => Event::Stopped(typed(line)?),
            CONTINUED => Event::Continued(typed(line)?),
            RESUMED => Event::Resumed(typed(line)?),
            COMPLETED => Event::Completed(typed(line)?),
            GUIDANCE => Event::Guidance(typed(line)?),
            ANSWERED => Event::Answered(typed(line)?),
            STOP_REQUESTED => Event::StopRequested(typed(line)?),
            APPROVED => Event::Approved(typed(line)?),
            KNOWLEDGE_BRIEFED => Event::KnowledgeBriefed(typed(line)?),
            IMPORTED => Event::Imported(typed(line)?),
            VOIDED => Event::Voided(typed(line)?),
            _ => return None,
        })
    }
}
