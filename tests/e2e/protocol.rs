//! End-to-end tests of the protocol's finer rules: what may be merged and how, what counts as
//! the evaluation harness, budgets that are hard caps, and what the records say. Each runs a
//! small conference of the `lines` fixture (or a variant) through the real binary and checks the
//! result with git.

use crate::common;

use common::{ConfigBuilder, TestRepo};
use serde_json::Value;

/// The `lines` fixture, with `agent.mode` set (committed) when `mode` is given.
fn lines(mode: Option<&str>) -> TestRepo {
    let repo = TestRepo::from_fixture("lines");
    if let Some(mode) = mode {
        repo.write("agent.mode", mode);
        repo.commit_all("agent mode");
    }
    repo
}

/// `key=value` of params.txt at a revision.
fn param(repo: &TestRepo, rev: &str, key: &str) -> i64 {
    let text = repo.show(rev, "params.txt").expect("params.txt");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

fn payload_str(e: &Value, key: &str) -> String {
    e["payload"][key].as_str().unwrap_or("").to_string()
}

#[test]
fn findings_on_neighbouring_lines_combine_on_best() {
    let repo = lines(None);
    let config = ConfigBuilder::new("Lines", "./agent.sh")
        .count(2)
        .iterations(2)
        .build();
    repo.start("lines", &config).ok();
    let best = "conference/lines/best";
    assert_eq!(param(&repo, best, "a"), 8);
    assert_eq!(param(&repo, best, "b"), 8);
    assert_eq!(param(&repo, best, "c"), 10);
    for pick in repo.events_named("lines", "transfer.pick") {
        assert_eq!(payload_str(&pick, "result"), "merged", "{pick}");
        assert_eq!(
            pick["payload"]["conflicts"],
            serde_json::json!([]),
            "{pick}"
        );
    }
    let review = repo
        .show(
            "refs/conference/lines/events",
            "round-1/peer_review_round_1.md",
        )
        .unwrap();
    assert!(review.contains("they combine"), "{review}");
    // The synthesis names both as on best; the results table puts each verdict on the
    // researcher's round-best row only.
    let synthesis = repo
        .show("refs/conference/lines/events", "synthesis.md")
        .unwrap();
    let worked = synthesis
        .split("## What worked")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(
        worked.contains("Researcher A") && worked.contains("Researcher B"),
        "{synthesis}"
    );
    let tsv = repo
        .show("refs/conference/lines/events", "round-1/results.tsv")
        .unwrap();
    let validated: Vec<&str> = tsv.lines().filter(|l| l.contains("validated")).collect();
    assert_eq!(validated.len(), 2, "{tsv}");
    assert!(
        validated.iter().all(|l| l.split('\t').nth(2) == Some("2")),
        "{tsv}"
    );
}

#[test]
fn an_integer_metric_counts_one_unit_as_progress() {
    let repo = TestRepo::from_fixture("lines");
    repo.write("params.txt", "a=5000\nb=0\nc=0\n");
    repo.commit_all("large integer baseline");
    let config = ConfigBuilder::new("Int", "./agent.sh")
        .iterations(2)
        .build();
    repo.start("int", &config).ok();
    let review = &repo.events_named("int", "round.peer_review")[0]["payload"];
    assert_eq!(review["validated_count"], 1, "{review}");
    assert_eq!(param(&repo, "conference/int/best", "a"), 4998);
}

#[test]
fn the_iteration_budget_is_a_hard_cap_shared_out_in_letter_order() {
    let repo = lines(None);
    let mut builder = ConfigBuilder::new("Cap", "./agent.sh")
        .count(3)
        .iterations(3)
        .rounds(2);
    builder.max_total_iterations = 7;
    repo.start("cap", &builder.build()).ok();
    let its = iterations(&repo, "cap");
    assert_eq!(its.len(), 7, "{its:?}");
    let per = |id: &str| {
        its.iter()
            .filter(|e| payload_str(e, "researcher") == id)
            .count()
    };
    assert_eq!((per("A"), per("B"), per("C")), (3, 2, 2));
    let st = repo.status_json("cap");
    assert_eq!(st["total_iterations"], 7, "{st}");
    let converged = repo.events_named("cap", "conference.budget_stop");
    assert_eq!(converged.len(), 1);
    assert_eq!(payload_str(&converged[0], "reason"), "max_total_iterations");
}

#[test]
fn files_the_evaluation_command_names_are_frozen_without_being_listed() {
    let repo = lines(Some("tamper"));
    // params.txt allowed: with nothing allowed, `start` would refuse the run (eval.sh frozen by
    // inference alone); the rejection below is still the inferred freeze.
    let config = ConfigBuilder::new("Tamper", "./agent.sh")
        .frozen("README.md")
        .iterations(2)
        .build()
        .replace(
            "## Search Space Partitioning",
            "## Search Space\n**Allowed changes:**\n- params.txt\n\n## Search Space Partitioning",
        );
    repo.start("tamper", &config).ok();
    for e in iterations(&repo, "tamper") {
        assert_eq!(payload_str(&e, "status"), "rejected", "{e}");
        assert!(payload_str(&e, "reason").contains("eval.sh"), "{e}");
    }
    let best = repo.show("conference/tamper/best", "eval.sh").unwrap();
    assert!(
        best.contains("awk"),
        "the harness on best is the original: {best}"
    );
}

#[test]
fn a_hold_out_script_is_frozen_too() {
    let repo = lines(None);
    repo.write_executable("holdout.sh", "#!/bin/sh\n./eval.sh\n");
    repo.write_executable(
        "agent2.sh",
        "#!/bin/sh\n./agent.sh\nprintf '#!/bin/sh\\necho score: 0\\n' >holdout.sh\n",
    );
    repo.commit_all("hold-out and an agent that rewrites it");
    let config = ConfigBuilder::new("Holdout", "./agent2.sh")
        .iterations(1)
        .build()
        .replace(
            "- frozen: eval.sh",
            "- frozen: eval.sh\n- holdout: ./holdout.sh",
        );
    repo.start("holdout", &config).ok();
    let e = &iterations(&repo, "holdout")[0];
    assert_eq!(payload_str(e, "status"), "rejected", "{e}");
    assert!(payload_str(e, "reason").contains("holdout.sh"), "{e}");
}

#[test]
fn a_forbidden_item_that_is_a_bare_name_is_enforced() {
    let repo = lines(None);
    repo.write("Makefile", "all:\n");
    repo.write_executable(
        "agent2.sh",
        "#!/bin/sh\n./agent.sh\necho '# touched' >>Makefile\n",
    );
    repo.commit_all("a Makefile the agent must not touch");
    let config = format!(
        "{}\n## Search Space\n**Forbidden changes:**\n- Makefile\n- Do not change the public API.\n",
        ConfigBuilder::new("Forbidden", "./agent2.sh")
            .iterations(1)
            .build()
    );
    let run = repo.start("forb", &config).ok();
    let e = &iterations(&repo, "forb")[0];
    assert_eq!(payload_str(e, "status"), "rejected", "{e}");
    assert!(payload_str(e, "reason").contains("Makefile"), "{e}");
    // The prose item cannot be checked on a diff, and start says so.
    assert!(
        run.stderr.contains("public API") && run.stderr.contains("names no path"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_agent_failure_does_not_decide_the_tree_it_left() {
    let repo = lines(Some("crash-first"));
    let config = ConfigBuilder::new("Crash", "./agent.sh")
        .iterations(2)
        .build();
    repo.start("crash", &config).ok();
    let its = iterations(&repo, "crash");
    let verdicts: Vec<String> = its.iter().map(|e| payload_str(e, "status")).collect();
    assert_eq!(verdicts, ["crashed", "kept"], "{its:?}");
    // Same tree both times: the second attempt was evaluated, not given the crash.
    assert_eq!(its[0]["payload"]["tree"], its[1]["payload"]["tree"]);
    assert_eq!(its[1]["payload"]["metric_value"].as_f64(), Some(29.0));
}

#[test]
fn peer_review_measures_in_a_checkout_without_ignored_files() {
    let repo = lines(None);
    // An evaluation that caches its score in an ignored file: a stale cache from the round
    // start's measurement would make the finding look like no gain.
    repo.write(".gitignore", ".score-cache\n");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\n[ -f .score-cache ] && { cat .score-cache; exit 0; }\n\
         awk -F= '{ s += $2 } END { printf \"score: %d\\n\", s }' params.txt | tee .score-cache\n",
    );
    repo.commit_all("an evaluation with a cache");
    let config = ConfigBuilder::new("Cache", "./agent.sh")
        .iterations(1)
        .build();
    repo.start("cache", &config).ok();
    let review = &repo.events_named("cache", "round.peer_review")[0]["payload"];
    assert_eq!(review["validated_count"], 1, "{review}");
}

#[test]
fn reaching_the_target_ends_the_round() {
    let repo = lines(None);
    let config = ConfigBuilder::new("Target", "./agent.sh")
        .iterations(5)
        .build()
        .replace("- **Target:** none", "- **Target:** 28");
    repo.start("target", &config).ok();
    assert_eq!(iterations(&repo, "target").len(), 2);
    let finished = repo.events_named("target", "researcher.finished");
    assert_eq!(payload_str(&finished[0], "reason"), "target reached");
    let converged = repo.events_named("target", "conference.converged");
    assert_eq!(payload_str(&converged[0], "reason"), "target_reached");
    let completed = repo.events_named("target", "round.completed");
    assert_eq!(completed[0]["payload"]["converged"], true);
}

#[test]
fn the_researcher_timeout_bounds_its_evaluations_too() {
    let repo = lines(None);
    repo.write_executable(
        "slow-eval.sh",
        "#!/bin/sh\n[ \"$CONFERENCE_RESEARCHER\" = A ] && sleep 60\n./eval.sh\n",
    );
    repo.commit_all("an evaluation that is slow for researcher A");
    let config = ConfigBuilder::new("Slow", "./agent.sh")
        .iterations(3)
        .frozen("eval.sh, slow-eval.sh")
        .constraint("- **Researcher timeout:** 2s")
        .build()
        .replace("- command: ./eval.sh", "- command: ./slow-eval.sh");
    let started = std::time::Instant::now();
    repo.start("slow", &config).ok();
    let its = iterations(&repo, "slow");
    assert_eq!(its.len(), 1, "{its:?}");
    assert_eq!(payload_str(&its[0], "status"), "timeout");
    assert!(payload_str(&its[0], "reason").contains("researcher timeout"));
    assert_eq!(its[0]["payload"]["evaluated"], false);
    let finished = repo.events_named("slow", "researcher.finished");
    assert_eq!(payload_str(&finished[0], "reason"), "timeout");
    // Cut at the 2 s timeout, not after the evaluation's 60 s (the margin is for a loaded
    // machine: the baseline and the bookkeeping run too).
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn a_plateau_is_reported_with_the_seeds_reason_and_the_chart_follows_each_round() {
    // An agent that changes nothing that matters: a comment line.
    let repo = lines(None);
    repo.write_executable(
        "idle.sh",
        "#!/bin/sh\necho \"# $CONFERENCE_ROUND.$CONFERENCE_ITERATION\" >>notes.txt\n",
    );
    repo.write("notes.txt", "");
    repo.commit_all("an idle agent");
    let config = ConfigBuilder::new("Plateau", "./idle.sh")
        .count(2)
        .iterations(1)
        .rounds(4)
        .build();
    repo.start("plateau", &config).ok();
    let converged = repo.events_named("plateau", "conference.converged");
    assert_eq!(payload_str(&converged[0], "reason"), "metric_plateau");
    let completed = repo.events_named("plateau", "round.completed");
    assert_eq!(completed.len(), 2);
    assert_eq!(completed[0]["payload"]["converged"], false);
    assert_eq!(completed[1]["payload"]["converged"], true);
    // The chart is in the state after every round, and compressed.
    let commits = repo.git(&["log", "--format=%H %s", "refs/conference/plateau/events"]);
    let round_one = commits
        .lines()
        .find(|l| l.contains("round.completed: round 1"))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let size: usize = repo
        .git(&[
            "cat-file",
            "-s",
            &format!("{round_one}:conference_progress.png"),
        ])
        .trim()
        .parse()
        .unwrap();
    assert!(size > 1000 && size < 300_000, "chart of {size} bytes");
}

#[test]
fn prompts_carry_the_current_approach_and_tell_a_respawned_researcher() {
    let repo = lines(Some("prompt"));
    // A keeps failing (it only writes a note), B improves: A reaches level 3 in round 1.
    repo.write_executable(
        "agent2.sh",
        "#!/bin/sh\nif [ \"$CONFERENCE_RESEARCHER\" = A ]; then cp \"$CONFERENCE_PROMPT_FILE\" \
         \"$(git rev-parse --git-common-dir)/prompt-A-r$CONFERENCE_ROUND-i$CONFERENCE_ITERATION.md\"; \
         echo x >>junk.txt; exit 0; fi\nexec ./agent.sh\n",
    );
    repo.commit_all("an agent for A that never improves");
    let config = ConfigBuilder::new("Respawn", "./agent2.sh")
        .count(2)
        .iterations(7)
        .rounds(2)
        .build()
        + "\n## Current Approach\nA plain sum of three parameters.\n";
    repo.start("respawn", &config).ok();
    let stuck = repo.events_named("respawn", "researcher.stuck");
    assert!(
        stuck.iter().any(|e| e["payload"]["stuck_level"] == 3),
        "{stuck:?}"
    );
    let first = repo.git_dir_file("prompt-A-r1-i1.md");
    assert!(
        first.contains("## Current approach\nA plain sum"),
        "{first}"
    );
    assert!(!first.contains("## Respawned"), "{first}");
    let again = repo.git_dir_file("prompt-A-r2-i1.md");
    assert!(again.contains("## Respawned"), "{again}");
    assert!(again.contains("- frozen: eval.sh"), "{again}");
}

#[test]
fn a_push_never_rewinds_the_remotes_copy() {
    // Paused after round 1 here; pushed; a clone resumes it to the end and pushes that.
    let repo = lines(None);
    let config = ConfigBuilder::new("Share", "./agent.sh")
        .iterations(1)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    assert_eq!(repo.start("share", &config).code, 3);
    let remote = repo.bare_origin();
    repo.git(&["push", "-q", "origin", "main"]);
    repo.conference(&["push", "origin"]).ok();
    let clone = repo.tmp.path().join("clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    assert_eq!(repo.conference_in(&clone, &["fetch"]).code, 0);
    assert_eq!(
        repo.conference_in(&clone, &["trust", "share", "--yes"])
            .code,
        0
    );
    let resumed = repo.conference_in(&clone, &["resume", "share"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let pushed = repo.conference_in(&clone, &["push", "origin"]);
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    let events = "refs/conference/share/events";
    let finished = repo.git_in(&remote, &["rev-parse", events]);
    // The first repository is behind: its push is refused, the remote keeps the whole log.
    let stale = repo.conference(&["push", "origin"]);
    assert_ne!(stale.code, 0);
    assert!(
        stale.stderr.contains("git conference fetch"),
        "{}",
        stale.stderr
    );
    assert_eq!(repo.git_in(&remote, &["rev-parse", events]), finished);
    // After a fetch it is up to date, and a push has nothing to rewind.
    assert_eq!(repo.conference(&["fetch", "origin"]).code, 0);
    assert_eq!(repo.git(&["rev-parse", events]), finished);
    repo.conference(&["push", "origin"]).ok();
}
