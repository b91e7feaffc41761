//! End-to-end tests of a full conference (issue "full conference"): several researchers, poster
//! session, peer review, knowledge transfer, the report, and the commands around a conference
//! (apply, clean, push/fetch). Everything is checked with git itself.

use crate::common;

use common::{complement_config, ConfigBuilder, TestRepo};
use serde_json::Value;

fn rev(repo: &TestRepo, r: &str) -> String {
    repo.git(&["rev-parse", "--verify", r]).trim().to_string()
}

fn num(text: Option<String>) -> i64 {
    text.expect("file exists").trim().parse().expect("a number")
}

/// score = a + b of a revision of the complement fixture.
fn sum_ab(repo: &TestRepo, r: &str) -> i64 {
    num(repo.show(r, "a.txt")) + num(repo.show(r, "b.txt"))
}

fn findings(repo: &TestRepo, name: &str, round: u64) -> Vec<Value> {
    repo.events_named(name, "round.peer_review")
        .into_iter()
        .find(|e| e["payload"]["round"] == round)
        .expect("peer review of the round")["payload"]["findings"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn complementary_findings_both_reach_best_which_beats_every_researcher() {
    let repo = TestRepo::complement_conference("comp");
    let best = "conference/comp/best";
    // Each researcher improved only its own file.
    assert_eq!(num(repo.show("conference/comp/researcher-A", "a.txt")), 8);
    assert_eq!(num(repo.show("conference/comp/researcher-A", "b.txt")), 10);
    assert_eq!(num(repo.show("conference/comp/researcher-B", "a.txt")), 10);
    assert_eq!(num(repo.show("conference/comp/researcher-B", "b.txt")), 8);
    // Best carries both.
    assert_eq!(num(repo.show(best, "a.txt")), 8);
    assert_eq!(num(repo.show(best, "b.txt")), 8);
    let best_score = sum_ab(&repo, best);
    for id in ["A", "B"] {
        let own = sum_ab(&repo, &format!("conference/comp/researcher-{id}"));
        assert!(
            best_score < own,
            "best {best_score} is not strictly better than {id}'s round-best {own}"
        );
    }
    // Both findings validated; both picks merged; status agrees.
    let f = findings(&repo, "comp", 1);
    assert_eq!(f.len(), 2);
    assert!(f.iter().all(|f| f["verdict"] == "validated"), "{f:?}");
    let picks: Vec<(String, String)> = repo
        .events_named("comp", "transfer.pick")
        .iter()
        .map(|e| {
            (
                e["payload"]["researcher"].as_str().unwrap().to_string(),
                e["payload"]["result"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        picks,
        vec![("A".into(), "merged".into()), ("B".into(), "merged".into())]
    );
    let st = repo.status_json("comp");
    assert_eq!(st["best"]["metric"].as_f64(), Some(best_score as f64));
    assert_eq!(st["best"]["commit"].as_str().unwrap(), rev(&repo, best));
    // The best branch's commits are the transfers, with notes saying they were kept.
    let tip = rev(&repo, best);
    let notes = repo.notes(&tip);
    assert!(
        notes
            .iter()
            .any(|n| n["verdict"] == "kept" && n["metric"].as_f64() == Some(16.0)),
        "{notes:?}"
    );
    let log = repo.git(&["log", "--format=%s", &format!("main..{best}")]);
    assert!(
        log.contains("Researcher A") && log.contains("Researcher B"),
        "{log}"
    );
    // Shared knowledge names both findings.
    let stored = repo
        .show("refs/conference/comp/events", "conference.md")
        .unwrap();
    assert!(
        stored.contains("Round 1, Researcher A") && stored.contains("Round 1, Researcher B"),
        "{stored}"
    );
}

#[test]
fn a_lucky_finding_is_overturned_and_not_on_best() {
    let repo = TestRepo::from_fixture("noisy");
    let config = ConfigBuilder::new("Noisy", "./agent.sh")
        .count(2)
        .iterations(2)
        .rounds(1)
        .noise_runs(3)
        .build();
    repo.start("noisy", &config).ok();

    // In research, B's lucky.txt looked like a big gain and was kept.
    let b_iterations: Vec<Value> = repo
        .events_named("noisy", "researcher.iteration")
        .into_iter()
        .filter(|e| e["payload"]["researcher"] == "B")
        .collect();
    assert_eq!(b_iterations[0]["payload"]["status"], "kept");
    assert_eq!(
        b_iterations[0]["payload"]["metric_value"].as_f64(),
        Some(5.0)
    );
    let lucky_commit = rev(&repo, "conference/noisy/researcher-B");
    assert!(repo.show(&lucky_commit, "lucky.txt").is_some());

    // Peer review re-ran it (3 runs) and saw no gain.
    let f = findings(&repo, "noisy", 1);
    let b = f.iter().find(|f| f["researcher"] == "B").unwrap();
    let a = f.iter().find(|f| f["researcher"] == "A").unwrap();
    assert!(
        ["overturned", "challenged"].contains(&b["verdict"].as_str().unwrap()),
        "{b}"
    );
    assert_eq!(b["runs"].as_array().unwrap().len(), 3, "{b}");
    assert_eq!(a["verdict"], "validated", "{a}");
    assert_eq!(b["commit"].as_str().unwrap(), lucky_commit);
    let notes = repo.notes(&lucky_commit);
    assert!(notes.iter().any(|n| n["verdict"] == "kept"), "{notes:?}");
    assert!(
        notes.iter().any(|n| n["verdict"] == b["verdict"]),
        "{notes:?}"
    );

    // Not on best; A's real gain is.
    assert!(
        repo.show("conference/noisy/best", "lucky.txt").is_none(),
        "the lucky finding reached best"
    );
    assert_eq!(num(repo.show("conference/noisy/best", "value.txt")), 8);
    let best_history = repo.git(&["rev-list", "conference/noisy/best"]);
    assert!(!best_history.contains(&lucky_commit));
    let picks = repo.events_named("noisy", "transfer.pick");
    assert!(
        picks.iter().all(|p| p["payload"]["researcher"] != "B"),
        "{picks:?}"
    );

    // The review file says so.
    let review = repo
        .show(
            "refs/conference/noisy/events",
            "round-1/peer_review_round_1.md",
        )
        .unwrap();
    let section = review
        .split("### Researcher B")
        .nth(1)
        .expect("a section for B");
    assert!(
        section.contains(&format!("**Verdict:** {}", b["verdict"].as_str().unwrap())),
        "{review}"
    );
    assert!(section.contains("Not merged"), "{review}");
    let st = repo.status_json("noisy");
    assert_eq!(st["best"]["metric"].as_f64(), Some(8.0));
    assert!(st["shared_knowledge"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| !k.as_str().unwrap().contains("Researcher B")));
}

#[test]
fn a_file_conflict_goes_to_the_larger_gain_and_is_recorded() {
    let repo = TestRepo::from_fixture("conflict");
    let config = ConfigBuilder::new("Conflict", "./agent.sh")
        .count(2)
        .iterations(1)
        .rounds(1)
        .build();
    repo.start("conf", &config).ok();
    let f = findings(&repo, "conf", 1);
    assert!(f.iter().all(|f| f["verdict"] == "validated"), "{f:?}");

    // B (gain 4) wins shared.txt over A (gain 2); A's own file still comes along.
    let best = "conference/conf/best";
    assert_eq!(num(repo.show(best, "shared.txt")), 7);
    assert_eq!(num(repo.show(best, "a.txt")), 9);
    assert_eq!(num(repo.show(best, "b.txt")), 9);
    assert_eq!(
        repo.status_json("conf")["best"]["metric"].as_f64(),
        Some(25.0)
    );

    let review = repo
        .show(
            "refs/conference/conf/events",
            "round-1/peer_review_round_1.md",
        )
        .unwrap();
    let conflicts = review
        .split("## Conflict Resolution")
        .nth(1)
        .expect("a Conflict Resolution section");
    let conflicts = conflicts.split("\n## ").next().unwrap();
    let line = conflicts
        .lines()
        .find(|l| l.contains("shared.txt"))
        .unwrap_or_else(|| panic!("shared.txt not recorded:\n{review}"));
    assert!(
        line.contains("B wins") || line.contains("B has the larger gain"),
        "{line}"
    );
    assert!(
        !conflicts.contains("a.txt") && !conflicts.contains("b.txt"),
        "{conflicts}"
    );
    let payload = &repo.events_named("conf", "round.peer_review")[0]["payload"];
    assert_eq!(payload["conflicts"][0]["file"], "shared.txt");
    assert_eq!(payload["conflicts"][0]["winner"], "B");
    assert_eq!(payload["conflicts"][0]["loser"], "A");
    // Transfer order: larger gain first; A's pick reports the conflicted file.
    let picks = repo.events_named("conf", "transfer.pick");
    assert_eq!(picks[0]["payload"]["researcher"], "B");
    assert_eq!(picks[1]["payload"]["researcher"], "A");
    assert_eq!(picks[1]["payload"]["result"], "merged");
    assert_eq!(
        picks[1]["payload"]["conflicts"],
        serde_json::json!(["shared.txt"])
    );
}

#[test]
fn every_phase_file_is_in_git_and_in_the_report() {
    let repo = TestRepo::complement_conference("rep");
    let events = "refs/conference/rep/events";
    for path in [
        "state.json",
        "conference.md",
        "round-1/poster_session_round_1.md",
        "round-1/peer_review_round_1.md",
        "round-1/results.tsv",
        "synthesis.md",
        "final_report.md",
    ] {
        let text = repo
            .show(events, path)
            .unwrap_or_else(|| panic!("git show {events}:{path} fails"));
        assert!(!text.trim().is_empty(), "{path} is empty");
    }
    let poster = repo
        .show(events, "round-1/poster_session_round_1.md")
        .unwrap();
    assert!(
        poster.contains("## Researcher A") && poster.contains("## Researcher B"),
        "{poster}"
    );
    let review = repo.show(events, "round-1/peer_review_round_1.md").unwrap();
    for s in [
        "## Conflict Resolution",
        "## Round Verdict Summary",
        "## Knowledge Transfer Recommendations",
    ] {
        assert!(review.contains(s), "{s} missing:\n{review}");
    }
    let results = repo.show(events, "round-1/results.tsv").unwrap();
    assert!(
        results.starts_with("round\tresearcher\titeration\tmetric_value"),
        "{results}"
    );
    assert_eq!(results.lines().count(), 1 + 4, "{results}");
    // The plot is a PNG (read raw bytes with git cat-file).
    let png = repo
        .command("git")
        .args([
            "cat-file",
            "blob",
            &format!("{events}:conference_progress.png"),
        ])
        .output()
        .unwrap();
    assert!(png.status.success());
    assert!(png.stdout.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    let out = repo.tmp.path().join("report");
    let run = repo
        .conference(&["report", "rep", "--output", out.to_str().unwrap()])
        .ok();
    assert!(run.stdout.contains("synthesis.md"), "{}", run.stdout);
    for file in [
        "synthesis.md",
        "final_report.md",
        "conference_progress.png",
        "poster_session_round_1.md",
        "peer_review_round_1.md",
        "conference_results.tsv",
        "conference_events.jsonl",
    ] {
        assert!(out.join(file).is_file(), "report lacks {file}");
    }
    let plot = std::fs::read(out.join("conference_progress.png")).unwrap();
    assert!(plot.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert_eq!(plot, png.stdout, "the report's plot is the recorded one");
    for (file, path) in [
        ("synthesis.md", "synthesis.md"),
        ("final_report.md", "final_report.md"),
        (
            "poster_session_round_1.md",
            "round-1/poster_session_round_1.md",
        ),
        ("peer_review_round_1.md", "round-1/peer_review_round_1.md"),
    ] {
        assert_eq!(
            std::fs::read_to_string(out.join(file)).unwrap(),
            repo.show(events, path).unwrap(),
            "{file}"
        );
    }
    let report = std::fs::read_to_string(out.join("final_report.md")).unwrap();
    assert!(
        report.contains("16"),
        "the final report does not name the best metric:\n{report}"
    );
    let jsonl = std::fs::read_to_string(out.join("conference_events.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), repo.events("rep").len());
    // The report of a conference does not touch the user's branch.
    assert_eq!(
        repo.git(&["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
}

#[test]
fn apply_merges_best_and_refuses_over_uncommitted_changes() {
    let repo = TestRepo::complement_conference("app");
    let head = rev(&repo, "HEAD");
    let best = rev(&repo, "conference/app/best");

    // A modified tracked file: refused, nothing touched.
    repo.write("a.txt", "42\n");
    let run = repo.conference(&["apply", "app", "--yes"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("uncommitted"), "{}", run.stderr);
    assert_eq!(rev(&repo, "HEAD"), head);
    assert_eq!(repo.read("a.txt"), "42\n");
    // A staged change: refused too.
    repo.git(&["add", "a.txt"]);
    assert_eq!(repo.conference(&["apply", "app", "--yes"]).code, 2);
    assert_eq!(rev(&repo, "HEAD"), head);
    repo.git(&["reset", "-q", "--hard"]);

    // Without --yes and without a terminal: a usage error, nothing merged.
    assert_eq!(repo.conference(&["apply", "app"]).code, 2);
    assert_eq!(rev(&repo, "HEAD"), head);

    // Clean (an untracked conference.md is fine): merged.
    repo.conference(&["apply", "app", "--yes"]).ok();
    assert_eq!(
        repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(rev(&repo, "HEAD^1"), head);
    assert_eq!(rev(&repo, "HEAD^2"), best);
    assert_eq!(repo.read("a.txt").trim(), "8");
    assert_eq!(repo.read("b.txt").trim(), "8");
    assert_eq!(
        repo.git(&["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
    // Applying again adds nothing.
    let again = repo.conference(&["apply", "app", "--yes"]).ok();
    assert!(
        again.stdout.contains("Nothing to apply"),
        "{}",
        again.stdout
    );
}

#[test]
fn clean_removes_worktrees_and_clean_all_removes_refs() {
    let repo = TestRepo::complement_conference("cl");
    let wt_root = repo.worktrees_root().join("cl");
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(list.contains("repo.conference/cl/researcher-A"), "{list}");
    assert!(
        !list.contains(".git/"),
        "no worktree lives inside the git dir: {list}"
    );

    repo.conference(&["clean", "cl"]).ok();
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(!list.contains("repo.conference"), "{list}");
    assert!(!wt_root.join("researcher-A").exists());
    assert!(
        !repo.worktrees_root().exists(),
        "clean removes the emptied folder next to the repository"
    );
    // Refs stay: the conference still reads.
    for r in [
        "refs/conference/cl/events",
        "refs/conference/cl/attempts",
        "conference/cl/best",
        "conference/cl/researcher-A",
    ] {
        rev(&repo, r);
    }
    assert_eq!(repo.status_json("cl")["status"], "completed");
    let fsck = repo.git_run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stderr);

    // A second conference on the same baseline: its notes must outlive `clean --all cl`.
    let config = complement_config(1);
    repo.start("other", &config).ok();
    let baseline = rev(&repo, "main");
    let conferences = |commit: &str| -> Vec<String> {
        repo.notes(commit)
            .iter()
            .map(|n| n["conference"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert!(conferences(&baseline).contains(&"cl".to_string()));
    let best = rev(&repo, "conference/cl/best");
    repo.conference(&["clean", "--all", "cl"]).ok();
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "refs/conference/cl/",
            "refs/heads/conference/cl/"
        ]),
        ""
    );
    assert!(!repo
        .git(&["worktree", "list", "--porcelain"])
        .contains("conference/cl/"));
    // Its lines leave the shared notes; the other conference's stay.
    assert!(repo.notes(&best).is_empty(), "{:?}", repo.notes(&best));
    assert_eq!(conferences(&baseline), vec!["other".to_string()]);
    repo.git(&["gc", "--quiet", "--prune=now"]);
    assert_eq!(repo.git(&["notes", "--ref=conference", "prune", "-n"]), "");
    repo.git(&["fsck", "--no-progress"]);
    repo.conference(&["clean", "--all", "other"]).ok();
    let list = repo.conference(&["list"]).ok().stdout;
    assert!(!list.contains("cl\t"), "{list}");
    assert_eq!(repo.conference(&["status", "cl"]).code, 2);
    // The name can be used again.
    let config = complement_config(1);
    repo.start("cl", &config).ok();
}

#[test]
fn push_and_fetch_carry_the_whole_conference() {
    let repo = TestRepo::complement_conference("sh");
    let remote = repo.bare_origin();
    repo.git(&["push", "-q", "origin", "main"]);
    let run = repo.conference(&["push", "origin"]).ok();
    assert!(run.stdout.contains("sh"), "{}", run.stdout);
    let remote_refs = repo.git_in(&remote, &["for-each-ref", "--format=%(refname)"]);
    for r in [
        "refs/conference/sh/events",
        "refs/conference/sh/attempts",
        "refs/heads/conference/sh/best",
        "refs/heads/conference/sh/researcher-A",
        "refs/heads/conference/sh/researcher-B",
        "refs/notes/conference",
    ] {
        assert!(
            remote_refs.lines().any(|l| l == r),
            "{r} not pushed:\n{remote_refs}"
        );
    }

    let clone = repo.tmp.path().join("clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    let run = repo.conference_in(&clone, &["fetch"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("sh"), "{}", run.stdout);

    // The same refs, the same events, the same notes.
    for r in [
        "refs/conference/sh/events",
        "refs/conference/sh/attempts",
        "refs/heads/conference/sh/best",
    ] {
        assert_eq!(
            repo.git_in(&clone, &["rev-parse", r]),
            repo.git(&["rev-parse", r]),
            "{r}"
        );
    }
    let best = rev(&repo, "conference/sh/best");
    assert_eq!(
        repo.git_in(&clone, &["notes", "--ref=conference", "show", &best]),
        repo.git(&["notes", "--ref=conference", "show", &best])
    );
    for e in repo.events_named("sh", "researcher.iteration") {
        if let Some(c) = e["payload"]["commit"].as_str() {
            assert_eq!(
                repo.run_in(&clone, "git", &["cat-file", "-e", c]).code,
                0,
                "attempt {c} missing in the clone"
            );
        }
    }

    // status, log and report work there.
    let status = repo.conference_in(&clone, &["status", "sh", "--format", "json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let mut st: Value = serde_json::from_str(&status.stdout).unwrap();
    let mut here = repo.status_json("sh");
    // Trust is this clone's own (the local config): the one that ran it trusts it, the clone not.
    assert_eq!(here["trusted"], true);
    assert_eq!(st["trusted"], false);
    st.as_object_mut().unwrap().remove("trusted");
    here.as_object_mut().unwrap().remove("trusted");
    assert_eq!(st, here);
    let log = repo.conference_in(&clone, &["log", "sh", "--format", "jsonl"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert_eq!(
        log.stdout,
        repo.conference(&["log", "sh", "--format", "jsonl"])
            .ok()
            .stdout
    );
    let tsv = repo.conference_in(&clone, &["log", "sh", "--format", "tsv"]);
    assert_eq!(tsv.code, 0, "{}", tsv.stderr);
    assert_eq!(
        tsv.stdout,
        repo.conference(&["log", "sh", "--format", "tsv"])
            .ok()
            .stdout
    );
    let out = repo.tmp.path().join("clone-report");
    let report = repo.conference_in(&clone, &["report", "sh", "--output", out.to_str().unwrap()]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    for f in [
        "synthesis.md",
        "final_report.md",
        "conference_progress.png",
        "peer_review_round_1.md",
    ] {
        assert!(out.join(f).is_file(), "{f} missing from the clone's report");
    }
    let list = repo.conference_in(&clone, &["list"]);
    assert!(list.stdout.contains("sh\t"), "{}", list.stdout);
    // Resuming the completed conference there says it is complete.
    let resumed = repo.conference_in(&clone, &["resume", "sh"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stdout.contains("already complete"),
        "{}",
        resumed.stdout
    );
    // Fetching again is harmless.
    assert_eq!(repo.conference_in(&clone, &["fetch"]).code, 0);
}

#[test]
fn a_pick_that_makes_best_worse_is_left_out_with_its_reason() {
    // Each finding is good alone, but together they clash: a + b, plus 100 when both dropped.
    let repo = TestRepo::from_fixture("complement");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\n# score = a + b, plus 100 when both are below 10 (the findings clash).\n\
         awk -v a=\"$(cat a.txt)\" -v b=\"$(cat b.txt)\" 'BEGIN { s = a + b; if (a < 10 && b < 10) s += 100; printf \"score: %d\\n\", s }'\n",
    );
    repo.commit_all("clashing evaluation");
    let config = ConfigBuilder::new("Clash", "./agent.sh")
        .count(2)
        .iterations(1)
        .rounds(1)
        .build();
    repo.start("clash", &config).ok();
    let f = findings(&repo, "clash", 1);
    assert!(f.iter().all(|f| f["verdict"] == "validated"), "{f:?}");

    let picks = repo.events_named("clash", "transfer.pick");
    assert_eq!(picks.len(), 2);
    assert_eq!(
        (
            &picks[0]["payload"]["researcher"],
            &picks[0]["payload"]["result"]
        ),
        (&"A".into(), &"merged".into())
    );
    let dropped = &picks[1]["payload"];
    assert_eq!(
        (&dropped["researcher"], &dropped["result"]),
        (&"B".into(), &"dropped".into())
    );
    assert!(
        dropped["reason"].as_str().unwrap().contains("not better"),
        "{dropped}"
    );
    assert_eq!(dropped["metric"].as_f64(), Some(118.0));
    // The dropped combination is kept reachable with a note, but best does not carry it.
    let candidate = dropped["commit"].as_str().unwrap();
    let notes = repo.notes(candidate);
    assert!(
        notes
            .iter()
            .any(|n| n["verdict"] == "reverted" && n["transfer"] == "dropped"),
        "{notes:?}"
    );
    let attempts = repo.git(&["rev-list", "refs/conference/clash/attempts"]);
    assert!(attempts.contains(candidate));
    assert_eq!(num(repo.show("conference/clash/best", "a.txt")), 9);
    assert_eq!(num(repo.show("conference/clash/best", "b.txt")), 10);
    assert_eq!(
        repo.status_json("clash")["best"]["metric"].as_f64(),
        Some(19.0)
    );
    assert!(!repo
        .git(&["rev-list", "conference/clash/best"])
        .contains(candidate));
}

#[test]
fn notes_from_two_machines_both_survive_a_fetch() {
    let repo = TestRepo::complement_conference("one");
    let base = rev(&repo, "main");
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
    repo.conference_in(&clone, &["fetch"]).ok();

    // The clone records a verdict of its own on the baseline commit ...
    let mut local = repo.git_in(&clone, &["notes", "--ref=conference", "show", &base]);
    let extra = r#"{"commit":"x","verdict":"validated","note":"from the clone"}"#;
    local.push_str(extra);
    local.push('\n');
    let file = repo.tmp.path().join("note.txt");
    std::fs::write(&file, &local).unwrap();
    repo.git_in(
        &clone,
        &[
            "notes",
            "--ref=conference",
            "add",
            "-f",
            "-F",
            file.to_str().unwrap(),
            &base,
        ],
    );
    // ... while the origin runs a second conference from the same baseline and pushes it.
    let config = complement_config(1);
    repo.start("two", &config).ok();
    repo.conference(&["push", "origin", "--name", "two"]).ok();
    let origin_note = repo.git(&["notes", "--ref=conference", "show", &base]);
    assert_eq!(
        origin_note.lines().count(),
        2,
        "two baselines measured: {origin_note}"
    );

    repo.conference_in(&clone, &["fetch"]).ok();
    let merged = repo.git_in(&clone, &["notes", "--ref=conference", "show", &base]);
    assert!(
        merged.contains("from the clone"),
        "the clone's note line was lost:\n{merged}"
    );
    for line in origin_note.lines() {
        assert!(
            merged.contains(line),
            "origin's line {line} missing:\n{merged}"
        );
    }
    let list = repo.conference_in(&clone, &["list"]).ok().stdout;
    assert!(list.contains("one\t") && list.contains("two\t"), "{list}");
}

/// A finding whose commit is not a full id (a hand edit of the state tree, a crafted fetch) is
/// refused where knowledge transfer reads it, the message naming the file and the field; best
/// does not move.
#[test]
fn a_finding_with_an_abbreviated_commit_is_refused_naming_its_file_and_field() {
    let repo = TestRepo::from_fixture("complement");
    let config = complement_config(2);
    repo.write("conference.md", &config);
    // Killed in knowledge transfer, after the review recorded its findings.
    let run = repo.conference_env(
        &["start", "ab"],
        &[("GIT_CONFERENCE_FAILPOINT", "transfer.cherry-picked")],
    );
    assert_ne!(run.code, 0, "{}", run.stdout);
    let events = "refs/conference/ab/events";
    let text = repo
        .show(events, "round-1/findings.json")
        .expect("findings");
    let findings: Vec<Value> = serde_json::from_str(&text).unwrap();
    let full = findings[0]["commit"].as_str().unwrap().to_string();
    let short = text.replacen(&full, &full[..7], 1);
    let parent = format!("{events}^");
    let crafted = repo.commit_with_file(events, "round-1/findings.json", short.as_bytes(), &parent);
    repo.git(&["update-ref", events, &crafted]);
    let best = rev(&repo, "conference/ab/best");

    let run = repo.conference(&["resume", "ab"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    let said = format!(
        "round-1/findings.json: commit is `{}`, not a full commit id",
        &full[..7]
    );
    assert!(run.stderr.contains(&said), "{}", run.stderr);
    assert_eq!(rev(&repo, "conference/ab/best"), best);
}
