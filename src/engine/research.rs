//! Phase 1: every researcher runs its iterations in its own worktree, all at once.
//!
//! One iteration: write the prompt, run the agent, take what changed as a snapshot, reject it if
//! it touches a frozen or forbidden path, evaluate it (or reuse the cached result for that tree),
//! keep it only if strictly better than the researcher's best, record the event (the commit
//! point), then write the note, move the branch and put the worktree back to the kept snapshot.

use std::time::{Duration, Instant};

use anyhow::Result;
use git2::{Oid, Repository, Signature};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::agent::{self, AgentCall, AgentOutcome};
use super::evaluate::{self, EvalRequest, EvalResult};
use super::prompt::{self, PromptContext};
use super::state::{files, Phase};
use super::Conference;
use crate::exec::process;
use crate::git::watch::{self, Changes, Watch};
use crate::git::{leftovers, snapshot, worktree};
use crate::model::{EvalStatus, Verdict};
use crate::protocol::keep;
use crate::store::{self, Event, StateChange};

/// How many recent attempts a researcher's file in the state keeps.
const RECENT_ATTEMPTS: usize = 200;
pub use crate::protocol::keep::STUCK_LEVELS;
/// Agent crashes in a row after which a researcher is marked failed for the round.
const CRASHES_TO_FAIL: u32 = 3;

/// One attempt, as the state's attempts files and the results table have it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub round: u32,
    pub researcher: String,
    pub iteration: u32,
    pub commit: String,
    pub tree: String,
    pub metric: Option<f64>,
    pub delta: Option<f64>,
    pub verdict: String,
    pub description: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub timestamp: String,
    #[serde(default)]
    pub sub_metrics: std::collections::BTreeMap<String, f64>,
    /// What the agent reported using for this attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<super::budget::Tokens>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// Reads a JSON-lines file of the state tree.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(conf: &Conference, path: &str) -> Result<Vec<T>> {
    let bytes = conf.read_state_file(path)?.unwrap_or_default();
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// A researcher's recent attempts (bounded), oldest first.
pub fn recent_attempts(conf: &Conference, researcher: &str) -> Result<Vec<AttemptRecord>> {
    // Read from the round files, newest round first, until enough are found: each iteration then
    // writes one attempts file (its round's), not a second per-researcher copy.
    let mut found: Vec<AttemptRecord> = Vec::new();
    for round in (1..=conf.state().round).rev() {
        let mut batch: Vec<AttemptRecord> = round_attempts(conf, round)?
            .into_iter()
            .filter(|a| a.researcher == researcher)
            .collect();
        batch.append(&mut found);
        found = batch;
        if found.len() >= RECENT_ATTEMPTS {
            break;
        }
    }
    let skip = found.len().saturating_sub(RECENT_ATTEMPTS);
    Ok(found.split_off(skip))
}

/// All attempts of a round, in the order they were recorded.
pub fn round_attempts(conf: &Conference, round: u32) -> Result<Vec<AttemptRecord>> {
    read_jsonl(conf, &format!("{}/attempts.jsonl", files::round_dir(round)))
}

/// Runs phase 1 of the current round for every researcher that has not finished it.
pub async fn run_phase(conf: &std::sync::Arc<Conference>) -> Result<()> {
    let st = conf.state();
    let pending: Vec<String> = st
        .researchers
        .iter()
        .filter(|(_, r)| r.round_finished.is_none())
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
    let started = Instant::now();
    let limit = super::stop::researcher_timeout(conf);
    let branch = conf.refs.researcher_branch(id);
    let head = conf.state().researcher(id).head.clone();
    let repo = conf.open_repo()?;
    // One handle for the whole phase: its index stays in memory between iterations instead of
    // being read (and checksummed) from disk at every step.
    let (wt_path, mut wt, mut watch) = match take_idle(conf, id) {
        Some(idle) => {
            worktree::repair_gitfile(&repo, &idle.path)?;
            let wt = open_worktree(conf, &idle.path)?;
            let mut watch = idle.watch;
            let head_ref = conf.refs.researcher(id);
            snapshot::advance(
                &wt,
                idle.tree,
                Oid::from_str(&head)?,
                Some(&head_ref),
                Some(&mut watch),
            )?;
            (idle.path, wt, Some(watch))
        }
        None => {
            let wt_path = conf.prepare_worktree(&researcher_label(id), Some(&branch), &head)?;
            if let Some(why) = super::workspace::ready_researcher(conf, id, &wt_path).await? {
                return match why.as_str() {
                    "interrupted" => Ok(()),
                    _ => finish(conf, id, &why),
                };
            }
            let wt = open_worktree(conf, &wt_path)?;
            let watch = start_watch(&wt, &wt_path);
            (wt_path, wt, watch)
        }
    };
    // Every `finish` below leaves the worktree exactly at the researcher's head: it is parked
    // with its watch for the next round. Any other way out (an error, Ctrl-C) drops the watch,
    // and the next round checks the whole worktree out again.
    let finish = |why: &str, watch: &mut Option<Watch>| -> Result<()> {
        finish(conf, id, why)?;
        park(conf, id, &wt_path, watch.take())
    };
    let mut agent_crashes = 0;
    loop {
        if process::cancelled() {
            return Ok(());
        }
        let st = conf.state();
        let r = st.researcher(id).clone();
        if r.round_iterations >= conf.config.iterations_per_round {
            return finish("completed", &mut watch);
        }
        if r.round_iterations >= super::stop::round_allotment(conf, &st, id)
            || super::stop::time_budget_used(conf, &st).is_some()
            || super::budget::used_up(&conf.config, &st).is_some()
        {
            return finish("budget", &mut watch);
        }
        // The target is met (by this researcher or another): the round has its result.
        if st
            .researchers
            .values()
            .any(|o| o.round_iterations > 0 && super::stop::target_reached(conf, o.best_metric))
        {
            return finish("target reached", &mut watch);
        }
        let remaining = limit.map(|l| l.saturating_sub(started.elapsed()));
        if remaining == Some(Duration::ZERO) {
            return finish("timeout", &mut watch);
        }
        let iteration = r.round_iterations + 1;
        conf.ui.researcher(
            id,
            &format!(
                "round {} iteration {iteration}/{}  best {}  last {}{}",
                st.round,
                conf.config.iterations_per_round,
                fmt_metric(r.best_metric),
                r.last_verdict.as_deref().unwrap_or("-"),
                r.last_reason
                    .as_deref()
                    .map(|w| format!(" ({})", super::reasons::one_line(w, 60)))
                    .unwrap_or_default()
            ),
        );
        let briefing = super::briefing::gather(conf, id)?;
        let prompt = prompt::render(&PromptContext {
            config: &conf.config,
            researcher: id,
            round: st.round,
            iteration,
            best_metric: r.best_metric,
            conference_best: st.best.metric,
            shared_knowledge: &st.shared_knowledge,
            briefing: &briefing,
            stuck_level: r.stuck_level,
            respawned: r.respawned,
            endgame: super::stop::is_endgame(conf, &st),
            devils_advocate: conf.config.devils_advocate_id().as_deref() == Some(id),
            frozen: conf.guard.frozen_patterns(),
        });
        let head_tree = repo.find_commit(Oid::from_str(&r.head)?)?.tree_id();
        let env = conf.context_env(id, st.round, iteration, r.best_metric);
        let refs_before = crate::git::traces::read(repo.commondir());
        super::integrity::ConfigGuard::take(&repo, &conf.run_dir);
        let shared_before = super::workspace::SharedState::read(conf);
        let run = agent::run(
            conf,
            AgentCall {
                researcher: id,
                round: st.round,
                iteration,
                worktree: &wt_path,
                prompt: &prompt,
                timeout: Some(remaining.map_or(conf.config.agent.timeout, |r| {
                    r.min(conf.config.agent.timeout)
                })),
                env: env.clone(),
                head_tree,
                attempts: r.attempts,
            },
        )
        .await?;
        let usage = run.usage();
        let (outcome, report) = (run.outcome, run.report);
        for warning in crate::git::traces::warnings_since(&refs_before, repo.commondir(), id) {
            conf.ui.warn(&warning);
        }
        // What the agent broke in git is put back first (config before a worktree is re-made).
        let mut damage = conf.repair_after_agent();
        match super::integrity::worktree_damage(&wt, &wt_path) {
            Some(super::integrity::WorktreeDamage::Lost(why)) => {
                let why = damage.map_or(why.clone(), |d| format!("{why}; {d}"));
                watch = None;
                let attempt = Attempt {
                    id,
                    iteration,
                    tree: head_tree,
                    head: &r.head,
                    description: "worktree removed",
                    usage,
                };
                match remake_worktree(conf, &attempt, st.round, &wt_path, why).await? {
                    Err(setup_failed) => return finish(&setup_failed, &mut watch),
                    Ok(handle) => (wt, watch) = handle,
                }
                continue;
            }
            Some(super::integrity::WorktreeDamage::Relinked(why)) => {
                damage = Some(damage.map_or(why.clone(), |d| format!("{why}; {d}")));
            }
            None => {}
        }
        let agent_timed_out = matches!(outcome, AgentOutcome::TimedOut);
        let (description, agent_failure) = match outcome {
            AgentOutcome::Interrupted => return Ok(()),
            AgentOutcome::Exhausted => return finish("exhausted", &mut watch),
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
        // A failed run that also broke git says both.
        let agent_failure = agent_failure.map(|(kind, why)| match &damage {
            Some(d) => (kind, format!("{why}; {d}")),
            None => (kind, why),
        });
        crate::failpoint::hit("agent.finished");
        // Whatever the agent left is the attempt, even when it failed: record it, then revert.
        let agent_changes = take_changes(&mut watch);
        worktree::repair_gitfile(&repo, &wt_path)?;
        restore_head(&wt, &conf.refs.researcher(id), &r.head)?;
        let snap = match &agent_changes {
            Changes::Paths(paths) => snapshot::capture_paths(&wt, paths)?,
            Changes::Everything => snapshot::capture(&wt)?,
        };
        let tree = snap.tree;
        settle(&mut watch);
        let changed = snapshot::changed_paths(&repo, head_tree, tree)?;
        let shared_violation = damage.or(shared_before.violation(conf, &wt_path, &changed));
        // Nothing changed: what the agent claimed is no description; why nothing changed is.
        let unchanged = (agent_failure.is_none()
            && tree == head_tree
            && snap.nested_repos.is_empty()
            && shared_violation.is_none())
        .then(|| crate::agents::no_change_reason(&report));
        let description = match &unchanged {
            Some(why) => format!("no change: {why}"),
            None => description.unwrap_or_else(|| default_description(&changed)),
        };
        let description = crate::exec::caps::shorten(&description);
        let attempt = Attempt {
            id,
            iteration,
            tree,
            head: &r.head,
            description: &description,
            usage,
        };
        let commit = if tree == head_tree {
            None
        } else {
            Some(commit_attempt(conf, &repo, &attempt)?)
        };
        let verdict = if let Some((kind, why)) = agent_failure {
            if matches!(kind, Verdict::Crashed | Verdict::Timeout) {
                agent_crashes += 1;
            }
            let result = failed_eval(kind.as_str(), &why);
            record_iteration(
                conf,
                &attempt,
                commit,
                Measured::not(&result),
                kind,
                Some(why),
            )?;
            kind
        } else if tree == head_tree && snap.nested_repos.is_empty() && shared_violation.is_none() {
            agent_crashes = 0;
            let why = unchanged.unwrap_or_default();
            record_iteration(
                conf,
                &attempt,
                None,
                Measured::not(&failed_eval(Verdict::NoChange.as_str(), &why)),
                Verdict::NoChange,
                Some(why),
            )?;
            Verdict::NoChange
        } else {
            agent_crashes = 0;
            if let Some(why) = snap
                .rejection()
                .or_else(|| conf.guard.violation(&changed))
                .or(shared_violation)
            {
                record_iteration(
                    conf,
                    &attempt,
                    commit,
                    Measured::not(&failed_eval(Verdict::Rejected.as_str(), &why)),
                    Verdict::Rejected,
                    Some(why),
                )?;
                Verdict::Rejected
            } else {
                let deadline = limit.map(|l| l.saturating_sub(started.elapsed()));
                let (result, of_the_tree) = evaluate_cached(
                    conf,
                    id,
                    st.round,
                    iteration,
                    tree,
                    &wt_path,
                    env.clone(),
                    deadline,
                )
                .await?;
                if result.status == EvalStatus::Interrupted {
                    return Ok(());
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
                    super::guards::gate(conf, verdict, reason, &wt_path, &env, &label).await?
                else {
                    return Ok(());
                };
                let measured = Measured {
                    result: &result,
                    of_the_tree,
                };
                record_iteration(conf, &attempt, commit, measured, verdict, reason)?;
                verdict
            }
        };
        // Effects of the recorded event: branch (if kept), worktree back to the kept snapshot.
        let head_now = conf.state().researcher(id).head.clone();
        crate::failpoint::hit("iteration.recorded");
        if verdict == Verdict::Kept {
            conf.move_branch(&conf.refs.researcher(id), &head_now, Some(&r.head))?;
            crate::failpoint::hit("branch.moved");
        }
        // Only what the agent and the evaluation touched needs putting back.
        let eval_changes = take_changes(&mut watch);
        let touched = if verdict == Verdict::Kept {
            eval_changes
        } else {
            watch::union(&agent_changes, &eval_changes)
        };
        let branch_ref = conf.refs.researcher(id);
        // Ignored files the agent or the evaluation left go too, kept attempt or not, and files
        // a `.gitignore` hid until the revert put it back.
        let leftovers = watch::union(&agent_changes, &touched);
        match touched {
            Changes::Paths(paths) => snapshot::reset_paths(
                &wt,
                Oid::from_str(&head_now)?,
                Some(&branch_ref),
                &paths,
                verdict == Verdict::Kept,
            )?,
            Changes::Everything => {
                snapshot::reset(&wt, Oid::from_str(&head_now)?, Some(&branch_ref))?
            }
        }
        leftovers::remove_untracked(&wt, &leftovers, &conf.kept_ignored_paths(&wt))?;
        super::workspace::link_shared(conf, &wt_path)?;
        settle(&mut watch);
        let now = conf.state();
        let why = now
            .researcher(id)
            .last_reason
            .as_deref()
            .map(|w| super::reasons::one_line(w, 160))
            .filter(|w| !description.contains(w.as_str()))
            .map(|w| format!(" — {w}"))
            .unwrap_or_default();
        conf.ui.info(&format!(
            "  {id} r{} i{iteration}: {verdict:<9} best {}  {description}{why}",
            st.round,
            fmt_metric(now.researcher(id).best_metric),
        ));
        if agent_timed_out && limit.is_some_and(|l| started.elapsed() >= l) {
            return finish("timeout", &mut watch);
        }
        if agent_crashes >= CRASHES_TO_FAIL {
            return finish("failed", &mut watch);
        }
        if conf.state().researcher(id).stuck_level >= 3 {
            return finish("stuck", &mut watch);
        }
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

struct Attempt<'a> {
    id: &'a str,
    iteration: u32,
    tree: Oid,
    head: &'a str,
    description: &'a str,
    /// What the agent reported using (presets and built-in HTTP agents).
    usage: Option<crate::agents::Usage>,
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
    let tree = conf
        .open_repo()?
        .find_commit(Oid::from_str(&head)?)?
        .tree_id();
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
    let wt = conf.open_worktree(path)?;
    crate::agents::ignore_scratch(&wt, &conf.config.agent.command)?;
    Ok(wt)
}

/// An agent that committed or switched branches in its worktree is put back: only the files count.
fn restore_head(wt: &Repository, branch_ref: &str, expected: &str) -> Result<()> {
    let expected = Oid::from_str(expected)?;
    let current = wt.find_reference(branch_ref).ok().and_then(|r| r.target());
    if current != Some(expected) {
        wt.reference(
            branch_ref,
            expected,
            true,
            "git conference: undo an agent's commit",
        )?;
    }
    let head_ok = wt
        .head()
        .ok()
        .and_then(|h| h.name().map(str::to_string))
        .as_deref()
        == Some(branch_ref);
    if !head_ok {
        wt.set_head(branch_ref)?;
    }
    Ok(())
}

fn default_description(changed: &[String]) -> String {
    match changed {
        [] => "no change".into(),
        paths if paths.len() <= 3 => format!("change {}", paths.join(", ")),
        paths => format!(
            "change {} and {} more files",
            paths[..2].join(", "),
            paths.len() - 2
        ),
    }
}

fn commit_attempt(conf: &Conference, repo: &Repository, a: &Attempt) -> Result<Oid> {
    let st = conf.state();
    let message = format!(
        "{}\n\nResearcher {} · round {} · iteration {}\nConference: {}\n",
        a.description.lines().next().unwrap_or("change"),
        a.id,
        st.round,
        a.iteration,
        conf.name
    );
    let author = researcher_signature(repo, a.id);
    let commit = snapshot::commit(repo, a.tree, &[Oid::from_str(a.head)?], &message, &author)?;
    crate::failpoint::hit("snapshot.committed");
    // Reachable before it is recorded: a kill now loses no attempt.
    conf.keep_reachable(&[commit])?;
    crate::failpoint::hit("snapshot.reachable");
    Ok(commit)
}

/// Snapshots are authored by the researcher that made them.
pub fn researcher_signature(repo: &Repository, id: &str) -> Signature<'static> {
    let email = store::signature(repo)
        .email()
        .unwrap_or("git-conference@localhost")
        .to_string();
    Signature::now(&format!("Researcher {id} (git-conference)"), &email)
        .unwrap_or_else(|_| store::signature(repo))
}

/// Evaluates a tree in the researcher's worktree, or returns the cached result for it.
/// `deadline` is what is left of the researcher's round time: an evaluation it cuts short is a
/// timeout of this attempt, not a property of the tree, so it is not cached.
#[allow(clippy::too_many_arguments)]
async fn evaluate_cached(
    conf: &Conference,
    id: &str,
    round: u32,
    iteration: u32,
    tree: Oid,
    wt_path: &std::path::Path,
    env: Vec<(String, String)>,
    deadline: Option<Duration>,
) -> Result<(EvalResult, bool)> {
    let eval_timeout = conf.config.evaluation.timeout;
    let cut_short = deadline.is_some_and(|d| d < eval_timeout);
    let timeout = deadline.map_or(eval_timeout, |d| d.min(eval_timeout));
    let st = conf.state();
    let key = files::eval_cache(&st.eval_settings, &tree.to_string());
    // One evaluation per tree even when two researchers produce it at the same moment: the
    // second waits for the first one's result instead of starting the command again.
    let cell = conf
        .evaluations
        .lock()
        .unwrap()
        .entry(key.clone())
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
                env,
                log_prefix: conf.log_path(&format!("{id}-r{round}-i{iteration}.eval")),
                scheduler: &conf.scheduler,
            })
            .await
        })
        .await?
        .clone();
    let mut result = result;
    let of_the_tree = !(cut_short && result.status == EvalStatus::Timeout);
    if result.status == EvalStatus::Interrupted || !of_the_tree {
        conf.evaluations.lock().unwrap().remove(&key);
    }
    if !of_the_tree {
        result.reason = Some("the evaluation ran past the researcher timeout".into());
    }
    Ok((result, of_the_tree))
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
    let commit_hex = commit
        .map(|c| c.to_string())
        .unwrap_or_else(|| a.head.to_string());
    let record = AttemptRecord {
        round: st.round,
        researcher: a.id.to_string(),
        iteration: a.iteration,
        commit: commit_hex.clone(),
        tree: a.tree.to_string(),
        metric: result.metric,
        delta,
        verdict: verdict.to_string(),
        description: crate::exec::caps::shorten(a.description.lines().next().unwrap_or("")),
        reason: reason.clone(),
        timestamp: super::now_iso(),
        sub_metrics: result.sub_metrics.clone(),
        tokens: a.usage.map(super::budget::tokens_of),
        cost_usd: a.usage.and_then(|u| u.cost_usd),
    };
    let note = commit.map(|c| {
        json!({
            "commit": c.to_string(),
            "conference": conf.name,
            "researcher": a.id,
            "round": st.round,
            "iteration": a.iteration,
            "verdict": verdict,
            "metric": result.metric,
            "runs": result.runs,
            "sub_metrics": result.sub_metrics,
            "reason": reason,
        })
    });
    let note = note.map(|n| super::budget::with_usage(n, a.usage));
    let payload = json!({
        "researcher": a.id,
        "round": st.round,
        "iteration": a.iteration,
        "metric_value": result.metric,
        "delta": delta.map(super::synthesis::signed),
        "status": verdict,
        "commit": commit.map(|c| c.to_string()),
        "tree": a.tree.to_string(),
        "description": record.description,
        "reason": reason,
        "sub_metrics": result.sub_metrics,
        "evaluated": measured.of_the_tree,
        "notes": note.iter().collect::<Vec<_>>(),
    });
    let payload = super::budget::with_usage(payload, a.usage);
    let summary = format!(
        "{} r{} i{} {} {}",
        a.id,
        st.round,
        a.iteration,
        verdict,
        result.metric.map(|m| format!("{m}")).unwrap_or_default()
    );
    let cache_result = (commit.is_some()
        && measured.of_the_tree
        && matches!(
            EvalStatus::parse(&result.status),
            Some(EvalStatus::Ok | EvalStatus::Crashed | EvalStatus::Timeout)
        ))
    .then(|| result.clone());
    conf.record("researcher.iteration", &summary, payload, |next, rec| {
        let mut changes = Vec::new();
        let round_path = format!("{}/attempts.jsonl", files::round_dir(next.round));
        let line = serde_json::to_string(&record)?;
        changes.push(append_line(rec, &round_path, &line)?);
        if let Some(result) = &cache_result {
            changes.push(StateChange::Put(
                files::eval_cache(&next.eval_settings, &a.tree.to_string()),
                serde_json::to_vec(result)?,
            ));
        }
        next.total_iterations += 1;
        if let Some(usage) = &a.usage {
            super::budget::record(next, a.id, usage);
        }
        let r = next.researcher_mut(a.id);
        r.round_iterations = a.iteration;
        r.attempts += 1;
        r.counts.add(verdict);
        r.round_counts.add(verdict);
        r.last_verdict = Some(verdict.to_string());
        r.last_reason = super::reasons::shows_reason(verdict.as_str())
            .then(|| super::reasons::reason_text(verdict.as_str(), reason.as_deref()));
        if verdict == Verdict::Kept {
            r.head = commit_hex.clone();
            r.best_metric = result.metric;
            r.consecutive_fails = 0;
            r.stuck_level = 0;
        } else {
            r.consecutive_fails += 1;
            r.stuck_level = keep::stuck_level(r.consecutive_fails);
        }
        Ok(changes)
    })?;
    if let (Some(c), Some(n)) = (commit, note) {
        conf.note(&[(c, n)])?;
    }
    let r = conf.state().researcher(a.id).clone();
    if verdict != Verdict::Kept && keep::enters_a_stuck_level(r.consecutive_fails) {
        let level = r.stuck_level;
        conf.record(
            "researcher.stuck",
            &format!("{} at level {level}", a.id),
            json!({"researcher": a.id, "round": st.round, "stuck_level": level,
                   "consecutive_non_improving": r.consecutive_fails}),
            |_, _| Ok(vec![]),
        )?;
    }
    Ok(())
}

/// The evaluation cache entry an iteration event stands for (path and bytes), rebuilt from its
/// payload: the same entry `record_iteration` stores for it.
pub fn cached_evaluation_of_event(event: &Event, settings: &str) -> Option<(String, Vec<u8>)> {
    if event.event != "researcher.iteration" {
        return None;
    }
    let p = &event.payload;
    p.get("commit")?.as_str()?;
    // Logs written before the `evaluated` flag: an agent failure has no evaluation runs.
    let evaluated = p
        .get("evaluated")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| {
            p.get("notes")
                .and_then(|n| n.get(0))
                .and_then(|n| n.get("runs"))
                .and_then(Value::as_array)
                .is_some_and(|runs| !runs.is_empty())
                || p.get("status").and_then(Value::as_str) != Some("crashed")
                    && p.get("status").and_then(Value::as_str) != Some("timeout")
        });
    if !evaluated {
        return None;
    }
    let tree = p.get("tree")?.as_str()?;
    let status = match Verdict::parse(p.get("status")?.as_str()?)? {
        Verdict::Kept | Verdict::Reverted => EvalStatus::Ok.as_str(),
        Verdict::Crashed => EvalStatus::Crashed.as_str(),
        Verdict::Timeout => EvalStatus::Timeout.as_str(),
        Verdict::Rejected | Verdict::NoChange => return None,
    };
    let metric = p.get("metric_value").and_then(Value::as_f64);
    let note = p.get("notes").and_then(|n| n.get(0));
    let result = EvalResult {
        metric,
        runs: note
            .and_then(|n| serde_json::from_value(n.get("runs")?.clone()).ok())
            .unwrap_or_default(),
        sub_metrics: serde_json::from_value(p.get("sub_metrics")?.clone()).unwrap_or_default(),
        status: status.to_string(),
        reason: p.get("reason").and_then(Value::as_str).map(str::to_string),
        seconds: 0.0,
    };
    Some((
        files::eval_cache(settings, tree),
        serde_json::to_vec(&result).ok()?,
    ))
}

/// Appends a line to a JSON-lines file of the state tree.
pub fn append_line(rec: &super::Recorder, path: &str, line: &str) -> Result<StateChange> {
    let old = rec.log.read(&rec.repo, path)?.unwrap_or_default();
    let mut text = String::from_utf8_lossy(&old).into_owned();
    text.push_str(line);
    text.push('\n');
    Ok(StateChange::Put(path.to_string(), text.into_bytes()))
}

/// Records that a researcher is done with phase 1 of this round; the last one moves the
/// conference to the poster session.
fn finish(conf: &Conference, id: &str, why: &str) -> Result<()> {
    let st = conf.state();
    conf.record(
        "researcher.finished",
        &format!("{id} finished round {} ({why})", st.round),
        json!({"researcher": id, "round": st.round, "reason": why,
               "iterations": st.researcher(id).round_iterations}),
        |next, _| {
            next.researcher_mut(id).round_finished = Some(why.to_string());
            if next
                .researchers
                .values()
                .all(|r| r.round_finished.is_some())
            {
                next.phase = Phase::Poster;
            }
            Ok(vec![])
        },
    )?;
    conf.ui
        .researcher(id, &format!("finished round {} ({why})", st.round));
    Ok(())
}

/// A nested repository a killed run's agent left may hold commits of its own: it is moved out
/// of the worktree (which a reset would otherwise clear), never deleted.
fn set_aside_nested_repos(
    conf: &Conference,
    id: &str,
    wt: &Repository,
    nested: &[String],
) -> Result<()> {
    let Some(workdir) = wt.workdir() else {
        return Ok(());
    };
    // One folder for everything set aside at this instant: a clock tick between two nested
    // repositories must not split them over two folders.
    let folder = conf
        .run_dir
        .join("set-aside")
        .join(format!("researcher-{id}-{}", super::now_unix()));
    for rel in nested {
        let to = folder.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(workdir.join(rel), &to)?;
        crate::errln!(
            "warning: researcher {id}'s worktree held a nested git repository {rel}/ (left by an interrupted agent); moved to {}",
            to.display()
        );
    }
    Ok(())
}

/// On resume: a worktree caught mid-iteration holds a partial attempt. It is committed, kept
/// reachable and recorded (`attempt.interrupted`), never silently deleted. Returns its commit.
pub fn set_aside_partial(conf: &Conference, id: &str, wt: &Repository) -> Result<Option<String>> {
    let st = conf.state();
    let r = st.researcher(id);
    let repo = conf.open_repo()?;
    let head = Oid::from_str(&r.head)?;
    let head_tree = repo.find_commit(head)?.tree_id();
    restore_head(wt, &conf.refs.researcher(id), &r.head)?;
    let snap = snapshot::capture(wt)?;
    set_aside_nested_repos(conf, id, wt, &snap.nested_repos)?;
    let tree = snap.tree;
    if tree == head_tree {
        return Ok(None);
    }
    // Already recorded (killed after the event, before the reset)?
    let recorded = recent_attempts(conf, id)?
        .iter()
        .any(|a| a.tree == tree.to_string());
    if recorded {
        return Ok(None);
    }
    // Still the snapshot the round started from (killed after `round.started` moved the branch,
    // before the worktree followed): nothing new.
    let stale = repo
        .find_commit(head)?
        .parents()
        .any(|p| p.tree_id() == tree);
    if stale {
        return Ok(None);
    }
    let changed = snapshot::changed_paths(&repo, head_tree, tree)?;
    let description = format!("interrupted attempt: {}", default_description(&changed));
    let attempt = Attempt {
        id,
        iteration: r.round_iterations + 1,
        tree,
        head: &r.head,
        description: &description,
        usage: None,
    };
    let commit = commit_attempt(conf, &repo, &attempt)?;
    eprintln!(
        "warning: researcher {id}'s worktree has uncommitted changes ({}); setting them aside as \
         attempt {} (recorded as attempt.interrupted; nothing is deleted)",
        changed.join(", "),
        &commit.to_string()[..10]
    );
    let note = json!({"commit": commit.to_string(), "conference": conf.name, "researcher": id,
                      "round": st.round, "iteration": attempt.iteration, "verdict": EvalStatus::Interrupted});
    // Also in the researcher's attempts (the tuner skips `interrupted` ones), so a resume killed
    // before the worktree was reset finds it recorded instead of recording it again.
    let record = AttemptRecord {
        round: st.round,
        researcher: id.to_string(),
        iteration: attempt.iteration,
        commit: commit.to_string(),
        tree: tree.to_string(),
        metric: None,
        delta: None,
        verdict: EvalStatus::Interrupted.into(),
        description: description.clone(),
        reason: Some("set aside on resume".into()),
        timestamp: super::now_iso(),
        sub_metrics: Default::default(),
        tokens: None,
        cost_usd: None,
    };
    conf.record(
        "attempt.interrupted",
        &format!("{id} r{} partial attempt set aside", st.round),
        json!({"researcher": id, "round": st.round, "commit": commit.to_string(),
               "tree": tree.to_string(), "notes": [note.clone()]}),
        |next, rec| {
            let line = serde_json::to_string(&record)?;
            let round_path = format!("{}/attempts.jsonl", files::round_dir(next.round.max(1)));
            Ok(vec![append_line(rec, &round_path, &line)?])
        },
    )?;
    conf.note(&[(commit, note)])?;
    Ok(Some(commit.to_string()))
}

impl Conference {
    pub fn direction(&self) -> Option<crate::config::Direction> {
        self.config.metric.as_ref().map(|m| m.direction)
    }
}
