//! Worktrees that can run ML code (`## Environment`): evaluations scheduled on devices, a setup
//! command run once per worktree, git-ignored paths shared read-only. Through the real binary and
//! the real git, with shell fixtures that log what they saw outside the repository's worktrees.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{ConfigBuilder, TestRepo};
use serde_json::Value;

/// `eval.sh`: logs `<start> <end> <CUDA_VISIBLE_DEVICES> <CONFERENCE_DEVICE> <who>` to
/// `<git-common-dir>/evals.log` after a short sleep (a researcher's evaluation sleeps the seconds
/// in `<git-common-dir>/eval-sleep`, 0.3 without it; the baseline's and the review's 0.1), then
/// prints the score: 1000 minus the lines of notes.txt, plus the number in data/train.bin when
/// there is one (minimize).
const EVAL: &str = r#"#!/bin/sh
common=$(git rev-parse --git-common-dir)
start=$(date +%s.%N)
case "${CONFERENCE_RESEARCHER-}" in
[A-Z]) sleep "$(cat "$common/eval-sleep" 2>/dev/null || echo 0.3)" ;;
*) sleep 0.1 ;;
esac
[ -f build/ready ] || { [ -f setup.sh ] && { echo "setup did not run here" >&2; exit 1; }; }
extra=0
[ -e data ] && extra=$(cat data/train.bin)
[ -e data ] && [ ! -f .venv/bin/activate ] && { echo "no .venv" >&2; exit 1; }
lines=$(cat notes.txt 2>/dev/null | wc -l)
end=$(date +%s.%N)
echo "$start $end ${CUDA_VISIBLE_DEVICES-unset} ${CONFERENCE_DEVICE-unset} ${CONFERENCE_RESEARCHER-}" >>"$common/evals.log"
echo "score: $((1000 - lines + extra))"
"#;

/// `agents/note.sh`: one new line in notes.txt per attempt (always an improvement), and what
/// device it was given, logged to `<git-common-dir>/agents.log`.
const NOTE_AGENT: &str = r#"#!/bin/sh
common=$(git rev-parse --git-common-dir)
echo "$CONFERENCE_RESEARCHER ${CUDA_VISIBLE_DEVICES-unset} ${CONFERENCE_DEVICE-unset}" >>"$common/agents.log"
echo "$CONFERENCE_RESEARCHER $CONFERENCE_ROUND $CONFERENCE_ITERATION" >>notes.txt
"#;

fn ml_repo(extra_files: &[(&str, &str)]) -> TestRepo {
    let repo = TestRepo::new();
    repo.write_executable("eval.sh", EVAL);
    repo.write_executable("agents/note.sh", NOTE_AGENT);
    repo.write("notes.txt", "");
    for (path, text) in extra_files {
        repo.write_executable(path, text);
    }
    repo.commit_all("ML-style project");
    repo
}

fn config(title: &str, agent: &str, count: u32, iterations: u32, env: &str) -> String {
    let mut text = ConfigBuilder::new(title, agent)
        .count(count)
        .iterations(iterations)
        .frozen("eval.sh, agents/**")
        .build();
    text.push_str("\n## Environment\n");
    text.push_str(env);
    text
}

/// One evaluation as `eval.sh` logged it.
#[derive(Debug, Clone)]
struct Interval {
    start: f64,
    end: f64,
    cuda: String,
    device: String,
    who: String,
}

fn evals(repo: &TestRepo) -> Vec<Interval> {
    repo.git_dir_file("evals.log")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Interval {
                start: f[0].parse().unwrap(),
                end: f[1].parse().unwrap(),
                cuda: f[2].to_string(),
                device: f[3].to_string(),
                who: f.get(4).unwrap_or(&"").to_string(),
            }
        })
        .collect()
}

/// The most intervals open at one instant.
fn max_overlap(intervals: &[&Interval]) -> usize {
    let mut edges: Vec<(f64, i32)> = intervals
        .iter()
        .flat_map(|i| [(i.start, 1), (i.end, -1)])
        .collect();
    // At equal times an end comes before a start: touching intervals do not overlap.
    edges.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mut open, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        max = max.max(open);
    }
    max as usize
}

fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

#[test]
fn four_researchers_share_two_devices_one_evaluation_each() {
    let repo = ml_repo(&[]);
    // Researchers' evaluations take a second: longer than an iteration's bookkeeping (a few
    // hundred ms in a debug build on a busy machine), as trainings are.
    std::fs::write(repo.git_dir().join("eval-sleep"), "1").unwrap();
    let text = config("Devices", "./agents/note.sh", 4, 3, "- devices: 0,1\n");
    let run = repo.start("dev", &text).ok();
    assert!(
        run.stderr.contains(
            "environment: evaluations on devices 0, 1 (one each at a time; agents see none)"
        ),
        "{}",
        run.stderr
    );

    let all = evals(&repo);
    // Baseline, 12 attempts, the review (start + 4 findings) and the transfers.
    assert!(all.len() >= 18, "{} evaluations", all.len());
    for i in &all {
        assert!(
            i.cuda == "0" || i.cuda == "1",
            "evaluation without its own device: {i:?}"
        );
        assert_eq!(i.cuda, i.device, "CONFERENCE_DEVICE differs: {i:?}");
    }
    let refs: Vec<&Interval> = all.iter().collect();
    assert!(max_overlap(&refs) <= 2, "more than 2 evaluations at once");
    for device in ["0", "1"] {
        let on: Vec<&Interval> = all.iter().filter(|i| i.cuda == device).collect();
        assert!(!on.is_empty(), "device {device} never used");
        assert_eq!(max_overlap(&on), 1, "two evaluations on device {device}");
    }
    // Agents get no device: a training an agent starts itself cannot land on one.
    let agents = repo.git_dir_file("agents.log");
    assert_eq!(agents.lines().count(), 12);
    assert!(
        agents.lines().all(|l| l.ends_with("  unset")),
        "an agent saw a device:\n{agents}"
    );
    // Every attempt was evaluated and kept (each is a new line: an improvement).
    let its = iterations(&repo, "dev");
    assert_eq!(its.len(), 12);
    assert!(
        its.iter().all(|e| e["payload"]["status"] == "kept"),
        "{its:?}"
    );

    // Four researchers queue for two devices: the research phase ran two evaluations at once
    // (one per device). How busy the devices stayed is a figure (printed here; bench/run.py
    // measures parallel efficiency), not a test: it depends on the machine's load.
    let research: Vec<&Interval> = all
        .iter()
        .filter(|i| ["A", "B", "C", "D"].contains(&i.who.as_str()))
        .collect();
    assert_eq!(research.len(), 12);
    let first = research.iter().map(|i| i.start).fold(f64::MAX, f64::min);
    let last = research.iter().map(|i| i.end).fold(f64::MIN, f64::max);
    let busy: f64 = research.iter().map(|i| i.end - i.start).sum();
    let utilisation = busy / (2.0 * (last - first));
    eprintln!(
        "research phase: {:.2}s for {:.2}s of evaluations on 2 devices (utilisation {:.0}%)",
        last - first,
        busy,
        100.0 * utilisation
    );
    assert_eq!(
        max_overlap(&research),
        2,
        "the research phase never ran an evaluation on each device at once"
    );
}

#[test]
fn max_parallel_evaluations_bounds_cpu_bound_work() {
    let repo = ml_repo(&[]);
    let text = config(
        "Serial",
        "./agents/note.sh",
        3,
        2,
        "- max parallel evaluations: 1\n",
    );
    repo.start("serial", &text).ok();
    let all = evals(&repo);
    assert!(all.len() >= 7);
    let refs: Vec<&Interval> = all.iter().collect();
    assert_eq!(max_overlap(&refs), 1, "two evaluations at once");
    assert!(all.iter().all(|i| i.cuda == "unset" && i.device == "unset"));
}

/// `setup.sh`: logs `<who> <worktree>` to `<git-common-dir>/setup.log`, makes `build/ready`
/// (untracked, not ignored: setup products are environment, never part of an attempt). With
/// `fail-B` in `<git-common-dir>/setup-mode` it fails in researcher B's worktree (`fail-all`:
/// everywhere); with `kill` there it kills the runner half-way through researcher A's setup,
/// the first time (a crash mid-setup).
const SETUP: &str = r#"#!/bin/sh
common=$(git rev-parse --git-common-dir)
mode=$(cat "$common/setup-mode" 2>/dev/null)
echo "start $CONFERENCE_RESEARCHER $(pwd)" >>"$common/setup.log"
if [ "$mode" = kill ] && [ "$CONFERENCE_RESEARCHER" = A ] && [ ! -f "$common/killed" ]; then
    touch "$common/killed"
    mkdir -p build && echo half >build/partial
    kill -9 $PPID
    sleep 5
    exit 9
fi
if [ "$mode" = fail-all ] || { [ "$mode" = fail-B ] && [ "$CONFERENCE_RESEARCHER" = B ]; }; then
    echo "resolving dependencies" >&2
    echo "error: no matching distribution for torch==9.9" >&2
    exit 3
fi
mkdir -p build && echo ok >build/ready
echo "done $CONFERENCE_RESEARCHER $(pwd)" >>"$common/setup.log"
"#;

fn setup_log(repo: &TestRepo, what: &str) -> Vec<(String, String)> {
    repo.git_dir_file("setup.log")
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            (f.next()? == what).then(|| (f.next().unwrap().into(), f.next().unwrap().into()))
        })
        .collect()
}

#[test]
fn setup_runs_once_in_each_worktree_and_its_products_stay_out_of_attempts() {
    let repo = ml_repo(&[("setup.sh", SETUP)]);
    let mut text = config("Setup", "./agents/note.sh", 2, 2, "- setup: ./setup.sh\n");
    text = text.replace("- **Max rounds:** 1", "- **Max rounds:** 2");
    repo.start("setup", &text).ok();

    let done = setup_log(&repo, "done");
    let per_worktree: BTreeMap<String, usize> =
        done.iter().fold(BTreeMap::new(), |mut m, (_, path)| {
            *m.entry(path.clone()).or_default() += 1;
            m
        });
    let labels: BTreeSet<String> = per_worktree
        .keys()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(
        labels,
        ["best", "researcher-A", "researcher-B", "review"]
            .map(String::from)
            .into(),
        "{done:?}"
    );
    assert!(
        per_worktree.values().all(|&n| n == 1),
        "setup ran twice in a worktree over two rounds: {per_worktree:?}"
    );
    let who: BTreeSet<&str> = done.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(who, ["A", "B", "best", "review"].into());
    // Every evaluation found build/ready (eval.sh fails without it), so everything was kept.
    let its = iterations(&repo, "setup");
    assert_eq!(its.len(), 8);
    assert!(
        its.iter().all(|e| e["payload"]["status"] == "kept"),
        "{its:?}"
    );
    // What setup made is no part of any attempt or of best.
    let names = repo.git(&[
        "log",
        "--format=",
        "--name-only",
        "refs/conference/setup/attempts",
        "conference/setup/best",
    ]);
    assert!(!names.lines().any(|l| l.starts_with("build")), "{names}");
}

#[test]
fn a_failed_setup_stops_the_baseline_with_the_command_and_its_output() {
    let repo = ml_repo(&[("setup.sh", SETUP)]);
    std::fs::write(repo.git_dir().join("setup-mode"), "fail-all").unwrap();
    let run = repo.start(
        "broken",
        &config("Broken", "./agents/note.sh", 1, 1, "- setup: ./setup.sh\n"),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("setup `./setup.sh` failed (exit status 3)")
            && run
                .stderr
                .contains("no matching distribution for torch==9.9")
            && run.stderr.contains("git conference resume broken"),
        "{}",
        run.stderr
    );
    assert!(
        repo.git_dir_file("evals.log").is_empty(),
        "evaluated anyway"
    );
    // Fixed, resume sets the worktree up and goes on.
    std::fs::remove_file(repo.git_dir().join("setup-mode")).unwrap();
    repo.conference(&["resume", "broken"]).ok();
    assert_eq!(iterations(&repo, "broken").len(), 1);
}

#[test]
fn a_failed_setup_in_a_researcher_worktree_is_recorded_and_runs_no_agent_there() {
    let repo = ml_repo(&[("setup.sh", SETUP)]);
    std::fs::write(repo.git_dir().join("setup-mode"), "fail-B").unwrap();
    let text = config("Half", "./agents/note.sh", 2, 2, "- setup: ./setup.sh\n")
        .replace("- **Max rounds:** 1", "- **Max rounds:** 2");
    repo.start("half", &text).ok();
    let failed = repo.events_named("half", "researcher.setup_failed");
    assert_eq!(failed.len(), 2, "one per round: {failed:?}");
    for e in &failed {
        let p = &e["payload"];
        assert_eq!(p["researcher"], "B");
        assert_eq!(p["command"], "./setup.sh");
        assert_eq!(p["status"], "exit status 3");
        assert!(p["output_tail"]
            .as_str()
            .unwrap()
            .contains("no matching distribution"));
    }
    let agents = repo.git_dir_file("agents.log");
    assert!(!agents.lines().any(|l| l.starts_with("B ")), "{agents}");
    let its = iterations(&repo, "half");
    assert_eq!(its.len(), 4);
    assert!(its.iter().all(|e| e["payload"]["researcher"] == "A"));
    let finished: Vec<Value> = repo
        .events_named("half", "researcher.finished")
        .into_iter()
        .filter(|e| e["payload"]["researcher"] == "B")
        .collect();
    assert!(finished
        .iter()
        .all(|e| e["payload"]["reason"] == "setup failed"));
}

#[test]
fn a_setup_killed_half_way_runs_again_on_resume() {
    let repo = ml_repo(&[("setup.sh", SETUP)]);
    std::fs::write(repo.git_dir().join("setup-mode"), "kill").unwrap();
    let text = config("Crash", "./agents/note.sh", 1, 1, "- setup: ./setup.sh\n");
    let run = repo.start("crash", &text);
    assert_ne!(run.code, 0, "the runner was not killed");
    let count = |what: &str, who: &str| {
        setup_log(&repo, what)
            .iter()
            .filter(|(w, _)| w == who)
            .count()
    };
    assert_eq!((count("start", "A"), count("done", "A")), (1, 0));
    repo.conference(&["resume", "crash"]).ok();
    // Set up again from the start, once; the baseline's checkout was set up already.
    assert_eq!((count("start", "A"), count("done", "A")), (2, 1));
    assert_eq!((count("start", "best"), count("done", "best")), (1, 1));
    // What the killed setup left is no agent's work: nothing set aside, nothing in the attempt.
    assert!(repo.events_named("crash", "attempt.interrupted").is_empty());
    let its = iterations(&repo, "crash");
    assert_eq!(its.len(), 1);
    assert_eq!(its[0]["payload"]["status"], "kept");
    let commit = its[0]["payload"]["commit"].as_str().unwrap();
    let names = repo.git(&["show", "--format=", "--name-only", commit]);
    assert_eq!(names.trim(), "notes.txt");
}

/// `agents/shared.sh`: iteration 1 improves; 2 writes through the data link into the user's
/// data; 3 replaces the link with a folder of its own; 4 improves again.
const SHARED_AGENT: &str = r#"#!/bin/sh
common=$(git rev-parse --git-common-dir)
grep -q "shared, read-only.*: data" "$CONFERENCE_PROMPT_FILE" && touch "$common/prompt-says-shared"
case "$CONFERENCE_ITERATION" in
2) echo 0 >data/extra.bin ;;
3) rm data && mkdir data && echo 0 >data/train.bin ;;
*) echo "$CONFERENCE_ITERATION" >>notes.txt ;;
esac
"#;

fn shared_repo() -> TestRepo {
    let repo = ml_repo(&[("agents/shared.sh", SHARED_AGENT)]);
    repo.write(".gitignore", "data/\n.venv/\n");
    repo.commit_all("ignore data and the venv");
    // What prepare.py and `uv sync` made in the user's working tree: ignored, not committed.
    repo.write("data/train.bin", "7\n");
    repo.write(".venv/bin/activate", "# venv\n");
    repo
}

#[test]
fn shared_paths_are_linked_readable_and_read_only() {
    let repo = shared_repo();
    let text = config(
        "Shared",
        "./agents/shared.sh",
        1,
        4,
        "- shared: data/, .venv\n",
    );
    repo.start("shared", &text).ok();
    let its = iterations(&repo, "shared");
    let verdicts: Vec<&str> = its
        .iter()
        .map(|e| e["payload"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["kept", "rejected", "rejected", "kept"]);
    assert!(
        repo.git_dir().join("prompt-says-shared").exists(),
        "the prompt does not tell the agent that data is shared read-only"
    );
    let reason = |i: usize| its[i]["payload"]["reason"].as_str().unwrap().to_string();
    assert!(
        reason(1).contains("wrote into a shared path (data/extra.bin)"),
        "{}",
        reason(1)
    );
    assert!(
        reason(2).contains("replaced or removed the shared path data"),
        "{}",
        reason(2)
    );
    // Evaluations read the data through the link: baseline 1000 + 7, then one line fewer each.
    assert_eq!(its[0]["payload"]["metric_value"].as_f64(), Some(1006.0));
    assert_eq!(its[3]["payload"]["metric_value"].as_f64(), Some(1005.0));

    // The user's data is intact (what the agent wrote through the link is there too: the
    // rejection says it is not undone), and the worktrees still link to it.
    assert_eq!(repo.read("data/train.bin"), "7\n");
    assert_eq!(repo.read(".venv/bin/activate"), "# venv\n");
    for label in ["researcher-A", "review", "best"] {
        let link = repo.worktree("shared", label).join("data");
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            repo.dir.join("data"),
            "{label}"
        );
    }
    // Never part of a snapshot.
    let names = repo.git(&[
        "log",
        "--format=",
        "--name-only",
        "refs/conference/shared/attempts",
        "conference/shared/best",
    ]);
    assert!(
        !names
            .lines()
            .any(|l| l.starts_with("data") || l.starts_with(".venv")),
        "{names}"
    );
    // The review validated the finding from a clean checkout, with the data linked.
    let review = repo.events_named("shared", "round.peer_review");
    assert_eq!(review[0]["payload"]["validated_count"], 1, "{review:?}");

    // Removing the worktrees removes the links, never what they point to.
    repo.conference(&["clean", "shared"]).ok();
    assert!(!repo.worktree("shared", "researcher-A").exists());
    assert_eq!(repo.read("data/train.bin"), "7\n");
    assert_eq!(repo.read(".venv/bin/activate"), "# venv\n");
}

#[test]
fn environment_mistakes_exit_2_with_the_line() {
    let repo = shared_repo();
    let base = config("Bad", "./agents/note.sh", 1, 1, "");
    let line_of =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases = [
        ("- shared: notes.txt\n", "- shared:", "is tracked by git"),
        (
            "- shared: data/, weights/\n",
            "- shared:",
            "`weights` does not exist in your working tree",
        ),
        (
            "- devices: 0,,1\n",
            "- devices:",
            "device names separated by commas",
        ),
        (
            "- devices: 0,1\n- max parallel evaluations: 4\n",
            "- max parallel",
            "more than the 2 devices",
        ),
        ("- shared: /data\n", "- shared:", "not relative"),
        (
            "- setup timeout: soon\n",
            "- setup timeout",
            "positive duration",
        ),
        ("- setup: no-such-uv sync\n", "- setup:", "no-such-uv"),
    ];
    for (env, needle, message) in cases {
        let text = format!("{base}{env}");
        let run = repo.start("bad", &text);
        assert_eq!(run.code, 2, "{env}: {}", run.stderr);
        let line = line_of(&text, needle);
        assert!(
            run.stderr.contains(&format!("conference.md:{line}: ")) && run.stderr.contains(message),
            "{env}: expected line {line} and `{message}`:\n{}",
            run.stderr
        );
    }
    assert!(repo.git_dir_file("evals.log").is_empty());
}
