//! An attempt captured from the worktree, judged (rejected, measured or taken from the
//! evaluation cache, kept or reverted) and the worktree put back at the researcher's head.

use std::time::Duration;

use anyhow::Result;
use git2::Oid;

use super::parked::{settle, take_changes};
use super::record::{failed_eval, record_iteration};
use super::*;
use crate::engine::measure::evaluate::{self, EvalRequest, EvalResult};
use crate::engine::record::attempt::{commit_attempt, restore_base, Attempt};
use crate::engine::record::tree;
use crate::engine::state::{files, ResearcherState, State};
use crate::engine::Conference;
use crate::git::watch::{self, Changes};
use crate::git::{leftovers, snapshot, worktree};
use crate::model::{EvalStatus, Verdict};
use crate::protocol::keep;

impl<'a> Session<'a> {
    /// Whatever the agent left is the attempt, even when it failed: it is captured (the
    /// worktree's head put back first, should the agent have committed), then judged, then
    /// reverted. `foreign`: what another's agent wrote there before this one ran (its reason
    /// is in `damage`, which rejects the attempt).
    pub(super) fn capture(
        &mut self,
        r: &ResearcherState,
        base: &crate::model::CommitId,
        head_tree: Oid,
        damage: Option<String>,
        foreign: Option<Changes>,
        shared_before: &crate::engine::agent::workspace::SharedState,
    ) -> Result<Captured> {
        let agent_changes = take_changes(&mut self.watch);
        // Another's writes found before the agent ran are part of what is captured and put back.
        let agent_changes = match foreign {
            Some(seen) => watch::union(&seen, &agent_changes),
            None => agent_changes,
        };
        worktree::repair_gitfile(&self.repo, &self.wt_path)?;
        let branch_ref = self.conf.refs.researcher(self.id);
        restore_base(&self.wt, &branch_ref, &r.head, base)?;
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
    pub(super) async fn judge(
        &mut self,
        st: &State,
        r: &ResearcherState,
        captured: &Captured,
        judged: Judged<'_, '_>,
        env: &[(String, String)],
    ) -> Result<Option<Verdict>> {
        let conf = self.conf;
        let attempt = judged.attempt;
        let rejection = (captured.snap.rejection())
            .or_else(|| conf.guard.violation(&captured.changed))
            .or(captured.shared_violation.clone());
        // A sweep commits its variants instead of the agent's own tree; a failed or rejected
        // attempt is judged as a plain one.
        let sweep =
            (judged.sweep).filter(|_| judged.agent_failure.is_none() && rejection.is_none());
        let commit = if attempt.tree == judged.head_tree || sweep.is_some() {
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
        if let Some(plan) = sweep {
            return self.sweep(st, r, attempt, plan, judged.report, env).await;
        }
        if attempt.tree == judged.head_tree
            && captured.snap.nested_repos.is_empty()
            && captured.shared_violation.is_none()
        {
            let why = judged.unchanged.unwrap_or_default();
            return unmeasured(Verdict::NoChange, None, why).map(Some);
        }
        if let Some(why) = rejection {
            return unmeasured(Verdict::Rejected, commit, why).map(Some);
        }
        self.measure(st, r, attempt, commit, judged.report, env)
            .await
    }

    /// Evaluates the attempt, decides keep or revert, runs the guards on a better one, and
    /// records it. None on Ctrl-C.
    pub(super) async fn measure(
        &mut self,
        st: &State,
        r: &ResearcherState,
        attempt: &Attempt<'_>,
        commit: Option<Oid>,
        report: &crate::agents::AgentReport,
        env: &[(String, String)],
    ) -> Result<Option<Verdict>> {
        let (conf, id, iteration) = (self.conf, self.id, attempt.iteration);
        let log = format!("{id}-r{}-i{iteration}.eval", st.round);
        let (result, of_the_tree) = evaluate_cached(
            conf,
            (id, &log),
            (
                attempt.tree,
                anyhow::Context::context(commit, "an attempt measured without its commit")?,
            ),
            &self.wt_path,
            env.to_vec(),
            self.remaining(),
            crate::engine::measure::pruning::rule_for(conf, st, id),
        )
        .await?;
        if result.status == EvalStatus::Interrupted {
            return Ok(None);
        }
        crate::failpoint::hit("eval.finished");
        let measured = Measured {
            result: &result,
            of_the_tree,
        };
        let cwd = self.wt_path.clone();
        self.decide(st, r, attempt, commit, measured, report, env, &cwd)
            .await
    }

    /// Decides keep or revert on a measured attempt, runs the guards (in `cwd`, which holds its
    /// tree) on a better one, and records it. None on Ctrl-C.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn decide(
        &mut self,
        st: &State,
        r: &ResearcherState,
        attempt: &Attempt<'_>,
        commit: Option<Oid>,
        measured: Measured<'_>,
        report: &crate::agents::AgentReport,
        env: &[(String, String)],
        cwd: &std::path::Path,
    ) -> Result<Option<Verdict>> {
        let (conf, id, iteration) = (self.conf, self.id, attempt.iteration);
        let result = measured.result;
        // With branching on, an attempt is kept when it beats the node it started from.
        let to_beat = match &attempt.branch {
            Some(b) => b.from.metric,
            None => r.best_metric,
        };
        let verdict = keep::verdict(&result.status, result.metric, to_beat, conf.direction());
        let same = (verdict == Verdict::Kept && attempt.branch.is_some())
            .then(|| self.same_as_alive(r, attempt.tree))
            .flatten();
        if let Some(why) = same {
            record_iteration(
                conf,
                attempt,
                commit,
                measured,
                Verdict::NoChange,
                Some(why),
            )?;
            return Ok(Some(Verdict::NoChange));
        }
        // A better candidate must pass the guard commands before it is kept.
        let label = format!("{id}-r{}-i{iteration}", st.round);
        // What the CLI reported (a refused edit, a limit) when nothing else is wrong.
        let reason = result.reason.clone().or_else(|| report.problem.clone());
        let Some((verdict, reason)) =
            crate::engine::measure::guards::gate(conf, verdict, reason, cwd, env, &label).await?
        else {
            return Ok(None);
        };
        record_iteration(conf, attempt, commit, measured, verdict, reason)?;
        Ok(Some(verdict))
    }

    /// The effects of the recorded event: the branch moves when the attempt was kept, and the
    /// worktree goes back to the researcher's head — only what the agent and the evaluation
    /// touched, plus the files they left, ignored or not. With branching on, the branch moves
    /// to the researcher's best alive head and the worktree to the node the next attempt
    /// starts from, both as the event recorded them.
    pub(super) fn put_back(
        &mut self,
        r: &ResearcherState,
        base: &crate::model::CommitId,
        verdict: Verdict,
        agent_changes: &Changes,
        also: Option<Changes>,
    ) -> Result<()> {
        let (conf, id) = (self.conf, self.id);
        let now = conf.state();
        let now = now.researcher(id);
        let head_now = now.head.clone();
        // The node the next attempt starts from, when the event recorded one (branching on).
        let next = now.next.as_ref().filter(|_| tree::on(conf));
        crate::failpoint::hit("iteration.recorded");
        let moved = match next {
            Some(_) => head_now != r.head,
            None => verdict == Verdict::Kept,
        };
        if moved {
            conf.move_branch(&conf.refs.researcher(id), &head_now, Some(&r.head))?;
            crate::failpoint::hit("branch.moved");
        }
        let eval_changes = take_changes(&mut self.watch);
        // Paths the worktree holds otherwise than the attempt recorded (a sweep's literal).
        let eval_changes = match also {
            Some(also) => watch::union(&eval_changes, &also),
            None => eval_changes,
        };
        let branch_ref = conf.refs.researcher(id);
        let (target, touched, write_index) = match next {
            None => {
                let touched = if verdict == Verdict::Kept {
                    eval_changes
                } else {
                    watch::union(agent_changes, &eval_changes)
                };
                (head_now.clone(), touched, verdict == Verdict::Kept)
            }
            Some(next) => {
                // Everything the agent and the evaluation touched, and what differs between
                // the node this attempt started from and the next one.
                let from_tree = self.repo.find_commit(base.oid())?.tree_id();
                let to_tree = self.repo.find_commit(next.commit.oid())?.tree_id();
                let differ = snapshot::changed_paths(&self.repo, from_tree, to_tree)?;
                let differ = Changes::Paths(differ.into_iter().map(Into::into).collect());
                let touched = watch::union(&watch::union(agent_changes, &eval_changes), &differ);
                (next.commit.clone(), touched, from_tree != to_tree)
            }
        };
        let touched = without_agent_dir(touched);
        let head_ref = (target == head_now).then_some(branch_ref.as_str());
        // Files a `.gitignore` hid until the revert put it back go too.
        let leftovers = watch::union(agent_changes, &touched);
        match touched {
            Changes::Paths(paths) => {
                snapshot::reset_paths(&self.wt, target.oid(), head_ref, &paths, write_index)?
            }
            Changes::Everything => snapshot::reset(&self.wt, target.oid(), head_ref)?,
        }
        if next.is_some() {
            crate::failpoint::hit("tree.next");
        }
        self.at = target;
        leftovers::remove_untracked(
            &self.wt,
            &leftovers,
            &crate::engine::agent::workspace::kept_ignored_paths(conf, &self.wt),
        )?;
        crate::engine::agent::workspace::link_shared(conf, &self.wt_path)?;
        settle(&mut self.watch);
        crate::failpoint::hit("worktree.put-back");
        Ok(())
    }
}

/// The agent's folder (`.conference/`) holds only files its own `.gitignore` ignores, but git does
/// not call the folder itself ignored: among the paths put back it would be removed, made again by
/// the next attempt and removed again, and each removal makes the watch answer `Everything` (a
/// scan of the whole worktree) for the next attempt. Leftovers keep it too.
fn without_agent_dir(changes: Changes) -> Changes {
    match changes {
        Changes::Paths(mut paths) => {
            paths.retain(|p| p.as_path() != std::path::Path::new(crate::agents::AGENT_DIR));
            Changes::Paths(paths)
        }
        everything => everything,
    }
}

/// Evaluates a tree in the researcher's worktree, or returns the cached result for it.
/// `deadline` is what is left of the researcher's round time: an evaluation it cuts short is a
/// timeout of this attempt, not a property of the tree, so it is not cached. Nor is a run that
/// `prune` stopped: it was measured against this researcher's best, not in full. `commit` is the
/// attempt's commit of `tree`, what a remote launcher ships.
pub(super) async fn evaluate_cached(
    conf: &Conference,
    (id, log): (&str, &str),
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
                log_prefix: conf.log_path(log),
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
pub(super) const EVALUATIONS_KEPT: usize = 256;

/// Lets go of the finished evaluations once more than `EVALUATIONS_KEPT` are held: the map is
/// there so that two researchers producing one tree at once run it once; a finished result is in
/// the evaluation cache of the state (or its pending batch) by the time it is recorded, where
/// `evaluate_tree` and `agent`'s check find it. Kept whole, the map grew with every tree of a
/// never-stop run.
pub(super) fn forget_finished_evaluations(conf: &Conference) {
    let mut evaluations = conf.evaluations.lock().unwrap();
    if evaluations.len() > EVALUATIONS_KEPT {
        evaluations.retain(|_, cell| !cell.initialized());
    }
}
