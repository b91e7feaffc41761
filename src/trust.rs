//! The trust gate: a conference runs only commands this clone approved.
//!
//! A conference's config travels with it (`push`, `fetch`), and its config names commands (see
//! `config::commands`). Running those on `resume` in another clone would let whoever pushed it
//! run anything on this machine. So an approval is recorded per conference in the LOCAL git config
//! (`conference.<name>.trusted = <digest of the command list>`), which git never fetches or
//! pushes. `start` records it (the user wrote the file); `git conference trust NAME` records it
//! after showing every command; `resume` runs nothing unless the commands it would run match it.
//!
//! A conference this clone ran before approvals existed (its worktrees were made here) is
//! trusted as it stands, once, and the approval recorded.

use git2::{ConfigLevel, Repository};

use crate::config::commands;
use crate::config::Config;

/// The local git config key holding conference `name`'s approval.
pub fn key(name: &str) -> String {
    format!("conference.{name}.trusted")
}

/// The digest this clone approved for conference `name`, if any (local config only).
pub fn approved(repo: &Repository, name: &str) -> Option<String> {
    let config = repo.config().ok()?.open_level(ConfigLevel::Local).ok()?;
    config.get_string(&key(name)).ok()
}

/// Records that this clone trusts `cfg`'s commands for conference `name`.
pub fn approve(repo: &Repository, name: &str, cfg: &Config) -> anyhow::Result<()> {
    let mut config = repo.config()?.open_level(ConfigLevel::Local)?;
    config.set_str(&key(name), &commands::digest(&commands::list(cfg)))?;
    Ok(())
}

/// Forgets the approval (when the conference is cleaned away).
pub fn forget(repo: &Repository, name: &str) {
    if let Ok(mut config) = repo.config().and_then(|c| c.open_level(ConfigLevel::Local)) {
        let _ = config.remove(&key(name));
    }
}

/// Whether this clone trusts `cfg`'s commands for conference `name`.
pub fn is_trusted(repo: &Repository, name: &str, cfg: &Config) -> bool {
    approved(repo, name).as_deref() == Some(commands::digest(&commands::list(cfg)).as_str())
}

/// Whether conference `name` ran in this clone before approvals were recorded: its worktree
/// folder was chosen here (a fetched conference has none until it runs).
pub fn ran_here_unrecorded(repo: &Repository, name: &str) -> bool {
    approved(repo, name).is_none() && crate::git::worktree::made_here(repo, name)
}

/// `cfg`'s commands, one per line, as `trust`, `status` and the refusal print them.
pub fn describe(cfg: &Config) -> String {
    let list = commands::list(cfg);
    let width = list.iter().map(|c| c.role.len()).max().unwrap_or(0);
    list.iter()
        .map(|c| format!("  {:width$}  {}\n", c.role, c.line))
        .collect()
}

/// The refusal `resume` (or any command that would run `cfg`) gives when it is not trusted.
pub fn refusal(name: &str, cfg: &Config) -> String {
    format!(
        "conference `{name}` would run commands this clone has not approved (it came from another \
         clone, or its commands changed since the approval):\n{}it runs nothing here until you approve them: \
         `git conference trust {name}` shows them again and records the approval (`--yes` for scripts)",
        describe(cfg)
    )
}
