//! `git conference import DIR`: a folder of the original autoconference (tests/data/import/
//! original, in SEED-FORMATS.md's formats) made into a git-native conference that `status`,
//! `log`, `report` and `resume` work on; a malformed line makes nothing.

use std::path::{Path, PathBuf};

use crate::common::TestRepo;

fn original() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/original")
}

/// The loop fixture with the original's best on `conference/best` (value.txt = 8).
fn repo_with_original_best() -> TestRepo {
    let repo = TestRepo::from_fixture("loop");
    repo.git(&["checkout", "-q", "-b", "conference/best"]);
    repo.write("value.txt", "8\n");
    repo.commit_all("the original's best");
    repo.git(&["branch", "conference/researcher-B", "main"]);
    repo.git(&["checkout", "-q", "main"]);
    repo
}

/// A copy of the original folder, in the test's tempdir.
fn copy_of_original(repo: &TestRepo) -> PathBuf {
    let dir = repo.tmp.path().join("original");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(original()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

#[test]
fn an_original_folder_becomes_a_conference_that_status_log_report_and_resume_work_on() {
    let repo = repo_with_original_best();
    let best = repo.git(&["rev-parse", "conference/best"]);
    let run = repo
        .conference(&["import", original().to_str().unwrap()])
        .ok();
    let out = run.stdout;
    assert!(out.contains("Imported `lower-value` from "), "{out}");
    assert!(
        out.contains(
            ": 15 events, 4 attempts in 2 completed round(s), between rounds; best 8.000000"
        ),
        "{out}"
    );
    for unmapped in [
        "- conference_results.tsv:7: status `stalled` has no verdict here (left out)",
        "- conference_results.tsv:8: round 3 did not complete in the original (left out; `resume` runs it again)",
        "- conference_events.jsonl:12: event `dashboard.refreshed` (kept in the log as imported; it changes nothing here)",
        "- conference_events.jsonl:11: researcher B at stuck level 1 (history only",
        "- poster_session_round_3.md: round 3 did not complete in the original (not taken)",
        "- files not read: README.md, researcher_A_log.md",
        "- branch conference/researcher-B: not taken (each researcher starts the next round from the best",
    ] {
        assert!(out.contains(unmapped), "{unmapped} in {out}");
    }
    // Its best is the best branch; its events are the event log, marked imported.
    assert_eq!(
        repo.git(&["rev-parse", "conference/lower-value/best"]),
        best
    );
    let events = repo.events("lower-value");
    assert_eq!(events.len(), 17, "started, 15 imported, imported");
    assert_eq!(events[0]["event"], "conference.started");
    assert!(events[1..16]
        .iter()
        .all(|e| e["payload"]["imported"] == true));
    assert_eq!(events[12]["event"], "dashboard.refreshed");
    assert_eq!(events[16]["event"], "conference.imported");
    assert_eq!(
        events[16]["payload"]["not_mapped"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    let review = repo
        .show(
            "refs/conference/lower-value/events",
            "round-1/peer_review_round_1.md",
        )
        .unwrap();
    assert!(review.contains("**Verdict:** VALIDATED"), "{review}");

    let st = repo.status_json("lower-value");
    assert_eq!(
        (st["round"].as_u64(), st["phase"].as_str()),
        (Some(2), Some("between"))
    );
    assert_eq!(
        (
            st["baseline_metric"].as_f64(),
            st["best"]["metric"].as_f64()
        ),
        (Some(10.0), Some(8.0))
    );
    assert_eq!(st["round_bests"], serde_json::json!([9.0, 8.0]));
    assert_eq!(st["researchers"]["B"]["counts"]["crashed"], 1);
    let log = repo.conference(&["log", "lower-value"]).ok().stdout;
    assert!(
        log.contains(
            "researcher.iteration   imported from conference_events.jsonl line 10 — failed\n"
        ),
        "{log}"
    );
    let tsv = repo
        .conference(&["log", "lower-value", "--format", "tsv"])
        .ok()
        .stdout;
    assert!(
        tsv.contains("\tlower it again [peer review: validated]\t"),
        "{tsv}"
    );
    assert_eq!(tsv.lines().count(), 5, "{tsv}");
    let out_dir = repo.tmp.path().join("report");
    repo.conference(&[
        "report",
        "lower-value",
        "--output",
        out_dir.to_str().unwrap(),
    ])
    .ok();
    let report = std::fs::read_to_string(out_dir.join("final_report.md")).unwrap();
    assert!(
        report.contains("10.000000 → 9.000000 → 8.000000"),
        "{report}"
    );

    // resume runs round 3 (the one the original did not finish) from the imported best.
    repo.conference(&["resume", "lower-value"]).ok();
    let st = repo.status_json("lower-value");
    assert_eq!(
        (st["round"].as_u64(), st["phase"].as_str()),
        (Some(3), Some("done"))
    );
    assert_eq!(st["best"]["metric"].as_f64(), Some(7.0));
    repo.git(&["fsck", "--no-progress"]);
}

#[test]
fn a_malformed_line_names_its_file_and_line_and_nothing_is_made() {
    let repo = repo_with_original_best();
    let dir = copy_of_original(&repo);
    let tsv = dir.join("conference_results.tsv");
    let text = std::fs::read_to_string(&tsv).unwrap();
    let broken: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 3 {
                l.replace("\t11\t", "\televen\t")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&tsv, broken.join("\n") + "\n").unwrap();
    let run = repo.conference(&["import", dir.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{}:4: `metric_value` is `eleven`, not a number",
            tsv.display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "refs/conference/",
            "refs/heads/conference/lower-value/"
        ]),
        ""
    );
    let trust = repo.git_run(&["config", "--get-regexp", "^conference\\."]);
    assert_eq!(trust.stdout.trim(), "", "no trust recorded either");

    std::fs::copy(original().join("conference_results.tsv"), &tsv).unwrap();
    let events = dir.join("conference_events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    std::fs::write(
        &events,
        text.replacen(
            "{\"event\": \"round.poster_session\"",
            "{\"event\" \"round.poster_session\"",
            1,
        ),
    )
    .unwrap();
    let run = repo.conference(&["import", dir.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("{}:5: not a JSON object", events.display())),
        "{}",
        run.stderr
    );
    assert_eq!(repo.git(&["for-each-ref", "refs/conference/"]), "");
}

#[test]
fn an_import_killed_before_its_commit_point_leaves_nothing_and_runs_again() {
    let repo = repo_with_original_best();
    let dir = original();
    let run = repo.conference_env(
        &["import", dir.to_str().unwrap()],
        &[("GIT_CONFERENCE_FAILPOINT", "import.written")],
    );
    assert_ne!(run.code, 0, "killed: {}", run.stderr);
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "refs/conference/",
            "refs/heads/conference/lower-value/"
        ]),
        ""
    );
    repo.conference(&["import", dir.to_str().unwrap()]).ok();
    assert_eq!(repo.events("lower-value").len(), 17);
}

#[test]
fn an_original_that_converged_is_synthesised_by_resume_and_one_that_completed_is_done() {
    let repo = repo_with_original_best();
    let dir = copy_of_original(&repo);
    let events = dir.join("conference_events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let mut lines: Vec<&str> = text.lines().take(13).collect();
    let converged = "{\"event\": \"conference.converged\", \"timestamp\": \"2026-03-18T10:19:30Z\", \"payload\": {\"final_best_metric\": 8, \"round_count\": 2, \"reason\": \"metric_plateau\"}}";
    lines.push(converged);
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    repo.conference(&["import", dir.to_str().unwrap(), "--name", "plateau"])
        .ok();
    let st = repo.status_json("plateau");
    assert_eq!(st["phase"], "synthesis");
    assert_eq!(st["final_status"], "converged");
    repo.conference(&["resume", "plateau"]).ok();
    let st = repo.status_json("plateau");
    assert_eq!(
        (st["phase"].as_str(), st["round"].as_u64()),
        (Some("done"), Some(2))
    );
    let report = repo
        .show("refs/conference/plateau/events", "final_report.md")
        .unwrap();
    assert!(report.contains("- **Status:** converged"), "{report}");
    assert!(
        report.contains("metric_plateau (in the original conference)"),
        "{report}"
    );

    // With its conference.completed too, it is done on import: resume says so.
    lines.push("{\"event\": \"conference.completed\", \"timestamp\": \"2026-03-18T10:30:00Z\", \"payload\": {\"synthesis_path\": \"synthesis.md\", \"final_report_path\": \"final_report.md\", \"total_iterations\": 4}}");
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    repo.conference(&["import", dir.to_str().unwrap(), "--name", "done"])
        .ok();
    assert_eq!(repo.status_json("done")["phase"], "done");
    let again = repo.conference(&["resume", "done"]).ok();
    assert!(
        again
            .stdout
            .contains("Conference `done` is already complete (converged)"),
        "{}",
        again.stdout
    );
}
