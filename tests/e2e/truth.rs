//! End-to-end tests of issue 12 items 2, 7 and 8 through the real binary and real git: a bad
//! streak changes direction instead of ending the run (`Stall rounds`), peer review handles a
//! noisy evaluation soundly, and what `status`, `list`, `log` and the reports say is computed from
//! the data.

use crate::common;

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

/// `status` and `list` tell a running conference from one that Ctrl-C stopped: the run lock
/// says whether a runner is alive; looking does not disturb it.
#[test]
fn status_and_list_tell_a_stopped_run_from_a_running_one() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Live", "./agents/seq.sh hang")
        .agent_timeout("120s")
        .build();
    repo.write("conference.md", &config);
    let child = repo.start_until_the_agent_hangs("live");
    let pid = child.id().to_string();
    let status = repo.conference(&["status", "live"]).ok().stdout;
    assert!(
        status.contains(&format!("Status:     running (process {pid})")),
        "{status}"
    );
    let list = repo.conference(&["list"]).ok().stdout;
    assert!(list.contains(&format!("running (process {pid})")), "{list}");
    assert_eq!(repo.status_json("live")["runner_pid"], pid.as_str());

    let killed = repo.command("kill").args(["-INT", &pid]).status().unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let status = repo.conference(&["status", "live"]).ok().stdout;
    assert!(
        status.contains("Status:     interrupted (resume to continue)"),
        "{status}"
    );
    let list = repo.conference(&["list"]).ok().stdout;
    assert!(list.contains("interrupted (resume to continue)"), "{list}");
    let st = repo.status_json("live");
    assert_eq!(st["status"], "running", "the stored state is unchanged");
    assert_eq!(st["runner_pid"], serde_json::Value::Null);
}

/// Why attempts were rejected, crashed or changed nothing is shown where users look: the
/// progress line, `status`, `log` (text and tsv, same columns) and both reports, which count each
/// kind of failure with an example; the reports' sentences follow the data.
#[test]
fn rejection_and_crash_reasons_are_shown_everywhere_and_reports_follow_the_data() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Why", "./agents/seq.sh improve frozen crash nochange")
        .iterations(4)
        .build();
    let run = repo.start("why", &config).ok();
    let frozen = "changes frozen path eval.sh";
    let progress = run
        .stderr
        .lines()
        .find(|l| l.contains("A r1 i2: rejected"))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(progress.contains(frozen), "{progress}");
    assert!(
        run.stderr
            .lines()
            .any(|l| l.contains("A r1 i3: crashed") && l.contains("agent exit status 3")),
        "{}",
        run.stderr
    );

    let status = repo.conference(&["status", "why"]).ok().stdout;
    assert!(
        status.contains("A: no_change — the agent changed no file"),
        "{status}"
    );

    let log = repo.conference(&["log", "why"]).ok().stdout;
    assert!(
        log.lines()
            .any(|l| l.contains("researcher.iteration") && l.contains(frozen)),
        "{log}"
    );
    let tsv = repo
        .conference(&["log", "why", "--format", "tsv"])
        .ok()
        .stdout;
    let rows: Vec<&str> = tsv.lines().collect();
    assert_eq!(rows.len(), 5, "{tsv}");
    for row in &rows {
        assert_eq!(row.split('\t').count(), 14, "{row}");
    }
    assert!(rows[2].contains(&format!("[rejected: {frozen}")), "{tsv}");
    assert!(rows[2].split('\t').nth(6) == Some("rejected"), "{tsv}");

    let synthesis = repo
        .show("refs/conference/why/events", "synthesis.md")
        .unwrap();
    let report = repo
        .show("refs/conference/why/events", "final_report.md")
        .unwrap();
    for md in [&synthesis, &report] {
        assert!(md.contains("## Why attempts failed"), "{md}");
        assert!(
            md.contains(&format!(
                "**rejected: {frozen}** — 1 attempt(s); e.g. round 1, researcher A, iteration 2"
            )),
            "{md}"
        );
        assert!(md.contains("**crashed: "), "{md}");
        assert!(
            md.contains("**no_change: the agent changed no file** — 1 attempt(s)"),
            "{md}"
        );
    }
    assert!(
        synthesis.contains("All 1 reviewed finding(s) were validated."),
        "{synthesis}"
    );
    assert!(!synthesis.contains("Every reviewed finding"), "{synthesis}");
    // Minimize: 10 → 9 is a gain, and says so.
    let review = repo
        .show(
            "refs/conference/why/events",
            "round-1/peer_review_round_1.md",
        )
        .unwrap();
    assert!(review.contains("(gain +1.000000, better)"), "{review}");

    // Nothing kept, nothing reviewed: the synthesis says so instead of praising the review.
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Idle", "./agents/seq.sh nochange")
        .iterations(1)
        .build();
    repo.start("idle", &config).ok();
    let synthesis = repo
        .show("refs/conference/idle/events", "synthesis.md")
        .unwrap();
    assert!(
        synthesis.contains("No finding was reviewed: no researcher kept a change"),
        "{synthesis}"
    );
    assert!(
        synthesis.contains("No finding reached the best branch."),
        "{synthesis}"
    );
    assert!(!synthesis.contains("challenged finding(s)"), "{synthesis}");
}

/// Noise runs 1 and a reading that does not reproduce: the review, `status` and the final report
/// say the evaluation is noisy and how many noise runs to set; the lucky finding is not on best.
#[test]
fn a_noisy_evaluation_with_one_run_is_reported_with_advice() {
    let repo = TestRepo::from_fixture("noisy");
    let config = ConfigBuilder::new("Noisy", "./agent.sh")
        .count(2)
        .iterations(1)
        .build();
    repo.start("noisy", &config).ok();
    let status = repo.conference(&["status", "noisy"]).ok().stdout;
    assert!(
        status.contains("Warning:    the evaluation is noisy")
            && status.contains("researcher B read 5.000000")
            && status.contains("- **Noise runs:** "),
        "{status}"
    );
    for path in [
        "final_report.md",
        "round-1/peer_review_round_1.md",
        "synthesis.md",
    ] {
        let md = repo.show("refs/conference/noisy/events", path).unwrap();
        assert!(
            md.to_lowercase().contains("the evaluation is noisy"),
            "{path}: {md}"
        );
    }
    assert!(repo.show("conference/noisy/best", "lucky.txt").is_none());
    assert_eq!(
        repo.show("conference/noisy/best", "value.txt")
            .unwrap()
            .trim(),
        "9"
    );
}
