//! Publishing this machine's events to the shared remote. The event log stays one chain, and
//! the remote serialises it: a machine pushes its new events by compare-and-swap from the tip it
//! last saw there; when another machine got there first, the push is refused, this machine
//! fetches the remote's tip and replays its own new events on top of it — each typed event
//! applied by the reducer to the remote's state, each file it added appended again — and tries
//! again. Nothing is forced and no event is lost or doubled.
//!
//! Only events of the research phase may be replayed: researchers on several machines record
//! them at the same time, and each touches its own researcher's part of the state (and appends
//! to a JSON-lines file). The chair's phases (poster, review, transfer, round start) run on the
//! one machine holding the chair's lease, after every researcher of the round has finished, so
//! their events are never concurrent; one found over another machine's events is refused
//! (`link::Refused`: no retry changes it).

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use git2::{Oid, Repository};

use super::push::{push, Expect, Pushed, Update};
use crate::model::event::Event;
use crate::model::state::{files, State};
use crate::store::events::{parse_event_commit, read_path, write_commit};
use crate::store::{ConferenceRefs, StateChange};

/// How many times a refused push is retried after a fetch before giving up (each retry means
/// another machine published in between: the conference is not lost, the caller tries later).
const TRIES: u32 = 20;

/// Pushes the local event log to `remote`, replaying it over events other machines published
/// meanwhile. Returns the published tip (which the local events ref then points at).
pub fn publish(repo: &Repository, dir: &Path, remote: &str, refs: &ConferenceRefs) -> Result<Oid> {
    let events = refs.events();
    let mut races = crate::store::cas::Backoff::new(
        std::time::Duration::from_millis(20),
        std::time::Duration::from_millis(640),
        None,
    );
    for _ in 0..TRIES {
        let local = repo
            .refname_to_id(&events)
            .with_context(|| format!("{events}: no local event log to publish"))?;
        let theirs = fetch_tip(repo, dir, remote, refs)?;
        let tip = match theirs {
            Some(theirs) if !repo.graph_descendant_of(local, theirs)? && local != theirs => {
                let replayed = replay_onto(repo, local, theirs, |_| true)?;
                crate::store::cas::update(
                    repo,
                    &events,
                    replayed,
                    Some(local),
                    "git conference: replayed over the remote's events",
                )?;
                replayed
            }
            _ => local,
        };
        let update = Update {
            name: events.clone(),
            new: Some(tip),
            expect: theirs.map_or(Expect::Absent, Expect::At),
        };
        match push(dir, remote, &[update])? {
            Pushed::Accepted => return Ok(tip),
            Pushed::Rejected(_) => std::thread::sleep(races.next_delay().unwrap_or_default()),
        }
    }
    bail!("{events}: the remote kept moving for {TRIES} tries; publish again later")
}

/// The remote's events tip now (None: not there yet), fetched into a remote-tracking ref so its
/// objects are here.
fn fetch_tip(
    repo: &Repository,
    dir: &Path,
    remote: &str,
    refs: &ConferenceRefs,
) -> Result<Option<Oid>> {
    let tracking = tracking_ref(remote, refs);
    let refspec = format!("+{}:{tracking}", refs.events());
    let fetched = crate::git::git_remote_output(
        dir,
        &["fetch", "-q", super::ONLY_THE_REFSPECS, remote, &refspec],
    )?;
    if !fetched.status.success() {
        let why = String::from_utf8_lossy(&fetched.stderr);
        if why.contains("couldn't find remote ref") {
            return Ok(None);
        }
        bail!("git fetch from {remote} failed: {}", why.trim());
    }
    Ok(Some(repo.refname_to_id(&tracking)?))
}

/// Where this machine keeps the remote's events tip as it last saw it.
pub fn tracking_ref(remote: &str, refs: &ConferenceRefs) -> String {
    let remote: String = remote
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}/events", refs.shared_remote_view(&remote))
}

/// Replays the local events after the last one both chains share onto `onto`, oldest first,
/// those `keep` accepts (the others are dropped); returns the new tip.
pub fn replay_onto(
    repo: &Repository,
    local: Oid,
    onto: Oid,
    keep: impl Fn(&Event) -> bool,
) -> Result<Oid> {
    let base = repo
        .merge_base(local, onto)
        .map_err(|_| anyhow!("the local event log and the remote's share no history"))?;
    let mut mine = Vec::new();
    let mut at = local;
    while at != base {
        mine.push(at);
        at = repo.find_commit(at)?.parent_id(0)?;
    }
    let mut tip = onto;
    for commit in mine.into_iter().rev() {
        tip = replay_one(repo, commit, tip, &keep)?;
    }
    Ok(tip)
}

/// The event of `commit` recorded again on top of `parent`: its state applied by the reducer to
/// the parent's state, the files it changed changed again there.
/// (Or `parent` itself when `keep` drops the event.)
fn replay_one(
    repo: &Repository,
    commit: Oid,
    parent: Oid,
    keep: &impl Fn(&Event) -> bool,
) -> Result<Oid> {
    let c = repo.find_commit(commit)?;
    let logged = parse_event_commit(commit, c.message().unwrap_or(""))?;
    let event = Event::parse(&logged.event)
        .ok_or_else(|| anyhow!("event {commit} ({}) cannot be read", logged.event.event))?;
    if !keep(&event) {
        return Ok(parent);
    }
    if !event.may_interleave() {
        // No retry changes it: the remote's events stay under it.
        return Err(super::link::Refused(format!(
            "a {} event cannot be published over another machine's events: the chair's phases run on one machine at a time",
            event.name()
        ))
        .into());
    }
    let parent_tree = repo.find_commit(parent)?.tree_id();
    let mut state: State = serde_json::from_slice(
        &read_path(repo, parent_tree, files::STATE)?.context("the remote's state.json")?,
    )?;
    event.apply(&mut state);
    let (machine, running_s) = (logged.event.machine(), logged.event.running_s());
    state.count_event(&event, &logged.event.timestamp, machine, running_s);
    let mut changes = files_changed(repo, &c, parent_tree)?;
    changes.push(StateChange::Put(
        files::STATE.into(),
        serde_json::to_vec_pretty(&state)?,
    ));
    write_commit(repo, Some(parent), &logged.event, &logged.summary, &changes)
}

/// What `commit` changed in the state tree besides state.json, as changes to make on the tree
/// `onto`: a JSON-lines file gets the lines the event added; any other file its new content.
fn files_changed(repo: &Repository, commit: &git2::Commit, onto: Oid) -> Result<Vec<StateChange>> {
    let old = commit.parent(0)?.tree()?;
    let new = commit.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut changes = Vec::new();
    for delta in diff.deltas() {
        let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
            continue;
        };
        let path = path.to_string_lossy().into_owned();
        if path == files::STATE {
            continue;
        }
        if delta.new_file().id().is_zero() {
            changes.push(StateChange::Remove(path));
            continue;
        }
        let after = repo.find_blob(delta.new_file().id())?.content().to_vec();
        let before = match delta.old_file().id() {
            id if id.is_zero() => Vec::new(),
            id => repo.find_blob(id)?.content().to_vec(),
        };
        let bytes = match after.strip_prefix(before.as_slice()) {
            Some(added) if path.ends_with(".jsonl") => {
                let mut theirs = read_path(repo, onto, &path)?.unwrap_or_default();
                theirs.extend_from_slice(added);
                theirs
            }
            _ => after,
        };
        changes.push(StateChange::Put(path, bytes));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{self as events, names};
    use crate::model::{EventLine, Verdict};
    use crate::remote::testing::git;
    use crate::store::EventLog;

    const BASE: &str = "0000000000000000000000000000000000000000";

    /// Records `event` as the recorder does: the reducer on the tip's state, the attempt's line
    /// appended to the round's attempts file.
    fn record(repo: &Repository, event: Event) {
        let mut log = EventLog::open(repo, ConferenceRefs::new("c")).unwrap();
        let mut state: State =
            serde_json::from_slice(&log.read(repo, files::STATE).unwrap().unwrap()).unwrap();
        event.apply(&mut state);
        state.events += 1;
        let line = event.line(format!("t{}", state.events));
        let changes = [
            StateChange::AppendLine("round-1/attempts.jsonl".into(), line.payload.to_string()),
            StateChange::Put(
                files::STATE.into(),
                serde_json::to_vec_pretty(&state).unwrap(),
            ),
        ];
        log.append(repo, &line, event.name(), &changes).unwrap();
    }

    fn iteration(researcher: &str, iteration: u32) -> Event {
        Event::Iteration(events::Iteration {
            researcher: researcher.into(),
            round: 1,
            iteration,
            metric_value: Some(11.0),
            delta: None,
            status: Verdict::Reverted.into(),
            commit: None,
            tree: BASE.into(),
            description: format!("{researcher} {iteration}"),
            reason: None,
            sub_metrics: Default::default(),
            evaluated: true,
            notes: vec![],
            tokens: None,
            cost_usd: None,
            agent_s: None,
            eval_s: None,
            questions: vec![],
            placement: None,
        })
    }

    /// A remote holding a conference's first event, and two machines that cloned it.
    fn two_machines() -> (tempfile::TempDir, [std::path::PathBuf; 2]) {
        let tmp = tempfile::tempdir().unwrap();
        let remote = tmp.path().join("remote.git");
        git(
            tmp.path(),
            &["init", "-q", "--bare", remote.to_str().unwrap()],
        );
        let dirs = ["m0", "m1"].map(|m| tmp.path().join(m));
        for dir in &dirs {
            git(tmp.path(), &["init", "-q", dir.to_str().unwrap()]);
            git(dir, &["remote", "add", "origin", remote.to_str().unwrap()]);
        }
        let repo = Repository::open(&dirs[0]).unwrap();
        let first = EventLine {
            event: names::ROUND_STARTED.into(),
            timestamp: "t1".into(),
            payload: serde_json::json!({}),
        };
        let first_state = serde_json::to_vec_pretty(&crate::model::state::sample()).unwrap();
        let changes = [StateChange::Put(files::STATE.into(), first_state)];
        let tip = write_commit(&repo, None, &first, "round 1", &changes).unwrap();
        repo.reference("refs/conference/c/events", tip, false, "test")
            .unwrap();
        git(
            &dirs[0],
            &["push", "-q", "origin", "refs/conference/c/events"],
        );
        git(
            &dirs[1],
            &[
                "fetch",
                "-q",
                "origin",
                "refs/conference/c/events:refs/conference/c/events",
            ],
        );
        (tmp, dirs)
    }

    #[test]
    fn events_two_machines_record_at_once_all_reach_the_remote_in_one_chain() {
        let (_tmp, dirs) = two_machines();
        let refs = ConferenceRefs::new("c");
        let [m0, m1] = dirs.map(|d| (Repository::open(&d).unwrap(), d));
        record(&m0.0, iteration("A", 1));
        record(&m1.0, iteration("B", 1));
        record(&m1.0, iteration("B", 2));
        publish(&m0.0, &m0.1, "origin", &refs).unwrap();
        let tip = publish(&m1.0, &m1.1, "origin", &refs).unwrap();

        let remote_tip = git(&m1.1, &["ls-remote", "origin", "refs/conference/c/events"]);
        assert!(remote_tip.starts_with(&tip.to_string()), "{remote_tip}");
        let chain = git(
            &m1.1,
            &["rev-list", "--first-parent", "--count", &tip.to_string()],
        );
        assert_eq!(
            chain.trim(),
            "4",
            "one chain: the first event and three iterations"
        );
        let merges = git(
            &m1.1,
            &["rev-list", "--merges", "--count", &tip.to_string()],
        );
        assert_eq!(merges.trim(), "0");
        let tree = m1.0.find_commit(tip).unwrap().tree_id();
        let state: State =
            serde_json::from_slice(&read_path(&m1.0, tree, files::STATE).unwrap().unwrap())
                .unwrap();
        assert_eq!(state.total_iterations, 3);
        assert_eq!(state.events, 4);
        assert_eq!(state.researcher("A").attempts, 1);
        assert_eq!(state.researcher("B").attempts, 2);
        assert_eq!(state.researcher("B").round_iterations, 2);
        let attempts = read_path(&m1.0, tree, "round-1/attempts.jsonl")
            .unwrap()
            .unwrap();
        let lines = String::from_utf8(attempts).unwrap();
        assert_eq!(lines.lines().count(), 3, "{lines}");
        for who in ["\"A 1\"", "\"B 1\"", "\"B 2\""] {
            assert!(lines.contains(who), "{who} missing from {lines}");
        }
        assert_eq!(
            m1.0.refname_to_id("refs/conference/c/events").unwrap(),
            tip,
            "the local log is the published one"
        );
        // The first machine's next publication builds on the whole chain.
        record(&m0.0, iteration("A", 2));
        let next = publish(&m0.0, &m0.1, "origin", &refs).unwrap();
        let chain = git(
            &m0.1,
            &["rev-list", "--first-parent", "--count", &next.to_string()],
        );
        assert_eq!(chain.trim(), "5");
    }

    #[test]
    fn a_chair_event_over_another_machines_events_is_refused() {
        let (_tmp, dirs) = two_machines();
        let refs = ConferenceRefs::new("c");
        let [m0, m1] = dirs.map(|d| (Repository::open(&d).unwrap(), d));
        record(&m1.0, iteration("B", 1));
        publish(&m1.0, &m1.1, "origin", &refs).unwrap();
        record(
            &m0.0,
            Event::PosterSession(events::PosterSession {
                round: 1,
                summary: "s".into(),
                path: "p".into(),
            }),
        );
        let err = publish(&m0.0, &m0.1, "origin", &refs).unwrap_err();
        assert!(
            format!("{err:#}").contains("round.poster_session event cannot be published"),
            "{err:#}"
        );
    }

    #[test]
    fn machines_publishing_at_the_same_instant_lose_no_event_and_double_none() {
        let (tmp, dirs) = two_machines();
        let third = tmp.path().join("m2");
        git(tmp.path(), &["init", "-q", third.to_str().unwrap()]);
        let remote = tmp.path().join("remote.git");
        git(
            &third,
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        git(
            &third,
            &[
                "fetch",
                "-q",
                "origin",
                "refs/conference/c/events:refs/conference/c/events",
            ],
        );
        let machines = [dirs[0].clone(), dirs[1].clone(), third];
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(3));
        let threads: Vec<_> = machines
            .into_iter()
            .zip(["A", "B", "A"])
            .enumerate()
            .map(|(m, (dir, researcher))| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let repo = Repository::open(&dir).unwrap();
                    let refs = ConferenceRefs::new("c");
                    for i in 0..5 {
                        record(&repo, iteration(researcher, 10 * m as u32 + i));
                        barrier.wait();
                        publish(&repo, &dir, "origin", &refs).map_err(|e| format!("{e:#}"))?;
                    }
                    Ok::<_, String>(())
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let tip = git(
            &dirs[0],
            &["ls-remote", "origin", "refs/conference/c/events"],
        );
        let tip = tip.split('\t').next().unwrap().to_string();
        git(
            &dirs[0],
            &[
                "fetch",
                "-q",
                "origin",
                "refs/conference/c/events:refs/remotes/check",
            ],
        );
        let repo = Repository::open(&dirs[0]).unwrap();
        let tree = repo
            .find_commit(Oid::from_str(&tip).unwrap())
            .unwrap()
            .tree_id();
        let state: State =
            serde_json::from_slice(&read_path(&repo, tree, files::STATE).unwrap().unwrap())
                .unwrap();
        assert_eq!((state.total_iterations, state.events), (15, 16));
        assert_eq!(state.researcher("A").attempts, 10);
        let attempts = read_path(&repo, tree, "round-1/attempts.jsonl")
            .unwrap()
            .unwrap();
        let mut lines: Vec<String> = String::from_utf8(attempts)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(lines.len(), 15);
        lines.sort();
        lines.dedup();
        assert_eq!(lines.len(), 15, "no attempt twice");
    }
}
