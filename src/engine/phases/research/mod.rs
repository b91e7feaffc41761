//! Phase 1: every researcher runs its iterations in its own worktree, all at once.
//!
//! One iteration: write the prompt, run the agent, take what changed as a snapshot, reject it if
//! it touches a frozen or forbidden path, evaluate it (or reuse the cached result for that tree),
//! keep it only if strictly better than the researcher's best, record the event (the commit
//! point), then write the note, move the branch and put the worktree back to the kept snapshot.
//!
//! The folder: the phase and the researchers' loops here, with the types an iteration passes
//! along; `session` (one researcher's round), `agent_run`, `judge`, `record` (the commit point)
//! and `parked` (a worktree between rounds).

mod agent_run;
mod branching;
mod judge;
pub mod parked;
mod record;
mod session;
mod sweep;
mod swept;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use git2::{Oid, Repository};

use crate::agents::call::AgentOutcome;
use crate::engine::measure::evaluate::EvalResult;
use crate::engine::record::attempt::Attempt;
use crate::engine::Conference;
use crate::exec::process;
use crate::git::snapshot;
use crate::git::watch::{Changes, Watch};
use crate::model::event::{self as events, Event};
use crate::model::Verdict;
use crate::protocol::keep;

/// Agent crashes in a row after which a researcher is marked failed for the round.
const CRASHES_TO_FAIL: u32 = 3;

/// Runs phase 1 of the current round for every researcher that has not finished it.
pub async fn run_phase(conf: &std::sync::Arc<Conference>) -> Result<()> {
    let st = conf.state();
    let pending: Vec<String> = st
        .researchers
        .iter()
        .filter(|(id, r)| r.round_finished.is_none() && conf.runs_here(id))
        .map(|(id, _)| id.clone())
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for id in pending {
        let conf = conf.clone();
        tasks.spawn(async move {
            let result = researcher_loop(&conf, &id).await;
            (id, result)
        });
    }
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let (id, result) = joined?;
        if let Err(e) = result {
            conf.ui.info(&format!("researcher {id}: {e:#}"));
            if first_error.is_none() {
                first_error = Some(e);
            }
        }
    }
    conf.ui.clear_researchers();
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn researcher_label(id: &str) -> String {
    format!("researcher-{id}")
}

async fn researcher_loop(conf: &Conference, id: &str) -> Result<()> {
    let Some(mut session) = Session::open(conf, id).await? else {
        return Ok(());
    };
    loop {
        if process::cancelled()
            || crate::protocol::talk::holds_researchers(conf.config.loop_mode, &conf.state())
        {
            return Ok(());
        }
        let lost = || {
            conf.ui.info(&format!(
                "researcher {id}: another machine took it over (this one was silent for longer than its lease); stopped here"
            ));
        };
        if !conf.runs_here(id) {
            lost();
            return Ok(());
        }
        let next = match session.iterate().await {
            Ok(next) => next,
            // Lost meanwhile: the publisher dropped its unpublished events and moved its branch
            // back to what the remote holds, under this iteration.
            Err(_) if !conf.runs_here(id) => {
                lost();
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        match next {
            Next::Continue => session.reopen_now_and_then(conf)?,
            Next::Finish(why) => return session.finish(&why),
            Next::Stop => return Ok(()),
        }
    }
}

/// One researcher's phase 1 of a round: its worktree, opened once for the whole phase (its
/// index stays in memory between iterations instead of being read and checksummed from disk at
/// every step), the watch that sees every change there, and the counters the loop keeps.
struct Session<'a> {
    conf: &'a Conference,
    id: &'a str,
    repo: Repository,
    wt_path: PathBuf,
    wt: Repository,
    watch: Option<Watch>,
    started: Instant,
    /// The researcher's time for the round (`None`: no limit).
    limit: Option<Duration>,
    /// Agent runs in a row that crashed or timed out.
    agent_crashes: u32,
    /// Iterations since `repo` and `wt` were opened (see [`SESSION_REOPEN_EVERY`]).
    iterations_since_open: u32,
    /// The commit the worktree holds between iterations: the researcher's head, or with
    /// branching on the node the next attempt starts from (`branching`).
    at: crate::model::CommitId,
    /// The last attempt's sweep, as its progress line says it (`sweep of 4 values of LR: …`).
    sweep_line: Option<String>,
}

/// What an iteration leaves the loop to do.
enum Next {
    Continue,
    /// The researcher's round ends, for this reason (recorded as `researcher.finished`).
    Finish(String),
    /// Ctrl-C: stop without recording anything.
    Stop,
}

/// What the agent run of an iteration left: the usage and report of its CLI, how it ended,
/// what it broke in git (already repaired) as the attempt's reason, and the shared paths as
/// they were before it ran.
struct AgentRan {
    usage: Option<crate::agents::Usage>,
    /// Seconds the agent ran.
    seconds: f64,
    outcome: AgentOutcome,
    report: crate::agents::AgentReport,
    damage: Option<String>,
    shared_before: crate::engine::agent::workspace::SharedState,
    /// What it changed in the user's working tree (reported, not undone), for the reason.
    remark: Option<String>,
    /// What another researcher's agent wrote into this worktree before it ran (the paths, and
    /// the reason that rejects the attempt).
    foreign: Option<(Changes, String)>,
    /// `builtin:tune`'s batch (`- sweep: q`): the points measured at once, the first of which
    /// the worktree holds.
    batch: Option<crate::model::sweep::BatchRequest>,
}

/// The attempt an iteration made, once captured from the worktree.
struct Captured {
    snap: snapshot::Snapshot,
    changed: Vec<String>,
    agent_changes: Changes,
    /// A write through a shared link, or what the agent broke in git: the attempt is rejected.
    shared_violation: Option<String>,
}

/// What decides an attempt's verdict besides its measurement.
struct Judged<'a, 'b> {
    attempt: &'b Attempt<'a>,
    head_tree: Oid,
    /// The agent failed (crashed, timed out, its edits were not applied): verdict and reason.
    agent_failure: Option<(Verdict, String)>,
    /// Nothing changed, and why.
    unchanged: Option<String>,
    report: &'b crate::agents::AgentReport,
    /// A `SWEEP:` line checked against the attempt's tree (sweeps on).
    sweep: Option<sweep::Plan>,
}

/// What an attempt measured: the result, and whether it is a property of the tree (an
/// evaluation that ran to its end, or crashed or timed out by itself). Agent failures,
/// rejections and evaluations cut short by the researcher's time limit say nothing about the
/// tree, so the next attempt that produces it is evaluated.
#[derive(Clone, Copy)]
struct Measured<'a> {
    result: &'a EvalResult,
    of_the_tree: bool,
}

impl<'a> Measured<'a> {
    fn not(result: &'a EvalResult) -> Self {
        Measured {
            result,
            of_the_tree: false,
        }
    }
}

/// Records `researcher.stuck` when the attempt just recorded made the researcher enter a new
/// stuck level.
fn record_stuck(conf: &Conference, id: &str, round: u32, verdict: Verdict) -> Result<()> {
    let r = conf.state().researcher(id).clone();
    if verdict == Verdict::Kept || !keep::enters_a_stuck_level(r.consecutive_fails) {
        return Ok(());
    }
    let level = r.stuck_level;
    conf.record(
        Event::Stuck(events::Stuck {
            researcher: id.to_string(),
            round,
            stuck_level: level,
            consecutive_non_improving: r.consecutive_fails,
        }),
        &format!("{id} at level {level}"),
        vec![],
    )
}

/// Records that a researcher is done with phase 1 of this round; the last one moves the
/// conference to the poster session.
fn finish(conf: &Conference, id: &str, why: &str) -> Result<()> {
    let st = conf.state();
    conf.record(
        Event::Finished(events::Finished {
            researcher: id.to_string(),
            round: st.round,
            reason: why.to_string(),
            iterations: st.researcher(id).round_iterations,
        }),
        &format!("{id} finished round {} ({why})", st.round),
        vec![],
    )?;
    conf.ui
        .researcher(id, &format!("finished round {} ({why})", st.round));
    Ok(())
}
