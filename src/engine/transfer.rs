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
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::evaluate::EvalResult;
use super::research::researcher_signature;
use super::review::{self, fmt, Finding};
use super::state::{files, Phase};
use super::Conference;
use crate::config::edit;
use crate::git::{merge, snapshot};
use crate::model::{EvalStatus, FinalStatus, PickResult, Verdict};
use crate::protocol::round as round_rules;
use crate::store::StateChange;

/// What became of one validated finding in knowledge transfer (`round-N/transfer.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PickRecord {
    pub researcher: String,
    pub finding: String,
    /// merged | dropped
    pub result: String,
    pub reason: String,
    /// Files whose changes clashed with best's; best kept them (the seed's conflict rule).
    pub conflicts: Vec<String>,
    pub metric: Option<f64>,
}

fn picks_path(round: u32) -> String {
    format!("{}/transfer.jsonl", files::round_dir(round))
}

/// The transfer decisions of a round, in the order they were made.
pub fn read_picks(conf: &Conference, round: u32) -> Vec<PickRecord> {
    super::research::read_jsonl(conf, &picks_path(round)).unwrap_or_default()
}

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
    let tree_of = |c: &str| -> Result<Oid> { Ok(repo.find_commit(Oid::from_str(c)?)?.tree_id()) };
    let merged = merge::merge_trees(
        repo,
        tree_of(&f.round_start)?,
        repo.find_commit(best)?.tree_id(),
        tree_of(&f.commit)?,
    )?;
    Ok((merged.tree, merged.conflicted))
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
        super::noise::median(start_runs)
    };
    let (verdict, candidate, result, reason): (
        PickResult,
        Option<Oid>,
        Option<EvalResult>,
        String,
    ) = if tree == best_tree {
        (
            PickResult::Dropped,
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
                status: EvalStatus::Ok.into(),
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
            if r.status == EvalStatus::Interrupted {
                return Ok(());
            }
            r
        };
        let crash = result.reason.clone().unwrap_or_default();
        let (verdict, reason) =
            crate::protocol::pick::decide(result.metric, best_metric, dir, &crash);
        (verdict, Some(commit), Some(result), reason)
    };
    // A combination no researcher measured must pass the guard commands too.
    let finding_tree = repo.find_commit(Oid::from_str(&f.commit)?)?.tree_id();
    let (verdict, reason) = match candidate {
        Some(c) if verdict == PickResult::Merged && tree != finding_tree => {
            match super::guards::check_commit(conf, c, &format!("transfer-{}", f.researcher))
                .await?
            {
                super::guards::Verdict::Pass => (verdict, reason),
                super::guards::Verdict::Fail(why) => {
                    (PickResult::Dropped, format!("combined best: {why}"))
                }
                super::guards::Verdict::Interrupted => return Ok(()),
            }
        }
        _ => (verdict, reason),
    };
    let metric = result.as_ref().and_then(|r| r.metric);
    let note = candidate.map(|c| {
        json!({"commit": c.to_string(), "conference": conf.name, "researcher": f.researcher,
               "round": st.round, "verdict": if verdict == PickResult::Merged { Verdict::Kept } else { Verdict::Reverted },
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
    let pick_line = serde_json::to_string(&PickRecord {
        researcher: f.researcher.clone(),
        finding: f.commit.clone(),
        result: verdict.to_string(),
        reason: reason.clone(),
        conflicts: conflicted.clone(),
        metric,
    })?;
    conf.record(
        "transfer.pick",
        &format!("round {} {}: {verdict} ({reason})", st.round, f.researcher),
        payload,
        |next, rec| {
            let changes = vec![super::research::append_line(
                rec,
                &picks_path(next.round),
                &pick_line,
            )?];
            next.transfer_done.push(f.researcher.clone());
            if verdict == PickResult::Merged {
                if let Some(c) = candidate {
                    next.best.commit = c.to_string();
                    next.best.metric = metric;
                    next.best.researcher = Some(f.researcher.clone());
                    next.best.round = next.round;
                }
            }
            Ok(changes)
        },
    )?;
    if let (Some(c), Some(n)) = (candidate, note) {
        conf.note(&[(c, n)])?;
    }
    crate::failpoint::hit("transfer.recorded");
    if verdict == PickResult::Merged {
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
    let picks = read_picks(conf, round);
    for f in review::transfer_order(findings) {
        let outcome = match picks.iter().find(|p| p.researcher == f.researcher) {
            Some(p) if p.result == PickResult::Merged && p.conflicts.is_empty() => {
                "on best".to_string()
            }
            Some(p) if p.result == PickResult::Merged => {
                format!("on best except {}", p.conflicts.join(", "))
            }
            Some(p) => format!("not combined: {}", p.reason),
            None => "not transferred".to_string(),
        };
        let line = format!(
            "Round {round}, Researcher {}: {} ({:+.6}, validated, {outcome})",
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
    let progressed = round_rules::progressed(st.best.metric, previous, conf.direction(), threshold);
    // Qualitative mode: the reviewer's scores (the re-measured round-bests), or the score a
    // researcher without a finding kept.
    let all_high = !st.researchers.is_empty()
        && st.researchers.iter().all(|(id, r)| {
            findings
                .iter()
                .find(|f| &f.researcher == id)
                .and_then(|f| f.reproduced)
                .or(r.best_metric)
                .is_some_and(|m| m >= round_rules::HIGH_SCORE)
        });
    let mut transfer_md = String::new();
    let _ = writeln!(transfer_md, "# Knowledge Transfer — Round {round}\n");
    let _ = writeln!(
        transfer_md,
        "Best after the round: {} (`{}`)\n",
        fmt(st.best.metric),
        &st.best.commit[..10]
    );
    if picks.is_empty() {
        let _ = writeln!(transfer_md, "No validated finding to transfer this round.");
    }
    for p in &picks {
        let _ = writeln!(
            transfer_md,
            "- Researcher {}: **{}** — {}{}",
            p.researcher,
            p.result,
            p.reason,
            if p.conflicts.is_empty() {
                String::new()
            } else {
                format!(
                    " (conflicting files kept from best, which has the larger gain: {})",
                    p.conflicts.join(", ")
                )
            }
        );
    }
    if !knowledge.is_empty() {
        let _ = writeln!(transfer_md, "\n## Shared knowledge added\n");
    }
    for k in &knowledge {
        let _ = writeln!(transfer_md, "- {k}");
    }
    let advance = |next: &mut super::state::State| {
        next.phase = Phase::Between;
        next.round_bests.push(next.best.metric);
        let before = round_rules::Streaks {
            plateau_rounds: next.plateau_rounds,
            stalled_rounds: next.stalled_rounds,
            high_score_rounds: next.high_score_rounds,
        };
        let all_stalled = super::stop::every_researcher_stalled(next);
        let after = round_rules::streaks_after(before, progressed, all_stalled, all_high);
        next.plateau_rounds = after.plateau_rounds;
        next.stalled_rounds = after.stalled_rounds;
        next.high_score_rounds = after.high_score_rounds;
        next.shared_knowledge.extend(knowledge.iter().cloned());
        next.transfer_done.clear();
    };
    // `converged`: the stop rules will end the conference as converged after this round.
    let mut after = st.clone();
    advance(&mut after);
    let converged_now =
        super::stop::check(conf, &after).is_some_and(|s| s.status == FinalStatus::Converged);
    let payload = json!({
        "round": round,
        "best_metric": st.best.metric,
        "best_researcher": st.best.researcher,
        "best_commit": st.best.commit,
        "converged": converged_now,
        "shared_knowledge_added": knowledge,
    });
    let results_tsv = super::synthesis::round_results_tsv(conf, round, findings)?;
    // The progress chart, refreshed every round (the seed overwrites it each round).
    let attempts = super::synthesis::all_attempts(conf, &after)?;
    let plot = super::synthesis::plot(conf, &after, &attempts)?;
    conf.record(
        "round.completed",
        &format!(
            "round {round}: best {} ({best_researcher})",
            fmt(st.best.metric)
        ),
        payload,
        |next, _| {
            advance(next);
            Ok(vec![
                StateChange::Put(files::CONFIG.into(), config_text.into_bytes()),
                StateChange::Put(files::transfer(round), transfer_md.into_bytes()),
                StateChange::Put(files::results(round), results_tsv.into_bytes()),
                StateChange::Put(files::PLOT.into(), plot),
            ])
        },
    )?;
    conf.ui.info(&format!(
        "round {round} completed: best {}",
        fmt(conf.state().best.metric)
    ));
    Ok(())
}
