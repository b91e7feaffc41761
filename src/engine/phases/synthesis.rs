//! The end of a conference: `synthesis.md`, `final_report.md` and `conference_progress.png`,
//! built from the recorded data. This file gathers what the pages show (the records, the diffs
//! git computes, what conference.md says); `render::report` writes them.

use anyhow::Result;
use git2::Repository;

use crate::engine::record::ledger::{all_attempts, read_findings, read_picks};
use crate::engine::record::tables::{plot, plot_data};
use crate::engine::state::{files, State};
use crate::engine::Conference;
use crate::git::snapshot;
use crate::model::{Finding, PickRecord};
use crate::render::report::{self, DiffSummary, Ended};

/// Writes synthesis.md, final_report.md and the plot: (path, bytes) for the state tree.
pub fn build(conf: &Conference, st: &State) -> Result<Vec<(String, Vec<u8>)>> {
    let repo = conf.open_repo()?;
    let attempts = all_attempts(conf, st)?;
    let findings = all_findings(conf, st);
    let finding_diffs = (findings.iter())
        .map(|(_, f)| finding_diff(&repo, f))
        .collect::<Result<Vec<_>>>()?;
    let picks: Vec<(u32, PickRecord)> = (1..=st.round)
        .flat_map(|r| read_picks(conf, r).into_iter().map(move |p| (r, p)))
        .collect();
    let config = &conf.config;
    let best_path = match config.branching.is_on() {
        true => crate::render::tree::best_path(&crate::engine::record::lineage::nodes(conf)?),
        false => String::new(),
    };
    let ended = Ended {
        name: &conf.name,
        title: &config.title,
        goal: config.goal.lines().next().unwrap_or(""),
        metric: &crate::engine::measure::evaluate::metric_name(config),
        metric_spec: (config.metric.as_ref()).map(|m| (m.direction, m.target)),
        best_branch: &conf.refs.best_branch(),
        noise_runs: config.noise_runs,
        review_runs: config.noise_runs.max(config.evaluation.repeats),
        state: st,
        attempts: &attempts,
        findings: &findings,
        finding_diffs: &finding_diffs,
        picks: &picks,
        best_vs_baseline: &best_vs_baseline(&repo, st)?,
        chart: &plot_data(conf, st, &attempts),
        spend: &[
            crate::engine::stop::budget::report_section(config, st),
            crate::render::cost::report_section(st),
            crate::render::importance::report_section(
                &crate::engine::measure::importance::of_conference(conf, st, &attempts)?,
                &crate::engine::measure::evaluate::metric_name(config),
            ),
        ]
        .concat(),
        best_path: &best_path,
    };
    let report = report::final_report(&ended);
    let synthesis = report::synthesis(&ended);
    let png = plot(conf, st, &attempts)?;
    Ok(vec![
        (files::SYNTHESIS.to_string(), synthesis.into_bytes()),
        (files::FINAL_REPORT.to_string(), report.into_bytes()),
        (files::PLOT.to_string(), png),
    ])
}

/// Every round's findings, each with its round.
fn all_findings(conf: &Conference, st: &State) -> Vec<(u32, Finding)> {
    (1..=st.round)
        .flat_map(|r| read_findings(conf, r).into_iter().map(move |f| (r, f)))
        .collect()
}

/// A finding's diff from its round start (None when git no longer has one of the commits).
fn finding_diff(repo: &Repository, f: &Finding) -> Result<Option<String>> {
    let (Ok(a), Ok(b)) = (
        repo.find_commit(f.round_start.oid()),
        repo.find_commit(f.commit.oid()),
    ) else {
        return Ok(None);
    };
    Ok(Some(snapshot::diff_text(repo, a.tree_id(), b.tree_id())?))
}

/// The baseline's tree against the best's: the stat and the diff.
fn best_vs_baseline(repo: &Repository, st: &State) -> Result<DiffSummary> {
    let base_tree = repo.find_commit(st.baseline_commit.oid())?.tree_id();
    let best_tree = repo.find_commit(st.best.commit.oid())?.tree_id();
    let (files, insertions, deletions) = snapshot::diff_stat(repo, base_tree, best_tree)?;
    Ok(DiffSummary {
        files,
        insertions,
        deletions,
        text: snapshot::diff_text(repo, base_tree, best_tree)?,
    })
}
