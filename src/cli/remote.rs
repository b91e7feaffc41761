//! `push` and `fetch`: share every ref and note of a conference through the user's own `git`
//! (credential helpers, ssh config and insteadOf apply). Fetched notes are merged with
//! `cat_sort_uniq`, so verdicts recorded on two machines both survive.

use anyhow::Result;
use clap::Args;

use crate::git::git;
use crate::store::{ConferenceRefs, NOTES_REF};

/// Push a conference's refs and the conference notes to a remote.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// Remote (default: origin).
    #[arg(default_value = "origin")]
    pub remote: String,
    /// Conference name (default: the only conference of the repository).
    #[arg(long)]
    pub name: Option<String>,
}

/// Fetch a conference's refs and notes from a remote.
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
    let name = super::resolve_name(&repo, args.name)?;
    let refs = ConferenceRefs::new(&name);
    let dir = repo.commondir().to_path_buf();
    let mut cmd = vec!["push".to_string(), args.remote.clone()];
    cmd.extend(refs.refspecs());
    if repo.find_reference(NOTES_REF).is_ok() {
        cmd.push(format!("{NOTES_REF}:{NOTES_REF}"));
    }
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    git(&dir, &argv)?;
    println!("Pushed conference `{name}` to {}.", args.remote);
    Ok(0)
}

pub fn fetch(args: FetchArgs) -> Result<i32> {
    let repo = super::discover()?;
    let dir = repo.commondir().to_path_buf();
    let pattern = args.name.clone().unwrap_or_else(|| "*".into());
    let remote_notes = format!("refs/notes/conference-remotes/{}", args.remote);
    let specs = [
        format!("+refs/conference/{pattern}:refs/conference/{pattern}"),
        format!("+refs/heads/conference/{pattern}:refs/heads/conference/{pattern}"),
        format!("+{NOTES_REF}:{remote_notes}"),
    ];
    let mut argv = vec!["fetch", args.remote.as_str()];
    argv.extend(specs.iter().map(String::as_str));
    if git(&dir, &argv).is_err() {
        // The remote may have no notes yet: fetch the refs alone.
        let mut argv = vec!["fetch", args.remote.as_str()];
        argv.extend(specs[..2].iter().map(String::as_str));
        git(&dir, &argv)?;
    }
    if repo.find_reference(&remote_notes).is_ok() {
        if repo.find_reference(NOTES_REF).is_ok() {
            git(
                &dir,
                &[
                    "notes",
                    "--ref",
                    "conference",
                    "merge",
                    "-q",
                    "-s",
                    "cat_sort_uniq",
                    &remote_notes,
                ],
            )?;
        } else {
            git(&dir, &["update-ref", NOTES_REF, &remote_notes])?;
        }
    }
    println!(
        "Fetched conferences from {}: {}",
        args.remote,
        super::conference_names(&repo)?.join(", ")
    );
    Ok(0)
}
