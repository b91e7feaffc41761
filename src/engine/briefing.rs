//! What a researcher's prompt says about the past, so that an agent does not repeat itself: its
//! own recent attempts with verdicts, metric changes (said as better or worse, whatever the
//! direction) and why they were rejected or crashed (with the last lines a crash printed); the
//! other researchers' failed attempts this round; and the peer-review verdicts of earlier
//! rounds. Gathered from the state (`gather`), rendered newest first within a byte budget per
//! part, the oldest dropped with a line saying how many (`render`), so a long conference never
//! grows the prompt without bound.

use std::fmt::Write;

use anyhow::Result;

use super::ledger::{latest_round_attempts, read_findings, read_picks, recent_attempts};
use super::Conference;

use crate::model::{AttemptRecord, PickResult, ReviewVerdict, Verdict, Word};

/// Bytes each part of the briefing may take.
pub const OWN_BYTES: usize = 6 * 1024;
pub const OTHERS_BYTES: usize = 3 * 1024;
pub const REVIEWS_BYTES: usize = 3 * 1024;
/// Lines of a crash's output shown, and characters per line.
const OUTPUT_LINES: usize = 6;
const OUTPUT_LINE_CHARS: usize = 200;

/// The past, as the prompt tells it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Briefing {
    /// The researcher's own attempts, newest first.
    pub own: Vec<Tried>,
    /// Other researchers' attempts of this round that were not kept, newest first.
    pub others: Vec<Tried>,
    /// Peer-review verdicts of earlier rounds, newest first.
    pub reviews: Vec<Reviewed>,
    /// Lower metric is better.
    pub minimize: bool,
}

/// One attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Tried {
    pub researcher: String,
    pub round: u32,
    pub iteration: u32,
    pub verdict: Word<Verdict>,
    pub metric: Option<f64>,
    /// Metric minus the researcher's best when it was tried.
    pub delta: Option<f64>,
    pub description: String,
    pub reason: Option<String>,
    /// The last lines a crashed or timed-out run printed (when its log is on this machine).
    pub output: Vec<String>,
}

/// One researcher's round-best as peer review judged it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    pub round: u32,
    pub researcher: String,
    pub description: String,
    pub verdict: Word<ReviewVerdict>,
    /// Reproduced gain (positive: better).
    pub gain: f64,
    pub reasoning: String,
    /// What knowledge transfer made of it (`on best`, `not combined: …`).
    pub outcome: Option<String>,
}

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

/// The briefing's sections of the prompt (empty parts left out).
pub fn render(b: &Briefing) -> String {
    let mut s = String::new();
    if !b.reviews.is_empty() {
        let items = b.reviews.iter().map(reviewed);
        let _ = writeln!(
            s,
            "## Peer review of earlier rounds (newest first)\n{}",
            bounded(items, REVIEWS_BYTES, "older findings")
        );
    }
    if !b.own.is_empty() {
        let items = b.own.iter().map(|t| tried(t, b.minimize, None));
        let _ = writeln!(
            s,
            "## Your recent attempts (newest first)\n{}",
            bounded(items, OWN_BYTES, "older attempts")
        );
    }
    if !b.others.is_empty() {
        let items = b
            .others
            .iter()
            .map(|t| tried(t, b.minimize, Some(&t.researcher)));
        let _ = writeln!(
            s,
            "## Other researchers' attempts this round that failed (do not repeat them)\n{}",
            bounded(items, OTHERS_BYTES, "older attempts")
        );
    }
    s
}

/// Items in order while they fit in `cap` bytes, then a line saying how many were left out.
pub fn bounded(items: impl Iterator<Item = String>, cap: usize, noun: &str) -> String {
    let mut out = String::new();
    let mut omitted = 0;
    for item in items {
        if omitted == 0 && out.len() + item.len() <= cap {
            out.push_str(&item);
        } else {
            omitted += 1;
        }
    }
    if omitted > 0 {
        let _ = writeln!(out, "({omitted} {noun} omitted)");
    }
    out
}

/// `0.25`, `-0.0031`, `1.2e-7`: a metric without float noise.
pub fn number(v: f64) -> String {
    if v != 0.0 && (v.abs() < 1e-4 || v.abs() >= 1e9) {
        return format!("{v:.3e}");
    }
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How a metric change compares, in words: `0.14 better`, `0.06 worse`, `no better`.
pub fn change(delta: f64, minimize: bool) -> String {
    let gain = if minimize { -delta } else { delta };
    if gain > 0.0 {
        format!("{} better", number(gain))
    } else if gain < 0.0 {
        format!("{} worse", number(-gain))
    } else {
        "no better".into()
    }
}

/// One attempt's lines; `who` names another researcher's.
fn tried(t: &Tried, minimize: bool, who: Option<&str>) -> String {
    let mut s = match who {
        Some(who) => format!("- {who} r{} i{} {}", t.round, t.iteration, t.verdict),
        None => format!("- r{} i{} {}", t.round, t.iteration, t.verdict),
    };
    if let Some(m) = t.metric {
        let _ = write!(s, ": {}", number(m));
        if let Some(d) = t.delta {
            let whose = who.map_or("your".to_string(), |w| format!("{w}'s"));
            let _ = write!(s, " ({} than {whose} best then)", change(d, minimize));
        }
    }
    if !t.description.is_empty() {
        let _ = write!(s, " — {}", t.description);
    }
    s.push('\n');
    if let Some(reason) = t.reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = writeln!(s, "  reason: {reason}");
    }
    if !t.output.is_empty() {
        let _ = writeln!(s, "  last output:");
        for line in &t.output {
            let _ = writeln!(s, "    {line}");
        }
    }
    s
}

/// One finding's lines (its gain is direction-aware already: positive is better).
fn reviewed(r: &Reviewed) -> String {
    let mut s = format!(
        "- Round {}, Researcher {}: {} — {}",
        r.round, r.researcher, r.description, r.verdict
    );
    if r.gain != 0.0 {
        let _ = write!(s, " (reproduced {})", change(r.gain, false));
    }
    if let Some(outcome) = &r.outcome {
        let _ = write!(s, ", {outcome}");
    }
    s.push('\n');
    if !r.reasoning.is_empty() && r.verdict != ReviewVerdict::Validated {
        let _ = writeln!(s, "  why: {}", r.reasoning);
    }
    s
}
