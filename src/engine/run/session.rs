//! `start`, `resume` and `join` as the engine runs them: each takes the conference's run lock,
//! passes the trust gate, brings branches and worktrees in line with the event log (see
//! `recovery`), links this machine to a shared remote when there is one, and drives the
//! conference on a runtime until it ends, pauses or is interrupted. What they say along the way
//! is the CLI's ([`Narrator`]); what they end with is an [`Outcome`] the CLI prints.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use crate::config::Config;
use crate::engine::run::through_gc::{
    again_through_gc, changed_under_it, recover_lost_refs, reopened, run_through_gc,
};
use crate::engine::run::{driver, shared};
use crate::engine::state::{Phase, State};
use crate::engine::{Conference, RunOutcome};
use crate::error::usage;
use crate::git::worktree;
use crate::lock::RunLock;
use crate::model::event::{self as events, Event};
use crate::remote::link::{Link, Wanted};
use crate::remote::valid_machine_name;
use crate::store::refs;
use crate::ui::Ui;

/// What `start` runs: a conference whose config is read and checked, from a baseline that
/// passed the pre-flight checks.
pub struct StartOptions {
    pub name: String,
    pub config: Config,
    pub config_text: String,
    pub base: Oid,
    /// The shared remote to publish it to and run it through (`start --remote`).
    pub remote: Option<String>,
    pub machine: MachineOptions,
}

/// What `resume` continues, and what it changes first (see `cli::run::ResumeArgs`).
pub struct ResumeOptions {
    pub name: String,
    pub force: bool,
    pub config: Option<PathBuf>,
    pub base: Option<String>,
    pub continue_stopped: bool,
}

/// What `join` takes part in (a conference this clone has fetched).
pub struct JoinOptions {
    pub name: String,
    pub remote: String,
    pub machine: MachineOptions,
}

/// What this machine runs of a conference on several machines (see `cli::join::MachineArgs`).
#[derive(Debug, Default, Clone)]
pub struct MachineOptions {
    pub researchers: Option<Vec<String>>,
    pub slots: Option<usize>,
    pub machine: Option<String>,
}

/// What a run tells the user along the way, in the CLI's words.
pub trait Narrator {
    /// The conference exists (before its worktrees are made).
    fn started(&self, conf: &Conference, base: Oid);
    /// A resume's summary of the recorded state and where it goes on.
    fn resuming(&self, st: &State, point: &str);
    /// The rules in force after a resume applied new settings.
    fn rules(&self, conf: &Conference);
}

/// How `resume` or `join` ended.
pub enum Outcome {
    /// The conference was complete already: nothing ran (the state it ended in).
    AlreadyComplete(Box<State>),
    Ended(Ended),
}

/// A run that ended: how, and what the CLI says of it.
pub struct Ended {
    pub outcome: RunOutcome,
    pub name: String,
    /// The state the run ended in.
    pub state: Box<State>,
    pub metric_name: String,
    pub best_branch: String,
    /// The command that continues it (`resume`, or `join` on several machines).
    pub continue_with: String,
}

/// `start`: creates the conference, makes its worktrees and runs it. A start that git could not
/// check out, or could not publish to its remote, keeps nothing.
pub fn start(repo: &Repository, opts: StartOptions, ui: &Ui, say: &dyn Narrator) -> Result<Ended> {
    let StartOptions {
        name,
        config: cfg,
        config_text: text,
        base,
        remote,
        machine,
    } = opts;
    let run_dir = worktree::run_dir(repo, &name);
    let lock = take_over(&run_dir, &name)?;
    // A start killed while it wrote its first event leaves a lock on the events ref.
    crate::engine::record::recovery::clear_stale_ref_locks(repo.commondir(), &name);
    // The user wrote these commands: this clone trusts them (see `crate::trust`).
    crate::trust::approve(repo, &name, &cfg)?;
    // A `git gc --prune=now` may delete the first event's objects: written again, as the run's
    // steps are (see `through_gc`).
    let created = again_through_gc(&name, ui, || {
        Conference::create(
            repo.path(),
            &name,
            cfg.clone(),
            text.clone(),
            base,
            ui.clone(),
        )
    });
    let conf = match created {
        Ok(conf) => conf,
        Err(e) => {
            crate::trust::forget(repo, &name);
            return Err(e);
        }
    };
    say.started(&conf, base);
    let mut created = Some(conf);
    let reconciled = again_through_gc(&name, ui, || match created.take() {
        Some(conf) => crate::engine::record::recovery::reconcile(&conf, false).map(|_| conf),
        None => reopened(repo, &name, ui, &run_dir, None),
    });
    let conf = match reconciled {
        Ok(conf) => conf,
        // The repository kept changing under it for a minute: the conference stays, to be resumed.
        Err(e) if changed_under_it(&e).is_some() => return Err(e),
        Err(e) => {
            // Git could not make the worktrees (a failing post-checkout hook, a filter program
            // that is missing): nothing ran yet, so nothing of the conference is kept.
            crate::engine::commands::clean::undo_start(repo, &name, lock)?;
            return Err(usage(format!(
                "git could not check out the baseline for the researchers: {e:#}\nFix that (a \
                 failing post-checkout hook, a missing filter such as git-lfs), then start again; \
                 nothing of `{name}` was kept."
            )));
        }
    };
    if let Some(remote) = &remote {
        if let Err(e) = share(repo, &conf, remote, &machine) {
            drop(conf);
            crate::engine::commands::clean::undo_start(repo, &name, lock)?;
            return Err(e);
        }
    }
    let result = run_through_gc(repo, conf, run);
    drop(lock);
    result
}

/// `resume`: puts back what git lost, passes the trust gate, applies an edited conference.md
/// or a new baseline, records `conference.resumed` and runs the conference from there.
pub fn resume(
    repo: &Repository,
    opts: ResumeOptions,
    ui: &Ui,
    say: &dyn Narrator,
) -> Result<Outcome> {
    let name = opts.name.clone();
    let run_dir = worktree::run_dir(repo, &name);
    let _lock = take_over(&run_dir, &name)?;
    recover_lost_refs(repo, &name, ui)?;
    let mut conf = Conference::open(repo.path(), &name, ui.clone()).context("cannot resume")?;
    let st = conf.state();
    if st.runs_on_several_machines() {
        return Err(usage(format!(
            "conference `{name}` runs on several machines ({}): take part again with `git conference join <remote> {name}` (the remote it was started with), which continues from what every machine published",
            st.machines.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let new_base = match &opts.base {
        Some(rev) => Some(rebase_target(repo, &conf, rev)?),
        None => None,
    };
    let base = new_base.unwrap_or(st.baseline_commit.oid());
    let plan = crate::engine::run::settings::plan(repo, &conf, opts.config.as_deref(), base)?;
    let continuing = st.phase == Phase::Done && (opts.continue_stopped || plan.is_some());
    let idle = crate::engine::run::reconfigure::stopped_for(&st);
    if st.phase == Phase::Done && !continuing {
        store_missed_retrospective(repo, &conf)?;
        return Ok(Outcome::AlreadyComplete(Box::new(st)));
    }
    gate(repo, &name, &conf.config, plan.as_ref().map(|p| &p.config))?;
    let point = if continuing {
        format!(
            "Stopped ({}); continues with Round {}",
            st.final_status.as_deref().unwrap_or("done"),
            st.round + 1
        )
    } else {
        recovery_point(&conf)
    };
    say.resuming(&st, &point);
    let reverted = crate::engine::record::recovery::reconcile(&conf, opts.force)?;
    apply_changes(&conf, plan.as_ref(), new_base)?;
    if plan.is_some() || new_base.is_some() {
        drop(conf);
        conf = Conference::open(repo.path(), &name, ui.clone())?;
    }
    if continuing {
        if let Some(stop) = crate::engine::run::reconfigure::would_stop(&conf) {
            return Err(usage(format!(
                "conference `{name}` would stop again at once: {} ({}). Raise that budget in conference.md and run `git conference resume {name}` again.",
                stop.why, stop.token
            )));
        }
        crate::engine::run::reconfigure::continue_stopped(&conf, idle)?;
        crate::errln!(
            "Continuing `{name}` after round {} (it had stopped: {}).",
            st.round,
            st.stop_reason.as_deref().unwrap_or("stopped")
        );
    }
    if plan.is_some() {
        say.rules(&conf);
    }
    let point = recovery_point(&conf);
    conf.record(
        Event::Resumed(events::Resumed {
            recovery_point: point.clone(),
            round: st.round,
            reverted_researchers: reverted,
        }),
        &point,
        vec![],
    )?;
    ui.info(&format!("resuming `{name}` at: {point}"));
    run_through_gc(repo, conf, run).map(Outcome::Ended)
}

/// `join`: takes part in a conference on several machines this clone has fetched, through its
/// shared remote, from what every machine published.
pub fn join(repo: &Repository, opts: JoinOptions, ui: &Ui) -> Result<Outcome> {
    let JoinOptions {
        name,
        remote,
        machine,
    } = opts;
    let run_dir = worktree::run_dir(repo, &name);
    let _lock = take_over(&run_dir, &name)?;
    recover_lost_refs(repo, &name, ui)?;
    let conf = Conference::open(repo.path(), &name, ui.clone()).context("cannot join")?;
    if crate::engine::run::settings::local_commands_differ(repo, &conf) {
        ui.warn(&format!(
            "note: your conference.md names other commands; `{name}` runs on several machines, where `join` runs the stored ones (`git conference trust {name}` shows them)"
        ));
    }
    gate(repo, &name, &conf.config, None)?;
    let link = link(repo, &conf, &remote, &machine)?;
    link.check_push_access(repo).map_err(|e| {
        usage(format!(
            "{e:#}\nA machine takes part by publishing its events there: give this clone push access to {remote} (or join through a remote it can push to). `git conference fetch {remote} --name {name}` and `status` still read the conference."
        ))
    })?;
    // Before anything is published or taken: a copy of a running clone holds that clone's
    // unpublished events, which only the original may publish.
    if let Some(slot) = link.running_elsewhere(repo)? {
        return Err(usage(format!(
            "machine `{}` already takes part in `{name}` from another clone (its lease of {slot} on {} was renewed just now): two clones under one name would take each other's leases. Give this clone its own name: `git conference join {} {name} --machine NAME`",
            link.machine, remote, remote
        )));
    }
    // Before a killed run's unpublished events go out (`sync_shared`): those of its slots
    // still this machine's are published, not dropped as if another machine had taken them.
    let taken_back = link.take_back_own(repo)?;
    take_knowledge(repo, &conf, &remote);
    conf.share(link.clone())?;
    // Shared first: the partial work a killed run left is recorded by this machine (its events
    // name it, as every machine checks) and published with that run's events.
    crate::engine::record::recovery::reconcile(&conf, false)?;
    match conf.sync_shared() {
        // A killed run's events still to publish: the run's loop syncs once they are out.
        Err(e) if e.is::<crate::remote::link::Unpublished>() => {}
        synced => {
            synced?;
        }
    }
    if conf.state().phase == Phase::Done {
        link.release_all(repo);
        return Ok(Outcome::AlreadyComplete(Box::new(conf.state())));
    }
    ui.info(&format!("{} joins `{name}` on {}", link.machine, remote));
    for slot in taken_back {
        ui.info(&format!(
            "{}: runs {}",
            link.machine,
            shared::slot_named(&slot)
        ));
    }
    run_through_gc(repo, conf, run).map(Outcome::Ended)
}

/// Where conference `name` keeps its run folder (logs, locks, what runs).
pub fn run_dir(repo: &Repository, name: &str) -> PathBuf {
    worktree::run_dir(repo, name)
}

/// The conference this process runs, once it holds its run lock.
pub fn running() -> Option<&'static String> {
    RUNNING.get()
}

/// Sets the allocator up for a runner that may go on for days: one malloc arena for all its
/// threads. The live heap of a never-stop round stays flat (the repository handles are reopened
/// in cycles, see `recorder::RECORDER_REOPEN_EVERY`), but with an arena for each runtime thread
/// the freed space between live blocks grew with it: 1.15x more resident memory at iteration
/// 10,000 than at 1,000, 1.09x in one arena, at the same cost per iteration (BENCHMARKS.md,
/// "Memory at 10,000 iterations"). The runner's threads mostly wait on processes, so they
/// seldom contend for the arena's lock. Called by the CLI before the runner starts any thread.
pub fn prepare_allocator() {
    crate::os::one_malloc_arena();
}

/// Runs the conference on a runtime until it ends, pauses or is interrupted; flushes the notes
/// and waits for the hooks either way.
pub fn run(conf: Conference) -> Result<Ended> {
    if let Some(link) = conf.link() {
        let _ = CONTINUE_WITH.set(format!("git conference join {} {}", link.remote, conf.name));
    }
    // Sent to MLflow off the research path, when conference.md names a server.
    crate::engine::commands::tracking::attach(&conf)?;
    let conf = Arc::new(conf);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(conf.config.count.clamp(2, 16))
        .build()?;
    let name = conf.name.clone();
    let outcome = runtime.block_on(async {
        // What a Ctrl-C means is decided by the process-wide handler (one press, debounced);
        // this watcher turns the first one into killing what runs.
        tokio::spawn(async {
            while !crate::exec::process::cancelled() {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            crate::errln!("\ngit-conference: stopping (agents and evaluations are being killed); press Ctrl-C again to exit at once");
            crate::exec::process::cancel_all();
        });
        tokio::spawn(take_requests_while_running(conf.clone()));
        let outcome = if conf.link().is_some() {
            shared::drive(conf.clone()).await
        } else {
            driver::drive(conf.clone()).await
        };
        if let Ok(RunOutcome::Completed(_)) = &outcome {
            // The retrospective's commit point is the knowledge store: stored once, here at
            // the end, or by the next `resume` when this run is killed first.
            crate::engine::phases::knowledge::store_retrospective_or_warn(&conf, true).await;
        }
        if let Some(link) = conf.link() {
            shared::give_knowledge(&conf, &link.remote);
        }
        outcome
    });
    let flushed = conf.flush_notes();
    conf.finish_hooks();
    flushed?;
    Ok(Ended {
        outcome: outcome?,
        state: Box::new(conf.state()),
        metric_name: crate::engine::measure::evaluate::metric_name(&conf.config),
        best_branch: conf.refs.best_branch(),
        continue_with: continue_command(&name),
        name,
    })
}

/// Takes the conference's run lock and gets the process ready to run it: writes to a closed
/// pipe fail instead of killing the process (SIGPIPE ignored, as Rust programs start, but made
/// sure of), Ctrl-C asks for a graceful stop, and the process groups a killed runner left
/// running are stopped before anything touches the worktrees.
pub fn take_over(run_dir: &std::path::Path, name: &str) -> Result<RunLock> {
    crate::os::ignore_sigpipe();
    crate::exec::process::handle_early_interrupts();
    let lock = RunLock::acquire(run_dir, name)?;
    let _ = RUNNING.set(name.to_string());
    let killed = crate::exec::process::kill_orphaned_groups(&run_dir.join("running"));
    if killed > 0 {
        crate::errln!("git-conference: stopped {killed} agent or evaluation process group(s) left running by a killed run");
    }
    crate::exec::process::track_groups_in(&run_dir.join("running"));
    let cancelled = crate::launch::cancel_left_behind(run_dir);
    if cancelled > 0 {
        crate::errln!("git-conference: cancelled {cancelled} evaluation job(s) a killed run left submitted (ssh, Slurm) and removed what they staged");
    }
    Ok(lock)
}

/// The trust gate before `resume` runs anything: the commands it would run (`edited`, the
/// user's conference.md when it changes the stored config, else `stored`) must be approved here.
/// A local edit to a conference this clone trusts is the user's own word: its commands are
/// printed and approved. Anything else untrusted is exit 2 naming every command.
pub fn gate(
    repo: &git2::Repository,
    name: &str,
    stored: &Config,
    edited: Option<&Config>,
) -> Result<()> {
    let runs = edited.unwrap_or(stored);
    if crate::trust::is_trusted(repo, name, runs) {
        return Ok(());
    }
    let stored_ok = crate::trust::is_trusted(repo, name, stored)
        || crate::trust::ran_here_unrecorded(repo, name);
    if !stored_ok {
        return Err(usage(crate::trust::refusal(name, runs)));
    }
    if edited.is_some() {
        crate::errln!(
            "trust: your conference.md changes the commands `{name}` runs; from now on it runs:\n{}",
            crate::trust::describe(runs).trim_end()
        );
    }
    crate::trust::approve(repo, name, runs)
}

/// The seed's recovery point for a recorded state.
pub fn recovery_point(conf: &Conference) -> String {
    let st = conf.state();
    let iterations: u32 = st.researchers.values().map(|r| r.round_iterations).sum();
    match st.phase {
        Phase::Between if st.round == 0 => "Start of Round 1, Phase 1".into(),
        Phase::Between => format!(
            "Start of Round {} (after the convergence check)",
            st.round + 1
        ),
        Phase::Research if iterations == 0 => format!("Start of Phase 1, Round {}", st.round),
        Phase::Research => format!("Mid-Phase 1, Round {}", st.round),
        Phase::Poster => format!("Phase 2 (poster session), Round {}", st.round),
        Phase::Review => format!("Start of Phase 3 (peer review), Round {}", st.round),
        Phase::Transfer => format!("Phase 4 (knowledge transfer), Round {}", st.round),
        Phase::Synthesis => "Synthesis".into(),
        Phase::Done => "Nothing to resume".into(),
    }
}

/// The conference this process runs, once it holds the run lock.
static RUNNING: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// How a stopped run of this process goes on, when not `resume`: on several machines, `join`
/// again (set by [`run_engine`]).
static CONTINUE_WITH: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The command that continues conference `name` after this run stopped.
pub fn continue_command(name: &str) -> String {
    CONTINUE_WITH
        .get()
        .cloned()
        .unwrap_or_else(|| format!("git conference resume {name}"))
}

/// A run stopped by the repository's files changing under it (objects deleted, a lock file or
/// a folder taken by another git command: a `git gc` while it ran) says so in a sentence, with
/// the way on, and the library's own words after it.
pub fn said_of_git(e: anyhow::Error, name: &str) -> anyhow::Error {
    let Some(what) = changed_under_it(&e) else {
        return e;
    };
    let started = Repository::discover(".").is_ok_and(|repo| {
        repo.find_reference(&refs::ConferenceRefs::new(name).events())
            .is_ok()
    });
    if !started {
        return e.context(format!(
            "conference `{name}` did not start: {what}. Start it again with `git conference start`"
        ));
    }
    e.context(format!(
        "conference `{name}` stopped: {what}. Everything recorded is safe; continue with \
         `git conference resume {name}` (it puts back any ref whose objects are gone)"
    ))
}

/// A finished conference whose run was killed before its retrospective was stored: store it
/// now (the retrospective command runs only where this clone trusts the conference).
fn store_missed_retrospective(repo: &git2::Repository, conf: &Conference) -> Result<()> {
    if crate::engine::phases::knowledge::retrospective_stored(repo, &conf.state()) {
        return Ok(());
    }
    let trusted = crate::trust::is_trusted(repo, &conf.name, &conf.config)
        || crate::trust::ran_here_unrecorded(repo, &conf.name);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(crate::engine::phases::knowledge::store_retrospective_or_warn(conf, trusted));
    Ok(())
}

/// Records what changed while the conference was paused: an edited conference.md
/// (`conference.config_changed`), a new baseline (`conference.rebased`).
fn apply_changes(
    conf: &Conference,
    plan: Option<&crate::engine::run::settings::Plan>,
    new_base: Option<git2::Oid>,
) -> Result<()> {
    let st = conf.state();
    if let Some(plan) = plan {
        crate::engine::run::settings::print(plan);
        let file = plan.file.display().to_string();
        crate::engine::run::reconfigure::record_config_change(
            conf,
            &plan.text,
            &plan.config,
            &plan.changes,
            &file,
        )?;
    }
    if let Some(base) = new_base {
        crate::engine::run::reconfigure::rebase(conf, base)?;
        crate::errln!(
            "The baseline is now {} (was {}); it is measured next.",
            &crate::model::short_oid(base),
            crate::model::short_id(&st.baseline_commit)
        );
    }
    Ok(())
}

/// The commit `resume --base REV` moves the baseline to: only while the baseline has no metric.
fn rebase_target(repo: &git2::Repository, conf: &Conference, rev: &str) -> Result<git2::Oid> {
    let st = conf.state();
    if st.baseline_metric.is_some() || st.round > 0 {
        return Err(usage(format!(
            "the baseline of `{}` is measured already ({}); --base only moves a baseline that could not be measured",
            conf.name,
            crate::render::format::fmt(st.baseline_metric)
        )));
    }
    let commit = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| usage(format!("cannot find the revision `{rev}`")))?;
    Ok(commit.id())
}

/// Records what `steer`, `answer`, `stop` and `approve` ask while the conference runs (see
/// `engine::phases::talk`), between its own recording points too.
async fn take_requests_while_running(conf: Arc<Conference>) {
    loop {
        tokio::time::sleep(crate::engine::phases::talk::POLL).await;
        let conf = conf.clone();
        let taken =
            tokio::task::spawn_blocking(move || crate::engine::phases::talk::take_requests(&conf))
                .await;
        if let Ok(Err(e)) = taken {
            crate::errln!("git-conference: {e:#}");
        }
    }
}

/// Publishes a conference just started to `remote` and runs it through it (see `cli::join`).
fn share(
    repo: &git2::Repository,
    conf: &Conference,
    remote: &str,
    machine: &MachineOptions,
) -> Result<()> {
    let link = link(repo, conf, remote, machine)?;
    take_knowledge(repo, conf, remote);
    conf.flush_notes()?;
    link.publish_new(repo)
        .map_err(|e| usage(format!("{e:#}; nothing of `{}` was kept", conf.name)))?;
    conf.ui.info(&format!(
        "{} published `{}` to {remote}; other machines take part with `git conference join {remote} {}`",
        link.machine, conf.name, conf.name
    ));
    conf.share(link)?;
    Ok(())
}

/// Takes the shared remote's knowledge store into this clone's before a run on several
/// machines (the lab's earlier conferences, from any box); a failure is a warning only.
fn take_knowledge(repo: &git2::Repository, conf: &Conference, remote: &str) {
    match crate::engine::commands::knowledge_exchange::take(repo, remote) {
        Ok(Some(line)) => conf.ui.info(&line),
        Ok(None) => {}
        Err(e) => conf.ui.warn(&format!(
            "warning: the knowledge store of {remote} was not taken: {e:#}"
        )),
    }
}

/// This machine's link to `remote` for `conf`, with what `machine` asks it to run.
pub fn link(
    repo: &git2::Repository,
    conf: &Conference,
    remote: &str,
    machine: &MachineOptions,
) -> Result<Arc<Link>> {
    if conf.config.loop_mode == crate::config::LoopMode::HumanInTheLoop {
        return Err(usage(format!(
            "`{}` is in human-in-the-loop mode (`- mode: human-in-the-loop` under `## Researchers`), \
             whose pauses run on one machine: run it with `git conference start` and `resume`, or \
             write `- mode: agentic` to run it on several machines",
            conf.name
        )));
    }
    let researchers = match &machine.researchers {
        Some(ids) => {
            let known = conf.state().researchers;
            let mut wanted = BTreeSet::new();
            for id in ids {
                let id = id.trim().to_ascii_uppercase();
                if !known.contains_key(&id) {
                    return Err(usage(format!(
                        "--researchers: `{id}` is not a researcher of `{}` (it has {})",
                        conf.name,
                        known.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                wanted.insert(id);
            }
            Some(wanted)
        }
        None => None,
    };
    if machine.slots == Some(0) {
        return Err(usage("--slots must be at least 1".to_string()));
    }
    let name = machine_name(repo, machine.machine.as_deref())?;
    let wanted = Wanted {
        researchers,
        slots: machine.slots,
    };
    let lease = conf.config.lease();
    Ok(Arc::new(Link::new(
        repo,
        remote,
        &name,
        conf.refs.clone(),
        lease,
        wanted,
    )?))
}

/// This clone's machine name: given, else kept in its git config (`conference.machine`), else
/// made from the host's name and a random suffix (two clones on one host are two machines).
fn machine_name(repo: &git2::Repository, given: Option<&str>) -> Result<String> {
    if let Some(name) = given {
        if !valid_machine_name(name) {
            return Err(usage(format!(
                "--machine `{name}`: use letters, digits, `-` and `_` (e.g. gpu-box-2)"
            )));
        }
        return Ok(name.to_string());
    }
    let mut config = repo.config()?;
    if let Ok(kept) = config.get_string("conference.machine") {
        if valid_machine_name(&kept) {
            return Ok(kept);
        }
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(32)
        .collect();
    let suffix = &git2::Oid::hash_object(
        git2::ObjectType::Blob,
        format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes(),
    )?
    .to_string()[..4];
    let name = if host.is_empty() {
        format!("machine-{suffix}")
    } else {
        format!("{host}-{suffix}")
    };
    config.set_str("conference.machine", &name)?;
    Ok(name)
}

/// The conference's name: the one given, or the title's slug; one git can make refs for.
pub fn conference_name(
    repo: &git2::Repository,
    given: Option<String>,
    cfg: &Config,
) -> Result<String> {
    let name = match given {
        Some(n) if refs::is_reserved_name(&n) => {
            return Err(usage(format!(
                "`{n}` cannot be a conference name: git-conference keeps its own `{n}` folder next to the conferences' (<git-dir>/conference/{n}); choose another, e.g. `git conference start {n}-run`"
            )))
        }
        Some(n) => n,
        None if refs::is_reserved_name(&refs::slug(&cfg.title)) => {
            let mapped = format!("{}-conference", refs::slug(&cfg.title));
            crate::errln!(
                "note: `{}` is the name of git-conference's own folder; this conference is named `{mapped}` (or name it: `git conference start NAME`)",
                refs::slug(&cfg.title)
            );
            mapped
        }
        None => refs::slug(&cfg.title),
    };
    if !refs::is_valid_name(&name) {
        return Err(usage(format!(
            "`{name}` cannot be a conference name: use letters, digits, `-`, `_` and `.` (e.g. `git conference start my-run`)"
        )));
    }
    let blocking = refs::blocking_refs(repo, &name);
    if !blocking.is_empty() {
        return Err(usage(format!(
            "git cannot create the refs of `{name}` (e.g. {}) next to {}: rename {} (e.g. `git branch -m conference conference-old`), or start the conference under another name",
            crate::store::ConferenceRefs::new(&name).best(),
            blocking.join(", "),
            if blocking.len() > 1 { "them" } else { "it" }
        )));
    }
    Ok(name)
}
