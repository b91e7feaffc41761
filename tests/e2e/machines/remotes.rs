//! What the shared remote carries besides a conference, and remotes a machine cannot use fully
//! (issue #45): the knowledge store travels over it, a read-only remote is refused with the
//! reason, and a ref lock a user's own `git fetch` holds in a machine's clone is waited out.

use std::time::Duration;

use super::*;

/// A lab's first conference runs through the shared remote from machine 1; its retrospective's
/// knowledge store reaches the remote, and a second conference started from another box
/// (machine 2's clone, which never fetched the store itself) is briefed with it.
#[test]
fn a_labs_second_conference_on_another_box_learns_from_the_first() {
    let config = config("3s");
    let c = cluster(&config);
    let first = c.spawn(
        0,
        &[
            "start",
            NAME,
            "--remote",
            &c.url,
            "--machine",
            "m1",
            "--yes",
        ],
    );
    c.finishes(0, first);
    let store = "refs/conference-knowledge/store";
    c.repo.git_in(&c.remote, &["rev-parse", "--verify", store]);
    let box2 = &c.machines[1];
    assert!(
        c.repo
            .run_in(box2, "git", &["rev-parse", "--verify", store])
            .code
            != 0,
        "machine 2 had the store before its start"
    );
    let second = c.spawn(
        1,
        &[
            "start",
            "second",
            "--remote",
            &c.url,
            "--machine",
            "m2",
            "--yes",
        ],
    );
    c.finishes(1, second);
    assert!(c.log(1).contains("Knowledge: took"), "{}", c.log(1));
    let log = c
        .repo
        .conference_in(box2, &["log", "second", "--format", "jsonl"])
        .ok();
    assert!(
        log.stdout.contains("\"event\":\"knowledge.briefed\""),
        "the second conference was not briefed:\n{}",
        log.stdout
    );
}

/// A remote served read-only: `join` through it is refused at once with the reason (a machine
/// that cannot publish takes part in nothing), and `start --remote` keeps nothing.
#[test]
fn a_read_only_remote_is_refused_with_the_reason() {
    let config = config("3s");
    let c = cluster(&config);
    let served = c.remote.parent().unwrap().to_path_buf();
    let read_only = crate::common::read_only_daemon(&c.repo, &served);
    let url = format!("git://127.0.0.1:{}/remote.git", read_only.1);
    let m1 = c.start();
    let dir = &c.machines[1];
    c.repo
        .conference_in(dir, &["fetch", &url, "--name", NAME])
        .ok();
    c.repo.conference_in(dir, &["trust", NAME, "--yes"]).ok();
    let join = c
        .repo
        .conference_in(dir, &["join", &url, NAME, "--machine", "m2"]);
    assert_eq!(join.code, 2, "{}{}", join.stdout, join.stderr);
    assert!(
        join.stderr.contains("does not take pushes from this clone")
            && join.stderr.contains("give this clone push access"),
        "{}",
        join.stderr
    );
    let other = &c.machines[2];
    let start = c.repo.conference_in(
        other,
        &[
            "start",
            "other",
            "--remote",
            &url,
            "--machine",
            "m3",
            "--yes",
        ],
    );
    assert_eq!(start.code, 2, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stderr.contains("nothing of `other` was kept"),
        "{}",
        start.stderr
    );
    let left = c
        .repo
        .git_in(other, &["for-each-ref", "refs/conference/other/"]);
    assert_eq!(left, "");
    let m2 = c.join(1, "B");
    let m3 = c.join(2, "C");
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
}

/// A user's `git fetch` in machine 2's clone holds the lock of researcher B's branch for three
/// seconds (a live process has the lock file open) while B runs: the machine waits it out and
/// the conference ends with the one-machine best.
#[test]
fn a_ref_lock_held_by_a_users_fetch_is_waited_out() {
    let config = config("3s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    super::under_fire::wait_for_iteration(&c, "B", 1, 1);
    let lock = c.machines[1].join(format!(
        ".git/refs/heads/conference/{NAME}/researcher-B.lock"
    ));
    std::fs::write(&lock, "").unwrap();
    let mut fetch = std::process::Command::new("sh")
        .arg("-c")
        .arg("sleep 3 <\"$0\"")
        .arg(&lock)
        .spawn()
        .unwrap();
    fetch.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let _ = std::fs::remove_file(&lock);
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
}
