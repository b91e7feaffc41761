//! The conference state stored as `state.json` in the event log's tip tree.
//!
//! It is a summary that every event updates, so `status` answers from one blob and `resume`
//! knows where it stands without replaying the log. Anything that can be derived from it (branch
//! positions, worktree contents, notes) is reconciled from it on resume.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{talk, CommitId, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Round not started yet (before round 1, or between rounds).
    Between,
    Research,
    Poster,
    Review,
    Transfer,
    Synthesis,
    Done,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Between => "between rounds",
            Phase::Research => "phase 1: research",
            Phase::Poster => "phase 2: poster session",
            Phase::Review => "phase 3: peer review",
            Phase::Transfer => "phase 4: knowledge transfer",
            Phase::Synthesis => "synthesis",
            Phase::Done => "done",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counts {
    pub kept: u64,
    pub reverted: u64,
    pub crashed: u64,
    pub timeout: u64,
    pub rejected: u64,
    pub no_change: u64,
    /// Stopped early by pruning (absent from states written before pruning, and while none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pruned: u64,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

impl Counts {
    /// Counts one attempt under its verdict (a typed verdict: no word falls into another's
    /// count).
    pub fn add(&mut self, verdict: Verdict) {
        let count = match verdict {
            Verdict::Kept => &mut self.kept,
            Verdict::Reverted => &mut self.reverted,
            Verdict::Crashed => &mut self.crashed,
            Verdict::Timeout => &mut self.timeout,
            Verdict::Rejected => &mut self.rejected,
            Verdict::NoChange => &mut self.no_change,
            Verdict::Pruned => &mut self.pruned,
        };
        *count += 1;
    }
    pub fn total(&self) -> u64 {
        self.kept
            + self.reverted
            + self.crashed
            + self.timeout
            + self.rejected
            + self.no_change
            + self.pruned
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResearcherState {
    /// The researcher's kept snapshot: its branch points here.
    pub head: CommitId,
    /// Metric of `head` (None before the baseline is measured).
    pub best_metric: Option<f64>,
    /// Commit and metric the researcher started the current round from.
    pub round_start: CommitId,
    pub round_start_metric: Option<f64>,
    /// Iterations done in the current round.
    pub round_iterations: u32,
    /// `None` while researching; else why it stopped this round (completed, stuck, timeout, failed).
    pub round_finished: Option<String>,
    pub counts: Counts,
    pub round_counts: Counts,
    /// Consecutive non-improving iterations, and the stuck level they give (0-3).
    pub consecutive_fails: u32,
    pub stuck_level: u8,
    /// Attempts ever made by this researcher (seeds the built-in tuner deterministically).
    pub attempts: u64,
    pub last_verdict: Option<String>,
    /// Why the last attempt was rejected, crashed, timed out or changed nothing (None otherwise).
    #[serde(default)]
    pub last_reason: Option<String>,
    /// Stopped at stuck level 3 last round; this round it starts again with a new strategy.
    #[serde(default)]
    pub respawned: bool,
    /// What this researcher's agent reported using (see `budget`).
    #[serde(default)]
    pub spend: super::Spend,
    /// Seconds its agent runs and its evaluations took (attempts recorded before these were
    /// measured count nothing).
    #[serde(default)]
    pub agent_seconds: f64,
    #[serde(default)]
    pub eval_seconds: f64,
    /// Seconds of its evaluations that ran where a GPU was found (the note's `placement.gpu`),
    /// each on one device: its GPU-seconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gpu_seconds: f64,
    /// Its findings peer review validated.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub validated: u64,
    /// With branching on: its alive branches (heads it may extend), `head` the best of them
    /// (`model::tree`). Empty with branching off, and in states of earlier releases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<super::tree::Branch>,
    /// With branching on: the node its next attempt starts from, as its last attempt recorded
    /// it (None: `head`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<super::tree::Node>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Best {
    pub commit: CommitId,
    pub metric: Option<f64>,
    pub researcher: Option<String>,
    pub round: u32,
}

/// The sweeps a conference ran, as `status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepTally {
    pub sweeps: u64,
    /// Evaluations all sweeps ran (each value one).
    pub evaluations: u64,
    /// The last sweep: its attempt (`A-r1-i3`) and summary.
    pub last: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    pub name: String,
    /// running | paused | completed
    pub status: String,
    pub phase: Phase,
    pub round: u32,
    pub baseline_commit: CommitId,
    pub baseline_metric: Option<f64>,
    /// The baseline's individual measurements (an all-integer baseline makes an integer metric).
    #[serde(default)]
    pub baseline_runs: Vec<f64>,
    pub best: Best,
    pub researchers: BTreeMap<String, ResearcherState>,
    pub total_iterations: u64,
    /// With `Parameter sweep: on`: the sweeps run, their evaluations and the last one's curve
    /// (absent until a sweep ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweeps: Option<SweepTally>,
    pub started_at: String,
    pub updated_at: String,
    /// Seconds since the epoch when the conference started (time budget).
    pub started_unix: u64,
    pub events: u64,
    pub last_event: String,
    /// Best metric after each completed round (index 0 = round 1).
    pub round_bests: Vec<Option<f64>>,
    /// Consecutive rounds without progress beyond the noise threshold.
    pub plateau_rounds: u32,
    /// Consecutive rounds where every qualitative score was >= 8.
    pub high_score_rounds: u32,
    /// Consecutive rounds in which every researcher was stalled (see `stop::researcher_stalled`).
    #[serde(default)]
    pub stalled_rounds: u32,
    /// Why it stopped: converged | budget_stop | stalled (None while running).
    pub final_status: Option<String>,
    pub stop_reason: Option<String>,
    /// Findings validated so far (one line each), as the Shared Knowledge section has them.
    pub shared_knowledge: Vec<String>,
    /// Hash of the evaluation settings, part of the evaluation cache key.
    pub eval_settings: String,
    /// Knowledge transfer progress in the current round: picks already decided.
    pub transfer_done: Vec<String>,
    /// The latest warning that the evaluation proved noisy with one reading per tree (peer
    /// review), with the noise runs to set; None while no review saw it.
    #[serde(default)]
    pub noisy_evaluation: Option<String>,
    /// The round after which the conference last paused (so a resume does not pause again).
    #[serde(default)]
    pub paused_at_round: u32,
    /// What the agents reported using, in all and per round (index 0 = round 1).
    #[serde(default)]
    pub spend: super::Spend,
    #[serde(default)]
    pub round_spend: Vec<super::Spend>,
    /// Seconds the conference spent stopped before it was continued (`conference.continued`):
    /// not part of the time budget.
    #[serde(default)]
    pub stopped_seconds: u64,
    /// Seconds the conference has run, as recorded: the sum of the `running_s` its events carry
    /// (on several machines, the longest any machine ran). None in a state written by a release
    /// that did not record it (see [`State::running_seconds`]).
    #[serde(
        default,
        rename = "running_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub recorded_running_seconds: Option<f64>,
    /// What the knowledge store of earlier conferences briefed this one's researchers with
    /// (`knowledge.briefed`; None when nothing was relevant, and in earlier releases' states).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge_brief: Option<KnowledgeBrief>,
    /// On several machines: what each machine recorded (empty on one machine).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub machines: BTreeMap<String, MachineRecord>,
    /// On several machines: events other machines published that were refused and voided
    /// (`event.voided`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub voided: Vec<VoidedEvent>,
    /// Guidance given with `git conference steer`, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guidance: Vec<talk::GuidanceNote>,
    /// Every question agents asked (`Q1` first), answered or open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<talk::OpenQuestion>,
    /// Ids of the requests (`steer`, `answer`, `stop`, `approve`) recorded: each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// `git conference stop` asked the run to stop after its running attempts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_requested: bool,
    /// What the latest pause waits for (None: running, or paused by `pause_every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<talk::Waiting>,
    /// Every pause that waited for something (a stop, a person's decision), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses: Vec<talk::Waiting>,
    /// Human in the loop: the approvals of rounds' knowledge transfers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<talk::Approval>,
    /// Human in the loop: the round after which it last paused because every researcher was
    /// stalled (so a resume goes on instead of asking again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stall_paused_round: u32,
}

/// The knowledge brief every researcher's prompt carries, and the entries it names.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KnowledgeBrief {
    pub entries: Vec<String>,
    pub text: String,
}

/// An event a participant published that the conference voided (`event.voided`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VoidedEvent {
    /// Its commit.
    pub event: CommitId,
    /// Its first line as published.
    pub summary: String,
    /// The machine that published it, as it names itself.
    pub participant: String,
    /// Why it was refused.
    pub reason: String,
}

/// What one machine of a conference on several machines recorded.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MachineRecord {
    /// Researchers it ran iterations of.
    pub researchers: std::collections::BTreeSet<String>,
    pub iterations: u32,
    /// Events of the chair's phases (baseline, round starts, poster, review, transfer).
    pub chair_events: u32,
    /// When it last recorded an event (its own clock).
    pub last_event: String,
    /// What its agents reported spending.
    pub spend: super::Spend,
    /// Seconds it ran the conference, by its own monotonic clock (the `running_s` of its events).
    #[serde(default)]
    pub running_seconds: f64,
}

impl ResearcherState {
    /// A researcher at `commit` that has measured nothing yet: its head and round start there.
    pub fn at(commit: CommitId) -> ResearcherState {
        ResearcherState {
            head: commit.clone(),
            best_metric: None,
            round_start: commit,
            round_start_metric: None,
            round_iterations: 0,
            round_finished: None,
            counts: Default::default(),
            round_counts: Default::default(),
            consecutive_fails: 0,
            stuck_level: 0,
            attempts: 0,
            last_verdict: None,
            last_reason: None,
            respawned: false,
            spend: Default::default(),
            agent_seconds: 0.0,
            eval_seconds: 0.0,
            gpu_seconds: 0.0,
            validated: 0,
            branches: Vec::new(),
            next: None,
        }
    }
}

impl State {
    /// The bookkeeping of every event recorded, once the reducer applied it: one more event, its
    /// name and time, and (on several machines) what the machine that recorded it did. The same
    /// whether the event is recorded here or replayed over another machine's.
    pub fn count_event(
        &mut self,
        event: &crate::model::Event,
        timestamp: &str,
        machine: Option<&str>,
        running_s: Option<f64>,
    ) {
        if let Some(machine) = machine {
            self.count_for_machine(machine, event, timestamp);
        }
        self.count_running(machine, running_s);
        self.events += 1;
        self.last_event = event.name().to_string();
        self.updated_at = timestamp.to_string();
    }

    /// Seconds the conference has run, as recorded. A state written by an earlier release did
    /// not record it: then the span of its events less the time it was stopped between them
    /// (as that release's time budget counted it, without the time since its last event).
    pub fn running_seconds(&self) -> f64 {
        self.recorded_running_seconds.unwrap_or_else(|| {
            let at = |t: &str| {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .map(|t| t.unix_timestamp())
                    .ok()
            };
            match (at(&self.started_at), at(&self.updated_at)) {
                (Some(start), Some(last)) => (last - start)
                    .max(0)
                    .saturating_sub(self.stopped_seconds as i64)
                    as f64,
                _ => 0.0,
            }
        })
    }

    /// Seconds the conference has run with `live` more seconds of `machine` (this run's time
    /// since its last event): machines run side by side, so on several machines the conference
    /// has run as long as the machine that ran longest.
    pub fn running_seconds_with(&self, machine: Option<&str>, live: f64) -> f64 {
        let recorded = self.running_seconds();
        match machine.and_then(|m| self.machines.get(m)) {
            Some(record) => recorded.max(record.running_seconds + live),
            None if machine.is_some() => recorded.max(live),
            None => recorded + live,
        }
    }

    /// Adds an event's `running_s` (the seconds its machine ran since its previous event).
    fn count_running(&mut self, machine: Option<&str>, running_s: Option<f64>) {
        let Some(seconds) = running_s.filter(|s| s.is_finite() && *s >= 0.0) else {
            return;
        };
        let recorded = self.running_seconds();
        let total = match machine {
            Some(m) => {
                let record = self.machines.entry(m.to_string()).or_default();
                record.running_seconds += seconds;
                recorded.max(record.running_seconds)
            }
            None => recorded + seconds,
        };
        self.recorded_running_seconds = Some(total);
    }

    /// Counts `event`, recorded at `timestamp`, for `machine`.
    fn count_for_machine(&mut self, machine: &str, event: &crate::model::Event, timestamp: &str) {
        let record = self.machines.entry(machine.to_string()).or_default();
        record.last_event = timestamp.to_string();
        match event {
            crate::model::Event::Iteration(e) => {
                record.iterations += 1;
                record.researchers.insert(e.researcher.clone());
                if let Some(usage) = e.usage() {
                    record.spend.add(&usage);
                }
            }
            // Any machine voids what it refused: not a step of the chair's.
            crate::model::Event::Voided(_) => {}
            e if e.slot() == crate::model::event::CHAIR => record.chair_events += 1,
            _ => {}
        }
    }

    /// Whether the conference runs on several machines and is not done: machines take part
    /// with `join`, which runs the stored settings (a local conference.md is applied only by
    /// `resume`, on one machine, once it has stopped).
    pub fn runs_on_several_machines(&self) -> bool {
        !self.machines.is_empty() && self.phase != Phase::Done
    }

    pub fn researcher(&self, id: &str) -> &ResearcherState {
        &self.researchers[id]
    }
    pub fn researcher_mut(&mut self, id: &str) -> &mut ResearcherState {
        self.researchers.get_mut(id).expect("known researcher")
    }
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in self.researchers.values() {
            c.kept += r.counts.kept;
            c.reverted += r.counts.reverted;
            c.crashed += r.counts.crashed;
            c.timeout += r.counts.timeout;
            c.rejected += r.counts.rejected;
            c.no_change += r.counts.no_change;
        }
        c
    }
}

/// Paths inside the state tree.
pub mod files {
    pub const STATE: &str = "state.json";
    /// Evaluation results by evaluation settings and tree (`<settings>/<2 hex>/<38 hex>`).
    pub const EVAL_CACHE_DIR: &str = "evaluations/";
    pub const CONFIG: &str = "conference.md";
    pub const SYNTHESIS: &str = "synthesis.md";
    pub const FINAL_REPORT: &str = "final_report.md";
    pub const PLOT: &str = "conference_progress.png";

    pub fn round_dir(round: u32) -> String {
        format!("round-{round}")
    }
    /// Every attempt of a round, one JSON line each (`AttemptRecord`).
    pub fn attempts(round: u32) -> String {
        format!("round-{round}/attempts.jsonl")
    }
    /// The review's findings of a round (`Finding`, a JSON array).
    pub fn findings(round: u32) -> String {
        format!("round-{round}/findings.json")
    }
    /// The review's readings of the round start (a JSON array of numbers).
    pub fn start_runs(round: u32) -> String {
        format!("round-{round}/start_runs.json")
    }
    /// The knowledge-transfer decisions of a round, one JSON line each (`PickRecord`).
    pub fn picks(round: u32) -> String {
        format!("round-{round}/transfer.jsonl")
    }
    pub fn results(round: u32) -> String {
        format!("round-{round}/results.tsv")
    }
    pub fn poster(round: u32) -> String {
        format!("round-{round}/poster_session_round_{round}.md")
    }
    pub fn review(round: u32) -> String {
        format!("round-{round}/peer_review_round_{round}.md")
    }
    pub fn transfer(round: u32) -> String {
        format!("round-{round}/knowledge_transfer_round_{round}.md")
    }
    /// Evaluation cache entry for a tree under the current evaluation settings.
    pub fn eval_cache(settings: &str, tree: &str) -> String {
        format!("{EVAL_CACHE_DIR}{settings}/{}/{}", &tree[..2], &tree[2..])
    }
}

/// A conference in round 1, researching, with researchers A and B at the all-zero commit and a
/// best of 10: the state the unit tests of the reducer and of publishing start from.
#[cfg(test)]
pub(crate) fn sample() -> State {
    let base = "0".repeat(40);
    let researcher = serde_json::json!({
        "head": base, "best_metric": 10.0, "round_start": base, "round_start_metric": 10.0,
        "round_iterations": 0, "round_finished": null,
        "counts": Counts::default(), "round_counts": Counts::default(),
        "consecutive_fails": 0, "stuck_level": 0, "attempts": 0, "last_verdict": null
    });
    serde_json::from_value(serde_json::json!({
        "name": "c", "status": "running", "phase": "research", "round": 1,
        "baseline_commit": base, "baseline_metric": 10.0,
        "best": {"commit": base, "metric": 10.0, "researcher": null, "round": 0},
        "researchers": {"A": researcher.clone(), "B": researcher},
        "total_iterations": 0, "started_at": "", "updated_at": "", "started_unix": 0,
        "events": 1, "last_event": "round.started", "round_bests": [], "plateau_rounds": 0,
        "high_score_rounds": 0, "final_status": null, "stop_reason": null,
        "shared_knowledge": [], "eval_settings": "s", "transfer_done": []
    }))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused_event() -> crate::model::Event {
        crate::model::Event::Paused(crate::model::event::Paused {
            round: 1,
            pause_every: Some(1),
            waits_for: None,
        })
    }

    /// Running time adds the events' own durations, never a difference of two clocks; on
    /// several machines it is the longest any machine ran; a state from an earlier release
    /// starts from the span of its events less the time it was stopped.
    #[test]
    fn running_time_is_the_sum_of_each_machines_own_durations() {
        let mut st = sample();
        st.started_at = "2026-01-01T00:00:00Z".into();
        st.updated_at = "2026-01-01T01:00:00Z".into();
        st.stopped_seconds = 600;
        assert_eq!(st.running_seconds(), 3000.0);
        st.count_event(&paused_event(), "2026-01-02T09:00:00Z", None, Some(5.0));
        assert_eq!(st.running_seconds(), 3005.0, "the night never counts");
        assert_eq!(st.running_seconds_with(None, 2.0), 3007.0);

        let mut shared = sample();
        shared.recorded_running_seconds = Some(0.0);
        let e = paused_event();
        shared.count_event(&e, "2026-01-01T00:00:10Z", Some("m1"), Some(10.0));
        shared.count_event(&e, "2026-01-01T09:00:00Z", Some("m2"), Some(4.0));
        shared.count_event(&e, "2026-01-01T00:00:20Z", Some("m1"), Some(10.0));
        shared.count_event(&e, "2026-01-01T00:00:30Z", Some("m2"), Some(-1.0));
        assert_eq!(shared.running_seconds(), 20.0);
        assert_eq!(shared.running_seconds_with(Some("m2"), 30.0), 34.0);
        assert_eq!(shared.running_seconds_with(Some("m3"), 1.0), 20.0);
        assert_eq!(shared.running_seconds_with(Some("m1"), 1.0), 21.0);
    }

    /// Each verdict counts under the field named by its own stored word, and nowhere else.
    #[test]
    fn every_verdict_counts_under_its_own_word() {
        for &verdict in Verdict::ALL {
            let mut counts = Counts::default();
            counts.add(verdict);
            assert_eq!(counts.total(), 1);
            let json = serde_json::to_value(&counts).unwrap();
            assert_eq!(json[verdict.as_str()], 1, "{verdict}: {json}");
        }
    }
}
