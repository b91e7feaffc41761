//! The reducer: how the conference state changes on each event. One function per event, pure
//! (state and event in, state out), so the recorder applies an event the same way wherever it
//! was decided, and every transition is pinned by a unit test.
//!
//! The recorder adds its own bookkeeping after the reducer (`events`, `last_event`,
//! `updated_at`); `conference.started` builds the first state whole, so it changes nothing here.

use crate::model::event::{self, Event};
use crate::model::state::{Phase, State};
use crate::model::{reasons, talk, CommitId, PickResult, RunStatus, Usage, Verdict};

use super::keep;

impl Event {
    /// Applies this event to `st`: the state the event's commit stores.
    pub fn apply(&self, st: &mut State) {
        match self {
            Event::BaselineMeasured(e) => baseline_measured(st, e),
            Event::Rebased(e) => rebased(st, &e.to),
            Event::ConfigChanged(e) => config_changed(st, e),
            Event::RoundStarted(e) => round_started(st, e),
            Event::Iteration(e) => iteration(st, e),
            Event::Finished(e) => finished(st, e),
            Event::PosterSession(_) => st.phase = Phase::Review,
            Event::PeerReview(e) => peer_review(st, e),
            Event::TransferPick(e) => transfer_pick(st, e),
            Event::RoundCompleted(e) => round_completed(st, e),
            Event::Paused(e) => paused(st, e),
            Event::Stopped(e) => {
                st.phase = Phase::Synthesis;
                st.final_status = Some(e.status.to_string());
                st.stop_reason = Some(e.detail.clone());
            }
            Event::Continued(e) => {
                *st = continued(st);
                st.stopped_seconds += e.stopped_seconds;
            }
            Event::Resumed(_) => {
                st.status = RunStatus::Running.into();
                st.waiting = None;
                st.stop_requested = false;
            }
            Event::Completed(_) => {
                st.phase = Phase::Done;
                st.status = RunStatus::Completed.into();
            }
            Event::Guidance(e) => guidance(st, e),
            Event::Answered(e) => answered(st, e),
            Event::StopRequested(e) => {
                st.stop_requested = true;
                st.requests.push(e.request.clone());
            }
            Event::Approved(e) => approved(st, e),
            Event::KnowledgeBriefed(e) => {
                st.knowledge_brief = Some(crate::model::state::KnowledgeBrief {
                    entries: e.entries.clone(),
                    text: e.text.clone(),
                });
            }
            Event::Voided(e) => st.voided.push(crate::model::state::VoidedEvent {
                event: e.event.clone(),
                summary: e.summary.clone(),
                participant: e.participant.clone(),
                reason: e.reason.clone(),
            }),
            // Its commit stores the imported state whole (`engine::commands::import`).
            Event::Started(_)
            | Event::Imported(_)
            | Event::PhaseStarted(_)
            | Event::SetupFailed(_)
            | Event::Stuck(_)
            | Event::AttemptInterrupted(_)
            | Event::BranchSetAside(_) => {}
        }
    }
}

fn baseline_measured(st: &mut State, e: &event::BaselineMeasured) {
    let value = Some(e.metric_value);
    st.baseline_metric = value;
    st.baseline_runs = e.runs.clone();
    st.best.metric = value;
    for r in st.researchers.values_mut() {
        r.best_metric = value;
        r.round_start_metric = value;
    }
}

fn rebased(st: &mut State, to: &CommitId) {
    st.baseline_commit = to.clone();
    st.best.commit = to.clone();
    for r in st.researchers.values_mut() {
        r.head = to.clone();
        r.round_start = to.clone();
    }
}

fn config_changed(st: &mut State, e: &event::ConfigChanged) {
    st.eval_settings = e.eval_settings.clone();
    if e.noise_settings_changed {
        st.noisy_evaluation = None;
    }
}

fn round_started(st: &mut State, e: &event::RoundStarted) {
    // A researcher restarting from a best that moved last round starts a fresh streak.
    let best_moved = st.round > 0 && st.best.round == st.round;
    st.phase = Phase::Research;
    st.round = e.round;
    let best_metric = st.best.metric;
    for (id, r) in st.researchers.iter_mut() {
        if let Some(head) = e.heads.get(id) {
            r.head = head.clone();
            r.round_start = head.clone();
        }
        r.best_metric = best_metric;
        r.round_start_metric = best_metric;
        r.round_iterations = 0;
        r.round_finished = None;
        r.round_counts = Default::default();
        r.respawned = r.stuck_level >= 3;
        if r.stuck_level >= 3 || best_moved {
            r.stuck_level = 0;
            r.consecutive_fails = 0;
        }
        if let Some(round) = e.branches.get(id) {
            super::tree::close(&mut r.branches, &round.closed);
            if !r.branches.iter().any(|b| b.head == round.opened.head) {
                r.branches.push(round.opened.clone());
            }
            r.next = None;
        }
    }
}

fn iteration(st: &mut State, e: &event::Iteration) {
    st.total_iterations += 1;
    if let Some(sweep) = e.sweep.as_ref().and_then(|s| s.ran()) {
        let tally = st.sweeps.get_or_insert_with(Default::default);
        tally.sweeps += 1;
        tally.evaluations += sweep.variants.len() as u64;
        let label = crate::model::tree::attempt_label(&e.researcher, e.round, e.iteration);
        tally.last = format!("{label}: {}", sweep.summary());
    }
    if let Some(usage) = e.usage() {
        charge(st, &e.researcher, &usage);
    }
    let verdict = &e.status;
    let r = st.researcher_mut(&e.researcher);
    r.round_iterations = e.iteration;
    r.attempts += 1;
    r.agent_seconds += e
        .agent_s
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(0.0);
    let eval_s = e.eval_s.filter(|s| s.is_finite() && *s >= 0.0);
    r.eval_seconds += eval_s.unwrap_or(0.0);
    if e.placement.as_ref().is_some_and(|p| p.gpu.is_some()) {
        r.gpu_seconds += eval_s.unwrap_or(0.0);
    }
    // A word a newer release added counts as an attempt, under no verdict of this release.
    if let Some(known) = verdict.known() {
        r.counts.add(known);
        r.round_counts.add(known);
    }
    r.last_verdict = Some(verdict.to_string());
    r.last_reason =
        reasons::shows_reason(verdict).then(|| reasons::reason_text(verdict, e.reason.as_deref()));
    ask(st, e);
    let r = st.researcher_mut(&e.researcher);
    if let Some(step) = &e.branch {
        let tried = super::tree::tried_line(verdict.as_str(), &e.description);
        if let Some(best) = super::tree::apply(&mut r.branches, step, tried) {
            r.best_metric = Some(best);
        }
        r.head = step.head.clone();
        r.next = Some(step.next.clone());
    }
    if e.branch.is_some() {
        if *verdict == Verdict::Kept {
            r.consecutive_fails = 0;
            r.stuck_level = 0;
        } else {
            r.consecutive_fails += 1;
            r.stuck_level = keep::stuck_level(r.consecutive_fails);
        }
    } else if *verdict == Verdict::Kept {
        if let Some(commit) = &e.commit {
            r.head = commit.clone();
        }
        r.best_metric = e.metric_value;
        r.consecutive_fails = 0;
        r.stuck_level = 0;
    } else {
        r.consecutive_fails += 1;
        r.stuck_level = keep::stuck_level(r.consecutive_fails);
    }
}

/// The questions an iteration's note asked, numbered after every question recorded before.
fn ask(st: &mut State, e: &event::Iteration) {
    for asked in &e.questions {
        let id = format!("Q{}", st.questions.len() + 1);
        st.questions.push(talk::OpenQuestion {
            id,
            researcher: e.researcher.clone(),
            round: e.round,
            iteration: e.iteration,
            text: asked.text.clone(),
            blocking: asked.blocking,
            answer: None,
        });
    }
}

/// A pause: `pause_every`'s (none waited for) or one that waits for something.
fn paused(st: &mut State, e: &event::Paused) {
    st.status = RunStatus::Paused.into();
    let Some(waits) = &e.waits_for else {
        st.paused_at_round = st.round;
        return;
    };
    match waits.kind {
        talk::WaitKind::Stop => st.stop_requested = false,
        talk::WaitKind::Stalled => st.stall_paused_round = st.round,
        talk::WaitKind::Approval | talk::WaitKind::Answer => {}
    }
    st.waiting = Some(waits.clone());
    st.pauses.push(waits.clone());
}

fn guidance(st: &mut State, e: &event::Guidance) {
    st.guidance.push(talk::GuidanceNote {
        text: e.text.clone(),
        round: e.round,
        at: e.requested_at.clone(),
    });
    st.requests.push(e.request.clone());
}

fn answered(st: &mut State, e: &event::Answered) {
    if let Some(q) = st.questions.iter_mut().find(|q| q.id == e.question) {
        q.answer = Some(e.text.clone());
    }
    st.requests.push(e.request.clone());
    let blocked = st.questions.iter().any(|q| q.blocking && q.is_open());
    if !blocked && st.waiting.as_ref().map(|w| w.kind) == Some(talk::WaitKind::Answer) {
        st.waiting = None;
    }
}

fn approved(st: &mut State, e: &event::Approved) {
    st.approvals.retain(|a| a.round != e.round);
    st.approvals.push(talk::Approval {
        round: e.round,
        dropped: e.dropped.clone(),
    });
    st.requests.push(e.request.clone());
    if st.waiting.as_ref().map(|w| w.kind) == Some(talk::WaitKind::Approval) {
        st.waiting = None;
    }
}

/// Adds one agent run's usage to the conference's, the researcher's and the round's spend.
pub fn charge(st: &mut State, researcher: &str, usage: &Usage) {
    st.spend.add(usage);
    st.researcher_mut(researcher).spend.add(usage);
    let round = st.round.max(1) as usize;
    if st.round_spend.len() < round {
        st.round_spend.resize(round, Default::default());
    }
    st.round_spend[round - 1].add(usage);
}

fn finished(st: &mut State, e: &event::Finished) {
    st.researcher_mut(&e.researcher).round_finished = Some(e.reason.clone());
    if st.researchers.values().all(|r| r.round_finished.is_some()) {
        st.phase = Phase::Poster;
    }
}

fn peer_review(st: &mut State, e: &event::PeerReview) {
    st.phase = Phase::Transfer;
    if e.noisy_evaluation.is_some() {
        st.noisy_evaluation = e.noisy_evaluation.clone();
    }
    st.transfer_done.clear();
    for f in e.findings.as_array().into_iter().flatten() {
        let validated = f.get("verdict").and_then(|v| v.as_str()) == Some("validated");
        let researcher = f.get("researcher").and_then(|v| v.as_str());
        if let (true, Some(id)) = (validated, researcher) {
            if let Some(r) = st.researchers.get_mut(id) {
                r.validated += 1;
            }
        }
    }
}

fn transfer_pick(st: &mut State, e: &event::TransferPick) {
    st.transfer_done.push(e.researcher.clone());
    if e.result == PickResult::Merged {
        if let Some(commit) = &e.commit {
            st.best.commit = commit.clone();
            st.best.metric = e.metric;
            st.best.researcher = Some(e.researcher.clone());
            st.best.round = st.round;
        }
    }
}

fn round_completed(st: &mut State, e: &event::RoundCompleted) {
    st.phase = Phase::Between;
    st.round_bests.push(st.best.metric);
    st.plateau_rounds = e.streaks.plateau_rounds;
    st.stalled_rounds = e.streaks.stalled_rounds;
    st.high_score_rounds = e.streaks.high_score_rounds;
    st.shared_knowledge
        .extend(e.shared_knowledge_added.iter().cloned());
    st.transfer_done.clear();
}

/// The state a continued conference starts from: between rounds, no stop decided, stall and
/// plateau counters reset (the researchers start fresh streaks).
pub fn continued(st: &State) -> State {
    let mut next = st.clone();
    next.phase = Phase::Between;
    next.status = RunStatus::Running.into();
    next.final_status = None;
    next.stop_reason = None;
    next.plateau_rounds = 0;
    next.high_score_rounds = 0;
    next.stalled_rounds = 0;
    for r in next.researchers.values_mut() {
        r.stuck_level = 0;
        r.consecutive_fails = 0;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::*;
    use crate::model::{CommitId, FinalStatus, Tokens};

    const BASE: &str = "0000000000000000000000000000000000000000";
    const NEW: &str = "1111111111111111111111111111111111111111";

    fn id(hex: &str) -> CommitId {
        CommitId::try_from(hex).unwrap()
    }

    fn state() -> State {
        crate::model::state::sample()
    }

    fn iteration(verdict: Verdict, metric: Option<f64>, reason: Option<&str>) -> Event {
        Event::Iteration(Iteration {
            researcher: "A".into(),
            round: 1,
            iteration: 1,
            metric_value: metric,
            delta: None,
            status: verdict.into(),
            commit: Some(id(NEW)),
            tree: NEW.into(),
            description: "d".into(),
            reason: reason.map(str::to_string),
            sub_metrics: Default::default(),
            evaluated: true,
            notes: vec![],
            tokens: Some(Tokens {
                input: 100,
                output: 20,
            }),
            cost_usd: Some(0.5),
            agent_s: None,
            eval_s: None,
            questions: vec![],
            placement: None,
            branch: None,
            sweep: None,
        })
    }

    #[test]
    fn an_iteration_counts_its_verdict_and_moves_the_head_only_when_kept() {
        // verdict, head after, best metric after, consecutive fails, last reason
        let table = [
            (Verdict::Kept, NEW, Some(9.0), 0, None),
            (Verdict::Reverted, BASE, Some(10.0), 1, None::<&str>),
            (Verdict::Crashed, BASE, Some(10.0), 1, Some("crashed")),
            (Verdict::Timeout, BASE, Some(10.0), 1, Some("timed out")),
            (Verdict::Rejected, BASE, Some(10.0), 1, Some("rejected")),
            (
                Verdict::NoChange,
                BASE,
                Some(10.0),
                1,
                Some("the agent changed nothing"),
            ),
        ];
        for (verdict, head, best, fails, last_reason) in table {
            let mut st = state();
            iteration(verdict, Some(9.0), None).apply(&mut st);
            let a = st.researcher("A");
            assert_eq!(&*a.head, head, "{verdict}");
            assert_eq!(a.best_metric, best, "{verdict}");
            assert_eq!(a.consecutive_fails, fails, "{verdict}");
            assert_eq!(a.last_reason.as_deref(), last_reason, "{verdict}");
            assert_eq!(a.counts.total(), 1, "{verdict}");
            assert_eq!(a.round_counts.total(), 1, "{verdict}");
            assert_eq!(a.last_verdict.as_deref(), Some(verdict.as_str()));
            assert_eq!((st.total_iterations, a.attempts), (1, 1));
            assert_eq!(st.researcher("B").counts.total(), 0, "B is untouched");
        }
    }

    #[test]
    fn an_iteration_charges_its_usage_to_the_conference_the_researcher_and_the_round() {
        let mut st = state();
        iteration(Verdict::Reverted, Some(11.0), None).apply(&mut st);
        iteration(Verdict::Reverted, Some(11.0), None).apply(&mut st);
        assert_eq!(
            (st.spend.input, st.spend.output, st.spend.runs),
            (200, 40, 2)
        );
        assert_eq!(st.spend.cost_usd, 1.0);
        assert_eq!(st.researcher("A").spend.runs, 2);
        assert_eq!(st.round_spend.len(), 1);
        assert_eq!(st.round_spend[0].tokens(), 240);
    }

    #[test]
    fn a_streak_of_non_improving_attempts_raises_the_stuck_level_and_a_kept_one_resets_it() {
        let mut st = state();
        let mut levels = vec![];
        for _ in 0..12 {
            iteration(Verdict::Reverted, Some(11.0), None).apply(&mut st);
            levels.push(st.researcher("A").stuck_level);
        }
        let expected: Vec<u8> = (1..=12).map(keep::stuck_level).collect();
        assert_eq!(levels, expected);
        assert!(
            levels.last() > levels.first(),
            "the level rises: {levels:?}"
        );
        iteration(Verdict::Kept, Some(9.0), None).apply(&mut st);
        assert_eq!(st.researcher("A").stuck_level, 0);
        assert_eq!(st.researcher("A").consecutive_fails, 0);
    }

    #[test]
    fn the_last_researcher_to_finish_opens_the_poster_session() {
        let mut st = state();
        let finished = |id: &str| {
            Event::Finished(Finished {
                researcher: id.into(),
                round: 1,
                reason: "completed".into(),
                iterations: 3,
            })
        };
        finished("A").apply(&mut st);
        assert_eq!(st.phase, Phase::Research, "B still researches");
        finished("B").apply(&mut st);
        assert_eq!(st.phase, Phase::Poster);
    }

    #[test]
    fn only_a_merged_pick_moves_best() {
        // result, commit, best commit after
        let table = [
            (PickResult::Merged, Some(NEW), NEW),
            (PickResult::Merged, None, BASE),
            (PickResult::Dropped, Some(NEW), BASE),
            (PickResult::Dropped, None, BASE),
        ];
        for (result, commit, best) in table {
            let mut st = state();
            Event::TransferPick(TransferPick {
                round: 1,
                researcher: "B".into(),
                finding: id(NEW),
                commit: commit.map(id),
                result,
                metric: Some(8.0),
                conflicts: vec![],
                reason: "r".into(),
                notes: vec![],
            })
            .apply(&mut st);
            assert_eq!(&*st.best.commit, best, "{result:?} {commit:?}");
            assert_eq!(st.transfer_done, ["B"]);
            if best == NEW {
                assert_eq!(st.best.metric, Some(8.0));
                assert_eq!(st.best.researcher.as_deref(), Some("B"));
                assert_eq!(st.best.round, 1);
            }
        }
    }

    #[test]
    fn a_round_start_resets_streaks_after_a_respawn_or_when_best_moved() {
        // stuck level before, best moved last round → (respawned, stuck level after)
        let table = [
            (3u8, false, true, 0u8),
            (2, false, false, 2),
            (2, true, false, 0),
            (0, false, false, 0),
        ];
        for (level, best_moved, respawned, level_after) in table {
            let mut st = state();
            st.best.round = if best_moved { 1 } else { 0 };
            st.researcher_mut("A").stuck_level = level;
            st.researcher_mut("A").round_finished = Some("stuck".into());
            let heads = [("A", NEW), ("B", NEW)]
                .map(|(r, h)| (r.to_string(), id(h)))
                .into();
            Event::RoundStarted(RoundStarted {
                round: 2,
                researcher_states: vec![],
                endgame: false,
                best_metric: Some(10.0),
                best_commit: id(BASE),
                heads,
                branches: Default::default(),
            })
            .apply(&mut st);
            let a = st.researcher("A");
            assert_eq!((st.round, st.phase), (2, Phase::Research));
            assert_eq!((a.head.as_str(), a.round_start.as_str()), (NEW, NEW));
            assert_eq!(a.round_finished, None);
            assert_eq!(a.respawned, respawned, "level {level}, moved {best_moved}");
            assert_eq!(
                a.stuck_level, level_after,
                "level {level}, moved {best_moved}"
            );
        }
    }

    #[test]
    fn a_stop_begins_synthesis_and_a_continue_undoes_it() {
        let mut st = state();
        st.plateau_rounds = 3;
        st.researcher_mut("A").stuck_level = 2;
        Event::Stopped(Stopped {
            final_best_metric: Some(10.0),
            round_count: 1,
            reason: "plateau".into(),
            detail: "no progress".into(),
            status: FinalStatus::Converged,
        })
        .apply(&mut st);
        assert_eq!(st.phase, Phase::Synthesis);
        assert_eq!(st.final_status.as_deref(), Some("converged"));
        assert_eq!(st.stop_reason.as_deref(), Some("no progress"));
        Event::Continued(Continued {
            round: 1,
            previous_status: None,
            previous_reason: None,
            stopped_seconds: 40,
        })
        .apply(&mut st);
        assert_eq!((st.phase, st.final_status.clone()), (Phase::Between, None));
        assert_eq!((st.plateau_rounds, st.stopped_seconds), (0, 40));
        assert_eq!(st.researcher("A").stuck_level, 0);
    }

    #[test]
    fn a_completed_round_records_its_best_its_streaks_and_its_knowledge() {
        let mut st = state();
        st.phase = Phase::Transfer;
        st.transfer_done = vec!["A".into()];
        let streaks = Streaks {
            plateau_rounds: 1,
            stalled_rounds: 2,
            high_score_rounds: 0,
        };
        Event::RoundCompleted(RoundCompleted {
            round: 1,
            best_metric: Some(10.0),
            best_researcher: None,
            best_commit: id(BASE),
            converged: false,
            shared_knowledge_added: vec!["k".into()],
            streaks,
        })
        .apply(&mut st);
        assert_eq!(st.phase, Phase::Between);
        assert_eq!(st.round_bests, [Some(10.0)]);
        assert_eq!((st.plateau_rounds, st.stalled_rounds), (1, 2));
        assert_eq!(st.shared_knowledge, ["k"]);
        assert!(st.transfer_done.is_empty());
    }

    #[test]
    fn events_that_only_report_change_nothing() {
        let reports = [
            Event::Stuck(Stuck {
                researcher: "A".into(),
                round: 1,
                stuck_level: 1,
                consecutive_non_improving: 3,
            }),
            Event::SetupFailed(SetupFailed {
                researcher: "A".into(),
                round: 1,
                command: "make".into(),
                status: "exit 2".into(),
                reason: "r".into(),
                output_tail: "".into(),
                log: "l".into(),
            }),
        ];
        for event in reports {
            let mut st = state();
            event.apply(&mut st);
            assert_eq!(st, state(), "{}", event.name());
        }
    }

    /// A verdict word a newer release added (read from a shared log) is an attempt that was not
    /// kept: counted as an attempt and a failure, under no verdict of this release, and shown as
    /// written.
    #[test]
    fn an_iteration_with_a_verdict_this_release_does_not_know_still_counts() {
        let Event::Iteration(mut e) = iteration(Verdict::Kept, Some(9.0), None) else {
            unreachable!()
        };
        let mut value = serde_json::to_value(&e).unwrap();
        value["status"] = "skipped".into();
        e = serde_json::from_value(value).expect("an unknown verdict word stays readable");
        assert_eq!(e.status.as_str(), "skipped");
        let mut st = state();
        let before = st.researcher("A").clone();
        Event::Iteration(e.clone()).apply(&mut st);
        let r = st.researcher("A");
        assert_eq!(r.attempts, before.attempts + 1);
        assert_eq!(r.counts, before.counts);
        assert_eq!(r.last_verdict.as_deref(), Some("skipped"));
        assert_eq!(r.head, before.head, "not kept: the head stays");
        assert_eq!(r.consecutive_fails, before.consecutive_fails + 1);
        assert_eq!(serde_json::to_value(&e).unwrap()["status"], "skipped");
    }

    fn asking(questions: &[(&str, bool)]) -> Event {
        let Event::Iteration(mut e) = iteration(Verdict::Reverted, Some(11.0), None) else {
            unreachable!()
        };
        e.questions = (questions.iter())
            .map(|(text, blocking)| crate::model::talk::Asked {
                text: text.to_string(),
                blocking: *blocking,
            })
            .collect();
        Event::Iteration(e)
    }

    fn waits(kind: talk::WaitKind) -> Event {
        Event::Paused(Paused {
            round: 1,
            pause_every: None,
            waits_for: Some(talk::Waiting {
                kind,
                detail: "d".into(),
                round: 1,
            }),
        })
    }

    /// Questions are numbered in the order the log records them; an answer closes one, and the
    /// last blocking one answered ends the wait for it.
    #[test]
    fn questions_are_numbered_in_log_order_and_answers_close_them() {
        let mut st = state();
        asking(&[("first?", false), ("second?", true)]).apply(&mut st);
        asking(&[("third?", false)]).apply(&mut st);
        let ids: Vec<&str> = st.questions.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["Q1", "Q2", "Q3"]);
        assert!(st.questions[1].blocking && !st.questions[0].blocking);
        waits(talk::WaitKind::Answer).apply(&mut st);
        assert_eq!(st.status, "paused");
        assert_eq!(st.paused_at_round, 0, "not pause_every's pause");
        let answer = |q: &str, r: &str| {
            Event::Answered(Answered {
                question: q.into(),
                text: "yes".into(),
                request: r.into(),
            })
        };
        answer("Q1", "r1").apply(&mut st);
        assert!(st.waiting.is_some(), "Q2 still blocks");
        answer("Q2", "r2").apply(&mut st);
        assert!(st.waiting.is_none());
        assert_eq!(st.questions[1].answer.as_deref(), Some("yes"));
        assert!(st.questions[2].is_open());
        assert_eq!(st.requests, ["r1", "r2"]);
    }

    /// A stop asked for holds until the pause it causes; guidance and approvals are kept; a
    /// resume ends any wait.
    #[test]
    fn stop_guidance_and_approval_change_only_their_fields() {
        let mut st = state();
        let before = st.clone();
        Event::Guidance(Guidance {
            text: "try a cosine schedule".into(),
            round: 1,
            requested_at: "t".into(),
            request: "g".into(),
        })
        .apply(&mut st);
        Event::StopRequested(StopRequested {
            round: 1,
            requested_at: "t".into(),
            request: "s".into(),
        })
        .apply(&mut st);
        assert!(st.stop_requested);
        assert_eq!(st.phase, before.phase);
        assert_eq!(st.researchers, before.researchers);
        waits(talk::WaitKind::Stop).apply(&mut st);
        assert!(!st.stop_requested);
        waits(talk::WaitKind::Approval).apply(&mut st);
        Event::Approved(Approved {
            round: 1,
            approved: vec!["A".into()],
            dropped: vec!["B".into()],
            request: "a".into(),
        })
        .apply(&mut st);
        assert!(st.waiting.is_none());
        assert_eq!(st.approvals[0].dropped, ["B"]);
        assert_eq!(st.guidance[0].text, "try a cosine schedule");
        assert_eq!(st.requests, ["g", "s", "a"]);
        waits(talk::WaitKind::Stalled).apply(&mut st);
        assert_eq!(st.stall_paused_round, 1);
        Event::Resumed(Resumed {
            recovery_point: "x".into(),
            round: 1,
            reverted_researchers: vec![],
        })
        .apply(&mut st);
        assert!(st.waiting.is_none() && st.status == "running");
    }
}
