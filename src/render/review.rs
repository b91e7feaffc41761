//! A round's peer review page (`round-N/peer_review_round_N.md`): the round start's
//! re-measurement, each finding's claim, evidence, verdict and action, the conflicts between
//! validated findings, the verdicts in a table and the order knowledge transfer will pick.

use std::fmt::Write;

use super::format::{change_text, fmt, gain_text};
use crate::model::Direction;
use crate::model::{short_id, AttemptRecord, Conflict, Finding, ReviewVerdict};
use crate::protocol::noise;

/// The warning for an evaluation that proved noisy this round (one reading per tree, and the
/// review's reading of a snapshot disagreed with the researcher's beyond the tolerance).
pub fn noisy_evaluation(round: u32, findings: &[Finding], noise_runs: u32) -> Option<String> {
    let f = findings
        .iter()
        .filter(|f| f.noisy.is_some())
        .max_by(|a, b| {
            a.noisy
                .partial_cmp(&b.noisy)
                .unwrap_or(std::cmp::Ordering::Equal)
        })?;
    let d = f.noisy?;
    Some(format!(
        "the evaluation is noisy: in round {round} researcher {} read {} and the review {} for the same snapshot `{}` (a difference of {d:.6}, beyond the tolerance); with Noise runs: {} a lucky reading can pass for a gain. Set `- **Noise runs:** {}` under ## Noise Handling.",
        f.researcher,
        fmt(f.claimed),
        fmt(f.reproduced),
        short_id(&f.commit),
        noise_runs,
        f.suggested_noise_runs.unwrap_or(5)
    ))
}

/// What a round's peer review page shows.
pub struct ReviewPage<'a> {
    pub round: u32,
    /// Every finding reviewed, in the order they were reviewed.
    pub findings: &'a [Finding],
    /// The validated findings in the order knowledge transfer will pick them.
    pub order: &'a [Finding],
    pub conflicts: &'a [Conflict],
    /// The round start's re-measurements, interleaved with the findings.
    pub start_runs: &'a [f64],
    /// The round's attempts (for the hardware they ran on).
    pub attempts: &'a [AttemptRecord],
    pub direction: Direction,
    /// The conference's `Noise runs` (the noisy-evaluation warning names it).
    pub noise_runs: u32,
    /// Qualitative mode: the page ends with each researcher's score.
    pub qualitative: bool,
    /// On several machines: the machine that re-measured the findings (None on one machine).
    pub reviewer: Option<&'a str>,
}

/// The round's peer review page: header, each finding's review, conflicts, the verdicts, and
/// what knowledge transfer will pick.
pub fn render(p: &ReviewPage) -> String {
    let mut md = String::new();
    write_review_header(&mut md, p);
    for f in p.findings {
        write_finding_review(&mut md, f, p.direction);
    }
    write_conflict_resolution(&mut md, p.order, p.conflicts);
    write_verdict_summary(&mut md, p.findings);
    write_transfer_recommendations(&mut md, p.order);
    if p.qualitative {
        let _ = writeln!(md, "## Qualitative Scores\n");
        for f in p.findings {
            let _ = writeln!(md, "- {}: {}", f.researcher, fmt(f.reproduced));
        }
    }
    md
}

/// The review's title, the round start's re-measurement, and a word when there is nothing to
/// review or the evaluation proved noisy.
fn write_review_header(md: &mut String, p: &ReviewPage) {
    let (round, findings, start_runs) = (p.round, p.findings, p.start_runs);
    let _ = writeln!(md, "# Peer Review — Round {round}\n");
    if let Some(m) = noise::median(start_runs) {
        let _ = writeln!(
            md,
            "Round start re-measured {} time(s), interleaved with the findings: median {m:.6} (runs: {}).\n",
            start_runs.len(),
            join(start_runs)
        );
    }
    if findings.is_empty() {
        let _ = writeln!(
            md,
            "No researcher kept a change this round: nothing to review.\n"
        );
    }
    if let Some(models) = crate::model::mixed_gpu_models(p.attempts) {
        let _ = writeln!(
            md,
            "**Hardware:** {}.\n",
            crate::model::mixed_gpu_warning(&models)
        );
    }
    if let Some(note) = machines_off(p) {
        let _ = writeln!(md, "**Machines:** {note}\n");
    }
    if let Some(warning) = noisy_evaluation(round, findings, p.noise_runs) {
        let mut chars = warning.chars();
        let first: String = chars
            .next()
            .map(|c| c.to_uppercase().collect())
            .unwrap_or_default();
        let _ = writeln!(md, "**Warning:** {first}{}\n", chars.as_str());
    }
}

/// On several machines, the machines whose readings did not reproduce: a finding's claim was
/// read on the machine that ran its attempt, and the review re-measures every finding on one
/// machine. When every finding read on some machines disagreed with the review (beyond the
/// tolerance) while those read on others agreed, the disagreement is those machines' (another
/// GPU, driver or library), not the evaluation's noise: the page names them. None when no
/// machine is known, or when the findings of every machine disagreed alike.
fn machines_off(p: &ReviewPage) -> Option<String> {
    let reviewer = p.reviewer?;
    let machine_of = |f: &Finding| {
        p.attempts
            .iter()
            .find(|a| a.commit.as_ref() == Some(&f.commit))
            .and_then(|a| a.machine.clone())
    };
    let disagrees = |f: &Finding| match (f.claimed, f.reproduced) {
        (Some(c), Some(r)) => f.noisy.is_some() || (c - r).abs() > f.tolerance,
        _ => false,
    };
    // Machine → (findings that agreed, those that disagreed: researcher, claimed, reproduced).
    let mut by_machine: std::collections::BTreeMap<String, (u32, Vec<&Finding>)> =
        Default::default();
    for f in p.findings.iter().filter(|f| f.reproduced.is_some()) {
        let Some(machine) = machine_of(f) else {
            continue;
        };
        let entry = by_machine.entry(machine).or_default();
        match disagrees(f) {
            true => entry.1.push(f),
            false => entry.0 += 1,
        }
    }
    let agreed: Vec<&String> = by_machine
        .iter()
        .filter(|(_, (ok, _))| *ok > 0)
        .map(|(m, _)| m)
        .collect();
    let off: Vec<(&String, &Vec<&Finding>)> = by_machine
        .iter()
        .filter(|(_, (ok, bad))| *ok == 0 && !bad.is_empty())
        .map(|(m, (_, bad))| (m, bad))
        .collect();
    if off.is_empty() || agreed.is_empty() {
        return None;
    }
    let said: Vec<String> = off
        .iter()
        .map(|(machine, bad)| {
            let readings: Vec<String> = bad
                .iter()
                .map(|f| {
                    format!(
                        "researcher {} read {}, the review {}",
                        f.researcher,
                        fmt(f.claimed),
                        fmt(f.reproduced)
                    )
                })
                .collect();
            format!("`{machine}` ({})", readings.join("; "))
        })
        .collect();
    let agreed: Vec<String> = agreed.iter().map(|m| format!("`{m}`")).collect();
    Some(format!(
        "the readings of machine {} did not reproduce when the review re-measured them on `{reviewer}`, while those of {} did: that machine's evaluations differ from the others' (another GPU, driver or library?); compare them on one machine before trusting its numbers.",
        said.join(" and "),
        agreed.join(", ")
    ))
}

/// One finding's review: claim, evidence, verdict, reasoning and the action it leads to.
fn write_finding_review(md: &mut String, f: &Finding, dir: Direction) {
    let _ = writeln!(
        md,
        "### Researcher {} — {}\n",
        f.researcher,
        short(&f.description)
    );
    let _ = writeln!(
        md,
        "- **Claim:** the researcher read {} ({}) with `{}` changing {}",
        fmt(f.claimed),
        gain_text(f.gain_claimed),
        crate::model::short_id(&f.commit),
        if f.files.is_empty() {
            "nothing".to_string()
        } else {
            f.files.join(", ")
        }
    );
    let evidence = match (f.start_metric, f.reproduced) {
        (Some(s), Some(r)) => format!(
            "round start {s:.6} (runs: {}) against the finding {r:.6} (runs: {}), interleaved in a clean checkout: {}; tolerance {:.6}",
            join(&f.start_runs),
            join(&f.runs),
            change_text(dir, s, r),
            f.tolerance
        ),
        _ if !f.runs.is_empty() => format!("runs before the failure: {}", join(&f.runs)),
        _ => "not re-run".to_string(),
    };
    let _ = writeln!(
        md,
        "- **Evidence:** {evidence}{}{}",
        f.noise_sd
            .map(|sd| format!("; noise of one reading {sd:.6}"))
            .unwrap_or_default(),
        f.holdout
            .map(|(v, s)| format!("; hold-out {}", change_text(dir, s, v)))
            .unwrap_or_default()
    );
    let _ = writeln!(md, "- **Verdict:** {}", f.verdict);
    let _ = writeln!(md, "- **Reasoning:** {}", f.reasoning);
    let action = match f.verdict.known() {
        Some(ReviewVerdict::Validated) => {
            "Cherry-pick onto best; keep it only if the combined best improves."
        }
        Some(ReviewVerdict::Challenged) => {
            "Not merged. Re-test with more runs before relying on it."
        }
        _ => "Not merged.",
    };
    let _ = writeln!(md, "- **Action:** {action}\n");
}

/// Which validated findings clash on the same lines of a file, and who keeps each file.
fn write_conflict_resolution(md: &mut String, order: &[Finding], conflicts: &[Conflict]) {
    let _ = writeln!(md, "## Conflict Resolution\n");
    if order.len() < 2 {
        let _ = writeln!(
            md,
            "{} validated finding(s): nothing to resolve.\n",
            order.len()
        );
    } else if conflicts.is_empty() {
        let _ = writeln!(
            md,
            "No two of the {} validated findings change the same lines of a file: they combine.\n",
            order.len()
        );
    } else {
        for c in conflicts {
            let why = if c.tie {
                format!(
                    "their gains are equal and the tie goes to the lower letter, {}",
                    c.winner
                )
            } else {
                format!("{} has the larger gain", c.winner)
            };
            let _ = writeln!(
                md,
                "- `{}`: {} and {} change the same lines; {why}, so {} keeps the file; {}'s other changes are kept.",
                c.file, c.winner, c.loser, c.winner, c.loser
            );
        }
        md.push('\n');
    }
}

/// One row per finding: claimed, reproduced, verdict.
fn write_verdict_summary(md: &mut String, findings: &[Finding]) {
    let _ = writeln!(md, "## Round Verdict Summary\n");
    let _ = writeln!(md, "| Researcher | Claimed | Reproduced | Verdict |");
    let _ = writeln!(md, "|---|---|---|---|");
    for f in findings {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            f.researcher,
            fmt(f.claimed),
            fmt(f.reproduced),
            f.verdict
        );
    }
    md.push('\n');
}

/// The validated findings in the order knowledge transfer will pick them.
fn write_transfer_recommendations(md: &mut String, order: &[Finding]) {
    let _ = writeln!(md, "## Knowledge Transfer Recommendations\n");
    if order.is_empty() {
        let _ = writeln!(md, "Nothing to transfer this round.\n");
    }
    for (i, f) in order.iter().enumerate() {
        let _ = writeln!(
            md,
            "{}. Transfer Researcher {}'s finding ({}): {}",
            i + 1,
            f.researcher,
            gain_text(f.gain_reproduced),
            short(&f.description)
        );
    }
    md.push('\n');
}

fn short(s: &str) -> String {
    let s = s.lines().next().unwrap_or("");
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(79).collect::<String>())
    } else if s.is_empty() {
        "(no description)".into()
    } else {
        s.to_string()
    }
}

fn join(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.6}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Direction::{Maximize, Minimize};

    /// Gain positive = better, whatever the direction; the words say which.
    #[test]
    fn changes_read_the_same_way_in_both_directions() {
        let cases = [
            (
                Minimize,
                1.128311,
                1.150005,
                "1.128311 → 1.150005 (gain -0.021694, worse)",
            ),
            (
                Minimize,
                10.0,
                9.0,
                "10.000000 → 9.000000 (gain +1.000000, better)",
            ),
            (
                Maximize,
                0.5,
                0.75,
                "0.500000 → 0.750000 (gain +0.250000, better)",
            ),
            (
                Maximize,
                0.5,
                0.25,
                "0.500000 → 0.250000 (gain -0.250000, worse)",
            ),
            (
                Maximize,
                2.0,
                2.0,
                "2.000000 → 2.000000 (gain +0.000000, unchanged)",
            ),
        ];
        for (dir, from, to, want) in cases {
            assert_eq!(change_text(dir, from, to), want);
        }
    }

    fn finding(researcher: &str, verdict: &str, claimed: f64, reproduced: f64) -> Finding {
        Finding {
            researcher: researcher.into(),
            commit: format!("{researcher}{}", "1".repeat(39))
                .to_lowercase()
                .try_into()
                .unwrap(),
            round_start: "0".repeat(40).try_into().unwrap(),
            description: format!("Researcher {researcher}'s change\nsecond line"),
            files: vec!["train.py".into()],
            claimed: Some(claimed),
            start_metric: Some(10.0),
            reproduced: Some(reproduced),
            runs: vec![reproduced, reproduced + 0.01],
            start_runs: vec![10.0, 10.02],
            gain_claimed: 10.0 - claimed,
            gain_reproduced: 10.0 - reproduced,
            tolerance: 0.05,
            holdout: None,
            verdict: verdict.into(),
            reasoning: "the gain held in a clean checkout".into(),
            noise_sd: Some(0.01),
            noisy: None,
            suggested_noise_runs: None,
        }
    }

    /// The peer review page of a round with a validated, a challenged and a noisy finding, and
    /// a conflict between two validated ones.
    #[test]
    fn the_peer_review_page() {
        let mut noisy = finding("C", "challenged", 8.0, 9.9);
        noisy.noisy = Some(1.9);
        noisy.suggested_noise_runs = Some(4);
        let findings = vec![
            finding("A", "validated", 9.0, 9.1),
            finding("B", "validated", 9.5, 9.4),
            noisy,
        ];
        let order = vec![findings[0].clone(), findings[1].clone()];
        let conflicts = vec![Conflict {
            file: "train.py".into(),
            winner: "A".into(),
            loser: "B".into(),
            tie: false,
        }];
        let page = render(&ReviewPage {
            round: 2,
            findings: &findings,
            order: &order,
            conflicts: &conflicts,
            start_runs: &[10.0, 10.02],
            attempts: &[],
            direction: Minimize,
            noise_runs: 1,
            qualitative: false,
            reviewer: None,
        });
        insta::assert_snapshot!(page);
        let empty = render(&ReviewPage {
            round: 1,
            findings: &[],
            order: &[],
            conflicts: &[],
            start_runs: &[],
            attempts: &[],
            direction: Maximize,
            noise_runs: 1,
            qualitative: true,
            reviewer: None,
        });
        insta::assert_snapshot!(empty);
    }

    /// Machine 2's readings are all lower than the review's, machines 1 and 3 agree: the page
    /// names machine 2 with its readings; with every machine off alike (noise), or on one
    /// machine, it names none.
    #[test]
    fn the_machine_whose_readings_did_not_reproduce_is_named() {
        let findings = [
            finding("A", "validated", 9.0, 9.0),
            finding("B", "validated", 8.0, 9.5),
            finding("C", "validated", 9.2, 9.2),
        ];
        let attempt = |f: &Finding, machine: &str| -> AttemptRecord {
            let mut a: AttemptRecord = serde_json::from_value(serde_json::json!({
                "round": 1, "researcher": f.researcher, "iteration": 1,
                "commit": f.commit, "tree": "e".repeat(40), "metric": f.claimed,
                "delta": null, "verdict": "kept", "description": "d",
                "timestamp": "2026-11-27T00:00:00Z"
            }))
            .unwrap();
            a.machine = Some(machine.into());
            a
        };
        let attempts: Vec<AttemptRecord> = findings
            .iter()
            .zip(["m1", "m2", "m3"])
            .map(|(f, m)| attempt(f, m))
            .collect();
        let page = |findings: &[Finding], reviewer: Option<&str>| {
            machines_off(&ReviewPage {
                round: 1,
                findings,
                order: &[],
                conflicts: &[],
                start_runs: &[],
                attempts: &attempts,
                direction: Minimize,
                noise_runs: 1,
                qualitative: false,
                reviewer,
            })
        };
        let note = page(&findings, Some("m1")).expect("machine 2 is named");
        assert!(
            note.starts_with(
                "the readings of machine `m2` (researcher B read 8.000000, the review 9.500000)"
            ),
            "{note}"
        );
        assert!(
            note.contains("on `m1`, while those of `m1`, `m3` did"),
            "{note}"
        );
        assert_eq!(page(&findings, None), None, "one machine");
        let all_off = [
            finding("A", "validated", 8.0, 9.0),
            finding("B", "validated", 8.0, 9.5),
        ];
        assert_eq!(page(&all_off, Some("m1")), None, "noise, not a machine");
    }
}
