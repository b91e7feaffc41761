//! Recovery: what a run does before anything else, so that a kill at any instant loses nothing
//! and repeats nothing. The event log is the truth; branches, notes, worktrees and git's lock
//! files are brought back in line with it here ([`reconcile`]), and a branch that
//! points where no run of the program leaves it stops a resume (or is set aside with `--force`).
//! Refs whose objects git lost are put back by `store::recovery` before this runs.

use std::path::Path;

use anyhow::{Context, Result};
use git2::{Oid, Repository};
use serde_json::Value;

use crate::engine::agent::{integrity, workspace};
use crate::engine::measure::evaluate::EvalResult;
use crate::engine::record::{recorder, set_aside};
use crate::engine::state::files;
use crate::engine::{Conference, PROGRAM_REFLOG_MESSAGE, STALE_LOCK_AGE};
use crate::git::{snapshot, worktree};
use crate::model::event::{self as events, Event, EventLine};
use crate::model::notes::BranchSetAsideNote;
use crate::model::{CommitId, EvalStatus, Verdict};
use crate::store::notes;

/// Brings branches, notes and worktrees in line with the recorded state (after a crash, a
/// kill, or on a fresh clone). Partial work found in a worktree is recorded, never dropped. A
/// branch moved by hand stops it (see `check_branches`) unless `force`, which sets the
/// commits aside as recorded attempts first.
pub fn reconcile(conf: &Conference, force: bool) -> Result<Vec<String>> {
    clear_stale_locks(conf)?;
    if let Some(said) = integrity::recover_config(&conf.open_repo()?, &conf.run_dir) {
        conf.ui.warn(&said);
    }
    // First, so that any later event's notes commit may say "noted through" truthfully.
    replay_missing_notes(conf)?;
    let moved = check_branches(conf)?;
    if !moved.is_empty() && !force {
        return Err(moved_branches_error(&conf.open_repo()?, &conf.name, &moved));
    }
    let mut set_aside_trees = Vec::new();
    for m in &moved {
        set_aside_trees.push(set_aside_branch(conf, m)?);
    }
    let st = conf.state();
    let mut reverted = Vec::new();
    for (id, r) in &st.researchers {
        conf.move_branch(&conf.refs.researcher(id), &r.head, None)?;
        let branch = conf.refs.researcher_branch(id);
        let label = format!("researcher-{id}");
        let repo = conf.open_repo()?;
        let path = worktree::worktree_path(&repo, &conf.name, &label);
        if path.exists() {
            // Broken links are repaired with the files as they are, so what they hold is
            // recorded below rather than lost.
            worktree::ensure(
                &repo,
                &conf.name,
                &label,
                worktree::Checkout::Branch(&branch),
            )?;
        }
        if let Ok(wt) = crate::engine::agent::workspace::open_worktree(conf, &path) {
            // A commit set aside above, still checked out there, is recorded already.
            let already = !set_aside_trees.is_empty()
                && snapshot::capture(&wt).is_ok_and(|s| set_aside_trees.contains(&s.tree));
            // Partial work, or changes made by hand in any phase: recorded, never dropped.
            // (Not in a worktree whose setup never completed: no agent ran there, and what
            // it holds is a killed setup's output.)
            if !already && workspace::set_up(conf, &wt) {
                if let Some(commit) = set_aside::set_aside_partial(conf, id, &wt)? {
                    reverted.push(format!("{id}:{commit}"));
                }
            }
        }
        conf.prepare_worktree(&label, Some(&branch), &r.head)?;
    }
    conf.move_branch(&conf.refs.best(), &st.best.commit, None)?;
    Ok(reverted)
}

/// The conference's branches that point where no run of the program can leave them.
///
/// Every move the program makes goes forward, right after the event that records it: a
/// kept attempt (a child of the researcher's head), a round start (a merge of the head and
/// best, or a fast-forward to best), a knowledge-transfer pick (a child of best). A kill
/// between the event and the move leaves the branch one such step behind the recorded
/// commit: at its first parent, or, when the researcher's last move was its round start, at
/// an ancestor of it. A missing branch is created. Anything else (a commit made in a
/// worktree, `git branch -f`, `git update-ref`) was done by hand and is not overwritten
/// unless it was set aside already (its note says so).
fn check_branches(conf: &Conference) -> Result<Vec<MovedBranch>> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    let mut expected: Vec<(String, Option<String>, &CommitId, bool)> = st
        .researchers
        .iter()
        .map(|(id, r)| {
            (
                conf.refs.researcher_branch(id),
                Some(id.clone()),
                &r.head,
                r.head == r.round_start,
            )
        })
        .collect();
    expected.push((conf.refs.best_branch(), None, &st.best.commit, false));
    let mut moved = Vec::new();
    for (branch, researcher, want, fast_forward) in expected {
        let want = want.oid();
        let Some(found) = repo
            .find_reference(&format!("refs/heads/{branch}"))
            .ok()
            .and_then(|r| r.target())
        else {
            continue;
        };
        if found == want {
            continue;
        }
        let behind = repo.find_commit(want)?.parent_id(0).ok() == Some(found)
            || (fast_forward && repo.graph_descendant_of(want, found).unwrap_or(false));
        if behind
            || was_set_aside(conf, &repo, found, &branch)?
            || moved_there_by_the_program(&repo, &format!("refs/heads/{branch}"), found)
        {
            continue;
        }
        moved.push(MovedBranch {
            branch,
            researcher,
            found,
            expected: want,
        });
    }
    Ok(moved)
}

/// Whether `commit` was set aside from `branch` already (a resume killed before it moved the
/// branch back).
fn was_set_aside(conf: &Conference, repo: &Repository, commit: Oid, branch: &str) -> Result<bool> {
    let Some(note) = notes::read_note(repo, commit)? else {
        return Ok(false);
    };
    Ok(note.lines().any(|l| {
        serde_json::from_str::<Value>(l).is_ok_and(|v| {
            v["verdict"] == "set_aside" && v["branch"] == branch && v["conference"] == conf.name
        })
    }))
}

/// `resume --force`: the commit a hand-moved branch points to is kept reachable, recorded
/// (`branch.set_aside`, with a note), and the branch goes back to the recorded commit.
/// Returns the set-aside commit's tree.
fn set_aside_branch(conf: &Conference, m: &MovedBranch) -> Result<Oid> {
    let repo = conf.open_repo()?;
    let found = repo.find_commit(m.found).with_context(|| {
        format!(
            "branch {} points to {}, which is not a commit; point it back with `git branch -f {} {}`",
            m.branch, m.found, m.branch, m.expected
        )
    })?;
    conf.keep_reachable(&[m.found])?;
    let st = conf.state();
    let note = BranchSetAsideNote {
        commit: m.found.into(),
        conference: conf.name.clone(),
        verdict: "set_aside",
        branch: m.branch.clone(),
        researcher: m.researcher.clone(),
        round: st.round,
        expected: m.expected.into(),
    };
    conf.record(
        Event::BranchSetAside(events::BranchSetAside {
            branch: m.branch.clone(),
            researcher: m.researcher.clone(),
            round: st.round,
            commit: m.found.into(),
            expected: m.expected.into(),
            subject: found.summary().unwrap_or("").to_string(),
            notes: vec![note.into()],
        }),
        &format!(
            "{} moved by hand to {}; set aside",
            m.branch,
            &crate::model::short_oid(m.found)
        ),
        vec![],
    )?;
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!(
            "warning: branch {} was moved by hand to {}; set aside as a recorded attempt (event branch.set_aside, kept reachable from {}) and put back at {}\n",
            m.branch,
            &crate::model::short_oid(m.found),
            conf.refs.attempts(),
            &crate::model::short_oid(m.expected)
        ),
    );
    conf.move_branch(
        &format!("refs/heads/{}", m.branch),
        &m.expected.into(),
        Some(&m.found.into()),
    )?;
    Ok(found.tree_id())
}

/// A run killed while git wrote a worktree's index or HEAD, or one of this conference's refs,
/// leaves its `.lock` file behind, and every later write fails with "locked". Only a runner
/// holding the conference's run lock calls this, so no live process owns those files.
fn clear_stale_locks(conf: &Conference) -> Result<()> {
    let repo = conf.open_repo()?;
    let mut labels: Vec<String> = conf
        .state()
        .researchers
        .keys()
        .map(|id| format!("researcher-{id}"))
        .collect();
    labels.extend(["best".to_string(), "review".to_string()]);
    for label in labels {
        let path = worktree::worktree_path(&repo, &conf.name, &label);
        if let Ok(wt) = Repository::open(&path) {
            for file in ["index.lock", "HEAD.lock"] {
                let _ = std::fs::remove_file(wt.path().join(file));
            }
        }
    }
    clear_stale_ref_locks(repo.commondir(), &conf.name);
    clear_shared_locks(repo.commondir());
    Ok(())
}

/// Notes are written after their event, in batches; a kill in between leaves notes missing,
/// and evaluation cache entries not yet in the state tree. A live process writes both before
/// it records `round.completed`, and a resume replays them before it records
/// `conference.resumed`: only events after the latest of those two can lack them, so the
/// walk stops there (resume cost does not grow with the log).
///
/// Notes commits also say up to which event everything is written ("noted through", see
/// `Recorder::flush_notes`): the walk stops there too, so it covers at most a batch of events
/// even in a long round.
fn replay_missing_notes(conf: &Conference) -> Result<()> {
    let mut rec = conf.recorder.lock().unwrap();
    let mut pending: Vec<(Oid, String)> = Vec::new();
    let mut cache: Vec<(String, Vec<u8>)> = Vec::new();
    let settings = rec.state.eval_settings.clone();
    let noted_through = notes::noted_through(&rec.repo, &conf.name)?;
    // No mark of this conference in the notes: they were deleted (or never marked), so the
    // checkpoints below prove nothing and every event's notes are replayed.
    let whole_log = noted_through.is_none();
    rec.log.walk(&rec.repo, |e| {
        if Some(e.commit) == noted_through
            || (!whole_log
                && matches!(
                    e.event.event.as_str(),
                    events::names::ROUND_COMPLETED | events::names::RESUMED
                ))
        {
            return false;
        }
        pending.extend(recorder::notes_of_line(&e.event));
        cache.extend(cached_evaluation_of_event(&e.event, &settings));
        true
    })?;
    // Oldest first, so that a later result for the same tree wins, as it did when recorded.
    for (path, bytes) in cache.into_iter().rev() {
        if rec.log.read(&rec.repo, &path)?.is_none() {
            rec.pending_cache.insert(path, bytes);
        }
    }
    let mut missing = Vec::new();
    for (commit, line) in pending {
        let present = notes::read_note(&rec.repo, commit)?
            .map(|n| n.lines().any(|l| l == line))
            .unwrap_or(false);
        if !present && rec.repo.find_commit(commit).is_ok() {
            missing.push((commit, line));
        }
    }
    missing.reverse();
    // After a whole-log replay, a mark keeps the next resume's walk to a batch.
    let marker = match rec.log.tip() {
        Some(through) if whole_log && rec.pending_cache.is_empty() => Some(notes::Marker {
            name: &conf.name,
            through,
            force: true,
        }),
        _ => None,
    };
    notes::append_lines(&rec.repo, &missing, marker)?;
    Ok(())
}

/// Removes lock files left on the refs of conference `name` by a killed run. Call it only with
/// the conference's run lock held (no live process of this conference writes them then).
pub fn clear_stale_ref_locks(common_dir: &Path, name: &str) {
    for prefix in [
        format!("refs/conference/{name}"),
        format!("refs/heads/conference/{name}"),
    ] {
        remove_lock_files(&common_dir.join(prefix));
    }
}

/// Removes the lock files a killed process left on the refs `names` (each a ref, or a folder of
/// refs, under the common dir) that only the caller writes: call it only holding the lock that
/// keeps every other writer of them out (a killed `git conference fetch`, or the `git fetch` it
/// ran, leaves them on its tracking refs, and every later fetch would fail on them).
pub fn clear_stale_locks_of(common_dir: &Path, names: &[&str]) {
    for name in names {
        let path = common_dir.join(name);
        remove_lock_files(&path);
        let _ = std::fs::remove_file(common_dir.join(format!("{name}.lock")));
    }
}

/// The lock files every git process of the repository shares that a conference writes through:
/// the notes ref and `packed-refs` (see [`clear_shared_lock`]).
pub fn clear_shared_locks(common_dir: &Path) {
    for shared in ["refs/notes/conference.lock", "packed-refs.lock"] {
        clear_shared_lock(&common_dir.join(shared));
    }
}

/// A lock file shared with every git process of the repository (`packed-refs.lock`): a live
/// writer holds it for an instant, so a fresh one is waited for until it goes or turns a second
/// old (its age is read from the file, so one left long ago by a killed run costs nothing). One
/// that a live process has open is never removed, however old: it is named and left alone.
/// Returns how many times it waited (20 ms each).
fn clear_shared_lock(path: &Path) -> u32 {
    let deadline = std::time::Instant::now() + STALE_LOCK_AGE;
    let mut waits = 0;
    while let Ok(meta) = std::fs::metadata(path) {
        let age = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .unwrap_or_default();
        if age >= STALE_LOCK_AGE || std::time::Instant::now() >= deadline {
            let holders = crate::lock::processes_holding(path);
            match holders.first() {
                None => {
                    let _ = std::fs::remove_file(path);
                }
                Some((pid, name)) => crate::errln!(
                    "warning: {} is held by process {pid} ({name}); left alone (git commands that rewrite packed refs wait for it)",
                    path.display()
                ),
            }
            return waits;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        waits += 1;
    }
    waits
}

/// Removes `*.lock` files under `dir` (recursively); a missing folder is fine.
fn remove_lock_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            remove_lock_files(&path);
        } else if path.extension().is_some_and(|e| e == "lock") {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A conference branch that points where the event log does not put it.
struct MovedBranch {
    /// Short name, e.g. `conference/x/researcher-A`.
    branch: String,
    researcher: Option<String>,
    found: Oid,
    expected: Oid,
}

/// The error that stops a resume on hand-moved branches: which, where, and how to go on.
fn moved_branches_error(repo: &Repository, name: &str, moved: &[MovedBranch]) -> anyhow::Error {
    let mut text = format!(
        "conference `{name}`: {} moved outside the conference; nothing was changed.\n",
        if moved.len() == 1 {
            "a branch was"
        } else {
            "branches were"
        }
    );
    for m in moved {
        let subject = repo
            .find_commit(m.found)
            .ok()
            .and_then(|c| c.summary().map(|s| format!(" (\"{s}\")")))
            .unwrap_or_default();
        text.push_str(&format!(
            "  {} points to {}{subject}, but the event log expects {}\n",
            m.branch,
            &crate::model::short_oid(m.found),
            &crate::model::short_oid(m.expected)
        ));
    }
    text.push_str(&format!(
        "To go on, either let resume record those commits as set-aside attempts (kept reachable, \
         with a note) and put the branches back:\n  git conference resume {name} --force\n\
         or keep the work on a branch of your own and put the branches back yourself:\n"
    ));
    for (i, m) in moved.iter().enumerate() {
        let keep = if moved.len() == 1 {
            "my-work".to_string()
        } else {
            format!("my-work-{}", i + 1)
        };
        text.push_str(&format!("  git branch {keep} {}\n", m.found));
        text.push_str(&format!(
            "  git update-ref refs/heads/{} {} {}\n",
            m.branch, m.expected, m.found
        ));
    }
    anyhow::anyhow!(text.trim_end().to_string())
}

/// Whether the program itself moved `refname` to `found` (its reflog's newest entry says so):
/// a step whose event git lost (see `store::recovery`), put back where the state says, not a
/// move by hand.
fn moved_there_by_the_program(repo: &Repository, refname: &str, found: Oid) -> bool {
    repo.reflog(refname).is_ok_and(|log| {
        log.get(0).is_some_and(|newest| {
            newest.id_new() == found && newest.message() == Some(PROGRAM_REFLOG_MESSAGE)
        })
    })
}

/// The evaluation cache entry an iteration event stands for (path and bytes), rebuilt from its
/// payload: the same entry `record_iteration` stores for it.
fn cached_evaluation_of_event(event: &EventLine, settings: &str) -> Option<(String, Vec<u8>)> {
    if event.event != events::names::ITERATION {
        return None;
    }
    let p = &event.payload;
    p.get("commit")?.as_str()?;
    // Logs written before the `evaluated` flag: an agent failure has no evaluation runs.
    let evaluated = p
        .get("evaluated")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| {
            p.get("notes")
                .and_then(|n| n.get(0))
                .and_then(|n| n.get("runs"))
                .and_then(Value::as_array)
                .is_some_and(|runs| !runs.is_empty())
                || p.get("status").and_then(Value::as_str) != Some("crashed")
                    && p.get("status").and_then(Value::as_str) != Some("timeout")
        });
    if !evaluated {
        return None;
    }
    let tree = p.get("tree")?.as_str()?;
    let status = match Verdict::parse(p.get("status")?.as_str()?)? {
        Verdict::Kept | Verdict::Reverted => EvalStatus::Ok.as_str(),
        Verdict::Crashed => EvalStatus::Crashed.as_str(),
        Verdict::Timeout => EvalStatus::Timeout.as_str(),
        // A pruned run was not measured in full: a later attempt with its tree is evaluated.
        Verdict::Rejected | Verdict::NoChange | Verdict::Pruned => return None,
    };
    let metric = p.get("metric_value").and_then(Value::as_f64);
    let note = p.get("notes").and_then(|n| n.get(0));
    let result = EvalResult {
        metric,
        runs: note
            .and_then(|n| serde_json::from_value(n.get("runs")?.clone()).ok())
            .unwrap_or_default(),
        sub_metrics: serde_json::from_value(p.get("sub_metrics")?.clone()).unwrap_or_default(),
        status: status.to_string(),
        reason: p.get("reason").and_then(Value::as_str).map(str::to_string),
        seconds: 0.0,
        curve: note
            .and_then(|n| serde_json::from_value(n.get("curve")?.clone()).ok())
            .unwrap_or_default(),
        pruned: None,
        placement: None,
        launcher_failed: false,
    };
    Some((
        files::eval_cache(settings, tree),
        serde_json::to_vec(&result).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    //! What recovery decides on states built here: a real repository in a tempdir, a
    //! conference started in it, then its branches and lock files put where a kill, a
    //! program step or a person's hand leaves them.

    use super::*;
    use crate::ui::Ui;

    #[test]
    fn a_shared_lock_left_long_ago_is_removed_without_waiting_a_fresh_one_is_waited_for() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("packed-refs.lock");
        std::fs::write(&lock, "").unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let file = std::fs::File::options().write(true).open(&lock).unwrap();
        file.set_modified(hour_ago).unwrap();
        drop(file);
        assert_eq!(
            clear_shared_lock(&lock),
            0,
            "an hour-old lock was waited for"
        );
        assert!(!lock.exists());

        std::fs::write(&lock, "").unwrap();
        assert!(
            clear_shared_lock(&lock) > 0,
            "a fresh lock was not waited for"
        );
        assert!(!lock.exists(), "a lock nobody holds stays after its second");
    }

    const CONFIG: &str = "# Conference: Recovery\n\n## Goal\nLower the score.\n\n## Mode\nmetric\n\n\
        ## Success Metric\n- **Metric:** score\n- **Target:** none\n- **Direction:** minimize\n\n\
        ## Researchers\n- **Count:** 2\n- **Iterations per round:** 1\n- **Max rounds:** 1\n\n\
        ## Search Space Partitioning\n**Strategy:** free\n\n## Noise Handling\n- **Noise runs:** 1\n\n\
        ## Constraints\n- **Max total iterations:** 10\n\n\
        ## Evaluation\n- command: ./eval.sh\n- timeout: 30s\n- frozen: eval.sh\n\n\
        ## Agent\n- command: true\n- timeout: 30s\n";

    /// A repository with one commit (`eval.sh`) and conference `rec` started from it, its
    /// branches and worktrees made by a first reconcile.
    fn started() -> (tempfile::TempDir, Conference, Oid) {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init(tmp.path()).unwrap();
        let mut cfg = repo.config().unwrap();
        cfg.set_str("user.name", "Test").unwrap();
        cfg.set_str("user.email", "test@example.com").unwrap();
        std::fs::write(tmp.path().join("eval.sh"), "#!/bin/sh\necho 'score: 1'\n").unwrap();
        let base = commit(&repo, "eval.sh", "baseline", &[]);
        let config = crate::config::load(CONFIG).unwrap();
        let conf = Conference::create(
            repo.path(),
            "rec",
            config,
            CONFIG.to_string(),
            base,
            Ui::new(true),
        )
        .unwrap();
        reconcile(&conf, false).unwrap();
        (tmp, conf, base)
    }

    /// A commit of the work tree's `file` on top of `parents`, naming no ref.
    fn commit(repo: &Repository, file: &str, subject: &str, parents: &[Oid]) -> Oid {
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(file)).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Test", "test@example.com").unwrap();
        let parents: Vec<_> = parents
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let parents: Vec<_> = parents.iter().collect();
        repo.commit(None, &sig, &sig, subject, &tree, &parents)
            .unwrap()
    }

    /// A commit on top of `parent` that changes `eval.sh`'s neighbour `notes.txt`.
    fn child_of(conf: &Conference, parent: Oid, subject: &str) -> Oid {
        let repo = conf.open_repo().unwrap();
        let top = repo.workdir().unwrap().to_path_buf();
        std::fs::write(top.join("notes.txt"), subject).unwrap();
        commit(&repo, "notes.txt", subject, &[parent])
    }

    fn point(conf: &Conference, branch: &str, to: Oid, why: &str) {
        let repo = conf.open_repo().unwrap();
        repo.reference(&format!("refs/heads/{branch}"), to, true, why)
            .unwrap();
    }

    fn tip(conf: &Conference, branch: &str) -> Oid {
        let repo = conf.open_repo().unwrap();
        let r = repo
            .find_reference(&format!("refs/heads/{branch}"))
            .unwrap();
        r.target().unwrap()
    }

    #[test]
    fn a_fresh_start_has_every_branch_where_the_state_puts_it() {
        let (_tmp, conf, base) = started();
        assert!(check_branches(&conf).unwrap().is_empty());
        assert_eq!(tip(&conf, &conf.refs.researcher_branch("A")), base);
        assert_eq!(tip(&conf, &conf.refs.best_branch()), base);
    }

    #[test]
    fn a_branch_moved_by_hand_stops_the_resume_and_says_how_to_go_on() {
        let (_tmp, conf, base) = started();
        let branch = conf.refs.researcher_branch("B");
        let hand = child_of(&conf, base, "my own idea");
        point(&conf, &branch, hand, "by hand");
        let moved = check_branches(&conf).unwrap();
        assert_eq!(moved.len(), 1);
        assert_eq!(
            (moved[0].branch.as_str(), moved[0].found),
            (branch.as_str(), hand)
        );
        assert_eq!(moved[0].researcher.as_deref(), Some("B"));
        let said = reconcile(&conf, false).unwrap_err().to_string();
        assert!(
            said.contains("a branch was moved outside the conference"),
            "{said}"
        );
        assert!(said.contains("(\"my own idea\")"), "{said}");
        assert!(said.contains("git conference resume rec --force"), "{said}");
        assert!(said.contains(&format!("git update-ref refs/heads/{branch} {base} {hand}")));
        // Nothing was changed: the branch still points to the hand-made commit.
        assert_eq!(tip(&conf, &branch), hand);
    }

    #[test]
    fn force_sets_a_hand_moved_branch_aside_and_puts_it_back() {
        let (_tmp, conf, base) = started();
        let branch = conf.refs.best_branch();
        let hand = child_of(&conf, base, "moved best");
        point(&conf, &branch, hand, "by hand");
        let events_before = conf.state().events;
        reconcile(&conf, true).unwrap();
        assert_eq!(tip(&conf, &branch), base);
        assert_eq!(conf.state().events, events_before + 1);
        assert_eq!(conf.state().last_event, events::names::BRANCH_SET_ASIDE);
        let repo = conf.open_repo().unwrap();
        assert!(was_set_aside(&conf, &repo, hand, &branch).unwrap());
        // A second resume finds nothing to set aside: the branch is back.
        assert!(check_branches(&conf).unwrap().is_empty());
    }

    #[test]
    fn a_commit_set_aside_already_is_not_a_hand_move_again() {
        let (_tmp, conf, base) = started();
        let branch = conf.refs.researcher_branch("A");
        let hand = child_of(&conf, base, "work");
        point(&conf, &branch, hand, "by hand");
        reconcile(&conf, true).unwrap();
        // A resume killed after the set-aside and before the branch moved back.
        point(&conf, &branch, hand, "by hand");
        assert!(check_branches(&conf).unwrap().is_empty());
    }

    #[test]
    fn a_branch_the_program_moved_last_is_put_back_not_stopped_on() {
        let (_tmp, conf, base) = started();
        let branch = conf.refs.researcher_branch("A");
        let lost = child_of(&conf, base, "a step whose event git lost");
        point(&conf, &branch, lost, PROGRAM_REFLOG_MESSAGE);
        assert!(check_branches(&conf).unwrap().is_empty());
        reconcile(&conf, false).unwrap();
        assert_eq!(tip(&conf, &branch), base);
    }

    #[test]
    fn a_missing_branch_is_made_again() {
        let (_tmp, conf, base) = started();
        let branch = conf.refs.researcher_branch("B");
        let repo = conf.open_repo().unwrap();
        repo.find_reference(&format!("refs/heads/{branch}"))
            .unwrap()
            .delete()
            .unwrap();
        assert!(check_branches(&conf).unwrap().is_empty());
        reconcile(&conf, false).unwrap();
        assert_eq!(tip(&conf, &branch), base);
    }

    #[test]
    fn notes_deleted_after_their_events_are_written_again() {
        let (_tmp, conf, base) = started();
        let branch = conf.refs.researcher_branch("A");
        let hand = child_of(&conf, base, "work");
        point(&conf, &branch, hand, "by hand");
        reconcile(&conf, true).unwrap();
        conf.flush_notes().unwrap();
        let repo = conf.open_repo().unwrap();
        assert!(notes::read_note(&repo, hand).unwrap().is_some());
        // Someone deletes the notes ref (or a kill came before the batch was written).
        repo.find_reference(crate::store::NOTES_REF)
            .unwrap()
            .delete()
            .unwrap();
        assert!(notes::read_note(&repo, hand).unwrap().is_none());
        reconcile(&conf, false).unwrap();
        let note = notes::read_note(&repo, hand).unwrap().unwrap();
        assert!(note.contains("\"verdict\":\"set_aside\""), "{note}");
        assert!(was_set_aside(&conf, &repo, hand, &branch).unwrap());
    }

    #[test]
    fn lock_files_a_killed_run_left_on_the_conference_refs_are_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let refs = tmp.path().join("refs/conference/rec/deep");
        let others = tmp.path().join("refs/conference/other");
        std::fs::create_dir_all(&refs).unwrap();
        std::fs::create_dir_all(&others).unwrap();
        for file in [
            refs.join("events.lock"),
            refs.join("events"),
            others.join("x.lock"),
        ] {
            std::fs::write(file, "").unwrap();
        }
        clear_stale_ref_locks(tmp.path(), "rec");
        assert!(!refs.join("events.lock").exists());
        assert!(refs.join("events").exists());
        assert!(others.join("x.lock").exists());
    }
}
