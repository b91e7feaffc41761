//! The results tables (`round-N/results.tsv`, `conference_results.tsv`, `git conference log
//! --format tsv`): the original skill's columns, a row per attempt, a column per sub-metric.

use super::format::one_line;
use crate::model::{AttemptRecord, ReviewVerdict, Verdict, Word};

/// Header of conference_results.tsv: the original skill's columns, then the attempt's commit
/// and how long its agent and evaluation ran; one column per sub-metric follows
/// ([`results_table`]).
pub const RESULTS_HEADER: &str = "round\tresearcher\titeration\tmetric_value\tdelta\tdelta_pct\tstatus\tdescription\tevaluator_source\tpeer_review_verdict\ttimestamp\tcommit\tagent_s\teval_s";

/// The status column: the attempt's verdict, the word `status`, `log` and the reports use
/// (kept, reverted, crashed, timeout, rejected, no_change; interrupted for an attempt set aside).
fn tsv_status(verdict: &Word<Verdict>) -> &'static str {
    match verdict.known() {
        Some(v) => v.as_str(),
        None if *verdict == crate::model::EvalStatus::Interrupted.as_str() => "interrupted",
        None => "failed",
    }
}

fn tsv_clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// A signed number as the seed's logs write deltas: `+6.0`, `-0.0125` (at most 6 decimals).
pub fn signed(d: f64) -> String {
    let s = format!("{d:+.6}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

/// The description column; a rejected, crashed, timed-out or unchanged attempt's reason follows
/// it (the seed's status column has only kept | reverted | failed), so the column count stays.
fn tsv_description(a: &AttemptRecord) -> String {
    let mut text = tsv_clean(&a.description);
    if crate::model::reasons::shows_reason(&a.verdict) {
        let why = crate::model::reasons::reason_text(&a.verdict, a.reason.as_deref());
        text.push_str(&format!(
            " [{}: {}]",
            a.verdict,
            tsv_clean(&one_line(&why, 200))
        ));
    }
    text
}

/// One results row, with a column for each of `sub_metrics` (`-` where it printed none).
pub fn tsv_row(
    a: &AttemptRecord,
    evaluator: &str,
    verdict: Option<&Word<ReviewVerdict>>,
    sub_metrics: &[String],
) -> String {
    let delta = a.delta.map(signed).unwrap_or_else(|| "-".into());
    let delta_pct = match (a.delta, a.metric) {
        (Some(d), Some(m)) if (m - d).abs() > f64::EPSILON => {
            format!("{:+.2}", 100.0 * d / (m - d).abs())
        }
        _ => "-".into(),
    };
    let number = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let mut row = format!(
        "{}\t{}\t{}\t{}\t{delta}\t{delta_pct}\t{}\t{}\t{evaluator}\t{}\t{}\t{}\t{}\t{}",
        a.round,
        a.researcher,
        a.iteration,
        number(a.metric),
        tsv_status(&a.verdict),
        tsv_description(a),
        verdict.map_or("-", |v| v.as_str()),
        a.timestamp,
        a.commit.as_deref().unwrap_or("-"),
        number(a.agent_s),
        number(a.eval_s),
    );
    for name in sub_metrics {
        row.push('\t');
        row.push_str(&number(a.sub_metrics.get(name).copied()));
    }
    row
}

/// The results table of `rows`: the header, a column per sub-metric any attempt printed
/// (`memory_gb`, …), a row per attempt.
pub fn results_table(
    evaluator: &str,
    rows: &[(AttemptRecord, Option<Word<ReviewVerdict>>)],
) -> String {
    let sub_metrics: Vec<String> = rows
        .iter()
        .flat_map(|(a, _)| a.sub_metrics.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = String::from(RESULTS_HEADER);
    for name in &sub_metrics {
        out.push('\t');
        out.push_str(&tsv_clean(name));
    }
    out.push('\n');
    for (a, verdict) in rows {
        out.push_str(&tsv_row(a, evaluator, verdict.as_ref(), &sub_metrics));
        out.push('\n');
    }
    out
}

/// The evaluator column: the evaluation command, on one line.
pub fn evaluator_source(eval_command: &str) -> String {
    format!("script:{}", tsv_clean(eval_command))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(
        iteration: u32,
        verdict: &str,
        metric: Option<f64>,
        delta: Option<f64>,
    ) -> AttemptRecord {
        serde_json::from_value(serde_json::json!({
            "round": 1, "researcher": "A", "iteration": iteration,
            "commit": if verdict == "kept" { "a".repeat(40) } else { String::new() },
            "tree": "t", "metric": metric, "delta": delta, "verdict": verdict,
            "description": format!("try\t{iteration}\nsecond line"),
            "reason": (verdict == "crashed").then_some("exit status 1: Traceback"),
            "timestamp": "2026-01-01T00:00:00Z",
            "sub_metrics": if iteration == 1 { serde_json::json!({"memory_gb": 3.5}) } else { serde_json::json!({}) },
            "agent_s": 12.5, "eval_s": 3.0
        }))
        .unwrap()
    }

    /// A round's results table: a kept attempt with its review verdict and a sub-metric, a
    /// reverted one, a crash with its reason in the description column.
    #[test]
    fn the_results_table() {
        let rows = vec![
            (
                attempt(1, "kept", Some(9.5), Some(-0.5)),
                Some(ReviewVerdict::Validated.into()),
            ),
            (attempt(2, "reverted", Some(10.25), Some(0.75)), None),
            (attempt(3, "crashed", None, None), None),
        ];
        insta::assert_snapshot!(results_table(&evaluator_source("./eval.sh\tfast"), &rows));
        assert_eq!(signed(6.0), "+6.0");
        assert_eq!(signed(-0.0125), "-0.0125");
    }
}
