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

/// Every note in refs/notes/conference, as text.
fn all_notes(repo: &TestRepo) -> String {
    repo.git(&["notes", "--ref=conference", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|commit| repo.git(&["notes", "--ref=conference", "show", commit]))
        .collect()
}

/// The reason of researcher `id`'s first attempt in round `round`.
fn first_attempt(repo: &TestRepo, name: &str, id: &str, round: u64) -> serde_json::Value {
    repo.events_named(name, "researcher.iteration")
        .into_iter()
        .map(|e| e["payload"].clone())
        .find(|p| p["researcher"] == id && p["round"] == round)
        .unwrap_or_else(|| panic!("no attempt of {id} in round {round}"))
}

/// The conference of the B-git_notes cases: two researchers, two rounds of one iteration;
/// researcher A's agent forges a note in round 1 (and deletes the notes ref at the instant the
/// runner moves it, with `delete`).
fn forged_notes_run(flavour: &str) -> (TestRepo, common::Run) {
    let repo = TestRepo::from_fixture("loop");
    let pause = repo.tmp.path().join("pause");
    let config = ConfigBuilder::new(
        "Notes",
        &agent("git-notes.sh", &format!("{} {flavour}", pause.display())),
    )
    .count(2)
    .iterations(1)
    .rounds(2)
    .frozen("eval.sh, agents/**")
    .build();
    let run = start_pausing(&repo, "notes", &config, "note.before-ref");
    (repo, run)
}

/// Starts conference `name` of `config` with the pausing failpoint `point` (its folder is
/// `pause` in the test's temporary folder, where the agent script arms it).
fn start_pausing(repo: &TestRepo, name: &str, config: &str, point: &str) -> common::Run {
    let pause = repo.tmp.path().join("pause");
    std::fs::create_dir_all(&pause).unwrap();
    repo.write("conference.md", config);
    let failpoint = format!("{point}:pause={}", pause.display());
    repo.conference_env(
        &["start", name],
        &[("GIT_CONFERENCE_FAILPOINT", failpoint.as_str())],
    )
}

/// B-git_notes: an agent writes a forged note and deletes `refs/notes/conference` just as the
/// runner moves it (another researcher's note going in). The run went on (it stopped with a
/// wrong "objects gone (git gc --prune=now?)" before): the attempt is rejected with that
/// reason, the notes ref is put back with every verdict, and the forged one is read nowhere.
#[test]
fn b_git_notes_a_forged_note_and_a_deleted_notes_ref_reject_the_attempt() {
    let (repo, run) = forged_notes_run("delete");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(repo.status_json("notes")["status"], "completed");
    let a = first_attempt(&repo, "notes", "A", 1);
    assert_eq!(a["status"], "rejected", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("deleted refs/notes/conference: put back"),
        "{reason}"
    );
    assert_eq!(first_attempt(&repo, "notes", "B", 1)["status"], "kept");
    assert_eq!(first_attempt(&repo, "notes", "A", 2)["status"], "kept");
    let notes = all_notes(&repo);
    assert!(!notes.contains("forged"), "{notes}");
    // Every attempt's verdict is in the notes, B's of round 1 among them.
    for e in repo.events_named("notes", "researcher.iteration") {
        let commit = e["payload"]["commit"].as_str().unwrap();
        assert!(
            !repo.notes(commit).is_empty(),
            "no note on {commit}: {notes}"
        );
    }
    repo.git(&["fsck", "--no-progress"]);
}

/// B-git_notes, without the deletion: notes commits an agent puts on top of the conference's
/// (its git commands commit in the researcher's name) are taken off again, and the attempt is
/// rejected with that reason.
#[test]
fn b_git_notes_a_forged_note_on_top_of_the_notes_is_taken_off() {
    let (repo, run) = forged_notes_run("");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let a = first_attempt(&repo, "notes", "A", 1);
    assert_eq!(a["status"], "rejected", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("wrote 1 notes commit(s) of its own to refs/notes/conference")
            && reason.contains("put back"),
        "{reason}"
    );
    let notes = all_notes(&repo);
    assert!(!notes.contains("forged"), "{notes}");
}

/// Whether process `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Waits (a minute at most) until none of `pids` runs; returns those still running.
fn wait_until_dead(pids: &[i32]) -> Vec<i32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let running: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if running.is_empty() || std::time::Instant::now() > deadline {
            return running;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A4: a runner killed with `kill -9` takes its agent with it — the agent, a child that stayed
/// in its process group and one that left it (`setsid`) — at once, not at the next `resume`
/// (they went on writing into the worktree until then, past the agent's own timeout). `resume`
/// then finishes the conference.
#[test]
fn a4_an_agent_dies_with_its_runner_killed_with_kill_9() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Outlives", &agent("outlives.sh", ""))
        .iterations(1)
        .agent_timeout("5m")
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    let runner = repo.start_until("outlives", "agent.pids");
    let pids: Vec<i32> = repo
        .git_dir_file("agent.pids")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    let watchdog = || {
        let out = std::process::Command::new("pgrep")
            .args(["-f", &format!("__watchdog {}", repo.git_dir().display())])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let had_a_watchdog = !watchdog().is_empty();
    repo.kill_runner("outlives", runner);
    let running = wait_until_dead(&pids);
    assert!(
        running.is_empty(),
        "still running a minute after the runner was killed: {running:?}"
    );
    assert!(had_a_watchdog, "the runner had a watchdog");
    // Nothing writes any more.
    let log = repo.git_dir().join("alive.log");
    let before = std::fs::metadata(&log).unwrap().len();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(std::fs::metadata(&log).unwrap().len(), before);
    // The runner's watchdog is gone too, and `resume` finishes the conference; the resume's own
    // watchdog ends with it.
    let no_watchdog_left = || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !watchdog().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(watchdog(), "", "a watchdog outlived its runner");
    };
    no_watchdog_left();
    repo.conference(&["resume", "outlives"]).ok();
    assert_eq!(repo.status_json("outlives")["status"], "completed");
    no_watchdog_left();
}

/// B-write_user_abs / B-write_user_rel: an agent that writes into the user's own working tree
/// (a new file by its absolute path; a file the user had already made, by a relative path) is
/// named in a warning and in the attempt's reason, every run, and nothing is undone: the
/// user's file keeps every line, the attempts are judged as usual.
#[test]
fn b_write_user_an_agent_writing_into_your_working_tree_is_reported() {
    for (how, file) in [("abs", "agent-notes.txt"), ("rel", "users-draft.py")] {
        let repo = TestRepo::from_fixture("loop");
        repo.write("users-draft.py", "# the user's work in progress\n");
        let config =
            ConfigBuilder::new("Writes", &agent("write-user.sh", &format!("{how} {file}")))
                .iterations(2)
                .frozen("eval.sh, agents/**")
                .build();
        let run = repo.start("writes", &config).ok();
        let warning =
            format!("warning: researcher A's agent changed your working tree ({file}); not undone");
        let named = run
            .stderr
            .lines()
            .filter(|l| l.starts_with(&warning))
            .count();
        assert_eq!(named, 2, "{how}, once per run:\n{}", run.stderr);
        for e in repo.events_named("writes", "researcher.iteration") {
            let reason = e["payload"]["reason"].as_str().unwrap_or_default();
            let remark = format!("changed your working tree ({file}), not undone");
            assert!(reason.contains(&remark), "{how}: {reason}");
        }
        assert_eq!(verdicts(&repo, "writes", "A"), ["kept", "kept"], "{how}");
        let text = std::fs::read_to_string(repo.dir.join(file)).unwrap();
        assert_eq!(
            text.matches("written by the agent").count(),
            2,
            "{how}: {text}"
        );
    }
}

/// B-write_other: researcher A's agent writes a file into researcher B's worktree (by a
/// relative path) between B's runs. That leaked into B's next attempt without a word before;
/// now that attempt is rejected with a reason naming A, a warning says so, the file is put back
/// (gone from B's worktree), and nothing of it reaches the best branch.
#[test]
fn b_write_other_a_write_into_anothers_worktree_rejects_that_attempt() {
    let repo = TestRepo::from_fixture("loop");
    let pause = repo.tmp.path().join("pause");
    let config = ConfigBuilder::new(
        "Other",
        &agent("write-other.sh", &pause.display().to_string()),
    )
    .count(2)
    .iterations(2)
    .frozen("eval.sh, agents/**")
    .build();
    let run = start_pausing(&repo, "other", &config, "worktree.put-back");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!pause.join("armed").exists() && !pause.join("paused").exists());
    assert_eq!(verdicts(&repo, "other", "B"), ["kept", "rejected"]);
    let second = repo
        .events_named("other", "researcher.iteration")
        .into_iter()
        .map(|e| e["payload"].clone())
        .find(|p| p["researcher"] == "B" && p["iteration"] == 2)
        .unwrap();
    let reason = second["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("researcher A's agent wrote into this worktree (from-a.txt)"),
        "{reason}"
    );
    assert!(
        run.stderr.contains(
            "warning: researcher B's worktree was written into while its agent was not running (from-a.txt), by researcher A's agent"
        ),
        "{}",
        run.stderr
    );
    assert!(!repo
        .worktree("other", "researcher-B")
        .join("from-a.txt")
        .exists());
    let best = repo.git(&["ls-tree", "-r", "--name-only", "conference/other/best"]);
    assert!(!best.contains("from-a.txt"), "{best}");
}
