//! The stored format cannot drift silently: `tests/data/recorded/conference.bundle` is a
//! conference recorded by an earlier release (see the README beside it), paused after round 1
//! and pushed with `git conference push`. These tests read it with today's binary — fetched into
//! a fresh clone, it resumes to the same best tree and the same verdicts as an uninterrupted run
//! of the same conference from the same base, and `status`, `log` and `report` read its stored
//! bytes without error.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::TestRepo;
use git_conference::model::{
    Event, EventLine, FinalStatus, PickResult, ReviewVerdict, RunStatus, Verdict,
};
use serde_json::Value;

const NAME: &str = "rec";

fn bundle() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recorded/conference.bundle")
}

/// A fresh TestRepo whose repository is a clone of a bare remote made from the bundle; with
/// `everything`, the clone then runs `git conference fetch origin` (the recorded conference comes
/// along), else it holds only `main` (the recorded project at the recorded base).
fn clone_of_the_recording(everything: bool) -> TestRepo {
    let repo = TestRepo::new();
    std::fs::remove_dir_all(&repo.dir).unwrap();
    let remote = repo.tmp.path().join("remote.git");
    let tmp = repo.tmp.path().to_path_buf();
    let bundle = bundle();
    repo.git_in(
        &tmp,
        &[
            "clone",
            "-q",
            "--mirror",
            bundle.to_str().unwrap(),
            "remote.git",
        ],
    );
    repo.git_in(
        &tmp,
        &[
            "clone",
            "-q",
            "--single-branch",
            "-b",
            "main",
            remote.to_str().unwrap(),
            "repo",
        ],
    );
    if everything {
        repo.conference(&["fetch", "origin"]).ok();
    }
    repo
}

/// (researcher, round, iteration) → (verdict, metric) of every attempt, from the event log.
type Attempts = BTreeMap<(String, u64, u64), (String, Option<f64>)>;

fn attempts(repo: &TestRepo) -> Attempts {
    repo.events_named(NAME, "researcher.iteration")
        .iter()
        .map(|e| {
            let p = &e["payload"];
            (
                (
                    p["researcher"].as_str().unwrap().to_string(),
                    p["round"].as_u64().unwrap(),
                    p["iteration"].as_u64().unwrap(),
                ),
                (
                    p["status"].as_str().unwrap().to_string(),
                    p["metric_value"].as_f64(),
                ),
            )
        })
        .collect()
}

fn best_tree(repo: &TestRepo) -> String {
    repo.git(&["rev-parse", &format!("conference/{NAME}/best^{{tree}}")])
        .trim()
        .to_string()
}

fn events_tip(repo: &TestRepo) -> String {
    repo.git(&["rev-parse", &format!("refs/conference/{NAME}/events")])
        .trim()
        .to_string()
}

/// The recorded conference's commits on its event log, oldest first.
fn event_commits(repo: &TestRepo) -> Vec<String> {
    repo.git(&[
        "rev-list",
        "--reverse",
        &format!("refs/conference/{NAME}/events"),
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn a_recorded_conference_resumes_in_a_fresh_clone_to_the_uninterrupted_best() {
    // The recorded conference, continued here.
    let resumed = clone_of_the_recording(true);
    let recorded_events = event_commits(&resumed);
    assert_eq!(
        resumed.status_json(NAME)["status"],
        "paused",
        "the recording is paused after round 1"
    );
    assert_eq!(resumed.conference(&["trust", NAME, "--yes"]).code, 0);
    let run = resumed.conference(&["resume", NAME]);
    assert_eq!(run.code, 0, "resume\n{}{}", run.stdout, run.stderr);
    let st = resumed.status_json(NAME);
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(st["round"], 2, "{st}");
    // What was recorded stays as it was: the log only grew.
    let now = event_commits(&resumed);
    assert_eq!(now[..recorded_events.len()], recorded_events[..]);
    assert!(now.len() > recorded_events.len());

    // The same conference from the same base, uninterrupted (no pause).
    let straight = clone_of_the_recording(false);
    let config = straight
        .read("conference.md")
        .replace("- **Pause every:** 1\n", "");
    assert!(!config.contains("Pause every"));
    let config_path = straight.tmp.path().join("uninterrupted.md");
    std::fs::write(&config_path, config).unwrap();
    let run = straight.conference(&["start", NAME, "--config", config_path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "start\n{}{}", run.stdout, run.stderr);
    assert_eq!(straight.status_json(NAME)["status"], "completed");

    assert_eq!(best_tree(&resumed), best_tree(&straight));
    assert_eq!(
        st["best"]["metric"],
        straight.status_json(NAME)["best"]["metric"]
    );
    let (a, b) = (attempts(&resumed), attempts(&straight));
    assert_eq!(
        a.len(),
        18,
        "3 researchers × 3 iterations × 2 rounds: {a:?}"
    );
    assert_eq!(a, b);
    // The recording holds every common verdict word, so they are all read back.
    let verdicts: Vec<&str> = a.values().map(|(v, _)| v.as_str()).collect();
    for word in ["kept", "reverted", "crashed", "rejected", "no_change"] {
        assert!(verdicts.contains(&word), "{word} missing: {verdicts:?}");
    }
    assert_eq!(resumed.git(&["fsck", "--no-progress"]), "");
    every_stored_word_is_a_model_word(&resumed);
    every_stored_word_is_a_model_word(&straight);
    // The recorded part (by the earlier release) and what today's code wrote after it.
    every_event_is_a_typed_event_that_writes_the_same_payload(&resumed);
    every_event_is_a_typed_event_that_writes_the_same_payload(&straight);
    todays_bytes_keep_the_recorded_shape(&resumed, recorded_events.len(), &straight);
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// What today's code writes has every field the recording has (new fields may be added, none
/// renamed or removed): each event's payload, state.json and a researcher in it, the notes of
/// the attempts, and the files of a round in the state tree.
fn todays_bytes_keep_the_recorded_shape(recorded: &TestRepo, count: usize, today: &TestRepo) {
    let old = &recorded.events(NAME)[..count];
    let new = today.events(NAME);
    let mut compared = 0;
    for e in old {
        let name = e["event"].as_str().unwrap();
        let Some(n) = new.iter().find(|n| n["event"] == name) else {
            assert_eq!(name, "conference.paused", "{name} is no longer written");
            continue;
        };
        assert_eq!(keys(e), keys(n), "{name}: the event line");
        assert!(!keys(&e["payload"]).is_empty(), "{name} has a payload");
        let missing: Vec<_> = keys(&e["payload"])
            .difference(&keys(&n["payload"]))
            .cloned()
            .collect();
        assert!(missing.is_empty(), "{name} lost payload fields {missing:?}");
        compared += 1;
    }
    assert!(compared >= 15, "{compared} events compared");

    let state = |repo: &TestRepo, rev: &str| -> Value {
        serde_json::from_str(&repo.show(rev, "state.json").unwrap()).unwrap()
    };
    let recorded_tip = event_commits(recorded)[count - 1].clone();
    let old_state = state(recorded, &recorded_tip);
    let new_state = state(today, &format!("refs/conference/{NAME}/events"));
    assert!(
        keys(&old_state).is_subset(&keys(&new_state)),
        "state.json lost fields"
    );
    assert!(
        keys(&old_state["researchers"]["A"]).is_subset(&keys(&new_state["researchers"]["A"])),
        "a researcher in state.json lost fields"
    );

    let note_keys = |repo: &TestRepo, events: &[Value]| -> BTreeSet<String> {
        let kept = events
            .iter()
            .find(|e| e["event"] == "researcher.iteration" && e["payload"]["status"] == "kept")
            .expect("a kept attempt");
        let notes = repo.notes(kept["payload"]["commit"].as_str().unwrap());
        assert!(!notes.is_empty(), "a kept attempt has its note");
        keys(&notes[0])
    };
    assert!(
        note_keys(recorded, old).is_subset(&note_keys(today, &new)),
        "an attempt's note lost fields"
    );

    // A records file of a round begun today is stored in chunks (`attempts.jsonl.d/`, issue #27),
    // read as the one file it replaces.
    let round_files = |repo: &TestRepo, rev: &str| -> BTreeSet<String> {
        repo.git(&["ls-tree", "--name-only", &format!("{rev}:round-1")])
            .lines()
            .map(|f| {
                f.strip_suffix(".jsonl.d")
                    .map_or(f.to_string(), |s| format!("{s}.jsonl"))
            })
            .collect()
    };
    let old_files = round_files(recorded, &recorded_tip);
    let new_files = round_files(today, &format!("refs/conference/{NAME}/events"));
    assert!(
        old_files.is_subset(&new_files),
        "round-1 files {old_files:?} not all in {new_files:?}"
    );
}

/// Every event in the log reads as a typed event (`model::Event`) that writes back the payload it
/// was read from, field for field: the typed events change no stored byte.
fn every_event_is_a_typed_event_that_writes_the_same_payload(repo: &TestRepo) {
    let lines = repo.events(NAME);
    for line in &lines {
        let mut stored: EventLine = serde_json::from_value(line.clone()).unwrap();
        if let Some(payload) = stored.payload.as_object_mut() {
            for field in git_conference::model::event::RECORDER_FIELDS {
                payload.remove(field);
            }
        }
        let typed = Event::parse(&stored)
            .unwrap_or_else(|| panic!("{} does not read as a typed event: {line}", stored.event));
        assert_eq!(typed.name(), stored.event);
        assert_eq!(
            typed.payload(),
            stored.payload,
            "{}: the typed payload differs from the stored one",
            stored.event
        );
    }
    assert!(lines.len() >= 20, "{} events read", lines.len());
}

/// Every verdict and status word in the event log is one the model spells (`src/model`), in
/// the recorded part as in what today's code wrote after it.
fn every_stored_word_is_a_model_word(repo: &TestRepo) {
    let word = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("{v} is not a word"))
            .to_string()
    };
    let mut seen = 0;
    for e in repo.events(NAME) {
        let p = &e["payload"];
        match e["event"].as_str().unwrap() {
            "researcher.iteration" => {
                assert!(Verdict::parse(&word(&p["status"])).is_some(), "{e}");
                seen += 1;
            }
            "round.peer_review" => {
                for f in p["findings"].as_array().unwrap() {
                    assert!(ReviewVerdict::parse(&word(&f["verdict"])).is_some(), "{e}");
                    seen += 1;
                }
            }
            "transfer.pick" => {
                assert!(PickResult::parse(&word(&p["result"])).is_some(), "{e}");
                seen += 1;
            }
            "conference.budget_stop" | "conference.converged" | "conference.stalled" => {
                assert!(FinalStatus::parse(&word(&p["status"])).is_some(), "{e}");
                seen += 1;
            }
            _ => {}
        }
    }
    // 18 attempts, a review and picks in each round, a stop.
    assert!(seen > 24, "{seen} words checked");
    let st = repo.status_json(NAME);
    assert!(RunStatus::parse(&word(&st["status"])).is_some(), "{st}");
}

#[test]
fn status_log_and_report_read_a_recorded_conference_without_writing_to_it() {
    let repo = clone_of_the_recording(true);
    let tip = events_tip(&repo);
    let git_dir = repo.dir.join(".git");
    // `fetch` made the run folder (for its lock); reading must not make it again.
    std::fs::remove_dir_all(git_dir.join("conference").join(NAME)).unwrap();
    let files_before = files_under(&git_dir);

    let st = repo.status_json(NAME);
    assert_eq!(st["status"], "paused", "{st}");
    assert_eq!(st["round"], 1, "{st}");
    assert_eq!(st["best"]["metric"].as_f64(), Some(99.0), "{st}");
    let text = repo.conference(&["status", NAME]).ok().stdout;
    assert!(text.contains("paused"), "{text}");
    assert!(text.contains("changes frozen path eval.sh"), "{text}");

    let log = repo.conference(&["log", NAME]).ok().stdout;
    assert!(log.contains("conference.paused"), "{log}");
    assert!(log.contains("transfer.pick"), "{log}");
    let jsonl = repo
        .conference(&["log", NAME, "--format", "jsonl"])
        .ok()
        .stdout;
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), repo.events(NAME).len());
    assert_eq!(lines, repo.events(NAME), "jsonl is the stored events");
    let tsv = repo
        .conference(&["log", NAME, "--format", "tsv"])
        .ok()
        .stdout;
    let rows: Vec<&str> = tsv.lines().skip(1).collect();
    assert!(rows.len() >= 9, "{tsv}");
    // The verdict words, as everything else says them; the reason in the description.
    for word in ["kept", "reverted", "crashed", "rejected"] {
        assert!(
            rows.iter().any(|r| r.split('\t').any(|c| c == word)),
            "{word} missing from\n{tsv}"
        );
    }
    for why in [
        "[crashed: agent exit status 1]",
        "[rejected: changes frozen path eval.sh",
    ] {
        assert!(tsv.contains(why), "{why} missing from\n{tsv}");
    }

    let out = repo.tmp.path().join("report");
    repo.conference(&["report", NAME, "--output", out.to_str().unwrap()])
        .ok();
    for f in [
        "synthesis.md",
        "final_report.md",
        "conference_progress.png",
        "poster_session_round_1.md",
        "peer_review_round_1.md",
    ] {
        let len = std::fs::metadata(out.join(f))
            .unwrap_or_else(|_| panic!("{f} missing from the report"))
            .len();
        assert!(len > 0, "{f} is empty");
    }
    let review = std::fs::read_to_string(out.join("peer_review_round_1.md")).unwrap();
    assert!(review.contains("validated"), "{review}");

    repo.conference(&["list"]).ok();
    assert_eq!(events_tip(&repo), tip, "reading recorded an event");
    assert_eq!(
        files_under(&git_dir),
        files_before,
        "status, log, report and list created or removed files in the repository"
    );
    assert!(!git_dir.join("conference").join(NAME).exists());
    assert_eq!(
        repo.git(&["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
}

/// Every file under `dir` (git's index aside, which `git status` refreshes), relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            let relative = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if relative != "index" {
                found.insert(relative);
            }
        }
    }
    found
}
