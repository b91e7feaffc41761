//! Phases 2 and 3: the poster session (each researcher's round, from the data) and the peer
//! review, which re-runs every researcher's round-best from its commit in a clean checkout.
//!
//! Verdicts: validated (the gain reproduces beyond the noise tolerance), challenged (a smaller or
//! inconsistent gain, or a hold-out that disagrees), overturned (no gain, a crash, or a diff that
//! touches a frozen or forbidden path). Findings that are not validated never reach best.

use std::fmt::Write;

use anyhow::Result;
use git2::Oid;
use serde_json::json;

use super::evaluate;
use super::ledger::round_attempts;
use super::measure;
use super::noise;
use super::state::files;
use super::Conference;
use crate::git::snapshot;
use crate::model::event::{self as events, Event, Note};
use crate::model::{AttemptRecord, Conflict, EvalStatus, Finding, ReviewVerdict, Verdict};
use crate::protocol::pick::transfer_order;
use crate::render::format::{change_text, fmt, gain_text};
use crate::store::StateChange;

/// The readings of one tree in the review, or why a reading failed.
#[derive(Debug, Default)]
struct Readings {
    runs: Vec<f64>,
    failed: Option<String>,
}

/// Reads the round start and every candidate in interleaved runs (start, A, B, start, A, B, …)
/// so that drift of the machine or the data hits all alike. A candidate whose run fails is not
/// read again. None when interrupted.
async fn interleave(
    conf: &Conference,
    start: &str,
    candidates: &[(String, String)],
) -> Result<Option<(Readings, Vec<Readings>)>> {
    let mut start_readings = Readings::default();
    let mut readings: Vec<Readings> = candidates.iter().map(|_| Readings::default()).collect();
    let command = conf.config.eval_command();
    for run in 0..measure::review_runs(conf) {
        let mut trees: Vec<(&str, &str, &mut Readings)> =
            vec![("start", start, &mut start_readings)];
        for ((id, head), r) in candidates.iter().zip(readings.iter_mut()) {
            trees.push((id, head, r));
        }
        for (what, commit, r) in trees {
            if r.failed.is_some() {
                continue;
            }
            let result =
                measure::measure_runs(conf, "review", commit, command, what, 1, run).await?;
            if result.status == EvalStatus::Interrupted {
                return Ok(None);
            }
            match result.runs.first() {
                Some(&v) if result.ok() => r.runs.push(v),
                _ => r.failed = Some(result.reason.unwrap_or_else(|| "crash".into())),
            }
        }
    }
    Ok(Some((start_readings, readings)))
}

/// Phase 2: builds and records the poster session of the current round.
pub async fn poster_session(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let attempts = round_attempts(conf, st.round)?;
    let (md, summary) = crate::render::poster::render(&crate::render::poster::Poster {
        title: &conf.config.title,
        metric: &evaluate::metric_name(&conf.config),
        direction: conf.direction(),
        state: &st,
        attempts: &attempts,
        diff_stats: &kept_diff_stats(conf, &attempts)?,
    });
    let md =
        super::prose::with_prose(conf, conf.config.agent.chair.as_ref(), "session chair", md).await;
    conf.record(
        Event::PosterSession(events::PosterSession {
            round: st.round,
            summary: summary.clone(),
            path: files::poster(st.round),
        }),
        &format!("round {}: {summary}", st.round),
        vec![StateChange::Put(files::poster(st.round), md.into_bytes())],
    )
}

/// `N files, +I −D` of every kept attempt's commit (against its parent), by commit id.
fn kept_diff_stats(
    conf: &Conference,
    attempts: &[AttemptRecord],
) -> Result<std::collections::BTreeMap<String, String>> {
    let repo = conf.open_repo()?;
    let stat = |commit: &str| {
        let c = repo.find_commit(Oid::from_str(commit).ok()?).ok()?;
        let parent = c.parent(0).ok()?;
        let (f, i, d) = snapshot::diff_stat(&repo, parent.tree_id(), c.tree_id()).ok()?;
        Some(format!("{f} files, +{i} −{d}"))
    };
    Ok(attempts
        .iter()
        .filter(|a| a.verdict == Verdict::Kept)
        .filter_map(|a| Some((a.commit.clone(), stat(&a.commit)?)))
        .collect())
}

/// Phase 3: re-evaluates each round-best in a clean checkout, interleaved with the round start,
/// and records the verdicts (see `noise` for the rule).
pub async fn peer_review(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    let round_start = st.best.commit.clone();
    let dir = conf
        .direction()
        .unwrap_or(crate::config::Direction::Maximize);
    let start_tree = repo.find_commit(Oid::from_str(&round_start)?)?.tree_id();
    let attempts = round_attempts(conf, st.round)?;
    let mut findings = Vec::new();
    for (id, r) in st
        .researchers
        .iter()
        .filter(|(_, r)| r.head != r.round_start && r.best_metric.is_some())
    {
        let head_tree = repo.find_commit(Oid::from_str(&r.head)?)?.tree_id();
        let changed = snapshot::changed_paths(&repo, start_tree, head_tree)?;
        let description = attempts
            .iter()
            .filter(|a| a.researcher == *id && a.verdict == Verdict::Kept)
            .map(|a| a.description.clone())
            .collect::<Vec<_>>()
            .join("; ");
        findings.push(Finding {
            researcher: id.clone(),
            commit: r.head.clone(),
            round_start: round_start.clone(),
            description,
            files: changed,
            claimed: r.best_metric,
            start_metric: None,
            reproduced: None,
            runs: vec![],
            start_runs: vec![],
            gain_claimed: match (r.best_metric, r.round_start_metric) {
                (Some(c), Some(s)) => noise::finite_or(dir.gain(c, s), 0.0),
                _ => 0.0,
            },
            gain_reproduced: 0.0,
            tolerance: super::stop::noise_threshold(conf, &st),
            holdout: None,
            verdict: String::new(),
            reasoning: String::new(),
            noise_sd: None,
            noisy: None,
            suggested_noise_runs: None,
        });
    }
    // A diff touching a frozen or forbidden path is overturned without a run.
    for f in &mut findings {
        if let Some(why) = conf.guard.violation(&f.files) {
            f.verdict = ReviewVerdict::Overturned.into();
            f.reasoning = format!("The diff {why}.");
        }
    }
    let to_read: Vec<(String, String)> = findings
        .iter()
        .filter(|f| f.verdict.is_empty())
        .map(|f| (f.researcher.clone(), f.commit.clone()))
        .collect();
    let mut start_runs = Vec::new();
    let began = std::time::Instant::now();
    if !to_read.is_empty() {
        announce_review(conf, st.round, &round_start, &to_read)?;
        let Some((start, readings)) = interleave(conf, &round_start, &to_read).await? else {
            return Ok(());
        };
        start_runs = start.runs.clone();
        let start_holdout = match &conf.config.evaluation.holdout {
            Some(holdout) => {
                measure::measure(conf, "review", &round_start, holdout, "start-holdout")
                    .await?
                    .metric
            }
            None => None,
        };
        for ((id, _), r) in to_read.iter().zip(readings) {
            let f = findings
                .iter_mut()
                .find(|f| &f.researcher == id)
                .expect("a finding per candidate");
            // Once per finding measured (a kill here loses the readings: resume reads again).
            crate::failpoint::hit("review.measured");
            judge_finding(conf, &st, f, &start, r);
            if f.verdict == ReviewVerdict::Validated {
                check_holdout(conf, f, start_holdout, dir).await?;
            }
        }
    }
    record_review(conf, findings, &start_runs, began).await
}

/// `round.phase_started` of the peer review: which findings it re-measures, against what.
fn announce_review(
    conf: &Conference,
    round: u32,
    round_start: &str,
    to_read: &[(String, String)],
) -> Result<()> {
    let who: Vec<&str> = to_read.iter().map(|(id, _)| id.as_str()).collect();
    measure::phase_started(
        conf,
        round,
        "peer_review",
        &format!(
            "re-measuring {} finding(s) ({}) against the round start {}, {} interleaved run(s) each",
            who.len(),
            who.join(", "),
            &round_start[..10],
            measure::review_runs(conf)
        ),
    )
}

/// The verdict of one finding from its readings and the round start's.
fn judge_finding(
    conf: &Conference,
    st: &super::state::State,
    f: &mut Finding,
    start: &Readings,
    r: Readings,
) {
    f.start_runs = start.runs.clone();
    f.start_metric = noise::median(&start.runs);
    f.runs = r.runs;
    if let Some(why) = r.failed.or_else(|| {
        start
            .failed
            .as_ref()
            .filter(|_| start.runs.is_empty())
            .map(|w| format!("the round start itself failed: {w}"))
    }) {
        f.verdict = ReviewVerdict::Overturned.into();
        f.reasoning = format!("Re-running the snapshot failed: {why}.");
        return;
    }
    // Noise runs 1 with one reading per tree: the baseline says nothing about the noise.
    let baseline_runs: &[f64] = if conf.config.noise_runs > 1 || st.baseline_runs.len() > 1 {
        &st.baseline_runs
    } else {
        &[]
    };
    let j = noise::judge(&noise::Evidence {
        direction: conf
            .direction()
            .unwrap_or(crate::config::Direction::Maximize),
        start_runs: &start.runs,
        runs: &f.runs,
        claimed: f.claimed,
        gain_claimed: f.gain_claimed,
        min_delta: super::stop::noise_threshold(conf, st),
        baseline_runs,
    });
    f.reproduced = Some(j.reproduced);
    f.gain_reproduced = j.gain;
    f.tolerance = j.needed;
    f.noise_sd = j.noise_sd;
    f.noisy = j.noisy;
    f.suggested_noise_runs = j.suggested_runs;
    f.verdict = j.verdict.into();
    f.reasoning = j.reasoning;
}

/// A validated finding whose hold-out evaluation gets worse (or fails) is challenged.
async fn check_holdout(
    conf: &Conference,
    f: &mut Finding,
    start_holdout: Option<f64>,
    dir: crate::config::Direction,
) -> Result<()> {
    let (Some(holdout), Some(start_h)) = (&conf.config.evaluation.holdout, start_holdout) else {
        return Ok(());
    };
    let h = measure::measure(
        conf,
        "review",
        &f.commit,
        holdout,
        &format!("{}-holdout", f.researcher),
    )
    .await?;
    f.holdout = h.metric.map(|v| (v, start_h));
    let check = crate::protocol::review_verdict::holdout(dir, h.metric, start_h, f.tolerance);
    if let Some(why) = check.reasoning() {
        f.verdict = ReviewVerdict::Challenged.into();
        f.reasoning.push_str(&why);
    }
    Ok(())
}

/// Conflicts between validated findings (in transfer order), found with the same merge that
/// knowledge transfer uses: changes to different lines of one file combine; changes to the same
/// lines go to the larger gain (the earlier pick), ties to the lower letter.
pub fn conflicts(repo: &git2::Repository, order: &[Finding]) -> Result<Vec<Conflict>> {
    let tree_of = |c: &str| -> Result<Oid> { Ok(repo.find_commit(Oid::from_str(c)?)?.tree_id()) };
    let mut out = Vec::new();
    for (i, winner) in order.iter().enumerate() {
        for loser in &order[i + 1..] {
            if !loser.files.iter().any(|f| winner.files.contains(f)) {
                continue;
            }
            let merged = crate::git::merge::merge_trees(
                repo,
                tree_of(&loser.round_start)?,
                tree_of(&winner.commit)?,
                tree_of(&loser.commit)?,
            )?;
            for file in merged.conflicted {
                out.push(Conflict {
                    file,
                    winner: winner.researcher.clone(),
                    loser: loser.researcher.clone(),
                    tie: winner.gain_reproduced == loser.gain_reproduced,
                });
            }
        }
    }
    Ok(out)
}

async fn record_review(
    conf: &Conference,
    findings: Vec<Finding>,
    start_runs: &[f64],
    began: std::time::Instant,
) -> Result<()> {
    let st = conf.state();
    let order = transfer_order(&findings);
    let conflicts = conflicts(&conf.open_repo()?, &order)?;
    let md = render_review(conf, st.round, &findings, &order, &conflicts, start_runs);
    let md =
        super::prose::with_prose(conf, conf.config.agent.reviewer.as_ref(), "reviewer", md).await;
    let count = |v: ReviewVerdict| findings.iter().filter(|f| f.verdict == v).count();
    let notes: Vec<Note> = findings
        .iter()
        .map(|f| {
            Note(
                json!({"commit": f.commit, "conference": conf.name, "researcher": f.researcher,
                   "round": st.round, "verdict": f.verdict, "metric": f.reproduced,
                   "runs": f.runs, "claimed": f.claimed, "reason": f.reasoning}),
            )
        })
        .collect();
    let summary = format!(
        "round {}: {} validated, {} challenged, {} overturned in {}",
        st.round,
        count(ReviewVerdict::Validated),
        count(ReviewVerdict::Challenged),
        count(ReviewVerdict::Overturned),
        crate::render::format::seconds_text(began.elapsed().as_secs_f64())
    );
    let findings_json = serde_json::to_vec_pretty(&findings)?;
    let start_json = serde_json::to_vec(&start_runs)?;
    let noisy = noisy_evaluation(conf, st.round, &findings);
    if let Some(warning) = &noisy {
        conf.ui.warn(&format!("warning: {warning}"));
    }
    let event = Event::PeerReview(events::PeerReview {
        round: st.round,
        validated_count: count(ReviewVerdict::Validated),
        challenged_count: count(ReviewVerdict::Challenged),
        overturned_count: count(ReviewVerdict::Overturned),
        findings: serde_json::to_value(&findings)?,
        conflicts: serde_json::to_value(&conflicts)?,
        notes,
        noisy_evaluation: noisy,
    });
    conf.record(
        event,
        &summary,
        vec![
            StateChange::Put(files::review(st.round), md.into_bytes()),
            StateChange::Put(files::findings(st.round), findings_json),
            StateChange::Put(files::start_runs(st.round), start_json),
        ],
    )?;
    conf.ui.info(&format!("peer review: {summary}"));
    Ok(())
}

/// The warning for an evaluation that proved noisy this round (one reading per tree, and the
/// review's reading of a snapshot disagreed with the researcher's beyond the tolerance).
fn noisy_evaluation(conf: &Conference, round: u32, findings: &[Finding]) -> Option<String> {
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
        &f.commit[..10.min(f.commit.len())],
        conf.config.noise_runs,
        f.suggested_noise_runs.unwrap_or(5)
    ))
}

fn render_review(
    conf: &Conference,
    round: u32,
    findings: &[Finding],
    order: &[Finding],
    conflicts: &[Conflict],
    start_runs: &[f64],
) -> String {
    let mut md = String::new();
    write_review_header(&mut md, conf, round, findings, start_runs);
    let dir = conf
        .direction()
        .unwrap_or(crate::config::Direction::Maximize);
    for f in findings {
        write_finding_review(&mut md, f, dir);
    }
    write_conflict_resolution(&mut md, order, conflicts);
    write_verdict_summary(&mut md, findings);
    write_transfer_recommendations(&mut md, order);
    if conf.config.mode == crate::config::Mode::Qualitative {
        let _ = writeln!(md, "## Qualitative Scores\n");
        for f in findings {
            let _ = writeln!(md, "- {}: {}", f.researcher, fmt(f.reproduced));
        }
    }
    md
}

/// The review's title, the round start's re-measurement, and a word when there is nothing to
/// review or the evaluation proved noisy.
fn write_review_header(
    md: &mut String,
    conf: &Conference,
    round: u32,
    findings: &[Finding],
    start_runs: &[f64],
) {
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
    let attempts = round_attempts(conf, round).unwrap_or_default();
    if let Some(models) = crate::model::mixed_gpu_models(&attempts) {
        let _ = writeln!(
            md,
            "**Hardware:** {}.\n",
            crate::model::mixed_gpu_warning(&models)
        );
    }
    if let Some(warning) = noisy_evaluation(conf, round, findings) {
        let mut chars = warning.chars();
        let first: String = chars
            .next()
            .map(|c| c.to_uppercase().collect())
            .unwrap_or_default();
        let _ = writeln!(md, "**Warning:** {first}{}\n", chars.as_str());
    }
}

/// One finding's review: claim, evidence, verdict, reasoning and the action it leads to.
fn write_finding_review(md: &mut String, f: &Finding, dir: crate::config::Direction) {
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
        &f.commit[..10],
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
    let action = match ReviewVerdict::parse(&f.verdict) {
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
    use crate::config::Direction::{Maximize, Minimize};

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
}
