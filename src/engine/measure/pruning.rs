//! What a researcher's evaluation is pruned against (`prune: on`): the curve of the researcher's
//! current best, read from the evaluation cache entry of its tree (the full evaluation that
//! measured it, the baseline's included), and the noise margin. The rule itself is pure:
//! `protocol::prune`.
//!
//! The reference is the researcher's best because the keep rule compares with it: an attempt is
//! kept only when it ends better than that best, so a run clearly behind the best's own curve is
//! the one whose remaining evaluation time is most likely wasted.

use crate::engine::measure::evaluate::{EvalResult, PruneRule};
use crate::engine::state::{files, State};
use crate::engine::Conference;

/// The pruning rule for researcher `id`'s next evaluation; None when pruning is off, in
/// qualitative mode, or when the best's evaluation printed no intermediate readings.
pub fn rule_for(conf: &Conference, st: &State, id: &str) -> Option<PruneRule> {
    let evaluation = &conf.config.evaluation;
    let direction = conf.direction();
    if !evaluation.prune || direction.is_none() {
        return None;
    }
    let head = st.researchers.get(id)?.head.oid();
    let tree = conf.open_repo().ok()?.find_commit(head).ok()?.tree_id();
    let bytes = conf
        .read_state_file(&files::eval_cache(&st.eval_settings, &tree.to_string()))
        .ok()??;
    let best: EvalResult = serde_json::from_slice(&bytes).ok()?;
    if best.curve.is_empty() {
        return None;
    }
    let noise = crate::protocol::prune::reading_noise(&best.curve).unwrap_or(0.0);
    Some(PruneRule {
        reference: best.curve,
        warmup: evaluation.prune_warmup,
        margin: margin(conf, st),
        noise,
        direction,
        early: evaluation.prune_early,
        race: None,
    })
}

/// The rule for a sweep's variant: the researcher's (when it has one) and its seat in the race
/// among the sweep's variants, which needs no reference curve. None when pruning is off or in
/// qualitative mode.
pub fn for_variant(
    conf: &Conference,
    st: &State,
    id: &str,
    seat: super::race::Seat,
) -> Option<PruneRule> {
    let evaluation = &conf.config.evaluation;
    if !evaluation.prune || conf.direction().is_none() {
        return None;
    }
    let rule = rule_for(conf, st, id).unwrap_or_else(|| PruneRule {
        reference: Vec::new(),
        warmup: evaluation.prune_warmup,
        margin: margin(conf, st),
        noise: 0.0,
        direction: conf.direction(),
        early: evaluation.prune_early,
        race: None,
    });
    Some(PruneRule {
        race: Some(seat),
        ..rule
    })
}

/// The noise margin a reading must fall behind by: the larger of the conference's noise
/// threshold (Min consensus delta, else 0.1% of the baseline) and, when the baseline was read
/// more than once (Noise runs > 1), what two single readings of one tree may differ by chance.
/// The rule widens it further to the reading noise seen on the best's own curve
/// (`PruneRule::noise`).
pub fn margin(conf: &Conference, st: &State) -> f64 {
    let threshold = crate::engine::stop::rules::noise_threshold(conf, st);
    let spread = crate::engine::noise::pooled_noise_sd(&[&st.baseline_runs])
        .map_or(0.0, |sd| crate::engine::noise::noise_margin(sd, 1));
    threshold.max(spread)
}
