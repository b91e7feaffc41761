//! `trust`: shows every command a conference would run and records this clone's approval (see
//! `crate::trust`). A conference fetched from another clone runs nothing until then.

use anyhow::Result;
use clap::Args;

use crate::engine::Conference;
use crate::error::usage;

/// Approve the commands a conference runs (agent, evaluation, hold-out, judge, guards, setup,
/// prose roles). A conference fetched from another clone, or whose commands changed since the
/// approval, runs nothing until this clone approves them. The approval is recorded in the local
/// git config (`conference.<name>.trusted`), which is never pushed or fetched.
#[derive(Args, Debug)]
pub struct TrustArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    /// Approve without asking (for scripts).
    #[arg(long)]
    pub yes: bool,
}

pub fn run(args: TrustArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, args.name, "trust")?;
    let conf = Conference::view(repo.path(), &name)?;
    let st = conf.state();
    let base = st.baseline_commit.oid();
    // What the next run runs: on several machines, `join` runs the stored settings; else what
    // `resume` would run, the user's edited conference.md when it changes the stored one.
    let shared = st.runs_on_several_machines()
        || (st.phase != crate::model::state::Phase::Done
            && !crate::remote::lease::seen(&repo, conf.refs()).is_empty());
    let plan = match shared {
        true => None,
        false => crate::engine::run::settings::plan(&repo, &conf, None, base)?,
    };
    let cfg = plan.as_ref().map_or(conf.config(), |p| &p.config);
    if shared && crate::engine::run::settings::local_commands_differ(&repo, &conf) {
        crate::outln!(
            "note: your conference.md names other commands; `{name}` runs on several machines, where `join` runs the stored ones (below). Change them with `git conference resume {name}` on one machine once it has stopped."
        );
    }
    crate::outln!("Conference `{name}` runs these commands on this machine:");
    crate::outln!("{}", crate::trust::describe(cfg).trim_end());
    if crate::trust::is_trusted(&repo, &name, cfg) {
        crate::outln!("This clone trusts them already.");
        return Ok(0);
    }
    if !args.yes {
        if !super::stdin_is_tty() {
            return Err(usage(format!(
                "not approved: read the commands above, then run `git conference trust {name} --yes` (or answer on a terminal)"
            )));
        }
        if !super::confirm("Run these commands for this conference?", false) {
            crate::outln!("Not approved; `{name}` runs nothing.");
            return Ok(1);
        }
    }
    crate::trust::approve(&repo, &name, cfg)?;
    match shared {
        true => crate::outln!("Approved: `git conference join REMOTE {name}` runs them."),
        false => crate::outln!("Approved: `git conference resume {name}` runs them."),
    }
    Ok(0)
}
