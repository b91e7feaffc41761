//! Which refs `clean --all` may delete. The conference's own namespace
//! (`refs/conference/<name>/…`: event log, attempts) is the tool's and goes, and so do its views
//! of shared remotes (`refs/conference-shared/<remote>/<name>/…`). Its branches
//! (`refs/heads/conference/<name>/…`) live among the user's, so one goes only when its tip is a
//! commit the conference recorded (or one of that commit's ancestors: a kill between an event
//! and the branch move leaves it a step behind). A commit the user made on the best branch, a
//! branch the conference never made, and the branch some worktree has checked out (HEAD) are
//! kept, and named.

use std::path::Path;

use anyhow::Result;
use git2::{Oid, Repository};

use crate::store::refs::SHARED_REMOTE_VIEWS;
use crate::store::ConferenceRefs;

/// What `clean --all` does with the conference's refs.
#[derive(Debug, Default)]
pub struct RefPlan {
    pub delete: Vec<String>,
    /// Kept refs, each with why (one line each in the output).
    pub kept: Vec<String>,
}

/// Sorts every ref of conference `name` into deleted and kept (see the module comment).
pub fn plan(repo: &Repository, name: &str) -> Result<RefPlan> {
    let refs = ConferenceRefs::new(name);
    let [own, branches] = prefixes(&refs);
    let mut plan = RefPlan {
        delete: ref_names(repo, &own)?,
        kept: Vec::new(),
    };
    // Requests `steer`, `answer`, `stop` and `approve` left for a runner (`engine::phases::talk`).
    plan.delete
        .extend(ref_names(repo, &format!("{}*", refs.inbox()))?);
    let views = ref_names(repo, &format!("{SHARED_REMOTE_VIEWS}*"))?;
    plan.delete.extend(
        views
            .into_iter()
            .filter(|r| refs.is_in_shared_remote_view(r)),
    );
    let recorded = recorded_commits(repo, name, &refs);
    let checked_out = checked_out_branches(repo);
    for full in ref_names(repo, &branches)? {
        let short = full.trim_start_matches("refs/heads/").to_string();
        let tip = repo.find_reference(&full).ok().and_then(|r| r.target());
        if checked_out.contains(&full) {
            plan.kept.push(format!(
                "{short}: it is checked out (HEAD); switch to another branch, then delete it with `git branch -D {short}`"
            ));
        } else if !ours_by_name(&refs, &full) {
            plan.kept.push(format!(
                "{short}: not a branch the conference makes; delete it with `git branch -D {short}` if you do not need it"
            ));
        } else if !tip.is_some_and(|t| is_recorded(repo, &recorded, t)) {
            let at = tip.map(crate::model::short_oid).unwrap_or_default();
            plan.kept.push(format!(
                "{short}: its tip {at} is not a commit the conference recorded (yours?); delete it with `git branch -D {short}` if you do not need it"
            ));
        } else {
            plan.delete.push(full);
        }
    }
    Ok(plan)
}

fn prefixes(refs: &ConferenceRefs) -> [String; 2] {
    let p = refs.owned_prefixes();
    [format!("{}*", p[0]), format!("{}*", p[1])]
}

fn ref_names(repo: &Repository, glob: &str) -> Result<Vec<String>> {
    Ok(repo
        .references_glob(glob)?
        .filter_map(|r| r.ok().and_then(|r| r.name().map(str::to_string)))
        .collect())
}

/// The best branch, or a researcher branch (`researcher-<id>`).
fn ours_by_name(refs: &ConferenceRefs, full: &str) -> bool {
    full == refs.best()
        || full
            .strip_prefix(&refs.researcher(""))
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// The commits the conference's state names, and the tip of its attempts chain (every attempt
/// is reachable from it).
fn recorded_commits(repo: &Repository, name: &str, refs: &ConferenceRefs) -> Vec<Oid> {
    let mut out = Vec::new();
    if let Ok(conf) = crate::engine::Conference::view(repo.path(), name) {
        let st = conf.state();
        out.extend([st.best.commit.oid(), st.baseline_commit.oid()]);
        for r in st.researchers.values() {
            out.extend([r.head.oid(), r.round_start.oid()]);
        }
    }
    if let Some(t) = repo
        .find_reference(&refs.attempts())
        .ok()
        .and_then(|r| r.target())
    {
        out.push(t);
    }
    out
}

fn is_recorded(repo: &Repository, recorded: &[Oid], tip: Oid) -> bool {
    recorded
        .iter()
        .any(|&r| r == tip || repo.graph_descendant_of(r, tip).unwrap_or(false))
}

/// Fully qualified branches checked out in any worktree of the repository (HEAD of each).
fn checked_out_branches(repo: &Repository) -> Vec<String> {
    let top = repo.commondir().to_path_buf();
    let list =
        crate::git::git(Path::new(&top), &["worktree", "list", "--porcelain"]).unwrap_or_default();
    let mut out: Vec<String> = list
        .lines()
        .filter_map(|l| l.strip_prefix("branch "))
        .map(str::to_string)
        .collect();
    // A bare repository's worktree list omits HEAD; an unborn HEAD is not listed either.
    if let Ok(Some(head)) = repo
        .find_reference("HEAD")
        .map(|h| h.symbolic_target().map(str::to_string))
    {
        out.push(head);
    }
    out
}
