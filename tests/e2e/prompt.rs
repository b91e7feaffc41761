//! End-to-end check of what a researcher's prompt tells it about its past: a script researcher
//! copies `$CONFERENCE_PROMPT_FILE` at each iteration, and the test reads what it saw.

use crate::common;

use common::{ConfigBuilder, TestRepo};

#[test]
fn a_researcher_sees_why_its_previous_attempts_failed() {
    let repo = TestRepo::from_fixture("lines");
    // Iteration 1 tampers with the frozen harness (rejected), 2 removes the data the evaluation
    // reads (crashed, with a message on stderr), 3 lowers `a` (kept), 4 does nothing.
    repo.write_executable(
        "agent2.sh",
        r#"#!/bin/sh
cp "$CONFERENCE_PROMPT_FILE" "$(git rev-parse --git-common-dir)/prompt-i$CONFERENCE_ITERATION.md"
case "$CONFERENCE_ITERATION" in
1) echo 'echo score: 0' >>eval.sh; echo "make the harness say 0" >"$CONFERENCE_NOTE_FILE" ;;
2) rm params.txt; echo "drop the parameters" >"$CONFERENCE_NOTE_FILE" ;;
3) exec ./agent.sh ;;
esac
exit 0
"#,
    );
    repo.commit_all("an agent that fails twice");
    let config = ConfigBuilder::new("Briefed", "./agent2.sh")
        .iterations(4)
        .build();
    repo.start("briefed", &config).ok();
    let first = repo.git_dir_file("prompt-i1.md");
    assert!(!first.contains("## Your recent attempts"), "{first}");
    let third = repo.git_dir_file("prompt-i3.md");
    let own = third
        .split("## Your recent attempts (newest first)\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{third}"));
    assert!(
        own.starts_with("- r1 i2 crashed — drop the parameters\n"),
        "newest first: {own}"
    );
    assert!(
        own.contains("  last output:\n    eval.sh: params.txt is missing\n"),
        "{own}"
    );
    assert!(
        own.contains(
            "- r1 i1 rejected — make the harness say 0\n  reason: changes frozen path eval.sh"
        ),
        "{own}"
    );
    let fourth = repo.git_dir_file("prompt-i4.md");
    assert!(
        fourth.contains("- r1 i3 kept: 29 (1 better than your best then) — lower a by 1\n"),
        "{fourth}"
    );
}
