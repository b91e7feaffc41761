//! `start` and `resume`: take the conference's lock, bring its worktrees in line with the event
//! log, and run the engine until it converges, hits a budget, pauses (exit 3) or is interrupted.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use crate::config::{self, Config, DevilsAdvocate};
use crate::engine::preflight;
use crate::engine::state::Phase;
use crate::engine::{driver, now_unix, Conference, RunOutcome};
use crate::error::{usage, EXIT_INTERRUPTED, EXIT_PAUSED};
use crate::git::worktree;
use crate::lock::RunLock;
use crate::model::event::{self as events, Event};
use crate::store::refs;
use crate::ui::Ui;

/// Run a conference: rounds of research → poster session → peer review → knowledge transfer,
/// until a stop rule fires. Reads conference.md, stores it in the conference's refs, and never
/// touches your branches or working tree.
#[derive(Args, Debug)]
pub struct StartArgs {
    /// Conference name (default: a slug of the `# Conference:` title).
    pub name: Option<String>,
    /// The conference file.
    #[arg(long, default_value = "conference.md")]
    pub config: PathBuf,
    /// Baseline revision (default: HEAD). The evaluation harness must be committed there.
    #[arg(long)]
    pub base: Option<String>,
    /// Do not ask: accept `Final confirmation: pending` and answer questions with their defaults.
    #[arg(long, short)]
    pub yes: bool,
    /// Run the conference on several machines through this shared remote (a remote's name, a
    /// path or a URL; it must accept atomic pushes): publish it there, run the researchers
    /// this machine claims and the chair's phases; other machines take part with `git
    /// conference join REMOTE NAME`.
    #[arg(long)]
    pub remote: Option<String>,
    #[command(flatten)]
    pub machine: super::join::MachineArgs,
}

/// Continue an interrupted or paused conference exactly where its event log says.
#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    /// A conference branch moved by hand (a commit made in a researcher's worktree, `git branch
    /// -f`, `git update-ref`) stops the resume. With --force the commit it points to is set aside
    /// instead (recorded as `branch.set_aside`, kept reachable, noted) and the branch goes back
    /// where the event log says.
    #[arg(long)]
    pub force: bool,
    /// The conference file to apply (default: conference.md at the top of the working tree).
    /// Settings edited since the conference started are applied from the next step on, each
    /// printed and recorded (`conference.config_changed`); the metric, direction, mode and
    /// researcher count cannot change, nor the evaluation command once the baseline is measured.
    /// A file with another title is left alone unless named here.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A new baseline revision, for a conference whose baseline could not be measured (commit the
    /// fixed harness, then `resume --base HEAD`). Refused once the baseline has a metric.
    #[arg(long)]
    pub base: Option<String>,
    /// Continue a conference that stopped (budget, stall or plateau) with the settings in
    /// conference.md. Editing a budget there and resuming does the same.
    #[arg(long = "continue")]
    pub continue_stopped: bool,
}

pub fn start(args: StartArgs, quiet: bool) -> Result<i32> {
    // Ctrl-C means "stop gracefully" from the first instant, not only once the lock is taken.
    crate::exec::process::handle_early_interrupts();
    interrupted_or(start_conference(args, quiet))
}

fn start_conference(args: StartArgs, quiet: bool) -> Result<i32> {
    let repo = super::discover()?;
    let top = super::workdir(&repo)?;
    let config_path = if args.config.is_absolute() {
        args.config.clone()
    } else {
        top.join(&args.config)
    };
    let (text, cfg) = read_config(&config_path, args.yes)?;
    let name = conference_name(&repo, args.name.clone(), &cfg)?;
    let base = checked_baseline(&repo, &args, &cfg, &text, &config_path, &name)?;
    let ui = Ui::new(quiet);
    let run_dir = worktree::run_dir(&repo, &name);
    let lock = take_over(&run_dir, &name)?;
    // A start killed while it wrote its first event leaves a lock on the events ref.
    crate::engine::clear_stale_ref_locks(repo.commondir(), &name);
    // The user wrote these commands: this clone trusts them (see `crate::trust`).
    crate::trust::approve(&repo, &name, &cfg)?;
    let conf = match Conference::create(repo.path(), &name, cfg, text, base, ui.clone()) {
        Ok(conf) => conf,
        Err(e) => {
            crate::trust::forget(&repo, &name);
            return Err(e);
        }
    };
    announce_start(&conf, &ui, base);
    if let Err(e) = conf.reconcile(false) {
        // A `git gc` deleted what it had just written: the conference stays, to be resumed.
        if changed_under_it(&e).is_some() {
            return Err(e);
        }
        // Git could not make the worktrees (a failing post-checkout hook, a filter program that
        // is missing): nothing ran yet, so nothing of the conference is kept.
        drop(conf);
        super::clean::undo_start(&repo, &name, lock)?;
        return Err(usage(format!(
            "git could not check out the baseline for the researchers: {e:#}\nFix that (a \
             failing post-checkout hook, a missing filter such as git-lfs), then start again; \
             nothing of `{name}` was kept."
        )));
    }
    if let Some(remote) = &args.remote {
        if let Err(e) = share(&repo, &conf, remote, &args.machine) {
            drop(conf);
            super::clean::undo_start(&repo, &name, lock)?;
            return Err(e);
        }
    }
    let result = with_advice(run_engine(conf), &args.config);
    drop(lock);
    result
}

/// A failed baseline's way on, worded for `config`, the file this run read (see
/// `driver::BaselineFailed`); other results as they are.
fn with_advice(result: Result<i32>, config: &std::path::Path) -> Result<i32> {
    match result {
        Err(e) => match e.downcast_ref::<crate::engine::driver::BaselineFailed>() {
            Some(failed) => Err(anyhow::anyhow!(failed.advice(config))),
            None => Err(e),
        },
        ok => ok,
    }
}

/// Publishes a conference just started to `remote` and runs it through it (see `cli::join`).
fn share(
    repo: &git2::Repository,
    conf: &Conference,
    remote: &str,
    machine: &super::join::MachineArgs,
) -> Result<()> {
    let link = super::join::link(repo, conf, remote, machine)?;
    conf.flush_notes()?;
    link.publish_new(repo)
        .map_err(|e| usage(format!("{e:#}; nothing of `{}` was kept", conf.name)))?;
    conf.ui.info(&format!(
        "{} published `{}` to {remote}; other machines take part with `git conference join {remote} {}`",
        link.machine, conf.name, conf.name
    ));
    conf.share(link);
    Ok(())
}

/// Reads and validates conference.md; settles what it leaves to the start (the final
/// confirmation, whether one researcher is a Devil's Advocate).
pub(super) fn read_config(config_path: &std::path::Path, yes: bool) -> Result<(String, Config)> {
    if !config_path.exists() {
        return Err(usage(format!(
            "{} does not exist; write one with `git conference init`",
            config_path.display()
        )));
    }
    let text = super::read_text(config_path)?;
    let mut cfg =
        config::load(&text).map_err(|errs| usage(config::describe_errors(config_path, &errs)))?;
    let pending = cfg
        .final_confirmation
        .as_deref()
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("pending"));
    if pending && !yes {
        return Err(usage(
            "conference.md says `**Final confirmation:** pending`: confirm the pre-flight answers \
             (write `confirmed`) or pass --yes",
        ));
    }
    if cfg.devils_advocate == DevilsAdvocate::Ask {
        let ask = !yes && super::stdin_is_tty();
        cfg.devils_advocate =
            if ask && super::confirm("Should one researcher be a Devil's Advocate?", false) {
                DevilsAdvocate::Enabled
            } else {
                DevilsAdvocate::Disabled
            };
    }
    Ok((text, cfg))
}

/// The conference's name: the one given, or the title's slug; one git can make refs for.
pub(super) fn conference_name(
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

/// The baseline commit, once the pre-flight checks pass there; warns about uncommitted changes
/// the conference will not see.
fn checked_baseline(
    repo: &git2::Repository,
    args: &StartArgs,
    cfg: &Config,
    text: &str,
    config_path: &std::path::Path,
    name: &str,
) -> Result<git2::Oid> {
    let base_rev = args.base.as_deref().unwrap_or("HEAD");
    let base = repo
        .revparse_single(base_rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| usage(format!("cannot find the baseline `{base_rev}`: commit your project (with its evaluation harness) first")))?
        .id();
    let run_dir = worktree::run_dir(repo, name);
    let problems = preflight::check(repo, cfg, text, base, &run_dir)?;
    if !problems.is_empty() {
        return Err(usage(config::describe_errors(config_path, &problems)));
    }
    crate::engine::agent::check_tunable(cfg, repo, base)?;
    let short = &base.to_string()[..10];
    for path in preflight::uncommitted_frozen(repo, cfg) {
        crate::errln!("warning: your uncommitted changes to {path} (frozen) are not used: the conference evaluates the baseline {short} as committed");
    }
    let uncommitted = super::effective::uncommitted_tracked(repo, config_path);
    if !uncommitted.is_empty() {
        crate::errln!(
            "warning: uncommitted changes to {} are not part of the baseline {short}: researchers start from the commit (commit them first, then start)",
            uncommitted.join(", "),
        );
    }
    Ok(base)
}

/// What `start` tells the user once the conference exists: where it starts, how to follow it,
/// the effective rules, the agent command, budget warnings.
fn announce_start(conf: &Conference, ui: &Ui, base: git2::Oid) {
    let name = &conf.name;
    ui.info(&format!(
        "conference `{name}` started from {} ({} researchers); follow it with `{} log {name} --follow`",
        &base.to_string()[..10],
        conf.config.count,
        crate::ui::invocation()
    ));
    super::effective::print_rules(conf, ui);
    if let Some((preset, _)) = conf.config.agent.preset() {
        ui.info(&format!(
            "agent preset `{}` ({}) runs: {}",
            preset.name(),
            preset.product(),
            conf.config.agent_command()
        ));
    }
    let reading = crate::agents::reading_of(&conf.config.agent.command);
    if let Some((line, _)) = &reading {
        ui.info(line);
    }
    let warnings = reading.into_iter().flat_map(|(_, w)| w);
    for warning in warnings.chain(crate::engine::budget::warnings(&conf.config)) {
        crate::errln!("warning: {warning}");
    }
}

/// Takes the conference's run lock and gets the process ready to run it: writes to a closed
/// pipe fail instead of killing the process (SIGPIPE ignored, as Rust programs start, but made
/// sure of), Ctrl-C asks for a graceful stop, and the process groups a killed runner left
/// running are stopped before anything touches the worktrees.
pub(super) fn take_over(run_dir: &std::path::Path, name: &str) -> Result<RunLock> {
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
pub(super) fn gate(
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

pub fn resume(args: ResumeArgs, quiet: bool) -> Result<i32> {
    crate::exec::process::handle_early_interrupts();
    interrupted_or(resume_conference(args, quiet))
}

/// The conference this process runs, once it holds the run lock.
static RUNNING: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// How a stopped run of this process goes on, when not `resume`: on several machines, `join`
/// again (set by [`run_engine`]).
static CONTINUE_WITH: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The command that continues conference `name` after this run stopped.
fn continue_command(name: &str) -> String {
    CONTINUE_WITH
        .get()
        .cloned()
        .unwrap_or_else(|| format!("git conference resume {name}"))
}

/// A failure after a Ctrl-C is the press's doing (a git child spawned at that instant caught it
/// too): everything that finished is recorded and `resume` finishes the rest, so it is the
/// graceful stop the press asked for, not an error.
pub(super) fn interrupted_or(result: Result<i32>) -> Result<i32> {
    match (result, RUNNING.get()) {
        (Err(e), Some(name)) if crate::exec::process::cancelled() => {
            crate::errln!("git-conference: {e:#}");
            crate::errln!(
                "git-conference: interrupted; what finished is recorded. Continue with `{}`.",
                continue_command(name)
            );
            Ok(EXIT_INTERRUPTED)
        }
        (Err(e), Some(name)) => Err(said_of_git(e, name)),
        (result, _) => result,
    }
}

/// A run stopped by the repository's files changing under it (objects deleted, a lock file or
/// a folder taken by another git command: a `git gc` while it ran) says so in a sentence, with
/// the way on, and the library's own words after it.
fn said_of_git(e: anyhow::Error, name: &str) -> anyhow::Error {
    let Some(what) = changed_under_it(&e) else {
        return e;
    };
    let started = super::discover().is_ok_and(|repo| {
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

/// What a run's failure says of the repository changing under it, when it says that.
fn changed_under_it(e: &anyhow::Error) -> Option<&'static str> {
    use git2::{ErrorClass, ErrorCode};
    if e.chain()
        .any(|c| c.is::<crate::store::protect::ObjectGone>())
    {
        return Some(
            "objects it had just written were deleted before a ref named them (a `git gc \
             --prune=now` or `git prune` while it ran?), so none does",
        );
    }
    let git = e.chain().find_map(|c| c.downcast_ref::<git2::Error>())?;
    let missing =
        git.message().contains("doesn't exist") || git.message().contains("invalid object");
    match (git.class(), git.code()) {
        (ErrorClass::Odb, _) | (_, ErrorCode::NotFound) => Some(
            "objects it needs are gone from the repository (a `git gc --prune=now` or `git \
             prune` while it ran?)",
        ),
        _ if missing => Some(
            "objects it needs are gone from the repository (a `git gc --prune=now` or `git \
             prune` while it ran?)",
        ),
        (_, ErrorCode::Locked) | (ErrorClass::Os, _) => Some(
            "another git command held or removed a file it was writing (a `git gc` while it ran?)",
        ),
        _ => None,
    }
}

fn resume_conference(args: ResumeArgs, quiet: bool) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, args.name, "resume")?;
    let ui = Ui::new(quiet);
    let run_dir = worktree::run_dir(&repo, &name);
    let _lock = take_over(&run_dir, &name)?;
    for lost in crate::store::recovery::recover(&repo, &refs::ConferenceRefs::new(&name))? {
        ui.warn(&format!("warning: {}", lost.describe()));
    }
    if let Some(said) = worktree::make_worktrees_own(&repo, &name)? {
        ui.warn(&format!("warning: {said}"));
    }
    let mut conf = Conference::open(repo.path(), &name, ui.clone()).context("cannot resume")?;
    let st = conf.state();
    if !st.machines.is_empty() && st.phase != Phase::Done {
        return Err(usage(format!(
            "conference `{name}` runs on several machines ({}): take part again with `git conference join <remote> {name}` (the remote it was started with), which continues from what every machine published",
            st.machines.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let new_base = match &args.base {
        Some(rev) => Some(rebase_target(&repo, &conf, rev)?),
        None => None,
    };
    let base = new_base.unwrap_or(git2::Oid::from_str(&st.baseline_commit)?);
    let plan = super::settings::plan(&repo, &conf, args.config.as_deref(), base)?;
    let continuing = st.phase == Phase::Done && (args.continue_stopped || plan.is_some());
    let idle = crate::engine::reconfigure::stopped_for(&st);
    if st.phase == Phase::Done && !continuing {
        store_missed_retrospective(&repo, &conf)?;
        say_already_complete(&name, &st);
        return Ok(0);
    }
    gate(&repo, &name, &conf.config, plan.as_ref().map(|p| &p.config))?;
    let point = if continuing {
        format!(
            "Stopped ({}); continues with Round {}",
            st.final_status.as_deref().unwrap_or("done"),
            st.round + 1
        )
    } else {
        recovery_point(&conf)
    };
    print_resume_summary(&st, &point);
    let reverted = conf.reconcile(args.force)?;
    apply_changes(&conf, plan.as_ref(), new_base)?;
    if plan.is_some() || new_base.is_some() {
        drop(conf);
        conf = Conference::open(repo.path(), &name, ui.clone())?;
    }
    if continuing {
        if let Some(stop) = crate::engine::reconfigure::would_stop(&conf) {
            return Err(usage(format!(
                "conference `{name}` would stop again at once: {} ({}). Raise that budget in conference.md and run `git conference resume {name}` again.",
                stop.why, stop.token
            )));
        }
        crate::engine::reconfigure::continue_stopped(&conf, idle)?;
        crate::errln!(
            "Continuing `{name}` after round {} (it had stopped: {}).",
            st.round,
            st.stop_reason.as_deref().unwrap_or("stopped")
        );
    }
    if plan.is_some() {
        super::effective::print_rules(&conf, &ui);
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
    let config = args
        .config
        .unwrap_or_else(|| PathBuf::from("conference.md"));
    with_advice(run_engine(conf), &config)
}

/// A finished conference whose run was killed before its retrospective was stored: store it
/// now (the retrospective command runs only where this clone trusts the conference).
fn store_missed_retrospective(repo: &git2::Repository, conf: &Conference) -> Result<()> {
    if crate::engine::knowledge::retrospective_stored(repo, &conf.state()) {
        return Ok(());
    }
    let trusted = crate::trust::is_trusted(repo, &conf.name, &conf.config)
        || crate::trust::ran_here_unrecorded(repo, &conf.name);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(crate::engine::knowledge::store_retrospective_or_warn(
            conf, trusted,
        ));
    Ok(())
}

/// What `resume` says of a conference that is complete, and how to continue it.
fn say_already_complete(name: &str, st: &crate::engine::state::State) {
    crate::outln!(
        "Conference `{name}` is already complete ({}): best {} at {}. Read the report with `git conference report {name}`.",
        st.final_status.as_deref().unwrap_or("done"),
        crate::render::format::fmt(st.best.metric),
        &st.best.commit[..10]
    );
    if st.final_status.is_some() {
        crate::outln!("To continue it, raise its budgets in conference.md (Max rounds, Max total iterations, Time budget) and run `git conference resume {name}` (or `resume --continue` to go on with the same settings).");
    }
}

/// The seed's resume summary: rounds done, the last event, the researchers, convergence, where
/// it goes on; a warning when the conference was interrupted more than a day ago.
fn print_resume_summary(st: &crate::engine::state::State, point: &str) {
    let active: Vec<&str> = st.researchers.keys().map(String::as_str).collect();
    let convergence = match (st.final_status.as_deref(), st.stop_reason.as_deref()) {
        (Some("converged"), _) => "yes".to_string(),
        (Some(status), Some(why)) => format!("no (stopped: {status}, {why})"),
        (Some(status), None) => format!("no (stopped: {status})"),
        (None, _) => "no".to_string(),
    };
    crate::errln!("Conference state:");
    crate::errln!("- Total rounds completed: {}", st.round_bests.len());
    crate::errln!(
        "- Last completed event: {} at {}",
        st.last_event,
        st.updated_at
    );
    crate::errln!("- Researchers in last round: {}", active.join(", "));
    crate::errln!("- Convergence reached: {convergence}");
    crate::errln!("- Interruption point: {point}");
    if let Ok(t) = time::OffsetDateTime::parse(
        &st.updated_at,
        &time::format_description::well_known::Rfc3339,
    ) {
        let hours = (now_unix() as i64 - t.unix_timestamp()) / 3600;
        if hours > 24 {
            crate::errln!(
                "warning: this conference was interrupted {hours} hours ago; dependencies or files outside the conference may have changed"
            );
        }
    }
}

/// Records what changed while the conference was paused: an edited conference.md
/// (`conference.config_changed`), a new baseline (`conference.rebased`).
fn apply_changes(
    conf: &Conference,
    plan: Option<&super::settings::Plan>,
    new_base: Option<git2::Oid>,
) -> Result<()> {
    let st = conf.state();
    if let Some(plan) = plan {
        super::settings::print(plan);
        let file = plan.file.display().to_string();
        crate::engine::reconfigure::record_config_change(
            conf,
            &plan.text,
            &plan.config,
            &plan.changes,
            &file,
        )?;
    }
    if let Some(base) = new_base {
        crate::engine::reconfigure::rebase(conf, base)?;
        crate::errln!(
            "The baseline is now {} (was {}); it is measured next.",
            &base.to_string()[..10],
            &st.baseline_commit[..10]
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
/// `engine::talk`), between its own recording points too.
async fn take_requests_while_running(conf: Arc<Conference>) {
    loop {
        tokio::time::sleep(crate::engine::talk::POLL).await;
        let conf = conf.clone();
        let taken =
            tokio::task::spawn_blocking(move || crate::engine::talk::take_requests(&conf)).await;
        if let Ok(Err(e)) = taken {
            crate::errln!("git-conference: {e:#}");
        }
    }
}

pub(super) fn run_engine(conf: Conference) -> Result<i32> {
    if let Some(link) = conf.link() {
        let _ = CONTINUE_WITH.set(format!("git conference join {} {}", link.remote, conf.name));
    }
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
        let outcome = driver::drive(conf.clone()).await;
        if let Ok(RunOutcome::Completed(_)) = &outcome {
            // The retrospective's commit point is the knowledge store: stored once, here at
            // the end, or by the next `resume` when this run is killed first.
            crate::engine::knowledge::store_retrospective_or_warn(&conf, true).await;
        }
        outcome
    });
    let flushed = conf.flush_notes();
    conf.finish_hooks();
    flushed?;
    let st = conf.state();
    match outcome? {
        RunOutcome::Completed(status) => {
            crate::outln!(
                "Conference `{name}` {status}: best {} = {} at {} (branch {}).",
                crate::engine::evaluate::metric_name(&conf.config),
                crate::render::format::fmt(st.best.metric),
                &st.best.commit[..10],
                conf.refs.best_branch()
            );
            let program = crate::ui::invocation();
            crate::outln!("Report: {program} report {name} --output <dir>   ·   Apply: {program} apply {name}");
            Ok(0)
        }
        RunOutcome::Paused => {
            crate::outln!("Conference `{name}` paused after round {} (pause_every). Continue with `git conference resume {name}`.", st.round);
            Ok(EXIT_PAUSED)
        }
        RunOutcome::Waiting(why) => {
            crate::outln!("Conference `{name}` paused: {why}");
            Ok(EXIT_PAUSED)
        }
        RunOutcome::Interrupted => {
            crate::errln!(
                "git-conference: interrupted; what finished is recorded. Continue with `{}`.",
                continue_command(&name)
            );
            Ok(EXIT_INTERRUPTED)
        }
    }
}
