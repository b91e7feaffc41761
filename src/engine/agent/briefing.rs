//! What a researcher's prompt says about the past, so that an agent does not repeat itself: its
//! own recent attempts with verdicts, metrics and why they were rejected or crashed (with the
//! last lines a crash printed); the other researchers' failed attempts this round; and the
//! peer-review verdicts of earlier rounds. Gathered here from the state tree and the run logs
//! into `model::briefing::Briefing`; `render::prompt` writes it, newest first within a byte
//! budget per part.

use anyhow::Result;

use crate::engine::record::ledger::{
    latest_round_attempts, read_findings, read_picks, recent_attempts,
};
use crate::engine::Conference;

use crate::model::briefing::{Briefing, Reviewed, Tried};
use crate::model::{AttemptRecord, PickResult, Verdict};

/// Lines of a crash's output shown, and characters per line.
const OUTPUT_LINES: usize = 6;
const OUTPUT_LINE_CHARS: usize = 200;

/// The briefing for researcher `id` in the current round.
pub fn gather(conf: &Conference, id: &str) -> Result<Briefing> {
    let round = conf.state().round;
    let tried = |a: &AttemptRecord| Tried {
        researcher: a.researcher.clone(),
        round: a.round,
        iteration: a.iteration,
        verdict: a.verdict.clone(),
        metric: a.metric,
        delta: a.delta,
        description: a.description.clone(),
        reason: a.reason.clone(),
        output: crash_output(conf, a),
    };
    let own = recent_attempts(conf, id)?
        .iter()
        .rev()
        .take(50)
        .map(tried)
        .collect();
    let others = latest_round_attempts(conf, round, 30, |a| {
        a.researcher != id && a.verdict != Verdict::Kept
    })?
    .iter()
    .rev()
    .map(tried)
    .collect();
    let mut reviews = Vec::new();
    for r in (1..round).rev().take(5) {
        let picks = read_picks(conf, r);
        for f in read_findings(conf, r) {
            let outcome = picks
                .iter()
                .find(|p| p.researcher == f.researcher)
                .map(|p| match (p.result.known(), p.conflicts.is_empty()) {
                    (Some(PickResult::Merged), true) => "on best".to_string(),
                    (Some(PickResult::Merged), false) => {
                        format!("on best except {}", p.conflicts.join(", "))
                    }
                    _ => format!("not combined: {}", p.reason),
                });
            reviews.push(Reviewed {
                round: r,
                researcher: f.researcher.clone(),
                description: f.description.lines().next().unwrap_or("").to_string(),
                verdict: f.verdict.clone(),
                gain: f.gain_reproduced,
                reasoning: f.reasoning.clone(),
                outcome,
            });
        }
    }
    let minimize = conf.direction() == Some(crate::config::Direction::Minimize);
    Ok(Briefing {
        own,
        others,
        reviews,
        minimize,
    })
}

/// The last lines a crashed or timed-out attempt printed: the agent's log when the agent
/// failed, else the evaluation's (its last run), stderr before stdout.
fn crash_output(conf: &Conference, a: &AttemptRecord) -> Vec<String> {
    if !matches!(a.verdict.as_str(), "crashed" | "timeout") {
        return Vec::new();
    }
    let base = format!("{}-r{}-i{}", a.researcher, a.round, a.iteration);
    let agent_failed = a.reason.as_deref().is_some_and(|r| r.starts_with("agent "));
    let candidates: Vec<String> = if agent_failed {
        vec![format!("{base}.err"), format!("{base}.out")]
    } else {
        (0..conf.config.evaluation.repeats.max(1))
            .rev()
            .flat_map(|run| [format!("{base}.{run}.err"), format!("{base}.{run}.out")])
            .collect()
    };
    candidates
        .iter()
        .map(|name| crate::exec::process::read_output(&conf.log_path(name)))
        .find(|text| !text.trim().is_empty())
        .map(|text| last_lines(&text))
        .unwrap_or_default()
}

fn last_lines(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(OUTPUT_LINES)..]
        .iter()
        .map(|l| match l.char_indices().nth(OUTPUT_LINE_CHARS) {
            Some((at, _)) => format!("{}…", &l[..at]),
            None => l.to_string(),
        })
        .collect()
}
