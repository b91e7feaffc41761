//! A conference touches only what is its own: a copy of the repository never removes the
//! original's worktrees nor kills its processes; a `git fetch --prune`, a `git gc --prune=now`
//! or a branch the user makes while a conference runs changes nothing of it, and nothing of
//! theirs is blamed on an agent; a `fetch` killed half-way leaves nothing that stops the next.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use common::{ConfigBuilder, TestRepo};

/// A `cp -r` copy of a repository made while its conference runs (its agent mid-run): `clean`
/// and `resume` in the copy leave the original's worktrees and its running agent alone (the
/// copy says so, and makes worktrees of its own), and the original completes with nothing
/// killed, its history whole.
#[test]
fn a_copy_made_while_the_original_runs_leaves_it_alone() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Copied", "./agents/seq.sh wait-for-user")
        .iterations(2)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    repo.commit_all("conference");
    let runner = repo.start_until("copied", "agent-waiting");
    let copy = repo.tmp.path().join("copy");
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(&repo.dir)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let original_wt = repo.worktree("copied", "researcher-A");
    let value_before = std::fs::read_to_string(original_wt.join("value.txt")).unwrap();

    let clean = repo.conference_in(&copy, &["clean", "copied"]);
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    assert!(
        clean.stderr.contains("this repository is a copy"),
        "{}",
        clean.stderr
    );
    assert!(
        clean.stdout.contains("Removed 0 worktrees"),
        "{}",
        clean.stdout
    );
    assert!(
        original_wt.join(".git").is_file(),
        "clean in the copy removed the original's worktree"
    );
    assert_eq!(
        std::fs::read_to_string(original_wt.join("value.txt")).unwrap(),
        value_before
    );

    // The copy's own agent goes on at once; the original's still waits.
    std::fs::write(copy.join(".git/user-done"), "").unwrap();
    let resumed = repo.conference_in(&copy, &["resume", "copied"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(
        !resumed.stderr.contains("left running by a killed run"),
        "{}",
        resumed.stderr
    );
    for line in repo
        .git_in(&copy, &["worktree", "list", "--porcelain"])
        .lines()
    {
        if let Some(path) = line.strip_prefix("worktree ") {
            assert!(
                !Path::new(path).starts_with(repo.worktrees_root()),
                "the copy uses the original's worktree {path}"
            );
        }
    }
    assert!(original_wt.join(".git").is_file());

    std::fs::write(repo.git_dir().join("user-done"), "").unwrap();
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let log = repo.conference(&["log", "copied", "--format", "tsv"]).ok();
    assert!(!log.stdout.contains("signal"), "{}", log.stdout);
    assert_eq!(repo.status_json("copied")["status"], "completed");
    repo.git(&["fsck", "--no-progress"]);
}

/// `git conference fetch` killed (`kill -9`) at several instants, and the lock files a killed
/// `git fetch` or `git conference fetch` leaves on the refs it was writing: the next fetch clears
/// them (they hold no live writer) and takes the whole conference, its notes too.
#[test]
fn a_fetch_killed_half_way_leaves_nothing_that_stops_the_next() {
    let origin = TestRepo::complement_conference("kf");
    origin.bare_origin();
    origin.conference(&["push", "origin"]).ok();
    let remote = origin.tmp.path().join("remote.git");
    let events = origin.git(&["rev-parse", "refs/conference/kf/events"]);
    for delay_ms in [5, 20, 40, 80, 150] {
        let clone = origin.tmp.path().join(format!("clone-{delay_ms}"));
        origin.git(&[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            clone.to_str().unwrap(),
        ]);
        let mut fetch = origin
            .command(env!("CARGO_BIN_EXE_git-conference"))
            .current_dir(&clone)
            .args(["fetch", "origin"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let group = format!("-{}", fetch.id());
        std::process::Command::new("kill")
            .args(["-9", "--", &group])
            .status()
            .unwrap();
        fetch.wait().unwrap();
        // What a kill of git itself leaves: lock files on the refs being written.
        for lock in [
            "refs/conference-remotes/origin/conference/kf/events.lock",
            "refs/conference-remotes/origin/heads/conference/kf/best.lock",
            "refs/notes/conference-remotes/origin.lock",
            "refs/conference/kf/attempts.lock",
            "refs/heads/conference/kf/best.lock",
            "packed-refs.lock",
            "refs/notes/conference.lock",
        ] {
            let path = clone.join(".git").join(lock);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "").unwrap();
            let old = std::process::Command::new("touch")
                .args(["-d", "1 minute ago"])
                .arg(&path)
                .status()
                .unwrap();
            assert!(old.success());
        }
        let again = origin.conference_in(&clone, &["fetch", "origin"]);
        assert_eq!(
            again.code, 0,
            "after a kill at {delay_ms} ms: {}{}",
            again.stdout, again.stderr
        );
        assert_eq!(
            origin.git_in(&clone, &["rev-parse", "refs/conference/kf/events"]),
            events
        );
        let note = origin.git_in(
            &clone,
            &[
                "notes",
                "--ref=conference",
                "show",
                "refs/heads/conference/kf/best",
            ],
        );
        assert!(note.contains("\"verdict\""), "{note}");
        origin.git_in(&clone, &["fsck", "--no-progress"]);
    }
}

/// `git gc --prune=now` (which packs the refs too) run again and again, back to back, while a
/// conference runs: the run goes on to its end (a step whose new objects a prune deleted before
/// a ref named them is done again), and every ref stays valid (`git fsck` and `git rev-list
/// --all` pass the moment the run ends).
#[test]
fn git_gc_prune_now_in_a_loop_during_a_run_does_not_stop_it() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Collected", "./agents/improve.sh")
        .count(3)
        .iterations(4)
        .rounds(2)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    repo.commit_all("conference");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (run, collections) = std::thread::scope(|s| {
        let collector = s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                repo.git_run(&["gc", "-q", "--prune=now"]);
                n += 1;
            }
            n
        });
        let run = repo.conference(&["start", "collected"]);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        (run, collector.join().unwrap())
    });
    // One `git gc` may take the whole run on a loaded machine.
    assert!(collections > 0);
    for check in [
        &["fsck", "--no-progress", "--no-dangling"][..],
        &["rev-list", "--all"],
    ] {
        let out = repo.git_run(check);
        assert_eq!(
            out.code, 0,
            "git {check:?} after the run: {}\nthe run: {}",
            out.stderr, run.stderr
        );
    }
    assert_eq!(run.code, 0, "the run stopped:\n{}", run.stderr);
    assert_eq!(repo.status_json("collected")["status"], "completed");
    repo.git(&["fsck", "--no-progress"]);
}

/// A `git prune` that deletes the objects of a start's very first event before its ref moves
/// (the `start` paused there, then let go): the start writes that event again and the
/// conference runs to its end (it said "did not start … start it again" before).
#[test]
fn a_prune_that_deletes_the_first_events_objects_does_not_stop_the_start() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("First", "./agents/improve.sh")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    repo.commit_all("conference");
    let pause = repo.tmp.path().join("pause");
    std::fs::create_dir_all(&pause).unwrap();
    std::fs::write(pause.join("armed"), "").unwrap();
    let failpoint = format!("event.before-ref:pause={}", pause.display());
    let runner = repo.spawn_conference(
        &["start", "first"],
        &[("GIT_CONFERENCE_FAILPOINT", failpoint.as_str())],
    );
    let paused = pause.join("paused");
    common::wait_for_file(&paused, "the start never paused");
    let before = repo.git(&["count-objects"]);
    repo.git(&["prune", "--expire=now"]);
    assert_ne!(
        repo.git(&["count-objects"]),
        before,
        "the prune deleted nothing"
    );
    std::fs::remove_file(&paused).unwrap();
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("objects it had just written were deleted before a ref named them"),
        "the start says what happened: {stderr}"
    );
    assert_eq!(repo.status_json("first")["status"], "completed");
    let started = repo.events_named("first", "conference.started");
    assert_eq!(started.len(), 1, "{started:?}");
    repo.git(&["fsck", "--no-progress"]);
}

/// An agent that moves the user's `main` (`git branch -f main HEAD~`, else `git update-ref`) is
/// named and its move undone; a branch and a commit the user makes while that agent runs are
/// theirs: not named, not undone, and the attempt's verdict is what the agent's change earned.
#[test]
fn an_agents_ref_moves_are_undone_and_the_users_own_are_left_alone() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "agents/move-main.sh",
        "#!/bin/sh\ncommon=$(git rev-parse --git-common-dir)\n: >\"$common/agent-waiting\"\n\
         n=0\nwhile [ ! -e \"$common/user-done\" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done\n\
         git branch -f main HEAD~ 2>/dev/null || git update-ref refs/heads/main HEAD~\n\
         exec sh agents/improve.sh\n",
    );
    let config = ConfigBuilder::new("Moves main", "./agents/move-main.sh")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    repo.commit_all("conference");
    let runner = repo.start_until("moves", "agent-waiting");
    repo.git(&["branch", "user-feature"]);
    repo.write("notes.txt", "the user's own work\n");
    repo.commit_all("the user's own commit");
    let users_main = repo.git(&["rev-parse", "main"]);
    std::fs::write(repo.git_dir().join("user-done"), "").unwrap();
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let named: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(named.len(), 1, "{stderr}");
    assert!(
        named[0].starts_with("warning: researcher A's agent: refs/heads/main moved from ")
            && named[0].ends_with(&format!("put back at {}", &users_main[..10])),
        "{stderr}"
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), users_main);
    assert_eq!(
        repo.git(&["branch", "--list", "user-feature"]).trim(),
        "user-feature"
    );
    assert!(!stderr.contains("user-feature"), "{stderr}");
    let log = repo.conference(&["log", "moves", "--format", "tsv"]).ok();
    assert!(log.stdout.contains("\tkept\t"), "{}", log.stdout);
}
