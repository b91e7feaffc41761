//! A researcher's session of phase 1: its worktree opened once for the round, and the loop of
//! iterations (announce, prompt, agent, capture, judge, put back) until its round is over.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::agent_run::{agent_result, split_branch, split_note};
use super::parked::{open_worktree, park, start_watch, take_idle};
use super::record::fmt_metric;
use super::*;
use crate::agents::call::AgentOutcome;
use crate::engine::agent::prompt;
use crate::engine::record::attempt::{default_description, Attempt, AttemptBranch};
use crate::engine::state::{ResearcherState, State};
use crate::engine::Conference;
use crate::git::{snapshot, worktree};
use crate::model::briefing::PromptContext;
use crate::model::Verdict;

/// Iterations after which a researcher's session opens its repository and worktree afresh.
/// libgit2 keeps every commit and small tree a handle reads in its object cache (up to 256 MB):
/// a never-stop run grew by about 13 KB an iteration (26 MB at 1,000 iterations, 175 MB at
/// 10,000) while the recorder and each researcher's session kept theirs for the whole round.
/// (The recorder reopens its own more often: `recorder::RECORDER_REOPEN_EVERY`.)
pub(super) const SESSION_REOPEN_EVERY: u32 = 256;

impl<'a> Session<'a> {
    /// Opens the researcher's worktree (the one parked last round, brought to the new head, or
    /// a new one, set up). None when the round ends before it starts (setup failed, Ctrl-C).
    pub(super) async fn open(conf: &'a Conference, id: &'a str) -> Result<Option<Session<'a>>> {
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
                if let Some(why) =
                    crate::engine::agent::workspace::ready_researcher(conf, id, &wt_path).await?
                {
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
            limit: crate::engine::stop::rules::researcher_timeout(conf),
            agent_crashes: 0,
            iterations_since_open: 0,
            at: head,
            sweep_line: None,
        }))
    }

    /// Opens the repository and the worktree afresh every [`SESSION_REOPEN_EVERY`] iterations,
    /// which drops libgit2's object caches (and reads the worktree's index once from disk).
    pub(super) fn reopen_now_and_then(&mut self, conf: &Conference) -> Result<()> {
        self.iterations_since_open += 1;
        if self.iterations_since_open >= SESSION_REOPEN_EVERY {
            self.repo = conf.open_repo()?;
            self.wt = crate::engine::agent::workspace::open_worktree(conf, &self.wt_path)?;
            self.iterations_since_open = 0;
        }
        Ok(())
    }

    /// Records the end of the researcher's round. The worktree is exactly at the researcher's
    /// head: it is parked with its watch for the next round. Any other way out (an error,
    /// Ctrl-C) drops the watch, and the next round checks the whole worktree out again.
    pub(super) fn finish(&mut self, why: &str) -> Result<()> {
        finish(self.conf, self.id, why)?;
        park(
            self.conf,
            self.id,
            &self.wt_path,
            self.watch.take(),
            &self.at,
        )
    }

    /// What is left of the researcher's round time (`None`: no limit).
    pub(super) fn remaining(&self) -> Option<Duration> {
        self.limit.map(|l| l.saturating_sub(self.started.elapsed()))
    }

    /// Why the researcher's round is over before another iteration, if it is.
    pub(super) fn round_over(&self, st: &State, r: &ResearcherState) -> Option<String> {
        let conf = self.conf;
        if r.round_iterations >= conf.config.iterations_per_round {
            return Some("completed".into());
        }
        if let Some(why) = crate::engine::stop::budget::share_used_up(&conf.config, st, self.id) {
            return Some(why);
        }
        if r.round_iterations >= crate::engine::stop::rules::round_allotment(conf, st, self.id)
            || crate::engine::stop::rules::time_budget_used(conf, st).is_some()
            || crate::engine::stop::budget::used_up(&conf.config, st).is_some()
        {
            return Some("budget".into());
        }
        // The target is met (by this researcher or another): the round has its result.
        if st.researchers.values().any(|o| {
            o.round_iterations > 0
                && crate::engine::stop::rules::target_reached(conf, o.best_metric)
        }) {
            return Some("target reached".into());
        }
        (self.remaining() == Some(Duration::ZERO)).then(|| "timeout".into())
    }
}

impl<'a> Session<'a> {
    /// One iteration: the agent runs, its change is captured and judged (the event is the
    /// commit point), and the worktree is put back at the researcher's head.
    pub(super) async fn iterate(&mut self) -> Result<Next> {
        let st = self.conf.state();
        let r = st.researcher(self.id).clone();
        if let Some(why) = self.round_over(&st, &r) {
            return Ok(Next::Finish(why));
        }
        let iteration = r.round_iterations + 1;
        let from = self.start_node(&st, &r);
        let base = from.as_ref().map_or(&r.head, |n| &n.commit).clone();
        self.go_to(&base, &r)?;
        self.announce(&st, &r, iteration);
        let head_tree = self.repo.find_commit(base.oid())?.tree_id();
        let mut env = (self.conf).context_env(self.id, st.round, iteration, r.best_metric);
        env.extend(from.as_ref().map(node_env).into_iter().flatten());
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
        let (description, request) = match &from {
            Some(_) => split_branch(description),
            None => (description, None),
        };
        let (description, sweep_request) = match self.conf.config.parameter_sweep {
            true => super::sweep::split(description),
            false => (description, None),
        };
        let damage = ran
            .damage
            .or(ran.foreign.as_ref().map(|(_, why)| why.clone()));
        let foreign = ran.foreign.map(|(seen, _)| seen);
        let captured = self.capture(&r, &base, head_tree, damage, foreign, &ran.shared_before)?;
        let tree = captured.snap.tree;
        let (sweep, sweep_warning) = match ran.batch.take() {
            Some(batch) => (Some(super::sweep::Plan::batch(batch)), None),
            None => self.plan(sweep_request, tree),
        };
        let sweep_paths = sweep.as_ref().map(|p| p.paths());
        // Nothing changed: what the agent claimed is no description; why nothing changed is.
        let unchanged = (agent_failure.is_none()
            && sweep.is_none()
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
            head: &base,
            description: &description,
            usage: ran.usage,
            agent_s: Some(ran.seconds),
            questions,
            remark: ran.remark.as_deref(),
            branch: from.map(|from| AttemptBranch { from, request }),
            sweep: None,
            sweep_warning,
        };
        let judged = Judged {
            attempt: &attempt,
            head_tree,
            agent_failure,
            unchanged,
            report: &ran.report,
            sweep,
        };
        self.sweep_line = None;
        let Some(verdict) = self.judge(&st, &r, &captured, judged, &env).await? else {
            return Ok(Next::Stop);
        };
        // The worktree holds the agent's value of a swept literal (the tuner's first point),
        // not the chosen one's.
        let also = sweep_paths
            .map(|p| crate::git::watch::Changes::Paths(p.into_iter().map(Into::into).collect()));
        self.put_back(&r, &base, verdict, &captured.agent_changes, also)?;
        self.report_line(&st, iteration, verdict, &description);
        Ok(self.after(agent_timed_out))
    }

    /// The progress line before the agent runs.
    pub(super) fn announce(&self, st: &State, r: &ResearcherState, iteration: u32) {
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
    pub(super) fn prompt(&self, st: &State, r: &ResearcherState, iteration: u32) -> Result<String> {
        let conf = self.conf;
        let briefing = crate::engine::agent::briefing::gather(conf, self.id)?;
        let brief = (conf.config.brief.as_deref())
            .and_then(|path| prompt::read_brief(&self.repo, &st.baseline_commit, path));
        let assignment = prompt::assignment(&conf.config, self.id);
        let tree = self
            .start_node(st, r)
            .map(|from| crate::model::tree::TreeBrief {
                mode: conf.config.branching,
                from,
                branches: r.branches.clone(),
                max_alive: conf.config.max_alive_branches,
                minimize: conf.direction() == Some(crate::config::Direction::Minimize),
            });
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
            endgame: crate::engine::stop::rules::is_endgame(conf, st),
            devils_advocate: conf.config.devils_advocate_id().as_deref() == Some(self.id),
            frozen: conf.guard.frozen_patterns(),
            brief: brief.as_ref(),
            guidance: &st.guidance,
            questions: &st.questions,
            human_in_the_loop: conf.config.loop_mode == crate::config::LoopMode::HumanInTheLoop,
            knowledge_brief: st.knowledge_brief.as_ref().map(|k| k.text.as_str()),
            tree: tree.as_ref(),
            sweep: conf.config.parameter_sweep,
        }))
    }
}

impl<'a> Session<'a> {
    /// The line that reports the attempt's verdict.
    pub(super) fn report_line(
        &self,
        st: &State,
        iteration: u32,
        verdict: Verdict,
        description: &str,
    ) {
        let now = self.conf.state();
        let why = (now.researcher(self.id).last_reason.as_deref())
            .map(|w| crate::render::format::one_line(w, 160))
            .filter(|w| !description.contains(w.as_str()))
            .map(|w| format!(" — {w}"))
            .unwrap_or_default();
        let sweep = (self.sweep_line.as_deref())
            .map(|s| format!(" — {s}"))
            .unwrap_or_default();
        // An agent's note of several lines (or a very long one) is its description: the line
        // keeps it on one line, cut where it runs long.
        let said = crate::render::format::one_line(description, 300);
        self.conf.ui.info(&format!(
            "  {} r{} i{iteration}: {verdict:<9} best {}  {said}{why}{sweep}",
            self.id,
            st.round,
            fmt_metric(now.researcher(self.id).best_metric),
        ));
    }

    /// Whether the researcher's round ends after this iteration: out of time after an agent
    /// timeout, too many agent failures in a row, or stuck at level 3. `builtin:tune` is never
    /// stuck that way: it proposes a point not yet measured every time (it says when it has
    /// none left), so its round runs to its allotment and a lone tuner spends its whole budget.
    pub(super) fn after(&self, agent_timed_out: bool) -> Next {
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

/// What an agent and its evaluation learn of the node an attempt starts from (branching on):
/// its commit, its metric and its name.
fn node_env(node: &crate::model::tree::Node) -> Vec<(String, String)> {
    vec![
        ("CONFERENCE_NODE".into(), node.commit.to_string()),
        (
            "CONFERENCE_NODE_METRIC".into(),
            node.metric.map(|m| m.to_string()).unwrap_or_default(),
        ),
        ("CONFERENCE_NODE_LABEL".into(), node.label.clone()),
    ]
}
