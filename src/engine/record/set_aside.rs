//! Partial work a kill left in a researcher's worktree, found by recovery on resume: committed
//! as an attempt, kept reachable and recorded as `attempt.interrupted` (and nested repositories
//! an agent left moved out of the worktree), never silently deleted.

use anyhow::Result;
use git2::Repository;

use crate::engine::record::attempt::{commit_attempt, default_description, restore_base, Attempt};
use crate::engine::state::files;
use crate::engine::Conference;
use crate::git::snapshot;
use crate::model::event::{self as events, Event, Note};
use crate::model::notes::InterruptedNote;
use crate::model::{AttemptRecord, EvalStatus};
use crate::store::StateChange;

/// A nested repository a killed run's agent left may hold commits of its own: it is moved out
/// of the worktree (which a reset would otherwise clear), never deleted.
pub(in crate::engine) fn set_aside_nested_repos(
    conf: &Conference,
    id: &str,
    wt: &Repository,
    nested: &[String],
) -> Result<()> {
    let Some(workdir) = wt.workdir() else {
        return Ok(());
    };
    // One folder for everything set aside at this instant: a clock tick between two nested
    // repositories must not split them over two folders.
    let folder = conf
        .run_dir
        .join("set-aside")
        .join(format!("researcher-{id}-{}", crate::engine::now_unix()));
    for rel in nested {
        let to = folder.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(workdir.join(rel), &to)?;
        crate::errln!(
            "warning: researcher {id}'s worktree held a nested git repository {rel}/ (left by an interrupted agent); moved to {}",
            to.display()
        );
    }
    Ok(())
}

/// On resume: a worktree caught mid-iteration holds a partial attempt. It is committed, kept
/// reachable and recorded (`attempt.interrupted`), never silently deleted. Returns its commit.
pub(in crate::engine) fn set_aside_partial(
    conf: &Conference,
    id: &str,
    wt: &Repository,
) -> Result<Option<String>> {
    let st = conf.state();
    let r = st.researcher(id);
    let repo = conf.open_repo()?;
    // The worktree holds the node the next attempt starts from (branching on), else the head.
    let base = r.next.as_ref().map_or(&r.head, |n| &n.commit);
    let head = base.oid();
    let head_tree = repo.find_commit(head)?.tree_id();
    restore_base(wt, &conf.refs.researcher(id), &r.head, base)?;
    let snap = snapshot::capture(wt)?;
    set_aside_nested_repos(conf, id, wt, &snap.nested_repos)?;
    let tree = snap.tree;
    if tree == head_tree {
        return Ok(None);
    }
    // Already recorded (killed after the event, before the reset)?
    let recorded = crate::engine::record::ledger::recent_attempts(conf, id)?
        .iter()
        .any(|a| a.tree == tree.to_string());
    if recorded {
        return Ok(None);
    }
    // Still the snapshot the round started from (killed after `round.started` moved the branch,
    // before the worktree followed): nothing new.
    let stale = repo
        .find_commit(head)?
        .parents()
        .any(|p| p.tree_id() == tree);
    if stale {
        return Ok(None);
    }
    let changed = snapshot::changed_paths(&repo, head_tree, tree)?;
    let description = format!("interrupted attempt: {}", default_description(&changed));
    let attempt = Attempt {
        id,
        iteration: r.round_iterations + 1,
        tree,
        head: base,
        description: &description,
        usage: None,
        agent_s: None,
        questions: vec![],
        remark: None,
        branch: None,
        sweep: None,
        sweep_warning: None,
    };
    let commit = commit_attempt(conf, &repo, &attempt)?;
    eprintln!(
        "warning: researcher {id}'s worktree has uncommitted changes ({}); setting them aside as \
         attempt {} (recorded as attempt.interrupted; nothing is deleted)",
        changed.join(", "),
        &crate::model::short_oid(commit)
    );
    let note = Note::from(InterruptedNote {
        commit: commit.into(),
        conference: conf.name.clone(),
        researcher: id.to_string(),
        round: st.round,
        iteration: attempt.iteration,
        verdict: EvalStatus::Interrupted,
    });
    // Also in the researcher's attempts (the tuner skips `interrupted` ones), so a resume killed
    // before the worktree was reset finds it recorded instead of recording it again.
    let record = AttemptRecord {
        round: st.round,
        researcher: id.to_string(),
        iteration: attempt.iteration,
        commit: Some(commit.into()),
        tree: tree.to_string(),
        metric: None,
        delta: None,
        verdict: AttemptRecord::interrupted(),
        description: description.clone(),
        reason: Some("set aside on resume".into()),
        timestamp: crate::engine::now_iso(),
        sub_metrics: Default::default(),
        tokens: None,
        cost_usd: None,
        agent_s: None,
        eval_s: None,
        placement: None,
        machine: conf.link().map(|link| link.machine.clone()),
        sweep: None,
    };
    conf.record(
        Event::AttemptInterrupted(events::AttemptInterrupted {
            researcher: id.to_string(),
            round: st.round,
            commit: commit.into(),
            tree: tree.to_string(),
            notes: vec![note],
        }),
        &format!("{id} r{} partial attempt set aside", st.round),
        vec![StateChange::AppendLine(
            files::attempts(st.round.max(1)),
            serde_json::to_string(&record)?,
        )],
    )?;
    Ok(Some(commit.to_string()))
}
