//! What users see of a run's progress (issue #22 items 9–12): the review says which setting
//! decided its verdict, the phases say what they measure and how long they took, every attempt
//! says how long its agent and evaluation ran, and the plot tells kept from reverted readings.

use crate::common::{ConfigBuilder, TestRepo};

const NAME: &str = "seen";

/// A gain that reproduces exactly but is below Min consensus delta is challenged for being too
/// small, not called noise: the review names the setting that decided.
#[test]
fn a_reproduced_gain_below_min_consensus_delta_is_challenged_by_that_setting() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Small", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(1)
        .build()
        .replace(
            "- **Noise runs:** 1\n",
            "- **Noise runs:** 1\n- **Min consensus delta:** 2\n",
        );
    assert!(config.contains("Min consensus delta:** 2"));
    repo.start(NAME, &config).ok();
    let review = repo
        .show(
            &format!("refs/conference/{NAME}/events"),
            "round-1/peer_review_round_1.md",
        )
        .expect("the round's peer review");
    assert!(
        review.contains("does not exceed Min consensus delta (2.000000)"),
        "{review}"
    );
    assert!(!review.contains("may be noise"), "{review}");
    let reviewed = repo.events_named(NAME, "round.peer_review");
    assert!(
        reviewed[0].to_string().contains("Min consensus delta"),
        "{reviewed:?}"
    );
}

/// The worktree named `best` holds the best once a round is over, not the baseline it measured
/// first.
#[test]
fn the_best_worktree_holds_the_best_after_each_round() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Best", "./agents/seq.sh improve")
        .iterations(2)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    let run = repo.start(NAME, &config);
    assert_eq!(
        run.code, 3,
        "paused after round 1: {}{}",
        run.stdout, run.stderr
    );
    let held = || std::fs::read_to_string(repo.worktree(NAME, "best").join("value.txt")).unwrap();
    let best = || {
        repo.show(&format!("conference/{NAME}/best"), "value.txt")
            .unwrap()
    };
    assert_eq!(best().trim(), "8");
    assert_eq!(held(), best(), "after round 1");
    repo.conference(&["resume", NAME]).ok();
    assert_eq!(best().trim(), "6");
    assert_eq!(held(), best(), "at the end");
}

/// Peer review and knowledge transfer say what they measure when they begin and how long they
/// took, on stderr and in the event log (`log --follow` shows them as they happen).
#[test]
fn review_and_transfer_say_what_they_measure_and_how_long_they_took() {
    let repo = TestRepo::from_fixture("complement");
    let config = ConfigBuilder::new("Phases", "./agent.sh")
        .count(2)
        .iterations(1)
        .rounds(1)
        .build();
    let run = repo.start(NAME, &config).ok();
    for line in [
        "peer review, round 1: re-measuring 2 finding(s) (A, B) against the round start ",
        "knowledge transfer, round 1: merging 2 validated finding(s) (A, B) onto the best one by one",
    ] {
        assert!(run.stderr.contains(line), "{line}\n{}", run.stderr);
    }
    // `what` followed by a duration (`0.4s`).
    let took = |text: &str, what: &str| {
        text.lines().any(|l| {
            l.split(what).nth(1).is_some_and(|rest| {
                rest.starts_with(|c: char| c.is_ascii_digit())
                    && rest
                        .split_whitespace()
                        .next()
                        .is_some_and(|d| d.contains('s'))
            })
        })
    };
    assert!(took(&run.stderr, "overturned in "), "{}", run.stderr);
    assert!(
        took(&run.stderr, "knowledge transfer took "),
        "{}",
        run.stderr
    );
    let log = repo.conference(&["log", NAME, "--follow"]).ok();
    let phases: Vec<&str> = log
        .stdout
        .lines()
        .filter(|l| l.contains("round.phase_started"))
        .collect();
    assert_eq!(phases.len(), 2, "{}", log.stdout);
    assert!(
        phases[0].contains("round 1 peer review: re-measuring"),
        "{phases:?}"
    );
    assert!(
        phases[1].contains("round 1 knowledge transfer: merging"),
        "{phases:?}"
    );
    assert!(took(&log.stdout, "overturned in "), "{}", log.stdout);
}

/// Each attempt records how long its agent and its evaluation ran (event and note); `status`,
/// `log --format tsv` and the report show it; the results table has the attempt's commit, a
/// column per sub-metric the evaluation printed, and says `crashed` for a crash.
#[test]
fn attempts_record_their_agent_and_evaluation_time_and_the_table_their_commit_and_sub_metrics() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\nsleep 0.3\necho \"score: $(cat value.txt)\"\necho \"memory_gb: 1.5\"\n",
    );
    repo.commit_all("an evaluation that prints a sub-metric and takes a while");
    let config = ConfigBuilder::new("Time", "./agents/seq.sh improve crash")
        .iterations(2)
        .rounds(1)
        .build();
    repo.start(NAME, &config).ok();
    let iterations = repo.events_named(NAME, "researcher.iteration");
    let kept = &iterations[0]["payload"];
    assert_eq!(kept["status"], "kept", "{kept}");
    assert!(kept["agent_s"].as_f64().is_some_and(|s| s >= 0.0), "{kept}");
    assert!(kept["eval_s"].as_f64().is_some_and(|s| s >= 0.3), "{kept}");
    let commit = kept["commit"].as_str().unwrap();
    let note = &repo.notes(commit)[0];
    assert_eq!(note["eval_s"], kept["eval_s"], "{note}");
    assert_eq!(note["agent_s"], kept["agent_s"], "{note}");
    let crashed = &iterations[1]["payload"];
    assert_eq!(crashed["status"], "crashed", "{crashed}");
    assert!(crashed["agent_s"].as_f64().is_some(), "{crashed}");

    let tsv = repo
        .conference(&["log", NAME, "--format", "tsv"])
        .ok()
        .stdout;
    let rows: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(
        rows[0][10..],
        ["timestamp", "commit", "agent_s", "eval_s", "memory_gb"],
        "{tsv}"
    );
    assert_eq!(
        (rows[1][6], rows[1][11], rows[1][14]),
        ("kept", commit, "1.5"),
        "{tsv}"
    );
    assert_eq!(rows[1][13], kept["eval_s"].to_string(), "{tsv}");
    assert_eq!((rows[2][6], rows[2][14]), ("crashed", "-"), "{tsv}");
    assert!(rows.iter().all(|r| r.len() == 15), "{tsv}");

    let status = repo.conference(&["status", NAME]).ok().stdout;
    assert!(status.contains("Time:       agents "), "{status}");
    let report = repo
        .show(&format!("refs/conference/{NAME}/events"), "final_report.md")
        .unwrap();
    assert!(
        report.contains("| Agent time | Evaluation time |"),
        "{report}"
    );
}

/// One wild reading does not squash the chart: it is left out of the y-range, and the chart and
/// the final report say so.
#[test]
fn a_wild_reading_is_left_off_the_chart_and_the_report_says_so() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "wild.sh",
        "#!/bin/sh\nif [ \"$CONFERENCE_ITERATION\" = 3 ]; then echo 1000000 >value.txt; else exec sh agents/improve.sh; fi\n",
    );
    repo.commit_all("an agent whose third attempt reads wild");
    let config = ConfigBuilder::new("Wild", "./wild.sh")
        .iterations(5)
        .rounds(2)
        .build();
    repo.start(NAME, &config).ok();
    let events = format!("refs/conference/{NAME}/events");
    let report = repo.show(&events, "final_report.md").unwrap();
    assert!(
        report.contains(
            "The chart leaves out 2 reading(s) off its scale, far from the rest: Researcher A at iteration 3 (1000000), Researcher A at iteration 8 (1000000)."
        ),
        "{report}"
    );
    let png = repo
        .command("git")
        .args([
            "cat-file",
            "blob",
            &format!("{events}:conference_progress.png"),
        ])
        .output()
        .unwrap()
        .stdout;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}

/// An agent's note whose first paragraph has several lines is the attempt's description; the
/// progress line keeps it on one line.
#[test]
fn a_note_of_several_lines_is_one_line_in_the_progress() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "agents/lines.sh",
        "#!/bin/sh\nawk '{ print $1 - 1 }' value.txt >v && mv v value.txt\n\
         printf 'decrement the value\\nwhy: smaller is better\\n' >\"$CONFERENCE_NOTE_FILE\"\n",
    );
    repo.commit_all("an agent writing a note of several lines");
    let config = ConfigBuilder::new("Lines", "./agents/lines.sh")
        .iterations(1)
        .rounds(1)
        .build();
    let run = repo.start(NAME, &config).ok();
    let line = run.stderr.lines().find(|l| l.contains(" r1 i1: ")).unwrap();
    assert!(
        line.ends_with("  decrement the value why: smaller is better"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("why:")),
        "{}",
        run.stderr
    );
}
