//! Stop rules, checked in the original skill's order after each round: target reached →
//! converged; budgets (max_rounds, max_total_iterations, time_budget, token_budget,
//! cost_budget) → budget_stop; every
//! researcher stalled for `Stall rounds` consecutive rounds → stalled; plateau (no progress beyond
//! the noise threshold) for as many rounds, at least 2 → converged; qualitative scores all ≥ 8
//! for 2 rounds → converged. Also `pause_every`, and the per-round iteration allotment that keeps
//! `max_total_iterations` a hard cap.
//!
//! A bad streak is a signal to change direction, not to stop (seed 000's stuck levels, seed 002's
//! "plateau is a signal"): stuck levels go to the agent's prompt, level 3 ends that researcher's
//! round and respawns it next round with a pivot, and only a whole conference that stays stalled
//! round after round stops. `Stall rounds: never` is seed 002's never-stop loop: only the budgets
//! and the target end it.

use std::time::Duration;

use crate::config::Mode;
use crate::engine::state::{ResearcherState, State};
use crate::engine::Conference;
use crate::protocol::stop_rules::AfterRound;

pub use crate::protocol::stop_rules::{no_progress, Stop};

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

/// Iterations done before the current round started.
fn done_before_round(st: &State) -> u64 {
    st.total_iterations
        - st.researchers
            .values()
            .map(|r| r.round_iterations as u64)
            .sum::<u64>()
}

/// How many iterations researcher `id` may run in the current round: `iterations_per_round`,
/// unless `max_total_iterations` leaves less. What is left is shared out at the round start in
/// letter order (A gets the remainder first), so the cap is never overshot by researchers
/// racing for the last iterations, and a run is the same whatever the timing.
pub fn round_allotment(conf: &Conference, st: &State, id: &str) -> u32 {
    crate::protocol::schedule::allotment(
        conf.config.iterations_per_round,
        conf.config.max_total_iterations,
        done_before_round(st),
        st.researchers.len(),
        st.researchers.keys().position(|k| k == id).unwrap_or(0),
    )
}

/// Seconds the conference has run: its recorded running time and this run's time since its
/// last event, by this process's monotonic clock. Never a wall clock: a pause, a reboot or a
/// machine whose clock is set ahead adds nothing. On several machines, never more than the
/// running time when this run began to take part plus the time since (machines run side by
/// side): a participant whose events claim a large `running_s` does not end the conference on
/// its time budget.
pub fn running_seconds(conf: &Conference, st: &State) -> f64 {
    let link = conf.link();
    let machine = link.as_ref().map(|l| l.machine.as_str());
    let claimed = st.running_seconds_with(machine, crate::clock::running_segment().0);
    match conf.shared_since() {
        Some((at, since)) => claimed.min(at + since.elapsed().as_secs_f64()),
        None => claimed,
    }
}

/// The time budget, when it is used up.
pub fn time_budget_used(conf: &Conference, st: &State) -> Option<String> {
    let budget = conf.config.time_budget?;
    (running_seconds(conf, st) >= budget.as_secs_f64()).then(|| {
        format!(
            "time_budget ({}) used",
            crate::config::duration::format_duration(budget)
        )
    })
}

/// A researcher's time limit per round: `researcher_timeout`, else the seed's default of
/// `time_budget / count`, else none.
pub fn researcher_timeout(conf: &Conference) -> Option<Duration> {
    conf.config.researcher_timeout.or_else(|| {
        conf.config
            .time_budget
            .map(|b| b / conf.config.count.max(1) as u32)
    })
}

/// The noise threshold for the plateau rule and peer review (the rule:
/// `protocol::round::noise_threshold`).
pub fn noise_threshold(conf: &Conference, st: &State) -> f64 {
    crate::protocol::round::noise_threshold(
        conf.config.min_consensus_delta,
        st.baseline_metric,
        &st.baseline_runs,
    )
}

/// Decides, after round `st.round` completed, whether the conference stops (the rules and their
/// order: `protocol::stop_rules`).
pub fn check(conf: &Conference, st: &State) -> Option<Stop> {
    crate::protocol::stop_rules::decide(&AfterRound {
        target_reached: target_reached(conf, st.best.metric),
        spend_used: crate::engine::stop::budget::used_up(&conf.config, st),
        total_iterations: st.total_iterations,
        max_total_iterations: conf.config.max_total_iterations,
        round: st.round,
        max_rounds: conf.config.max_rounds,
        time_used: time_budget_used(conf, st),
        qualitative: conf.config.mode == Mode::Qualitative,
        stall_rounds: conf.config.stall_rounds,
        stalled_rounds: st.stalled_rounds,
        plateau_rounds: st.plateau_rounds,
        high_score_rounds: st.high_score_rounds,
    })
}

/// Whether a researcher was stalled in the round that just ended: it kept nothing, and its
/// streak of non-improving attempts reached stuck level 2 (5 in a row, across rounds) or level 3
/// (7 in a row, which ends its round early). Read before the next `round.started` resets the
/// round's counts.
pub fn researcher_stalled(r: &ResearcherState) -> bool {
    r.round_counts.kept == 0 && r.stuck_level >= 2
}

/// Every researcher was stalled in the round that just ended.
pub fn every_researcher_stalled(st: &State) -> bool {
    !st.researchers.is_empty() && st.researchers.values().all(researcher_stalled)
}

/// The round about to run (or running) is the last one the budgets allow.
pub fn is_endgame(conf: &Conference, st: &State) -> bool {
    crate::protocol::schedule::is_endgame(
        st.round,
        conf.config.max_rounds,
        conf.config.max_total_iterations,
        done_before_round(st),
        conf.config.count,
        conf.config.iterations_per_round,
    )
}

/// Pause after this round (`pause_every: N`).
pub fn should_pause(conf: &Conference, st: &State) -> bool {
    crate::protocol::schedule::pause_after(conf.config.pause_every, st.round)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn researcher(kept: u64, stuck_level: u8) -> ResearcherState {
        ResearcherState {
            round_counts: crate::engine::state::Counts {
                kept,
                ..Default::default()
            },
            stuck_level,
            ..ResearcherState::at("0".repeat(40).try_into().unwrap())
        }
    }

    #[test]
    fn a_researcher_is_stalled_when_it_kept_nothing_at_level_two_or_more() {
        let cases = [
            (0, 0, false),
            (0, 1, false),
            (0, 2, true),
            (0, 3, true),
            (1, 3, false),
            (2, 2, false),
        ];
        for (kept, level, want) in cases {
            assert_eq!(
                researcher_stalled(&researcher(kept, level)),
                want,
                "{kept} {level}"
            );
        }
    }
}
