//! End-to-end tests of the research loop (issue "research loop"): the real binary runs as
//! `git conference …` through the real `git`, on `fixtures/loop`, and everything the storage
//! contract promises is checked with git itself (`git log`, `git notes`, `git worktree list`,
//! `git fsck`, `git show`), never through the program's own reading.

use crate::common;

use std::collections::BTreeSet;

use common::{ConfigBuilder, TestRepo};
use serde_json::Value;

/// The fixture's eval log lines (`<researcher> <round> <iteration> <value>`).
fn eval_log(repo: &TestRepo) -> Vec<String> {
    repo.git_dir_file("eval-count")
        .lines()
        .map(str::to_string)
        .collect()
}

/// The `researcher.iteration` events of a conference, read with `git log`.
fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

/// (round, iteration) → verdict of one researcher.
fn verdicts(repo: &TestRepo, name: &str, researcher: &str) -> Vec<(u64, u64, String)> {
    iterations(repo, name)
        .iter()
        .filter(|e| e["payload"]["researcher"] == researcher)
        .map(|e| {
            let p = &e["payload"];
            (
                p["round"].as_u64().unwrap(),
                p["iteration"].as_u64().unwrap(),
                p["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn rev(repo: &TestRepo, r: &str) -> String {
    repo.git(&["rev-parse", "--verify", r]).trim().to_string()
}

fn worktree_porcelain(repo: &TestRepo) -> String {
    repo.git(&["worktree", "list", "--porcelain"])
}

/// Whether the process whose pid the fixture wrote to `<git dir>/<file>` is still running.
fn still_running(repo: &TestRepo, file: &str) -> bool {
    let pid = repo.git_dir_file(file);
    let pid = pid.trim();
    assert!(!pid.is_empty(), "the fixture wrote no {file}");
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie is dead, just not reaped (by whatever adopted it).
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn event_log_notes_branches_and_worktrees_are_plain_git() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Loop", "./agents/each.sh improve worsen")
        .count(2)
        .iterations(2)
        .rounds(2)
        .frozen("eval.sh, agents/**")
        .build();
    repo.start("loop", &config).ok();

    // --- the event log: one commit per event, `<event>: <summary>` + the JSON line.
    let subjects = repo.event_subjects("loop");
    let events = repo.events("loop");
    assert_eq!(subjects.len(), events.len());
    for (subject, e) in subjects.iter().zip(&events) {
        let name = e["event"].as_str().expect("event name");
        assert!(
            subject.starts_with(&format!("{name}: ")),
            "subject `{subject}` for {name}"
        );
        let ts = e["timestamp"].as_str().expect("timestamp");
        assert!(
            ts.len() == 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
            "timestamp {ts}"
        );
        assert!(e["payload"].is_object(), "{e}");
    }
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for required in [
        "conference.started",
        "baseline.measured",
        "round.started",
        "researcher.iteration",
        "round.poster_session",
        "round.peer_review",
        "round.completed",
        "conference.completed",
    ] {
        assert!(names.contains(&required), "no {required} in {names:?}");
    }
    assert_eq!(names.first(), Some(&"conference.started"));
    assert_eq!(names.last(), Some(&"conference.completed"));
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(pos("baseline.measured") < pos("round.started"));
    assert!(pos("round.started") < pos("researcher.iteration"));
    assert!(pos("researcher.iteration") < pos("round.poster_session"));
    assert!(pos("round.poster_session") < pos("round.peer_review"));
    assert!(pos("round.peer_review") < pos("round.completed"));
    // Two rounds, each started and completed once, in order.
    let rounds_of = |event: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["event"] == event)
            .map(|e| e["payload"]["round"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(rounds_of("round.started"), vec![1, 2]);
    assert_eq!(rounds_of("round.poster_session"), vec![1, 2]);
    assert_eq!(rounds_of("round.peer_review"), vec![1, 2]);
    assert_eq!(rounds_of("round.completed"), vec![1, 2]);
    // 2 researchers x 2 iterations x 2 rounds.
    assert_eq!(iterations(&repo, "loop").len(), 8);

    // --- the tip tree of the event log holds the state files.
    let tree: BTreeSet<String> = repo
        .git(&[
            "ls-tree",
            "-r",
            "--name-only",
            "refs/conference/loop/events",
        ])
        .lines()
        .map(str::to_string)
        .collect();
    for f in [
        "state.json",
        "conference.md",
        "round-1/poster_session_round_1.md",
        "round-1/peer_review_round_1.md",
        "round-1/results.tsv",
        "round-2/poster_session_round_2.md",
        "round-2/peer_review_round_2.md",
        "round-2/results.tsv",
        "synthesis.md",
        "final_report.md",
        "conference_progress.png",
    ] {
        assert!(
            tree.contains(f),
            "{f} missing from the state tree: {tree:?}"
        );
    }
    let state: Value = serde_json::from_str(
        &repo
            .show("refs/conference/loop/events", "state.json")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state["status"], "completed");

    // --- every attempt named in the events has a note with its verdict and metric, and is
    // reachable from refs/conference/loop/attempts.
    let attempts: BTreeSet<String> = repo
        .git(&["rev-list", "refs/conference/loop/attempts"])
        .lines()
        .map(str::to_string)
        .collect();
    let mut attempt_commits = Vec::new();
    for e in iterations(&repo, "loop") {
        let p = &e["payload"];
        for key in [
            "researcher",
            "round",
            "iteration",
            "metric_value",
            "status",
            "commit",
        ] {
            assert!(
                p.get(key).is_some(),
                "researcher.iteration without {key}: {p}"
            );
        }
        let Some(commit) = p["commit"].as_str() else {
            assert_eq!(
                p["status"], "no_change",
                "only a no-change attempt has no commit: {p}"
            );
            continue;
        };
        attempt_commits.push(commit.to_string());
        assert!(
            attempts.contains(commit),
            "attempt {commit} is not reachable from the attempts ref"
        );
        let notes = repo.notes(commit);
        let note = notes
            .iter()
            .find(|n| n["verdict"] == p["status"] && n["iteration"] == p["iteration"])
            .unwrap_or_else(|| {
                panic!(
                    "no note with verdict {} on {commit}: {notes:?}",
                    p["status"]
                )
            });
        assert_eq!(note["metric"], p["metric_value"], "{note}");
        assert_eq!(note["researcher"], p["researcher"]);
        assert_eq!(note["round"], p["round"]);
        assert!(
            [
                "kept",
                "reverted",
                "crashed",
                "timeout",
                "rejected",
                "no_change"
            ]
            .contains(&note["verdict"].as_str().unwrap()),
            "{note}"
        );
    }
    // Review verdicts are added to the reviewed snapshots' notes.
    for e in repo.events_named("loop", "round.peer_review") {
        for f in e["payload"]["findings"].as_array().unwrap() {
            let commit = f["commit"].as_str().unwrap();
            let notes = repo.notes(commit);
            assert!(
                notes.iter().any(|n| n["verdict"] == f["verdict"]),
                "review verdict {} not in the notes of {commit}: {notes:?}",
                f["verdict"]
            );
            assert!(
                ["validated", "challenged", "overturned"].contains(&f["verdict"].as_str().unwrap())
            );
        }
    }
    // Transfer picks are attempts too.
    for e in repo.events_named("loop", "transfer.pick") {
        if let Some(c) = e["payload"]["commit"].as_str() {
            attempt_commits.push(c.to_string());
        }
    }

    // --- `git log --notes=conference` on a researcher branch shows its kept path.
    let log = repo.git(&["log", "--notes=conference", "conference/loop/researcher-A"]);
    assert!(log.contains("Notes (conference):"), "{log}");
    let branch_commits: BTreeSet<String> = repo
        .git(&["rev-list", "conference/loop/researcher-A"])
        .lines()
        .map(str::to_string)
        .collect();
    for (r, i, v) in verdicts(&repo, "loop", "A") {
        assert_eq!(v, "kept", "A improves every time: r{r} i{i}");
    }
    for e in iterations(&repo, "loop") {
        let p = &e["payload"];
        let Some(commit) = p["commit"].as_str() else {
            continue;
        };
        let on_a = branch_commits.contains(commit);
        if p["researcher"] == "A" {
            assert!(on_a, "kept attempt {commit} of A is not on its branch");
            let shown = repo.git(&["log", "-1", "--notes=conference", "--format=%N", commit]);
            assert!(shown.contains("\"verdict\":\"kept\""), "{shown}");
        } else {
            assert_eq!(p["status"], "reverted", "B only worsens: {p}");
            assert!(!on_a);
            let b_branch = repo.git(&["rev-list", "conference/loop/researcher-B"]);
            assert!(
                !b_branch.contains(commit),
                "reverted attempt {commit} is on B's branch"
            );
        }
    }
    // The branch tip is A's last kept snapshot: value 10 - 4.
    assert_eq!(
        repo.show("conference/loop/researcher-A", "value.txt")
            .unwrap()
            .trim(),
        "6"
    );
    assert_eq!(
        repo.show("conference/loop/researcher-B", "value.txt")
            .unwrap()
            .trim(),
        "8"
    );
    assert_eq!(
        repo.show("conference/loop/best", "value.txt")
            .unwrap()
            .trim(),
        "6"
    );

    // --- the researchers' worktrees are real git worktrees on their branches.
    let wts = worktree_porcelain(&repo);
    for id in ["A", "B"] {
        let path = repo.worktree("loop", &format!("researcher-{id}"));
        let path = path.canonicalize().unwrap();
        assert!(
            wts.contains(&format!("worktree {}", path.display())),
            "{wts}"
        );
        assert!(
            wts.contains(&format!(
                "branch refs/heads/conference/loop/researcher-{id}"
            )),
            "{wts}"
        );
        let status = repo.git_in(&path, &["status", "--porcelain"]);
        assert!(status.is_empty(), "worktree {id} is dirty: {status}");
    }

    // --- status agrees with git.
    let st = repo.status_json("loop");
    assert_eq!(
        st["best"]["commit"].as_str().unwrap(),
        rev(&repo, "conference/loop/best")
    );
    assert_eq!(st["best"]["metric"].as_f64(), Some(6.0));
    let completed = repo.events_named("loop", "conference.completed");
    assert_eq!(completed[0]["payload"]["best_commit"], st["best"]["commit"]);

    // --- gc loses nothing; fsck is clean.
    repo.git(&["gc", "--prune=now", "--quiet"]);
    let fsck = repo.git_run(&["fsck", "--full"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    assert!(
        !fsck.stderr.contains("error") && !fsck.stderr.contains("missing"),
        "{}",
        fsck.stderr
    );
    assert!(!attempt_commits.is_empty());
    for c in &attempt_commits {
        let run = repo.git_run(&["cat-file", "-e", &format!("{c}^{{commit}}")]);
        assert_eq!(run.code, 0, "attempt {c} lost after gc");
        assert!(!repo.notes(c).is_empty(), "note of {c} lost after gc");
    }
    for e in repo.events("loop") {
        assert!(e["payload"].is_object());
    }
}

#[test]
fn user_branch_index_and_working_tree_are_untouched() {
    let repo = TestRepo::from_fixture("loop");
    repo.write(
        "conference.md",
        &ConfigBuilder::new("Untouched", "./agents/seq.sh improve")
            .iterations(2)
            .build(),
    );
    // Uncommitted work of every kind: a modified tracked file, a staged change, a staged new file,
    // an untracked file, an ignored file.
    repo.write("value.txt", "999\n");
    repo.write("README.md", "staged edit\n");
    repo.git(&["add", "README.md"]);
    repo.write("README.md", "staged edit\nthen an unstaged one\n");
    repo.write("staged-new.txt", "new and staged\n");
    repo.git(&["add", "staged-new.txt"]);
    repo.write("scratch.txt", "untracked\n");
    repo.write("build/ignored.o", "ignored\n");

    let head = rev(&repo, "HEAD");
    let symbolic = repo.git(&["symbolic-ref", "HEAD"]);
    let index = std::fs::read(repo.git_dir().join("index")).unwrap();
    let files = repo.files();
    let heads_before = repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/heads/main",
        "refs/tags",
        "refs/stash",
    ]);

    repo.conference(&["start", "untouched"]).ok();

    assert_eq!(rev(&repo, "HEAD"), head);
    assert_eq!(repo.git(&["symbolic-ref", "HEAD"]), symbolic);
    assert_eq!(
        repo.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/heads/main",
            "refs/tags",
            "refs/stash"
        ]),
        heads_before
    );
    let index_after = std::fs::read(repo.git_dir().join("index")).unwrap();
    assert!(index_after == index, "the user's index changed");
    let files_after = repo.files();
    assert_eq!(
        files_after.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>()
    );
    for (path, bytes) in &files {
        assert!(files_after[path] == *bytes, "{path} changed");
    }
    // And git sees the same uncommitted state.
    let status = repo.git(&["status", "--porcelain", "--ignored"]);
    assert!(
        status.contains("M  README.md") || status.contains("MM README.md"),
        "{status}"
    );
    assert!(status.contains(" M value.txt"), "{status}");
    assert!(status.contains("A  staged-new.txt"), "{status}");
    assert!(status.contains("?? scratch.txt"), "{status}");
    assert!(status.contains("!! build/"), "{status}");
    // The conference ran from the committed value (10), not the working tree's 999.
    assert_eq!(
        repo.show("conference/untouched/best", "value.txt")
            .unwrap()
            .trim(),
        "8"
    );
}

#[test]
fn bad_agents_get_their_verdicts_and_the_loop_goes_on() {
    let repo = TestRepo::from_fixture("loop");
    let behaviours = [
        ("hang", "timeout"),
        ("crash", "crashed"),
        ("nometric", "crashed"),
        ("nan", "crashed"),
        ("frozen", "rejected"),
        ("delete-all", "rejected"),
        ("commit-agent", "kept"),
        ("junk", "reverted"),
        ("nochange", "no_change"),
        ("improve", "kept"),
    ];
    let agent = format!(
        "./agents/seq.sh {}",
        behaviours
            .iter()
            .map(|(b, _)| *b)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let config = ConfigBuilder::new("Bad agents", &agent)
        .iterations(behaviours.len() as u32)
        .agent_timeout("2s")
        .frozen("eval.sh, agents/**")
        .build();
    let started = std::time::Instant::now();
    repo.start("bad", &config).ok();
    assert!(
        started.elapsed().as_secs() < 60,
        "the hanging agent was not killed in time"
    );
    assert!(
        !still_running(&repo, "agent-sleep.pid"),
        "the timed-out agent's child still runs"
    );

    let got = verdicts(&repo, "bad", "A");
    let expected: Vec<(u64, u64, String)> = behaviours
        .iter()
        .enumerate()
        .map(|(i, (_, v))| (1, i as u64 + 1, v.to_string()))
        .collect();
    assert_eq!(got, expected, "verdicts per iteration");
    let its = iterations(&repo, "bad");
    let payload = |i: usize| &its[i - 1]["payload"];

    // Failed attempts carry no metric; every one that changed files is a commit with a note.
    for i in 1..=6 {
        assert!(
            payload(i)["metric_value"].is_null(),
            "iteration {i}: {}",
            payload(i)
        );
        let commit = payload(i)["commit"]
            .as_str()
            .unwrap_or_else(|| panic!("iteration {i} has no commit"));
        let notes = repo.notes(commit);
        assert_eq!(notes[0]["verdict"], behaviours[i - 1].1);
        assert!(
            notes[0]["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "iteration {i}: {notes:?}"
        );
    }
    // The frozen and delete-all attempts name the frozen path.
    assert!(
        payload(5)["reason"].as_str().unwrap().contains("eval.sh"),
        "{}",
        payload(5)
    );
    assert!(
        payload(6)["reason"].as_str().unwrap().contains("frozen"),
        "{}",
        payload(6)
    );
    assert!(
        payload(3)["reason"].as_str().unwrap().contains("score"),
        "{}",
        payload(3)
    );
    assert!(
        payload(4)["reason"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("nan"),
        "{}",
        payload(4)
    );
    assert_eq!(payload(7)["metric_value"].as_f64(), Some(9.0));
    assert_eq!(payload(8)["metric_value"].as_f64(), Some(9.0));
    assert!(payload(9)["commit"].is_null());
    assert_eq!(payload(10)["metric_value"].as_f64(), Some(8.0));

    // Which attempts were evaluated: never the timed-out, crashed-agent, rejected or unchanged ones.
    let evaluated: Vec<u64> = eval_log(&repo)
        .iter()
        .filter(|l| l.starts_with("A 1 "))
        .map(|l| l.split(' ').nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        evaluated,
        vec![3, 4, 7, 8, 10],
        "eval log: {:?}",
        eval_log(&repo)
    );

    // Every iteration started from a clean worktree holding the kept snapshot.
    let starts: Vec<String> = repo
        .git_dir_file("agent-start.log")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(starts.len(), behaviours.len(), "{starts:?}");
    for (i, line) in starts.iter().enumerate() {
        let value = if i < 7 { 10 } else { 9 };
        assert_eq!(
            line,
            &format!("A 1 {} value={value} dirty=0", i + 1),
            "{starts:?}"
        );
    }

    // The junk attempt snapshotted the untracked files, not the ignored one.
    let junk = payload(8)["commit"].as_str().unwrap();
    let junk_files = repo.git(&["ls-tree", "-r", "--name-only", junk]);
    assert!(junk_files.contains("junk-8.tmp"), "{junk_files}");
    assert!(!junk_files.contains("build/cache.o"), "{junk_files}");
    // The hang attempt's partial change was recorded, not evaluated.
    assert_eq!(
        repo.show(payload(1)["commit"].as_str().unwrap(), "value.txt")
            .unwrap()
            .trim(),
        "1"
    );
    // The delete-all attempt is a commit that deletes everything.
    let deleted = repo.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        payload(6)["commit"].as_str().unwrap(),
    ]);
    assert!(deleted.trim().is_empty(), "{deleted}");

    // The agent's own commit is not on the researcher branch; only the conference's snapshots are.
    let branch_log = repo.git(&["log", "--format=%an|%s", "conference/bad/researcher-A"]);
    assert!(!branch_log.contains("agent commit"), "{branch_log}");
    assert_eq!(
        branch_log
            .lines()
            .filter(|l| l.starts_with("Researcher A"))
            .count(),
        2,
        "{branch_log}"
    );

    // The worktree is clean and at the kept snapshot afterwards.
    let wt = repo.worktree("bad", "researcher-A");
    assert_eq!(repo.git_in(&wt, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(wt.join("value.txt"))
            .unwrap()
            .trim(),
        "8"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("eval.sh")).unwrap(),
        repo.read("eval.sh")
    );
    assert_eq!(
        rev(&repo, "conference/bad/researcher-A"),
        repo.git_in(&wt, &["rev-parse", "HEAD"]).trim()
    );

    // Counts in status agree.
    let st = repo.status_json("bad");
    let c = &st["researchers"]["A"]["counts"];
    assert_eq!(
        (
            c["kept"].as_u64(),
            c["crashed"].as_u64(),
            c["timeout"].as_u64()
        ),
        (Some(2), Some(3), Some(1))
    );
    assert_eq!(
        (
            c["rejected"].as_u64(),
            c["reverted"].as_u64(),
            c["no_change"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
}

#[test]
fn same_tree_is_evaluated_once() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Same", "./agents/seq.sh same")
        .iterations(4)
        .build();
    repo.start("same", &config).ok();
    let got: Vec<String> = verdicts(&repo, "same", "A")
        .into_iter()
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(got, ["reverted"; 4]);
    let evaluated: Vec<String> = eval_log(&repo)
        .into_iter()
        .filter(|l| l.starts_with("A "))
        .collect();
    assert_eq!(
        evaluated,
        vec!["A 1 1 20".to_string()],
        "the same tree was evaluated again"
    );
    // All four attempts are the same tree, each recorded with the cached metric.
    let its = iterations(&repo, "same");
    let trees: BTreeSet<&str> = its
        .iter()
        .map(|e| e["payload"]["tree"].as_str().unwrap())
        .collect();
    assert_eq!(trees.len(), 1);
    for e in &its {
        assert_eq!(e["payload"]["metric_value"].as_f64(), Some(20.0));
    }

    // A change that is kept and then made again is no change the second time.
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable("agents/set5.sh", "#!/bin/sh\necho 5 >value.txt\n");
    repo.commit_all("set5 agent");
    let config = ConfigBuilder::new("Set", "./agents/seq.sh set5")
        .iterations(3)
        .build();
    repo.start("set", &config).ok();
    let got: Vec<String> = verdicts(&repo, "set", "A")
        .into_iter()
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(got, ["kept", "no_change", "no_change"]);
    let evaluated: Vec<String> = eval_log(&repo)
        .into_iter()
        .filter(|l| l.starts_with("A "))
        .collect();
    assert_eq!(evaluated, vec!["A 1 1 5".to_string()]);
}

#[test]
fn malformed_conference_md_exits_2_with_line_and_hint() {
    let repo = TestRepo::from_fixture("loop");
    let good = ConfigBuilder::new("Bad config", "./agents/seq.sh improve").build();
    let line_of =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;

    // (description, text, expected line (None: a missing section has none), words in the message)
    let mut cases: Vec<(&str, String, Option<usize>, Vec<&str>)> = Vec::new();
    let t = good.replace("- **Max rounds:** 1", "- **Max rounds:** 1\n- **Bogus:** 2");
    cases.push((
        "unknown key",
        t.clone(),
        Some(line_of(&t, "Bogus")),
        vec!["unknown key", "Bogus"],
    ));
    let t = good.replace("- **Count:** 1", "- **Count:** three");
    cases.push((
        "bad number",
        t.clone(),
        Some(line_of(&t, "three")),
        vec!["Count", "three"],
    ));
    let t = good.replace(
        "- **Iterations per round:** 3",
        "- **Iterations per round:** 2.5x",
    );
    cases.push((
        "bad number",
        t.clone(),
        Some(line_of(&t, "2.5x")),
        vec!["Iterations per round"],
    ));
    let t = good.replace("## Noise Handling", "## Bogus Section");
    cases.push((
        "unknown section",
        t.clone(),
        Some(line_of(&t, "Bogus Section")),
        vec!["unknown section", "Bogus Section"],
    ));
    let agent_at = good.find("## Agent").unwrap();
    let t = good[..agent_at].to_string();
    cases.push(("missing section", t, None, vec!["## Agent"]));
    let t = good.replace(
        "## Evaluation\n- command: ./eval.sh\n- timeout: 30s\n- frozen: eval.sh\n",
        "",
    );
    cases.push(("missing section", t, None, vec!["## Evaluation"]));
    let t = good.replace("- **Direction:** minimize", "- **Direction:** sideways");
    cases.push((
        "bad direction",
        t.clone(),
        Some(line_of(&t, "sideways")),
        vec!["Direction"],
    ));

    // Found against the repository and the machine, still with their lines.
    let t = good.replace("- frozen: eval.sh", "- frozen: eval.sh, data/**");
    cases.push((
        "frozen matches nothing",
        t.clone(),
        Some(line_of(&t, "- frozen:")),
        vec!["data/**", "matches no file committed"],
    ));
    let t = good.replace(
        "- command: ./agents/seq.sh improve",
        "- command: no-such-agent-xyz -p \"$(cat \"$CONFERENCE_PROMPT_FILE\")\"",
    );
    cases.push((
        "agent not installed",
        t.clone(),
        Some(line_of(&t, "no-such-agent-xyz")),
        vec!["no-such-agent-xyz", "not found on PATH", "builtin:tune"],
    ));
    let t = good.replace(
        "- command: ./eval.sh",
        "- command: ./missing-eval.sh --fast",
    );
    cases.push((
        "evaluation not committed",
        t.clone(),
        Some(line_of(&t, "missing-eval.sh")),
        vec!["missing-eval.sh", "not committed"],
    ));
    let t = good.replace(
        "- frozen: eval.sh\n\n## Agent",
        "- frozen: eval.sh\n- holdout: /nonexistent/judge.sh\n\n## Agent",
    );
    cases.push((
        "hold-out missing",
        t.clone(),
        Some(line_of(&t, "judge.sh")),
        vec!["/nonexistent/judge.sh", "does not exist"],
    ));

    for (what, text, line, words) in cases {
        repo.write("conference.md", &text);
        let run = repo.conference(&["start", "bad"]);
        let err = &run.stderr;
        assert_eq!(run.code, 2, "{what}: exit {}\n{err}", run.code);
        if let Some(line) = line {
            // `conference.md:12: …` or `conference.md:line 12: …`
            assert!(
                err.contains(&format!("conference.md:{line}:"))
                    || err.contains(&format!("line {line}:")),
                "{what}: line {line} is not named in\n{err}"
            );
        }
        for w in words {
            assert!(err.contains(w), "{what}: no `{w}` in\n{err}");
        }
        // A hint (or fix) line says what to write instead.
        let hint = err
            .lines()
            .find(|l| {
                let l = l.trim_start().to_lowercase();
                l.starts_with("hint") || l.starts_with("fix")
            })
            .unwrap_or_else(|| panic!("{what}: no hint in\n{err}"));
        assert!(hint.len() > 10, "{what}: empty hint in\n{err}");
        assert!(
            err.contains("conference.md"),
            "{what}: the file is not named\n{err}"
        );
        // Nothing was recorded.
        assert_eq!(
            repo.git(&["for-each-ref", "refs/conference", "refs/heads/conference"]),
            "",
            "{what}"
        );
    }
    // Not a conference.md at all.
    let run = repo.conference(&["start", "bad", "--config", "nope.md"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("init"), "{}", run.stderr);
    // The good file is accepted.
    repo.start("good", &good).ok();
}

#[test]
fn init_yes_writes_a_file_that_start_accepts() {
    let repo = TestRepo::from_fixture("loop");
    let run = repo
        .conference(&[
            "init",
            "--yes",
            "--count",
            "1",
            "--eval",
            "./eval.sh",
            "--agent",
            "./agents/seq.sh improve",
            "--metric",
            "score",
            "--direction",
            "minimize",
            "--iterations-per-round",
            "2",
            "--max-rounds",
            "1",
        ])
        .ok();
    assert!(run.stdout.contains("conference.md"), "{}", run.stdout);
    let text = repo.read("conference.md");
    for section in [
        "## Goal",
        "## Mode",
        "## Success Metric",
        "## Researchers",
        "## Evaluation",
        "## Agent",
    ] {
        assert!(text.contains(section), "{section} missing:\n{text}");
    }
    // A second init does not overwrite it.
    let again = repo.conference(&["init", "--yes"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert_eq!(repo.read("conference.md"), text);

    repo.conference(&["start", "init-run", "--yes"]).ok();
    let got: Vec<String> = verdicts(&repo, "init-run", "A")
        .into_iter()
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(got, ["kept", "kept"]);
    assert_eq!(
        repo.show("conference/init-run/best", "value.txt")
            .unwrap()
            .trim(),
        "8"
    );
}

#[test]
fn status_log_list_and_a_second_start() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Formats", "./agents/seq.sh improve worsen nochange")
        .iterations(3)
        .build();
    repo.start("fmt", &config).ok();

    // status --format json
    let st = repo.status_json("fmt");
    assert_eq!(st["name"], "fmt");
    assert_eq!(st["status"], "completed");
    assert_eq!(st["round"], 1);
    assert_eq!(st["baseline_metric"].as_f64(), Some(10.0));
    assert_eq!(st["best"]["metric"].as_f64(), Some(9.0));
    assert_eq!(st["total_iterations"], 3);
    assert!(st["researchers"]["A"].is_object());
    let text = repo.conference(&["status", "fmt"]).ok().stdout;
    assert!(
        text.contains("completed") && text.contains("9.000000"),
        "{text}"
    );

    // log --format jsonl: one line per event, each the seed's {event, timestamp, payload}.
    let jsonl = repo
        .conference(&["log", "fmt", "--format", "jsonl"])
        .ok()
        .stdout;
    let git_events = repo.events("fmt");
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), git_events.len());
    for (l, g) in lines.iter().zip(&git_events) {
        let keys: BTreeSet<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from(["event", "timestamp", "payload"]),
            "{l}"
        );
        assert_eq!(l, g);
    }

    // log --format tsv: the seed's header and one row per attempt.
    let tsv = repo
        .conference(&["log", "fmt", "--format", "tsv"])
        .ok()
        .stdout;
    let mut rows = tsv.lines();
    assert_eq!(
        rows.next().unwrap(),
        "round\tresearcher\titeration\tmetric_value\tdelta\tdelta_pct\tstatus\tdescription\tevaluator_source\tpeer_review_verdict\ttimestamp\tcommit\tagent_s\teval_s"
    );
    let rows: Vec<Vec<&str>> = rows.map(|r| r.split('\t').collect()).collect();
    assert_eq!(rows.len(), 3, "{tsv}");
    for r in &rows {
        assert_eq!(r.len(), 14, "{r:?}");
        assert_eq!((r[0], r[1]), ("1", "A"));
    }
    assert_eq!((rows[0][2], rows[0][3], rows[0][6]), ("1", "9", "kept"));
    assert_eq!(rows[0][9], "validated", "{:?}", rows[0]);
    assert_eq!(rows[1][6], "reverted");

    // log (text) names every event.
    let log = repo.conference(&["log", "fmt"]).ok().stdout;
    for e in &git_events {
        assert!(log.contains(e["event"].as_str().unwrap()), "{log}");
    }
    // --follow on a completed conference prints it and returns.
    let follow = repo
        .conference(&["log", "fmt", "--follow", "--format", "jsonl"])
        .ok()
        .stdout;
    assert_eq!(follow, jsonl);
    // The only conference of the repository needs no name.
    let unnamed: Value =
        serde_json::from_str(&repo.conference(&["status", "--format", "json"]).ok().stdout)
            .unwrap();
    assert_eq!(unnamed, st);

    // list
    let list = repo.conference(&["list"]).ok().stdout;
    assert!(
        list.contains("fmt") && list.contains("Formats") && list.contains("budget_stop"),
        "{list}"
    );

    // A second start of the same name fails with a clear message and records nothing.
    let events_tip = rev(&repo, "refs/conference/fmt/events");
    let again = repo.conference(&["start", "fmt"]);
    assert_ne!(again.code, 0);
    assert!(
        again.stderr.contains("already exists") && again.stderr.contains("resume"),
        "{}",
        again.stderr
    );
    assert_eq!(rev(&repo, "refs/conference/fmt/events"), events_tip);
    // Resuming a completed conference says so and succeeds.
    let resumed = repo.conference(&["resume", "fmt"]).ok();
    assert!(
        resumed.stdout.contains("already complete"),
        "{}",
        resumed.stdout
    );
    assert_eq!(rev(&repo, "refs/conference/fmt/events"), events_tip);
    // Unknown names are usage errors.
    assert_eq!(repo.conference(&["status", "nope"]).code, 2);
}

#[test]
fn event_hooks_get_the_json_and_a_failing_hook_does_not_stop_the_conference() {
    let repo = TestRepo::from_fixture("loop");
    let out = repo.tmp.path().join("hook-out.jsonl");
    repo.write_executable(
        ".git/conference/hooks/round.completed",
        &format!(
            "#!/bin/sh\ncat >>'{}'\necho \"$CONFERENCE_NAME $CONFERENCE_EVENT\" >>'{}.env'\n",
            out.display(),
            out.display()
        ),
    );
    repo.write_executable(
        ".git/conference/hooks/round.started",
        "#!/bin/sh\ncat >/dev/null\necho hook fails >&2\nexit 1\n",
    );
    // Not `hooks`: that is the hooks folder's name, which no conference may take.
    let config = ConfigBuilder::new("Hooked", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(2)
        .build();
    let run = repo.start("hooked", &config).ok();
    assert!(
        run.stderr.contains("round.started") && run.stderr.contains("failed"),
        "{}",
        run.stderr
    );
    assert_eq!(repo.events_named("hooked", "round.completed").len(), 2);
    assert_eq!(repo.events_named("hooked", "conference.completed").len(), 1);

    let got: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("hook got JSON"))
        .collect();
    let recorded = repo.events_named("hooked", "round.completed");
    assert_eq!(got, recorded, "the hook's stdin is the recorded event");
    assert_eq!(got[0]["payload"]["round"], 1);
    let env = std::fs::read_to_string(format!("{}.env", out.display())).unwrap();
    assert_eq!(env, "hooked round.completed\nhooked round.completed\n");
}

#[test]
fn a_researcher_that_never_improves_gets_stuck() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Stuck", "./agents/seq.sh worsen")
        .iterations(5)
        .rounds(3)
        .build();
    repo.start("stuck", &config).ok();
    let stuck = repo.events_named("stuck", "researcher.stuck");
    let levels: Vec<u64> = stuck
        .iter()
        .map(|e| e["payload"]["stuck_level"].as_u64().unwrap())
        .collect();
    assert_eq!(levels, vec![1, 2, 3], "{stuck:?}");
    assert_eq!(stuck[0]["payload"]["researcher"], "A");
    assert_eq!(stuck[0]["payload"]["consecutive_non_improving"], 3);
    // Every researcher stalled in rounds 1 and 2 (Stall rounds: 2): early synthesis after
    // round 2, not three rounds.
    assert_eq!(repo.events_named("stuck", "round.started").len(), 2);
    let st = repo.status_json("stuck");
    assert_eq!(st["final_status"], "stalled");
    assert_eq!(st["best"]["metric"].as_f64(), Some(10.0));
    assert_eq!(rev(&repo, "conference/stuck/best"), rev(&repo, "main"));
    assert_eq!(repo.events_named("stuck", "conference.completed").len(), 1);
}

#[test]
fn pause_every_exits_3_and_resume_continues() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Pause", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    let run = repo.start("pause", &config);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("resume"), "{}", run.stdout);
    let st = repo.status_json("pause");
    assert_eq!(st["status"], "paused");
    assert_eq!(st["round"], 1);
    assert_eq!(repo.events_named("pause", "conference.paused").len(), 1);
    assert!(repo
        .events_named("pause", "conference.completed")
        .is_empty());
    assert_eq!(
        repo.show("conference/pause/best", "value.txt")
            .unwrap()
            .trim(),
        "9"
    );
    // A paused conference's report is built from where it stands.
    let out = repo.tmp.path().join("paused-report");
    repo.conference(&["report", "pause", "--output", out.to_str().unwrap()])
        .ok();
    for f in [
        "synthesis.md",
        "final_report.md",
        "poster_session_round_1.md",
        "peer_review_round_1.md",
    ] {
        assert!(
            out.join(f).is_file(),
            "{f} missing from the paused conference's report"
        );
    }
    // Reading it recorded nothing.
    assert_eq!(repo.events_named("pause", "conference.completed").len(), 0);

    let run = repo.conference(&["resume", "pause"]).ok();
    assert!(run.stdout.contains("pause"), "{}", run.stdout);
    let names: Vec<String> = repo
        .events("pause")
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    let started: Vec<u64> = repo
        .events_named("pause", "round.started")
        .iter()
        .map(|e| e["payload"]["round"].as_u64().unwrap())
        .collect();
    assert_eq!(started, vec![1, 2], "{names:?}");
    assert_eq!(repo.events_named("pause", "conference.resumed").len(), 1);
    assert_eq!(
        names.last().map(String::as_str),
        Some("conference.completed")
    );
    let st = repo.status_json("pause");
    assert_eq!(st["status"], "completed");
    assert_eq!(st["best"]["metric"].as_f64(), Some(8.0));
    assert_eq!(
        repo.show("conference/pause/best", "value.txt")
            .unwrap()
            .trim(),
        "8"
    );
}

#[test]
fn slow_evaluations_time_out_infinite_metrics_crash_and_frozen_globs_reject() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Slow", "./agents/seq.sh slow inf edit-agent improve")
        .iterations(4)
        .frozen("eval.sh, agents/**")
        .build()
        .replace("- timeout: 30s\n- frozen", "- timeout: 2s\n- frozen");
    let started = std::time::Instant::now();
    repo.start("slow", &config).ok();
    assert!(started.elapsed().as_secs() < 60);
    let got: Vec<String> = verdicts(&repo, "slow", "A")
        .into_iter()
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(got, ["timeout", "crashed", "rejected", "kept"]);
    assert!(
        !still_running(&repo, "eval-sleep.pid"),
        "the timed-out evaluation's child still runs"
    );
    let its = iterations(&repo, "slow");
    assert!(its[0]["payload"]["metric_value"].is_null());
    assert!(its[1]["payload"]["metric_value"].is_null());
    assert!(
        its[2]["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("agents/improve.sh"),
        "{}",
        its[2]
    );
    let evaluated: Vec<String> = eval_log(&repo)
        .into_iter()
        .filter(|l| l.starts_with("A "))
        .collect();
    assert_eq!(evaluated, ["A 1 1 slow", "A 1 2 inf", "A 1 4 9"]);
    let wt = repo.worktree("slow", "researcher-A");
    assert_eq!(repo.git_in(&wt, &["status", "--porcelain"]), "");
    assert_eq!(
        repo.show("conference/slow/best", "value.txt")
            .unwrap()
            .trim(),
        "9"
    );
}

/// Cache entries are written in batches; a kill before a batch is written loses none: resume
/// rebuilds them from the iteration events, so the tree is still evaluated once, and the entry
/// ends up in the state tree.
#[test]
fn a_kill_before_the_cache_batch_is_written_loses_no_entry() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Same", "./agents/seq.sh same")
        .iterations(4)
        .build();
    repo.write("conference.md", &config);
    let killed = repo
        .command("git")
        .args(["conference", "start", "same"])
        .env("GIT_CONFERENCE_FAILPOINT", "event.researcher.iteration:2")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        killed.status.code(),
        Some(137),
        "the failpoint kills the run (git reports 128 + 9)"
    );
    let events = "refs/conference/same/events";
    let cached = || repo.git(&["ls-tree", "-r", "--name-only", events, "evaluations/"]);
    let tree = iterations(&repo, "same")[0]["payload"]["tree"]
        .as_str()
        .unwrap()
        .to_string();
    let entry_name = format!("{}/{}", &tree[..2], &tree[2..]);
    assert!(
        !cached().contains(&entry_name),
        "the entry waits for a batch (the kill came first): {}",
        cached()
    );
    repo.conference(&["resume", "same"]).ok();
    assert_eq!(iterations(&repo, "same").len(), 4);
    let evaluated: Vec<String> = eval_log(&repo)
        .into_iter()
        .filter(|l| l.starts_with("A "))
        .collect();
    assert_eq!(
        evaluated,
        ["A 1 1 20"],
        "the same tree was evaluated again after the resume"
    );
    let entry = cached()
        .lines()
        .find(|l| l.ends_with(&entry_name))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no cache entry for {tree}: {}", cached()));
    let result: Value =
        serde_json::from_str(&repo.git(&["show", &format!("{events}:{entry}")])).unwrap();
    assert_eq!(
        (result["status"].as_str(), result["metric"].as_f64()),
        (Some("ok"), Some(20.0))
    );
}

#[test]
fn same_tree_from_two_researchers_is_evaluated_once() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Twins", "./agents/seq.sh same")
        .count(2)
        .iterations(1)
        .build();
    repo.start("twins", &config).ok();
    let got: Vec<String> = iterations(&repo, "twins")
        .iter()
        .map(|e| e["payload"]["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, ["reverted", "reverted"]);
    let evaluated: Vec<String> = eval_log(&repo)
        .into_iter()
        .filter(|l| l.ends_with(" 20"))
        .collect();
    assert_eq!(
        evaluated.len(),
        1,
        "DESIGN §4: nothing is evaluated twice for the same tree: {evaluated:?}"
    );
}

#[test]
fn stop_rules_target_plateau_and_iteration_budget() {
    // Target reached → converged, as soon as a round's best reaches it.
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Target", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(5)
        .build()
        .replace("- **Target:** none", "- **Target:** 8");
    repo.start("target", &config).ok();
    let st = repo.status_json("target");
    assert_eq!(
        (st["final_status"].as_str(), st["round"].as_u64()),
        (Some("converged"), Some(2)),
        "{st}"
    );
    assert_eq!(repo.events_named("target", "conference.converged").len(), 1);
    assert_eq!(st["best"]["metric"].as_f64(), Some(8.0));

    // No progress for 2 rounds → converged (plateau), long before max rounds.
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Plateau", "./agents/seq.sh nochange")
        .iterations(1)
        .rounds(6)
        .build();
    repo.start("plateau", &config).ok();
    let st = repo.status_json("plateau");
    assert_eq!(
        (st["final_status"].as_str(), st["round"].as_u64()),
        (Some("converged"), Some(2)),
        "{st}"
    );
    assert!(
        st["stop_reason"].as_str().unwrap().contains("plateau"),
        "{st}"
    );

    // Max total iterations → budget stop, mid-round.
    let repo = TestRepo::from_fixture("loop");
    let mut config = ConfigBuilder::new("Budget", "./agents/seq.sh improve")
        .iterations(5)
        .rounds(3);
    config.max_total_iterations = 2;
    repo.start("budget", &config.build()).ok();
    let st = repo.status_json("budget");
    assert_eq!(st["final_status"], "budget_stop", "{st}");
    assert_eq!(st["total_iterations"], 2);
    assert_eq!(iterations(&repo, "budget").len(), 2);
    assert!(
        st["stop_reason"]
            .as_str()
            .unwrap()
            .contains("max_total_iterations"),
        "{st}"
    );
    // What was found in the cut-short round still went through review and transfer.
    assert_eq!(st["best"]["metric"].as_f64(), Some(8.0));
}

#[test]
fn ctrl_c_mid_iteration_then_resume_finishes_without_repeating_a_round() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Interrupted", "./agents/seq.sh improve hang-once improve")
        .iterations(3)
        .agent_timeout("120s")
        .build();
    repo.write("conference.md", &config);
    let child = repo.start_until_the_agent_hangs("int");
    let status = repo
        .command("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("resume"), "{stderr}");
    assert!(
        !still_running(&repo, "agent-sleep.pid"),
        "Ctrl-C left the agent's child running"
    );
    assert_eq!(repo.status_json("int")["status"], "running");

    repo.conference(&["resume", "int"]).ok();
    let got: Vec<(u64, u64, String)> = verdicts(&repo, "int", "A");
    assert_eq!(
        got,
        vec![
            (1, 1, "kept".into()),
            (1, 2, "kept".into()),
            (1, 3, "kept".into())
        ],
        "{:?}",
        repo.event_subjects("int")
    );
    assert_eq!(repo.events_named("int", "round.started").len(), 1);
    assert_eq!(repo.events_named("int", "conference.resumed").len(), 1);
    // The half-done attempt (value 1) was set aside, reachable and noted, not dropped or kept.
    let set_aside = repo.events_named("int", "attempt.interrupted");
    assert_eq!(set_aside.len(), 1, "{:?}", repo.event_subjects("int"));
    let commit = set_aside[0]["payload"]["commit"].as_str().unwrap();
    assert_eq!(repo.show(commit, "value.txt").unwrap().trim(), "1");
    assert!(repo
        .git(&["rev-list", "refs/conference/int/attempts"])
        .contains(commit));
    assert!(repo
        .notes(commit)
        .iter()
        .any(|n| n["verdict"] == "interrupted"));
    assert_eq!(
        repo.show("conference/int/best", "value.txt")
            .unwrap()
            .trim(),
        "7"
    );
    let wt = repo.worktree("int", "researcher-A");
    assert_eq!(repo.git_in(&wt, &["status", "--porcelain"]), "");
    assert_eq!(
        repo.events("int").last().unwrap()["event"],
        "conference.completed"
    );
}

/// An agent that creates a nested git repository (`git init`, `git clone`, a scaffolder) gets its
/// attempt rejected with a reason naming it, never committed as a gitlink; the revert removes it
/// (also when the agent staged it), and one inside an ignored folder (not part of the attempt)
/// too, and the loop goes on.
#[test]
fn a_nested_repository_is_rejected_and_removed() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new(
        "Nested",
        "./agents/seq.sh nested-repo nested-staged nested-ignored improve",
    )
    .iterations(4)
    .frozen("eval.sh, agents/**")
    .build();
    repo.start("nested", &config).ok();
    let got: Vec<String> = verdicts(&repo, "nested", "A")
        .into_iter()
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(got, ["rejected", "rejected", "kept", "kept"]);
    let its = iterations(&repo, "nested");
    for p in [&its[0]["payload"], &its[1]["payload"]] {
        let why = p["reason"].as_str().unwrap_or_default();
        assert!(
            why.contains("nested git repository")
                && why.contains("sub/")
                && why.contains("lib/vendor/"),
            "{p}"
        );
        // The attempt is recorded (its commit holds value.txt) with no gitlink in it.
        let commit = p["commit"].as_str().expect("the attempt has a commit");
        let tree = repo.git(&["ls-tree", "-r", commit]);
        assert!(!tree.contains("160000") && !tree.contains("sub"), "{tree}");
        assert!(tree.contains("value.txt"));
        assert_eq!(repo.notes(commit)[0]["verdict"], "rejected");
    }
    let wt = repo.worktree("nested", "researcher-A");
    assert!(!wt.join("sub").exists() && !wt.join("lib").exists());
    assert!(
        !wt.join("build").exists(),
        "a nested repository in an ignored folder goes with the revert, like any ignored leftover"
    );
    let status = repo.run_in(&wt, "git", &["status", "--porcelain"]).ok();
    assert_eq!(status.stdout, "");
    // Nothing of it reached a branch.
    for branch in ["conference/nested/researcher-A", "conference/nested/best"] {
        let tree = repo.git(&["ls-tree", "-r", branch]);
        assert!(!tree.contains("160000") && !tree.contains("sub/"), "{tree}");
    }
    repo.git(&["fsck", "--no-progress"]);
}

/// A run killed right after an agent made a nested repository: resume sets the partial attempt
/// aside, removes the nested repository and finishes.
#[test]
fn resume_recovers_a_worktree_holding_a_nested_repository() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Nested kill", "./agents/seq.sh nested-repo improve")
        .iterations(2)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    let killed = repo
        .command("git")
        .args(["conference", "start", "nk"])
        .env("GIT_CONFERENCE_FAILPOINT", "agent.finished:1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), Some(137));
    let wt = repo.worktree("nk", "researcher-A");
    assert!(
        wt.join("sub/.git").exists(),
        "the kill left the nested repository"
    );
    let resumed = repo.conference(&["resume", "nk"]).ok();
    assert!(
        !wt.join("sub").exists() && !wt.join("lib").exists(),
        "{}",
        resumed.stderr
    );
    // Moved aside with its history, not deleted, and the user is told where.
    assert!(
        resumed.stderr.contains("nested git repository sub/"),
        "{}",
        resumed.stderr
    );
    let set_aside = repo.git_dir().join("conference/nk/set-aside");
    let kept = std::fs::read_dir(&set_aside)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(kept.join("sub/.git").exists(), "{}", kept.display());
    assert_eq!(
        repo.status_json("nk")["status"],
        "completed",
        "{}",
        resumed.stderr
    );
    let interrupted = repo.events_named("nk", "attempt.interrupted");
    assert_eq!(
        interrupted.len(),
        1,
        "the partial value.txt change is set aside"
    );
    let commit = interrupted[0]["payload"]["commit"].as_str().unwrap();
    assert!(!repo.git(&["ls-tree", "-r", commit]).contains("160000"));
    repo.git(&["fsck", "--no-progress"]);
}

/// The metric is read from what a real evaluation prints: coloured, pretty-printed JSON with the
/// key in another case; a metric printed in a form that cannot be read stops at the baseline
/// with the line named, instead of taking an unrelated number.
#[test]
fn metric_forms_through_a_real_evaluation() {
    let repo = TestRepo::from_fixture("loop");
    let eval = "#!/bin/sh\nv=$(cat value.txt)\nprintf 'training\\n\\033[32m{\\n  \"Score\": %s,\\n  \"acc\": 0.9\\n}\\033[0m\\nelapsed 12.5 s\\n' \"$v\"\n";
    repo.write_executable("eval.sh", eval);
    repo.commit_all("pretty JSON eval");
    let config = ConfigBuilder::new("Forms", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.start("forms", &config).ok();
    let baseline = repo.events_named("forms", "baseline.measured");
    assert_eq!(baseline[0]["payload"]["metric_value"].as_f64(), Some(10.0));
    let its = iterations(&repo, "forms");
    assert_eq!(its[0]["payload"]["metric_value"].as_f64(), Some(9.0));
    assert_eq!(its[0]["payload"]["sub_metrics"]["acc"].as_f64(), Some(0.9));

    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\necho 'score: 1,234'\necho 'elapsed 12.5 s'\n",
    );
    repo.commit_all("ambiguous eval");
    let run = repo.start("amb", &config.replace("Forms", "Amb"));
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("score: 1,234") && run.stderr.contains("cannot be read"),
        "{}",
        run.stderr
    );
    assert!(repo.events_named("amb", "baseline.measured").is_empty());
}

/// A metric printed twice with different values is a crash naming both (the same value twice
/// is one reading), and a metric line with bytes that are not text is quoted escaped wherever
/// it is stored or shown: events, notes, `log`, `status`, the report.
#[test]
fn a_metric_printed_twice_or_not_as_text_is_a_crash_said_plainly() {
    let repo = TestRepo::from_fixture("loop");
    repo.write("out.txt", "score: 10\n");
    repo.write_executable("eval.sh", "#!/bin/sh\ncat out.txt\n");
    repo.write_executable(
        "agent.sh",
        "#!/bin/sh\ncase \"$CONFERENCE_ITERATION\" in\n\
         1) printf 'score: 3\\nscore: 100\\n' >out.txt ;;\n\
         2) printf 'score: 3\\377\\007\\001 x\\n' >out.txt ;;\n\
         *) printf 'step 1\\nscore: 9\\nscore=9.0\\n' >out.txt ;;\n\
         esac\n",
    );
    repo.commit_all("an evaluation that prints what the agent wrote");
    let config = ConfigBuilder::new("Twice", "./agent.sh")
        .iterations(3)
        .frozen("eval.sh, agent.sh, agents/**")
        .build();
    repo.start("twice", &config).ok();
    let its = iterations(&repo, "twice");
    let verdicts: Vec<&str> = its
        .iter()
        .map(|e| e["payload"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["crashed", "crashed", "kept"], "{its:#?}");
    let twice = its[0]["payload"]["reason"].as_str().unwrap();
    assert!(
        twice.starts_with("metric score printed twice with different values: 3 and 100"),
        "{twice}"
    );
    let bytes = its[1]["payload"]["reason"].as_str().unwrap();
    assert!(
        bytes.contains("`score: 3\\xff\\x07\\x01 x`"),
        "escaped, not raw: {bytes:?}"
    );
    assert_eq!(its[2]["payload"]["metric_value"].as_f64(), Some(9.0));
    // Stored escaped: the note, and everything that shows it.
    let commit = its[1]["payload"]["commit"].as_str().unwrap();
    let shown = [
        repo.git(&["notes", "--ref", "conference", "show", commit]),
        repo.conference(&["log", "twice"]).ok().stdout,
        repo.conference(&["status", "twice"]).ok().stdout,
        {
            let out = repo.tmp.path().join("report");
            repo.conference(&["report", "twice", "--output", out.to_str().unwrap()])
                .ok();
            std::fs::read_to_string(out.join("final_report.md")).unwrap()
        },
    ];
    for (what, text) in ["note", "log", "status", "report"].iter().zip(&shown) {
        assert!(
            !text.contains(['\u{7}', '\u{1}', '\u{fffd}']),
            "{what} holds raw bytes: {text:?}"
        );
    }
    assert!(shown[0].contains(r"3\\xff\\x07\\x01 x"), "{}", shown[0]);
    assert!(shown[1].contains(r"3\xff\x07\x01 x"), "{}", shown[1]);
    assert!(
        shown[1].contains("printed twice with different values: 3 and 100"),
        "{}",
        shown[1]
    );
}

/// The write end of a pipe whose reader is already gone (what `| head` leaves once head exits).
fn closed_pipe() -> std::process::Stdio {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) into a two-element array; the read end is closed at once, the write end
    // is owned by the returned Stdio.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        std::process::Stdio::from(std::os::fd::OwnedFd::from_raw_fd(fds[1]))
    }
}

/// `git conference log | head` and `status | head`: a closed stdout ends a read-only command
/// quietly (as git: SIGPIPE, no message, no panic); a conference whose stdout and stderr are
/// closed pipes (`start 2>&1 | head -1`) still runs to the end and exits 0.
#[test]
fn a_closed_pipe_is_not_an_error() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Pipe", "./agents/seq.sh improve")
        .iterations(2)
        .build();
    repo.write("conference.md", &config);
    let run = repo
        .command("git")
        .args(["conference", "start", "pipe"])
        .stdin(std::process::Stdio::null())
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(run.code(), Some(0), "start with closed pipes: {run:?}");
    assert!(repo
        .event_subjects("pipe")
        .iter()
        .any(|s| s.starts_with("conference.completed")));

    for args in [
        &["log", "pipe"][..],
        &["log", "pipe", "--format", "jsonl"],
        &["log", "pipe", "--format", "tsv"],
        &["status", "pipe"],
        &["status", "pipe", "--format", "json"],
        &["list"],
    ] {
        let out = repo
            .command("git")
            .arg("conference")
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(closed_pipe())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // git reports a child killed by SIGPIPE as 128 + 13, and prints nothing for it.
        assert!(
            matches!(out.status.code(), Some(0) | Some(141)),
            "{args:?}: {:?} {stderr}",
            out.status
        );
        assert_eq!(stderr, "", "{args:?}");
    }
    // Through a real shell pipe, as a user types it.
    let out = repo.run_in(
        &repo.dir,
        "sh",
        &[
            "-c",
            "git conference log pipe | head -1; git conference status pipe | head -1",
        ],
    );
    assert_eq!(out.code, 0);
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
}

/// A hook that hangs cannot hold up the conference: it runs in its own process group with its
/// output in the run's logs (not on the conference's stderr, which `start 2>&1 | tee` would keep
/// open), and past `conference.hookTimeout` its whole group is killed and reported. A hook file
/// that is not executable is reported once.
#[test]
fn a_hanging_hook_is_killed_at_its_time_limit_and_a_non_executable_one_is_reported() {
    let repo = TestRepo::from_fixture("loop");
    repo.git(&["config", "conference.hookTimeout", "2s"]);
    repo.write_executable(
        ".git/conference/hooks/conference.started",
        "#!/bin/sh\necho hook says hello\necho hook complains >&2\nsleep 600 &\necho $! >\"$(git rev-parse --git-common-dir)/hook-sleep.pid\"\nwait\n",
    );
    repo.write(
        ".git/conference/hooks/round.started",
        "#!/bin/sh\necho never runs\n",
    );
    let config = ConfigBuilder::new("Hook time", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(2)
        .build();
    repo.write("conference.md", &config);
    let started = std::time::Instant::now();
    // Both streams are pipes read to their end, as `| tee` reads them.
    let run = repo.conference(&["start", "hooktime"]);
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(took.as_secs() < 20, "start took {took:?}");
    assert!(
        !still_running(&repo, "hook-sleep.pid"),
        "the hook's child outlived its time limit"
    );
    assert!(
        run.stderr.contains("conference.started")
            && run.stderr.contains("conference.hookTimeout")
            && run.stderr.contains("killed"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("hook complains") && !run.stdout.contains("hook says hello"),
        "the hook's output leaked: {}{}",
        run.stdout,
        run.stderr
    );
    let log = repo.git_dir_file("conference/hooktime/logs/hook-conference.started.log");
    assert!(
        log.contains("hook says hello") && log.contains("hook complains"),
        "{log}"
    );
    let hints: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("round.started") && l.contains("not set as executable"))
        .collect();
    assert_eq!(hints.len(), 1, "{}", run.stderr);
    assert_eq!(repo.events_named("hooktime", "round.started").len(), 2);

    // git's switch for that hint silences it.
    repo.git(&["config", "advice.ignoredHook", "false"]);
    std::fs::remove_file(repo.git_dir().join("conference/hooks/conference.started")).unwrap();
    let run = repo.start("quiet-hint", &config.replace("Hook time", "Quiet hint"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stderr.contains("not set as executable"),
        "{}",
        run.stderr
    );
}

/// An agent program that is not installed stops `start` before the baseline with exit 2 (the
/// seed's `claude -p …` without claude); one hidden in a shell construct stops the conference at
/// its first run with the same kind of error, instead of crashing every attempt.
#[test]
fn a_missing_agent_program_stops_the_conference_at_once() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new(
        "Missing",
        "no-such-agent-xyz -p \"$(cat \"$CONFERENCE_PROMPT_FILE\")\" --permission-mode acceptEdits",
    )
    .iterations(6)
    .build();
    let run = repo.start("missing", &config);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`no-such-agent-xyz`") && run.stderr.contains("PATH"),
        "{}",
        run.stderr
    );
    assert!(eval_log(&repo).is_empty(), "the baseline was measured");
    assert_eq!(
        repo.git(&["for-each-ref", "refs/conference", "refs/heads/conference"]),
        ""
    );

    let config = ConfigBuilder::new("Hidden", "cd . && no-such-agent-xyz --go")
        .count(2)
        .iterations(6)
        .build();
    let run = repo.start("hidden", &config);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("no-such-agent-xyz: not found") && run.stderr.contains("resume"),
        "{}",
        run.stderr
    );
    let attempts = iterations(&repo, "hidden").len();
    assert_eq!(
        attempts, 0,
        "no attempt is recorded for a configuration error"
    );
}

/// Uncommitted edits to a frozen harness file are not what the conference evaluates: `start`
/// says so, naming the files.
#[test]
fn uncommitted_frozen_edits_are_named_at_start() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Dirty", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("eval.sh", &(repo.read("eval.sh") + "# edited\n"));
    repo.write("agents/new.sh", "#!/bin/sh\n");
    let run = repo.start("dirty", &config).ok();
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:") && l.contains("frozen"))
        .collect();
    assert_eq!(warnings.len(), 2, "{}", run.stderr);
    assert!(warnings.iter().any(|l| l.contains("eval.sh")));
    assert!(warnings.iter().any(|l| l.contains("agents/new.sh")));
    // Not about a file that is not frozen.
    let repo = TestRepo::from_fixture("loop");
    repo.write("value.txt", "12\n");
    let run = repo.start("clean", &config.replace("Dirty", "Clean")).ok();
    assert!(
        !run.stderr.contains("warning: your uncommitted"),
        "{}",
        run.stderr
    );
}

/// `apply` over a branch that diverged from the baseline: a conflict is found before anything is
/// touched and refused with the file named; a merge that stops midway (a failing
/// pre-merge-commit hook) is aborted with git's reason shown; a clean divergence merges.
#[test]
fn apply_refuses_a_conflict_and_never_leaves_a_merge_half_done() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Apply", "./agents/seq.sh improve")
        .iterations(2)
        .build();
    repo.start("apply", &config).ok();
    let untouched = |repo: &TestRepo, head: &str| {
        assert_eq!(rev(repo, "HEAD"), head);
        assert_eq!(repo.git(&["status", "--porcelain"]), "");
        assert!(!repo.git_dir().join("MERGE_HEAD").exists());
    };

    // The user's branch changed value.txt too.
    repo.write("value.txt", "3\n");
    repo.commit_all("mine");
    let head = rev(&repo, "HEAD");
    let run = repo.conference(&["apply", "apply", "--yes"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("value.txt") && run.stderr.contains("conflict"),
        "{}",
        run.stderr
    );
    untouched(&repo, &head);

    // A clean divergence, but a hook stops the merge midway: aborted, with the hook's words.
    repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
    repo.write("notes.txt", "mine\n");
    repo.commit_all("mine, elsewhere");
    let head = rev(&repo, "HEAD");
    repo.write_executable(
        ".git/hooks/pre-merge-commit",
        "#!/bin/sh\necho hook says no >&2\nexit 1\n",
    );
    let run = repo.conference(&["apply", "apply", "--yes"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("hook says no") && run.stderr.contains("aborted"),
        "{}",
        run.stderr
    );
    untouched(&repo, &head);

    std::fs::remove_file(repo.git_dir().join("hooks/pre-merge-commit")).unwrap();
    repo.conference(&["apply", "apply", "--yes"]).ok();
    let parents = repo.git(&["rev-list", "--parents", "-n", "1", "HEAD"]);
    let best = rev(&repo, "conference/apply/best");
    assert_eq!(
        parents.split_whitespace().skip(1).collect::<Vec<_>>(),
        [head.as_str(), best.as_str()]
    );
    assert_eq!(repo.read("value.txt"), "8\n");
    assert_eq!(repo.read("notes.txt"), "mine\n");
}

/// `init` on a terminal asks again, with the reason, when an answer is not valid ("zero"
/// researchers, "maybe" for yes/no), instead of exiting.
#[test]
fn init_on_a_terminal_asks_again_after_an_invalid_answer() {
    let repo = TestRepo::from_fixture("loop");
    // count, devil's advocate, unattended, strategy: each wrong once, then right; then the
    // metric, its direction and the agent: the defaults; Frozen: value.txt, which is not taken
    // while Allowed changes (--allowed) has it too, then the default (eval.sh).
    let out = repo.conference_on_a_terminal(
        &["init", "--eval", "./eval.sh", "--allowed", "value.txt"],
        b"zero\n0\n2\nmaybe\nyes\nsometimes\nno\nx\n2\nboth\nassigned\n\n\n\nvalue.txt\n\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for reason in [
        "`zero` is not a whole number",
        "at least 1",
        "`maybe`: answer yes or no",
        "`sometimes`: answer yes or no",
        "`x` is not a whole number of rounds",
        "strategy `both`",
        "`value.txt` is in Allowed changes too",
    ] {
        assert!(stderr.contains(reason), "no `{reason}` in\n{stderr}");
    }
    assert_eq!(stderr.matches("try again").count(), 7, "{stderr}");
    let text = repo.read("conference.md");
    for setting in [
        "- **Count:** 2",
        "**Strategy:** assigned",
        "- **Pause every:** 2",
        "- **Frozen:** eval.sh",
    ] {
        assert!(text.contains(setting), "{setting} missing:\n{text}");
    }
    assert!(
        text.contains("- **Critic / Devil's Advocate:** enabled"),
        "{text}"
    );
}

/// Refs an agent leaves in the user's repository (a stash entry, a branch, a tag) are named in a
/// warning with the researcher, each change once, and undone; the conference's own branches
/// are not named.
#[test]
fn refs_an_agent_leaves_in_the_repository_are_reported() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Traces", "./agents/seq.sh traces improve")
        .iterations(2)
        .frozen("eval.sh, agents/**")
        .build();
    let run = repo.start("traces", &config).ok();
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: researcher A's agent: "))
        .collect();
    assert_eq!(warnings.len(), 3, "{}", run.stderr);
    for (what, done) in [
        ("refs/heads/agent-made was created", "removed"),
        ("refs/tags/agent-tag was created", "removed"),
        ("refs/stash was created", "dropped"),
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(what) && w.ends_with(done)),
            "{what}: {}",
            run.stderr
        );
    }
    assert!(
        !run.stderr.contains("refs/heads/conference/"),
        "{}",
        run.stderr
    );
    // Undone, and the attempt itself counted.
    assert_eq!(repo.git(&["stash", "list"]), "");
    assert_eq!(repo.git(&["branch", "--list", "agent-made"]), "");
    assert_eq!(repo.git(&["tag", "--list", "agent-tag"]), "");
    assert_eq!(verdicts(&repo, "traces", "A")[0].2, "kept");
}

/// What the user does in their own worktree while an agent runs (a commit on their branch, a
/// new branch, a remote added) is not blamed on the agent, named or undone.
#[test]
fn the_users_own_commits_during_a_run_are_not_blamed_on_agents() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("User works", "./agents/seq.sh wait-for-user")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    repo.commit_all("conference");
    let child = repo.start_until("user-works", "agent-waiting");
    repo.write("notes.txt", "the user's own work\n");
    repo.commit_all("the user's own commit");
    repo.git(&["branch", "user-other"]);
    repo.git(&["remote", "add", "upstream", "../upstream.git"]);
    std::fs::write(repo.git_dir().join("user-done"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("refs/heads/main"), "{stderr}");
    assert!(!stderr.contains("user-other"), "{stderr}");
    assert_eq!(
        repo.git(&["branch", "--list", "user-other"]).trim(),
        "user-other"
    );
    assert!(repo
        .git(&["log", "-1", "--format=%s", "main"])
        .contains("the user's own commit"));
    // The remote the user added meanwhile stays, and the agent is not charged for it.
    assert_eq!(repo.git(&["remote"]).trim(), "upstream");
    assert_eq!(verdicts(&repo, "user-works", "A")[0].2, "kept", "{stderr}");
}
