//! Where an agent runs: a shell command in the researcher's worktree (DESIGN.md §5), or the
//! built-in tuner (`builtin:tune`) that edits numeric literals in-process.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use git2::{Oid, Repository};

use super::Conference;
use crate::exec::preflight;
use crate::exec::process::{self, Outcome, Spec};
use crate::git::snapshot;
use crate::tune;

pub const BUILTIN_TUNE: &str = "builtin:tune";

/// How the creative step ended.
pub enum AgentOutcome {
    /// It edited (or not) and exited 0; the description it wrote, if any.
    Done(Option<String>),
    /// Non-zero exit or signal.
    Crashed(String),
    TimedOut,
    Interrupted,
    /// The built-in tuner has nothing left to try.
    Exhausted,
}

pub struct AgentCall<'a> {
    pub researcher: &'a str,
    pub round: u32,
    pub iteration: u32,
    pub worktree: &'a Path,
    pub prompt: &'a str,
    pub timeout: Option<Duration>,
    pub env: Vec<(String, String)>,
    /// Tuner only: the researcher's kept tree and its history.
    pub head_tree: Oid,
    pub attempts: u64,
}

pub async fn run(conf: &Conference, call: AgentCall<'_>) -> Result<AgentOutcome> {
    let dir = conf.run_dir.join("agents").join(call.researcher);
    std::fs::create_dir_all(&dir)?;
    let prompt_file = dir.join("prompt.md");
    let note_file = dir.join("note.txt");
    std::fs::write(&prompt_file, call.prompt)?;
    let _ = std::fs::remove_file(&note_file);
    if conf.config.agent.command.trim() == BUILTIN_TUNE {
        return run_tuner(conf, &call);
    }
    let mut env = call.env.clone();
    env.push((
        "CONFERENCE_PROMPT_FILE".into(),
        prompt_file.to_string_lossy().into(),
    ));
    env.push((
        "CONFERENCE_NOTE_FILE".into(),
        note_file.to_string_lossy().into(),
    ));
    let log = conf.log_path(&format!(
        "{}-r{}-i{}.agent",
        call.researcher, call.round, call.iteration
    ));
    let finished = process::run(Spec {
        command: &conf.config.agent.command,
        cwd: call.worktree,
        env,
        timeout: call.timeout,
        stdout: log.with_extension("out"),
        stderr: log.with_extension("err"),
        stdin: None,
    })
    .await?;
    Ok(match finished.outcome {
        Outcome::Exited(0) => {
            let note = std::fs::read_to_string(&note_file)
                .ok()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty());
            AgentOutcome::Done(note)
        }
        Outcome::TimedOut => AgentOutcome::TimedOut,
        Outcome::Cancelled => AgentOutcome::Interrupted,
        Outcome::Exited(127) if call.attempts == 0 => {
            let stderr = process::read_output(&log.with_extension("err"));
            let command = &conf.config.agent.command;
            if let Some(e) = preflight::not_found_at_run("the agent command", command, 127, &stderr)
            {
                return Err(e);
            }
            AgentOutcome::Crashed("agent exit status 127".into())
        }
        other => AgentOutcome::Crashed(format!("agent {}", other.describe())),
    })
}

/// Files the tuner may edit: tracked text files the guard allows.
fn tunable_files(conf: &Conference, repo: &Repository, tree: Oid) -> Result<Vec<String>> {
    Ok(snapshot::list_files(repo, tree)?
        .into_iter()
        .filter(|p| conf.guard.may_edit(p))
        .collect())
}

fn run_tuner(conf: &Conference, call: &AgentCall) -> Result<AgentOutcome> {
    let repo = conf.open_repo()?;
    let paths = tunable_files(conf, &repo, call.head_tree)?;
    let files = snapshot::read_files(&repo, call.head_tree, &paths)?;
    let history = tuner_history(conf, &repo, call.researcher, &paths)?;
    let st = conf.state();
    let ids = conf.config.researcher_ids();
    let index = ids.iter().position(|i| i == call.researcher).unwrap_or(0);
    let minimize = conf
        .config
        .metric
        .as_ref()
        .map(|m| m.direction == crate::config::Direction::Minimize)
        .unwrap_or(false);
    let budget_left = conf.config.max_total_iterations.map(|max| {
        let left = (max as u64).saturating_sub(st.total_iterations);
        left / conf.config.count.max(1) as u64
    });
    let role = if conf.config.devils_advocate_id().as_deref() == Some(call.researcher) {
        tune::Role::DevilsAdvocate
    } else {
        tune::Role::Normal
    };
    let request = tune::Request {
        files: &files,
        history: &history,
        minimize,
        seed: conf.config.agent.seed,
        researcher: index,
        researchers: conf.config.count,
        assigned: conf.config.strategy == crate::config::Strategy::Assigned,
        role,
        attempt: call.attempts,
        budget_left,
    };
    let Some(proposal) = tune::propose(&request) else {
        return Ok(AgentOutcome::Exhausted);
    };
    for (path, content) in &proposal.files {
        std::fs::write(call.worktree.join(path), content)?;
    }
    Ok(AgentOutcome::Done(Some(proposal.description)))
}

/// Every point this researcher has seen evaluated, oldest first: its recorded attempts and the
/// snapshots it started rounds from, read back from git.
fn tuner_history(
    conf: &Conference,
    repo: &Repository,
    researcher: &str,
    paths: &[String],
) -> Result<Vec<tune::Trial>> {
    let st = conf.state();
    let r = st.researcher(researcher);
    let mut trials = Vec::new();
    let mut start_added = false;
    let round_start = |trials: &mut Vec<tune::Trial>| -> Result<()> {
        if let Ok(c) = Oid::from_str(&r.round_start).and_then(|o| repo.find_commit(o)) {
            let files = snapshot::read_files(repo, c.tree_id(), paths)?;
            trials.push(tune::Trial {
                params: tune::extract_params(&files),
                metric: r.round_start_metric,
            });
        }
        Ok(())
    };
    for a in super::research::recent_attempts(conf, researcher)? {
        if a.round == st.round && !start_added {
            round_start(&mut trials)?;
            start_added = true;
        }
        let Ok(commit) = Oid::from_str(&a.commit) else {
            continue;
        };
        let Ok(c) = repo.find_commit(commit) else {
            continue;
        };
        if a.verdict == "rejected" || a.verdict == "no_change" || a.verdict == "interrupted" {
            continue;
        }
        let files = snapshot::read_files(repo, c.tree_id(), paths)?;
        trials.push(tune::Trial {
            params: tune::extract_params(&files),
            metric: a.metric,
        });
    }
    if !start_added {
        round_start(&mut trials)?;
    }
    Ok(trials)
}
