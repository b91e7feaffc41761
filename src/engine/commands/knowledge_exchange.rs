//! The repository-wide knowledge store (`refs/conference-knowledge/store`) between clones: `push`
//! and `fetch` carry it, and so does a conference on several machines (`start --remote` and
//! `join` take the shared remote's store before the run, every machine gives its own back as it
//! leaves), so a lab's second conference, on another box, is briefed with what the first learnt.
//! The remote's store is always merged into the local one first (entries of both survive, see
//! `store::knowledge::merge`): a push only adds.

use anyhow::Result;
use git2::{Oid, Repository};

use crate::git::git_remote;
use crate::remote::push::{push, Expect, Pushed, Update};
use crate::remote::ONLY_THE_REFSPECS;
use crate::store::knowledge::Merged;
use crate::store::refs::KNOWLEDGE_REF;

/// How many times giving the store back is tried when another machine gave its own first.
const GIVE_TRIES: u32 = 5;

/// Where `fetch` and `push` put the remote's knowledge store before merging it.
fn scratch(remote: &str) -> String {
    format!(
        "{}/knowledge",
        crate::store::refs::remote_tracking_namespace(remote)
    )
}

fn target(repo: &Repository, name: &str) -> Option<Oid> {
    repo.find_reference(name).ok().and_then(|r| r.target())
}

/// Where git runs for `repo`.
fn dir(repo: &Repository) -> &std::path::Path {
    repo.workdir().unwrap_or(repo.commondir())
}

/// Fetches the remote's knowledge store and merges it into the local one; what it took, in a
/// line. None: the remote has none, or nothing new.
pub fn take(repo: &Repository, remote: &str) -> Result<Option<String>> {
    let scratch = scratch(remote);
    let spec = format!("+{KNOWLEDGE_REF}:{scratch}");
    let argv = ["fetch", "--quiet", ONLY_THE_REFSPECS, remote, spec.as_str()];
    if let Err(e) = git_remote(dir(repo), &argv) {
        if format!("{e:#}").contains("couldn't find remote ref") {
            // The remote has none (any more): what it had before says nothing now.
            if let Ok(mut stale) = repo.find_reference(&scratch) {
                stale.delete()?;
            }
            return Ok(None);
        }
        return Err(e);
    }
    let Some(theirs) = target(repo, &scratch) else {
        return Ok(None);
    };
    let said = match crate::store::knowledge::merge(repo, theirs, remote)? {
        Merged::UpToDate => return Ok(None),
        Merged::FastForward => format!("Knowledge: took {remote}'s entries ({KNOWLEDGE_REF})."),
        Merged::Merged { both_changed } => format!(
            "Knowledge: merged {remote}'s entries with this clone's ({KNOWLEDGE_REF}){}.",
            if both_changed > 0 {
                format!("; {both_changed} entry(ies) changed on both sides, both copies kept")
            } else {
                String::new()
            }
        ),
    };
    Ok(Some(said))
}

/// The refspec that pushes the knowledge store, once the remote's is merged into it (so the
/// push only adds); None when this clone has no store.
pub fn to_push(repo: &Repository, remote: &str, force: bool) -> Result<Option<String>> {
    if target(repo, KNOWLEDGE_REF).is_none() {
        return Ok(None);
    }
    if !force {
        if let Some(line) = take(repo, remote)? {
            eprintln!("{line}");
        }
    }
    let plus = if force { "+" } else { "" };
    Ok(Some(format!("{plus}{KNOWLEDGE_REF}:{KNOWLEDGE_REF}")))
}

/// Gives this clone's knowledge store to the shared remote of a conference on several machines:
/// the remote's merged in first, then one compare-and-swap push from the value fetched (tried
/// again when another machine gave its own meanwhile). What it did, in a line; None when the
/// remote had everything already.
pub fn give(repo: &Repository, remote: &str) -> Result<Option<String>> {
    for _ in 0..GIVE_TRIES {
        take(repo, remote)?;
        let Some(ours) = target(repo, KNOWLEDGE_REF) else {
            return Ok(None);
        };
        let theirs = target(repo, &scratch(remote));
        if theirs == Some(ours) {
            return Ok(None);
        }
        let update = Update {
            name: KNOWLEDGE_REF.to_string(),
            new: Some(ours),
            expect: theirs.map_or(Expect::Absent, Expect::At),
        };
        if push(dir(repo), remote, &[update])? == Pushed::Accepted {
            return Ok(Some(format!(
                "Knowledge: gave this clone's entries to {remote} ({KNOWLEDGE_REF})."
            )));
        }
    }
    anyhow::bail!("{remote}'s knowledge store kept moving for {GIVE_TRIES} tries")
}
