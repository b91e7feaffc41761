//! Phase 4: knowledge transfer. Validated findings are picked onto the best branch in order of
//! gain; after each pick the combined best is evaluated and the pick stays only if best improves.
//!
//! A finding is the researcher's whole round (round start → round-best), merged as a three-way
//! merge of trees. When it conflicts with what best already holds, the seed's rule applies: the
//! finding picked earlier has the larger gain (ties: lower letter) and keeps the file; the later
//! finding's other files still come along. Each pick is its own event, so a resumed transfer goes
//! on with the next pick instead of repeating one.

use std::fmt::Write;

use anyhow::Result;
use git2::{Index, MergeOptions, Oid, Repository};
use serde_json::json;

use super::evaluate::{mean_sd, EvalResult};
use super::research::researcher_signature;
use super::review::{self, fmt, Finding};
use super::state::{files, Phase};
use super::Conference;
use crate::config::edit;
use crate::git::snapshot;
use crate::store::StateChange;

/// Runs (or finishes) the transfer of the current round, then records `round.completed`.
pub async fn run_phase(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let findings: Vec<Finding> = conf
        .read_state_file(&format!("{}/findings.json", files::round_dir(st.round)))?
        .map(|b| serde_json::from_slice(&b))
        .transpose()?
        .unwrap_or_default();
    let start_runs: Vec<f64> = conf
        .read_state_file(&format!("{}/start_runs.json", files::round_dir(st.round)))?
        .map(|b| serde_json::from_slice(&b))
        .transpose()?
        .unwrap_or_default();
    for f in review::transfer_order(&findings) {
        if crate::exec::process::cancelled() {
            return Ok(());
        }
        if conf.state().transfer_done.contains(&f.researcher) {
            continue;
        }
        pick(conf, &f, &start_runs).await?;
    }
    if crate::exec::process::cancelled() {
        return Ok(());
    }
    complete_round(conf, &findings)
}

/// Three-way merge of the finding onto best; conflicted files keep best's version.
fn merge_onto_best(repo: &Repository, f: &Finding, best: Oid) -> Result<(Oid, Vec<String>)> {
    let base = repo.find_commit(Oid::from_str(&f.round_start)?)?.tree()?;
    let ours = repo.find_commit(best)?.tree()?;
    let theirs = repo.find_commit(Oid::from_str(&f.commit)?)?.tree()?;
    let mut index = repo.merge_trees(&base, &ours, &theirs, Some(&MergeOptions::new()))?;
    let mut conflicted = Vec::new();
    if index.has_conflicts() {
        let entries: Vec<_> = index.conflicts()?.collect::<Result<_, _>>()?;
        for c in entries {
            let path = c
                .our
                .as_ref()
                .or(c.their.as_ref())
                .or(c.ancestor.as_ref())
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .unwrap_or_default();
            resolve_ours(&mut index, &path, c.our)?;
            conflicted.push(path);
        }
    }
    let tree = index.write_tree_to(repo)?;
    Ok((tree, conflicted))
}

fn resolve_ours(index: &mut Index, path: &str, ours: Option<git2::IndexEntry>) -> Result<()> {
    index.conflict_remove(std::path::Path::new(path))?;
    if let Some(mut entry) = ours {
        entry.flags &= !0x3000; // stage 0
        index.add(&entry)?;
    }
    Ok(())
}

async fn pick(conf: &Conference, f: &Finding, start_runs: &[f64]) -> Result<()> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    let best = Oid::from_str(&st.best.commit)?;
    let best_tree = repo.find_commit(best)?.tree_id();
    let (tree, conflicted) = merge_onto_best(&repo, f, best)?;
    let dir = conf
        .direction()
        .unwrap_or(crate::config::Direction::Maximize);
    // Best is compared on fresh measurements: the review's runs of the round start, or the runs
    // of a pick that already stayed this round.
    let merged_this_round = st.best.round == st.round && st.best.researcher.is_some();
    let best_metric = if merged_this_round || start_runs.is_empty() {
        st.best.metric
    } else {
        Some(mean_sd(start_runs).0)
    };
    let (verdict, candidate, result, reason): (&str, Option<Oid>, Option<EvalResult>, String) =
        if tree == best_tree {
            (
                "dropped",
                None,
                None,
                "nothing left to add after conflict resolution".into(),
            )
        } else {
            let message = format!(
            "Round {}: transfer Researcher {}'s finding\n\n{}\n\nGain {:+.6} (validated in peer review).\n(cherry picked from commit {})\n",
            st.round, f.researcher, f.description, f.gain_reproduced, f.commit
        );
            let author = researcher_signature(&repo, &f.researcher);
            let commit = snapshot::commit(&repo, tree, &[best], &message, &author)?;
            crate::failpoint::hit("transfer.cherry-picked");
            conf.keep_reachable(&[commit])?;
            // The finding alone on an unchanged best is what the review already measured.
            let finding_tree = repo.find_commit(Oid::from_str(&f.commit)?)?.tree_id();
            let result = if tree == finding_tree && !f.runs.is_empty() {
                EvalResult {
                    metric: f.reproduced,
                    runs: f.runs.clone(),
                    sub_metrics: Default::default(),
                    status: "ok".into(),
                    reason: None,
                    seconds: 0.0,
                }
            } else {
                let r = review::measure(
                    conf,
                    "best",
                    &commit.to_string(),
                    conf.config.eval_command(),
                    &format!("transfer-{}", f.researcher),
                )
                .await?;
                if r.status == "interrupted" {
                    return Ok(());
                }
                r
            };
            match (result.metric, best_metric) {
                (Some(m), Some(b)) if dir.gain(m, b) > 0.0 => (
                    "merged",
                    Some(commit),
                    Some(result),
                    format!("best improves: {b:.6} → {m:.6}"),
                ),
                (Some(m), None) => (
                    "merged",
                    Some(commit),
                    Some(result),
                    format!("best measured at {m:.6}"),
                ),
                (Some(m), Some(b)) => (
                    "dropped",
                    Some(commit),
                    Some(result),
                    format!("combined best {m:.6} is not better than {b:.6}"),
                ),
                (None, _) => (
                    "dropped",
                    Some(commit),
                    Some(result.clone()),
                    format!(
                        "combined best crashed: {}",
                        result.reason.unwrap_or_default()
                    ),
                ),
            }
        };
    let metric = result.as_ref().and_then(|r| r.metric);
    let note = candidate.map(|c| {
        json!({"commit": c.to_string(), "conference": conf.name, "researcher": f.researcher,
               "round": st.round, "verdict": if verdict == "merged" { "kept" } else { "reverted" },
               "transfer": verdict, "metric": metric, "runs": result.as_ref().map(|r| r.runs.clone()),
               "reason": reason})
    });
    let payload = json!({
        "round": st.round,
        "researcher": f.researcher,
        "finding": f.commit,
        "commit": candidate.map(|c| c.to_string()),
        "result": verdict,
        "metric": metric,
        "conflicts": conflicted,
        "reason": reason,
        "notes": note.iter().collect::<Vec<_>>(),
    });
    let old_best = st.best.commit.clone();
    conf.record(
        "transfer.pick",
        &format!("round {} {}: {verdict} ({reason})", st.round, f.researcher),
        payload,
        |next, _| {
            next.transfer_done.push(f.researcher.clone());
            if verdict == "merged" {
                if let Some(c) = candidate {
                    next.best.commit = c.to_string();
                    next.best.metric = metric;
                    next.best.researcher = Some(f.researcher.clone());
                    next.best.round = next.round;
                }
            }
            Ok(vec![])
        },
    )?;
    if let (Some(c), Some(n)) = (candidate, note) {
        conf.note(&[(c, n)])?;
    }
    crate::failpoint::hit("transfer.recorded");
    if verdict == "merged" {
        conf.move_branch(
            &conf.refs.best(),
            &conf.state().best.commit,
            Some(&old_best),
        )?;
    }
    conf.ui.info(&format!(
        "knowledge transfer: {} {verdict} — {reason}",
        f.researcher
    ));
    Ok(())
}

/// Records `round.completed`: shared knowledge, the conference log row, the plateau counter.
fn complete_round(conf: &Conference, findings: &[Finding]) -> Result<()> {
    let st = conf.state();
    let round = st.round;
    let mut config_text = conf
        .read_state_file(files::CONFIG)?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|| conf.config_text.clone());
    let mut knowledge = Vec::new();
    for f in review::transfer_order(findings) {
        let line = format!(
            "Round {round}, Researcher {}: {} ({:+.6}, validated)",
            f.researcher,
            f.description.lines().next().unwrap_or(""),
            f.gain_reproduced
        );
        config_text = edit::append_shared_knowledge(&config_text, &line);
        knowledge.push(line);
    }
    let best_researcher = st.best.researcher.clone().unwrap_or_else(|| "-".into());
    let key = findings
        .iter()
        .find(|f| Some(&f.researcher) == st.best.researcher.as_ref() && st.best.round == round)
        .map(|f| f.description.lines().next().unwrap_or("").to_string())
        .unwrap_or_else(|| "no new validated finding".into());
    config_text = edit::append_conference_log_row(
        &config_text,
        &[
            round.to_string(),
            best_researcher.clone(),
            fmt(st.best.metric),
            key,
            "completed".into(),
        ],
    );
    let previous = st
        .round_bests
        .last()
        .copied()
        .flatten()
        .or(st.baseline_metric);
    let threshold = super::stop::noise_threshold(conf, &st);
    let progressed = match (st.best.metric, previous, conf.direction()) {
        (Some(now), Some(before), Some(dir)) => dir.gain(now, before) > threshold,
        (Some(_), None, _) => true,
        _ => false,
    };
    let all_high = !st.researchers.is_empty()
        && st
            .researchers
            .values()
            .all(|r| r.best_metric.is_some_and(|m| m >= 8.0));
    let mut transfer_md = String::new();
    let _ = writeln!(transfer_md, "# Knowledge Transfer — Round {round}\n");
    let _ = writeln!(
        transfer_md,
        "Best after the round: {} (`{}`)\n",
        fmt(st.best.metric),
        &st.best.commit[..10]
    );
    for k in &knowledge {
        let _ = writeln!(transfer_md, "- {k}");
    }
    let converged_now = super::stop::target_reached(conf, st.best.metric);
    let payload = json!({
        "round": round,
        "best_metric": st.best.metric,
        "best_researcher": st.best.researcher,
        "best_commit": st.best.commit,
        "converged": converged_now,
        "shared_knowledge_added": knowledge,
    });
    let results_tsv = super::synthesis::round_results_tsv(conf, round, findings)?;
    conf.record(
        "round.completed",
        &format!(
            "round {round}: best {} ({best_researcher})",
            fmt(st.best.metric)
        ),
        payload,
        |next, _| {
            next.phase = Phase::Between;
            next.round_bests.push(next.best.metric);
            next.plateau_rounds = if progressed {
                0
            } else {
                next.plateau_rounds + 1
            };
            next.high_score_rounds = if all_high {
                next.high_score_rounds + 1
            } else {
                0
            };
            next.shared_knowledge.extend(knowledge.iter().cloned());
            next.transfer_done.clear();
            Ok(vec![
                StateChange::Put(files::CONFIG.into(), config_text.into_bytes()),
                StateChange::Put(files::transfer(round), transfer_md.into_bytes()),
                StateChange::Put(files::results(round), results_tsv.into_bytes()),
            ])
        },
    )?;
    conf.ui.info(&format!(
        "round {round} completed: best {}",
        fmt(conf.state().best.metric)
    ));
    Ok(())
}
