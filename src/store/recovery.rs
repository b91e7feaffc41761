//! Conference refs whose objects git lost, put back from their reflogs.
//!
//! `git gc --prune=now` run while a conference writes can delete the objects of the last few
//! steps: they are written (loose, unreachable) before the ref that makes them reachable moves,
//! and a prune that computed reachability before the move removes them after it. The ref then
//! names a commit that no longer exists and every command fails with `object not found`.
//!
//! Every conference ref keeps a reflog ([`keep_log`]: git logs `refs/heads` and `refs/notes` by
//! default, `refs/conference` only when its log exists), so the positions before the loss are
//! known. [`recover`] moves each ref whose commit is incomplete back to the newest reflog entry
//! whose commit, tree and parent are all present. The event log is the commit point: going back
//! to an earlier event is what a kill before the lost steps would have left, and `resume` redoes
//! them.

use anyhow::Result;
use git2::{ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};

use super::refs::{ConferenceRefs, NOTES_REF, SHARED_REMOTE_VIEWS};
use crate::model::short_oid;

/// Makes git keep a reflog of `name` (a no-op when it has one).
pub fn keep_log(repo: &Repository, name: &str) {
    let _ = repo.reference_ensure_log(name);
}

/// One ref put back: where it pointed (objects gone) and where it points now.
#[derive(Debug)]
pub struct Recovered {
    pub refname: String,
    pub lost: Oid,
    pub restored: Option<Oid>,
}

impl Recovered {
    /// What happened and what the user can look at, for a warning line.
    pub fn describe(&self) -> String {
        let lost = short_oid(self.lost);
        match self.restored {
            Some(to) => format!(
                "{} pointed at {lost}, whose objects are gone (a `git gc --prune=now` while the \
                 conference ran?); put back at {}, the newest complete entry of its reflog \
                 (`git reflog show {}`); the steps after it run again",
                self.refname,
                short_oid(to),
                self.refname
            ),
            None => format!(
                "{} points at {lost}, whose objects are gone, and no entry of its reflog is \
                 complete (`git reflog show {}`): restore the objects from a clone or a push \
                 (`git conference fetch`), or remove the conference (`git conference clean --all`)",
                self.refname, self.refname
            ),
        }
    }
}

/// Puts back every ref of conference `refs` (and the shared notes ref) that points at a commit
/// git no longer has whole. Returns what was found; an empty list when nothing was lost.
pub fn recover(repo: &Repository, refs: &ConferenceRefs) -> Result<Vec<Recovered>> {
    let mut names = vec![refs.events(), refs.attempts(), NOTES_REF.to_string()];
    for prefix in refs.owned_prefixes() {
        for reference in repo.references_glob(&format!("{prefix}*"))?.flatten() {
            if let Some(name) = reference.name() {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
    }
    let mut out = Vec::new();
    for name in names {
        let Ok(target) = repo.refname_to_id(&name) else {
            continue;
        };
        if complete(repo, target) {
            continue;
        }
        let restored = newest_complete_entry(repo, &name, target)?;
        if let Some(to) = restored {
            repo.reference_matching(
                &name,
                to,
                true,
                target,
                "git conference: put back after its objects were lost",
            )?;
            // After the move, so that the move's own entry is chained to a present commit.
            drop_lost_entries(repo, &name)?;
        }
        out.push(Recovered {
            refname: name,
            lost: target,
            restored,
        });
    }
    Ok(out)
}

/// Deletes this clone's copies of conference `refs`'s refs on shared remotes (its views,
/// `refs/conference-shared/…`, and the leases) that name a commit git does not have whole (a
/// clone copied while it fetched, objects deleted under it): a fetch reads every ref as a
/// commit this clone has, fails on a missing one and is not sent what a broken one hides. The
/// next fetch brings them again. Returns the names deleted.
pub fn drop_broken_views(repo: &Repository, refs: &ConferenceRefs) -> Result<Vec<String>> {
    let mut dropped = Vec::new();
    let leases = refs.lease("");
    for glob in [format!("{SHARED_REMOTE_VIEWS}*"), format!("{leases}*")] {
        for reference in repo.references_glob(&glob)?.flatten() {
            let (Some(name), Some(target)) = (reference.name(), reference.target()) else {
                continue;
            };
            let copy = refs.is_in_shared_remote_view(name) || name.starts_with(&leases);
            if copy && !complete(repo, target) {
                dropped.push(name.to_string());
            }
        }
    }
    for name in &dropped {
        repo.find_reference(name)?.delete()?;
    }
    Ok(dropped)
}

fn newest_complete_entry(repo: &Repository, name: &str, lost: Oid) -> Result<Option<Oid>> {
    let reflog = repo.reflog(name)?;
    Ok(reflog
        .iter()
        .map(|entry| entry.id_new())
        .find(|id| *id != lost && !id.is_zero() && complete(repo, *id)))
}

/// Removes the reflog entries that name lost commits (as `git reflog expire --stale-fix` would),
/// so that `git fsck` is clean again once the ref is back.
fn drop_lost_entries(repo: &Repository, name: &str) -> Result<()> {
    let mut reflog = repo.reflog(name)?;
    let lost: Vec<usize> = reflog
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.id_new().is_zero() && repo.find_commit(e.id_new()).is_err())
        .map(|(i, _)| i)
        .collect();
    for i in lost.into_iter().rev() {
        reflog.remove(i, true)?;
    }
    reflog.write()?;
    Ok(())
}

/// The commit, its first parent and every object of its tree are present.
pub fn complete(repo: &Repository, commit: Oid) -> bool {
    let Ok(c) = repo.find_commit(commit) else {
        return false;
    };
    if c.parent_count() > 0 && c.parent(0).is_err() {
        return false;
    }
    let Ok(tree) = c.tree() else { return false };
    let Ok(odb) = repo.odb() else { return false };
    let mut whole = true;
    let _ = tree.walk(TreeWalkMode::PreOrder, |_, entry| {
        let present = match entry.kind() {
            Some(ObjectType::Blob) | Some(ObjectType::Tree) => odb.exists(entry.id()),
            _ => true, // submodule commits live elsewhere
        };
        if present {
            TreeWalkResult::Ok
        } else {
            whole = false;
            TreeWalkResult::Abort
        }
    });
    whole
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A commit of one file holding `text`, on no ref.
    fn commit_of(repo: &Repository, text: &str) -> (Oid, Oid) {
        let blob = repo.blob(text.as_bytes()).unwrap();
        let mut tree = repo.treebuilder(None).unwrap();
        tree.insert("f", blob, 0o100644).unwrap();
        let tree = repo.find_tree(tree.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let commit = repo.commit(None, &sig, &sig, text, &tree, &[]).unwrap();
        (commit, blob)
    }

    #[test]
    fn a_view_of_the_shared_remote_naming_objects_not_here_whole_is_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init(tmp.path()).unwrap();
        let refs = ConferenceRefs::new("c");
        let (whole, _) = commit_of(&repo, "whole");
        let (broken, blob) = commit_of(&repo, "broken");
        let hex = blob.to_string();
        std::fs::remove_file(repo.path().join("objects").join(&hex[..2]).join(&hex[2..])).unwrap();
        let view = |of: &str, what: &str| format!("{SHARED_REMOTE_VIEWS}origin/{of}/{what}");
        for (name, target) in [
            (view("c", "events"), whole),
            (view("c", "machines/m1/attempts"), broken),
            (view("other", "events"), broken),
            (refs.lease("A"), broken),
        ] {
            repo.reference(&name, target, true, "test").unwrap();
        }

        let dropped = drop_broken_views(&repo, &refs).unwrap();
        assert_eq!(
            dropped,
            [view("c", "machines/m1/attempts"), refs.lease("A")]
        );
        assert!(repo.find_reference(&view("c", "events")).is_ok());
        assert!(
            repo.find_reference(&view("other", "events")).is_ok(),
            "another conference's view is its own"
        );
    }
}
