//! The commit point of an attempt: its note and the `researcher.iteration` event.

use anyhow::Result;
use git2::Oid;

use super::*;
use crate::engine::measure::evaluate::EvalResult;
use crate::engine::record::attempt::Attempt;
use crate::engine::state::files;
use crate::engine::Conference;
use crate::model::event::{self as events, Event, Note};
use crate::model::notes::AttemptNote;
use crate::model::{AttemptRecord, CommitId, Tokens};
use crate::model::{EvalStatus, Verdict};
use crate::store::StateChange;

/// Seconds to a tenth (events and notes stay readable).
pub(super) fn tenths(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}

pub(super) fn fmt_metric(m: Option<f64>) -> String {
    m.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into())
}

pub(super) fn failed_eval(status: &str, why: &str) -> EvalResult {
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

/// The note on an attempt's commit: its verdict and measurements, and how long it ran.
pub(super) fn attempt_note(
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

/// The note with what the attempt did to the tree (branching on): the node it started from,
/// and the warning a `BRANCH:` line it could not follow left.
fn with_step(mut note: Note, step: Option<&crate::model::tree::TreeStep>) -> Note {
    if let (Some(step), Some(map)) = (step, note.0.as_object_mut()) {
        map.insert("from".into(), serde_json::json!(step.from.commit));
        if let Some(warning) = &step.warning {
            map.insert("branch_warning".into(), serde_json::json!(warning));
        }
    }
    note
}

/// The change of `metric` against what the attempt is judged by: the researcher's best, or with
/// branching on the node it started from.
fn delta_of(a: &Attempt, best: Option<f64>, metric: Option<f64>) -> Option<f64> {
    let against = match &a.branch {
        Some(b) => b.from.metric,
        None => best,
    };
    match (metric, against) {
        (Some(m), Some(b)) => Some(m - b).filter(|d| d.is_finite()),
        _ => None,
    }
}

/// The attempt's reason with what its agent did outside its worktree (`remark`) after it, kept
/// small whatever a run printed.
fn with_remark(reason: Option<String>, remark: Option<&str>) -> Option<String> {
    let reason = match (reason, remark) {
        (Some(why), Some(remark)) => Some(format!("{why}; {remark}")),
        (why, remark) => why.or(remark.map(str::to_string)),
    };
    reason.map(|r| crate::exec::caps::shorten(&r))
}

/// Records `researcher.iteration`: the commit point of an attempt.
pub(super) fn record_iteration(
    conf: &Conference,
    a: &Attempt,
    commit: Option<Oid>,
    measured: Measured,
    verdict: Verdict,
    reason: Option<String>,
) -> Result<()> {
    let result = measured.result;
    let st = conf.state();
    let delta = delta_of(a, st.researcher(a.id).best_metric, result.metric);
    let reason = with_remark(reason, a.remark);
    let eval_s = super::swept::eval_seconds(a, result);
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
        timestamp: crate::engine::now_iso(),
        sub_metrics: result.sub_metrics.clone(),
        tokens: a.usage.map(Tokens::of),
        cost_usd: a.usage.and_then(|u| u.cost_usd),
        agent_s: a.agent_s.map(tenths),
        eval_s: eval_s.map(tenths),
        placement: result.placement.clone(),
        machine: conf.link().map(|link| link.machine.clone()),
        sweep: a.sweep.map(|s| s.record.clone()),
    };
    let step = super::branching::plan_step(conf, &st, a, commit, verdict, result.metric);
    let note = commit.map(|c| with_step(attempt_note(conf, c, &record, result), step.as_ref()));
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
        notes: super::swept::notes(conf, a, &record, note),
        tokens: a.usage.map(Tokens::of),
        cost_usd: a.usage.and_then(|u| u.cost_usd),
        agent_s: record.agent_s,
        eval_s: record.eval_s,
        questions: a.questions.clone(),
        placement: result.placement.clone().map(Box::new),
        branch: step.map(Box::new),
        sweep: super::swept::step(&record, a),
    };
    let mut summary = format!(
        "{} r{} i{} {} {}",
        a.id,
        st.round,
        a.iteration,
        verdict,
        result.metric.map(|m| format!("{m}")).unwrap_or_default()
    );
    if let Some(step) = &event.branch {
        summary.push_str(&super::branching::summary(step));
    }
    if let Some(sweep) = event.sweep.as_ref().and_then(|s| s.ran()) {
        summary.push_str(&format!(" — {}", sweep.summary()));
    }
    let mut produced = vec![StateChange::AppendLine(
        files::attempts(st.round),
        serde_json::to_string(&record)?,
    )];
    // A measurement of the tree (an agent failure, a rejection or a cut-short run is not one)
    // is cached, so the next attempt that produces the same tree is not measured again.
    let cacheable =
        commit.is_some() && measured.of_the_tree && EvalStatus::is_cached(&result.status);
    if cacheable {
        produced.push(StateChange::Put(
            files::eval_cache(&st.eval_settings, &a.tree.to_string()),
            serde_json::to_vec(result)?,
        ));
    }
    if let Some(sweep) = a.sweep {
        produced.extend(super::swept::cache_entries(&st.eval_settings, sweep)?);
    }
    conf.record(Event::Iteration(event), &summary, produced)?;
    record_stuck(conf, a.id, st.round, verdict)
}
