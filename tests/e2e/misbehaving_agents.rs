//! The misbehaving-agents catalogue (issue #14): one fixture script per behaviour under
//! `tests/data/misbehaving/`, one line per behaviour below. Each row runs a real conference
//! (one researcher, two iterations) whose agent misbehaves on iteration 1 and makes a plain
//! improvement on iteration 2, then checks the first attempt's verdict and reason, that the
//! conference completed and went on, and that git is sane afterwards: `git fsck` clean, every
//! worktree `git worktree list` names present and clean (ignored files included), the
//! repository's config and event log as the conference left them, no process of the agent alive,
//! and every log within its size cap.

use crate::common;

use std::path::{Path, PathBuf};

use common::{ConfigBuilder, TestRepo};
use serde_json::Value;

/// One behaviour: its fixture, what the first attempt must be recorded as, and what else to
/// check.
struct Row {
    script: &'static str,
    verdict: &'static str,
    /// Must appear in the attempt's reason (empty: no reason required).
    reason: &'static str,
    /// The evaluation script in the fixtures folder, when not the repository's eval.sh.
    eval: Option<&'static str>,
    /// Extra lines for `## Evaluation`.
    eval_lines: &'static str,
    agent_timeout: &'static str,
}

const ROW: Row = Row {
    script: "",
    verdict: "",
    reason: "",
    eval: None,
    eval_lines: "",
    agent_timeout: "20s",
};

macro_rules! behaviours {
    ($($name:ident => $row:expr),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check(&$row);
            }
        )*
    };
}

behaviours! {
    hangs => Row { script: "hangs", verdict: "timeout", reason: "timeout", agent_timeout: "2s", ..ROW },
    crashes => Row { script: "crashes", verdict: "crashed", reason: "exit status 3", ..ROW },
    edits_a_frozen_file => Row { script: "edits-frozen", verdict: "rejected", reason: "eval.sh", ..ROW },
    leaves_garbage => Row { script: "leaves-garbage", verdict: "reverted", ..ROW },
    claims_success_without_a_change => Row { script: "claims-success", verdict: "no_change", ..ROW },
    leaves_a_setsid_child_writing => Row { script: "setsid-child", verdict: "reverted", ..ROW },
    leaves_a_daemon_writing => Row { script: "daemon-child", verdict: "reverted", ..ROW },
    hides_a_file_with_its_own_gitignore => Row { script: "hides-file", verdict: "reverted", ..ROW },
    deletes_its_worktree => Row { script: "deletes-worktree", verdict: "rejected", reason: "removed its worktree", ..ROW },
    removes_its_worktree_with_git => Row { script: "removes-worktree-registration", verdict: "rejected", reason: "removed its worktree", ..ROW },
    corrupts_its_git_link => Row { script: "corrupts-git-link", verdict: "rejected", reason: ".git link", ..ROW },
    moves_the_events_ref => Row { script: "moves-events-ref", verdict: "rejected", reason: "moved refs/conference/misbehaving/events", ..ROW },
    deletes_the_notes => Row { script: "deletes-notes", verdict: "rejected", reason: "deleted refs/notes/conference: put back", ..ROW },
    moves_the_best_branch => Row { script: "moves-best-branch", verdict: "rejected", reason: "moved refs/heads/conference/misbehaving/best", ..ROW },
    changes_git_config => Row { script: "changes-git-config", verdict: "rejected", reason: "core.hookspath = /tmp/agent-hooks", ..ROW },
    floods_its_output => Row { script: "floods-output", verdict: "no_change", ..ROW },
    metric_max_f64 => Row { script: "metric-max", verdict: "reverted", ..ROW },
    metric_overflowing_mean => Row { script: "metric-huge-negative", verdict: "crashed", reason: "not a finite number", eval_lines: "- repeats: 2\n", ..ROW },
    metric_minus_inf => Row { script: "metric-inf", verdict: "crashed", reason: "-inf", ..ROW },
    metric_nan => Row { script: "metric-nan", verdict: "crashed", reason: "nan", ..ROW },
    metric_garbage_named => Row { script: "metric-garbage", verdict: "crashed", reason: "cannot be read", ..ROW },
    metric_garbage_unnamed => Row { script: "metric-garbage", verdict: "crashed", reason: "not in the output", eval: Some("eval-raw.sh"), ..ROW },
}

const NAME: &str = "misbehaving";
/// The log cap of `src/exec/caps.rs`, with room for the line saying what was cut.
const LOG_CAP: u64 = (8 << 20) + 4096;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/misbehaving")
        .join(name)
}

fn check(row: &Row) {
    let repo = TestRepo::from_fixture("loop");
    let mut builder = ConfigBuilder::new(
        "Misbehaving",
        &format!("sh {} {}", fixture("run.sh").display(), row.script),
    )
    .iterations(2)
    .agent_timeout(row.agent_timeout);
    if let Some(eval) = row.eval {
        builder.eval = format!("sh {}", fixture(eval).display());
    }
    if !row.eval_lines.is_empty() {
        builder.eval = format!("{}\n{}", builder.eval, row.eval_lines.trim_end());
    }
    let config = builder.build();
    repo.write("conference.md", &config);
    let config_before = local_config(&repo);

    let run = repo.conference(&["start", NAME]);
    let context = format!("{}: {}\n{}", row.script, run.stdout, run.stderr);
    assert_eq!(run.code, 0, "{context}");
    assert_eq!(repo.status_json(NAME)["status"], "completed", "{context}");

    let iterations = repo.events_named(NAME, "researcher.iteration");
    assert_eq!(iterations.len(), 2, "the conference went on: {context}");
    let first: &Value = &iterations[0]["payload"];
    assert_eq!(first["status"], row.verdict, "{first}\n{context}");
    let reason = first["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(row.reason), "{reason:?}\n{first}");
    if !row.script.starts_with("metric-") {
        let second = &iterations[1]["payload"];
        assert_eq!(second["status"], "kept", "{second}\n{context}");
    }

    repo.git(&["fsck", "--no-progress"]);
    assert_eq!(
        local_config(&repo),
        config_before,
        "the local config is as it was"
    );
    let events = repo.git(&["rev-parse", &format!("refs/conference/{NAME}/events")]);
    assert!(
        repo.git(&["cat-file", "-p", events.trim()])
            .contains("conference"),
        "the event log ref is an event commit"
    );
    let state: Value = serde_json::from_str(
        &repo
            .show(&format!("refs/conference/{NAME}/events"), "state.json")
            .unwrap(),
    )
    .unwrap();
    let best = repo.git(&["rev-parse", &format!("conference/{NAME}/best")]);
    assert_eq!(
        best.trim(),
        state["best"]["commit"],
        "the best branch is the state's best"
    );
    worktrees_sane(&repo);
    every_note_present(&repo);
    no_agent_process_alive(&repo);
    logs_capped(&repo);
    // The report draws the progress chart from every recorded number, in bounded time.
    repo.conference(&["report", NAME]).ok();
}

/// Every registered worktree exists, and holds nothing but its checkout (no untracked or
/// ignored file except the agent's own folder).
fn worktrees_sane(repo: &TestRepo) {
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(!list.contains("prunable"), "{list}");
    for path in list.lines().filter_map(|l| l.strip_prefix("worktree ")) {
        let path = Path::new(path);
        assert!(
            path.join(".git").exists(),
            "{} is broken\n{list}",
            path.display()
        );
        if path == repo.dir.canonicalize().unwrap() || path == repo.dir {
            continue;
        }
        let status = repo
            .run_in(path, "git", &["status", "--porcelain", "--ignored"])
            .ok()
            .stdout;
        let stray: Vec<&str> = status
            .lines()
            .filter(|l| !l.ends_with(" .conference/"))
            .collect();
        assert!(stray.is_empty(), "{}: {stray:?}", path.display());
    }
}

/// Every verdict note an event recorded is in `refs/notes/conference`.
fn every_note_present(repo: &TestRepo) {
    let mut checked = 0;
    for event in repo.events(NAME) {
        for note in event["payload"]["notes"].as_array().into_iter().flatten() {
            let commit = note["commit"].as_str().unwrap();
            let shown = repo.git(&["notes", "--ref", "conference", "show", commit]);
            let lines: Vec<Value> = shown
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert!(
                lines.contains(note),
                "{note} is not in the notes of {commit}: {shown}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 3,
        "the baseline's and both attempts' notes were checked"
    );
}

/// A child the agent left (its pid in `child.pid`) is no longer running.
fn no_agent_process_alive(repo: &TestRepo) {
    let Ok(pid) = std::fs::read_to_string(repo.git_dir().join("child.pid")) else {
        return;
    };
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let running = stat
        .rsplit(')')
        .next()
        .is_some_and(|s| !s.trim_start().is_empty() && !s.trim_start().starts_with('Z'));
    assert!(
        !running,
        "the agent's child {} is still running",
        pid.trim()
    );
}

fn logs_capped(repo: &TestRepo) {
    let logs = repo.git_dir().join("conference").join(NAME).join("logs");
    let files = walk(&logs);
    assert!(files.len() >= 4, "the runs' logs are in {}", logs.display());
    for entry in files {
        let len = std::fs::metadata(&entry).unwrap().len();
        assert!(len <= LOG_CAP, "{} holds {len} bytes", entry.display());
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A runner killed while an agent that changed the git config still runs cannot check it; the
/// next `resume` puts the config back before anything runs, says so, and keeps the changed file.
#[test]
fn config_changed_by_an_agent_of_a_killed_runner_is_put_back_on_resume() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new(
        "Misbehaving",
        &format!(
            "sh {} changes-git-config-then-hangs",
            fixture("run.sh").display()
        ),
    )
    .iterations(2)
    .agent_timeout("5s")
    .build();
    repo.write("conference.md", &config);
    let config_before = local_config(&repo);
    let runner = repo.start_until_the_agent_hangs(NAME);
    assert!(repo.git_dir_file("config").contains("hooksPath"));
    repo.kill_runner(NAME, runner);

    let resumed = repo.conference(&["resume", NAME]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stderr.contains("core.hookspath = /tmp/agent-hooks")
            && resumed.stderr.contains("put back"),
        "{}",
        resumed.stderr
    );
    assert_eq!(local_config(&repo), config_before);
    let aside = repo.git_dir_file(&format!("conference/{NAME}/config.changed-by-agent"));
    assert!(aside.contains("hooksPath"), "{aside}");
    assert!(!repo
        .git_dir()
        .join(format!("conference/{NAME}/config.before-agents"))
        .exists());
}

/// The repository's local config, less the approval `start` records (`conference.<name>.trusted`,
/// the trust gate's): what an agent must leave as it was.
fn local_config(repo: &TestRepo) -> String {
    repo.git_dir_file("config")
        .lines()
        .filter(|l| !l.starts_with("[conference ") && !l.trim_start().starts_with("trusted = "))
        .map(|l| format!("{l}\n"))
        .collect()
}
