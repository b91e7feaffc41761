//! Crash safety of `git conference resume`: the conference is killed (SIGKILL through the product's
//! failpoints, SIGKILL after a delay, SIGINT once or twice) at many instants over every phase, then
//! resumed, and the result is checked with plain git against an uninterrupted run of the same
//! deterministic conference (fixtures/resume: three script researchers on complementary files).
//!
//! Checked after every recovered run: the conference completes; each round has exactly one
//! `round.completed` (and one start, poster session, peer review); every attempt is recorded once
//! with the same verdict and metric as the uninterrupted run; every kept snapshot named in an event
//! is on its researcher branch; every attempt named in an event has its note and stays reachable;
//! `conference.resumed` comes before anything a resume runs; best (tree and metric) equals the
//! uninterrupted run's; `git fsck` is clean; the user's branch and working tree are untouched.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::crash::{self, finish, kill_strays, send, spawn, Ending, Leg, Stop};
use common::TestRepo;
use serde_json::Value;

const NAME: &str = "res";

fn fixture() -> TestRepo {
    TestRepo::from_fixture("resume")
}

// ---------------------------------------------------------------------------------------------
// Running the program and killing it (the harness is in `common::crash`)

fn run(repo: &TestRepo, args: &[&str], env: &[(&str, &str)], stop: Stop) -> Leg {
    crash::run(repo, NAME, args, env, stop)
}

/// Events of the conference whose names are in `names`, counted from `git log` subjects.
fn count_events(repo: &TestRepo, names: &[&str]) -> usize {
    crash::count_events(repo, NAME, names)
}

/// The name of the last recorded event ("-" when none).
fn last_event(repo: &TestRepo) -> String {
    let r = repo.git_run(&["log", "-1", "--format=%s", &events_ref()]);
    r.stdout
        .split(':')
        .next()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or("-")
        .trim()
        .to_string()
}

fn events_ref() -> String {
    format!("refs/conference/{NAME}/events")
}

fn has_conference(repo: &TestRepo) -> bool {
    repo.git_run(&["rev-parse", "--verify", "-q", &events_ref()])
        .code
        == 0
}

/// Runs the next leg of a conference: `start` when nothing was recorded yet (a kill before
/// `conference.started`), `resume` otherwise. A resume is checked for the recovery rule:
/// whatever it appends starts with set-aside partial attempts, then `conference.resumed`.
fn next_leg(
    repo: &TestRepo,
    failpoint: Option<&str>,
    env: &[(&str, &str)],
    stop: Stop,
    log: &mut Log,
) -> Leg {
    let mut env: Vec<(&str, &str)> = env.to_vec();
    if let Some(fp) = failpoint {
        env.push(("GIT_CONFERENCE_FAILPOINT", fp));
    }
    if !has_conference(repo) {
        return run(repo, &["start", NAME, "--yes"], &env, stop);
    }
    let before = repo.events(NAME).len();
    let leg = run(repo, &["resume", NAME], &env, stop);
    let events = repo.events(NAME);
    let added: Vec<&str> = events[before..]
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    let first_other = added.iter().position(|e| *e != "attempt.interrupted");
    if let Some(i) = first_other {
        assert_eq!(
            added[i],
            "conference.resumed",
            "a resume ran {:?} before recording conference.resumed\n{leg}",
            &added[..=i]
        );
        let ev = &events[before + i];
        assert!(
            ev["payload"]["recovery_point"]
                .as_str()
                .is_some_and(|p| !p.is_empty()),
            "conference.resumed without a recovery point: {ev}"
        );
        log.resumed += 1;
    }
    if matches!(leg.ending, Ending::Code(0)) && added.is_empty() {
        assert!(
            leg.stdout.contains("already complete"),
            "a resume that did nothing must say the conference is complete\n{leg}"
        );
    }
    leg
}

/// What happened to one conference over its legs.
#[derive(Default, Debug)]
struct Log {
    /// Failpoints (or delays) at which the program was really killed.
    kills: Vec<String>,
    /// Resumes that recorded `conference.resumed`.
    resumed: usize,
}

/// Resumes (no failpoint, no kill) until the conference completes; a few tries at most.
fn resume_to_end(repo: &TestRepo, log: &mut Log) {
    for _ in 0..3 {
        let leg = next_leg(repo, None, &[], Stop::Never, log);
        match leg.ending {
            Ending::Code(0) => return,
            _ => eprintln!("resume did not finish, retrying:\n{leg}"),
        }
    }
    panic!("the conference did not complete after 3 resumes");
}

/// Runs `legs` failpoints one after the other (each leg resumes where the last one died), then
/// resumes to the end. A failpoint that is never reached lets its leg complete the conference;
/// the remaining legs are then not kill points.
fn failpoint_chain(repo: &TestRepo, legs: &[&str], log: &mut Log) {
    for fp in legs {
        let leg = next_leg(repo, Some(fp), &[], Stop::Never, log);
        match leg.ending {
            Ending::Signal(9) => {
                log.kills.push(fp.to_string());
                kill_strays(repo);
            }
            Ending::Code(0) => {
                eprintln!("failpoint {fp} was not reached: the conference completed");
                return;
            }
            _ => panic!("failpoint {fp}: unexpected ending\n{leg}"),
        }
    }
    resume_to_end(repo, log);
}

// ---------------------------------------------------------------------------------------------
// The uninterrupted run and the invariants

/// The user's side of the repository, which a conference must never touch.
#[derive(Debug, PartialEq)]
struct UserSide {
    head: String,
    main: String,
    status: String,
}

fn user_side(repo: &TestRepo) -> UserSide {
    UserSide {
        head: repo.git(&["symbolic-ref", "HEAD"]),
        main: repo.git(&["rev-parse", "refs/heads/main"]),
        status: repo.git(&["status", "--porcelain", "--untracked-files=all"]),
    }
}

type IterKey = (String, u64, u64);

/// The outcome of a conference, as compared between runs.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    best_tree: String,
    best_metric: f64,
    /// (researcher, round, iteration) → (verdict, metric).
    iterations: BTreeMap<IterKey, (String, Option<f64>)>,
    /// (round, researcher) → (result, metric).
    picks: BTreeMap<(u64, String), (String, Option<f64>)>,
    /// Best metric after each round.
    round_bests: Vec<Option<f64>>,
}

fn outcome(repo: &TestRepo) -> Outcome {
    let events = repo.events(NAME);
    let mut iterations = BTreeMap::new();
    let mut picks = BTreeMap::new();
    let mut round_bests = Vec::new();
    for e in &events {
        let p = &e["payload"];
        match e["event"].as_str().unwrap() {
            "researcher.iteration" => {
                let key = (
                    p["researcher"].as_str().unwrap().to_string(),
                    p["round"].as_u64().unwrap(),
                    p["iteration"].as_u64().unwrap(),
                );
                let value = (
                    p["status"].as_str().unwrap().to_string(),
                    p["metric_value"].as_f64(),
                );
                assert!(
                    iterations.insert(key.clone(), value).is_none(),
                    "iteration {key:?} recorded twice"
                );
            }
            "transfer.pick" => {
                let key = (
                    p["round"].as_u64().unwrap(),
                    p["researcher"].as_str().unwrap().to_string(),
                );
                let value = (
                    p["result"].as_str().unwrap().to_string(),
                    p["metric"].as_f64(),
                );
                assert!(
                    picks.insert(key.clone(), value).is_none(),
                    "transfer pick {key:?} made twice"
                );
            }
            "round.completed" => round_bests.push(p["best_metric"].as_f64()),
            _ => {}
        }
    }
    let status = repo.status_json(NAME);
    Outcome {
        best_tree: repo
            .git(&["rev-parse", &format!("conference/{NAME}/best^{{tree}}")])
            .trim()
            .to_string(),
        best_metric: status["best"]["metric"].as_f64().expect("a best metric"),
        iterations,
        picks,
        round_bests,
    }
}

fn reference() -> &'static Outcome {
    static REFERENCE: OnceLock<Outcome> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let repo = fixture();
        let before = user_side(&repo);
        let leg = run(&repo, &["start", NAME, "--yes"], &[], Stop::Never);
        assert_eq!(
            leg.ending,
            Ending::Code(0),
            "the uninterrupted run failed\n{leg}"
        );
        let out = outcome(&repo);
        // The fixture must exercise what the tests claim: reverts, a no-change iteration, and a
        // knowledge transfer that merges several findings per round.
        let verdicts: Vec<&str> = out.iterations.values().map(|(v, _)| v.as_str()).collect();
        assert!(
            verdicts.contains(&"kept")
                && verdicts.contains(&"reverted")
                && verdicts.contains(&"no_change")
        );
        for round in 1..=2 {
            let merged = out
                .picks
                .iter()
                .filter(|((r, _), (res, _))| *r == round && res == "merged")
                .count();
            assert!(
                merged >= 2,
                "round {round} merged {merged} findings: {:?}",
                out.picks
            );
        }
        check_invariants(&repo, &before, &out, &Log::default());
        out
    })
}

/// Every invariant of a completed conference; `expected` is the uninterrupted run's outcome.
fn check_invariants(repo: &TestRepo, user_before: &UserSide, expected: &Outcome, log: &Log) {
    let events = repo.events(NAME);
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    let count = |name: &str| names.iter().filter(|n| **n == name).count();
    let per_round = |name: &str, round: u64| {
        events
            .iter()
            .filter(|e| e["event"] == name && e["payload"]["round"].as_u64() == Some(round))
            .count()
    };

    // The conference completed, once.
    assert_eq!(
        names.last(),
        Some(&"conference.completed"),
        "events: {names:?}"
    );
    assert_eq!(count("conference.completed"), 1, "events: {names:?}");
    assert_eq!(count("conference.started"), 1);
    assert_eq!(
        count("baseline.measured"),
        1,
        "the baseline was measured twice: {names:?}"
    );
    let status = repo.status_json(NAME);
    assert_eq!(status["status"], "completed", "{status}");

    // Each round ran once, phase by phase.
    for round in 1..=2 {
        for name in [
            "round.started",
            "round.poster_session",
            "round.peer_review",
            "round.completed",
        ] {
            assert_eq!(
                per_round(name, round),
                1,
                "round {round}: {name} ×{}; events: {names:?}",
                per_round(name, round)
            );
        }
    }
    assert_eq!(count("round.completed"), 2);
    let mut finished: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e["event"] == "researcher.finished")
    {
        let p = &e["payload"];
        *finished
            .entry((
                p["researcher"].as_str().unwrap().into(),
                p["round"].as_u64().unwrap(),
            ))
            .or_default() += 1;
    }
    assert_eq!(finished.len(), 6, "researcher.finished: {finished:?}");
    assert!(
        finished.values().all(|&n| n == 1),
        "a researcher finished a round twice: {finished:?}"
    );
    assert_eq!(
        count("conference.resumed"),
        log.resumed,
        "conference.resumed events"
    );

    // Nothing lost, nothing done twice, the same results: every attempt and pick as in the
    // uninterrupted run, and the same best.
    let got = outcome(repo);
    assert_eq!(
        got.iterations, expected.iterations,
        "recorded iterations differ from the uninterrupted run"
    );
    assert_eq!(
        got.picks, expected.picks,
        "knowledge transfer differs from the uninterrupted run"
    );
    assert_eq!(got.round_bests, expected.round_bests);
    assert_eq!(
        got.best_tree, expected.best_tree,
        "best tree differs from the uninterrupted run"
    );
    assert_eq!(got.best_metric, expected.best_metric);
    let best = repo
        .git(&["rev-parse", &format!("refs/heads/conference/{NAME}/best")])
        .trim()
        .to_string();
    let completed = events.last().unwrap();
    assert_eq!(
        completed["payload"]["best_commit"].as_str(),
        Some(best.as_str()),
        "best branch ≠ recorded best"
    );
    assert_eq!(status["best"]["commit"].as_str(), Some(best.as_str()));

    // Snapshots: kept ones on their branch, every named attempt reachable and noted.
    let ancestor = |commit: &str, of: &str| {
        repo.git_run(&["merge-base", "--is-ancestor", commit, of])
            .code
            == 0
    };
    let attempts_ref = format!("refs/conference/{NAME}/attempts");
    for e in &events {
        let p = &e["payload"];
        match e["event"].as_str().unwrap() {
            "researcher.iteration" => {
                if let Some(commit) = p["commit"].as_str() {
                    assert!(
                        ancestor(commit, &attempts_ref),
                        "attempt {commit} is not kept reachable"
                    );
                    if p["status"] == "kept" {
                        let branch = format!(
                            "refs/heads/conference/{NAME}/researcher-{}",
                            p["researcher"].as_str().unwrap()
                        );
                        assert!(
                            ancestor(commit, &branch),
                            "kept snapshot {commit} is not on {branch}"
                        );
                    }
                }
            }
            "attempt.interrupted" => {
                let commit = p["commit"].as_str().unwrap();
                assert!(
                    ancestor(commit, &attempts_ref),
                    "interrupted attempt {commit} is not kept reachable"
                );
            }
            "transfer.pick" => {
                if let Some(commit) = p["commit"].as_str() {
                    assert!(
                        ancestor(commit, &attempts_ref),
                        "transfer candidate {commit} is not kept reachable"
                    );
                    if p["result"] == "merged" {
                        assert!(
                            ancestor(commit, &best),
                            "merged pick {commit} is not on best"
                        );
                    }
                }
            }
            _ => {}
        }
        for note in p["notes"].as_array().into_iter().flatten() {
            let commit = note["commit"].as_str().unwrap();
            let lines = repo.notes(commit);
            assert!(
                lines.contains(note),
                "{} names {commit} but its note lacks {note}; note: {lines:?}",
                e["event"]
            );
        }
        if e["event"] == "researcher.iteration" {
            if let Some(commit) = p["commit"].as_str() {
                assert!(
                    !repo.notes(commit).is_empty(),
                    "attempt {commit} has no note"
                );
            }
        }
    }

    // The repository is sound, the user's side untouched, the lock released.
    let fsck = repo.git_run(&["fsck", "--no-progress", "--no-dangling"]);
    assert_eq!(fsck.code, 0, "git fsck: {}{}", fsck.stdout, fsck.stderr);
    assert!(
        !fsck.stdout.contains("error")
            && !fsck.stderr.contains("error")
            && !fsck.stderr.contains("missing"),
        "git fsck: {}{}",
        fsck.stdout,
        fsck.stderr
    );
    assert_eq!(
        &user_side(repo),
        user_before,
        "the user's branch or working tree changed"
    );
    assert!(!lock_path(repo).exists(), "the run lock was left behind");
}

fn run_dir(repo: &TestRepo) -> PathBuf {
    repo.dir.join(".git").join("conference").join(NAME)
}

fn lock_path(repo: &TestRepo) -> PathBuf {
    run_dir(repo).join("lock")
}

fn worktree(repo: &TestRepo, label: &str) -> PathBuf {
    repo.worktree(NAME, label)
}

/// A small deterministic pseudo-random sequence (no dependency, same delays on every run).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + (self.0 >> 33) % (hi - lo + 1)
    }
}

/// One conference killed at each failpoint of `legs` in turn, then resumed to the end and checked.
fn failpoint_scenario(legs: &[&str], min_kills: usize) -> Log {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    failpoint_chain(&repo, legs, &mut log);
    check_invariants(&repo, &before, expected, &log);
    eprintln!("kill points ({}): {:?}", log.kills.len(), log.kills);
    assert!(
        log.kills.len() >= min_kills,
        "only {} of {} failpoints were reached: {:?}",
        log.kills.len(),
        legs.len(),
        log.kills
    );
    log
}

// ---------------------------------------------------------------------------------------------
// SIGKILL at named points of every phase

/// Start, baseline, the first round's research (agent runs, snapshot commits, evaluations).
#[test]
fn sigkill_during_startup_and_research() {
    // Killed before `conference.started` is recorded: there is no conference, `start` again.
    let repo = fixture();
    let leg = run(
        &repo,
        &["start", NAME, "--yes"],
        &[("GIT_CONFERENCE_FAILPOINT", "event.before-ref:1")],
        Stop::Never,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    assert!(!has_conference(&repo));
    let again = repo.conference(&["resume", NAME]);
    assert_ne!(
        again.code, 0,
        "resume of a conference that never started must fail"
    );
    drop(repo);

    failpoint_scenario(
        &[
            "event.conference.started:1",
            "event.baseline.measured:1",
            "event.conference.resumed:1",
            "event.round.started:1",
            "agent.finished:2",
            "snapshot.committed:2",
            "snapshot.reachable:2",
            "eval.finished:2",
            "event.before-ref:3",
            "event.researcher.iteration:2",
        ],
        10,
    );
}

/// The effects that follow an attempt's event: note, branch move, worktree reset.
#[test]
fn sigkill_between_an_attempt_and_its_effects() {
    failpoint_scenario(
        &[
            "iteration.recorded:3",
            "note.before-ref:2",
            "note.written:2",
            "branch.moved:1",
            "iteration.recorded:2",
            "event.researcher.finished:1",
            "event.researcher.finished:2",
            "event.round.poster_session:1",
        ],
        8,
    );
}

/// Peer review and knowledge transfer of round 1, the end of the round.
#[test]
fn sigkill_during_review_and_transfer() {
    failpoint_scenario(
        &[
            "review.measured:2",
            "note.before-ref:1",
            "event.round.peer_review:1",
            "transfer.cherry-picked:1",
            "event.transfer.pick:1",
            "transfer.recorded:1",
            "transfer.cherry-picked:1",
            "note.written:1",
            "event.round.completed:1",
        ],
        9,
    );
}

/// Round 2 (from the merged best), the final transfer, the report and the completion.
#[test]
fn sigkill_during_the_last_round_and_synthesis() {
    failpoint_scenario(
        &[
            // Round 2 has 9 iterations: these three legs record at most 7 of them, whatever
            // the interleaving of the researchers, so the peer review is still ahead.
            "event.round.started:2",
            "agent.finished:3",
            "eval.finished:2",
            "event.researcher.iteration:2",
            "event.round.peer_review:1",
            "transfer.recorded:2",
            "event.before-ref:2",
            "event.round.completed:1",
            "event.conference.budget_stop:1",
            "report.built:1",
        ],
        10,
    );
}

/// Killed right after `conference.completed`: resume says it is complete, exits 0, changes nothing.
#[test]
fn resume_of_a_completed_conference_says_so() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    failpoint_chain(&repo, &["event.conference.completed:1"], &mut log);
    assert_eq!(log.kills.len(), 1);
    check_invariants(&repo, &before, expected, &log);
    let events = repo.events(NAME).len();
    let r = repo.conference(&["resume", NAME]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("already complete"), "{}", r.stdout);
    assert_eq!(
        repo.events(NAME).len(),
        events,
        "resume of a completed conference recorded something"
    );
    let r = repo.conference(&["resume"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    check_invariants(&repo, &before, expected, &log);
}

// ---------------------------------------------------------------------------------------------
// SIGKILL at arbitrary instants

/// Kills after pseudo-random delays while agents and evaluations sleep briefly, resuming each time:
/// at least 30 kills (issue #14), each sequence resumed to the uninterrupted best. How many kills
/// a sequence lands depends on the machine's speed (a leg that outlives its conference ends with
/// exit 0), so sequences are added, up to eight, until 30 have landed.
#[test]
fn sigkill_at_arbitrary_instants() {
    let expected = reference();
    let env = [
        ("RESUME_AGENT_SLEEP", "0.03"),
        ("RESUME_EVAL_SLEEP", "0.02"),
    ];
    let mut total = 0;
    // RESUME_E2E_SEEDS=1,2,3 runs these delay sequences, all of them (for stress runs).
    let chosen: Option<Vec<u64>> = std::env::var("RESUME_E2E_SEEDS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let run_all = chosen.is_some();
    let seeds = chosen.unwrap_or_else(|| vec![7, 1234, 42, 99, 3, 17, 2026, 5]);
    for seed in seeds {
        if total >= 30 && !run_all {
            break;
        }
        let repo = fixture();
        let before = user_side(&repo);
        let mut log = Log::default();
        let mut rng = Lcg(seed);
        for i in 0..12 {
            // Alternately counted from the process start (startup and worktree preparation
            // included) and from `conference.resumed` (so that later phases get their share).
            let delay = rng.next(5, 500);
            let stop = if i % 2 == 0 {
                Stop::After(Duration::from_millis(delay), libc::SIGKILL)
            } else {
                Stop::AfterEngine(Duration::from_millis(delay), libc::SIGKILL)
            };
            let leg = next_leg(&repo, None, &env, stop, &mut log);
            match leg.ending {
                Ending::Signal(9) => {
                    log.kills.push(format!("{delay}ms@{}", last_event(&repo)));
                    kill_strays(&repo);
                }
                Ending::Code(0) => break,
                _ => panic!("killed after {delay} ms: unexpected ending\n{leg}"),
            }
        }
        resume_to_end(&repo, &mut log);
        check_invariants(&repo, &before, expected, &log);
        eprintln!("timed kills (seed {seed}): {:?}", log.kills);
        total += log.kills.len();
    }
    eprintln!("timed kills in all: {total}");
    assert!(total >= 30, "only {total} timed kills landed");
}

// ---------------------------------------------------------------------------------------------
// Ctrl-C

/// One SIGINT: agents and evaluations are killed, what finished is recorded, exit 130 with the
/// resume command; resume completes the conference.
#[test]
fn sigint_once_stops_gracefully_and_resume_completes() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let env = [("RESUME_AGENT_SLEEP", "0.2")];
    let mut child = spawn(&repo, &["start", NAME, "--yes"], &env);
    wait_for_event(&repo, &mut child, "researcher.iteration");
    send(child.id(), libc::SIGINT);
    let leg = finish_within(child, Duration::from_secs(20));
    assert_eq!(leg.ending, Ending::Code(130), "{leg}");
    assert!(
        leg.stderr
            .contains(&format!("git conference resume {NAME}")),
        "says how to resume:\n{leg}"
    );
    check_graceful_stop(&repo);
    let status = repo.status_json(NAME);
    assert!(
        status["researchers"]
            .as_object()
            .unwrap()
            .values()
            .any(|r| r["attempts"].as_u64() > Some(0)),
        "nothing finished was recorded: {status}"
    );
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}

/// Two SIGINTs a second apart (two presses; closer ones are one press, see
/// `one_ctrl_c_through_git_is_one_graceful_stop`): the second exits at once if the run is still
/// stopping; either way the exit is 130 and resume completes the conference.
#[test]
fn sigint_twice_exits_at_once_and_resume_completes() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let env = [("RESUME_AGENT_SLEEP", "0.2"), ("RESUME_EVAL_SLEEP", "0.1")];
    let mut child = spawn(&repo, &["start", NAME, "--yes"], &env);
    wait_for_event(&repo, &mut child, "researcher.iteration");
    send(child.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_millis(1100));
    send(child.id(), libc::SIGINT);
    let leg = finish_within(child, Duration::from_secs(20));
    assert_eq!(leg.ending, Ending::Code(130), "{leg}");
    kill_strays(&repo);
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}

/// SIGINT at several instants of the run (once the engine runs), resuming each time.
#[test]
fn sigint_at_many_instants() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let env = [
        ("RESUME_AGENT_SLEEP", "0.03"),
        ("RESUME_EVAL_SLEEP", "0.02"),
    ];
    let mut rng = Lcg(99);
    let mut interrupts = 0;
    let mut landed = Vec::new();
    for i in 0..8 {
        // Alternately at any instant (startup included, while worktrees are prepared) and once
        // the engine runs.
        let delay = rng.next(40, 400);
        let stop = if i % 2 == 0 {
            Stop::After(Duration::from_millis(delay), libc::SIGINT)
        } else {
            Stop::AfterEngine(Duration::from_millis(delay / 2), libc::SIGINT)
        };
        let recorded_before = has_conference(&repo).then(|| repo.events(NAME).len());
        let leg = next_leg(&repo, None, &env, stop, &mut log);
        let recorded_after = has_conference(&repo).then(|| repo.events(NAME).len());
        match leg.ending {
            // The press came before the program could install its handler (a loaded machine
            // can take that long to start it): the default action ended it, which is harmless
            // only while nothing was recorded.
            Ending::Signal(libc::SIGINT) if recorded_before == recorded_after => {
                eprintln!("SIGINT after {delay} ms landed before the handler; nothing recorded");
            }
            Ending::Code(130) => {
                interrupts += 1;
                landed.push(format!("{delay}ms@{}", last_event(&repo)));
                assert!(leg.stderr.contains("git conference resume"), "{leg}");
                check_graceful_stop(&repo);
            }
            Ending::Code(0) => break,
            _ => panic!("SIGINT after {delay} ms: unexpected ending\n{leg}"),
        }
    }
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
    eprintln!("graceful interrupts: {interrupts}: {landed:?}");
    assert!(interrupts >= 4, "only {interrupts} interrupts landed");
}

/// After a graceful stop (first Ctrl-C) everything that finished is recorded with all its
/// effects — no resume needed to make it consistent: notes written, branches where the state says,
/// agents and evaluations killed, lock released.
fn check_graceful_stop(repo: &TestRepo) {
    assert_eq!(
        kill_strays(repo),
        0,
        "agents or evaluations outlived the graceful stop"
    );
    assert!(
        !lock_path(repo).exists(),
        "a graceful stop releases the lock"
    );
    let status = repo.status_json(NAME);
    let branch = |b: &str| {
        repo.git(&["rev-parse", &format!("refs/heads/conference/{NAME}/{b}")])
            .trim()
            .to_string()
    };
    assert_eq!(
        status["best"]["commit"].as_str(),
        Some(branch("best").as_str()),
        "best branch"
    );
    for (id, r) in status["researchers"].as_object().unwrap() {
        if has_ref(
            repo,
            &format!("refs/heads/conference/{NAME}/researcher-{id}"),
        ) {
            assert_eq!(
                r["head"].as_str(),
                Some(branch(&format!("researcher-{id}")).as_str()),
                "researcher {id} branch"
            );
        }
    }
    for e in repo.events(NAME) {
        for note in e["payload"]["notes"].as_array().into_iter().flatten() {
            let commit = note["commit"].as_str().unwrap();
            assert!(
                repo.notes(commit).contains(note),
                "{} lacks its note on {commit}",
                e["event"]
            );
        }
    }
}

fn has_ref(repo: &TestRepo, name: &str) -> bool {
    repo.git_run(&["rev-parse", "--verify", "-q", name]).code == 0
}

fn wait_for_event(repo: &TestRepo, child: &mut Child, event: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while count_events(repo, &[event]) == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {event}"
        );
        assert!(Instant::now() < deadline, "no {event} within 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn finish_within(mut child: Child, limit: Duration) -> Leg {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            send(child.id(), libc::SIGKILL);
            panic!("the run did not stop within {limit:?}: {}", finish(child));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    finish(child)
}

// ---------------------------------------------------------------------------------------------
// One runner at a time

#[test]
fn a_second_runner_is_refused_and_a_stale_lock_is_taken_over() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let mut child = spawn(
        &repo,
        &["start", NAME, "--yes"],
        &[("RESUME_AGENT_SLEEP", "30")],
    );
    wait_for_event(&repo, &mut child, "round.started");
    let pid = child.id();
    for args in [
        vec!["resume", NAME],
        vec!["start", NAME, "--yes"],
        vec!["resume"],
    ] {
        let r = repo.conference(&args);
        assert_ne!(
            r.code, 0,
            "{args:?} ran beside a live runner: {}{}",
            r.stdout, r.stderr
        );
        assert!(
            r.stderr.contains(&format!("process {pid}")),
            "{args:?} must name the running process {pid}: {}",
            r.stderr
        );
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the running conference was disturbed"
    );
    send(pid, libc::SIGKILL);
    let leg = finish(child);
    assert_eq!(leg.ending, Ending::Signal(9));
    kill_strays(&repo);
    // The lock names a dead process: stale, taken over by the next resume.
    let lock = std::fs::read_to_string(lock_path(&repo)).expect("SIGKILL leaves the lock file");
    assert!(lock.starts_with(&format!("{pid} ")), "lock: {lock}");
    log.kills.push("slow agent".into());
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}

// ---------------------------------------------------------------------------------------------
// Validation on resume: partial work, missing worktrees, staleness

/// An uncommitted change found in a researcher's worktree is shown and recorded as an attempt
/// (`attempt.interrupted`, note verdict `interrupted`), never silently deleted — mid-research and
/// after the research phase.
#[test]
fn uncommitted_changes_are_set_aside_as_recorded_attempts() {
    let expected = reference();
    // (kill point of the first run, researcher whose worktree gets the change, kill point of the
    // resume that sets it aside — it must then be recorded once, not twice)
    for (failpoint, researcher, set_aside_kill) in [
        (
            "event.researcher.iteration:1",
            "A",
            "event.attempt.interrupted:1",
        ),
        ("event.round.poster_session:1", "B", "note.written:1"),
    ] {
        let repo = fixture();
        let before = user_side(&repo);
        let mut log = Log::default();
        let leg = next_leg(&repo, Some(failpoint), &[], Stop::Never, &mut log);
        assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
        kill_strays(&repo);
        let wt = worktree(&repo, &format!("researcher-{researcher}"));
        assert!(wt.join(".git").exists(), "no worktree at {}", wt.display());
        std::fs::write(wt.join("planted.txt"), "planted by the test\n").unwrap();
        std::fs::write(wt.join("a.txt"), "999\n").unwrap();
        let leg = next_leg(&repo, Some(set_aside_kill), &[], Stop::Never, &mut log);
        assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
        assert!(
            leg.stderr.contains("planted.txt"),
            "the set-aside change is shown:\n{leg}"
        );
        let leg = next_leg(&repo, None, &[], Stop::Never, &mut log);
        assert_eq!(leg.ending, Ending::Code(0), "{leg}");
        let events = repo.events(NAME);
        let set_aside: Vec<&Value> = events
            .iter()
            .filter(|e| {
                e["event"] == "attempt.interrupted" && e["payload"]["researcher"] == researcher
            })
            .filter(|e| {
                let c = e["payload"]["commit"].as_str().unwrap();
                repo.git_run(&["show", &format!("{c}:planted.txt")]).stdout
                    == "planted by the test\n"
            })
            .collect();
        assert_eq!(
            set_aside.len(),
            1,
            "[{failpoint}] the planted change was not recorded as an attempt: {events:#?}"
        );
        let commit = set_aside[0]["payload"]["commit"].as_str().unwrap();
        assert_eq!(repo.git(&["show", &format!("{commit}:a.txt")]), "999\n");
        let notes = repo.notes(commit);
        assert!(
            notes.iter().any(|n| n["verdict"] == "interrupted"),
            "note of {commit}: {notes:?}"
        );
        check_invariants(&repo, &before, expected, &log);
        let best_files = repo.git(&["ls-tree", "--name-only", &format!("conference/{NAME}/best")]);
        assert!(
            !best_files.contains("planted.txt"),
            "a set-aside attempt leaked into best"
        );
    }
}

/// Worktrees deleted behind the conference's back are re-created by resume.
#[test]
fn deleted_worktrees_are_recreated() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let leg = next_leg(
        &repo,
        Some("event.researcher.iteration:2"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    kill_strays(&repo);
    for label in ["researcher-B", "best"] {
        let wt = worktree(&repo, label);
        assert!(wt.exists(), "{}", wt.display());
        std::fs::remove_dir_all(&wt).unwrap();
    }
    resume_to_end(&repo, &mut log);
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    let path = std::fs::canonicalize(worktree(&repo, "researcher-B"))
        .expect("researcher-B worktree re-created");
    assert!(list.contains(&path.display().to_string()), "{list}");
    assert!(!list.contains("prunable"), "{list}");
    check_invariants(&repo, &before, expected, &log);
}

/// A conference whose last event is more than 24 h old is resumed with a warning.
#[test]
fn resume_warns_when_the_last_event_is_old() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let leg = next_leg(
        &repo,
        Some("event.round.started:1"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    kill_strays(&repo);
    age_last_event(&repo, "2000-01-01T00:00:00Z");
    let leg = next_leg(&repo, None, &[], Stop::Never, &mut log);
    assert_eq!(leg.ending, Ending::Code(0), "{leg}");
    assert!(
        leg.stderr.contains("warning") && leg.stderr.contains("hours ago"),
        "no staleness warning:\n{leg}"
    );
    check_invariants(&repo, &before, expected, &log);
}

/// Rewrites the tip event's state so its last update looks `when` (git plumbing only).
fn age_last_event(repo: &TestRepo, when: &str) {
    let r = events_ref();
    let tip = repo.git(&["rev-parse", &r]).trim().to_string();
    let mut state: Value =
        serde_json::from_str(&repo.git(&["show", &format!("{tip}:state.json")])).unwrap();
    state["updated_at"] = Value::String(when.into());
    let bytes = serde_json::to_vec_pretty(&state).unwrap();
    let commit = repo.commit_with_file(&tip, "state.json", &bytes, &format!("{tip}^"));
    repo.git(&["update-ref", &r, &commit, &tip]);
}

// ---------------------------------------------------------------------------------------------
// Resume elsewhere

/// Replaces the (empty) repository of a fresh TestRepo with a clone of `url`.
fn clone_of(url: &Path) -> TestRepo {
    let repo = TestRepo::new();
    std::fs::remove_dir_all(&repo.dir).unwrap();
    let out = repo
        .command("git")
        .current_dir(repo.tmp.path())
        .args(["clone", "-q", &url.display().to_string(), "repo"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "clone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo
}

fn bare_remote(repo: &TestRepo) -> PathBuf {
    let remote = repo.tmp.path().join("remote.git");
    repo.git(&[
        "init",
        "-q",
        "--bare",
        "--initial-branch=main",
        &remote.display().to_string(),
    ]);
    repo.git(&["remote", "add", "origin", &remote.display().to_string()]);
    repo.git(&["push", "-q", "origin", "main"]);
    remote
}

/// Killed on one machine, pushed with `git conference push`, resumed in a fresh clone after
/// `git conference fetch` — and killed and resumed there too.
#[test]
fn resume_in_a_fresh_clone_after_conference_push() {
    let expected = reference();
    let origin = fixture();
    let mut log = Log::default();
    let leg = next_leg(
        &origin,
        Some("note.before-ref:6"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    kill_strays(&origin);
    let remote = bare_remote(&origin);
    let r = origin.conference(&["push", "origin"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);

    let clone = clone_of(&remote);
    let before = user_side(&clone);
    let r = clone.conference(&["fetch", "origin"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(clone.conference(&["trust", NAME, "--yes"]).code, 0);
    let mut log = Log {
        kills: vec!["origin: note.before-ref:6".into()],
        resumed: 0,
    };
    let leg = next_leg(
        &clone,
        Some("transfer.cherry-picked:2"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    log.kills.push("clone: transfer.cherry-picked:2".into());
    kill_strays(&clone);
    resume_to_end(&clone, &mut log);
    for id in ["A", "B", "C"] {
        assert!(
            worktree(&clone, &format!("researcher-{id}"))
                .join(".git")
                .exists(),
            "researcher-{id} worktree in the clone"
        );
    }
    check_invariants(&clone, &before, expected, &log);
}

/// The same after a plain `git push` of the conference's refs and notes.
#[test]
fn resume_in_a_fresh_clone_after_plain_git_push() {
    let expected = reference();
    let origin = fixture();
    let mut log = Log::default();
    let leg = next_leg(
        &origin,
        Some("transfer.recorded:2"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    kill_strays(&origin);
    let remote = bare_remote(&origin);
    origin.git(&[
        "push",
        "-q",
        "origin",
        &format!("refs/conference/{NAME}/*:refs/conference/{NAME}/*"),
        &format!("refs/heads/conference/{NAME}/*:refs/heads/conference/{NAME}/*"),
        "refs/notes/conference:refs/notes/conference",
    ]);
    let clone = clone_of(&remote);
    let before = user_side(&clone);
    let r = clone.conference(&["fetch", "origin"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(clone.conference(&["trust", NAME, "--yes"]).code, 0);
    let mut log = Log {
        kills: vec!["origin: transfer.recorded:2".into()],
        resumed: 0,
    };
    resume_to_end(&clone, &mut log);
    check_invariants(&clone, &before, expected, &log);
}

// ---------------------------------------------------------------------------------------------
// Ctrl-C as a terminal sends it, through `git conference`

/// One Ctrl-C typed at `git conference start` or `resume`: the terminal sends SIGINT to the whole
/// foreground process group, and git forwards it to its `git-conference` child as well, so the
/// program gets it twice within a fraction of a millisecond. That is one press, at any instant
/// once the run holds its lock (startup, worktree preparation, research): a graceful stop
/// (agents and evaluations killed, what finished recorded, the resume hint, the lock released),
/// not the immediate exit of a second press. Resume then completes the conference.
#[test]
fn one_ctrl_c_through_git_is_one_graceful_stop() {
    use std::os::unix::process::CommandExt;
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let mut rng = Lcg(5);
    let mut stops = Vec::new();
    for _ in 0..6 {
        let resuming = has_conference(&repo);
        let args = if resuming {
            vec!["conference", "resume", NAME]
        } else {
            vec!["conference", "start", NAME, "--yes"]
        };
        let events_before = if resuming { repo.events(NAME).len() } else { 0 };
        let previous_lock = std::fs::read_to_string(lock_path(&repo)).unwrap_or_default();
        let mut child = repo
            .command("git")
            .args(&args)
            .env("RESUME_AGENT_SLEEP", "0.05")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        // Once the run holds its lock (its handler is in place by then).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let lock = std::fs::read_to_string(lock_path(&repo)).unwrap_or_default();
            if !lock.is_empty() && lock != previous_lock {
                break;
            }
            assert!(child.try_wait().unwrap().is_none(), "the run ended early");
            assert!(Instant::now() < deadline, "the run never took its lock");
            std::thread::sleep(Duration::from_millis(1));
        }
        let delay = rng.next(0, 500);
        std::thread::sleep(Duration::from_millis(delay));
        // SAFETY: signals the process group of our own child (its leader is not reaped yet).
        unsafe {
            libc::killpg(child.id() as i32, libc::SIGINT);
        }
        let leg = finish_within(child, Duration::from_secs(20));
        if leg.ending == Ending::Code(0) {
            break;
        }
        // git waits for its child, then dies of the signal it forwarded. Now and then git's own
        // signal handler reaps the child first, and git's wait then reports `waitpid for
        // git-conference failed: No child processes` (exit 128): git's race, not the run's; the
        // run's graceful stop is checked below either way.
        let gits_own_race = leg.ending == Ending::Code(128)
            && leg
                .stderr
                .contains("waitpid for git-conference failed: No child processes");
        assert!(
            matches!(leg.ending, Ending::Signal(libc::SIGINT) | Ending::Code(130)) || gits_own_race,
            "{leg}"
        );
        assert!(
            leg.stderr.contains(&format!(
                "interrupted; what finished is recorded. Continue with `git conference resume {NAME}`"
            )),
            "one Ctrl-C {delay} ms after the lock must stop gracefully with the resume hint:\n{leg}"
        );
        assert!(
            leg.stderr.matches("git-conference: stopping").count() <= 1,
            "{leg}"
        );
        check_graceful_stop(&repo);
        if resuming
            && repo.events(NAME)[events_before..]
                .iter()
                .any(|e| e["event"] == "conference.resumed")
        {
            log.resumed += 1;
        }
        stops.push(format!("{delay}ms@{}", last_event(&repo)));
    }
    eprintln!("graceful stops: {stops:?}");
    assert!(stops.len() >= 4, "only {} stops landed", stops.len());
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}

// ---------------------------------------------------------------------------------------------
// The run lock under contention

/// Several resumes started together against a lock file left behind (first naming a live process
/// that is not a runner, as after pid reuse; then left by a SIGKILLed runner): exactly one
/// proceeds, every other one is refused naming it, and the conference still completes.
#[test]
fn concurrent_resumes_against_a_stale_lock_exactly_one_proceeds() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    failpoint_chain_no_resume(&repo, "event.round.started:1", &mut log);
    // The lock file names a live process that is not a runner (its pid was reused).
    let mut bystander = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(
        lock_path(&repo),
        format!("{} {} 2000-01-01T00:00:00Z\n", bystander.id(), hostname()),
    )
    .unwrap();
    const TRIALS: usize = 12;
    const RUNNERS: usize = 4;
    for trial in 0..TRIALS {
        let env = [("RESUME_AGENT_SLEEP", "30")];
        let mut children: Vec<Child> = (0..RUNNERS)
            .map(|_| spawn(&repo, &["resume", NAME], &env))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut refused = Vec::new();
        while refused.len() < RUNNERS - 1 {
            assert!(
                Instant::now() < deadline,
                "trial {trial}: {} of {RUNNERS} resumes refused, the others run beside each other",
                refused.len()
            );
            let mut i = 0;
            while i < children.len() {
                if children[i].try_wait().unwrap().is_some() {
                    refused.push(finish(children.remove(i)));
                } else {
                    i += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            children.len(),
            1,
            "trial {trial}: no resume proceeded:\n{}",
            refused
                .iter()
                .map(|leg| leg.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
        let winner = children.pop().unwrap();
        for leg in &refused {
            assert_ne!(leg.ending, Ending::Code(0), "trial {trial}: {leg}");
            assert!(
                leg.stderr
                    .contains(&format!("already running (process {}", winner.id())),
                "trial {trial}: a refused resume must name the runner {}:\n{leg}",
                winner.id()
            );
        }
        // Killed at some point of its startup: the lock file stays, naming a dead process.
        std::thread::sleep(Duration::from_millis(20 * trial as u64));
        send(winner.id(), libc::SIGKILL);
        finish(winner);
        kill_strays(&repo);
    }
    let _ = bystander.kill();
    let _ = bystander.wait();
    log.resumed = repo.events_named(NAME, "conference.resumed").len();
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// Starts the conference and has it killed at `failpoint`.
fn failpoint_chain_no_resume(repo: &TestRepo, failpoint: &str, log: &mut Log) {
    let leg = next_leg(repo, Some(failpoint), &[], Stop::Never, log);
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    log.kills.push(failpoint.to_string());
    kill_strays(repo);
}

// ---------------------------------------------------------------------------------------------
// Branches moved by hand

fn rev(repo: &TestRepo, name: &str) -> String {
    repo.git(&["rev-parse", name]).trim().to_string()
}

/// Moves three conference branches the way a user might after a kill: a commit in researcher A's
/// worktree, `git update-ref` of researcher C's branch and of best to a commit of their own.
/// Returns (branch, commit it now points to).
fn move_branches_by_hand(repo: &TestRepo) -> Vec<(String, String)> {
    let wt = worktree(repo, "researcher-A");
    std::fs::write(wt.join("a.txt"), "1000\n").unwrap();
    repo.git_in(&wt, &["commit", "-q", "-am", "my own idea"]);
    let own = repo
        .git(&[
            "commit-tree",
            "main^{tree}",
            "-p",
            "main",
            "-m",
            "user's own commit",
        ])
        .trim()
        .to_string();
    let mut moved = vec![(
        format!("conference/{NAME}/researcher-A"),
        rev(repo, &format!("conference/{NAME}/researcher-A")),
    )];
    for branch in ["researcher-C", "best"] {
        let b = format!("conference/{NAME}/{branch}");
        repo.git(&["update-ref", &format!("refs/heads/{b}"), &own]);
        moved.push((b, own.clone()));
    }
    moved
}

/// A resume finds branches that no kill can leave where they are: it changes nothing and says
/// which branch points where, what the event log expects, and how to go on. Following either way
/// it names (`--force`, or the printed commands) finishes the conference with nothing lost.
#[test]
fn hand_moved_branches_stop_resume_until_set_aside() {
    let expected = reference();
    for use_force in [true, false] {
        let repo = fixture();
        let before = user_side(&repo);
        let mut log = Log::default();
        failpoint_chain_no_resume(&repo, "event.researcher.iteration:4", &mut log);
        let recorded = repo.status_json(NAME);
        let moved = move_branches_by_hand(&repo);
        let events = repo.events(NAME).len();

        let refused = repo.conference(&["resume", NAME]);
        assert_ne!(refused.code, 0, "{}{}", refused.stdout, refused.stderr);
        assert_eq!(
            repo.events(NAME).len(),
            events,
            "a refused resume recorded events"
        );
        for (branch, commit) in &moved {
            let label = branch.rsplit('/').next().unwrap();
            let want = if label == "best" {
                recorded["best"]["commit"].as_str().unwrap()
            } else {
                recorded["researchers"][&label["researcher-".len()..]]["head"]
                    .as_str()
                    .unwrap()
            };
            let line = refused
                .stderr
                .lines()
                .find(|l| l.contains(&format!("{branch} points to")))
                .unwrap_or_else(|| panic!("{branch} not named:\n{}", refused.stderr));
            assert!(
                line.contains(&commit[..10]) && line.contains(&want[..10]),
                "{line}"
            );
            assert_eq!(
                &rev(&repo, branch),
                commit,
                "a refused resume moved {branch}"
            );
        }
        assert!(
            refused
                .stderr
                .contains(&format!("git conference resume {NAME} --force")),
            "{}",
            refused.stderr
        );

        if use_force {
            let r = repo.conference(&["resume", NAME, "--force"]);
            assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
            log.resumed += 1;
            let set_aside = repo.events_named(NAME, "branch.set_aside");
            assert_eq!(set_aside.len(), moved.len(), "{set_aside:#?}");
            for (branch, commit) in &moved {
                let ev = set_aside
                    .iter()
                    .find(|e| e["payload"]["branch"] == branch.as_str())
                    .unwrap_or_else(|| panic!("{branch} not set aside"));
                assert_eq!(ev["payload"]["commit"], commit.as_str());
                let attempts = format!("refs/conference/{NAME}/attempts");
                assert_eq!(
                    repo.git_run(&["merge-base", "--is-ancestor", commit, &attempts])
                        .code,
                    0,
                    "{commit} is not kept reachable"
                );
                assert!(
                    repo.notes(commit)
                        .iter()
                        .any(|n| n["verdict"] == "set_aside" && n["branch"] == branch.as_str()),
                    "{commit} has no set-aside note"
                );
            }
            // The commit made in A's worktree is recorded once, not again as uncommitted work.
            let a_tree = rev(&repo, &format!("{}^{{tree}}", moved[0].1));
            assert!(
                !repo
                    .events_named(NAME, "attempt.interrupted")
                    .iter()
                    .any(|e| e["payload"]["tree"] == a_tree.as_str()),
                "the set-aside commit was recorded twice"
            );
        } else {
            // The printed commands, as a user would paste them.
            for line in refused.stderr.lines() {
                let line = line.trim();
                if let Some(args) = line.strip_prefix("git ") {
                    if !args.starts_with("conference") {
                        let args: Vec<&str> = args.split_whitespace().collect();
                        repo.git(&args);
                    }
                }
            }
            assert_eq!(rev(&repo, "my-work-1"), moved[0].1);
            resume_to_end(&repo, &mut log);
            assert!(repo.events_named(NAME, "branch.set_aside").is_empty());
        }
        check_invariants(&repo, &before, expected, &log);
    }
}

// ---------------------------------------------------------------------------------------------
// Worktrees that cannot be opened

/// A researcher worktree whose links to the repository broke keeps its files: after the whole
/// repository was moved, after its registration was deleted, and (moved aside, not deleted) when
/// it cannot be linked again. Its uncommitted work is recorded as an attempt.
#[test]
fn broken_worktrees_keep_their_files() {
    let expected = reference();
    for how in [
        "move the repository",
        "delete the registration",
        "unlinkable",
    ] {
        let mut repo = fixture();
        let before = user_side(&repo);
        let mut log = Log::default();
        failpoint_chain_no_resume(&repo, "event.researcher.iteration:2", &mut log);
        let wt = worktree(&repo, "researcher-B");
        std::fs::write(wt.join("planted.txt"), "planted by the test\n").unwrap();
        match how {
            "move the repository" => {
                let moved = repo.tmp.path().join("moved");
                std::fs::rename(&repo.dir, &moved).unwrap();
                repo.dir = moved;
            }
            "delete the registration" => {
                let gitfile = std::fs::read_to_string(wt.join(".git")).unwrap();
                let admin = gitfile.trim().strip_prefix("gitdir: ").unwrap();
                std::fs::remove_dir_all(admin).unwrap();
            }
            _ => {
                std::fs::remove_file(wt.join(".git")).unwrap();
                std::fs::create_dir(wt.join(".git")).unwrap();
            }
        }
        let wt = worktree(&repo, "researcher-B");
        let leg = next_leg(&repo, None, &[], Stop::Never, &mut log);
        assert_eq!(leg.ending, Ending::Code(0), "[{how}] {leg}");
        if how == "unlinkable" {
            let aside: Vec<PathBuf> = std::fs::read_dir(wt.parent().unwrap())
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("researcher-B.unlinked-")
                })
                .collect();
            assert_eq!(aside.len(), 1, "[{how}] {leg}");
            assert_eq!(
                std::fs::read_to_string(aside[0].join("planted.txt")).unwrap(),
                "planted by the test\n"
            );
            let aside_name = aside[0].file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                leg.stderr.contains(&aside_name),
                "[{how}] the warning says where the files went:\n{leg}"
            );
        } else {
            let recorded = repo
                .events_named(NAME, "attempt.interrupted")
                .iter()
                .any(|e| {
                    let c = e["payload"]["commit"].as_str().unwrap();
                    repo.show(c, "planted.txt").as_deref() == Some("planted by the test\n")
                });
            assert!(
                recorded,
                "[{how}] planted.txt is in no recorded attempt\n{leg}"
            );
        }
        assert!(wt.join(".git").is_file(), "[{how}] worktree not re-created");
        let list = repo.git(&["worktree", "list", "--porcelain"]);
        assert!(!list.contains("prunable"), "[{how}] {list}");
        check_invariants(&repo, &before, expected, &log);
    }
}

// ---------------------------------------------------------------------------------------------
// fetch never rewinds

fn events_tip(repo: &TestRepo) -> String {
    rev(repo, &events_ref())
}

/// `git conference fetch` takes a conference's refs only when the remote's event log continues
/// the local one: a remote that is behind leaves the local log alone (and says so), a diverged
/// one is refused, a live runner keeps fetch out, and a remote that is ahead is taken whole.
#[test]
fn fetch_never_rewinds_the_event_log() {
    let expected = reference();
    let origin = fixture();
    let mut origin_log = Log::default();
    failpoint_chain_no_resume(&origin, "event.researcher.iteration:2", &mut origin_log);
    let remote = bare_remote(&origin);
    origin.conference(&["push", "origin"]).ok();

    // A clone goes further than the remote: fetching again keeps its log.
    let clone = clone_of(&remote);
    clone.conference(&["fetch", "origin"]).ok();
    assert_eq!(clone.conference(&["trust", NAME, "--yes"]).code, 0);
    assert_eq!(events_tip(&clone), events_tip(&origin));
    let mut clone_log = Log::default();
    failpoint_chain_no_resume(&clone, "event.researcher.iteration:2", &mut clone_log);
    let ahead = events_tip(&clone);
    let r = clone.conference(&["fetch", "origin"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("ahead"), "{}", r.stdout);
    assert_eq!(events_tip(&clone), ahead, "fetch rewound the event log");

    // While a runner is live in the clone, fetch is refused and names it.
    let runner = spawn(&clone, &["resume", NAME], &[("RESUME_AGENT_SLEEP", "30")]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !lock_path(&clone).exists()
        || !std::fs::read_to_string(lock_path(&clone))
            .unwrap_or_default()
            .starts_with(&format!("{} ", runner.id()))
    {
        assert!(Instant::now() < deadline, "the runner never took its lock");
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = clone.conference(&["fetch", "origin"]);
    assert_ne!(r.code, 0, "fetch ran beside a live runner");
    assert!(
        r.stderr.contains(&format!("process {}", runner.id())),
        "{}",
        r.stderr
    );
    send(runner.id(), libc::SIGKILL);
    finish(runner);
    kill_strays(&clone);
    let ahead = events_tip(&clone);

    // The origin goes on too: the logs diverge, and fetch refuses to touch the clone's.
    let fresh = clone_of(&remote);
    fresh.conference(&["fetch", "origin"]).ok();
    failpoint_chain_no_resume(&origin, "event.researcher.iteration:3", &mut origin_log);
    origin.conference(&["push", "origin"]).ok();
    let r = clone.conference(&["fetch", "origin"]);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("diverged"), "{}", r.stderr);
    assert_eq!(events_tip(&clone), ahead, "fetch replaced a diverged log");

    // A clone that is behind takes the remote's log, branches and notes, and finishes there.
    let before = user_side(&fresh);
    let r = fresh.conference(&["fetch", "origin"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("new event(s)"), "{}", r.stdout);
    assert_eq!(fresh.conference(&["trust", NAME, "--yes"]).code, 0);
    assert_eq!(events_tip(&fresh), events_tip(&origin));
    // Its branches stand where the origin's event log says: the origin was killed mid-step,
    // so a branch it pushed may be ahead of its log, and the log is what a fetch follows.
    let state: serde_json::Value = serde_json::from_str(
        &origin
            .show(&format!("refs/conference/{NAME}/events"), "state.json")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        rev(&fresh, &format!("refs/heads/conference/{NAME}/best")),
        state["best"]["commit"].as_str().unwrap()
    );
    for id in ["A", "B", "C"] {
        let b = format!("refs/heads/conference/{NAME}/researcher-{id}");
        let logged = state["researchers"][id]["head"].as_str().unwrap();
        assert_eq!(rev(&fresh, &b), logged, "{b}");
        if rev(&origin, &b) != logged {
            assert!(
                r.stdout.contains("where its event log says"),
                "{}",
                r.stdout
            );
        }
    }
    let mut log = Log {
        kills: origin_log.kills,
        resumed: fresh.events_named(NAME, "conference.resumed").len(),
    };
    resume_to_end(&fresh, &mut log);
    check_invariants(&fresh, &before, expected, &log);
}

// ---------------------------------------------------------------------------------------------
// Resume in a long round

/// Resume replays the notes of the events after the latest notes commit that says "noted
/// through" (or after the round's start): a conference killed deep into a long round has such a
/// mark within a batch of its last event, and the resume restores every note all the same.
#[test]
fn notes_are_marked_so_resume_replays_a_batch_not_the_round() {
    let repo = fixture();
    let mut config = common::ConfigBuilder::new("Long round", "sh ./agent.sh")
        .iterations(200)
        .rounds(1)
        .frozen("eval.sh, agent.sh");
    config.max_total_iterations = 1000;
    repo.write("conference.md", &config.build());
    repo.commit_all("long round");
    let mut log = Log::default();
    let env = [("RESUME_AGENT_SLEEP", "0")];
    let leg = next_leg(
        &repo,
        Some("event.researcher.iteration:170"),
        &env,
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    kill_strays(&repo);
    let notes_log = repo.git(&[
        "log",
        "--first-parent",
        "--format=%B",
        "refs/notes/conference",
    ]);
    let mark = notes_log
        .lines()
        .find_map(|l| l.strip_prefix(&format!("Conference-Noted-Through: {NAME} ")))
        .expect("no notes commit says how far it noted")
        .trim()
        .to_string();
    let behind: usize = repo
        .git(&["rev-list", "--count", &format!("{mark}..{}", events_ref())])
        .trim()
        .parse()
        .unwrap();
    let since_round: usize = repo
        .git(&["rev-list", "--count", "--first-parent", &events_ref()])
        .trim()
        .parse()
        .unwrap();
    assert!(
        behind <= 130 && since_round > 170,
        "marked {behind} events behind the tip, of {since_round}"
    );
    let leg = next_leg(&repo, None, &env, Stop::Never, &mut log);
    assert_eq!(leg.ending, Ending::Code(0), "{leg}");
    for e in repo.events(NAME) {
        for note in e["payload"]["notes"].as_array().into_iter().flatten() {
            let commit = note["commit"].as_str().unwrap();
            assert!(
                repo.notes(commit).contains(note),
                "{} lacks its note on {commit}",
                e["event"]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small things a resume says and survives

/// After a budget stop the summary does not claim convergence; with several conferences the hint
/// names `resume`; a notes lock left by a killed run costs no wait; a resume whose stdout reader
/// went away (`| head`) still finishes.
#[test]
fn resume_summary_hint_and_closed_stdout() {
    let expected = reference();
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    failpoint_chain_no_resume(&repo, "event.conference.budget_stop:1", &mut log);

    repo.git(&["update-ref", "refs/conference/zzz/events", &events_ref()]);
    let r = repo.conference(&["resume"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains(&format!("git conference resume {NAME}")),
        "{}",
        r.stderr
    );
    repo.git(&["update-ref", "-d", "refs/conference/zzz/events"]);

    // A notes lock left long ago by a killed process is stale at once: no waiting for it.
    let notes_lock = repo.git_dir().join("refs/notes/conference.lock");
    std::fs::write(&notes_lock, "").unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&notes_lock)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    // That it costs no wait is recovery's unit test (its age is read from the file, not timed
    // here, where the machine's load would decide); here: it is gone and the resume goes on.
    let leg = next_leg(
        &repo,
        Some("event.conference.resumed:1"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    assert!(!notes_lock.exists(), "the stale notes lock is still there");
    assert!(
        leg.stderr
            .contains("- Convergence reached: no (stopped: budget_stop, max_rounds (2) reached)"),
        "{leg}"
    );

    let mut child = repo
        .command("git")
        .args(["conference", "resume", NAME])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "a closed stdout killed the run");
    log.resumed += 1;
    check_invariants(&repo, &before, expected, &log);
}

// ---------------------------------------------------------------------------------------------
// Git state that survives git (issue #14, case 8 and the notes ref)

/// A fresh fixture conference killed at `failpoint` (strays killed too): the repository, the
/// user's side before it ran, and the log of legs so far.
fn killed_at(failpoint: &str) -> (TestRepo, UserSide, Log) {
    let repo = fixture();
    let before = user_side(&repo);
    let mut log = Log::default();
    let leg = next_leg(&repo, Some(failpoint), &[], Stop::Never, &mut log);
    assert_eq!(leg.ending, Ending::Signal(9), "{leg}");
    kill_strays(&repo);
    (repo, before, log)
}

/// Every loose object file of the repository, by id.
fn loose_objects(repo: &TestRepo) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let objects = repo.git_dir().join("objects");
    for dir in std::fs::read_dir(&objects).unwrap().flatten() {
        let prefix = dir.file_name().to_string_lossy().into_owned();
        if prefix.len() != 2 {
            continue;
        }
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            out.insert(format!("{prefix}{}", file.file_name().to_string_lossy()));
        }
    }
    out
}

/// `git gc --prune=now` racing the conference deletes what a leg wrote before the refs naming it
/// moved (git protects objects in the worktrees' indexes, so those stay). The refs then name lost
/// commits; resume puts each back at its reflog's newest complete entry, says so, and completes
/// with the uninterrupted run's result.
#[test]
fn objects_lost_to_a_racing_prune_are_recovered_from_the_reflogs() {
    let expected = reference();
    let (repo, before, mut log) = killed_at("event.researcher.iteration:2");
    let scanned = loose_objects(&repo);
    let second = next_leg(
        &repo,
        Some("event.researcher.iteration:3"),
        &[],
        Stop::Never,
        &mut log,
    );
    assert_eq!(second.ending, Ending::Signal(9), "{second}");
    kill_strays(&repo);
    let in_indexes: std::collections::BTreeSet<String> = repo
        .git(&["rev-list", "--objects", "--indexed-objects"])
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let objects = repo.git_dir().join("objects");
    let mut pruned = 0;
    for id in loose_objects(&repo) {
        if !scanned.contains(&id) && !in_indexes.contains(&id) {
            std::fs::remove_file(objects.join(&id[..2]).join(&id[2..])).unwrap();
            pruned += 1;
        }
    }
    assert!(pruned > 10, "the second leg wrote objects: {pruned}");
    let tip = events_tip(&repo);
    assert_ne!(
        repo.git_run(&["cat-file", "-e", &tip]).code,
        0,
        "the event log's commit is gone"
    );

    // Run directly: the leg helper reads the event log first, which git cannot yet. The second
    // leg's `conference.resumed` was among the lost events; this one takes its place.
    let leg = run(&repo, &["resume", NAME], &[], Stop::Never);
    assert_eq!(leg.ending, Ending::Code(0), "{leg}");
    assert!(
        leg.stderr
            .contains(&format!("{} pointed at {}", events_ref(), &tip[..10]))
            && leg.stderr.contains("git reflog show"),
        "resume says what it put back and where to look:\n{leg}"
    );
    check_invariants(&repo, &before, expected, &log);
}

/// An agent, or a user, deleting `refs/notes/conference` while the conference is paused loses no
/// verdict: resume replays every event's notes (not only the current round's).
#[test]
fn deleted_notes_are_replayed_from_the_events_on_resume() {
    let expected = reference();
    let (repo, before, mut log) = killed_at("event.round.started:2");
    repo.git(&["update-ref", "-d", "refs/notes/conference"]);
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}

/// `git worktree list --porcelain` of the repository at `dir`: (worktree path, gitdir its `.git`
/// file names) for each linked worktree.
fn worktree_links(dir: &Path) -> Vec<(PathBuf, String)> {
    let out = std::process::Command::new("git")
        .args(["worktree", "list", "--porcelain"])
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains("prunable"), "{text}");
    text.lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .skip(1)
        .map(|p| {
            let gitfile = std::fs::read_to_string(Path::new(p).join(".git")).unwrap();
            (PathBuf::from(p), gitfile.trim().to_string())
        })
        .collect()
}

/// A repository moved while its conference is paused resumes where it is now: its worktrees are
/// linked to it again before anything runs, and the conference completes with the uninterrupted
/// run's result.
#[test]
fn a_moved_repository_links_its_worktrees_to_itself() {
    moved_repository_resumes(false);
}

/// The same, with the worktree folder moved along (the whole parent folder renamed, say).
#[test]
fn a_repository_moved_with_its_worktree_folder_resumes_there() {
    moved_repository_resumes(true);
}

fn moved_repository_resumes(with_worktree_folder: bool) {
    let expected = reference();
    let (mut repo, before, mut log) = killed_at("event.researcher.iteration:4");
    let moved = repo.tmp.path().join("moved");
    std::fs::rename(&repo.dir, &moved).unwrap();
    if with_worktree_folder {
        let folder = repo.tmp.path().join("repo.conference");
        std::fs::rename(&folder, repo.tmp.path().join("moved.conference")).unwrap();
    }
    repo.dir = moved.clone();
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
    let links = worktree_links(&moved);
    assert!(!links.is_empty());
    for (path, gitdir) in links {
        assert!(
            gitdir.starts_with(&format!("gitdir: {}", moved.join(".git").display()))
                && (!with_worktree_folder
                    || path.starts_with(repo.tmp.path().join("moved.conference"))),
            "{} links to {gitdir}",
            path.display()
        );
    }
}

/// A repository copied while its conference is paused (the original still there) never works in
/// the original's worktrees: the copy makes its own next to itself and completes; the original's
/// worktrees and registrations are as they were, and the original completes too.
#[test]
fn a_copied_repository_leaves_the_originals_worktrees_alone() {
    let expected = reference();
    let (mut repo, before, mut log) = killed_at("event.researcher.iteration:4");
    let original = repo.dir.clone();
    let original_links = worktree_links(&original);
    let copy = repo.tmp.path().join("copy");
    let cp = std::process::Command::new("cp")
        .args(["-a"])
        .arg(&original)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());

    repo.dir = copy.clone();
    let mut copy_log = Log {
        kills: log.kills.clone(),
        resumed: log.resumed,
    };
    let leg = next_leg(&repo, None, &[], Stop::Never, &mut copy_log);
    assert_eq!(leg.ending, Ending::Code(0), "{leg}");
    assert!(leg.stderr.contains("this repository is a copy"), "{leg}");
    check_invariants(&repo, &before, expected, &copy_log);
    assert_eq!(
        worktree_links(&original),
        original_links,
        "the original is untouched"
    );
    for (path, gitdir) in worktree_links(&copy) {
        assert!(
            path.starts_with(repo.tmp.path().join("copy.conference"))
                && gitdir.starts_with(&format!("gitdir: {}", copy.join(".git").display())),
            "{} links to {gitdir}",
            path.display()
        );
    }

    repo.dir = original;
    resume_to_end(&repo, &mut log);
    check_invariants(&repo, &before, expected, &log);
}
