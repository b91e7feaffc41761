//! Phase 1: every researcher runs its iterations in its own worktree, all at once.
//!
//! One iteration: write the prompt, run the agent, take what changed as a snapshot, reject it if
//! it touches a frozen or forbidden path, evaluate it (or reuse the cached result for that tree),
//! keep it only if strictly better than the researcher's best, record the event (the commit
//! point), then write the note, move the branch and put the worktree back to the kept snapshot.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use git2::{Oid, Repository};

use super::agent;
use super::agent_call::{AgentCall, AgentOutcome};
use super::attempt::{commit_attempt, default_description, restore_head, Attempt};
use super::evaluate::{self, EvalRequest, EvalResult};
use super::prompt;
use super::state::{files, ResearcherState, State};
use super::Conference;
use crate::exec::process;
use crate::git::watch::{self, Changes, Watch};
use crate::git::{leftovers, snapshot, worktree};
use crate::model::briefing::PromptContext;
use crate::model::event::{self as events, Event, Note};
use crate::model::notes::AttemptNote;
use crate::model::{AttemptRecord, CommitId, Tokens};
use crate::model::{EvalStatus, Verdict};
use crate::protocol::keep;
use crate::store::StateChange;

/// Agent crashes in a row after which a researcher is marked failed for the round.
const CRASHES_TO_FAIL: u32 = 3;

/// Runs phase 1 of the current round for every researcher that has not finished it.
pub async fn run_phase(conf: &std::sync::Arc<Conference>) -> Result<()> {
    let st = conf.state();
    let pending: Vec<String> = st
        .researchers
        .iter()
        .filter(|(id, r)| r.round_finished.is_none() && conf.runs_here(id))
        .map(|(id, _)| id.clone())
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for id in pending {
        let conf = conf.clone();
        tasks.spawn(async move {
            let result = researcher_loop(&conf, &id).await;
            (id, result)
        });
    }
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let (id, result) = joined?;
        if let Err(e) = result {
            conf.ui.info(&format!("researcher {id}: {e:#}"));
            if first_error.is_none() {
                first_error = Some(e);
            }
        }
    }
    conf.ui.clear_researchers();
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn researcher_label(id: &str) -> String {
    format!("researcher-{id}")
}

async fn researcher_loop(conf: &Conference, id: &str) -> Result<()> {
    let Some(mut session) = Session::open(conf, id).await? else {
        return Ok(());
    };
    loop {
        if process::cancelled()
            || crate::protocol::talk::holds_researchers(conf.config.loop_mode, &conf.state())
        {
            return Ok(());
        }
        if !conf.runs_here(id) {
            conf.ui.info(&format!(
                "researcher {id}: another machine took it over (this one was silent for longer than its lease); stopped here"
            ));
            return Ok(());
        }
        match session.iterate().await? {
            Next::Continue => session.reopen_now_and_then(conf)?,
            Next::Finish(why) => return session.finish(&why),
            Next::Stop => return Ok(()),
        }
    }
}

/// Iterations after which a researcher's session opens its repository and worktree afresh.
/// libgit2 keeps every commit and small tree a handle reads in its object cache (up to 256 MB):
/// a never-stop run grew by about 13 KB an iteration (26 MB at 1,000 iterations, 175 MB at
/// 10,000) while the recorder and each researcher's session kept theirs for the whole round.
/// (The recorder reopens its own more often: `recorder::RECORDER_REOPEN_EVERY`.)
const SESSION_REOPEN_EVERY: u32 = 256;

/// One researcher's phase 1 of a round: its worktree, opened once for the whole phase (its
/// index stays in memory between iterations instead of being read and checksummed from disk at
/// every step), the watch that sees every change there, and the counters the loop keeps.
struct Session<'a> {
    conf: &'a Conference,
    id: &'a str,
    repo: Repository,
    wt_path: PathBuf,
    wt: Repository,
    watch: Option<Watch>,
    started: Instant,
    /// The researcher's time for the round (`None`: no limit).
    limit: Option<Duration>,
    /// Agent runs in a row that crashed or timed out.
    agent_crashes: u32,
    /// Iterations since `repo` and `wt` were opened (see [`SESSION_REOPEN_EVERY`]).
    iterations_since_open: u32,
}

/// What an iteration leaves the loop to do.
enum Next {
    Continue,
    /// The researcher's round ends, for this reason (recorded as `researcher.finished`).
    Finish(String),
    /// Ctrl-C: stop without recording anything.
    Stop,
}

/// What the agent run of an iteration left: the usage and report of its CLI, how it ended,
/// what it broke in git (already repaired) as the attempt's reason, and the shared paths as
/// they were before it ran.
struct AgentRan {
    usage: Option<crate::agents::Usage>,
    /// Seconds the agent ran.
    seconds: f64,
    outcome: AgentOutcome,
    report: crate::agents::AgentReport,
    damage: Option<String>,
    shared_before: super::workspace::SharedState,
}

/// The attempt an iteration made, once captured from the worktree.
struct Captured {
    snap: snapshot::Snapshot,
    changed: Vec<String>,
    agent_changes: Changes,
    /// A write through a shared link, or what the agent broke in git: the attempt is rejected.
    shared_violation: Option<String>,
}

/// What decides an attempt's verdict besides its measurement.
struct Judged<'a, 'b> {
    attempt: &'b Attempt<'a>,
    head_tree: Oid,
    /// The agent failed (crashed, timed out, its edits were not applied): verdict and reason.
    agent_failure: Option<(Verdict, String)>,
    /// Nothing changed, and why.
    unchanged: Option<String>,
    report: &'b crate::agents::AgentReport,
}

impl<'a> Session<'a> {
    /// Opens the researcher's worktree (the one parked last round, brought to the new head, or
    /// a new one, set up). None when the round ends before it starts (setup failed, Ctrl-C).
    async fn open(conf: &'a Conference, id: &'a str) -> Result<Option<Session<'a>>> {
        let head = conf.state().researcher(id).head.clone();
        let repo = conf.open_repo()?;
        let (wt_path, wt, watch) = match take_idle(conf, id) {
            Some(idle) => {
                worktree::repair_gitfile(&repo, &idle.path)?;
                let wt = open_worktree(conf, &idle.path)?;
                let mut watch = idle.watch;
                let head_ref = conf.refs.researcher(id);
                snapshot::advance(
                    &wt,
                    idle.tree,
                    head.oid(),
                    Some(&head_ref),
                    Some(&mut watch),
                )?;
                (idle.path, wt, Some(watch))
            }
            None => {
                let branch = conf.refs.researcher_branch(id);
                let wt_path = conf.prepare_worktree(&researcher_label(id), Some(&branch), &head)?;
                if let Some(why) = super::workspace::ready_researcher(conf, id, &wt_path).await? {
                    if why != "interrupted" {
                        finish(conf, id, &why)?;
                    }
                    return Ok(None);
                }
                let wt = open_worktree(conf, &wt_path)?;
                let watch = start_watch(&wt, &wt_path);
                (wt_path, wt, watch)
            }
        };
        Ok(Some(Session {
            conf,
            id,
            repo,
            wt_path,
            wt,
            watch,
            started: Instant::now(),
            limit: super::stop::researcher_timeout(conf),
            agent_crashes: 0,
            iterations_since_open: 0,
        }))
    }

    /// Opens the repository and the worktree afresh every [`SESSION_REOPEN_EVERY`] iterations,
    /// which drops libgit2's object caches (and reads the worktree's index once from disk).
    fn reopen_now_and_then(&mut self, conf: &Conference) -> Result<()> {
        self.iterations_since_open += 1;
        if self.iterations_since_open >= SESSION_REOPEN_EVERY {
            self.repo = conf.open_repo()?;
            self.wt = super::workspace::open_worktree(conf, &self.wt_path)?;
            self.iterations_since_open = 0;
        }
        Ok(())
    }

    /// Records the end of the researcher's round. The worktree is exactly at the researcher's
    /// head: it is parked with its watch for the next round. Any other way out (an error,
    /// Ctrl-C) drops the watch, and the next round checks the whole worktree out again.
    fn finish(&mut self, why: &str) -> Result<()> {
        finish(self.conf, self.id, why)?;
        park(self.conf, self.id, &self.wt_path, self.watch.take())
    }

    /// What is left of the researcher's round time (`None`: no limit).
    fn remaining(&self) -> Option<Duration> {
        self.limit.map(|l| l.saturating_sub(self.started.elapsed()))
    }

    /// Why the researcher's round is over before another iteration, if it is.
    fn round_over(&self, st: &State, r: &ResearcherState) -> Option<String> {
        let conf = self.conf;
        if r.round_iterations >= conf.config.iterations_per_round {
            return Some("completed".into());
        }
        if let Some(why) = super::budget::share_used_up(&conf.config, st, self.id) {
            return Some(why);
        }
        if r.round_iterations >= super::stop::round_allotment(conf, st, self.id)
            || super::stop::time_budget_used(conf, st).is_some()
            || super::budget::used_up(&conf.config, st).is_some()
        {
            return Some("budget".into());
        }
        // The target is met (by this researcher or another): the round has its result.
        if st
            .researchers
            .values()
            .any(|o| o.round_iterations > 0 && super::stop::target_reached(conf, o.best_metric))
        {
            return Some("target reached".into());
        }
        (self.remaining() == Some(Duration::ZERO)).then(|| "timeout".into())
    }

    /// One iteration: the agent runs, its change is captured and judged (the event is the
    /// commit point), and the worktree is put back at the researcher's head.
    async fn iterate(&mut self) -> Result<Next> {
        let st = self.conf.state();
        let r = st.researcher(self.id).clone();
        if let Some(why) = self.round_over(&st, &r) {
            return Ok(Next::Finish(why));
        }
        let iteration = r.round_iterations + 1;
        self.announce(&st, &r, iteration);
        let head_tree = self.repo.find_commit(r.head.oid())?.tree_id();
        let env = (self.conf).context_env(self.id, st.round, iteration, r.best_metric);
        let mut ran = self.run_agent(&st, &r, iteration, head_tree, &env).await?;
        if let Some(next) = self
            .worktree_lost(&mut ran, &st, &r, iteration, head_tree)
            .await?
        {
            return Ok(next);
        }
        let agent_timed_out = matches!(ran.outcome, AgentOutcome::TimedOut);
        let (description, agent_failure) = match agent_result(ran.outcome, &ran.damage) {
            Ok(result) => result,
            Err(next) => return Ok(next),
        };
        crate::failpoint::hit("agent.finished");
        let (description, questions) = split_note(description);
        let captured = self.capture(&r, head_tree, ran.damage, &ran.shared_before)?;
        let tree = captured.snap.tree;
        // Nothing changed: what the agent claimed is no description; why nothing changed is.
        let unchanged = (agent_failure.is_none()
            && tree == head_tree
            && captured.snap.nested_repos.is_empty()
            && captured.shared_violation.is_none())
        .then(|| crate::agents::no_change_reason(&ran.report));
        let description = match &unchanged {
            Some(why) => format!("no change: {why}"),
            None => description.unwrap_or_else(|| default_description(&captured.changed)),
        };
        let description = crate::exec::caps::shorten(&description);
        let attempt = Attempt {
            id: self.id,
            iteration,
            tree,
            head: &r.head,
            description: &description,
            usage: ran.usage,
            agent_s: Some(ran.seconds),
            questions,
        };
        let judged = Judged {
            attempt: &attempt,
            head_tree,
            agent_failure,
            unchanged,
            report: &ran.report,
        };
        let Some(verdict) = self.judge(&st, &r, &captured, judged, &env).await? else {
            return Ok(Next::Stop);
        };
        self.put_back(&r, verdict, &captured.agent_changes)?;
        self.report_line(&st, iteration, verdict, &description);
        Ok(self.after(agent_timed_out))
    }

    /// The progress line before the agent runs.
    fn announce(&self, st: &State, r: &ResearcherState, iteration: u32) {
        let last_reason = (r.last_reason.as_deref())
            .map(|w| format!(" ({})", crate::render::format::one_line(w, 60)))
            .unwrap_or_default();
        self.conf.ui.researcher(
            self.id,
            &format!(
                "round {} iteration {iteration}/{}  best {}  last {}{last_reason}",
                st.round,
                self.conf.config.iterations_per_round,
                fmt_metric(r.best_metric),
                r.last_verdict.as_deref().unwrap_or("-"),
            ),
        );
    }

    /// The agent's prompt for this iteration.
    fn prompt(&self, st: &State, r: &ResearcherState, iteration: u32) -> Result<String> {
        let conf = self.conf;
        let briefing = super::briefing::gather(conf, self.id)?;
        let brief = (conf.config.brief.as_deref())
            .and_then(|path| prompt::read_brief(&self.repo, &st.baseline_commit, path));
        let assignment = prompt::assignment(&conf.config, self.id);
        Ok(crate::render::prompt::render(&PromptContext {
            assignment: &assignment,
            researcher: self.id,
            round: st.round,
            iteration,
            best_metric: r.best_metric,
            conference_best: st.best.metric,
            shared_knowledge: &st.shared_knowledge,
            briefing: &briefing,
            stuck_level: r.stuck_level,
            respawned: r.respawned,
            endgame: super::stop::is_endgame(conf, st),
            devils_advocate: conf.config.devils_advocate_id().as_deref() == Some(self.id),
            frozen: conf.guard.frozen_patterns(),
            brief: brief.as_ref(),
            guidance: &st.guidance,
            questions: &st.questions,
            human_in_the_loop: conf.config.loop_mode == crate::config::LoopMode::HumanInTheLoop,
            knowledge_brief: st.knowledge_brief.as_ref().map(|k| k.text.as_str()),
        }))
    }

    /// Runs the agent with its prompt, then puts back what it broke in git (config first,
    /// before a worktree is made again).
    async fn run_agent(
        &mut self,
        st: &State,
        r: &ResearcherState,
        iteration: u32,
        head_tree: Oid,
        env: &[(String, String)],
    ) -> Result<AgentRan> {
        let (conf, id) = (self.conf, self.id);
        let prompt = self.prompt(st, r, iteration)?;
        let refs_before = crate::git::traces::read(self.repo.commondir());
        super::integrity::ConfigGuard::take(&self.repo, &conf.run_dir);
        let shared_before = super::workspace::SharedState::read(conf);
        let agent_timeout = conf.config.agent.timeout;
        let call = AgentCall {
            researcher: id,
            round: st.round,
            iteration,
            worktree: &self.wt_path,
            prompt: &prompt,
            timeout: Some(
                self.remaining()
                    .map_or(agent_timeout, |r| r.min(agent_timeout)),
            ),
            env: env.to_vec(),
            head_tree,
            attempts: r.attempts,
        };
        let began = Instant::now();
        let run = agent::run(conf, call).await?;
        let seconds = began.elapsed().as_secs_f64();
        let commondir = self.repo.commondir();
        for warning in crate::git::traces::undo_agents_changes(&refs_before, commondir) {
            conf.ui.warn(&warning);
        }
        Ok(AgentRan {
            usage: run.usage(),
            seconds,
            outcome: run.outcome,
            report: run.report,
            damage: super::integrity::repair_after_agent(conf),
            shared_before,
        })
    }

    /// An agent that removed its worktree: it is made again and the attempt recorded as
    /// rejected (then the loop goes on, or the round ends when setup fails there). A worktree
    /// whose link was broken is linked again, and that is part of the attempt's reason.
    async fn worktree_lost(
        &mut self,
        ran: &mut AgentRan,
        st: &State,
        r: &ResearcherState,
        iteration: u32,
        head_tree: Oid,
    ) -> Result<Option<Next>> {
        use super::integrity::WorktreeDamage;
        match super::integrity::worktree_damage(&self.wt, &self.wt_path) {
            Some(WorktreeDamage::Lost(why)) => {
                let why = with_damage(why, ran.damage.as_deref());
                self.watch = None;
                let attempt = Attempt {
                    id: self.id,
                    iteration,
                    tree: head_tree,
                    head: &r.head,
                    description: "worktree removed",
                    usage: ran.usage,
                    agent_s: Some(ran.seconds),
                    questions: vec![],
                };
                let wt_path = self.wt_path.clone();
                match remake_worktree(self.conf, &attempt, st.round, &wt_path, why).await? {
                    Err(setup_failed) => return Ok(Some(Next::Finish(setup_failed))),
                    Ok((wt, watch)) => (self.wt, self.watch) = (wt, watch),
                }
                Ok(Some(Next::Continue))
            }
            Some(WorktreeDamage::Relinked(why)) => {
                ran.damage = Some(with_damage(why, ran.damage.as_deref()));
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Whatever the agent left is the attempt, even when it failed: it is captured (the
    /// worktree's head put back first, should the agent have committed), then judged, then
    /// reverted.
    fn capture(
        &mut self,
        r: &ResearcherState,
        head_tree: Oid,
        damage: Option<String>,
        shared_before: &super::workspace::SharedState,
    ) -> Result<Captured> {
        let agent_changes = take_changes(&mut self.watch);
        worktree::repair_gitfile(&self.repo, &self.wt_path)?;
        restore_head(&self.wt, &self.conf.refs.researcher(self.id), &r.head)?;
        let snap = match &agent_changes {
            Changes::Paths(paths) => snapshot::capture_paths(&self.wt, paths)?,
            Changes::Everything => snapshot::capture(&self.wt)?,
        };
        settle(&mut self.watch);
        let changed = snapshot::changed_paths(&self.repo, head_tree, snap.tree)?;
        let shared_violation =
            damage.or(shared_before.violation(self.conf, &self.wt_path, &changed));
        Ok(Captured {
            snap,
            changed,
            agent_changes,
            shared_violation,
        })
    }

    /// Records the attempt with its verdict: the agent's failure, no change, a rejection (the
    /// snapshot, the frozen paths, the shared links), or the measured verdict once the guards
    /// passed. None on Ctrl-C (nothing recorded).
    async fn judge(
        &mut self,
        st: &State,
        r: &ResearcherState,
        captured: &Captured,
        judged: Judged<'_, '_>,
        env: &[(String, String)],
    ) -> Result<Option<Verdict>> {
        let conf = self.conf;
        let attempt = judged.attempt;
        let commit = if attempt.tree == judged.head_tree {
            None
        } else {
            Some(commit_attempt(conf, &self.repo, attempt)?)
        };
        let unmeasured = |verdict: Verdict, commit: Option<Oid>, why: String| -> Result<Verdict> {
            let failed = failed_eval(verdict.as_str(), &why);
            record_iteration(
                conf,
                attempt,
                commit,
                Measured::not(&failed),
                verdict,
                Some(why),
            )?;
            Ok(verdict)
        };
        if let Some((kind, why)) = judged.agent_failure {
            if matches!(kind, Verdict::Crashed | Verdict::Timeout) {
                self.agent_crashes += 1;
            }
            return unmeasured(kind, commit, why).map(Some);
        }
        self.agent_crashes = 0;
        if attempt.tree == judged.head_tree
            && captured.snap.nested_repos.is_empty()
            && captured.shared_violation.is_none()
        {
            let why = judged.unchanged.unwrap_or_default();
            return unmeasured(Verdict::NoChange, None, why).map(Some);
        }
        let rejection = (captured.snap.rejection())
            .or_else(|| conf.guard.violation(&captured.changed))
            .or(captured.shared_violation.clone());
        if let Some(why) = rejection {
            return unmeasured(Verdict::Rejected, commit, why).map(Some);
        }
        self.measure(st, r, attempt, commit, judged.report, env)
            .await
    }

    /// Evaluates the attempt, decides keep or revert, runs the guards on a better one, and
    /// records it. None on Ctrl-C.
    async fn measure(
        &mut self,
        st: &State,
        r: &ResearcherState,
        attempt: &Attempt<'_>,
        commit: Option<Oid>,
        report: &crate::agents::AgentReport,
        env: &[(String, String)],
    ) -> Result<Option<Verdict>> {
        let (conf, id, iteration) = (self.conf, self.id, attempt.iteration);
        let (result, of_the_tree) = evaluate_cached(
            conf,
            (id, st.round, iteration),
            (
                attempt.tree,
                anyhow::Context::context(commit, "an attempt measured without its commit")?,
            ),
            &self.wt_path,
            env.to_vec(),
            self.remaining(),
            super::pruning::rule_for(conf, st, id),
        )
        .await?;
        if result.status == EvalStatus::Interrupted {
            return Ok(None);
        }
        crate::failpoint::hit("eval.finished");
        let verdict = keep::verdict(
            &result.status,
            result.metric,
            r.best_metric,
            conf.direction(),
        );
        // A better candidate must pass the guard commands before it is kept.
        let label = format!("{id}-r{}-i{iteration}", st.round);
        // What the CLI reported (a refused edit, a limit) when nothing else is wrong.
        let reason = result.reason.clone().or_else(|| report.problem.clone());
        let Some((verdict, reason)) =
            super::guards::gate(conf, verdict, reason, &self.wt_path, env, &label).await?
        else {
            return Ok(None);
        };
        let measured = Measured {
            result: &result,
            of_the_tree,
        };
        record_iteration(conf, attempt, commit, measured, verdict, reason)?;
        Ok(Some(verdict))
    }

    /// The effects of the recorded event: the branch moves when the attempt was kept, and the
    /// worktree goes back to the researcher's head — only what the agent and the evaluation
    /// touched, plus the files they left, ignored or not.
    fn put_back(
        &mut self,
        r: &ResearcherState,
        verdict: Verdict,
        agent_changes: &Changes,
    ) -> Result<()> {
        let (conf, id) = (self.conf, self.id);
        let head_now = conf.state().researcher(id).head.clone();
        crate::failpoint::hit("iteration.recorded");
        if verdict == Verdict::Kept {
            conf.move_branch(&conf.refs.researcher(id), &head_now, Some(&r.head))?;
            crate::failpoint::hit("branch.moved");
        }
        let eval_changes = take_changes(&mut self.watch);
        let touched = if verdict == Verdict::Kept {
            eval_changes
        } else {
            watch::union(agent_changes, &eval_changes)
        };
        let branch_ref = conf.refs.researcher(id);
        // Files a `.gitignore` hid until the revert put it back go too.
        let leftovers = watch::union(agent_changes, &touched);
        let head_now = head_now.oid();
        match touched {
            Changes::Paths(paths) => snapshot::reset_paths(
                &self.wt,
                head_now,
                Some(&branch_ref),
                &paths,
                verdict == Verdict::Kept,
            )?,
            Changes::Everything => snapshot::reset(&self.wt, head_now, Some(&branch_ref))?,
        }
        leftovers::remove_untracked(
            &self.wt,
            &leftovers,
            &super::workspace::kept_ignored_paths(conf, &self.wt),
        )?;
        super::workspace::link_shared(conf, &self.wt_path)?;
        settle(&mut self.watch);
        Ok(())
    }

    /// The line that reports the attempt's verdict.
    fn report_line(&self, st: &State, iteration: u32, verdict: Verdict, description: &str) {
        let now = self.conf.state();
        let why = (now.researcher(self.id).last_reason.as_deref())
            .map(|w| crate::render::format::one_line(w, 160))
            .filter(|w| !description.contains(w.as_str()))
            .map(|w| format!(" — {w}"))
            .unwrap_or_default();
        self.conf.ui.info(&format!(
            "  {} r{} i{iteration}: {verdict:<9} best {}  {description}{why}",
            self.id,
            st.round,
            fmt_metric(now.researcher(self.id).best_metric),
        ));
    }

    /// Whether the researcher's round ends after this iteration: out of time after an agent
    /// timeout, too many agent failures in a row, or stuck at level 3. `builtin:tune` is never
    /// stuck that way: it proposes a point not yet measured every time (it says when it has
    /// none left), so its round runs to its allotment and a lone tuner spends its whole budget.
    fn after(&self, agent_timed_out: bool) -> Next {
        if agent_timed_out && self.limit.is_some_and(|l| self.started.elapsed() >= l) {
            return Next::Finish("timeout".into());
        }
        if self.agent_crashes >= CRASHES_TO_FAIL {
            return Next::Finish("failed".into());
        }
        let tuner = self.conf.config.agent.kind() == crate::agents::Kind::Tune;
        if self.conf.state().researcher(self.id).stuck_level >= 3 && !tuner {
            return Next::Finish("stuck".into());
        }
        Next::Continue
    }
}

/// How the agent run ended, as the attempt's description (what the agent said it did) and its
/// failure (verdict and reason; a failed run that also broke git says both). Err: the loop's
/// next step instead (Ctrl-C, or the agent's quota is exhausted).
#[allow(clippy::type_complexity)]
fn agent_result(
    outcome: AgentOutcome,
    damage: &Option<String>,
) -> std::result::Result<(Option<String>, Option<(Verdict, String)>), Next> {
    let (description, failure) = match outcome {
        AgentOutcome::Interrupted => return Err(Next::Stop),
        AgentOutcome::Exhausted => return Err(Next::Finish("exhausted".into())),
        AgentOutcome::Done(note) => (note, None),
        AgentOutcome::Crashed(why) => (None, Some((Verdict::Crashed, why))),
        AgentOutcome::Unapplied { verdict, reason } => (None, Some((verdict, reason))),
        AgentOutcome::TimedOut => (
            None,
            Some((
                Verdict::Timeout,
                "agent ran past the researcher timeout".to_string(),
            )),
        ),
    };
    let failure = failure.map(|(kind, why)| (kind, with_damage(why, damage.as_deref())));
    Ok((description, failure))
}

/// The agent's note less its `QUESTION: …` lines, and those questions.
fn split_note(note: Option<String>) -> (Option<String>, Vec<crate::model::talk::Asked>) {
    match note {
        Some(note) => {
            let (text, asked) = crate::model::talk::split_questions(&note);
            ((!text.is_empty()).then_some(text), asked)
        }
        None => (None, Vec::new()),
    }
}

/// `why`, followed by what the agent broke in git when it did.
fn with_damage(why: String, damage: Option<&str>) -> String {
    match damage {
        Some(d) => format!("{why}; {d}"),
        None => why,
    }
}

/// An agent removed its worktree: it is made again from the researcher's branch (and set up),
/// and the attempt recorded as rejected with `why`. Returns the new handle and watch, or why
/// setup failed.
async fn remake_worktree(
    conf: &Conference,
    attempt: &Attempt<'_>,
    round: u32,
    wt_path: &std::path::Path,
    why: String,
) -> Result<std::result::Result<(Repository, Option<Watch>), String>> {
    let id = attempt.id;
    let branch = conf.refs.researcher_branch(id);
    conf.prepare_worktree(&researcher_label(id), Some(&branch), attempt.head)?;
    if let Some(failed) = super::workspace::ready_researcher(conf, id, wt_path).await? {
        return Ok(Err(failed));
    }
    let wt = open_worktree(conf, wt_path)?;
    let watch = start_watch(&wt, wt_path);
    let failed = failed_eval(Verdict::Rejected.as_str(), &why);
    record_iteration(
        conf,
        attempt,
        None,
        Measured::not(&failed),
        Verdict::Rejected,
        Some(why),
    )?;
    conf.ui.info(&format!(
        "  {id} r{round} i{}: rejected  worktree removed",
        attempt.iteration
    ));
    Ok(Ok((wt, watch)))
}

/// Seconds to a tenth (events and notes stay readable).
fn tenths(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}

fn fmt_metric(m: Option<f64>) -> String {
    m.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into())
}

fn failed_eval(status: &str, why: &str) -> EvalResult {
    EvalResult {
        metric: None,
        runs: vec![],
        sub_metrics: Default::default(),
        status: status.to_string(),
        reason: Some(why.to_string()),
        seconds: 0.0,
        ..Default::default()
    }
}

/// A researcher worktree left exactly at its head's tree at the end of a research phase, with
/// the watch that has seen every change since: the next round start rewrites only what the new
/// best changed (`snapshot::advance`) instead of checking out the whole worktree.
pub struct IdleWorktree {
    path: std::path::PathBuf,
    tree: Oid,
    watch: Watch,
}

fn take_idle(conf: &Conference, id: &str) -> Option<IdleWorktree> {
    let idle = conf.idle_worktrees.lock().ok()?.remove(id)?;
    idle.path.join(".git").exists().then_some(idle)
}

fn park(conf: &Conference, id: &str, path: &std::path::Path, watch: Option<Watch>) -> Result<()> {
    let Some(watch) = watch else {
        return Ok(());
    };
    let head = conf.state().researcher(id).head.clone();
    let tree = conf.open_repo()?.find_commit(head.oid())?.tree_id();
    if let Ok(mut idle) = conf.idle_worktrees.lock() {
        let path = path.to_path_buf();
        idle.insert(id.to_string(), IdleWorktree { path, tree, watch });
    }
    Ok(())
}

/// Watches the researcher's worktree so that snapshots and reverts touch only what changed.
fn start_watch(wt: &Repository, wt_path: &std::path::Path) -> Option<Watch> {
    let index_file = wt.path().join("index");
    let skip = |p: &std::path::Path| wt.is_path_ignored(p).unwrap_or(false);
    Watch::start(wt_path, &index_file, &skip)
}

fn take_changes(watch: &mut Option<Watch>) -> Changes {
    watch.as_mut().map_or(Changes::Everything, Watch::take)
}

fn settle(watch: &mut Option<Watch>) {
    if let Some(w) = watch.as_mut() {
        w.settle();
    }
}

fn open_worktree(conf: &Conference, path: &std::path::Path) -> Result<Repository> {
    let repo = conf.open_repo()?;
    worktree::repair_gitfile(&repo, path)?;
    super::workspace::open_worktree(conf, path)
}

/// Evaluates a tree in the researcher's worktree, or returns the cached result for it.
/// `deadline` is what is left of the researcher's round time: an evaluation it cuts short is a
/// timeout of this attempt, not a property of the tree, so it is not cached. Nor is a run that
/// `prune` stopped: it was measured against this researcher's best, not in full. `commit` is the
/// attempt's commit of `tree`, what a remote launcher ships.
async fn evaluate_cached(
    conf: &Conference,
    (id, round, iteration): (&str, u32, u32),
    (tree, commit): (Oid, Oid),
    wt_path: &std::path::Path,
    env: Vec<(String, String)>,
    deadline: Option<Duration>,
    prune: Option<evaluate::PruneRule>,
) -> Result<(EvalResult, bool)> {
    let commit = commit.to_string();
    let eval_timeout = conf.config.evaluation.timeout;
    let cut_short = deadline.is_some_and(|d| d < eval_timeout);
    let timeout = deadline.map_or(eval_timeout, |d| d.min(eval_timeout));
    let st = conf.state();
    let key = files::eval_cache(&st.eval_settings, &tree.to_string());
    // One evaluation per tree even when two researchers produce it at the same moment: the
    // second waits for the first one's result instead of starting the command again. Not with
    // pruning: a run is pruned against its own researcher's best, so each waits for its own.
    let cell_key = match &prune {
        Some(_) => format!("{key}#{id}"),
        None => key.clone(),
    };
    let cell = conf
        .evaluations
        .lock()
        .unwrap()
        .entry(cell_key.clone())
        .or_default()
        .clone();
    let result = cell
        .get_or_try_init(|| async {
            if let Some(bytes) = conf.read_state_file(&key)? {
                if let Ok(cached) = serde_json::from_slice::<EvalResult>(&bytes) {
                    return Ok::<_, anyhow::Error>(cached);
                }
            }
            let metric = evaluate::metric_name(&conf.config);
            evaluate::evaluate(EvalRequest {
                command: conf.config.eval_command(),
                metric: &metric,
                last_number: conf.config.evaluation.last_number,
                runs: conf.config.evaluation.repeats,
                timeout,
                cwd: wt_path,
                commit: &commit,
                env,
                log_prefix: conf.log_path(&format!("{id}-r{round}-i{iteration}.eval")),
                scheduler: &conf.scheduler,
                prune,
                launcher: &conf.launcher,
            })
            .await
        })
        .await?
        .clone();
    forget_finished_evaluations(conf);
    let mut result = result;
    let cut = cut_short && result.status == EvalStatus::Timeout;
    // A launcher that could not run it (a host down, a queue timeout) measured nothing either.
    let of_the_tree = !cut && !result.launcher_failed && result.status != EvalStatus::Pruned;
    if result.status == EvalStatus::Interrupted || !of_the_tree {
        conf.evaluations.lock().unwrap().remove(&cell_key);
    }
    if cut {
        result.reason = Some("the evaluation ran past the researcher timeout".into());
    }
    Ok((result, of_the_tree))
}

/// Evaluations kept in memory by tree before the finished ones are let go.
const EVALUATIONS_KEPT: usize = 256;

/// Lets go of the finished evaluations once more than `EVALUATIONS_KEPT` are held: the map is
/// there so that two researchers producing one tree at once run it once; a finished result is in
/// the evaluation cache of the state (or its pending batch) by the time it is recorded, where
/// `evaluate_tree` and `agent`'s check find it. Kept whole, the map grew with every tree of a
/// never-stop run.
fn forget_finished_evaluations(conf: &Conference) {
    let mut evaluations = conf.evaluations.lock().unwrap();
    if evaluations.len() > EVALUATIONS_KEPT {
        evaluations.retain(|_, cell| !cell.initialized());
    }
}

/// What an attempt measured: the result, and whether it is a property of the tree (an
/// evaluation that ran to its end, or crashed or timed out by itself). Agent failures,
/// rejections and evaluations cut short by the researcher's time limit say nothing about the
/// tree, so the next attempt that produces it is evaluated.
#[derive(Clone, Copy)]
struct Measured<'a> {
    result: &'a EvalResult,
    of_the_tree: bool,
}

impl<'a> Measured<'a> {
    fn not(result: &'a EvalResult) -> Self {
        Measured {
            result,
            of_the_tree: false,
        }
    }
}

/// The note on an attempt's commit: its verdict and measurements, and how long it ran.
fn attempt_note(
    conf: &Conference,
    commit: Oid,
    record: &AttemptRecord,
    result: &EvalResult,
) -> Note {
    AttemptNote {
        commit: commit.into(),
        conference: conf.name.clone(),
        researcher: record.researcher.clone(),
        round: record.round,
        iteration: record.iteration,
        verdict: record.verdict.clone(),
        metric: result.metric,
        runs: result.runs.clone(),
        sub_metrics: result.sub_metrics.clone(),
        reason: record.reason.clone(),
        agent_s: record.agent_s,
        eval_s: record.eval_s,
        curve: result.curve.clone(),
        pruned: result.pruned,
        placement: result.placement.clone(),
    }
    .into()
}

/// Records `researcher.iteration`: the commit point of an attempt.
fn record_iteration(
    conf: &Conference,
    a: &Attempt,
    commit: Option<Oid>,
    measured: Measured,
    verdict: Verdict,
    reason: Option<String>,
) -> Result<()> {
    let result = measured.result;
    let st = conf.state();
    let r = st.researcher(a.id);
    let delta = match (result.metric, r.best_metric) {
        (Some(m), Some(b)) => Some(m - b).filter(|d| d.is_finite()),
        _ => None,
    };
    // Events and notes stay small whatever a run printed.
    let reason = reason.map(|r| crate::exec::caps::shorten(&r));
    // A result measured by an earlier attempt (the cache) took no time now.
    let eval_s = (result.seconds > 0.0).then_some(result.seconds);
    let record = AttemptRecord {
        round: st.round,
        researcher: a.id.to_string(),
        iteration: a.iteration,
        commit: Some(commit.map_or_else(|| a.head.clone(), CommitId::from)),
        tree: a.tree.to_string(),
        metric: result.metric,
        delta,
        verdict: verdict.into(),
        description: crate::exec::caps::shorten(a.description.lines().next().unwrap_or("")),
        reason: reason.clone(),
        timestamp: super::now_iso(),
        sub_metrics: result.sub_metrics.clone(),
        tokens: a.usage.map(Tokens::of),
        cost_usd: a.usage.and_then(|u| u.cost_usd),
        agent_s: a.agent_s.map(tenths),
        eval_s: eval_s.map(tenths),
        placement: result.placement.clone(),
    };
    let note = commit.map(|c| attempt_note(conf, c, &record, result));
    let event = events::Iteration {
        researcher: a.id.to_string(),
        round: st.round,
        iteration: a.iteration,
        metric_value: result.metric,
        delta: delta.map(crate::render::tsv::signed),
        status: verdict.into(),
        commit: commit.map(CommitId::from),
        tree: a.tree.to_string(),
        description: record.description.clone(),
        reason: reason.clone(),
        sub_metrics: result.sub_metrics.clone(),
        evaluated: measured.of_the_tree,
        notes: note.map(|n| n.with_usage(a.usage)).into_iter().collect(),
        tokens: a.usage.map(Tokens::of),
        cost_usd: a.usage.and_then(|u| u.cost_usd),
        agent_s: record.agent_s,
        eval_s: record.eval_s,
        questions: a.questions.clone(),
        placement: result.placement.clone().map(Box::new),
    };
    let summary = format!(
        "{} r{} i{} {} {}",
        a.id,
        st.round,
        a.iteration,
        verdict,
        result.metric.map(|m| format!("{m}")).unwrap_or_default()
    );
    let mut produced = vec![StateChange::AppendLine(
        files::attempts(st.round),
        serde_json::to_string(&record)?,
    )];
    // A measurement of the tree (an agent failure, a rejection or a cut-short run is not one)
    // is cached, so the next attempt that produces the same tree is not measured again.
    let cacheable = commit.is_some()
        && measured.of_the_tree
        && matches!(
            EvalStatus::parse(&result.status),
            Some(EvalStatus::Ok | EvalStatus::Crashed | EvalStatus::Timeout)
        );
    if cacheable {
        produced.push(StateChange::Put(
            files::eval_cache(&st.eval_settings, &a.tree.to_string()),
            serde_json::to_vec(result)?,
        ));
    }
    conf.record(Event::Iteration(event), &summary, produced)?;
    record_stuck(conf, a.id, st.round, verdict)
}

/// Records `researcher.stuck` when the attempt just recorded made the researcher enter a new
/// stuck level.
fn record_stuck(conf: &Conference, id: &str, round: u32, verdict: Verdict) -> Result<()> {
    let r = conf.state().researcher(id).clone();
    if verdict == Verdict::Kept || !keep::enters_a_stuck_level(r.consecutive_fails) {
        return Ok(());
    }
    let level = r.stuck_level;
    conf.record(
        Event::Stuck(events::Stuck {
            researcher: id.to_string(),
            round,
            stuck_level: level,
            consecutive_non_improving: r.consecutive_fails,
        }),
        &format!("{id} at level {level}"),
        vec![],
    )
}

/// Records that a researcher is done with phase 1 of this round; the last one moves the
/// conference to the poster session.
fn finish(conf: &Conference, id: &str, why: &str) -> Result<()> {
    let st = conf.state();
    conf.record(
        Event::Finished(events::Finished {
            researcher: id.to_string(),
            round: st.round,
            reason: why.to_string(),
            iterations: st.researcher(id).round_iterations,
        }),
        &format!("{id} finished round {} ({why})", st.round),
        vec![],
    )?;
    conf.ui
        .researcher(id, &format!("finished round {} ({why})", st.round));
    Ok(())
}
