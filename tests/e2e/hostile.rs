//! The hostile agent, fourth round (issue #45): each test is one case of the adversarial suite,
//! named after it, run through the real binary and real git with a small shell script as the
//! agent (`tests/data/hostile/`). What an agent does outside its files is noticed, named with the
//! researcher, put back where it is the conference's, and never ends the conference.

use crate::common;

use std::path::{Path, PathBuf};

use common::{ConfigBuilder, TestRepo};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hostile")
        .join(name)
}

/// `sh <script> <args>` as an agent command.
fn agent(name: &str, args: &str) -> String {
    format!("sh {} {args}", script(name).display())
        .trim_end()
        .to_string()
}

/// The verdicts of researcher `id`'s iterations, in order.
fn verdicts(repo: &TestRepo, name: &str, id: &str) -> Vec<String> {
    repo.events_named(name, "researcher.iteration")
        .iter()
        .filter(|e| e["payload"]["researcher"] == id)
        .map(|e| {
            e["payload"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// B-git_checkout_b: an agent that runs `git checkout -b` (and makes a ref of another
/// namespace) in every run is named each time, not only the first (the same branch made again
/// at the same commit is a new change), and nothing it made is left; the user's own branch
/// stays.
#[test]
fn b_git_checkout_b_every_branch_an_agent_makes_is_reported_and_removed() {
    let repo = TestRepo::from_fixture("loop");
    repo.git(&["branch", "users-own"]);
    let config = ConfigBuilder::new("Checkout", &agent("checkout-b.sh", ""))
        .iterations(3)
        .frozen("eval.sh, agents/**")
        .build();
    let run = repo.start("checkout", &config).ok();
    for what in ["refs/heads/agent-branch", "refs/agent/made"] {
        let named = run
            .stderr
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "warning: researcher A's agent: {what} was created at "
                )) && l.ends_with("; removed")
            })
            .count();
        assert_eq!(named, 3, "{what}, once per run:\n{}", run.stderr);
    }
    assert_eq!(repo.git(&["branch", "--list", "agent-branch"]), "");
    assert_eq!(repo.git(&["for-each-ref", "refs/agent/"]), "");
    assert_eq!(
        repo.git(&["branch", "--list", "users-own"]).trim(),
        "users-own"
    );
    assert!(!run.stderr.contains("users-own"), "{}", run.stderr);
    assert_eq!(verdicts(&repo, "checkout", "A"), ["reverted"; 3]);
    repo.git(&["fsck", "--no-progress"]);
}

/// Every note in refs/notes/conference, as text.
fn all_notes(repo: &TestRepo) -> String {
    repo.git(&["notes", "--ref=conference", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|commit| repo.git(&["notes", "--ref=conference", "show", commit]))
        .collect()
}

/// The reason of researcher `id`'s first attempt in round `round`.
fn first_attempt(repo: &TestRepo, name: &str, id: &str, round: u64) -> serde_json::Value {
    repo.events_named(name, "researcher.iteration")
        .into_iter()
        .map(|e| e["payload"].clone())
        .find(|p| p["researcher"] == id && p["round"] == round)
        .unwrap_or_else(|| panic!("no attempt of {id} in round {round}"))
}

/// The conference of the B-git_notes cases: two researchers, two rounds of one iteration;
/// researcher A's agent forges a note in round 1 (and deletes the notes ref at the instant the
/// runner moves it, with `delete`).
fn forged_notes_run(flavour: &str) -> (TestRepo, common::Run) {
    let repo = TestRepo::from_fixture("loop");
    let pause = repo.tmp.path().join("pause");
    std::fs::create_dir_all(&pause).unwrap();
    let config = ConfigBuilder::new(
        "Notes",
        &agent("git-notes.sh", &format!("{} {flavour}", pause.display())),
    )
    .count(2)
    .iterations(1)
    .rounds(2)
    .frozen("eval.sh, agents/**")
    .build();
    repo.write("conference.md", &config);
    let failpoint = format!("note.before-ref:pause={}", pause.display());
    let run = repo.conference_env(
        &["start", "notes"],
        &[("GIT_CONFERENCE_FAILPOINT", failpoint.as_str())],
    );
    (repo, run)
}

/// B-git_notes: an agent writes a forged note and deletes `refs/notes/conference` just as the
/// runner moves it (another researcher's note going in). The run went on (it stopped with a
/// wrong "objects gone (git gc --prune=now?)" before): the attempt is rejected with that
/// reason, the notes ref is put back with every verdict, and the forged one is read nowhere.
#[test]
fn b_git_notes_a_forged_note_and_a_deleted_notes_ref_reject_the_attempt() {
    let (repo, run) = forged_notes_run("delete");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(repo.status_json("notes")["status"], "completed");
    let a = first_attempt(&repo, "notes", "A", 1);
    assert_eq!(a["status"], "rejected", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("deleted refs/notes/conference: put back"),
        "{reason}"
    );
    assert_eq!(first_attempt(&repo, "notes", "B", 1)["status"], "kept");
    assert_eq!(first_attempt(&repo, "notes", "A", 2)["status"], "kept");
    let notes = all_notes(&repo);
    assert!(!notes.contains("forged"), "{notes}");
    // Every attempt's verdict is in the notes, B's of round 1 among them.
    for e in repo.events_named("notes", "researcher.iteration") {
        let commit = e["payload"]["commit"].as_str().unwrap();
        assert!(
            !repo.notes(commit).is_empty(),
            "no note on {commit}: {notes}"
        );
    }
    repo.git(&["fsck", "--no-progress"]);
}

/// B-git_notes, without the deletion: notes commits an agent puts on top of the conference's
/// (its git commands commit in the researcher's name) are taken off again, and the attempt is
/// rejected with that reason.
#[test]
fn b_git_notes_a_forged_note_on_top_of_the_notes_is_taken_off() {
    let (repo, run) = forged_notes_run("");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let a = first_attempt(&repo, "notes", "A", 1);
    assert_eq!(a["status"], "rejected", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("wrote 1 notes commit(s) of its own to refs/notes/conference")
            && reason.contains("put back"),
        "{reason}"
    );
    let notes = all_notes(&repo);
    assert!(!notes.contains("forged"), "{notes}");
}
