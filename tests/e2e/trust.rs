//! The trust gate (issue #14, case 1): a conference runs only commands this clone approved. A
//! conference fetched from another clone runs nothing on `resume` until `git conference trust`,
//! `status` shows its commands and whether they are trusted, and the clone that wrote them runs
//! them without asking. Every command in these tests appends to a marker file, so "ran nothing"
//! is checked, not assumed.

use crate::common;

use std::path::{Path, PathBuf};

use common::{ConfigBuilder, TestRepo};

/// The complement fixture's conference `name`, paused after its first round, whose agent and
/// evaluation commands append to `marker`; returns the repository and the marker.
fn paused_conference(name: &str) -> (TestRepo, PathBuf) {
    let repo = TestRepo::from_fixture("complement");
    let marker = repo.tmp.path().join("marker");
    let m = marker.display();
    let mut config = ConfigBuilder::new("Trusted", &format!("echo agent >> {m} && ./agent.sh"))
        .count(2)
        .iterations(1)
        .rounds(2)
        .constraint("- **Pause every:** 1");
    config.eval = format!("echo eval >> {m} && ./eval.sh");
    let run = repo.start(name, &config.build());
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        marker.exists(),
        "the clone that wrote the commands runs them"
    );
    std::fs::remove_file(&marker).unwrap();
    (repo, marker)
}

/// A fresh clone of `repo` (through a bare remote) that fetched its conferences.
fn fresh_clone(repo: &TestRepo) -> PathBuf {
    let remote = repo.bare_origin();
    repo.git(&["push", "-q", "origin", "HEAD"]);
    repo.conference(&["push", "origin"]).ok();
    let clone = repo.tmp.path().join("clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    let run = repo.conference_in(&clone, &["fetch", "origin"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    clone
}

fn trusted_key(repo: &TestRepo, dir: &Path, name: &str) -> String {
    repo.git_in(
        dir,
        &[
            "config",
            "--local",
            "--default",
            "",
            &format!("conference.{name}.trusted"),
        ],
    )
    .trim()
    .to_string()
}

#[test]
fn a_fetched_conference_runs_nothing_until_this_clone_trusts_it() {
    let (repo, marker) = paused_conference("shared");
    let clone = fresh_clone(&repo);
    assert_eq!(
        trusted_key(&repo, &clone, "shared"),
        "",
        "approvals never travel"
    );

    let run = repo.conference_in(&clone, &["resume", "shared"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("git conference trust shared"),
        "{}",
        run.stderr
    );
    for line in ["agent", "echo agent >>", "evaluation", "echo eval >>"] {
        assert!(run.stderr.contains(line), "names `{line}`: {}", run.stderr);
    }
    assert!(
        !marker.exists(),
        "resume ran a command it was not trusted with"
    );
    let events = repo.git_in(&clone, &["rev-parse", "refs/conference/shared/events"]);
    assert_eq!(
        events,
        repo.git(&["rev-parse", "refs/conference/shared/events"]),
        "a refused resume records nothing"
    );

    let status = repo.conference_in(&clone, &["status", "shared"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("NOT trusted by this clone"),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("echo agent >>"), "{}", status.stdout);

    // Not on a terminal and without --yes: nothing is approved.
    let run = repo.conference_in(&clone, &["trust", "shared"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("echo eval >>"), "{}", run.stdout);
    assert_eq!(trusted_key(&repo, &clone, "shared"), "");

    let run = repo.conference_in(&clone, &["trust", "shared", "--yes"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(trusted_key(&repo, &clone, "shared").len(), 64);
    let status = repo.conference_in(&clone, &["status", "shared"]);
    assert!(
        status.stdout.contains("trusted by this clone"),
        "{}",
        status.stdout
    );

    let run = repo.conference_in(&clone, &["resume", "shared"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        marker.exists(),
        "after the approval, resume runs the commands"
    );
}

#[test]
fn commands_that_differ_from_the_approval_run_nothing() {
    let (repo, marker) = paused_conference("moved");
    // What a stored config changed behind this clone's back looks like: an approval that no
    // longer matches the commands.
    repo.git(&[
        "config",
        "--local",
        "conference.moved.trusted",
        &"0".repeat(64),
    ]);
    let run = repo.conference(&["resume", "moved"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(!marker.exists());
    assert!(repo.conference(&["trust", "moved", "--yes"]).code == 0);
    let run = repo.conference(&["resume", "moved"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(marker.exists());
}

#[test]
fn the_users_own_edit_of_a_trusted_conference_is_shown_and_runs() {
    let (repo, marker) = paused_conference("edited");
    let text = repo.read("conference.md");
    let m = marker.display();
    repo.write(
        "conference.md",
        &text.replace(
            &format!("echo agent >> {m} && ./agent.sh"),
            &format!("echo edited >> {m} && ./agent.sh"),
        ),
    );
    let run = repo.conference(&["resume", "edited"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("changes the commands `edited` runs")
            && run.stderr.contains("echo edited >>"),
        "{}",
        run.stderr
    );
    assert!(std::fs::read_to_string(&marker).unwrap().contains("edited"));
}

#[test]
fn a_conference_started_before_approvals_existed_is_trusted_where_it_ran() {
    let (repo, marker) = paused_conference("older");
    // Conferences recorded by earlier releases have no approval; their worktrees were made here.
    repo.git(&["config", "--local", "--unset", "conference.older.trusted"]);
    let run = repo.conference(&["resume", "older"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(marker.exists());
    assert_eq!(trusted_key(&repo, &repo.dir, "older").len(), 64);
}

// --- stored data is input (issue #14, case 2) -------------------------------------------------

/// Rewrites `state.json` at the tip of conference `name`'s event log with `edit` applied, as a
/// fetched or hand-edited log could hold it.
fn craft_state(repo: &TestRepo, name: &str, edit: impl Fn(&mut serde_json::Value)) {
    let events = format!("refs/conference/{name}/events");
    let text = repo.git(&["show", &format!("{events}:state.json")]);
    let mut state: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut state);
    let bytes = serde_json::to_vec(&state).unwrap();
    let commit = repo.commit_with_file(&events, "state.json", &bytes, &events);
    repo.git(&["update-ref", &events, commit.trim()]);
}

#[test]
fn a_crafted_state_name_reaches_nothing_outside_the_conference() {
    let (repo, _marker) = paused_conference("named");
    let outside = repo.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("Cargo.lock"), "mine").unwrap();
    let crafted = format!("../../../../../../..{}", outside.display());
    craft_state(&repo, "named", |s| s["name"] = crafted.clone().into());
    let status = repo.conference(&["status", "named"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(status.stdout.contains("(named)"), "{}", status.stdout);
    let run = repo.conference(&["resume", "named"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(outside.join("Cargo.lock")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "nothing made outside"
    );
    assert_eq!(repo.status_json("named")["name"], "named");
}

#[test]
fn crafted_numbers_and_short_ids_are_refused_naming_the_field() {
    let (repo, _marker) = paused_conference("crafted");
    craft_state(&repo, "crafted", |s| s["round"] = 4_000_000_000u64.into());
    for args in [
        vec!["report", "crafted"],
        vec!["status", "crafted"],
        vec!["resume", "crafted"],
    ] {
        let run = repo.conference(&args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("round is 4000000000"), "{}", run.stderr);
    }
    let (repo, _marker) = paused_conference("short");
    craft_state(&repo, "short", |s| s["best"]["commit"] = "abc".into());
    let run = repo.conference(&["status", "short"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(
        run.stderr.contains("best.commit is `abc`"),
        "{}",
        run.stderr
    );
}

#[test]
fn clean_all_forgets_the_approval() {
    let (repo, _marker) = paused_conference("gone");
    assert_eq!(trusted_key(&repo, &repo.dir, "gone").len(), 64);
    repo.conference(&["clean", "--all", "gone"]).ok();
    assert_eq!(
        trusted_key(&repo, &repo.dir, "gone"),
        "",
        "a later fetch of `gone` is not trusted"
    );
}
