//! The end of a conference, as people read it: `final_report.md` (status, rounds table,
//! trajectory, reviewed findings with their diffs, best vs baseline, why attempts failed,
//! per-researcher statistics, the agents' spend) and `synthesis.md` (what worked, what was
//! validated but not combined, what did not hold up, open questions). Pure functions of
//! [`Ended`]: the engine reads the records and asks git for the diffs, these write the pages.

use std::fmt::Write;

use crate::model::state::State;
use crate::model::{AttemptRecord, Direction, Finding, PickRecord};
use crate::model::{FinalStatus, PickResult, ReviewVerdict};
use crate::render::format::{fmt, gain_text};
use crate::render::plot::{self as report_plot, PlotData};

/// What the two pages show of an ended (or stopped) conference.
pub struct Ended<'a> {
    /// The conference's name (what `git conference apply` takes).
    pub name: &'a str,
    /// conference.md's title and the first line of its goal.
    pub title: &'a str,
    pub goal: &'a str,
    /// The metric's name, and its direction and target when it has them.
    pub metric: &'a str,
    pub metric_spec: Option<(Direction, Option<f64>)>,
    /// The best branch's short name.
    pub best_branch: &'a str,
    /// Noise Handling's noise runs, and how many times peer review read each finding.
    pub noise_runs: u32,
    pub review_runs: u32,
    pub state: &'a State,
    pub attempts: &'a [AttemptRecord],
    /// Every round's findings, with their round, and the diff of each from its round start
    /// (None when git no longer has one of the two commits).
    pub findings: &'a [(u32, Finding)],
    pub finding_diffs: &'a [Option<String>],
    /// Every round's transfer picks, with their round.
    pub picks: &'a [(u32, PickRecord)],
    pub best_vs_baseline: &'a DiffSummary,
    pub chart: &'a PlotData,
    /// The agents' spend section (empty when no agent reported usage).
    pub spend: &'a str,
    /// With branching on: the path from the baseline to best, one line per step
    /// (`render::tree::best_path`); empty off.
    pub best_path: &'a str,
}

/// The baseline's tree against the best's.
pub struct DiffSummary {
    pub files: usize,
    pub insertions: usize,
    pub deletions: usize,
    pub text: String,
}

/// The status both documents name: the final status, or `running` before the end.
fn status_word(st: &State) -> String {
    st.final_status.clone().unwrap_or_else(|| "running".into())
}

/// final_report.md: summary, rounds, trajectory, reviewed findings with their diffs, best vs
/// baseline, failure reasons, per-researcher counts and the budget.
pub fn final_report(e: &Ended) -> String {
    let st = e.state;
    let mut report = String::new();
    write_summary(&mut report, e);
    report.push_str(&crate::render::talk::report_section(st));
    write_knowledge_briefed(&mut report, st);
    if !st.voided.is_empty() {
        let _ = writeln!(
            report,
            "## Refused participants' events
"
        );
        for line in voided_lines(st) {
            let _ = writeln!(report, "- {line}");
        }
        report.push('\n');
    }
    if let Some(models) = crate::model::mixed_gpu_models(e.attempts) {
        let _ = writeln!(
            report,
            "**Hardware:** {}.\n",
            crate::model::mixed_gpu_warning(&models)
        );
    }
    write_rounds_table(&mut report, st, e.findings);
    write_trajectory(&mut report, st, e.chart);
    report.push_str(e.best_path);
    write_reviewed_findings(&mut report, e.findings, e.finding_diffs);
    write_best_vs_baseline(&mut report, e.best_vs_baseline);
    let _ = writeln!(report, "## Why attempts failed\n");
    let _ = writeln!(report, "{}", super::reasons::markdown(e.attempts));
    write_researchers_table(&mut report, st);
    let _ = write!(report, "{}", e.spend);
    let _ = writeln!(
        report,
        "\nApply the best branch to your branch with `git conference apply {}`.",
        e.name
    );
    report
}

/// The report's title and its list of status, goal, metric, baseline, best, size and noise.
fn write_summary(report: &mut String, e: &Ended) {
    let st = e.state;
    let _ = writeln!(report, "# Final Report — {}\n", e.title);
    let _ = writeln!(report, "- **Status:** {}", status_word(st));
    let _ = writeln!(
        report,
        "- **Reason:** {}",
        st.stop_reason.as_deref().unwrap_or("-")
    );
    let _ = writeln!(report, "- **Goal:** {}", e.goal);
    let _ = writeln!(
        report,
        "- **Metric:** {}{}",
        e.metric,
        e.metric_spec
            .map(|(direction, target)| format!(
                " ({direction:?}, target {})",
                target
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
        e.best_branch
    );
    let _ = writeln!(
        report,
        "- **Rounds:** {} · **iterations:** {}",
        st.round, st.total_iterations
    );
    let _ = writeln!(report, "- **Noise:** {}\n", noise_sentence(e));
}

/// On several machines, one line per event a participant published that the conference
/// refused and voided: the participant, and why (the reason names the event).
pub fn voided_lines(st: &State) -> Vec<String> {
    st.voided
        .iter()
        .map(|v| {
            format!(
                "machine `{}`: {} (voided: no machine follows it)",
                v.participant, v.reason
            )
        })
        .collect()
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
    findings: &[(u32, Finding)],
    diffs: &[Option<String>],
) {
    for (title, verdicts) in [
        ("Validated findings", &[ReviewVerdict::Validated][..]),
        (
            "Challenged and overturned findings",
            &[ReviewVerdict::Challenged, ReviewVerdict::Overturned][..],
        ),
    ] {
        let _ = writeln!(report, "## {title}\n");
        let mut any = false;
        for ((round, f), diff) in findings.iter().zip(diffs) {
            if verdicts.iter().any(|v| f.verdict == *v) {
                any = true;
                write_finding(report, *round, f, diff.as_deref());
            }
        }
        if !any {
            let _ = writeln!(report, "None.\n");
        }
    }
}

/// One finding: its verdict, claimed and reproduced metrics, reasoning and diff from the round start.
fn write_finding(report: &mut String, round: u32, f: &Finding, diff: Option<&str>) {
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
    if let Some(diff) = diff {
        let _ = writeln!(report, "```diff\n{}```\n", truncate(diff, 4000));
    }
}

/// The diff stat and diff from the baseline's tree to the best's.
fn write_best_vs_baseline(report: &mut String, d: &DiffSummary) {
    let _ = writeln!(report, "## Best vs baseline\n");
    let _ = writeln!(
        report,
        "{} files changed, +{} −{}\n",
        d.files, d.insertions, d.deletions
    );
    let _ = writeln!(report, "```diff\n{}```\n", truncate(&d.text, 8000));
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
pub fn synthesis(e: &Ended) -> String {
    let st = e.state;
    let mut synthesis = String::new();
    let _ = writeln!(synthesis, "# Synthesis — {}\n", e.title);
    let _ = writeln!(
        synthesis,
        "The conference ran {} round(s) and {} iterations and ended **{}** ({}). Best {}: {} (baseline {}).\n",
        st.round,
        st.total_iterations,
        status_word(st),
        st.stop_reason.as_deref().unwrap_or("-"),
        e.metric,
        fmt(st.best.metric),
        fmt(st.baseline_metric)
    );
    write_what_worked(&mut synthesis, e.picks, e.findings);
    write_not_combined(&mut synthesis, e.picks, e.findings);
    write_what_did_not_hold_up(&mut synthesis, e.findings);
    let _ = writeln!(synthesis, "\n## Why attempts failed\n");
    let _ = write!(synthesis, "{}", super::reasons::markdown(e.attempts));
    let _ = writeln!(synthesis, "\n## Open questions\n");
    for q in open_questions(e) {
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
fn noise_sentence(e: &Ended) -> String {
    let st = e.state;
    if let Some(warning) = &st.noisy_evaluation {
        return warning.clone();
    }
    match crate::protocol::noise::pooled_noise_sd(&[&st.baseline_runs]) {
        Some(sd) => format!(
            "the baseline was read {} times; noise of one reading {sd:.6}; peer review read each finding {} time(s), interleaved with the round start",
            st.baseline_runs.len(),
            e.review_runs
        ),
        None => format!(
            "one reading per tree (Noise runs: {}); no review reading disagreed with a researcher's beyond the tolerance",
            e.noise_runs
        ),
    }
}

/// The open questions the data raises (each computed from what it names).
fn open_questions(e: &Ended) -> Vec<String> {
    let (st, findings) = (e.state, e.findings);
    let mut out = Vec::new();
    let challenged = findings
        .iter()
        .filter(|(_, f)| f.verdict == ReviewVerdict::Challenged)
        .count();
    if challenged > 0 {
        out.push(format!(
            "{challenged} challenged finding(s) may hold with more noise runs (Noise Handling → Noise runs, now {}).",
            e.noise_runs
        ));
    }
    if let Some(warning) = &st.noisy_evaluation {
        out.push(format!("Noise: {warning}"));
    }
    out.push(ending(st, last_round_gain(e)));
    out
}

/// How much the last round improved the best (None without a direction or readings).
fn last_round_gain(e: &Ended) -> Option<f64> {
    let st = e.state;
    let last = st.round_bests.last().copied().flatten();
    let before = st
        .round_bests
        .len()
        .checked_sub(2)
        .and_then(|i| st.round_bests[i])
        .or(st.baseline_metric);
    match (last, before, e.metric_spec) {
        (Some(now), Some(then), Some((dir, _))) => Some(dir.gain(now, then)),
        _ => None,
    }
}

/// The open question of how the conference ended.
fn ending(st: &State, last_round_gain: Option<f64>) -> String {
    let why = st.stop_reason.as_deref().unwrap_or("-");
    let status = st.final_status.as_deref();
    match status.map(|s| (s, FinalStatus::parse(s))) {
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
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(researcher: &str, verdict: &str, reproduced: f64) -> Finding {
        Finding {
            researcher: researcher.into(),
            commit: "1".repeat(40).try_into().unwrap(),
            round_start: "0".repeat(40).try_into().unwrap(),
            description: format!("Researcher {researcher}'s change\nsecond line"),
            files: vec!["train.py".into()],
            claimed: Some(9.0),
            start_metric: Some(10.0),
            reproduced: Some(reproduced),
            runs: vec![reproduced],
            start_runs: vec![10.0],
            gain_claimed: 1.0,
            gain_reproduced: 10.0 - reproduced,
            tolerance: 0.05,
            holdout: None,
            verdict: verdict.into(),
            reasoning: "the gain held in a clean checkout".into(),
            noise_sd: None,
            noisy: None,
            suggested_noise_runs: None,
        }
    }

    /// A budget-stopped conference of two rounds: one finding validated and merged, one
    /// overturned, one validated but dropped by the transfer.
    #[test]
    fn the_final_report_and_the_synthesis() {
        let mut st = crate::model::state::sample();
        st.round = 2;
        st.baseline_metric = Some(10.0);
        st.best.metric = Some(9.1);
        st.round_bests = vec![Some(9.1), Some(9.1)];
        st.final_status = Some("budget_stop".into());
        st.stop_reason = Some("max total iterations reached".into());
        let findings = [
            (1, finding("A", "validated", 9.1)),
            (1, finding("B", "overturned", 10.2)),
            (2, finding("A", "validated", 9.0)),
        ];
        let diffs = [
            Some("-lr = 0.1\n+lr = 0.05\n".to_string()),
            None,
            Some("-wd = 0\n+wd = 0.1\n".to_string()),
        ];
        let pick = |round, researcher: &str, result: &str, reason: &str| {
            let p = PickRecord {
                researcher: researcher.into(),
                finding: "1".repeat(40).try_into().unwrap(),
                result: result.into(),
                reason: reason.into(),
                conflicts: vec![],
                metric: Some(9.1),
            };
            (round, p)
        };
        let picks = [
            pick(1, "A", "merged", "the combined best improved"),
            pick(2, "A", "dropped", "the combined best did not improve"),
        ];
        let chart = PlotData::default();
        let diff = DiffSummary {
            files: 1,
            insertions: 1,
            deletions: 1,
            text: "-lr = 0.1\n+lr = 0.05\n".into(),
        };
        let ended = Ended {
            name: "tiny",
            title: "Tune the tiny model",
            goal: "lower the validation loss",
            metric: "val_loss",
            metric_spec: Some((Direction::Minimize, None)),
            best_branch: "conference/tiny/best",
            noise_runs: 1,
            review_runs: 1,
            state: &st,
            attempts: &[],
            findings: &findings,
            finding_diffs: &diffs,
            picks: &picks,
            best_vs_baseline: &diff,
            chart: &chart,
            spend: "",
            best_path: "",
        };
        insta::assert_snapshot!(final_report(&ended));
        insta::assert_snapshot!(synthesis(&ended));
    }
}
