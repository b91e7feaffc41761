//! What a sweep leaves in the record (`sweep` measures it): the attempt's note with the curve or
//! the warning, its siblings' notes, their evaluation-cache entries, and the event's `sweep`
//! field. Kept apart from `sweep` so that the commit point (`record`) imports nothing that
//! measures.

use anyhow::Result;

use crate::engine::record::attempt::{Attempt, SweepDone};
use crate::engine::Conference;
use crate::model::event::Note;
use crate::model::sweep::SweepStep;
use crate::model::{AttemptRecord, EvalStatus};
use crate::store::StateChange;

/// The event's `sweep` field: the sweep that ran, or the warning of a line that could not be
/// followed.
pub(super) fn step(record: &AttemptRecord, a: &Attempt) -> Option<Box<SweepStep>> {
    match (&record.sweep, &a.sweep_warning) {
        (Some(s), _) => Some(Box::new(SweepStep::Ran(s.clone()))),
        (None, Some(warning)) => Some(Box::new(SweepStep::Refused {
            warning: warning.clone(),
        })),
        (None, None) => None,
    }
}

/// The attempt's evaluation seconds: none for a result measured by an earlier attempt (the
/// cache took no time now); a sweep's, the time all its variants' evaluations ran (every budget
/// counts its N evaluations).
pub(super) fn eval_seconds(
    a: &Attempt,
    result: &crate::engine::measure::evaluate::EvalResult,
) -> Option<f64> {
    match a.sweep {
        Some(s) => Some(s.record.eval_seconds()).filter(|s| *s > 0.0),
        None => (result.seconds > 0.0).then_some(result.seconds),
    }
}

/// The notes the attempt's event writes: its own (`note`, with its usage and its sweep's curve
/// or warning), then its sweep's siblings'.
pub(super) fn notes(
    conf: &Conference,
    a: &Attempt,
    record: &AttemptRecord,
    note: Option<Note>,
) -> Vec<Note> {
    let own = note.map(|n| with_sweep(n, a).with_usage(a.usage));
    let siblings = a.sweep.map(|s| sibling_notes(conf, record, s));
    own.into_iter()
        .chain(siblings.into_iter().flatten())
        .collect()
}

/// The attempt's note with its sweep (values, commits, metrics, the chosen one) or the warning
/// its `SWEEP:` line left.
fn with_sweep(mut note: Note, a: &Attempt) -> Note {
    if let Some(map) = note.0.as_object_mut() {
        if let Some(s) = a.sweep {
            map.insert("sweep".into(), serde_json::json!(s.record));
            map.insert("sweep_curve".into(), serde_json::json!(s.record.summary()));
        }
        if let Some(warning) = &a.sweep_warning {
            map.insert("sweep_warning".into(), serde_json::json!(warning));
        }
    }
    note
}

/// The notes on the sweep's other variants: each its value, metric and evaluation, with the
/// verdict `swept` and the attempt it lost to.
fn sibling_notes(conf: &Conference, record: &AttemptRecord, s: &SweepDone) -> Vec<Note> {
    let chosen = &s.record.variants[s.record.chosen].commit;
    let variants = s.record.variants.iter().zip(&s.results).enumerate();
    variants
        .filter(|(k, _)| *k != s.record.chosen)
        .map(|(_, (v, (result, _)))| {
            Note(serde_json::json!({
                "commit": v.commit,
                "conference": conf.name,
                "researcher": record.researcher,
                "round": record.round,
                "iteration": record.iteration,
                "verdict": "swept",
                "sweep_of": chosen,
                "literal": s.record.literal,
                "value": v.value,
                "metric": result.metric,
                "runs": result.runs,
                "status": result.status,
                "reason": result.reason,
                "eval_s": v.eval_s,
            }))
        })
        .collect()
}

/// Evaluation-cache entries for the variants that measured their tree, so a later attempt that
/// produces one of them is not measured again.
pub(super) fn cache_entries(settings: &str, s: &SweepDone) -> Result<Vec<StateChange>> {
    let mut out = Vec::new();
    let variants = s.record.variants.iter().zip(&s.results).enumerate();
    // The chosen one's is the attempt's, which `record_iteration` keeps.
    for (_, (v, (result, of_the_tree))) in variants.filter(|(k, _)| *k != s.record.chosen) {
        if *of_the_tree && EvalStatus::is_cached(&result.status) {
            out.push(StateChange::Put(
                crate::engine::state::files::eval_cache(settings, &v.tree),
                serde_json::to_vec(result)?,
            ));
        }
    }
    Ok(out)
}
