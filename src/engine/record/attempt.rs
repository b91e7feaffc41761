//! An attempt as a commit: the tree a researcher's worktree holds, committed on the branch's
//! head with the researcher as author and kept reachable before anything records it (so a kill
//! between the two loses nothing). Research commits its attempts here, and so does recovery when
//! it sets aside the partial work a kill left in a worktree.

use anyhow::Result;
use git2::{Oid, Repository};

use crate::engine::Conference;
use crate::git::snapshot;
use crate::model::CommitId;
use crate::store;

/// What an attempt's commit and records say of it.
pub(in crate::engine) struct Attempt<'a> {
    pub(in crate::engine) id: &'a str,
    pub(in crate::engine) iteration: u32,
    pub(in crate::engine) tree: Oid,
    pub(in crate::engine) head: &'a CommitId,
    pub(in crate::engine) description: &'a str,
    /// What the agent reported using (presets and built-in HTTP agents).
    pub(in crate::engine) usage: Option<crate::agents::Usage>,
    /// Seconds the agent ran (None: no agent run made it).
    pub(in crate::engine) agent_s: Option<f64>,
    /// The questions its note asked (`QUESTION: …`).
    pub(in crate::engine) questions: Vec<crate::model::talk::Asked>,
    /// What the agent did outside its worktree that is reported, not undone (its writes into the
    /// user's working tree): added to the attempt's reason, whatever the verdict.
    pub(in crate::engine) remark: Option<&'a str>,
    /// With branching on: the node it started from (`head` is its commit) and what its note
    /// asked of the tree (`BRANCH: …`).
    pub(in crate::engine) branch: Option<AttemptBranch>,
    /// With `Parameter sweep: on`: the sweep this attempt is the best variant of.
    pub(in crate::engine) sweep: Option<&'a SweepDone>,
    /// A `SWEEP:` line that could not be followed, and why.
    pub(in crate::engine) sweep_warning: Option<String>,
}

/// A sweep as measured: its record (values, commits, metrics, the chosen one) and each
/// variant's evaluation with whether it measured the tree (what the evaluation cache keeps).
#[derive(Debug, Clone)]
pub(in crate::engine) struct SweepDone {
    pub(in crate::engine) record: crate::model::sweep::Sweep,
    pub(in crate::engine) results: Vec<(crate::engine::measure::evaluate::EvalResult, bool)>,
}

/// Where an attempt stands in the tree of ideas (branching on).
#[derive(Debug, Clone)]
pub(in crate::engine) struct AttemptBranch {
    pub(in crate::engine) from: crate::model::tree::Node,
    pub(in crate::engine) request: Option<crate::model::tree::BranchRequest>,
}

/// An agent that committed, switched branches or moved HEAD in its worktree is put back: the
/// branch at `head`, and HEAD on it, or detached at `base` when the attempt starts from another
/// node of the tree (branching on). Only the files count.
pub(in crate::engine) fn restore_base(
    wt: &Repository,
    branch_ref: &str,
    head: &CommitId,
    base: &CommitId,
) -> Result<()> {
    if base == head {
        return restore_head(wt, branch_ref, head);
    }
    let current = wt.find_reference(branch_ref).ok().and_then(|r| r.target());
    if current != Some(head.oid()) {
        wt.reference(
            branch_ref,
            head.oid(),
            true,
            "git conference: undo an agent's commit",
        )?;
    }
    let detached_at_base = wt.head_detached().unwrap_or(false)
        && wt.head().ok().and_then(|h| h.target()) == Some(base.oid());
    if !detached_at_base {
        wt.set_head_detached(base.oid())?;
    }
    Ok(())
}

/// An agent that committed or switched branches in its worktree is put back: only the files count.
pub(in crate::engine) fn restore_head(
    wt: &Repository,
    branch_ref: &str,
    expected: &CommitId,
) -> Result<()> {
    let expected = expected.oid();
    let current = wt.find_reference(branch_ref).ok().and_then(|r| r.target());
    if current != Some(expected) {
        wt.reference(
            branch_ref,
            expected,
            true,
            "git conference: undo an agent's commit",
        )?;
    }
    let head_ok = wt
        .head()
        .ok()
        .and_then(|h| h.name().map(str::to_string))
        .as_deref()
        == Some(branch_ref);
    if !head_ok {
        wt.set_head(branch_ref)?;
    }
    Ok(())
}

pub(in crate::engine) fn default_description(changed: &[String]) -> String {
    match changed {
        [] => "no change".into(),
        paths if paths.len() <= 3 => format!("change {}", paths.join(", ")),
        paths => format!(
            "change {} and {} more files",
            paths[..2].join(", "),
            paths.len() - 2
        ),
    }
}

/// The line of an attempt's commit message that names the attempt: the tree of ideas tells an
/// attempt's own commit from the node it started from by it (`lineage`).
pub(in crate::engine) fn attempt_trailer(id: &str, round: u32, iteration: u32) -> String {
    format!("Researcher {id} · round {round} · iteration {iteration}")
}

/// The commit message of attempt `a` (or, with `variant`, of one of its sweep's variants): its
/// description's first line, the variant's line, the trailer and the conference.
pub(in crate::engine) fn attempt_message(
    conf: &Conference,
    a: &Attempt,
    round: u32,
    variant: Option<&str>,
) -> String {
    format!(
        "{}\n\n{}{}\nConference: {}\n",
        a.description.lines().next().unwrap_or("change"),
        variant.map(|v| format!("{v}\n")).unwrap_or_default(),
        attempt_trailer(a.id, round, a.iteration),
        conf.name
    )
}

pub(in crate::engine) fn commit_attempt(
    conf: &Conference,
    repo: &Repository,
    a: &Attempt,
) -> Result<Oid> {
    let st = conf.state();
    let message = attempt_message(conf, a, st.round, None);
    let author = store::researcher_signature(repo, a.id);
    let commit = snapshot::commit(repo, a.tree, &[a.head.oid()], &message, &author)?;
    crate::failpoint::hit("snapshot.committed");
    // Reachable before it is recorded: a kill now loses no attempt.
    conf.keep_reachable(&[commit])?;
    crate::failpoint::hit("snapshot.reachable");
    Ok(commit)
}
