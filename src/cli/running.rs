//! What `start`, `resume` and `join` share in the CLI: the arguments that say what this
//! machine runs of a conference on several machines, what a run that ended says (and its exit
//! code), and a failure after a Ctrl-C told as the graceful stop it is.

use anyhow::Result;
use clap::Args;

use crate::engine::run::session::{self as engine_run, Ended, MachineOptions};
use crate::engine::RunOutcome;
use crate::error::{EXIT_INTERRUPTED, EXIT_PAUSED};

/// What this machine runs of a conference on several machines.
#[derive(Args, Debug, Default)]
pub struct MachineArgs {
    /// Researchers this machine claims (default: every free one), e.g. `A,B`. Researchers
    /// whose machine fell silent are taken over whatever this says.
    #[arg(long, value_delimiter = ',', conflicts_with = "slots")]
    pub researchers: Option<Vec<String>>,
    /// Run at most this many researchers at once, takeovers included.
    #[arg(long)]
    pub slots: Option<usize>,
    /// This machine's name in leases and events (default: the host's name and a suffix kept in
    /// this clone's git config, `conference.machine`).
    #[arg(long)]
    pub machine: Option<String>,
}

impl MachineArgs {
    /// What the engine is asked to run on this machine.
    pub fn options(&self) -> MachineOptions {
        MachineOptions {
            researchers: self.researchers.clone(),
            slots: self.slots,
            machine: self.machine.clone(),
        }
    }
}

/// A failure after a Ctrl-C is the press's doing (a git child spawned at that instant caught it
/// too): everything that finished is recorded and `resume` finishes the rest, so it is the
/// graceful stop the press asked for, not an error.
pub fn interrupted_or(result: Result<i32>) -> Result<i32> {
    match (result, engine_run::running()) {
        (Err(e), Some(name)) if crate::exec::process::cancelled() => {
            crate::errln!("git-conference: {e:#}");
            crate::errln!(
                "git-conference: interrupted; what finished is recorded. Continue with `{}`.",
                engine_run::continue_command(name)
            );
            Ok(EXIT_INTERRUPTED)
        }
        (Err(e), Some(name)) => Err(engine_run::said_of_git(e, name)),
        (result, _) => result,
    }
}

/// What a run that ended says, and its exit code: 0 when the conference completed, 3 paused,
/// 130 interrupted.
pub fn said_of_end(ended: Ended) -> i32 {
    let Ended {
        outcome,
        name,
        state: st,
        metric_name,
        best_branch,
        continue_with,
    } = ended;
    match outcome {
        RunOutcome::Completed(status) => {
            crate::outln!(
                "Conference `{name}` {status}: best {} = {} at {} (branch {}).",
                metric_name,
                crate::render::format::fmt(st.best.metric),
                crate::model::short_id(&st.best.commit),
                best_branch
            );
            let program = crate::ui::invocation();
            crate::outln!("Report: {program} report {name} --output <dir>   ·   Apply: {program} apply {name}");
            0
        }
        RunOutcome::Paused => {
            crate::outln!("Conference `{name}` paused after round {} (pause_every). Continue with `git conference resume {name}`.", st.round);
            EXIT_PAUSED
        }
        RunOutcome::Waiting(why) => {
            crate::outln!("Conference `{name}` paused: {why}");
            EXIT_PAUSED
        }
        RunOutcome::Interrupted => {
            crate::errln!(
                "git-conference: interrupted; what finished is recorded. Continue with `{}`.",
                continue_with
            );
            EXIT_INTERRUPTED
        }
    }
}
