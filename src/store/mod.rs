//! Everything git-conference stores in git, behind one module (DESIGN.md §3): ref names
//! (`refs`), the event log whose tip tree is the conference state (`events`), notes on snapshots
//! (`notes`), records files laid out in chunks (`chunks`), the chain that keeps every attempt reachable (`keep_reachable`), and the reflogs
//! that put refs back when git loses their objects (`recovery`).

pub mod cas;
pub mod chunks;
pub mod events;
pub mod knowledge;
pub mod notes;
pub mod protect;
pub mod recovery;
pub mod refs;

use anyhow::Result;
use git2::{Oid, Repository, Signature};

pub use events::{EventLine, EventLog, LoggedEvent, StateChange};
pub use refs::{ConferenceRefs, NOTES_REF};

/// The identity git-conference commits with: the user's, else a fixed one.
pub fn signature(repo: &Repository) -> Signature<'static> {
    repo.signature()
        .map(|s| s.to_owned())
        .unwrap_or_else(|_| Signature::now("git-conference", "git-conference@localhost").unwrap())
}

/// Snapshots are authored by the researcher that made them.
pub fn researcher_signature(repo: &Repository, id: &str) -> Signature<'static> {
    let email = signature(repo)
        .email()
        .unwrap_or("git-conference@localhost")
        .to_string();
    Signature::now(&researcher_name(id), &email).unwrap_or_else(|_| signature(repo))
}

/// The name researcher `id` signs with: its snapshots' author, and the committer its agent's
/// git commands write (so a ref an agent moves names it in the reflog).
pub fn researcher_name(id: &str) -> String {
    format!("Researcher {id} (git-conference)")
}

/// The researcher whose name (see [`researcher_name`]) `name` is.
pub fn researcher_of(name: &str) -> Option<&str> {
    let id = name
        .strip_prefix("Researcher ")?
        .strip_suffix(" (git-conference)")?;
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric())).then_some(id)
}

/// Makes `commits` reachable from `refs/conference/<name>/attempts` so that gc, fsck and push
/// keep every attempt, including reverted and crashed ones that are on no branch. Each link of
/// the chain is a merge of the previous one and the commits it keeps; `root` (the baseline,
/// with branching on) is the first link's other parent, so that every link is a merge and
/// `git log --graph --no-merges` of the chain draws the attempts' tree alone.
pub fn keep_reachable(
    repo: &Repository,
    refs: &ConferenceRefs,
    commits: &[Oid],
    root: Option<Oid>,
) -> Result<()> {
    if commits.is_empty() {
        return Ok(());
    }
    let name = refs.attempts();
    cas::with_backoff(&name, cas::SHARED_TRIES, || {
        let tip = cas::read(repo, &name)?;
        let mut parents = Vec::new();
        match (tip, root) {
            (Some(t), _) => parents.push(repo.find_commit(t)?),
            (None, Some(root)) => parents.push(repo.find_commit(root)?),
            (None, None) => {}
        }
        for c in commits {
            parents.push(repo.find_commit(*c)?);
        }
        let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
        let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
        let sig = signature(repo);
        let message = format!(
            "attempts: keep {}",
            commits
                .iter()
                .map(|c| crate::model::short_oid(*c))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let commit = repo.commit(None, &sig, &sig, &message, &empty, &parent_refs)?;
        let swapped = cas::try_update(repo, &name, commit, tip, "git conference: keep attempt")?;
        Ok(swapped.then_some(()))
    })
}
