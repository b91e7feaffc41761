//! Phases 2 and 3: the poster session (each researcher's round, from the data) and the peer
//! review, which re-runs every researcher's round-best from its commit in a clean checkout.
//!
//! Verdicts: validated (the gain reproduces beyond the noise tolerance), challenged (a smaller or
//! inconsistent gain, or a hold-out that disagrees), overturned (no gain, a crash, or a diff that
//! touches a frozen or forbidden path). Findings that are not validated never reach best.

use anyhow::Result;
use git2::Oid;

use crate::config::Direction;
use crate::engine::measure::evaluate;
use crate::engine::measure::review_grade;
use crate::engine::noise;
use crate::engine::record::ledger::round_attempts;
use crate::engine::state::files;
use crate::engine::Conference;
use crate::git::snapshot;
use crate::model::event::{self as events, Event, Note};
use crate::model::notes::ReviewNote;
use crate::model::{
    AttemptRecord, CommitId, Conflict, EvalStatus, Finding, ReviewVerdict, Verdict, Word,
};
use crate::protocol::pick::transfer_order;
use crate::render;
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
    start: &CommitId,
    candidates: &[(String, CommitId)],
) -> Result<Option<(Readings, Vec<Readings>)>> {
    let mut start_readings = Readings::default();
    let mut readings: Vec<Readings> = candidates.iter().map(|_| Readings::default()).collect();
    let command = conf.config.eval_command();
    for run in 0..review_grade::review_runs(conf) {
        let mut trees: Vec<(&str, &CommitId, &mut Readings)> =
            vec![("start", start, &mut start_readings)];
        for ((id, head), r) in candidates.iter().zip(readings.iter_mut()) {
            trees.push((id, head, r));
        }
        for (what, commit, r) in trees {
            if r.failed.is_some() {
                continue;
            }
            let result =
                review_grade::measure_runs(conf, "review", commit, command, what, 1, run).await?;
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
    let md = crate::engine::agent::prose::with_prose(
        conf,
        conf.config.agent.chair.as_ref(),
        "session chair",
        md,
    )
    .await;
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
) -> Result<std::collections::BTreeMap<CommitId, String>> {
    let repo = conf.open_repo()?;
    let stat = |commit: &CommitId| {
        let c = repo.find_commit(commit.oid()).ok()?;
        let parent = c.parent(0).ok()?;
        let (f, i, d) = snapshot::diff_stat(&repo, parent.tree_id(), c.tree_id()).ok()?;
        Some(format!("{f} files, +{i} −{d}"))
    };
    Ok(attempts
        .iter()
        .filter(|a| a.verdict == Verdict::Kept)
        .filter_map(|a| Some((a.commit.clone()?, stat(a.commit.as_ref()?)?)))
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
    let start_tree = repo.find_commit(round_start.oid())?.tree_id();
    let attempts = round_attempts(conf, st.round)?;
    let mut findings = Vec::new();
    for (id, r) in st
        .researchers
        .iter()
        .filter(|(_, r)| r.head != r.round_start && r.best_metric.is_some())
    {
        let head_tree = repo.find_commit(r.head.oid())?.tree_id();
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
            tolerance: crate::engine::stop::rules::noise_threshold(conf, &st),
            holdout: None,
            verdict: Word::unset(),
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
    let to_read: Vec<(String, CommitId)> = findings
        .iter()
        .filter(|f| f.verdict.is_unset())
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
                review_grade::measure(conf, "review", &round_start, holdout, "start-holdout")
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
    round_start: &CommitId,
    to_read: &[(String, CommitId)],
) -> Result<()> {
    let who: Vec<&str> = to_read.iter().map(|(id, _)| id.as_str()).collect();
    review_grade::phase_started(
        conf,
        round,
        "peer_review",
        &format!(
            "re-measuring {} finding(s) ({}) against the round start {}, {} interleaved run(s) each",
            who.len(),
            who.join(", "),
            crate::model::short_id(round_start),
            review_grade::review_runs(conf)
        ),
    )
}

/// The verdict of one finding from its readings and the round start's.
fn judge_finding(
    conf: &Conference,
    st: &crate::engine::state::State,
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
        min_delta: crate::engine::stop::rules::noise_threshold(conf, st),
        baseline_runs,
    });
    f.reproduced = Some(j.reproduced);
    f.gain_reproduced = j.gain;
    f.tolerance = j.needed;
    f.noise_sd = j.noise_sd;
    f.noisy = j.noisy;
    f.suggested_noise_runs = j.suggested_runs;
    f.verdict = Word::read(j.verdict);
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
    let h = review_grade::measure(
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
    let tree_of = |c: &CommitId| -> Result<Oid> { Ok(repo.find_commit(c.oid())?.tree_id()) };
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
    let attempts = round_attempts(conf, st.round).unwrap_or_default();
    let reviewer = conf.link().map(|link| link.machine.clone());
    let md = render::review::render(&render::review::ReviewPage {
        round: st.round,
        findings: &findings,
        order: &order,
        conflicts: &conflicts,
        start_runs,
        attempts: &attempts,
        direction: conf.direction().unwrap_or(Direction::Maximize),
        noise_runs: conf.config.noise_runs,
        qualitative: conf.config.mode == crate::config::Mode::Qualitative,
        reviewer: reviewer.as_deref(),
    });
    let md = crate::engine::agent::prose::with_prose(
        conf,
        conf.config.agent.reviewer.as_ref(),
        "reviewer",
        md,
    )
    .await;
    let count = |v: ReviewVerdict| findings.iter().filter(|f| f.verdict == v).count();
    let notes: Vec<Note> = findings
        .iter()
        .map(|f| {
            Note::from(ReviewNote {
                commit: f.commit.clone(),
                conference: conf.name.clone(),
                researcher: f.researcher.clone(),
                round: st.round,
                verdict: f.verdict.clone(),
                metric: f.reproduced,
                runs: f.runs.clone(),
                claimed: f.claimed,
                reason: f.reasoning.clone(),
            })
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
    let noisy = render::review::noisy_evaluation(st.round, &findings, conf.config.noise_runs);
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
