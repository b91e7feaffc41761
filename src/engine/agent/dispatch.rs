//! Where an agent runs: a shell command in the researcher's worktree (DESIGN.md §5), the
//! built-in tuner (`builtin:tune`) that edits numeric literals in-process, or the built-in HTTP
//! agent (`builtin:openai`, in `crate::researchers::openai`).

use std::time::Duration;

use anyhow::Result;
use git2::{Oid, Repository};

use crate::agents::call::{AgentCall, AgentOutcome, AgentRun};
use crate::agents::{self, preset};
use crate::engine::Conference;
use crate::exec::process::{self, Outcome, Spec};
use crate::git::snapshot;

use crate::researchers::tune;

/// Runs the agent once. Its output is read into the run's report (usage, errors, refused
/// edits) when it is a known CLI's, whether the command is a preset or not; builtin:openai
/// reports its tokens itself.
pub async fn run(conf: &Conference, call: AgentCall<'_>) -> Result<AgentRun> {
    // The prompt and the note live in the worktree: agent CLIs write only below their
    // working directory. The folder is ignored by git, so it is never part of an attempt.
    let files = agents::prepare(call.worktree, call.prompt)?;
    match conf.config.agent.kind() {
        agents::Kind::Tune => return run_tuner(conf, &call).await,
        agents::Kind::OpenAi => return run_openai(conf, &call).await,
        agents::Kind::UnknownBuiltin(_) | agents::Kind::Preset(..) | agents::Kind::Command => {}
    }
    let mut env = call.env.clone();
    env.extend(
        agents::RUN_ENV
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    env.extend(crate::git::traces::agent_env(call.researcher));
    for (key, path) in [
        ("CONFERENCE_PROMPT_FILE", &files.prompt),
        ("CONFERENCE_NOTE_FILE", &files.note),
        ("CONFERENCE_AGENT_DIR", &files.dir),
    ] {
        env.push((key.into(), path.to_string_lossy().into()));
    }
    if let Some(usd) =
        crate::engine::stop::budget::run_allowance_usd(conf, &conf.state(), call.researcher)
    {
        env.push((preset::MAX_BUDGET_ENV.into(), format!("{usd:.4}")));
    }
    let log = conf.log_path(&format!(
        "{}-r{}-i{}.agent",
        call.researcher, call.round, call.iteration
    ));
    let command = conf.config.agent_command();
    let finished = process::run(Spec {
        command: &command,
        cwd: call.worktree,
        env,
        timeout: call.timeout,
        stdout: log.with_extension("out"),
        stderr: log.with_extension("err"),
        stdin: None,
    })
    .await?;
    let report = agents::usage::read(
        conf.config.agent.preset().map(|(preset, _)| preset),
        &process::read_output(&log.with_extension("out")),
        &process::read_output(&log.with_extension("err")),
    );
    let with_problem = |what: String| match &report.problem {
        Some(p) => format!("{what}: {p}"),
        None => what,
    };
    let outcome = match finished.outcome {
        Outcome::Exited(0) => {
            // No note: the CLI's final message (its first line) describes the attempt.
            let note = agents::take_note(&files).or_else(|| {
                let message = report.message.as_deref()?;
                let line = message.lines().find(|l| !l.trim().is_empty())?;
                Some(line.trim().to_string())
            });
            AgentOutcome::Done(note)
        }
        Outcome::TimedOut => AgentOutcome::TimedOut,
        Outcome::Cancelled => AgentOutcome::Interrupted,
        Outcome::Exited(127) if call.attempts == 0 => {
            let stderr = process::read_output(&log.with_extension("err"));
            if let Some(e) = process::not_found_at_run("the agent command", &command, 127, &stderr)
            {
                return Err(e);
            }
            AgentOutcome::Crashed(with_problem("agent exit status 127".into()))
        }
        other => AgentOutcome::Crashed(with_problem(format!("agent {}", other.describe()))),
    };
    Ok(AgentRun {
        outcome,
        report,
        batch: None,
    })
}

/// Files the tuner may edit: tracked text files the guard allows.
fn tunable_files(
    guard: &crate::engine::paths::Guard,
    repo: &Repository,
    tree: Oid,
) -> Result<Vec<String>> {
    Ok(snapshot::list_files(repo, tree)?
        .into_iter()
        .filter(|p| guard.may_edit(p))
        .collect())
}

/// Before a conference with `builtin:tune` starts: the files the researchers may change at the
/// baseline must hold something to tune, and its markers must be usable. The error says which
/// paths were searched and how to mark a literal.
pub fn check_tunable(config: &crate::config::Config, repo: &Repository, base: Oid) -> Result<()> {
    if config.agent.kind() != agents::Kind::Tune {
        return Ok(());
    }
    let tree = repo.find_commit(base)?.tree()?;
    let exists = |p: &str| tree.get_path(std::path::Path::new(p)).is_ok();
    let guard = crate::engine::paths::Guard::new(config, &exists);
    let tree = tree.id();
    let paths = tunable_files(&guard, repo, tree)?;
    let files = snapshot::read_files(repo, tree, &paths)?;
    let problems = tune::problems(&files);
    if !problems.is_empty() {
        return Err(crate::error::usage(format!(
            "builtin:tune cannot use these markers:\n  {}",
            problems.join("\n  ")
        )));
    }
    if !tune::find_all(&files).is_empty() {
        return Ok(());
    }
    let searched = if paths.is_empty() {
        "no committed file is allowed (Search Space → Allowed changes, minus frozen and forbidden \
         paths)"
            .to_string()
    } else {
        let mut shown: Vec<&str> = paths.iter().map(String::as_str).take(8).collect();
        if paths.len() > 8 {
            shown.push("…");
        }
        format!("searched {}", shown.join(", "))
    };
    let empty = tune::empty_markers(&files);
    let hint = if empty.is_empty() {
        String::new()
    } else {
        format!(
            "\n  these `tune` markers have no number before them on their line: {}",
            empty.join(", ")
        )
    };
    Err(crate::error::usage(format!(
        "builtin:tune found no number to tune ({searched}).{hint}\n  Mark a literal with a \
         comment on its line, e.g. `lr = 3e-4  # tune: [1e-5, 1e-2]` (`// tune` in C-like files), \
         or allow the files that hold your parameters in Search Space → Allowed changes. \
         Without markers only a number that is the whole value of an assignment counts \
         (`lr = 0.01`, `lr: 0.01`, `--lr 0.01`)."
    )))
}

/// Longest pause between two looks at the others' progress while waiting for them.
const LOCKSTEP_POLL: Duration = Duration::from_millis(50);

async fn run_tuner(conf: &Conference, call: &AgentCall<'_>) -> Result<AgentRun> {
    let ids = conf.config.researcher_ids();
    let index = ids.iter().position(|i| i == call.researcher).unwrap_or(0);
    let assigned = conf.config.strategy == crate::config::Strategy::Assigned;
    if !assigned && ids.len() > 1 && !wait_for_others(conf, call).await {
        return Ok(AgentOutcome::Interrupted.into());
    }
    let repo = conf.open_repo()?;
    let paths = tunable_files(&conf.guard, &repo, call.head_tree)?;
    let files = snapshot::read_files(&repo, call.head_tree, &paths)?;
    let (history, streaks) =
        crate::engine::agent::tune_history::tuner_history(conf, &repo, call, &ids, &paths)?;
    let st = conf.state();
    let minimize = conf
        .config
        .metric
        .as_ref()
        .map(|m| m.direction == crate::config::Direction::Minimize)
        .unwrap_or(false);
    let (total, budget_left) = attempt_budget(conf, &st, call.researcher);
    // A batch of q counts q evaluations: the search plans in evaluations.
    let q = conf.config.agent.sweep.unwrap_or(1).max(1) as u64;
    let advocate = conf
        .config
        .devils_advocate_id()
        .and_then(|id| ids.iter().position(|i| *i == id));
    // With best-first, a head the conference chose away from the researcher's best (it left
    // its leader) is the region the tuner refines; from the best it chooses its region as it
    // does without a tree (visiting its promising regions: kept to the leader's region, a lone
    // tuner on tune-2d ended in the other basin in 7 seeds of 20, BENCHMARKS.md).
    let chosen_head = conf.config.branching == crate::model::tree::Branching::BestFirst
        && repo
            .find_commit(st.researcher(call.researcher).head.oid())
            .map_or(true, |c| c.tree_id() != call.head_tree);
    let mut avoid = Vec::new();
    // A point some researcher measured (or is measuring) that this history does not hold is
    // found in the evaluation cache: avoid it and ask again.
    for _ in 0..8 {
        let request = tune::Request {
            files: &files,
            history: &history,
            avoid: &avoid,
            minimize,
            seed: conf.config.agent.seed,
            researcher: index,
            researchers: ids.len(),
            assigned,
            advocate,
            streaks: &streaks,
            budget_left: Some(budget_left * q),
            budget_total: Some(total * q),
            round_progress: Some((
                call.iteration.saturating_sub(1) as u64,
                crate::engine::stop::rules::round_allotment(conf, &st, call.researcher) as u64,
            )),
            chosen_head,
        };
        let proposals = tune::propose_batch(&request, q as usize);
        if proposals.is_empty() {
            return Ok(AgentOutcome::Exhausted.into());
        }
        let mut measured = Vec::new();
        for p in &proposals {
            if already_evaluated(conf, &repo, call.head_tree, p)? {
                measured.push(p.params.clone());
            }
        }
        if !measured.is_empty() {
            avoid.extend(measured);
            continue;
        }
        for (path, content) in &proposals[0].files {
            std::fs::write(call.worktree.join(path), content)?;
        }
        if proposals.len() == 1 {
            return Ok(AgentOutcome::Done(Some(proposals[0].description.clone())).into());
        }
        let description = format!(
            "tune: batch of {} points from {} measured",
            proposals.len(),
            history.len()
        );
        return Ok(AgentRun {
            outcome: AgentOutcome::Done(Some(description)),
            report: Default::default(),
            batch: Some(crate::engine::agent::tune_batch::request(
                &files, &proposals,
            )),
        });
    }
    Ok(AgentOutcome::Exhausted.into())
}

/// The conference's attempt budget and what is left of researcher `id`'s share of it, from the
/// configuration and the researcher's own count only, so every researcher sees the same numbers.
/// It only steers how bold the search is near the end: `stop::round_allotment` enforces the real
/// cap (which, with an uneven split, may give this researcher one attempt more or fewer).
fn attempt_budget(conf: &Conference, st: &crate::engine::state::State, id: &str) -> (u64, u64) {
    let count = conf.config.count.max(1) as u64;
    let mut total = conf.config.max_rounds as u64 * count * conf.config.iterations_per_round as u64;
    if let Some(max) = conf.config.max_total_iterations {
        total = total.min(max as u64);
    }
    (
        total,
        (total / count).saturating_sub(st.researcher(id).attempts),
    )
}

/// Lock-step: waits until every other researcher this machine runs has recorded the previous
/// iteration of this round (or finished the round), so that all researchers propose from the
/// same history — the conference stays deterministic for a seed, and each proposal learns from
/// every result before it. Researchers another machine runs are not waited for: their results
/// arrive only between this machine's steps (`run::shared`), never while its researchers
/// iterate, so a wait for them would last the whole limit each iteration. After about two
/// evaluation timeouts it goes on without them (a researcher that stopped for good must not
/// hold the others). False when the run is interrupted meanwhile.
async fn wait_for_others(conf: &Conference, call: &AgentCall<'_>) -> bool {
    let needed = call.iteration.saturating_sub(1);
    let started = std::time::Instant::now();
    // The others are at most one iteration ahead: an evaluation (the tuner itself is instant).
    let eval = &conf.config.evaluation;
    let one_iteration = eval.timeout * eval.repeats.max(1) * 2 + Duration::from_secs(60);
    let limit = call.timeout.unwrap_or_default().max(one_iteration);
    let mut pause = Duration::from_millis(1);
    loop {
        if process::cancelled() {
            return false;
        }
        let st = conf.state();
        let ready = st.round != call.round
            || st.researchers.iter().all(|(id, r)| {
                id == call.researcher
                    || r.round_iterations >= needed
                    || r.round_finished.is_some()
                    || !conf.runs_here(id)
            });
        if ready || started.elapsed() >= limit {
            return true;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LOCKSTEP_POLL);
    }
}

/// Whether the tree the proposal makes has a result in the evaluation cache (or is being
/// measured in this run).
fn already_evaluated(
    conf: &Conference,
    repo: &Repository,
    head_tree: Oid,
    proposal: &tune::Proposal,
) -> Result<bool> {
    let head = repo.find_tree(head_tree)?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    for (path, content) in &proposal.files {
        let mode = head
            .get_path(std::path::Path::new(path))
            .map(|e| e.filemode())
            .unwrap_or(0o100644);
        let blob = repo.blob(content.as_bytes())?;
        let mode = if mode == 0o100755 {
            git2::FileMode::BlobExecutable
        } else {
            git2::FileMode::Blob
        };
        update.upsert(path, blob, mode);
    }
    let tree = update.create_updated(repo, &head)?;
    let key =
        crate::engine::state::files::eval_cache(&conf.state().eval_settings, &tree.to_string());
    if conf.evaluations.lock().unwrap().contains_key(&key) {
        return Ok(true);
    }
    Ok(conf.read_state_file(&key)?.is_some())
}

/// `builtin:openai`, given what it needs of the conference.
async fn run_openai(conf: &Conference, call: &AgentCall<'_>) -> Result<AgentRun> {
    let name = format!(
        "{}-r{}-i{}.agent",
        call.researcher, call.round, call.iteration
    );
    let context = crate::researchers::openai::Context {
        agent: &conf.config.agent,
        guard: &conf.guard,
        repo_dir: &conf.repo_dir,
        log: conf.log_path(&name).with_extension("out"),
    };
    crate::researchers::openai::run(&context, call).await
}
