//! A conference touches only what is its own: a copy of the repository never removes the
//! original's worktrees nor kills its processes; a `git fetch --prune`, a `git gc --prune=now`
//! or a branch the user makes while a conference runs changes nothing of it, and nothing of
//! theirs is blamed on an agent; a `fetch` killed half-way leaves nothing that stops the next.

use crate::common;

use std::path::Path;

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
