//! `push` and `fetch`: their arguments; the exchange itself (what is pushed, how a fetched
//! conference is taken without rewinding it, how notes and the knowledge store are merged) is
//! `engine::commands::exchange`'s.

use anyhow::Result;
use clap::Args;

/// Push a conference's refs and the conference notes to a remote.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// Remote (default: origin).
    #[arg(default_value = "origin")]
    pub remote: String,
    /// Conference name (default: the only conference of the repository).
    #[arg(long)]
    pub name: Option<String>,
    /// Overwrite the remote's copy even when it has events this repository lacks.
    #[arg(long)]
    pub force: bool,
}

/// Fetch a conference's refs and notes from a remote. A conference only moves forward: its refs
/// are taken where the remote's event log continues the local one; a local log that is ahead is
/// kept, a diverged one is refused (the remote's stays under refs/conference-remotes/<remote>/).
#[derive(Args, Debug)]
pub struct FetchArgs {
    /// Remote (default: origin).
    #[arg(default_value = "origin")]
    pub remote: String,
    /// Conference name (default: every conference on the remote).
    #[arg(long)]
    pub name: Option<String>,
}

pub fn push(args: PushArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, args.name, "push")?;
    crate::engine::commands::exchange::push(&repo, &name, &args.remote, args.force)?;
    Ok(0)
}

pub fn fetch(args: FetchArgs) -> Result<i32> {
    let repo = super::discover()?;
    crate::engine::commands::exchange::fetch(&repo, &args.remote, args.name.as_deref())?;
    Ok(0)
}
