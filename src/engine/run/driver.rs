//! The conference's main loop: looks at the recorded phase and does the next step, until a stop
//! rule fires, the conference pauses, or Ctrl-C. Because every step starts from the recorded
//! state, `start` and `resume` run the same loop.

use std::sync::Arc;

use anyhow::{bail, Result};

use crate::engine::measure::evaluate::{self, EvalRequest};
use crate::engine::phases::{research, review, synthesis, transfer};
use crate::engine::state::{files, Phase};
use crate::engine::stop::rules;
use crate::engine::{Conference, RunOutcome};
use crate::exec::process;
use crate::model::event::{self as events, Event, Note};
use crate::model::notes::BaselineNote;
use crate::model::CommitId;
use crate::model::{EvalStatus, FinalStatus};
use crate::render::format::fmt;
use crate::store::StateChange;

/// The loop on one machine (several machines run `shared::drive`, over the same steps).
pub async fn drive(conf: Arc<Conference>) -> Result<RunOutcome> {
    loop {
        if process::cancelled() {
            return Ok(RunOutcome::Interrupted);
        }
        // A request that cannot be read or recorded now waits in the inbox for the next try.
        if let Err(e) = crate::engine::phases::talk::take_requests(&conf) {
            crate::errln!("git-conference: {e:#}");
        }
        if let Some(waiting) = crate::engine::phases::talk::pause_needed(&conf, &conf.state())? {
            return crate::engine::phases::talk::pause_for(&conf, waiting);
        }
        if let Some(outcome) = step(&conf).await? {
            return Ok(outcome);
        }
    }
}

/// The next step of the recorded phase; the run's outcome when it ends there.
pub(in crate::engine) async fn step(conf: &Arc<Conference>) -> Result<Option<RunOutcome>> {
    let st = conf.state();
    match st.phase {
        Phase::Between => {
            if st.baseline_metric.is_none() && st.round == 0 {
                measure_baseline(conf).await?;
                return Ok(None);
            }
            if st.round == 0 && st.knowledge_brief.is_none() {
                crate::engine::phases::knowledge::record_brief(conf)?;
            }
            if st.round > 0 {
                show_best(conf, &st)?;
                if let Some(decision) = rules::check(conf, &st) {
                    begin_synthesis(conf, &decision)?;
                    return Ok(None);
                }
                if rules::should_pause(conf, &st) && st.paused_at_round != st.round {
                    pause(conf)?;
                    return Ok(Some(RunOutcome::Paused));
                }
            }
            start_round(conf)?;
        }
        Phase::Research => research::run_phase(conf).await?,
        Phase::Poster => review::poster_session(conf).await?,
        Phase::Review => review::peer_review(conf).await?,
        Phase::Transfer => transfer::run_phase(conf).await?,
        Phase::Synthesis => write_synthesis(conf).await?,
        Phase::Done => {
            return Ok(Some(RunOutcome::Completed(
                st.final_status
                    .unwrap_or_else(|| FinalStatus::Converged.into()),
            )))
        }
    }
    Ok(None)
}

/// The evaluation failed on the baseline, so nothing can be compared with it. The way on
/// depends on the file the run read its settings from, which the CLI knows: it words the
/// advice with [`BaselineFailed::advice`].
#[derive(Debug, thiserror::Error)]
#[error("the evaluation fails on the baseline: {reason} (logs in {})", logs.display())]
pub struct BaselineFailed {
    pub reason: String,
    pub logs: std::path::PathBuf,
    pub name: String,
}

impl BaselineFailed {
    /// The two ways on, each a command that works as printed: `config` is the file `resume`
    /// must read (named with `--config` unless it is the default conference.md).
    pub fn advice(&self, config: &std::path::Path) -> String {
        let name = &self.name;
        let flag = if config == std::path::Path::new("conference.md") {
            String::new()
        } else {
            format!(" --config {}", config.display())
        };
        format!(
            "{self}. To go on: fix the harness, commit it, then `git conference resume {name} --base HEAD{flag}` (the baseline moves to your fix); or change `## Evaluation` in {} (e.g. a longer timeout) and `git conference resume {name}{flag}`",
            config.display()
        )
    }
}

/// Puts the `best` worktree at the conference's best once a round is over: it measured the
/// baseline and knowledge transfer's combinations, and between rounds and at the end it holds
/// what its name says.
fn show_best(conf: &Conference, st: &crate::engine::state::State) -> Result<()> {
    conf.prepare_worktree("best", None, &st.best.commit)?;
    Ok(())
}

async fn measure_baseline(conf: &Conference) -> Result<()> {
    let st = conf.state();
    conf.ui.info(&format!(
        "measuring the baseline {}",
        crate::model::short_id(&st.baseline_commit)
    ));
    let path = conf.prepare_worktree("best", None, &st.baseline_commit)?;
    match crate::engine::agent::workspace::ready_checkout(conf, &path, "best").await {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) => bail!("cannot measure the baseline: {e:#}"),
    }
    let metric = evaluate::metric_name(&conf.config);
    // With Noise runs > 1 the baseline is read that many times: the spread of those readings is
    // the noise peer review holds every gain against, and their median the baseline.
    let noise_runs = conf.config.noise_runs.max(1);
    let mut result = evaluate::evaluate(EvalRequest {
        command: conf.config.eval_command(),
        metric: &metric,
        last_number: conf.config.evaluation.last_number,
        runs: conf.config.evaluation.repeats.max(noise_runs),
        timeout: conf.config.evaluation.timeout,
        cwd: &path,
        commit: &st.baseline_commit,
        env: conf.context_env("baseline", 0, 0, None),
        log_prefix: conf.log_path("baseline.eval"),
        scheduler: &conf.scheduler,
        // Never pruned: it is what attempts are measured against.
        prune: None,
        launcher: &conf.launcher,
    })
    .await?;
    if result.status == EvalStatus::Interrupted {
        return Ok(());
    }
    if noise_runs > 1 && result.ok() {
        result.metric = crate::engine::noise::median(&result.runs);
    }
    let Some(value) = result.metric else {
        return Err(BaselineFailed {
            reason: result.reason.unwrap_or_default(),
            logs: conf.run_dir.join("logs"),
            name: conf.name.clone(),
        }
        .into());
    };
    let repo = conf.open_repo()?;
    let tree = repo.find_commit(st.baseline_commit.oid())?.tree_id();
    let note = Note::from(BaselineNote {
        commit: st.baseline_commit.clone(),
        conference: conf.name.clone(),
        verdict: "baseline",
        metric: value,
        runs: result.runs.clone(),
        sub_metrics: result.sub_metrics.clone(),
        curve: result.curve.clone(),
    });
    let cache_entry = StateChange::Put(
        files::eval_cache(&st.eval_settings, &tree.to_string()),
        serde_json::to_vec(&result)?,
    );
    conf.record(
        Event::BaselineMeasured(events::BaselineMeasured {
            metric_value: value,
            runs: result.runs.clone(),
            commit: st.baseline_commit.clone(),
            sub_metrics: result.sub_metrics.clone(),
            noise_runs,
            noise_sd: crate::engine::noise::pooled_noise_sd(&[&result.runs]),
            notes: vec![note],
        }),
        &format!("{metric} = {value}"),
        vec![cache_entry],
    )?;
    match crate::engine::noise::pooled_noise_sd(&[&result.runs]).filter(|_| noise_runs > 1) {
        Some(sd) => conf.ui.info(&format!(
            "baseline {metric}: {value} (median of {} readings; noise of one reading {sd:.6})",
            result.runs.len()
        )),
        None => conf.ui.info(&format!("baseline {metric}: {value}")),
    }
    Ok(())
}

/// The commit a researcher starts a round from: best, joined to its own kept path so that
/// `git log` of its branch shows every round.
fn round_start_commit(
    conf: &Conference,
    head: &CommitId,
    best: &CommitId,
    round: u32,
) -> Result<CommitId> {
    // With branching on, every node of the tree has one parent (its commit's first): a round
    // starts from best itself, and the researcher's branch moves there even where that is
    // not forward (its earlier heads stay reachable from the attempts).
    if head == best || crate::engine::record::tree::on(conf) {
        return Ok(best.clone());
    }
    let repo = conf.open_repo()?;
    let (head_id, best_id) = (head.oid(), best.oid());
    if repo.graph_descendant_of(best_id, head_id)? {
        return Ok(best.clone());
    }
    let best_tree = repo.find_commit(best_id)?.tree_id();
    let message = format!(
        "Round {round}: start from best {}\n",
        crate::model::short_id(best)
    );
    let sig = crate::store::signature(&repo);
    let commit =
        crate::git::snapshot::commit(&repo, best_tree, &[head_id, best_id], &message, &sig)?;
    // Reachable before `round.started` names it: a `git gc --prune=now` in between would
    // otherwise delete it, and the event would name a commit no resume can bring back.
    conf.keep_reachable(&[commit])?;
    Ok(commit.into())
}

fn start_round(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let round = st.round + 1;
    let mut heads = std::collections::BTreeMap::new();
    for (id, r) in &st.researchers {
        heads.insert(
            id.clone(),
            round_start_commit(conf, &r.head, &st.best.commit, round)?,
        );
    }
    let mut upcoming = st.clone();
    upcoming.round = round;
    for r in upcoming.researchers.values_mut() {
        r.round_iterations = 0;
    }
    let endgame = rules::is_endgame(conf, &upcoming);
    let branches = crate::engine::record::tree::round_branches(conf, &st, round, &heads)?;
    let states: Vec<String> = st
        .researchers
        .iter()
        .map(|(id, r)| {
            format!(
                "{id}:{}",
                if r.stuck_level >= 3 {
                    "respawned"
                } else {
                    "ready"
                }
            )
        })
        .collect();
    conf.record(
        Event::RoundStarted(events::RoundStarted {
            round,
            researcher_states: states,
            endgame,
            best_metric: st.best.metric,
            best_commit: st.best.commit.clone(),
            heads: heads.clone(),
            branches,
        }),
        &format!("round {round}{}", if endgame { " (endgame)" } else { "" }),
        vec![],
    )?;
    for (id, head) in &heads {
        conf.move_branch(&conf.refs.researcher(id), head, None)?;
    }
    conf.ui.info(&format!(
        "round {round}{} — best {}",
        if endgame { " (endgame)" } else { "" },
        fmt(st.best.metric)
    ));
    Ok(())
}

fn pause(conf: &Conference) -> Result<()> {
    let st = conf.state();
    conf.record(
        Event::Paused(events::Paused {
            round: st.round,
            pause_every: conf.config.pause_every,
            waits_for: None,
        }),
        &format!("paused after round {}", st.round),
        vec![],
    )
}

fn begin_synthesis(conf: &Conference, decision: &rules::Stop) -> Result<()> {
    let st = conf.state();
    let (status, why) = (decision.status, decision.why.as_str());
    conf.record(
        Event::Stopped(events::Stopped {
            final_best_metric: st.best.metric,
            round_count: st.round,
            reason: decision.token.to_string(),
            detail: why.to_string(),
            status,
        }),
        why,
        vec![],
    )?;
    conf.ui.info(&format!("stopping: {status} ({why})"));
    Ok(())
}

async fn write_synthesis(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let mut outputs = synthesis::build(conf, &st)?;
    if let Some((_, bytes)) = outputs.iter_mut().find(|(p, _)| p == files::SYNTHESIS) {
        let md = String::from_utf8_lossy(bytes).into_owned();
        *bytes = crate::engine::agent::prose::with_prose(
            conf,
            conf.config.agent.synthesizer.as_ref(),
            "synthesizer",
            md,
        )
        .await
        .into_bytes();
    }
    crate::failpoint::hit("report.built");
    conf.record(
        Event::Completed(events::Completed {
            synthesis_path: files::SYNTHESIS.into(),
            final_report_path: files::FINAL_REPORT.into(),
            total_iterations: st.total_iterations,
            status: st.final_status.clone(),
            best_metric: st.best.metric,
            best_commit: st.best.commit.clone(),
        }),
        &format!(
            "{} after {} rounds: best {} ({})",
            st.final_status.as_deref().unwrap_or("done"),
            st.round,
            fmt(st.best.metric),
            crate::model::short_id(&st.best.commit)
        ),
        outputs
            .into_iter()
            .map(|(p, b)| StateChange::Put(p, b))
            .collect(),
    )
}
