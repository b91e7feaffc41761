//! The results tables (`round-N/results.tsv`, `conference_results.tsv`) and the progress chart
//! (`conference_progress.png`) from the recorded data: knowledge transfer writes them at each
//! round's end and the synthesis at the end, so they live below both phases. Their text and
//! drawing are `render::tsv` and `render::plot`; this room gathers what they show.

use anyhow::Result;

use crate::engine::record::ledger::{read_findings, round_attempts};
use crate::engine::state::State;
use crate::engine::Conference;
use crate::model::{AttemptRecord, Finding, ReviewVerdict, Verdict, Word};
use crate::render::plot::{self as report_plot, PlotData, PlotSeries};
use crate::render::tsv;

pub fn evaluator_source(conf: &Conference) -> String {
    tsv::evaluator_source(conf.config.eval_command())
}

/// A round's attempts, each with the peer review verdict when it is the finding reviewed (the
/// researcher's round-best).
fn reviewed_attempts(
    conf: &Conference,
    round: u32,
    findings: &[Finding],
) -> Result<Vec<(AttemptRecord, Option<Word<ReviewVerdict>>)>> {
    Ok(round_attempts(conf, round)?
        .into_iter()
        .map(|a| {
            let verdict = findings
                .iter()
                .find(|f| {
                    a.verdict == Verdict::Kept
                        && f.researcher == a.researcher
                        && a.commit.as_ref() == Some(&f.commit)
                })
                .map(|f| f.verdict.clone());
            (a, verdict)
        })
        .collect())
}

/// The results table of one round, with the peer review verdict on each researcher's round-best.
pub fn round_results_tsv(conf: &Conference, round: u32, findings: &[Finding]) -> Result<String> {
    Ok(tsv::results_table(
        &evaluator_source(conf),
        &reviewed_attempts(conf, round, findings)?,
    ))
}

/// conference_results.tsv: every round's rows under one header.
pub fn conference_results_tsv(conf: &Conference, st: &State) -> Result<String> {
    let mut rows = Vec::new();
    for round in 1..=st.round {
        rows.extend(reviewed_attempts(conf, round, &read_findings(conf, round))?);
    }
    Ok(tsv::results_table(&evaluator_source(conf), &rows))
}

/// conference_progress.png: the chart of [`plot_data`].
pub fn plot(conf: &Conference, st: &State, attempts: &[AttemptRecord]) -> Result<Vec<u8>> {
    report_plot::render_png(&plot_data(conf, st, attempts))
}

/// What the progress chart shows: each researcher's readings (kept ones marked), the rounds,
/// the baseline and each round's best, the target.
pub fn plot_data(conf: &Conference, st: &State, attempts: &[AttemptRecord]) -> PlotData {
    let mut series: Vec<PlotSeries> = st
        .researchers
        .keys()
        .map(|id| PlotSeries {
            label: format!("Researcher {id}"),
            ..Default::default()
        })
        .collect();
    let mut boundaries = Vec::new();
    let mut round_bests = Vec::new();
    let mut last_round = 0;
    let mut round_end = |round: u32, x: f64, boundaries: &mut Vec<f64>| {
        if let Some(Some(best)) = st.round_bests.get(round as usize - 1) {
            round_bests.push((x, *best));
        }
        boundaries.push(x);
    };
    for (i, a) in attempts.iter().enumerate() {
        let x = (i + 1) as f64;
        if a.round != last_round && last_round != 0 {
            round_end(last_round, x - 0.5, &mut boundaries);
        }
        last_round = a.round;
        if let Some(s) = series
            .iter_mut()
            .find(|s| s.label == format!("Researcher {}", a.researcher))
        {
            s.points.push((x, a.metric));
            if a.verdict == Verdict::Kept {
                s.kept.push(x);
            }
        }
    }
    if last_round != 0 {
        // The last round's end: its best, not a boundary line.
        let mut end = Vec::new();
        round_end(last_round, attempts.len() as f64 + 0.5, &mut end);
    }
    let spec = conf.config.metric.as_ref();
    let metric = crate::engine::measure::evaluate::metric_name(&conf.config);
    PlotData {
        title: format!("{} — {metric} by iteration", conf.config.title),
        metric,
        minimize: spec
            .map(|m| m.direction == crate::config::Direction::Minimize)
            .unwrap_or(false),
        target: spec.and_then(|m| m.target),
        series,
        baseline: st.baseline_metric,
        round_boundaries: boundaries,
        round_bests,
    }
}
