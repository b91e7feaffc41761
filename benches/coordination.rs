//! Coordination through a shared remote (issues #15, #23): what recording and publishing each
//! event costs when several machines record at once, and how long a machine joining late takes
//! to catch up. It drives the path production runs, `remote::link::Link` (issue #23: a bench of
//! an algorithm production does not use measures nothing production does).
//!
//! Usage: coordination <repo> <conference> <workdir> <machines> <events-per-machine> [<catch-up>]
//!
//! `<repo>` holds a real conference with at least `<machines>` researchers:
//! `bench/coordination.sh <repo> 16` makes one (conference `bench`, paused after round 1).
//! Its conference refs (event log, attempts, notes, branches) are pushed to a bare remote in
//! `<workdir>` (which must be empty); `<machines>` clones fetch them, and each runs its own
//! thread as `join` does: a `Link` as machine `m<i>` wanting one researcher of its own (one
//! researcher per machine, as in production), a sync, a claim of that researcher's lease (and of
//! the chair's, which one machine wins), then `<events-per-machine>` iteration events recorded
//! through the engine's `Recorder` with the link attached, so each is published by
//! `Link::publish` as it is recorded: one atomic push of the event log (compare-and-swap,
//! fetched, checked and replayed over the others' events when refused), the lease renewals and
//! the machine's attempts and notes refs. Every machine runs its own git processes, over the
//! local filesystem (a lower bound: a network adds its round trips to each publish).
//!
//! It prints one JSON object: the median and 90th percentile of recording and publishing one
//! event, and events published per second over all machines; it checks that the remote ends
//! with every event once. With `<catch-up>`, machine 0 then records that many more events
//! offline and publishes them at once, and a fresh clone times fetching the conference's event
//! log and reading its state.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use git2::Repository;
use git_conference::engine::machines::arriving::Arrivals;
use git_conference::engine::{Conference, Recorder};
use git_conference::hooks::Hooks;
use git_conference::model::event::{self as events, Event};
use git_conference::model::state::{files, State};
use git_conference::model::Verdict;
use git_conference::remote::link::{Link, Wanted};
use git_conference::store::{ConferenceRefs, EventLog, StateChange};

/// Longer than any bench run: no lease expires, so no machine takes another's researcher.
const LEASE: Duration = Duration::from_secs(3600);

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if !(5..=6).contains(&args.len()) {
        eprintln!(
            "usage: coordination <repo> <conference> <workdir> <machines> <events-per-machine> [<catch-up>]\n(bench/coordination.sh <repo> 16 makes a conference `bench` with 16 researchers)"
        );
        std::process::exit(2);
    }
    let (repo, name, work) = (Path::new(&args[0]), &args[1], PathBuf::from(&args[2]));
    let machines: usize = args[3].parse().expect("machines");
    let per_machine: usize = args[4].parse().expect("events per machine");
    let refs = ConferenceRefs::new(name);
    let before = open(repo, &refs).state;
    let researchers: Vec<String> = before.researchers.keys().cloned().collect();
    if researchers.len() < machines {
        eprintln!(
            "coordination: `{name}` has {} researcher(s), fewer than {machines} machines (each runs one of its own, as in production); make one with more: bench/coordination.sh <repo> {machines}",
            researchers.len()
        );
        std::process::exit(2);
    }
    let remote = work.join("remote.git");
    git(&work, &["init", "-q", "--bare", remote.to_str().unwrap()]);
    git(
        repo,
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            &format!("refs/conference/{name}/*:refs/conference/{name}/*"),
            &format!("refs/heads/conference/{name}/*:refs/heads/conference/{name}/*"),
            "refs/notes/conference:refs/notes/conference",
        ],
    );
    let clones: Vec<PathBuf> = (0..machines)
        .map(|m| clone(&work, &remote, &["+refs/*:refs/*"], &format!("m{m}")))
        .collect();
    let ready = Arc::new(Barrier::new(machines + 1));
    let threads: Vec<_> = clones
        .iter()
        .enumerate()
        .map(|(m, dir)| {
            let (dir, name, ready) = (dir.clone(), name.clone(), ready.clone());
            let researcher = researchers[m].clone();
            std::thread::spawn(move || machine(&dir, &name, m, &researcher, per_machine, &ready))
        })
        .collect();
    ready.wait();
    let t = Instant::now();
    let mut ran: Vec<(Vec<Duration>, Recorder)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let wall = t.elapsed().as_secs_f64();
    let mut times: Vec<Duration> = ran.iter().flat_map(|(t, _)| t.clone()).collect();
    times.sort();
    let ms = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    let (_, first) = &mut ran[0];
    let published = remote_state(first);
    let expected = (machines * per_machine) as u64;
    assert_eq!(
        (published.total_iterations, published.events),
        (before.total_iterations + expected, before.events + expected),
        "the remote holds every event once"
    );
    let mut out = format!(
        "{{\"machines\": {machines}, \"publishes\": {}, \"median_ms\": {:.1}, \"p90_ms\": {:.1}, \"publishes_per_second\": {:.1}",
        times.len(),
        ms(0.5),
        ms(0.9),
        times.len() as f64 / wall
    );
    if let Some(catch_up) = args.get(5) {
        let n: usize = catch_up.parse().expect("catch-up");
        let seconds = catch_up_after(&work, &remote, first, &researchers[0], &refs, n);
        out.push_str(&format!(
            ", \"catch_up_events\": {n}, \"catch_up_seconds\": {seconds:.3}"
        ));
    }
    println!("{out}}}");
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?} failed");
}

/// A machine: a fresh repository holding what `refspecs` fetch from the remote.
fn clone(work: &Path, remote: &Path, refspecs: &[&str], name: &str) -> PathBuf {
    let dir = work.join(name);
    git(work, &["init", "-q", dir.to_str().unwrap()]);
    git(&dir, &["remote", "add", "origin", remote.to_str().unwrap()]);
    let mut fetch = vec!["fetch", "-q", "origin"];
    fetch.extend(refspecs);
    git(&dir, &fetch);
    dir
}

/// Machine `m` on clone `dir`: joins as `join` does, claims `researcher`, waits for every
/// machine at `ready`, then records `count` iterations of it, each published as recorded.
/// The time of each record-and-publish, and the recorder (its link attached).
fn machine(
    dir: &Path,
    name: &str,
    m: usize,
    researcher: &str,
    count: usize,
    ready: &Barrier,
) -> (Vec<Duration>, Recorder) {
    let refs = ConferenceRefs::new(name);
    let mut recorder = open(dir, &refs);
    let wanted = Wanted {
        researchers: Some(BTreeSet::from([researcher.to_string()])),
        slots: Some(1),
    };
    let link = Arc::new(
        Link::new(
            &recorder.repo,
            "origin",
            &format!("m{m}"),
            refs.clone(),
            LEASE,
            wanted,
        )
        .expect("link"),
    );
    // As `Conference::share`: what arrives is checked before it is followed or published over.
    let arrivals = Arrivals::new(&Conference::view(dir, name).expect("conference"));
    link.check_arrivals_with(Box::new(move |repo, from, to| {
        arrivals.check(repo, from, to)
    }));
    recorder.link = Some(link.clone());
    if link.sync(&recorder.repo).expect("sync").is_some() {
        recorder.reload().expect("reload");
    }
    // As `engine::run::shared::claim`.
    let state = &recorder.state;
    let all: Vec<String> = state.researchers.keys().cloned().collect();
    let released: BTreeSet<String> = state
        .machines
        .values()
        .flat_map(|m| m.researchers.iter().cloned())
        .collect();
    link.claim(&recorder.repo, &all, &released).expect("claim");
    assert!(link.holds(researcher), "m{m} holds {researcher}");
    ready.wait();
    let mut times = Vec::with_capacity(count);
    for i in 0..count {
        let event = iteration(researcher, (m * count + i) as u32);
        let summary = format!("{researcher} bench {m}/{i}");
        let line = StateChange::AppendLine(
            format!("{}/attempts.jsonl", files::round_dir(recorder.state.round)),
            event.payload().to_string(),
        );
        let t = Instant::now();
        recorder
            .record(&event, &summary, vec![line])
            .expect("record");
        times.push(t.elapsed());
    }
    (times, recorder)
}

/// The engine's recorder on the event log of clone `dir`, at its tip.
fn open(dir: &Path, refs: &ConferenceRefs) -> Recorder {
    let repo = Repository::open(dir).expect("repository");
    let log = EventLog::open(&repo, refs.clone()).expect("event log");
    let state: State = serde_json::from_slice(
        &log.read(&repo, files::STATE)
            .expect("state")
            .expect("state.json"),
    )
    .expect("state.json parses");
    let hooks = Hooks::new(&repo);
    Recorder::new(repo, log, state, hooks)
}

/// The state the remote holds now, once `recorder`'s machine followed it.
fn remote_state(recorder: &mut Recorder) -> State {
    let link = recorder.link.clone().expect("a link");
    if link.sync(&recorder.repo).expect("sync").is_some() {
        recorder.reload().expect("reload");
    }
    recorder.state.clone()
}

fn iteration(researcher: &str, n: u32) -> Event {
    Event::Iteration(events::Iteration {
        researcher: researcher.into(),
        round: 1,
        iteration: n,
        metric_value: Some(1.0),
        delta: None,
        status: Verdict::Reverted.into(),
        commit: None,
        tree: "0".repeat(40),
        description: format!("coordination bench {n}"),
        reason: None,
        sub_metrics: Default::default(),
        evaluated: false,
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

/// Records `n` more events of `researcher` on `recorder`'s machine while it does not publish
/// (as a machine cut off from the remote), publishes them in one go, then times a fresh machine
/// fetching the event log and reading the state (what `join` does first).
fn catch_up_after(
    work: &Path,
    remote: &Path,
    recorder: &mut Recorder,
    researcher: &str,
    refs: &ConferenceRefs,
    n: usize,
) -> f64 {
    let link = recorder.link.take().expect("a link");
    for i in 0..n {
        let event = iteration(researcher, 1_000_000 + i as u32);
        recorder.record(&event, "catch-up", vec![]).expect("record");
    }
    link.publish(&recorder.repo).expect("publish");
    let t = Instant::now();
    let events_ref = refs.events();
    let late = clone(
        work,
        remote,
        &[&format!("{events_ref}:{events_ref}")],
        "late",
    );
    let opened = open(&late, refs);
    assert!(opened.state.total_iterations >= n as u64);
    t.elapsed().as_secs_f64()
}
