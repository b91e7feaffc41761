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
