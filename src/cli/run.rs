//! `start` and `resume`: read the arguments and conference.md, run the pre-flight checks, then
//! hand the conference to the engine (`engine::run::session`: the lock, the trust gate, reconciliation,
//! the remote link, the runtime) and print what it says along the way and how it ended.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::config::{self, Config, DevilsAdvocate};
use crate::engine::run::preflight;
use crate::engine::run::session::{
    self as engine_run, Narrator, Outcome, ResumeOptions, StartOptions,
};
use crate::engine::state::State;
use crate::engine::{now_unix, Conference};
use crate::error::usage;
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
    pub machine: super::running::MachineArgs,
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
    super::running::interrupted_or(start_conference(args, quiet))
}

fn start_conference(args: StartArgs, quiet: bool) -> Result<i32> {
    let repo = super::discover()?;
    let top = crate::engine::run::settings::workdir(&repo)?;
    let config_path = if args.config.is_absolute() {
        args.config.clone()
    } else {
        top.join(&args.config)
    };
    let (text, cfg) = read_config(&config_path, args.yes)?;
    let name = engine_run::conference_name(&repo, args.name.clone(), &cfg)?;
    let base = checked_baseline(&repo, &args, &cfg, &text, &config_path, &name)?;
    let ui = Ui::new(quiet);
    let opts = StartOptions {
        name,
        config: cfg,
        config_text: text,
        base,
        remote: args.remote.clone(),
        machine: args.machine.options(),
    };
    let said = Said { ui: ui.clone() };
    let ended = engine_run::start(&repo, opts, &ui, &said);
    with_advice(ended.map(super::running::said_of_end), &args.config)
}

/// A failed baseline's way on, worded for `config`, the file this run read (see
/// `driver::BaselineFailed`); other results as they are.
fn with_advice(result: Result<i32>, config: &std::path::Path) -> Result<i32> {
    match result {
        Err(e) => match e.downcast_ref::<crate::engine::run::driver::BaselineFailed>() {
            Some(failed) => Err(anyhow::anyhow!(failed.advice(config))),
            None => Err(e),
        },
        ok => ok,
    }
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
    let text = crate::engine::run::settings::read_text(config_path)?;
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
    let run_dir = engine_run::run_dir(repo, name);
    let problems = preflight::check(repo, cfg, text, base, &run_dir)?;
    if !problems.is_empty() {
        return Err(usage(config::describe_errors(config_path, &problems)));
    }
    crate::engine::agent::dispatch::check_tunable(cfg, repo, base)?;
    let short = &crate::model::short_oid(base);
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
    let name = conf.name();
    ui.info(&format!(
        "conference `{name}` started from {} ({} researchers); follow it with `{} log {name} --follow`",
        &crate::model::short_oid(base),
        conf.config().count,
        crate::ui::invocation()
    ));
    super::effective::print_rules(conf, ui);
    if let Some((preset, _)) = conf.config().agent.preset() {
        ui.info(&format!(
            "agent preset `{}` ({}) runs: {}",
            preset.name(),
            preset.product(),
            conf.config().agent_command()
        ));
    }
    let reading = crate::agents::reading_of(&conf.config().agent.command);
    if let Some((line, _)) = &reading {
        ui.info(line);
    }
    let warnings = reading.into_iter().flat_map(|(_, w)| w);
    for warning in warnings.chain(crate::engine::stop::budget::warnings(conf.config())) {
        crate::errln!("warning: {warning}");
    }
}

pub fn resume(args: ResumeArgs, quiet: bool) -> Result<i32> {
    crate::exec::process::handle_early_interrupts();
    super::running::interrupted_or(resume_conference(args, quiet))
}

fn resume_conference(args: ResumeArgs, quiet: bool) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, args.name, "resume")?;
    let ui = Ui::new(quiet);
    let opts = ResumeOptions {
        name: name.clone(),
        force: args.force,
        config: args.config.clone(),
        base: args.base,
        continue_stopped: args.continue_stopped,
    };
    let config = args
        .config
        .unwrap_or_else(|| PathBuf::from("conference.md"));
    match engine_run::resume(&repo, opts, &ui, &Said { ui: ui.clone() }) {
        Ok(Outcome::AlreadyComplete(st)) => {
            say_already_complete(&name, &st);
            Ok(0)
        }
        Ok(Outcome::Ended(ended)) => with_advice(Ok(super::running::said_of_end(ended)), &config),
        Err(e) => with_advice(Err(e), &config),
    }
}

/// What `start` and `resume` say along the way (see `engine::run::session::Narrator`).
struct Said {
    ui: Ui,
}

impl Narrator for Said {
    fn started(&self, conf: &Conference, base: git2::Oid) {
        announce_start(conf, &self.ui, base);
    }
    fn resuming(&self, st: &State, point: &str) {
        print_resume_summary(st, point);
    }
    fn rules(&self, conf: &Conference) {
        super::effective::print_rules(conf, &self.ui);
    }
}

/// What `resume` says of a conference that is complete, and how to continue it.
fn say_already_complete(name: &str, st: &crate::engine::state::State) {
    crate::outln!(
        "Conference `{name}` is already complete ({}): best {} at {}. Read the report with `git conference report {name}`.",
        st.final_status.as_deref().unwrap_or("done"),
        crate::render::format::fmt(st.best.metric),
        crate::model::short_id(&st.best.commit)
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
