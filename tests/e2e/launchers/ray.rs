//! The `ray` launcher against a real single-node Ray cluster started by the tests
//! (`servers::RayHead`, on loopback with private ports and temp dir, 2 GPUs declared): the same
//! best as a local run, two evaluations in flight on different devices, a timeout that stops the
//! job, `resume` after `kill -9` stopping the orphan, a head that dies mid-run, a job Ray could
//! never place. All but the dying head share one head (Ray takes seconds to start).

use std::path::Path;

use super::servers::{self, RayHead};
use super::{alive, iterations, log_lines, start_in_background, wait_for};
use crate::common::{self, TestRepo};

/// `eval.sh LOG [GATE]`: logs `start <value> <devices>`; an attempt's evaluation (a value under
/// 10) waits until two attempts' evaluations have started (so that two are in flight at once);
/// when GATE exists it removes it and sleeps (its pid in GATE.pid); then logs `end <value>
/// <devices>` and prints the value.
pub(super) const EVAL: &str = r#"#!/bin/sh
v=$(cat value.txt)
d=${CUDA_VISIBLE_DEVICES-none}
echo "start $v $d" >>"$1"
if [ "$v" -lt 10 ] && [ -e "$1.pair" ]; then
    n=0
    while [ "$(grep -c '^start [0-9] ' "$1")" -lt 2 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
fi
if [ -n "${2-}" ] && [ -e "$2" ]; then
    rm -f "$2"
    sleep 600 &
    echo $! >"$2.pid"
    wait $! || exit 1
fi
echo "end $v $d" >>"$1"
echo "score: $v"
"#;

pub(super) fn repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write_executable("eval.sh", EVAL);
    repo.write_executable(
        "agents/improve.sh",
        // Each researcher's attempt a tree of its own (one tree is evaluated once).
        "#!/bin/sh\nv=$(cat value.txt)\necho $((v - 1)) >value.txt\necho $CONFERENCE_RESEARCHER >who.txt\n",
    );
    repo.write("value.txt", "10\n");
    repo.commit_all("project");
    repo
}

/// `researchers` × `iterations`, evaluations logged to `log` (gated by `gate`).
pub(super) fn config(
    researchers: u32,
    iterations: u32,
    log: &Path,
    gate: Option<&Path>,
    timeout: &str,
    environment: &str,
) -> String {
    super::config(iterations, log, gate, timeout, environment)
        .replace("- **Count:** 1\n", &format!("- **Count:** {researchers}\n"))
}

/// A conference of one researcher and two attempts on `head` whose first attempt's evaluation
/// hangs there: the repository, its runner in the background, the file holding the
/// evaluation's pid (written once it hangs).
fn hung_on(head: &RayHead, tmp: &Path) -> (TestRepo, std::process::Child, std::path::PathBuf) {
    let (log, gate) = (tmp.join("evals.log"), tmp.join("gate"));
    let repo = repo();
    let text = config(1, 2, &log, Some(&gate), "60s", &head.environment(""));
    repo.write("conference.md", &text);
    repo.commit_all("config");
    let mut runner = start_in_background(&repo);
    super::hang_the_first_attempt(&log, &gate, &mut runner);
    let pid_file = tmp.join("gate.pid");
    wait_for(&pid_file);
    (repo, runner, pid_file)
}

/// The conference's jobs in Ray's list (their submission ids start with `gc-<name>-`).
fn jobs_of(head: &RayHead, name: &str) -> Vec<(String, String)> {
    head.jobs(&format!("gc-{name}-"))
}

/// Two researchers reach the same best through Ray as locally; the two attempts' evaluations,
/// in flight at once, were given different GPUs by Ray (`CUDA_VISIBLE_DEVICES`); every note and
/// event says it ran as a Ray job (its id, host, devices), and every job Ray lists succeeded.
#[test]
#[cfg_attr(
    not(has_ray),
    ignore = "needs Ray: .ci/run installs it in .ci/ray-venv"
)]
fn ray_reaches_the_same_best_as_local_with_a_gpu_per_evaluation() {
    let head = servers::shared_ray();
    let tmp = tempfile::tempdir().unwrap();
    let parallel = "- max parallel evaluations: 2\n";
    let local_log = tmp.path().join("local.log");
    std::fs::write(local_log.with_extension("log.pair"), "").unwrap();
    let local = repo();
    local.write(
        "conference.md",
        &config(2, 1, &local_log, None, "60s", parallel),
    );
    local.conference(&["start", "launch"]).ok();
    let local_best = local.status_json("launch")["best"]["metric"].as_f64();
    let log = tmp.path().join("evals.log");
    std::fs::write(log.with_extension("log.pair"), "").unwrap();
    let repo = repo();
    let env = head.environment(&format!("- ray resources: gpus=1, cpus=1\n{parallel}"));
    repo.write("conference.md", &config(2, 1, &log, None, "60s", &env));
    repo.conference(&["start", "raybest"]).ok();
    let best = repo.status_json("raybest")["best"]["metric"].as_f64();
    assert_eq!(best, local_best);
    assert_eq!(best, Some(9.0));
    let lines = log_lines(&log);
    // The two attempts started before either ended: each had a GPU of its own.
    let attempts: Vec<&String> = lines.iter().take(3).collect();
    assert!(
        attempts[0].starts_with("start 10 ") && attempts[1].starts_with("end 10 "),
        "{lines:?}"
    );
    let a: Vec<&str> = lines[2].split_whitespace().collect();
    let b: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!((a[0], b[0]), ("start", "start"), "{lines:?}");
    assert_ne!(
        a[2], b[2],
        "two evaluations in flight on one device: {lines:?}"
    );
    for line in &lines {
        let device = line.split_whitespace().nth(2).unwrap();
        assert!(["0", "1"].contains(&device), "{line}");
    }
    let it = iterations(&repo, "raybest");
    for e in &it {
        let p = &e["payload"]["placement"];
        assert_eq!(p["launcher"], "ray", "{p}");
        assert!(
            p["job"]
                .as_str()
                .is_some_and(|j| j.starts_with("gc-raybest-")),
            "{p}"
        );
        assert!(p["host"].as_str().is_some_and(|h| !h.is_empty()), "{p}");
        assert!(["0", "1"].contains(&p["devices"].as_str().unwrap()), "{p}");
        let commit = e["payload"]["commit"].as_str().unwrap();
        assert_eq!(repo.notes(commit)[0]["placement"]["job"], p["job"]);
    }
    let jobs = jobs_of(head, "raybest");
    // The baseline, two attempts, the review's readings of the round start and two findings.
    assert!(jobs.len() >= 4, "{jobs:?}");
    assert!(jobs.iter().all(|(_, s)| s == "SUCCEEDED"), "{jobs:?}");
}

/// An evaluation past its timeout is stopped: Ray lists the job STOPPED and its process is gone.
#[test]
#[cfg_attr(
    not(has_ray),
    ignore = "needs Ray: .ci/run installs it in .ci/ray-venv"
)]
fn a_ray_timeout_stops_the_job() {
    let head = servers::shared_ray();
    let tmp = tempfile::tempdir().unwrap();
    let (log, gate) = (tmp.path().join("evals.log"), tmp.path().join("gate"));
    std::fs::write(&gate, "").unwrap();
    let repo = repo();
    repo.write(
        "conference.md",
        &config(1, 1, &log, Some(&gate), "3s", &head.environment("")),
    );
    let out = repo.conference(&["start", "raytimeout"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    let pid = std::fs::read_to_string(tmp.path().join("gate.pid")).unwrap();
    assert!(!alive(&pid), "the job's sleep {pid} still runs");
    let jobs = jobs_of(head, "raytimeout");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].1, "STOPPED", "{jobs:?}");
}

/// The runner killed with `kill -9` while a Ray job evaluates: `resume` stops the job (by the
/// submission id recorded before it was submitted), evaluates the attempt again and completes
/// with no evaluation run to its end twice.
#[test]
#[cfg_attr(
    not(has_ray),
    ignore = "needs Ray: .ci/run installs it in .ci/ray-venv"
)]
fn resume_after_kill_9_stops_the_orphaned_ray_job() {
    let head = servers::shared_ray();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("evals.log");
    let (repo, runner, pid_file) = hung_on(head, tmp.path());
    repo.kill_runner("launch", runner);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(alive(&pid), "the orphan should still run after kill -9");
    let running = jobs_of(head, "launch");
    assert!(running.iter().any(|(_, s)| s == "RUNNING"), "{running:?}");
    let out = repo.conference(&["resume", "launch"]).ok();
    assert!(
        out.stderr.contains("cancelled 1 evaluation job"),
        "{}",
        out.stderr
    );
    assert!(
        !alive(&pid),
        "resume left the orphaned job's sleep {pid} running"
    );
    assert_eq!(
        repo.status_json("launch")["best"]["metric"].as_f64(),
        Some(8.0)
    );
    let lines = log_lines(&log);
    let ends: Vec<&str> = (lines.iter())
        .filter_map(|l| l.strip_prefix("end "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(ends, ["10", "9", "8", "10", "8"], "{lines:?}");
    let jobs = jobs_of(head, "launch");
    assert!(
        jobs.iter().all(|(_, s)| s != "RUNNING" && s != "PENDING"),
        "{jobs:?}"
    );
    assert_eq!(
        jobs.iter().filter(|(_, s)| s == "STOPPED").count(),
        1,
        "{jobs:?}"
    );
}

/// Resources no node of the cluster has (Ray would keep the job pending forever) are exit 2 at
/// the start with the line and what the nodes have; nothing is left in Ray's list but the check.
#[test]
#[cfg_attr(
    not(has_ray),
    ignore = "needs Ray: .ci/run installs it in .ci/ray-venv"
)]
fn resources_ray_can_never_give_are_refused_at_the_start() {
    let head = servers::shared_ray();
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo();
    let env = head.environment("- ray resources: gpus=4\n");
    let text = config(1, 1, &tmp.path().join("l"), None, "30s", &env);
    repo.write("conference.md", &text);
    let out = repo.conference(&["start", "rayrefused"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let line = common::line_of(&text, "ray resources");
    assert!(
        out.stderr.contains(&format!("conference.md:{line}:")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("no node of the Ray cluster"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("GPU 2"), "{}", out.stderr);
    assert!(jobs_of(head, "rayrefused").is_empty());
}

/// The head killed while an evaluation runs there: that evaluation is `crashed` with the reason
/// (the Jobs API is gone), the next one fails as clearly at its submission, and the conference
/// goes on to its end.
#[test]
#[cfg_attr(
    not(has_ray),
    ignore = "needs Ray: .ci/run installs it in .ci/ray-venv"
)]
fn a_head_that_dies_makes_the_evaluation_crash_and_the_conference_goes_on() {
    let mut head = RayHead::start();
    let tmp = tempfile::tempdir().unwrap();
    let (repo, runner, pid_file) = hung_on(&head, tmp.path());
    head.kill();
    let out = runner.wait_with_output().unwrap();
    // The job's own process group outlives a killed head (Ray gave it a session of its own).
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let it = iterations(&repo, "launch");
    assert_eq!(it.len(), 2, "{it:?}");
    for i in &it {
        let i = &i["payload"];
        assert_eq!(i["status"], "crashed", "{i}");
        let reason = i["reason"].as_str().unwrap();
        assert!(
            reason.contains("cannot reach Ray's Jobs API at http://127.0.0.1:"),
            "{reason}"
        );
    }
}
