//! Phase 4: knowledge transfer. Validated findings are picked onto the best branch in order of
//! gain; after each pick the combined best is evaluated and the pick stays only if best improves.
//!
//! A finding is the researcher's whole round (round start → round-best), merged as a three-way
//! merge of trees. When it conflicts with what best already holds, the seed's rule applies: the
//! finding picked earlier has the larger gain (ties: lower letter) and keeps the file; the later
//! finding's other files still come along. Each pick is its own event, so a resumed transfer goes
//! on with the next pick instead of repeating one.

use anyhow::Result;
use git2::{Oid, Repository};

use crate::config::edit;
use crate::engine::measure::evaluate::EvalResult;
use crate::engine::measure::review_grade;
use crate::engine::record::ledger;
use crate::engine::state::files;
use crate::engine::Conference;
use crate::git::{merge, snapshot};
use crate::model::event::{self as events, Event, Note};
use crate::model::notes::TransferNote;
use crate::model::{CommitId, Finding, PickRecord};
use crate::model::{EvalStatus, FinalStatus, PickResult, Verdict};
use crate::protocol::pick::transfer_order;
use crate::protocol::round as round_rules;
use crate::protocol::talk::dropped_by_approval;
use crate::render::format::fmt;
use crate::store::StateChange;

/// Runs (or finishes) the transfer of the current round, then records `round.completed`.
pub async fn run_phase(conf: &Conference) -> Result<()> {
    let st = conf.state();
    let findings = ledger::findings(conf, st.round)?;
    let start_runs = ledger::start_runs(conf, st.round)?;
    let began = std::time::Instant::now();
    let order = transfer_order(&findings);
    let dropped = dropped_by_approval(&st);
    let to_pick: Vec<&str> = order
        .iter()
        .filter(|f| !st.transfer_done.contains(&f.researcher) && !dropped.contains(&f.researcher))
        .map(|f| f.researcher.as_str())
        .collect();
    if !to_pick.is_empty() {
        review_grade::phase_started(
            conf,
            st.round,
            "knowledge_transfer",
            &format!(
                "merging {} validated finding(s) ({}) onto the best one by one, measuring each combination",
                to_pick.len(),
                to_pick.join(", ")
            ),
        )?;
    }
    for f in order {
        if crate::exec::process::cancelled() {
            return Ok(());
        }
        let now = conf.state();
        if now.transfer_done.contains(&f.researcher) {
            continue;
        }
        if dropped_by_approval(&now).contains(&f.researcher) {
            leave_out_dropped(conf, &now, &f)?;
            continue;
        }
        pick(conf, &f, &start_runs).await?;
    }
    if crate::exec::process::cancelled() {
        return Ok(());
    }
    complete_round(conf, &findings, began)
}

/// Records that a person left `f` out of best (human in the loop: `approve --drop`).
fn leave_out_dropped(
    conf: &Conference,
    st: &crate::engine::state::State,
    f: &Finding,
) -> Result<()> {
    let tried = Tried {
        verdict: PickResult::Dropped,
        candidate: None,
        result: None,
        reason: format!(
            "left out by a person (`git conference approve {} --drop {}`)",
            conf.name, f.researcher
        ),
    };
    record_pick(conf, st, f, tried, vec![])
}

/// Three-way merge of the finding onto best; conflicted files keep best's version.
fn merge_onto_best(repo: &Repository, f: &Finding, best: Oid) -> Result<(Oid, Vec<String>)> {
    let tree_of = |c: &CommitId| -> Result<Oid> { Ok(repo.find_commit(c.oid())?.tree_id()) };
    let merged = merge::merge_trees(
        repo,
        tree_of(&f.round_start)?,
        repo.find_commit(best)?.tree_id(),
        tree_of(&f.commit)?,
    )?;
    Ok((merged.tree, merged.conflicted))
}

/// What a pick came to: the verdict, the commit it made on top of best (None: nothing to add),
/// its measurement, and why.
struct Tried {
    verdict: PickResult,
    candidate: Option<Oid>,
    result: Option<EvalResult>,
    reason: String,
}

async fn pick(conf: &Conference, f: &Finding, start_runs: &[f64]) -> Result<()> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    let best = st.best.commit.oid();
    let best_tree = repo.find_commit(best)?.tree_id();
    let (tree, conflicted) = merge_onto_best(&repo, f, best)?;
    let tried = if tree == best_tree {
        Tried {
            verdict: PickResult::Dropped,
            candidate: None,
            result: None,
            reason: "nothing left to add after conflict resolution".into(),
        }
    } else {
        match try_on_best(conf, &repo, f, tree, start_runs).await? {
            Some(tried) => tried,
            None => return Ok(()),
        }
    };
    // A combination no researcher measured must pass the guard commands too.
    let finding_tree = repo.find_commit(f.commit.oid())?.tree_id();
    let Some(tried) = guard_combination(conf, f, tried, tree != finding_tree).await? else {
        return Ok(());
    };
    record_pick(conf, &st, f, tried, conflicted)
}

/// Commits the merged `tree` on top of best and measures it (the finding alone on an unchanged
/// best is what the review already measured), against best's fresh measurements: the review's
/// runs of the round start, or the runs of a pick that already stayed this round. None on
/// Ctrl-C.
async fn try_on_best(
    conf: &Conference,
    repo: &Repository,
    f: &Finding,
    tree: Oid,
    start_runs: &[f64],
) -> Result<Option<Tried>> {
    let st = conf.state();
    let best = st.best.commit.oid();
    // The message says where the commit came from, as `git cherry-pick -x` would.
    let message = format!(
        "Round {}: transfer Researcher {}'s finding\n\n{}\n\nGain {:+.6} (validated in peer review).\n(cherry picked from commit {})\n",
        st.round, f.researcher, f.description, f.gain_reproduced, f.commit
    );
    let author = crate::store::researcher_signature(repo, &f.researcher);
    let commit = snapshot::commit(repo, tree, &[best], &message, &author)?;
    crate::failpoint::hit("transfer.cherry-picked");
    conf.keep_reachable(&[commit])?;
    let finding_tree = repo.find_commit(f.commit.oid())?.tree_id();
    let result = if tree == finding_tree && !f.runs.is_empty() {
        EvalResult {
            metric: f.reproduced,
            runs: f.runs.clone(),
            sub_metrics: Default::default(),
            status: EvalStatus::Ok.into(),
            reason: None,
            seconds: 0.0,
            ..Default::default()
        }
    } else {
        let command = conf.config.eval_command();
        let label = format!("transfer-{}", f.researcher);
        let r = review_grade::measure(conf, "best", &commit.into(), command, &label).await?;
        if r.status == EvalStatus::Interrupted {
            return Ok(None);
        }
        r
    };
    let merged_this_round = st.best.round == st.round && st.best.researcher.is_some();
    let best_metric = if merged_this_round || start_runs.is_empty() {
        st.best.metric
    } else {
        crate::engine::noise::median(start_runs)
    };
    let dir = conf
        .direction()
        .unwrap_or(crate::config::Direction::Maximize);
    let crash = result.reason.clone().unwrap_or_default();
    let (verdict, reason) = crate::protocol::pick::decide(result.metric, best_metric, dir, &crash);
    Ok(Some(Tried {
        verdict,
        candidate: Some(commit),
        result: Some(result),
        reason,
    }))
}

/// A merged pick that is a combination no researcher measured runs the guard commands; a
/// failure drops it. None on Ctrl-C.
async fn guard_combination(
    conf: &Conference,
    f: &Finding,
    tried: Tried,
    combined: bool,
) -> Result<Option<Tried>> {
    let Some(candidate) = tried.candidate.filter(|_| combined) else {
        return Ok(Some(tried));
    };
    if tried.verdict != PickResult::Merged {
        return Ok(Some(tried));
    }
    let label = format!("transfer-{}", f.researcher);
    Ok(
        match crate::engine::measure::guards::check_commit(conf, candidate, &label).await? {
            crate::engine::measure::guards::Verdict::Pass => Some(tried),
            crate::engine::measure::guards::Verdict::Fail(why) => Some(Tried {
                verdict: PickResult::Dropped,
                reason: format!("combined best: {why}"),
                ..tried
            }),
            crate::engine::measure::guards::Verdict::Interrupted => None,
        },
    )
}

/// Records `transfer.pick` (the commit point), then moves best when the pick stayed.
fn record_pick(
    conf: &Conference,
    st: &crate::engine::state::State,
    f: &Finding,
    tried: Tried,
    conflicted: Vec<String>,
) -> Result<()> {
    let Tried {
        verdict,
        candidate,
        result,
        reason,
    } = tried;
    let metric = result.as_ref().and_then(|r| r.metric);
    let note = candidate.map(|c| {
        Note::from(TransferNote {
            commit: c.into(),
            conference: conf.name.clone(),
            researcher: f.researcher.clone(),
            round: st.round,
            verdict: if verdict == PickResult::Merged {
                Verdict::Kept
            } else {
                Verdict::Reverted
            },
            transfer: verdict,
            metric,
            runs: result.as_ref().map(|r| r.runs.clone()),
            reason: reason.clone(),
        })
    });
    let pick_line = serde_json::to_string(&PickRecord {
        researcher: f.researcher.clone(),
        finding: f.commit.clone(),
        result: verdict.into(),
        reason: reason.clone(),
        conflicts: conflicted.clone(),
        metric,
    })?;
    let event = Event::TransferPick(events::TransferPick {
        round: st.round,
        researcher: f.researcher.clone(),
        finding: f.commit.clone(),
        commit: candidate.map(CommitId::from),
        result: verdict,
        metric,
        conflicts: conflicted,
        reason: reason.clone(),
        notes: note.into_iter().collect(),
    });
    conf.record(
        event,
        &format!("round {} {}: {verdict} ({reason})", st.round, f.researcher),
        vec![StateChange::AppendLine(files::picks(st.round), pick_line)],
    )?;
    crate::failpoint::hit("transfer.recorded");
    if verdict == PickResult::Merged {
        let new_best = conf.state().best.commit;
        conf.move_branch(&conf.refs.best(), &new_best, Some(&st.best.commit))?;
    }
    conf.ui.info(&format!(
        "knowledge transfer: {} {verdict} — {reason}",
        f.researcher
    ));
    Ok(())
}

/// Records `round.completed`: shared knowledge, the conference log row, the plateau counter.
fn complete_round(
    conf: &Conference,
    findings: &[Finding],
    began: std::time::Instant,
) -> Result<()> {
    let st = conf.state();
    let round = st.round;
    let picks = ledger::read_picks(conf, round);
    let knowledge = shared_knowledge(round, findings, &picks);
    let config_text = updated_config(conf, &st, findings, &knowledge)?;
    let transfer_md = crate::render::transfer::render(&st, &picks, &knowledge);
    let mut event = events::RoundCompleted {
        round,
        best_metric: st.best.metric,
        best_researcher: st.best.researcher.clone(),
        best_commit: st.best.commit.clone(),
        converged: false,
        shared_knowledge_added: knowledge,
        streaks: streaks_after(conf, &st, findings),
    };
    // `converged`: the stop rules will end the conference as converged after this round.
    let mut after = st.clone();
    Event::RoundCompleted(event.clone()).apply(&mut after);
    event.converged = crate::engine::stop::rules::check(conf, &after)
        .is_some_and(|s| s.status == FinalStatus::Converged);
    let results_tsv = crate::engine::record::tables::round_results_tsv(conf, round, findings)?;
    // The progress chart, refreshed every round (the seed overwrites it each round).
    let attempts = ledger::all_attempts(conf, &after)?;
    let plot = crate::engine::record::tables::plot(conf, &after, &attempts)?;
    let best_researcher = st.best.researcher.as_deref().unwrap_or("-");
    conf.record(
        Event::RoundCompleted(event),
        &format!(
            "round {round}: best {} ({best_researcher})",
            fmt(st.best.metric)
        ),
        vec![
            StateChange::Put(files::CONFIG.into(), config_text.into_bytes()),
            StateChange::Put(files::transfer(round), transfer_md.into_bytes()),
            StateChange::Put(files::results(round), results_tsv.into_bytes()),
            StateChange::Put(files::PLOT.into(), plot),
        ],
    )?;
    conf.ui.info(&format!(
        "round {round} completed: best {} (knowledge transfer took {})",
        fmt(conf.state().best.metric),
        crate::render::format::seconds_text(began.elapsed().as_secs_f64())
    ));
    Ok(())
}

/// One Shared Knowledge line per validated finding of the round, in transfer order, with what
/// became of it.
fn shared_knowledge(round: u32, findings: &[Finding], picks: &[PickRecord]) -> Vec<String> {
    transfer_order(findings)
        .into_iter()
        .map(|f| {
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
            format!(
                "Round {round}, Researcher {}: {} ({:+.6}, validated, {outcome})",
                f.researcher,
                f.description.lines().next().unwrap_or(""),
                f.gain_reproduced
            )
        })
        .collect()
}

/// The stored conference.md with the round's Shared Knowledge lines and its Conference Log row.
fn updated_config(
    conf: &Conference,
    st: &crate::engine::state::State,
    findings: &[Finding],
    knowledge: &[String],
) -> Result<String> {
    let mut config_text = conf
        .read_state_file(files::CONFIG)?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|| conf.config_text.clone());
    for line in knowledge {
        config_text = edit::append_shared_knowledge(&config_text, line);
    }
    let key = findings
        .iter()
        .find(|f| Some(&f.researcher) == st.best.researcher.as_ref() && st.best.round == st.round)
        .map(|f| f.description.lines().next().unwrap_or("").to_string())
        .unwrap_or_else(|| "no new validated finding".into());
    let row = [
        st.round.to_string(),
        st.best.researcher.clone().unwrap_or_else(|| "-".into()),
        fmt(st.best.metric),
        key,
        "completed".into(),
    ];
    Ok(edit::append_conference_log_row(&config_text, &row))
}

/// The stop rules' streaks once this round counts: progress beyond the noise, every
/// researcher stalled, every score high (qualitative mode: the reviewer's scores of the
/// re-measured round-bests, or the score a researcher without a finding kept).
fn streaks_after(
    conf: &Conference,
    st: &crate::engine::state::State,
    findings: &[Finding],
) -> round_rules::Streaks {
    let previous = st
        .round_bests
        .last()
        .copied()
        .flatten()
        .or(st.baseline_metric);
    let threshold = crate::engine::stop::rules::noise_threshold(conf, st);
    let progressed = round_rules::progressed(st.best.metric, previous, conf.direction(), threshold);
    let all_high = !st.researchers.is_empty()
        && st.researchers.iter().all(|(id, r)| {
            findings
                .iter()
                .find(|f| &f.researcher == id)
                .and_then(|f| f.reproduced)
                .or(r.best_metric)
                .is_some_and(|m| m >= round_rules::HIGH_SCORE)
        });
    let before = round_rules::Streaks {
        plateau_rounds: st.plateau_rounds,
        stalled_rounds: st.stalled_rounds,
        high_score_rounds: st.high_score_rounds,
    };
    let all_stalled = crate::engine::stop::rules::every_researcher_stalled(st);
    round_rules::streaks_after(before, progressed, all_stalled, all_high)
}
