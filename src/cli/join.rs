//! `join`, and what `start --remote` shares with it: the arguments of running a conference on
//! several machines through one shared git remote (`engine::run::session::join`, `engine::run::shared`,
//! `remote::link`).

use anyhow::Result;
use clap::Args;

use super::running::MachineArgs;
use crate::engine::run::session::{self as engine_run, JoinOptions, Outcome};
use crate::ui::Ui;

/// Take part in a conference that runs on several machines: fetch it from REMOTE, run the
/// researchers this machine claims, take over those whose machine fell silent for longer than
/// the lease, and the chair's phases (poster, review, transfer) when no machine holds them.
/// Runs only commands this clone trusts (`git conference trust NAME`). Exits when the
/// conference ends.
#[derive(Args, Debug)]
pub struct JoinArgs {
    /// The shared remote: a remote's name, a path or a URL.
    pub remote: String,
    /// Conference name (default: the only conference on the remote).
    pub name: Option<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
}

pub fn join(args: JoinArgs, quiet: bool) -> Result<i32> {
    crate::exec::process::handle_early_interrupts();
    super::running::interrupted_or(join_conference(args, quiet))
}

fn join_conference(args: JoinArgs, quiet: bool) -> Result<i32> {
    let repo = super::discover()?;
    let known = super::conference_names(&repo)?;
    // A conference this clone already has catches up through the link: its unpublished events
    // are published or, for slots taken over meanwhile, dropped.
    if args.name.as_ref().is_none_or(|n| !known.contains(n)) {
        super::remote::fetch(super::remote::FetchArgs {
            remote: args.remote.clone(),
            name: args.name.clone(),
        })?;
    }
    let name = super::resolve_name_for(&repo, args.name.clone(), "join")?;
    let ui = Ui::new(quiet);
    let opts = JoinOptions {
        name: name.clone(),
        remote: args.remote.clone(),
        machine: args.machine.options(),
    };
    match engine_run::join(&repo, opts, &ui)? {
        Outcome::AlreadyComplete(_) => {
            crate::outln!(
                "Conference `{name}` is already complete; read it with `git conference report {name}`."
            );
            Ok(0)
        }
        Outcome::Ended(ended) => Ok(super::running::said_of_end(ended)),
    }
}
