//! Phases 2 and 3: the poster session (each researcher's round, from the data) and the peer
//! review, which re-runs every researcher's round-best from its commit in a clean checkout.
//!
//! Verdicts: validated (the gain reproduces beyond the noise tolerance), challenged (a smaller or
//! inconsistent gain, or a hold-out that disagrees), overturned (no gain, a crash, or a diff that
//! touches a frozen or forbidden path). Findings that are not validated never reach best.

use std::fmt::Write;

use anyhow::Result;
use git2::Oid;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::evaluate::{self, mean_sd, EvalRequest, EvalResult};
use super::research::round_attempts;
use super::state::{files, Phase};
use super::Conference;
use crate::git::snapshot;
use crate::store::StateChange;

/// One researcher's round-best as the review judged it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    pub researcher: String,
    pub commit: String,
    pub round_start: String,
    pub description: String,
    pub files: Vec<String>,
    pub claimed: Option<f64>,
    pub start_metric: Option<f64>,
    pub reproduced: Option<f64>,
    pub runs: Vec<f64>,
    pub start_runs: Vec<f64>,
    pub gain_claimed: f64,
    pub gain_reproduced: f64,
    pub tolerance: f64,
    pub holdout: Option<(f64, f64)>,
    pub verdict: String,
    pub reasoning: String,
}

/// Runs per candidate in review: noise runs, at least the evaluation's repeats.
pub fn review_runs(conf: &Conference) -> u32 {
    conf.config
        .noise_runs
        .max(conf.config.evaluation.repeats)
        .max(1)
}

/// Cache namespace of review-grade measurements (fresh runs in a clean checkout).
pub fn review_settings(conf: &Conference) -> String {
    let metric = evaluate::metric_name(&conf.config);
    evaluate::settings_hash(
        &format!("review\0{}", conf.config.eval_command()),
        review_runs(conf),
        conf.config.evaluation.timeout,
        &metric,
    )
}

/// Evaluates `commit` in the detached worktree `label` with review-grade runs.
pub async fn measure(
    conf: &Conference,
    label: &str,
    commit: &str,
    command: &str,
    what: &str,
) -> Result<EvalResult> {
    let path = conf.prepare_worktree(label, None, commit)?;
    remove_ignored(&path)?;
    let st = conf.state();
    let mut env = conf.context_env("review", st.round, 0, st.best.metric);
    env.push(("CONFERENCE_COMMIT".into(), commit.to_string()));
    let metric = evaluate::metric_name(&conf.config);
    let result = evaluate::evaluate(EvalRequest {
        command,
        metric: &metric,
        last_number: conf.config.evaluation.last_number,
        runs: review_runs(conf),
        timeout: conf.config.evaluation.timeout,
        cwd: &path,
        env,
        log_prefix: conf.log_path(&format!("r{}-{what}.eval", st.round)),
    })
    .await?;
    // Leave the checkout clean for the next candidate (evaluations may write files).
    let wt = git2::Repository::open(&path)?;
    snapshot::reset(&wt, Oid::from_str(commit)?, None)?;
    Ok(result)
}

/// A clean checkout has no ignored files either: caches and build output an earlier
/// measurement left behind must not decide the next one.
fn remove_ignored(path: &std::path::Path) -> Result<()> {
    let wt = git2::Repository::open(path)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_ignored(true)
        .include_untracked(false)
        .recurse_ignored_dirs(false)
        .exclude_submodules(true);
    let ignored: Vec<String> = wt
        .statuses(Some(&mut opts))?
        .iter()
        .filter(|e| e.status().is_ignored())
        .filter_map(|e| e.path().map(str::to_string))
        .collect();
    for rel in ignored {
        let full = path.join(rel.trim_end_matches('/'));
        let removed = match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&full),
            Ok(_) => std::fs::remove_file(&full),
            Err(_) => Ok(()),
        };
        removed.map_err(|e| anyhow::anyhow!("cannot clean {}: {e}", full.display()))?;
    }
    Ok(())
}

/// Phase 2: builds and records the poster session of the current round.
pub async fn poster_session(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    let attempts = round_attempts(conf, st.round)?;
    let mut md = String::new();
    let _ = writeln!(md, "# Poster Session — Round {}\n", st.round);
    let _ = writeln!(
        md,
        "Conference: {} · metric: {}\n",
        conf.config.title,
        evaluate::metric_name(&conf.config)
    );
    let mut summary_parts = Vec::new();
    for (id, r) in &st.researchers {
        let _ = writeln!(md, "## Researcher {id}\n");
        let delta = match (r.best_metric, r.round_start_metric) {
            (Some(b), Some(s)) => format!("{:+.6}{}", b - s, pct(b - s, s)),
            _ => "-".into(),
        };
        let _ = writeln!(
            md,
            "- **Round best:** {} (round start {}, delta {delta})",
            fmt(r.best_metric),
            fmt(r.round_start_metric)
        );
        let c = &r.round_counts;
        let _ = writeln!(
            md,
            "- **Attempts:** {} — kept {}, reverted {}, crashed {}, timeout {}, rejected {}, no change {}",
            c.total(), c.kept, c.reverted, c.crashed, c.timeout, c.rejected, c.no_change
        );
        let _ = writeln!(
            md,
            "- **Finished:** {}",
            r.round_finished.as_deref().unwrap_or("-")
        );
        let _ = writeln!(md, "- **Stuck level:** {}", r.stuck_level);
        let kept: Vec<_> = attempts
            .iter()
            .filter(|a| a.researcher == *id && a.verdict == "kept")
            .collect();
        if kept.is_empty() {
            let _ = writeln!(md, "- **Top findings:** none kept this round\n");
        } else {
            let _ = writeln!(md, "- **Top findings:**");
            let mut ranked = kept.clone();
            if let Some(dir) = conf.direction() {
                ranked.sort_by(|a, b| {
                    let ga = dir.gain(a.metric.unwrap_or(f64::NAN), 0.0);
                    let gb = dir.gain(b.metric.unwrap_or(f64::NAN), 0.0);
                    gb.partial_cmp(&ga).unwrap_or(std::cmp::Ordering::Equal)
                });
            }
            for a in ranked.iter().take(3) {
                let stat = Oid::from_str(&a.commit)
                    .ok()
                    .and_then(|c| repo.find_commit(c).ok())
                    .and_then(|c| {
                        let parent = c.parent(0).ok()?;
                        snapshot::diff_stat(&repo, parent.tree_id(), c.tree_id()).ok()
                    })
                    .map(|(f, i, d)| format!("{f} files, +{i} −{d}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    md,
                    "  - `{}` {} — {} ({}) — {stat}",
                    &a.commit[..10.min(a.commit.len())],
                    a.description,
                    fmt(a.metric),
                    a.delta
                        .map(|d| format!("{d:+.6}"))
                        .unwrap_or_else(|| "-".into())
                );
            }
            md.push('\n');
        }
        summary_parts.push(format!("{id}: {} ({} kept)", fmt(r.best_metric), c.kept));
    }
    let summary = summary_parts.join(", ");
    let md =
        super::prose::with_prose(conf, conf.config.agent.chair.as_ref(), "session chair", md).await;
    conf.record(
        "round.poster_session",
        &format!("round {}: {summary}", st.round),
        json!({"round": st.round, "summary": summary, "path": files::poster(st.round)}),
        |next, _| {
            next.phase = Phase::Review;
            Ok(vec![StateChange::Put(
                files::poster(next.round),
                md.into_bytes(),
            )])
        },
    )
}

/// Phase 3: re-evaluates each round-best in a clean checkout and records the verdicts.
pub async fn peer_review(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    let round_start = st.best.commit.clone();
    let candidates: Vec<(String, String)> = st
        .researchers
        .iter()
        .filter(|(_, r)| r.head != r.round_start && r.best_metric.is_some())
        .map(|(id, r)| (id.clone(), r.head.clone()))
        .collect();
    let mut findings = Vec::new();
    let mut start_runs = Vec::new();
    let mut start_holdout = None;
    if !candidates.is_empty() {
        let start = measure(
            conf,
            "review",
            &round_start,
            conf.config.eval_command(),
            "start",
        )
        .await?;
        if start.status == "interrupted" {
            return Ok(());
        }
        start_runs = start.runs.clone();
        if let Some(holdout) = &conf.config.evaluation.holdout {
            start_holdout = measure(conf, "review", &round_start, holdout, "start-holdout")
                .await?
                .metric;
        }
    }
    let (start_mean, start_sd) = mean_sd(&start_runs);
    let tolerance = super::stop::noise_threshold(conf, &st);
    let dir = conf
        .direction()
        .unwrap_or(crate::config::Direction::Maximize);
    let start_tree = repo.find_commit(Oid::from_str(&round_start)?)?.tree_id();
    for (id, head) in candidates {
        let r = st.researcher(&id);
        let head_tree = repo.find_commit(Oid::from_str(&head)?)?.tree_id();
        let changed = snapshot::changed_paths(&repo, start_tree, head_tree)?;
        let description = round_attempts(conf, st.round)?
            .into_iter()
            .filter(|a| a.researcher == id && a.verdict == "kept")
            .map(|a| a.description)
            .collect::<Vec<_>>()
            .join("; ");
        let claimed = r.best_metric;
        let gain_claimed = match (claimed, r.round_start_metric) {
            (Some(c), Some(s)) => dir.gain(c, s),
            _ => 0.0,
        };
        let mut f = Finding {
            researcher: id.clone(),
            commit: head.clone(),
            round_start: round_start.clone(),
            description,
            files: changed.clone(),
            claimed,
            start_metric: (!start_runs.is_empty()).then_some(start_mean),
            reproduced: None,
            runs: vec![],
            start_runs: start_runs.clone(),
            gain_claimed,
            gain_reproduced: 0.0,
            tolerance,
            holdout: None,
            verdict: String::new(),
            reasoning: String::new(),
        };
        if let Some(why) = conf.guard.violation(&changed) {
            f.verdict = "overturned".into();
            f.reasoning = format!("The diff {why}.");
            findings.push(f);
            continue;
        }
        let result = measure(conf, "review", &head, conf.config.eval_command(), &id).await?;
        if result.status == "interrupted" {
            return Ok(());
        }
        crate::failpoint::hit("review.measured");
        f.runs = result.runs.clone();
        let Some(mean) = result.metric else {
            f.verdict = "overturned".into();
            f.reasoning = format!(
                "Re-running the snapshot failed: {}.",
                result.reason.unwrap_or_else(|| "crash".into())
            );
            findings.push(f);
            continue;
        };
        f.reproduced = Some(mean);
        let (_, sd) = mean_sd(&result.runs);
        let n = result.runs.len().max(1) as f64;
        let noise = 2.0 * ((sd * sd + start_sd * start_sd) / n).sqrt();
        let needed = tolerance.max(noise);
        f.tolerance = needed;
        f.gain_reproduced = dir.gain(mean, start_mean);
        let consistent = result.runs.iter().all(|&v| dir.gain(v, start_mean) > 0.0);
        let (verdict, reasoning) = if f.gain_reproduced <= 0.0 {
            ("overturned", format!(
                "No gain on re-run: {mean:.6} against {start_mean:.6} at the round start (claimed {}).",
                fmt(claimed)
            ))
        } else if f.gain_reproduced <= needed {
            (
                "challenged",
                format!(
                    "Gain {:.6} is within the noise tolerance {needed:.6}; it may be noise.",
                    f.gain_reproduced
                ),
            )
        } else if !consistent || f.gain_reproduced < 0.5 * gain_claimed {
            (
                "challenged",
                format!(
                    "Gain reproduces only partly or inconsistently: {:.6} against {:.6} claimed.",
                    f.gain_reproduced, gain_claimed
                ),
            )
        } else {
            (
                "validated",
                format!(
                    "Gain {:.6} reproduces over {} run(s), beyond the tolerance {needed:.6}.",
                    f.gain_reproduced,
                    result.runs.len()
                ),
            )
        };
        f.verdict = verdict.into();
        f.reasoning = reasoning;
        if let (Some(holdout), Some(start_h)) = (&conf.config.evaluation.holdout, start_holdout) {
            let h = measure(conf, "review", &head, holdout, &format!("{id}-holdout")).await?;
            match h.metric {
                Some(v) => {
                    f.holdout = Some((v, start_h));
                    if f.verdict == "validated" && dir.gain(v, start_h) < -tolerance {
                        f.verdict = "challenged".into();
                        f.reasoning.push_str(&format!(
                            " The hold-out evaluation gets worse ({v:.6} against {start_h:.6}): it may not generalise."
                        ));
                    }
                }
                None => {
                    if f.verdict == "validated" {
                        f.verdict = "challenged".into();
                        f.reasoning
                            .push_str(" The hold-out evaluation failed on this snapshot.");
                    }
                }
            }
        }
        findings.push(f);
    }
    record_review(conf, findings, &start_runs).await
}

/// Validated findings in transfer order: larger reproduced gain first, ties to the lower letter.
pub fn transfer_order(findings: &[Finding]) -> Vec<Finding> {
    let mut v: Vec<Finding> = findings
        .iter()
        .filter(|f| f.verdict == "validated")
        .cloned()
        .collect();
    v.sort_by(|a, b| {
        b.gain_reproduced
            .partial_cmp(&a.gain_reproduced)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.researcher.cmp(&b.researcher))
    });
    v
}

/// A file two validated findings change in ways that do not merge, and who keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conflict {
    pub file: String,
    pub winner: String,
    pub loser: String,
    /// The two gains were equal: the lower letter won the tie.
    pub tie: bool,
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
) -> Result<()> {
    let st = conf.state();
    let order = transfer_order(&findings);
    let conflicts = conflicts(&conf.open_repo()?, &order)?;
    let md = render_review(conf, st.round, &findings, &order, &conflicts, start_runs);
    let md =
        super::prose::with_prose(conf, conf.config.agent.reviewer.as_ref(), "reviewer", md).await;
    let count = |v: &str| findings.iter().filter(|f| f.verdict == v).count();
    let notes: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            json!({"commit": f.commit, "conference": conf.name, "researcher": f.researcher,
                   "round": st.round, "verdict": f.verdict, "metric": f.reproduced,
                   "runs": f.runs, "claimed": f.claimed, "reason": f.reasoning})
        })
        .collect();
    let payload = json!({
        "round": st.round,
        "validated_count": count("validated"),
        "challenged_count": count("challenged"),
        "overturned_count": count("overturned"),
        "findings": findings,
        "conflicts": conflicts,
        "notes": notes,
    });
    let summary = format!(
        "round {}: {} validated, {} challenged, {} overturned",
        st.round,
        count("validated"),
        count("challenged"),
        count("overturned")
    );
    let findings_json = serde_json::to_vec_pretty(&findings)?;
    let start_json = serde_json::to_vec(&start_runs)?;
    conf.record("round.peer_review", &summary, payload.clone(), |next, _| {
        next.phase = Phase::Transfer;
        next.transfer_done.clear();
        Ok(vec![
            StateChange::Put(files::review(next.round), md.into_bytes()),
            StateChange::Put(
                format!("{}/findings.json", files::round_dir(next.round)),
                findings_json,
            ),
            StateChange::Put(
                format!("{}/start_runs.json", files::round_dir(next.round)),
                start_json,
            ),
        ])
    })?;
    let entries: Vec<(Oid, serde_json::Value)> = payload["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((Oid::from_str(n["commit"].as_str()?).ok()?, n.clone())))
        .collect();
    conf.note(&entries)?;
    conf.ui.info(&format!("peer review: {summary}"));
    Ok(())
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
    let _ = writeln!(md, "# Peer Review — Round {round}\n");
    let (start_mean, _) = mean_sd(start_runs);
    if !start_runs.is_empty() {
        let _ = writeln!(
            md,
            "Round start re-measured {} time(s): mean {start_mean:.6} (runs: {}).\n",
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
    for f in findings {
        let _ = writeln!(
            md,
            "### Researcher {} — {}\n",
            f.researcher,
            short(&f.description)
        );
        let _ = writeln!(
            md,
            "- **Claim:** {} → {} ({:+.6}) with `{}` changing {}",
            fmt(f
                .start_metric
                .or(Some(start_mean))
                .filter(|v| v.is_finite())),
            fmt(f.claimed),
            f.gain_claimed,
            &f.commit[..10],
            if f.files.is_empty() {
                "nothing".to_string()
            } else {
                f.files.join(", ")
            }
        );
        let _ = writeln!(
            md,
            "- **Evidence:** re-run from the commit in a clean checkout: {} (runs: {}); gain {:+.6}; tolerance {:.6}{}",
            fmt(f.reproduced),
            join(&f.runs),
            f.gain_reproduced,
            f.tolerance,
            f.holdout
                .map(|(v, s)| format!("; hold-out {v:.6} against {s:.6}"))
                .unwrap_or_default()
        );
        let _ = writeln!(md, "- **Verdict:** {}", f.verdict);
        let _ = writeln!(md, "- **Reasoning:** {}", f.reasoning);
        let action = match f.verdict.as_str() {
            "validated" => "Cherry-pick onto best; keep it only if the combined best improves.",
            "challenged" => "Not merged. Re-test with more runs before relying on it.",
            _ => "Not merged.",
        };
        let _ = writeln!(md, "- **Action:** {action}\n");
    }
    let _ = writeln!(md, "## Conflict Resolution\n");
    if conflicts.is_empty() {
        let _ = writeln!(
            md,
            "No two validated findings change the same lines of a file: they combine.\n"
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
    let _ = writeln!(md, "## Knowledge Transfer Recommendations\n");
    if order.is_empty() {
        let _ = writeln!(md, "Nothing to transfer this round.\n");
    }
    for (i, f) in order.iter().enumerate() {
        let _ = writeln!(
            md,
            "{}. Transfer Researcher {}'s finding (gain {:+.6}): {}",
            i + 1,
            f.researcher,
            f.gain_reproduced,
            short(&f.description)
        );
    }
    md.push('\n');
    if conf.config.mode == crate::config::Mode::Qualitative {
        let _ = writeln!(md, "## Qualitative Scores\n");
        for f in findings {
            let _ = writeln!(md, "- {}: {}", f.researcher, fmt(f.reproduced));
        }
    }
    md
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

pub fn fmt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into())
}

fn pct(delta: f64, base: f64) -> String {
    if base.abs() > f64::EPSILON {
        format!(" ({:+.2}%)", 100.0 * delta / base.abs())
    } else {
        String::new()
    }
}
