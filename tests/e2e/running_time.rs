//! Budgets count running time (issue #22 item 2): a conference paused for the night is not out
//! of time in the morning, and `status` shows the running time, what is left of each budget and
//! when the run would end.

use crate::common::{ConfigBuilder, TestRepo};

const NAME: &str = "night";

/// One researcher, one iteration a round, two rounds, a pause after each round and a time
/// budget of `budget`.
fn paused_config(budget: &str) -> String {
    ConfigBuilder::new("Night", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .constraint(&format!("- **Time budget:** {budget}"))
        .build()
}

fn iterations_of_round(repo: &TestRepo, round: u64) -> usize {
    repo.events_named(NAME, "researcher.iteration")
        .iter()
        .filter(|e| e["payload"]["round"].as_u64() == Some(round))
        .count()
}

#[test]
fn a_conference_paused_longer_than_its_time_budget_resumes_with_its_running_time_left() {
    let repo = TestRepo::from_fixture("loop");
    let run = repo.start(NAME, &paused_config("20s"));
    assert_eq!(
        run.code, 3,
        "paused after round 1: {}{}",
        run.stdout, run.stderr
    );
    assert_eq!(iterations_of_round(&repo, 1), 1);

    // The night: longer than the whole time budget, with no process running.
    std::thread::sleep(std::time::Duration::from_secs(21));

    let status = repo.conference(&["status", NAME]).ok();
    let running = status
        .stdout
        .lines()
        .find(|l| l.starts_with("Running:"))
        .unwrap_or_else(|| panic!("no running time in status:\n{}", status.stdout));
    let seconds: f64 = running
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.strip_suffix('s'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{running}"));
    assert!(
        seconds < 20.0,
        "the night counted as running time: {running}"
    );
    assert!(
        status.stdout.contains("Left:       time ")
            && status
                .stdout
                .contains(" of 20s · iterations 99 of 100 · rounds 1 of 2"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("Ends:       in about "),
        "{}",
        status.stdout
    );

    let run = repo.conference(&["resume", NAME]);
    let st = repo.status_json(NAME);
    assert_ne!(
        st["stop_reason"].as_str().unwrap_or(""),
        "time_budget (20s) used",
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(
        iterations_of_round(&repo, 2),
        1,
        "round 2 ran its iteration"
    );
    // Every event after the first carries the running seconds its process spent since the one
    // before (or since it began running).
    for e in repo.events(NAME).iter().skip(1) {
        let s = e["payload"]["running_s"].as_f64();
        assert!(s.is_some_and(|s| (0.0..20.0).contains(&s)), "{e}");
    }
    assert!(
        st["running_seconds"].as_f64().is_some_and(|s| s < 20.0),
        "{st}"
    );
}

#[test]
fn a_time_budget_spent_in_running_time_still_stops_the_conference() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "sleepy.sh",
        "#!/bin/sh\nsleep 0.5\nexec sh agents/improve.sh\n",
    );
    repo.commit_all("an agent that takes half a second");
    let config = ConfigBuilder::new("Night", "./sleepy.sh")
        .iterations(50)
        .rounds(3)
        .constraint("- **Time budget:** 3s")
        .build();
    repo.start(NAME, &config);
    let st = repo.status_json(NAME);
    assert_eq!(st["final_status"], "budget_stop", "{st}");
    assert_eq!(st["stop_reason"], "time_budget (3s) used", "{st}");
    let running = st["running_seconds"].as_f64().unwrap();
    assert!((3.0..30.0).contains(&running), "{running}");
}
