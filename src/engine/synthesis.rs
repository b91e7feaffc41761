//! The end of a conference: `synthesis.md` (what was learned), `final_report.md` (status, rounds
//! table, trajectory, validated and overturned findings with their diffs, best vs baseline,
//! per-researcher statistics) and `conference_progress.png`, all built from the recorded data.
//! Also the results tables in the original skill's TSV format.

use std::fmt::Write;

use anyhow::Result;
use git2::{Oid, Repository};

use super::ledger::{all_attempts, read_findings, read_picks};
use super::state::{files, State};
use super::tables::{plot, plot_data};
use super::Conference;
use crate::git::snapshot;
use crate::model::{AttemptRecord, Finding, PickRecord};
use crate::model::{FinalStatus, PickResult, ReviewVerdict};
use crate::render::format::{fmt, gain_text};
use crate::render::plot::{self as report_plot, PlotData};

/// Writes synthesis.md, final_report.md and the plot: (path, bytes) for the state tree.
pub fn build(conf: &Conference, st: &State) -> Result<Vec<(String, Vec<u8>)>> {
    let repo = conf.open_repo()?;
    let attempts = all_attempts(conf, st)?;
    let findings = all_findings(conf, st);
    let report = final_report_md(conf, st, &repo, &attempts, &findings)?;
    let synthesis = synthesis_md(conf, st, &attempts, &findings);
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

/// The status both documents name: the final status, or `running` before the end.
fn status_word(st: &State) -> String {
    st.final_status.clone().unwrap_or_else(|| "running".into())
}

/// final_report.md: summary, rounds, trajectory, reviewed findings with their diffs, best vs
/// baseline, failure reasons, per-researcher counts and the budget.
fn final_report_md(
    conf: &Conference,
    st: &State,
    repo: &Repository,
    attempts: &[AttemptRecord],
    findings: &[(u32, Finding)],
) -> Result<String> {
    let baseline = st.baseline_commit.oid();
    let best = st.best.commit.oid();
    let base_tree = repo.find_commit(baseline)?.tree_id();
    let best_tree = repo.find_commit(best)?.tree_id();

    let mut report = String::new();
    write_summary(&mut report, conf, st);
    report.push_str(&crate::render::talk::report_section(st));
    write_knowledge_briefed(&mut report, st);
    if let Some(models) = crate::model::mixed_gpu_models(attempts) {
        let _ = writeln!(
            report,
            "**Hardware:** {}.\n",
            crate::model::mixed_gpu_warning(&models)
        );
    }
    write_rounds_table(&mut report, st, findings);
    write_trajectory(&mut report, st, &plot_data(conf, st, attempts));
    write_reviewed_findings(&mut report, repo, findings)?;
    write_best_vs_baseline(&mut report, repo, base_tree, best_tree)?;
    let _ = writeln!(report, "## Why attempts failed\n");
    let _ = writeln!(report, "{}", super::reasons::markdown(attempts));
    write_researchers_table(&mut report, st);
    let _ = write!(
        report,
        "{}",
        super::budget::report_section(&conf.config, st)
    );
    let _ = writeln!(
        report,
        "\nApply the best branch to your branch with `git conference apply {}`.",
        conf.name
    );
    Ok(report)
}

/// The report's title and its list of status, goal, metric, baseline, best, size and noise.
fn write_summary(report: &mut String, conf: &Conference, st: &State) {
    let metric = super::evaluate::metric_name(&conf.config);
    let _ = writeln!(report, "# Final Report — {}\n", conf.config.title);
    let _ = writeln!(report, "- **Status:** {}", status_word(st));
    let _ = writeln!(
        report,
        "- **Reason:** {}",
        st.stop_reason.as_deref().unwrap_or("-")
    );
    let _ = writeln!(
        report,
        "- **Goal:** {}",
        conf.config.goal.lines().next().unwrap_or("")
    );
    let _ = writeln!(
        report,
        "- **Metric:** {metric}{}",
        conf.config
            .metric
            .as_ref()
            .map(|m| format!(
                " ({:?}, target {})",
                m.direction,
                m.target
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "none".into())
            ))
            .unwrap_or_default()
    );
    let _ = writeln!(
        report,
        "- **Baseline:** {} at `{}`",
        fmt(st.baseline_metric),
        crate::model::short_id(&st.baseline_commit)
    );
    let _ = writeln!(
        report,
        "- **Best:** {} at `{}` (branch `{}`)",
        fmt(st.best.metric),
        crate::model::short_id(&st.best.commit),
        conf.refs.best_branch()
    );
    let _ = writeln!(
        report,
        "- **Rounds:** {} · **iterations:** {}",
        st.round, st.total_iterations
    );
    let _ = writeln!(report, "- **Noise:** {}\n", noise_sentence(conf, st));
}

/// The entries of the knowledge store its researchers were briefed with, when there were any.
fn write_knowledge_briefed(report: &mut String, st: &State) {
    if let Some(brief) = &st.knowledge_brief {
        let _ = writeln!(
            report,
            "Briefed from earlier conferences' knowledge: {} (`git conference knowledge show ID`).\n",
            brief.entries.join(", ")
        );
    }
}

/// One row per round: the best after it and how many of its findings got each verdict.
fn write_rounds_table(report: &mut String, st: &State, findings: &[(u32, Finding)]) {
    let _ = writeln!(report, "## Rounds\n");
    let _ = writeln!(
        report,
        "| Round | Best after round | Validated | Challenged | Overturned |"
    );
    let _ = writeln!(report, "|---|---|---|---|---|");
    for round in 1..=st.round {
        let fs: Vec<&Finding> = findings
            .iter()
            .filter(|(r, _)| *r == round)
            .map(|(_, f)| f)
            .collect();
        let n = |v: ReviewVerdict| fs.iter().filter(|f| f.verdict == v).count();
        let _ = writeln!(
            report,
            "| {round} | {} | {} | {} | {} |",
            fmt(st.round_bests.get(round as usize - 1).copied().flatten()),
            n(ReviewVerdict::Validated),
            n(ReviewVerdict::Challenged),
            n(ReviewVerdict::Overturned)
        );
    }
}

/// The baseline, then the best after each round, and the plot.
fn write_trajectory(report: &mut String, st: &State, chart: &PlotData) {
    let _ = writeln!(report, "\n## Metric trajectory\n");
    let trajectory: Vec<String> = std::iter::once(fmt(st.baseline_metric))
        .chain(st.round_bests.iter().map(|m| fmt(*m)))
        .collect();
    let _ = writeln!(
        report,
        "{} (baseline, then after each round)\n",
        trajectory.join(" → ")
    );
    let _ = writeln!(report, "![progress](conference_progress.png)\n");
    let wild = report_plot::off_the_chart(chart);
    if !wild.is_empty() {
        let each: Vec<String> = wild
            .iter()
            .map(|(label, x, y)| format!("{label} at iteration {x} ({y})"))
            .collect();
        let _ = writeln!(
            report,
            "The chart leaves out {} reading(s) off its scale, far from the rest: {}.\n",
            wild.len(),
            each.join(", ")
        );
    }
}

/// The validated findings, then the challenged and overturned ones, each with its diff.
fn write_reviewed_findings(
    report: &mut String,
    repo: &Repository,
    findings: &[(u32, Finding)],
) -> Result<()> {
    for (title, verdicts) in [
        ("Validated findings", &[ReviewVerdict::Validated][..]),
        (
            "Challenged and overturned findings",
            &[ReviewVerdict::Challenged, ReviewVerdict::Overturned][..],
        ),
    ] {
        let _ = writeln!(report, "## {title}\n");
        let mut any = false;
        for (round, f) in findings
            .iter()
            .filter(|(_, f)| verdicts.iter().any(|v| f.verdict == *v))
        {
            any = true;
            write_finding(report, repo, *round, f)?;
        }
        if !any {
            let _ = writeln!(report, "None.\n");
        }
    }
    Ok(())
}

/// One finding: its verdict, claimed and reproduced metrics, reasoning and diff from the round start.
fn write_finding(report: &mut String, repo: &Repository, round: u32, f: &Finding) -> Result<()> {
    let _ = writeln!(
        report,
        "### Round {round}, Researcher {} — {}\n\n{} · claimed {} · reproduced {} against the round start {} ({})\n\n{}\n",
        f.researcher,
        f.description.lines().next().unwrap_or(""),
        f.verdict,
        fmt(f.claimed),
        fmt(f.reproduced),
        fmt(f.start_metric),
        gain_text(f.gain_reproduced),
        f.reasoning
    );
    if let (Ok(a), Ok(b)) = (Oid::from_str(&f.round_start), Oid::from_str(&f.commit)) {
        if let (Ok(a), Ok(b)) = (repo.find_commit(a), repo.find_commit(b)) {
            let diff = snapshot::diff_text(repo, a.tree_id(), b.tree_id())?;
            let _ = writeln!(report, "```diff\n{}```\n", truncate(&diff, 4000));
        }
    }
    Ok(())
}

/// The diff stat and diff from the baseline's tree to the best's.
fn write_best_vs_baseline(
    report: &mut String,
    repo: &Repository,
    base_tree: Oid,
    best_tree: Oid,
) -> Result<()> {
    let _ = writeln!(report, "## Best vs baseline\n");
    let (files_changed, ins, del) = snapshot::diff_stat(repo, base_tree, best_tree)?;
    let _ = writeln!(report, "{files_changed} files changed, +{ins} −{del}\n");
    let _ = writeln!(
        report,
        "```diff\n{}```\n",
        truncate(&snapshot::diff_text(repo, base_tree, best_tree)?, 8000)
    );
    Ok(())
}

/// One row per researcher: attempts by verdict and its best.
fn write_researchers_table(report: &mut String, st: &State) {
    // A Pruned column once an attempt was pruned (`prune: on`).
    let with_pruned = st.researchers.values().any(|r| r.counts.pruned > 0);
    let (head, rule) = if with_pruned {
        (" Pruned |", "---|")
    } else {
        ("", "")
    };
    let _ = writeln!(report, "## Researchers\n");
    let _ = writeln!(report, "| Researcher | Attempts | Kept | Reverted | Crashed | Timeout | Rejected | No change |{head} Best | Agent time | Evaluation time |");
    let _ = writeln!(
        report,
        "|---|---|---|---|---|---|---|---|{rule}---|---|---|"
    );
    let time = crate::render::format::seconds_text;
    for (id, r) in &st.researchers {
        let c = &r.counts;
        let pruned = if with_pruned {
            format!(" {} |", c.pruned)
        } else {
            String::new()
        };
        let _ = writeln!(
            report,
            "| {id} | {} | {} | {} | {} | {} | {} | {} |{pruned} {} | {} | {} |",
            c.total(),
            c.kept,
            c.reverted,
            c.crashed,
            c.timeout,
            c.rejected,
            c.no_change,
            fmt(r.best_metric),
            time(r.agent_seconds),
            time(r.eval_seconds)
        );
    }
}

/// synthesis.md: what worked, what was validated but not combined, what did not hold up, why
/// attempts failed and the open questions.
fn synthesis_md(
    conf: &Conference,
    st: &State,
    attempts: &[AttemptRecord],
    findings: &[(u32, Finding)],
) -> String {
    let metric = super::evaluate::metric_name(&conf.config);
    let mut synthesis = String::new();
    let _ = writeln!(synthesis, "# Synthesis — {}\n", conf.config.title);
    let _ = writeln!(
        synthesis,
        "The conference ran {} round(s) and {} iterations and ended **{}** ({}). Best {metric}: {} (baseline {}).\n",
        st.round,
        st.total_iterations,
        status_word(st),
        st.stop_reason.as_deref().unwrap_or("-"),
        fmt(st.best.metric),
        fmt(st.baseline_metric)
    );
    let picks: Vec<(u32, PickRecord)> = (1..=st.round)
        .flat_map(|r| read_picks(conf, r).into_iter().map(move |p| (r, p)))
        .collect();
    write_what_worked(&mut synthesis, &picks, findings);
    write_not_combined(&mut synthesis, &picks, findings);
    write_what_did_not_hold_up(&mut synthesis, findings);
    let _ = writeln!(synthesis, "\n## Why attempts failed\n");
    let _ = write!(synthesis, "{}", super::reasons::markdown(attempts));
    let _ = writeln!(synthesis, "\n## Open questions\n");
    for q in open_questions(conf, st, findings) {
        let _ = writeln!(synthesis, "- {q}");
    }
    synthesis
}

/// The first line and reproduced gain of a round's finding by `id` (empty when it has none).
fn described(findings: &[(u32, Finding)], round: u32, id: &str) -> String {
    findings
        .iter()
        .find(|(r, f)| *r == round && f.researcher == id)
        .map(|(_, f)| {
            format!(
                "{} ({})",
                f.description.lines().next().unwrap_or(""),
                gain_text(f.gain_reproduced)
            )
        })
        .unwrap_or_default()
}

/// The findings knowledge transfer merged into best, with the files best kept from earlier.
fn write_what_worked(
    synthesis: &mut String,
    picks: &[(u32, PickRecord)],
    findings: &[(u32, Finding)],
) {
    let _ = writeln!(
        synthesis,
        "## What worked (validated and combined on best)\n"
    );
    let merged: Vec<_> = picks
        .iter()
        .filter(|(_, p)| p.result == PickResult::Merged)
        .collect();
    if merged.is_empty() {
        let _ = writeln!(synthesis, "No finding reached the best branch.");
    }
    for (round, p) in merged {
        let _ = writeln!(
            synthesis,
            "- Round {round}, Researcher {}: {}{}",
            p.researcher,
            described(findings, *round, &p.researcher),
            if p.conflicts.is_empty() {
                String::new()
            } else {
                format!(
                    " — except {}, kept from an earlier finding",
                    p.conflicts.join(", ")
                )
            }
        );
    }
}

/// The validated findings knowledge transfer dropped, with the reason (nothing when none).
fn write_not_combined(
    synthesis: &mut String,
    picks: &[(u32, PickRecord)],
    findings: &[(u32, Finding)],
) {
    let left_out: Vec<_> = picks
        .iter()
        .filter(|(_, p)| p.result != PickResult::Merged)
        .collect();
    if !left_out.is_empty() {
        let _ = writeln!(synthesis, "\n## Validated but not combined\n");
        for (round, p) in left_out {
            let _ = writeln!(
                synthesis,
                "- Round {round}, Researcher {}: {} — {}",
                p.researcher,
                described(findings, *round, &p.researcher),
                p.reason
            );
        }
    }
}

/// The findings peer review did not validate, or why there are none.
fn write_what_did_not_hold_up(synthesis: &mut String, findings: &[(u32, Finding)]) {
    let _ = writeln!(synthesis, "\n## What did not hold up\n");
    let failed: Vec<_> = findings
        .iter()
        .filter(|(_, f)| f.verdict != ReviewVerdict::Validated)
        .collect();
    if findings.is_empty() {
        let _ = writeln!(
            synthesis,
            "No finding was reviewed: no researcher kept a change that beat its round start."
        );
    } else if failed.is_empty() {
        let _ = writeln!(
            synthesis,
            "All {} reviewed finding(s) were validated.",
            findings.len()
        );
    }
    for (round, f) in failed {
        let _ = writeln!(
            synthesis,
            "- Round {round}, Researcher {}: {} — {} ({})",
            f.researcher,
            f.description.lines().next().unwrap_or(""),
            f.verdict,
            f.reasoning
        );
    }
}

/// What the data says about the evaluation's noise, in one sentence.
fn noise_sentence(conf: &Conference, st: &State) -> String {
    if let Some(warning) = &st.noisy_evaluation {
        return warning.clone();
    }
    let runs = conf.config.noise_runs.max(conf.config.evaluation.repeats);
    match super::noise::pooled_noise_sd(&[&st.baseline_runs]) {
        Some(sd) => format!(
            "the baseline was read {} times; noise of one reading {sd:.6}; peer review read each finding {runs} time(s), interleaved with the round start",
            st.baseline_runs.len()
        ),
        None => format!(
            "one reading per tree (Noise runs: {}); no review reading disagreed with a researcher's beyond the tolerance",
            conf.config.noise_runs
        ),
    }
}

/// The open questions the data raises (each computed from what it names).
fn open_questions(conf: &Conference, st: &State, findings: &[(u32, Finding)]) -> Vec<String> {
    let mut out = Vec::new();
    let challenged = findings
        .iter()
        .filter(|(_, f)| f.verdict == ReviewVerdict::Challenged)
        .count();
    if challenged > 0 {
        out.push(format!(
            "{challenged} challenged finding(s) may hold with more noise runs (Noise Handling → Noise runs, now {}).",
            conf.config.noise_runs
        ));
    }
    if let Some(warning) = &st.noisy_evaluation {
        out.push(format!("Noise: {warning}"));
    }
    let last = st.round_bests.last().copied().flatten();
    let before = st
        .round_bests
        .len()
        .checked_sub(2)
        .and_then(|i| st.round_bests[i])
        .or(st.baseline_metric);
    let last_round_gain = match (last, before, conf.direction()) {
        (Some(now), Some(then), Some(dir)) => Some(dir.gain(now, then)),
        _ => None,
    };
    let why = st.stop_reason.as_deref().unwrap_or("-");
    let status = st.final_status.as_deref();
    out.push(match status.map(|s| (s, FinalStatus::parse(s))) {
        Some((_, Some(FinalStatus::BudgetStop))) => match last_round_gain {
            Some(g) if g > 0.0 => format!(
                "The budget ended the conference ({why}) while the last round still improved the best ({}): more rounds may improve it further.",
                gain_text(g)
            ),
            _ => format!(
                "The budget ended the conference ({why}); the last round did not improve the best."
            ),
        },
        Some((_, Some(FinalStatus::Stalled))) => format!(
            "Every researcher stalled ({why}): a new search space, focus or agent may find more."
        ),
        Some((_, Some(FinalStatus::Converged))) => format!("The conference converged ({why})."),
        Some((other, None)) => format!("The conference ended {other} ({why})."),
        None => "The conference has not ended yet.".to_string(),
    });
    out
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes)\n", &s[..end], s.len() - end)
}
