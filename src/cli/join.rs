//! `join`, and what `start --remote` shares with it: running a conference on several machines
//! through one shared git remote (`engine::shared`, `remote::link`).

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use crate::engine::state::Phase;
use crate::engine::Conference;
use crate::error::usage;
use crate::git::worktree;
use crate::remote::link::{valid_machine_name, Link, Wanted};
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

pub fn join(args: JoinArgs, quiet: bool) -> Result<i32> {
    crate::exec::process::handle_early_interrupts();
    super::run::interrupted_or(join_conference(args, quiet))
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
    let run_dir = worktree::run_dir(&repo, &name);
    let _lock = super::run::take_over(&run_dir, &name)?;
    for lost in crate::store::recovery::recover(&repo, &crate::store::ConferenceRefs::new(&name))? {
        ui.warn(&format!("warning: {}", lost.describe()));
    }
    if let Some(said) = worktree::make_worktrees_own(&repo, &name)? {
        ui.warn(&format!("warning: {said}"));
    }
    let conf = Conference::open(repo.path(), &name, ui.clone()).context("cannot join")?;
    super::run::gate(&repo, &name, &conf.config, None)?;
    conf.reconcile(false)?;
    let link = link(&repo, &conf, &args.remote, &args.machine)?;
    conf.share(link.clone());
    conf.sync_shared()?;
    if conf.state().phase == Phase::Done {
        crate::outln!(
            "Conference `{name}` is already complete; read it with `git conference report {name}`."
        );
        return Ok(0);
    }
    if let Some(slot) = link.running_elsewhere(&repo)? {
        return Err(usage(format!(
            "machine `{}` already takes part in `{name}` from another clone (its lease of {slot} on {} was renewed just now): two clones under one name would take each other's leases. Give this clone its own name: `git conference join {} {name} --machine NAME`",
            link.machine, args.remote, args.remote
        )));
    }
    ui.info(&format!(
        "{} joins `{name}` on {}",
        link.machine, args.remote
    ));
    super::run::run_engine(conf)
}

/// This machine's link to `remote` for `conf`, with what `machine` asks it to run.
pub fn link(
    repo: &git2::Repository,
    conf: &Conference,
    remote: &str,
    machine: &MachineArgs,
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
