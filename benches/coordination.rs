//! Coordination through a shared remote (issue #15): what publishing each event costs when
//! several machines record at once, and how long a machine joining late takes to catch up.
//!
//! Usage: coordination <repo> <conference> <workdir> <machines> <events-per-machine> [<catch-up>]
//!
//! `<repo>` holds a real conference (bench/run.py makes one, paused in round 1). Its event log
//! is pushed to a bare remote in `<workdir>`; `<machines>` clones of it each run their own
//! thread, recording `<events-per-machine>` iteration events through the engine's own recorder
//! and publishing each one (`remote::publish`: a compare-and-swap push, fetched and replayed
//! over the others' events when refused) — every machine through its own git processes, over
//! the local filesystem (a lower bound: a network adds its round trips to each publish). It
//! prints one JSON object: the median and 90th percentile of a publish, and publishes per
//! second over all machines. With `<catch-up>`, one machine then publishes that many more
//! events and a fresh clone times fetching the conference's event log and reading its state.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use git2::Repository;
use git_conference::engine::Recorder;
use git_conference::hooks::Hooks;
use git_conference::model::event::{self as events, Event};
use git_conference::model::state::{files, State};
use git_conference::model::Verdict;
use git_conference::remote::publish::publish;
use git_conference::store::{ConferenceRefs, EventLog, StateChange};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if !(5..=6).contains(&args.len()) {
        eprintln!(
            "usage: coordination <repo> <conference> <workdir> <machines> <events-per-machine> [<catch-up>]"
        );
        std::process::exit(2);
    }
    let (repo, name, work) = (Path::new(&args[0]), &args[1], PathBuf::from(&args[2]));
    let machines: usize = args[3].parse().expect("machines");
    let per_machine: usize = args[4].parse().expect("events per machine");
    let refs = ConferenceRefs::new(name);
    let remote = work.join("remote.git");
    git(&work, &["init", "-q", "--bare", remote.to_str().unwrap()]);
    let events_ref = refs.events();
    git(repo, &["push", "-q", remote.to_str().unwrap(), &events_ref]);
    let clones: Vec<PathBuf> = (0..machines)
        .map(|m| clone(&work, &remote, &events_ref, &format!("m{m}")))
        .collect();
    let t = Instant::now();
    let threads: Vec<_> = clones
        .iter()
        .enumerate()
        .map(|(m, dir)| {
            let (dir, refs) = (dir.clone(), refs.clone());
            std::thread::spawn(move || machine(&dir, &refs, m, per_machine))
        })
        .collect();
    let mut times: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let wall = t.elapsed().as_secs_f64();
    times.sort();
    let ms = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    let mut out = format!(
        "{{\"machines\": {machines}, \"publishes\": {}, \"median_ms\": {:.1}, \"p90_ms\": {:.1}, \"publishes_per_second\": {:.1}",
        times.len(),
        ms(0.5),
        ms(0.9),
        times.len() as f64 / wall
    );
    if let Some(catch_up) = args.get(5) {
        let n: usize = catch_up.parse().expect("catch-up");
        let seconds = catch_up_after(&work, &remote, &clones[0], &refs, n);
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

/// A machine: a fresh repository holding the remote's event log.
fn clone(work: &Path, remote: &Path, events_ref: &str, name: &str) -> PathBuf {
    let dir = work.join(name);
    git(work, &["init", "-q", dir.to_str().unwrap()]);
    git(&dir, &["remote", "add", "origin", remote.to_str().unwrap()]);
    git(
        &dir,
        &[
            "fetch",
            "-q",
            "origin",
            &format!("{events_ref}:{events_ref}"),
        ],
    );
    dir
}

/// Records `count` iterations of one researcher on machine `m`, publishing each; the time of
/// each publish.
fn machine(dir: &Path, refs: &ConferenceRefs, m: usize, count: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(count);
    for i in 0..count {
        let mut recorder = open(dir, refs);
        let researcher = researcher_of(&recorder.state, m);
        let event = iteration(&researcher, (m * count + i) as u32);
        let summary = format!("{researcher} bench {m}/{i}");
        let line = StateChange::AppendLine(
            format!("{}/attempts.jsonl", files::round_dir(recorder.state.round)),
            event.payload().to_string(),
        );
        recorder
            .record(&event, &summary, vec![line])
            .expect("record");
        let t = Instant::now();
        publish(&recorder.repo, dir, "origin", refs).expect("publish");
        times.push(t.elapsed());
    }
    times
}

/// The engine's recorder on the machine's event log, at its tip (which a publish may have
/// replayed).
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

fn researcher_of(state: &State, m: usize) -> String {
    let ids: Vec<&String> = state.researchers.keys().collect();
    ids[m % ids.len()].clone()
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
    })
}

/// Publishes `n` more events from `dir`, then times a fresh machine fetching the event log and
/// reading the state (what `join` does first).
fn catch_up_after(work: &Path, remote: &Path, dir: &Path, refs: &ConferenceRefs, n: usize) -> f64 {
    let mut recorder = open(dir, refs);
    let researcher = researcher_of(&recorder.state, 0);
    for i in 0..n {
        let event = iteration(&researcher, 1_000_000 + i as u32);
        recorder.record(&event, "catch-up", vec![]).expect("record");
    }
    publish(&recorder.repo, dir, "origin", refs).expect("publish");
    let t = Instant::now();
    let late = clone(work, remote, &refs.events(), "late");
    let opened = open(&late, refs);
    assert!(opened.state.total_iterations >= n as u64);
    t.elapsed().as_secs_f64()
}
