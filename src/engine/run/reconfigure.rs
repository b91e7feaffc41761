//! Changing a conference after `start`: new settings between rounds, a new baseline before it is
//! measured, and continuing a conference that stopped. Each is one event, recorded before any
//! effect (a branch move, a worktree reset), so a kill at any instant leaves a state `resume`
//! finishes from.
//!
//! - `conference.config_changed`: the stored conference.md is replaced in the same event commit
//!   (the payload has the settings that changed and a unified diff); the evaluation cache key
//!   follows the new evaluation settings, so nothing measured the old way is reused.
//! - `conference.rebased`: a baseline that failed to measure can move to a commit holding the
//!   fixed harness (`resume --base REV`), only while no metric exists.
//! - `conference.continued`: a conference stopped on a budget, a stall or a plateau goes back to
//!   "between rounds"; the stop events stay in the log.

use anyhow::Result;
use git2::Oid;

use crate::config::changes::Change;
use crate::config::Config;
use crate::engine::measure::evaluate;
use crate::engine::state::files;
use crate::engine::stop::rules;
use crate::engine::Conference;
use crate::model::event::{self as events, Event};
use crate::model::CommitId;
use crate::store::StateChange;

/// Records `conference.config_changed`: `text` (already merged with the maintained sections)
/// becomes the stored conference.md.
pub fn record_config_change(
    conf: &Conference,
    text: &str,
    config: &Config,
    changes: &[Change],
    file: &str,
) -> Result<()> {
    let settings = evaluate::settings_hash(
        config.eval_command(),
        config.evaluation.repeats,
        config.evaluation.timeout,
        &evaluate::metric_name(config),
    );
    let listed: Vec<_> = changes
        .iter()
        .map(|c| events::SettingChanged {
            section: c.section.to_string(),
            key: c.key.clone(),
            old: c.old.clone(),
            new: c.new.clone(),
            line: c.line,
        })
        .collect();
    let summary = changes
        .iter()
        .map(Change::describe)
        .collect::<Vec<_>>()
        .join("; ");
    conf.record(
        Event::ConfigChanged(events::ConfigChanged {
            changes: listed,
            file: file.to_string(),
            round: conf.state().round,
            diff: crate::config::changes::unified(&conf.config_text, text),
            eval_settings: settings,
            noise_settings_changed: config.noise_runs > 1 || config.evaluation.repeats > 1,
        }),
        &summary,
        vec![StateChange::Put(
            files::CONFIG.into(),
            text.as_bytes().to_vec(),
        )],
    )
}

/// Records `conference.rebased` and moves the branches and worktrees to `base`. Only before the
/// baseline is measured (the caller checks).
pub fn rebase(conf: &Conference, base: Oid) -> Result<()> {
    let st = conf.state();
    let new = CommitId::from(base);
    conf.record(
        Event::Rebased(events::Rebased {
            from: st.baseline_commit.clone(),
            to: new.clone(),
        }),
        &format!(
            "baseline {} → {}",
            crate::model::short_id(&st.baseline_commit),
            crate::model::short_id(&new)
        ),
        vec![],
    )?;
    for id in st.researchers.keys() {
        conf.move_branch(&conf.refs.researcher(id), &new, None)?;
        let branch = conf.refs.researcher_branch(id);
        conf.prepare_worktree(&format!("researcher-{id}"), Some(&branch), &new)?;
    }
    conf.move_branch(&conf.refs.best(), &new, None)?;
    Ok(())
}

use crate::protocol::reduce::continued;

/// Why a continued conference would stop again at once under its current settings, if it would
/// (the time it was stopped never counts: budgets count running time).
pub fn would_stop(conf: &Conference) -> Option<rules::Stop> {
    rules::check(conf, &continued(&conf.state()))
}

/// Seconds since the conference's last event: for a stopped conference, how long it has been
/// stopped (read before a resume records anything).
pub fn stopped_for(st: &crate::engine::state::State) -> u64 {
    time::OffsetDateTime::parse(
        &st.updated_at,
        &time::format_description::well_known::Rfc3339,
    )
    .map(|t| crate::engine::now_unix().saturating_sub(t.unix_timestamp().max(0) as u64))
    .unwrap_or(0)
}

/// Records `conference.continued`: a stopped conference goes on with its current settings. The
/// `idle` seconds it was stopped are recorded (they never counted against its time budget).
pub fn continue_stopped(conf: &Conference, idle: u64) -> Result<()> {
    let st = conf.state();
    conf.record(
        Event::Continued(events::Continued {
            round: st.round,
            previous_status: st.final_status.clone(),
            previous_reason: st.stop_reason.clone(),
            stopped_seconds: idle,
        }),
        &format!(
            "after round {} ({})",
            st.round,
            st.final_status.as_deref().unwrap_or("stopped")
        ),
        vec![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::state::Phase;

    fn stopped_state() -> crate::engine::state::State {
        let json = serde_json::json!({
            "name": "x", "status": "completed", "phase": "done", "round": 3,
            "baseline_commit": "0".repeat(40), "baseline_metric": 10.0,
            "best": {"commit": "0".repeat(40), "metric": 8.0, "researcher": "A", "round": 2},
            "researchers": {"A": {"head": "0".repeat(40), "best_metric": 8.0,
                "round_start": "0".repeat(40), "round_start_metric": 8.0, "round_iterations": 2,
                "round_finished": "stuck", "counts": {"kept": 1, "reverted": 6, "crashed": 0,
                "timeout": 0, "rejected": 0, "no_change": 0}, "round_counts": {"kept": 0,
                "reverted": 2, "crashed": 0, "timeout": 0, "rejected": 0, "no_change": 0},
                "consecutive_fails": 6, "stuck_level": 2, "attempts": 7, "last_verdict": "reverted"}},
            "total_iterations": 7, "started_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T01:00:00Z", "started_unix": 1767225600, "events": 30,
            "last_event": "conference.completed", "round_bests": [9.0, 8.0, 8.0],
            "plateau_rounds": 2, "high_score_rounds": 0, "stalled_rounds": 2,
            "final_status": "stalled",
            "stop_reason": "every researcher is stuck at level 2 or higher",
            "shared_knowledge": [], "eval_settings": "abc", "transfer_done": []
        });
        serde_json::from_value(json).expect("a state written before stopped_seconds existed")
    }

    #[test]
    fn a_continued_conference_starts_a_fresh_streak_between_rounds() {
        let st = stopped_state();
        assert_eq!(st.stopped_seconds, 0);
        let next = continued(&st);
        assert_eq!(next.phase, Phase::Between);
        assert_eq!((next.final_status, next.stop_reason), (None, None));
        assert_eq!((next.plateau_rounds, next.stalled_rounds), (0, 0));
        let a = &next.researchers["A"];
        assert_eq!((a.stuck_level, a.consecutive_fails), (0, 0));
        // History is kept: rounds, counts, bests.
        assert_eq!(next.round, 3);
        assert_eq!(next.round_bests, st.round_bests);
        assert_eq!(a.counts, st.researchers["A"].counts);
        // Stopped since 2026-01-01T01:00:00Z: at least the time since then.
        assert!(stopped_for(&st) > 3600);
    }
}
