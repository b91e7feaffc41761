//! Stop rules, checked in the original skill's order after each round: target reached →
//! converged; budgets (max_rounds, max_total_iterations, time_budget) → budget_stop; every
//! researcher at stuck level 2+ → stalled; plateau for 2 rounds within the noise threshold →
//! converged; qualitative scores all ≥ 8 for 2 rounds → converged. Also `pause_every`.

use super::state::State;
use super::Conference;
use crate::config::{Mode, Tolerance};

/// A decision to stop: (final status, reason).
pub type Stop = (&'static str, String);

/// The target is reached by `metric`.
pub fn target_reached(conf: &Conference, metric: Option<f64>) -> bool {
    let (Some(spec), Some(m)) = (&conf.config.metric, metric) else {
        return false;
    };
    match (spec.target, spec.direction) {
        (Some(t), crate::config::Direction::Minimize) => m <= t,
        (Some(t), crate::config::Direction::Maximize) => m >= t,
        _ => false,
    }
}

/// A budget that no longer allows another iteration, if any.
pub fn budget_exhausted(conf: &Conference, st: &State) -> Option<String> {
    if let Some(max) = conf.config.max_total_iterations {
        if st.total_iterations >= max as u64 {
            return Some(format!("max_total_iterations ({max}) reached"));
        }
    }
    if let Some(budget) = conf.config.time_budget {
        let elapsed = super::now_unix().saturating_sub(st.started_unix);
        if elapsed >= budget.as_secs() {
            return Some(format!(
                "time_budget ({}) used",
                crate::config::duration::format_duration(budget)
            ));
        }
    }
    None
}

/// The noise threshold for the plateau rule: Min consensus delta, else 0.1% of the baseline.
pub fn noise_threshold(conf: &Conference, st: &State) -> f64 {
    let baseline = st.baseline_metric.unwrap_or(0.0);
    conf.config
        .min_consensus_delta
        .unwrap_or(Tolerance::Percent(0.1))
        .resolve(baseline)
}

/// Decides, after round `st.round` completed, whether the conference stops.
pub fn check(conf: &Conference, st: &State) -> Option<Stop> {
    if target_reached(conf, st.best.metric) {
        return Some(("converged", "target reached".into()));
    }
    if st.round >= conf.config.max_rounds {
        return Some((
            "budget_stop",
            format!("max_rounds ({}) reached", conf.config.max_rounds),
        ));
    }
    if let Some(why) = budget_exhausted(conf, st) {
        return Some(("budget_stop", why));
    }
    if st.round > 0 && st.researchers.values().all(|r| r.stuck_level >= 2) {
        return Some((
            "stalled",
            "every researcher is stuck at level 2 or higher".into(),
        ));
    }
    if conf.config.mode == Mode::Qualitative {
        if st.high_score_rounds >= 2 {
            return Some(("converged", "all scores >= 8/10 for 2 rounds".into()));
        }
    } else if st.plateau_rounds >= 2 {
        return Some((
            "converged",
            "metric plateau: no progress beyond the noise threshold for 2 rounds".into(),
        ));
    }
    None
}

/// The round about to run (or running) is the last one the budgets allow.
pub fn is_endgame(conf: &Conference, st: &State) -> bool {
    if st.round >= conf.config.max_rounds {
        return true;
    }
    if let Some(max) = conf.config.max_total_iterations {
        let per_round = conf.config.count as u64 * conf.config.iterations_per_round as u64;
        let done_before_round = st.total_iterations
            - st.researchers
                .values()
                .map(|r| r.round_iterations as u64)
                .sum::<u64>();
        if done_before_round + per_round >= max as u64 {
            return true;
        }
    }
    false
}

/// Pause after this round (`pause_every: N`).
pub fn should_pause(conf: &Conference, st: &State) -> bool {
    matches!(conf.config.pause_every, Some(n) if n > 0 && st.round > 0 && st.round.is_multiple_of(n))
}
