//! Several machines publishing through [`Link::publish`] at once (ported from the lib tests of
//! the older publish loop, issue #23): one chain on the remote, every event once, a chair
//! event over other machines' events left out, and events recorded while a publication is out.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use git2::{Oid, Repository};

use super::{Link, Wanted};
use crate::model::event::{self as events, names, Event};
use crate::model::state::{files, State};
use crate::model::{EventLine, Verdict};
use crate::remote::testing::git;
use crate::store::events::{read_path, write_commit};
use crate::store::{ConferenceRefs, EventLog, StateChange};

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
        branch: None,
        sweep: None,
    })
}

/// An empty commit on `refs/heads/base` of `repo`.
fn base_commit(repo: &Repository) -> git2::Oid {
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let tree = repo.find_tree(repo.treebuilder(None).unwrap().write().unwrap());
    let base = repo
        .commit(None, &sig, &sig, "base", &tree.unwrap(), &[])
        .unwrap();
    repo.reference("refs/heads/base", base, false, "test")
        .unwrap();
    base
}

/// A machine: its clone and its link, holding the lease of one researcher (and the chair's, for
/// the first to claim it), as `join` leaves it.
struct Machine {
    dir: PathBuf,
    repo: Repository,
    link: Link,
}

/// A remote holding a conference's first event (researchers A, B and C at a base commit), and
/// one machine per researcher in `researchers`, each holding its lease, claimed in that order.
fn machines(researchers: &[&str]) -> (tempfile::TempDir, Vec<Machine>) {
    let tmp = tempfile::tempdir().unwrap();
    let remote = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let dirs: Vec<PathBuf> = (0..researchers.len())
        .map(|m| tmp.path().join(format!("m{m}")))
        .collect();
    for dir in &dirs {
        git(tmp.path(), &["init", "-q", dir.to_str().unwrap()]);
        git(dir, &["remote", "add", "origin", remote.to_str().unwrap()]);
    }
    let first = EventLine {
        event: names::ROUND_STARTED.into(),
        timestamp: "t1".into(),
        payload: serde_json::json!({}),
    };
    // Every head and best at a base commit each machine fetches, so the branches a publication
    // pushes name objects it has.
    let repo = Repository::open(&dirs[0]).unwrap();
    let base = base_commit(&repo);
    let mut state = crate::model::state::sample();
    state
        .researchers
        .insert("C".into(), state.researcher("A").clone());
    for r in state.researchers.values_mut() {
        r.head = base.into();
    }
    state.best.commit = base.into();
    let changes = [StateChange::Put(
        files::STATE.into(),
        serde_json::to_vec_pretty(&state).unwrap(),
    )];
    let tip = write_commit(&repo, None, &first, "round 1", &changes).unwrap();
    repo.reference("refs/conference/c/events", tip, false, "test")
        .unwrap();
    git(
        &dirs[0],
        &[
            "push",
            "-q",
            "origin",
            "refs/conference/c/events",
            "refs/heads/base",
        ],
    );
    let all: Vec<String> = state.researchers.keys().cloned().collect();
    let machines = dirs
        .into_iter()
        .zip(researchers)
        .enumerate()
        .map(|(m, (dir, researcher))| {
            git(
                &dir,
                &[
                    "fetch",
                    "-q",
                    "origin",
                    "+refs/conference/c/events:refs/conference/c/events",
                    "+refs/heads/base:refs/heads/base",
                ],
            );
            let repo = Repository::open(&dir).unwrap();
            let wanted = Wanted {
                researchers: Some(BTreeSet::from([researcher.to_string()])),
                slots: Some(1),
            };
            let link = Link::new(
                &repo,
                "origin",
                &format!("m{m}"),
                ConferenceRefs::new("c"),
                Duration::from_secs(3600),
                wanted,
            )
            .unwrap();
            link.sync(&repo).unwrap();
            link.claim(&repo, &all, &BTreeSet::new()).unwrap();
            assert!(link.holds(researcher), "m{m} holds {researcher}");
            Machine { dir, repo, link }
        })
        .collect();
    (tmp, machines)
}

/// The state at `tip` and the lines of its round's attempts file.
fn published(repo: &Repository, tip: Oid) -> (State, Vec<String>) {
    let tree = repo.find_commit(tip).unwrap().tree_id();
    let state =
        serde_json::from_slice(&read_path(repo, tree, files::STATE).unwrap().unwrap()).unwrap();
    let attempts = read_path(repo, tree, "round-1/attempts.jsonl")
        .unwrap()
        .unwrap_or_default();
    let lines = String::from_utf8(attempts)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (state, lines)
}

#[test]
fn events_two_machines_record_at_once_all_reach_the_remote_in_one_chain() {
    let (_tmp, ms) = machines(&["A", "B"]);
    let [m0, m1] = &ms[..] else { unreachable!() };
    record(&m0.repo, iteration("A", 1));
    record(&m1.repo, iteration("B", 1));
    record(&m1.repo, iteration("B", 2));
    m0.link.publish(&m0.repo).unwrap();
    let tip = m1.link.publish(&m1.repo).unwrap();

    let remote_tip = git(
        &m1.dir,
        &["ls-remote", "origin", "refs/conference/c/events"],
    );
    assert!(remote_tip.starts_with(&tip.to_string()), "{remote_tip}");
    let chain = git(
        &m1.dir,
        &["rev-list", "--first-parent", "--count", &tip.to_string()],
    );
    assert_eq!(
        chain.trim(),
        "4",
        "one chain: the first event and three iterations"
    );
    let merges = git(
        &m1.dir,
        &["rev-list", "--merges", "--count", &tip.to_string()],
    );
    assert_eq!(merges.trim(), "0");
    let (state, lines) = published(&m1.repo, tip);
    assert_eq!(state.total_iterations, 3);
    assert_eq!(state.events, 4);
    assert_eq!(state.researcher("A").attempts, 1);
    assert_eq!(state.researcher("B").attempts, 2);
    assert_eq!(state.researcher("B").round_iterations, 2);
    assert_eq!(lines.len(), 3, "{lines:?}");
    for who in ["\"A 1\"", "\"B 1\"", "\"B 2\""] {
        assert!(
            lines.iter().any(|l| l.contains(who)),
            "{who} missing from {lines:?}"
        );
    }
    assert_eq!(
        m1.repo.refname_to_id("refs/conference/c/events").unwrap(),
        tip,
        "the local log is the published one"
    );
    // The first machine's next publication builds on the whole chain.
    record(&m0.repo, iteration("A", 2));
    let next = m0.link.publish(&m0.repo).unwrap();
    let chain = git(
        &m0.dir,
        &["rev-list", "--first-parent", "--count", &next.to_string()],
    );
    assert_eq!(chain.trim(), "5");
}

/// The tip of `machine`'s local event log.
fn log_tip(machine: &Machine) -> anyhow::Result<Oid> {
    Ok(machine.repo.refname_to_id("refs/conference/c/events")?)
}

/// A log whose writer records one more event while the publication is out (as a researcher
/// does through the recorder while the publisher pushes), right before the local log settles.
struct RecordingMeanwhile<'a> {
    machine: &'a Machine,
}

impl super::LocalLog for RecordingMeanwhile<'_> {
    fn tip(&self) -> anyhow::Result<Oid> {
        log_tip(self.machine)
    }
    fn settle(&self, from: Oid, tip: Oid) -> anyhow::Result<Oid> {
        record(&self.machine.repo, iteration("A", 2));
        self.machine.link.settle(&self.machine.repo, from, tip)
    }
}

#[test]
fn an_event_recorded_while_its_log_was_published_follows_it_and_goes_out_next() {
    let (_tmp, ms) = machines(&["A", "B"]);
    let [m0, m1] = &ms[..] else { unreachable!() };
    record(&m1.repo, iteration("B", 1));
    m1.link.publish(&m1.repo).unwrap();
    record(&m0.repo, iteration("A", 1));
    let meanwhile = RecordingMeanwhile { machine: m0 };
    let local = m0.link.publish_from(&m0.repo, &meanwhile).unwrap();
    let remote_tip = git(
        &m0.dir,
        &["ls-remote", "origin", "refs/conference/c/events"],
    );
    let pushed = Oid::from_str(remote_tip.split_whitespace().next().unwrap()).unwrap();

    let (state, lines) = published(&m0.repo, pushed);
    assert_eq!(lines.len(), 2, "B 1 and A 1 reached the remote: {lines:?}");
    assert_eq!(state.researcher("A").attempts, 1);
    assert_eq!(
        local,
        m0.repo.refname_to_id("refs/conference/c/events").unwrap(),
        "the local log's tip is returned"
    );
    assert_ne!(local, pushed, "A 2 was recorded meanwhile");
    assert_eq!(
        m0.repo.find_commit(local).unwrap().parent_id(0).unwrap(),
        pushed,
        "A 2 follows what the remote took, not the log it was recorded on"
    );
    let (state, lines) = published(&m0.repo, local);
    assert_eq!(state.researcher("A").attempts, 2, "{lines:?}");
    assert_eq!(lines.len(), 3, "each event once: {lines:?}");

    let next = m0.link.publish(&m0.repo).unwrap();
    assert_eq!(next, local, "A 2 goes out as it is, over the remote's tip");
    let remote_tip = git(
        &m0.dir,
        &["ls-remote", "origin", "refs/conference/c/events"],
    );
    assert!(remote_tip.starts_with(&local.to_string()), "{remote_tip}");
    let chain = git(
        &m0.dir,
        &["rev-list", "--first-parent", "--count", &local.to_string()],
    );
    assert_eq!(
        chain.trim(),
        "4",
        "the first event and three iterations, one chain"
    );
}

/// A chair's event found over another machine's events (a participant's, published meanwhile)
/// is left out, not published and not fatal: the chair's log follows the remote's, and the
/// chair runs that phase again from there.
#[test]
fn a_chair_event_over_another_machines_events_is_left_out_and_the_chair_goes_on() {
    let (_tmp, ms) = machines(&["A", "B"]);
    let [m0, m1] = &ms[..] else { unreachable!() };
    assert!(
        m0.link.holds(crate::model::event::CHAIR),
        "m0 claimed first"
    );
    record(&m1.repo, iteration("B", 1));
    m1.link.publish(&m1.repo).unwrap();
    let remote_tip = git(
        &m1.dir,
        &["ls-remote", "origin", "refs/conference/c/events"],
    );
    record(
        &m0.repo,
        Event::PosterSession(events::PosterSession {
            round: 1,
            summary: "s".into(),
            path: "p".into(),
        }),
    );
    let tip = m0.link.publish(&m0.repo).unwrap();
    assert_eq!(
        git(
            &m1.dir,
            &["ls-remote", "origin", "refs/conference/c/events"]
        ),
        remote_tip,
        "the remote's log is as it was"
    );
    assert!(remote_tip.starts_with(&tip.to_string()), "{remote_tip}");
    assert_eq!(
        m0.repo.refname_to_id("refs/conference/c/events").unwrap(),
        tip,
        "the chair's log follows the remote's, without its poster session"
    );
}

#[test]
fn machines_publishing_at_the_same_instant_lose_no_event_and_double_none() {
    let (_tmp, ms) = machines(&["A", "B", "C"]);
    let check = ms[0].dir.clone();
    let barrier = Arc::new(Barrier::new(ms.len()));
    let threads: Vec<_> = ms
        .into_iter()
        .zip(["A", "B", "C"])
        .enumerate()
        .map(|(m, (machine, researcher))| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                for i in 0..5 {
                    record(&machine.repo, iteration(researcher, 10 * m as u32 + i));
                    barrier.wait();
                    machine
                        .link
                        .publish(&machine.repo)
                        .map_err(|e| format!("{e:#}"))?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    git(
        &check,
        &[
            "fetch",
            "-q",
            "origin",
            "+refs/conference/c/events:refs/remotes/check",
        ],
    );
    let repo = Repository::open(&check).unwrap();
    let tip = repo.refname_to_id("refs/remotes/check").unwrap();
    let (state, mut lines) = published(&repo, tip);
    assert_eq!((state.total_iterations, state.events), (15, 16));
    for r in ["A", "B", "C"] {
        assert_eq!(state.researcher(r).attempts, 5, "{r}");
    }
    assert_eq!(lines.len(), 15);
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), 15, "no attempt twice");
}

/// Makes the remote at `remote` check every transaction that moves the events ref of `c`, as it
/// is about to commit it (the `reference-transaction` hook's `prepared` state, when the remote
/// still holds every ref as before): each researcher head the new event's state names (except
/// `base`) must already be reachable from a machine's attempts chain there, as a fetch that
/// reads the new event would need. Each head checked goes to `checked`, each not yet reachable
/// to `ahead`.
fn check_heads_before_the_event(remote: &std::path::Path, base: Oid) -> (PathBuf, PathBuf) {
    let (checked, ahead) = (remote.join("checked"), remote.join("ahead"));
    let hook = remote.join("hooks/reference-transaction");
    let script = format!(
        r#"#!/bin/sh
[ "$1" = prepared ] || exit 0
while read old new ref; do
  [ "$ref" = refs/conference/c/events ] || continue
  for head in $(git show "$new:state.json" | sed -n 's/.*"head": *"\([0-9a-f]\{{40\}}\)".*/\1/p'); do
    [ "$head" = {base} ] && continue
    echo "$head" >> '{checked}'
    found=
    for tip in $(git for-each-ref --format='%(objectname)' refs/conference/c/machines/); do
      if [ "$tip" = "$head" ] || git merge-base --is-ancestor "$head" "$tip" 2>/dev/null; then found=1; fi
    done
    [ -n "$found" ] || echo "$head" >> '{ahead}'
  done
done
exit 0
"#,
        checked = checked.display(),
        ahead = ahead.display()
    );
    std::fs::write(&hook, script).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (checked, ahead)
}

/// A remote's ref transaction renames its refs one at a time, the events ref (sorted first)
/// before the attempts chains, and a fetch reads them in the same order: had an event gone out
/// in the same push as the attempt it keeps, a fetch in between would see the event without
/// the commit it names, and a machine would wait for it (issue #45). The attempts chain goes
/// out first: by the time the remote holds the event, it holds its commits.
#[test]
fn an_event_reaches_the_remote_after_the_attempts_chain_that_holds_its_commits() {
    let (tmp, ms) = machines(&["A"]);
    let m0 = &ms[0];
    let base = m0.repo.refname_to_id("refs/heads/base").unwrap();
    let (checked, ahead) = check_heads_before_the_event(&tmp.path().join("remote.git"), base);
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let parent = m0.repo.find_commit(base).unwrap();
    let tree = parent.tree().unwrap();
    let attempt = m0
        .repo
        .commit(None, &sig, &sig, "A's attempt", &tree, &[&parent])
        .unwrap();
    crate::store::keep_reachable(&m0.repo, &ConferenceRefs::new("c"), &[attempt], None).unwrap();
    let Event::Iteration(mut kept) = iteration("A", 1) else {
        unreachable!()
    };
    kept.status = Verdict::Kept.into();
    kept.commit = Some(attempt.into());
    record(&m0.repo, Event::Iteration(kept));
    m0.link.publish(&m0.repo).unwrap();

    let checked = std::fs::read_to_string(checked).unwrap_or_default();
    assert!(checked.contains(&attempt.to_string()), "{checked:?}");
    let ahead = std::fs::read_to_string(ahead).unwrap_or_default();
    assert!(
        ahead.is_empty(),
        "the event reached the remote before {ahead}"
    );
}

/// A log that does not follow what the remote took: its run killed right after the push.
struct KilledAfterPush<'a> {
    machine: &'a Machine,
}

impl super::LocalLog for KilledAfterPush<'_> {
    fn tip(&self) -> anyhow::Result<Oid> {
        log_tip(self.machine)
    }
    fn settle(&self, from: Oid, _tip: Oid) -> anyhow::Result<Oid> {
        Ok(from)
    }
}

/// Events the remote took, replayed over another machine's, before the local log followed
/// (the run killed in between, its slot still this machine's when it joins again) are not
/// published a second time with what it records next.
#[test]
fn events_the_remote_took_before_the_local_log_followed_go_out_once() {
    let (_tmp, ms) = machines(&["A", "B"]);
    let [m0, m1] = &ms[..] else { unreachable!() };
    record(&m1.repo, iteration("B", 1));
    m1.link.publish(&m1.repo).unwrap();
    record(&m0.repo, iteration("A", 1));
    let killed = KilledAfterPush { machine: m0 };
    m0.link.publish_from(&m0.repo, &killed).unwrap();
    record(&m0.repo, iteration("A", 2));
    let tip = m0.link.publish(&m0.repo).unwrap();
    let (state, lines) = published(&m0.repo, tip);
    assert_eq!(lines.len(), 3, "B 1, A 1 once, A 2: {lines:?}");
    assert_eq!(state.researcher("A").attempts, 2);
    assert_eq!(state.events, 4);
}
