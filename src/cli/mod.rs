//! The command line: one file per subcommand, each with an `Args` struct whose doc comment is
//! its help text (and man page, generated from the same definitions by `__man`).

mod apply;
mod clean;
mod completion;
mod demo;
mod effective;
mod export;
mod import;
mod init;
mod join;
mod knowledge;
mod list;
mod log;
mod man;
mod remote;
pub mod report;
pub mod run;
mod running;
mod serve;
mod status;
mod talk;
mod trust;

use anyhow::Result;
use clap::{Parser, Subcommand};
use git2::Repository;

use crate::error::{self, usage};

/// Run automated research conferences inside a git repository.
///
/// Researchers (AI agents, scripts, or the built-in tuner) try changes in their own worktrees;
/// every attempt is measured by your evaluation command; each round's findings are summarised,
/// re-checked, and the validated ones are cherry-picked onto a best branch. Everything is stored
/// in git: `git log refs/conference/<name>/events` is the history.
#[derive(Parser, Debug)]
#[command(name = "git-conference", bin_name = "git conference", version)]
pub struct Cli {
    /// Only print results (no progress).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Init(init::InitArgs),
    Start(run::StartArgs),
    Resume(run::ResumeArgs),
    Status(status::StatusArgs),
    Log(log::LogArgs),
    Report(report::ReportArgs),
    Apply(apply::ApplyArgs),
    Clean(clean::CleanArgs),
    Push(remote::PushArgs),
    Fetch(remote::FetchArgs),
    Join(join::JoinArgs),
    List(list::ListArgs),
    Trust(trust::TrustArgs),
    Knowledge(knowledge::KnowledgeArgs),
    Import(import::ImportArgs),
    Export(export::ExportArgs),
    Demo(demo::DemoArgs),
    Serve(serve::ServeArgs),
    Steer(talk::SteerArgs),
    Answer(talk::AnswerArgs),
    Stop(talk::StopArgs),
    Approve(talk::ApproveArgs),
    Completion(completion::CompletionArgs),
    #[command(name = "man")]
    Manual(man::InstallArgs),
    #[command(name = "__man", hide = true)]
    Man(man::ManArgs),
}

/// Runs the command line; returns the exit code.
pub fn main() -> i32 {
    // A runner's watchdog (`exec::watchdog`): started by the program itself, never by a user.
    if let Some((run_dir, runner)) = crate::exec::watchdog::invoked() {
        return crate::exec::watchdog::watch(&run_dir, runner);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { error::EXIT_USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let quiet = cli.quiet;
    if matches!(
        cli.command,
        Command::Status(_) | Command::Log(_) | Command::List(_)
    ) {
        crate::ui::exit_on_closed_stdout();
    }
    if matches!(
        cli.command,
        Command::Start(_) | Command::Resume(_) | Command::Join(_) | Command::Demo(_)
    ) {
        crate::engine::run::session::prepare_allocator();
    }
    let result = match cli.command {
        Command::Init(a) => init::run(a),
        Command::Start(a) => run::start(a, quiet),
        Command::Resume(a) => run::resume(a, quiet),
        Command::Status(a) => status::run(a),
        Command::Log(a) => log::run(a),
        Command::Report(a) => report::run(a),
        Command::Apply(a) => apply::run(a),
        Command::Clean(a) => clean::run(a),
        Command::Push(a) => remote::push(a),
        Command::Fetch(a) => remote::fetch(a),
        Command::Join(a) => join::join(a, quiet),
        Command::List(a) => list::run(a),
        Command::Trust(a) => trust::run(a),
        Command::Knowledge(a) => knowledge::run(a),
        Command::Import(a) => import::run(a),
        Command::Export(a) => export::run(a),
        Command::Demo(a) => demo::run(a, quiet),
        Command::Serve(a) => serve::run(a),
        Command::Steer(a) => talk::steer(a),
        Command::Answer(a) => talk::answer(a),
        Command::Stop(a) => talk::stop(a),
        Command::Approve(a) => talk::approve(a),
        Command::Completion(a) => completion::run(a),
        Command::Manual(a) => man::install(a),
        Command::Man(a) => man::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            crate::errln!("git-conference: {e:#}");
            error::exit_code(&e)
        }
    }
}

/// The repository around the current directory.
pub fn discover() -> Result<Repository> {
    Repository::discover(".").map_err(|e| usage(not_a_repository(&e)))
}

/// Why the repository here cannot be opened. Git itself may see one that libgit2 (which reads
/// git's objects for git-conference) cannot: a SHA-256 repository, or another extension.
fn not_a_repository(e: &git2::Error) -> String {
    let git = |args: &[&str]| {
        // The user's git, as the user ran it: it must see the repository their environment names.
        crate::exec::command("git", crate::exec::GitEnv::Inherit)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if git(&["rev-parse", "--git-dir"]).is_none() {
        return "not in a git repository (run this inside one, or `git init` first)".into();
    }
    if git(&["rev-parse", "--show-object-format"]).as_deref() == Some("sha256") {
        return "this is a SHA-256 repository (`extensions.objectFormat = sha256`), which \
                git-conference cannot read yet: libgit2, through which it reads git's objects, \
                supports SHA-1 repositories only. Run the conference in a SHA-1 repository \
                (e.g. a `git init` copy of the project)"
            .into();
    }
    format!(
        "git-conference cannot open this repository: {}",
        e.message()
    )
}

/// Names of the conferences in the repository.
pub fn conference_names(repo: &Repository) -> Result<Vec<String>> {
    crate::engine::commands::log::conference_names(repo)
}

/// Resolves the NAME argument: given, or the only conference of the repository.
pub fn resolve_name(repo: &Repository, name: Option<String>) -> Result<String> {
    resolve_name_for(repo, name, "status")
}

/// [`resolve_name`] for `git conference <command>`, which the hint names when several
/// conferences leave the choice to the user.
pub fn resolve_name_for(repo: &Repository, name: Option<String>, command: &str) -> Result<String> {
    let names = conference_names(repo)?;
    match name {
        Some(n) => {
            if names.contains(&n) {
                Ok(n)
            } else if names.is_empty() {
                Err(usage(format!("no conference named `{n}`: this repository has none yet (start one with `git conference start`)")))
            } else {
                Err(usage(format!("no conference named `{n}`; this repository has: {}", names.join(", "))))
            }
        }
        None => match names.len() {
            0 => Err(usage("this repository has no conference yet: write conference.md (`git conference init`) and run `git conference start`")),
            1 => Ok(names[0].clone()),
            _ => Err(usage(format!(
                "this repository has several conferences ({}); name one, e.g. `git conference {command} {}`",
                names.join(", "),
                names[0]
            ))),
        },
    }
}

/// Asks a yes/no question on the terminal (default on empty answer).
pub fn confirm(question: &str, default: bool) -> bool {
    use std::io::Write;
    eprint!("{question} [{}] ", if default { "Y/n" } else { "y/N" });
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() {
        return default;
    }
    match line.trim().to_lowercase().as_str() {
        "" => default,
        a => a.starts_with('y'),
    }
}

pub fn stdin_is_tty() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}
