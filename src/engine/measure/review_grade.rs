//! Measuring a commit review-grade, the way peer review and knowledge transfer both do: fresh
//! runs in a clean detached checkout, the metric their median; and the `round.phase_started`
//! event a measuring phase opens with. Both phases call it; neither imports the other for it.

use anyhow::Result;

use crate::engine::measure::evaluate::{self, EvalRequest, EvalResult};
use crate::engine::noise;
use crate::engine::Conference;
use crate::git::snapshot;
use crate::model::event::{self as events, Event};
use crate::model::{CommitId, EvalStatus};

/// Runs per candidate in review: noise runs, at least the evaluation's repeats.
pub fn review_runs(conf: &Conference) -> u32 {
    conf.config
        .noise_runs
        .max(conf.config.evaluation.repeats)
        .max(1)
}

/// Cache namespace of review-grade measurements (fresh runs in a clean checkout).
pub fn review_settings(conf: &Conference) -> String {
    let metric = evaluate::metric_name(&conf.config);
    evaluate::settings_hash(
        &format!("review\0{}", conf.config.eval_command()),
        review_runs(conf),
        conf.config.evaluation.timeout,
        &metric,
    )
}

/// Evaluates `commit` in the detached worktree `label` with review-grade runs; its metric is
/// the median of the runs (one wild reading moves it little).
pub async fn measure(
    conf: &Conference,
    label: &str,
    commit: &CommitId,
    command: &str,
    what: &str,
) -> Result<EvalResult> {
    let mut result = measure_runs(conf, label, commit, command, what, review_runs(conf), 0).await?;
    if result.ok() {
        result.metric = noise::median(&result.runs);
    }
    Ok(result)
}

/// `runs` readings of `commit` in a clean checkout, numbered from `first_run`
/// (`CONFERENCE_EVAL_RUN`).
pub async fn measure_runs(
    conf: &Conference,
    label: &str,
    commit: &CommitId,
    command: &str,
    what: &str,
    runs: u32,
    first_run: u32,
) -> Result<EvalResult> {
    let path = conf.prepare_worktree(label, None, commit)?;
    crate::engine::agent::workspace::remove_ignored(conf, &path)?;
    if !crate::engine::agent::workspace::ready_checkout(conf, &path, label).await? {
        return Ok(interrupted());
    }
    let st = conf.state();
    let mut env = conf.context_env("review", st.round, 0, st.best.metric);
    env.push(("CONFERENCE_COMMIT".into(), commit.to_string()));
    env.push(("CONFERENCE_EVAL_RUN".into(), first_run.to_string()));
    let metric = evaluate::metric_name(&conf.config);
    let suffix = if first_run > 0 {
        format!("-{first_run}")
    } else {
        String::new()
    };
    let result = evaluate::evaluate(EvalRequest {
        command,
        metric: &metric,
        last_number: conf.config.evaluation.last_number,
        runs,
        timeout: conf.config.evaluation.timeout,
        cwd: &path,
        commit,
        env,
        log_prefix: conf.log_path(&format!("r{}-{what}{suffix}.eval", st.round)),
        scheduler: &conf.scheduler,
        // Review readings are never pruned.
        prune: None,
        launcher: &conf.launcher,
    })
    .await?;
    // Leave the checkout clean for the next candidate (evaluations may write files).
    let wt = crate::engine::agent::workspace::open_worktree(conf, &path)?;
    snapshot::reset(&wt, commit.oid(), None)?;
    Ok(result)
}

/// What an evaluation stopped by Ctrl-C gives.
fn interrupted() -> EvalResult {
    EvalResult {
        metric: None,
        runs: vec![],
        sub_metrics: Default::default(),
        status: EvalStatus::Interrupted.into(),
        reason: Some("interrupted".into()),
        seconds: 0.0,
        ..Default::default()
    }
}

/// Records that a measuring phase of the round begins (`round.phase_started`) and says so on
/// stderr: what it measures, so neither a terminal nor `log --follow` is silent while it runs.
pub fn phase_started(conf: &Conference, round: u32, phase: &str, measuring: &str) -> Result<()> {
    let label = phase.replace('_', " ");
    conf.record(
        Event::PhaseStarted(events::PhaseStarted {
            round,
            phase: phase.to_string(),
            measuring: measuring.to_string(),
        }),
        &format!("round {round} {label}: {measuring}"),
        vec![],
    )?;
    conf.ui
        .info(&format!("{label}, round {round}: {measuring}"));
    Ok(())
}
