//! End-to-end tests of issue 12 items 2, 7 and 8 through the real binary and real git: a bad
//! streak changes direction instead of ending the run (`Stall rounds`), peer review handles a
//! noisy evaluation soundly, and what `status`, `list`, `log` and the reports say is computed from
//! the data.

mod common;

use common::{ConfigBuilder, TestRepo};

fn rev(repo: &TestRepo, r: &str) -> String {
    repo.git(&["rev-parse", "--verify", r]).trim().to_string()
}

/// An agent that worsens value.txt in round 1 and improves it from round 2 on, committed in the
/// fixture so every worktree has it.
fn nothing_then_gain(repo: &TestRepo) {
    repo.write_executable(
        "agents/late.sh",
        "#!/bin/sh\nif [ \"$CONFERENCE_ROUND\" = 1 ]; then exec sh agents/worsen.sh; fi\nexec sh agents/improve.sh\n",
    );
    repo.commit_all("late agent");
}

/// The repro: one researcher whose round finds nothing (7 non-improving attempts, stuck
/// level 3) used to end the whole conference as `stalled`. Now its round ends early, it is
/// respawned with a pivot, and the gain it finds next round is kept, validated and on best.
#[test]
fn a_round_without_progress_then_a_gain_keeps_the_gain() {
    let repo = TestRepo::from_fixture("loop");
    nothing_then_gain(&repo);
    let config = ConfigBuilder::new("Late", "./agents/late.sh")
        .iterations(10)
        .rounds(2)
        .build();
    repo.start("late", &config).ok();
    let stuck: Vec<u64> = repo
        .events_named("late", "researcher.stuck")
        .iter()
        .map(|e| e["payload"]["stuck_level"].as_u64().unwrap())
        .collect();
    assert_eq!(stuck, [1, 2, 3]);
    let finished = repo.events_named("late", "researcher.finished");
    assert_eq!(finished[0]["payload"]["reason"], "stuck");
    assert_eq!(
        finished[0]["payload"]["iterations"], 7,
        "level 3 ends the round"
    );
    let started = repo.events_named("late", "round.started");
    assert_eq!(started.len(), 2, "the conference goes on to round 2");
    assert_eq!(
        started[1]["payload"]["researcher_states"][0], "A:respawned",
        "{started:?}"
    );
    let st = repo.status_json("late");
    assert_eq!(st["final_status"], "budget_stop", "{st}");
    // Round 2 lowers the value ten times from 10: the gain is on best.
    assert_eq!(st["best"]["metric"].as_f64(), Some(0.0), "{st}");
    assert_eq!(
        repo.show("conference/late/best", "value.txt")
            .unwrap()
            .trim(),
        "0"
    );
}

/// `Stall rounds: 2` (the default): the conference stops as stalled only after two consecutive
/// rounds in which every researcher was stalled; `never` runs until the budget.
#[test]
fn stalled_only_after_consecutive_stalled_rounds_and_never_runs_to_the_budget() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Stuck", "./agents/seq.sh worsen")
        .iterations(5)
        .rounds(4)
        .build();
    repo.start("stuck", &config).ok();
    let st = repo.status_json("stuck");
    assert_eq!(st["final_status"], "stalled", "{st}");
    assert_eq!(st["round"], 2, "{st}");
    assert_eq!(st["stalled_rounds"], 2, "{st}");
    assert!(
        st["stop_reason"]
            .as_str()
            .unwrap()
            .contains("2 consecutive round"),
        "{st}"
    );
    assert_eq!(rev(&repo, "conference/stuck/best"), rev(&repo, "main"));

    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Forever", "./agents/seq.sh worsen")
        .iterations(5)
        .rounds(4)
        .constraint("- **Stall rounds:** never")
        .build();
    repo.start("forever", &config).ok();
    let st = repo.status_json("forever");
    assert_eq!(st["final_status"], "budget_stop", "{st}");
    assert_eq!(st["round"], 4, "{st}");

    // A bad value is refused with its line.
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Bad", "./agents/seq.sh worsen")
        .constraint("- **Stall rounds:** sometimes")
        .build();
    repo.write("conference.md", &config);
    let line = config
        .lines()
        .position(|l| l.contains("Stall rounds"))
        .unwrap()
        + 1;
    let run = repo.conference(&["start"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("conference.md:{line}:")) && run.stderr.contains("never"),
        "{}",
        run.stderr
    );
}
