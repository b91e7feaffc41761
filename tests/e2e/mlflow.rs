//! The MLflow sink and `export mlflow` against a real MLflow tracking server (SQLite backend,
//! proxied artifacts, loopback port, started and stopped here), read back through MLflow's own
//! Python client: one child run per attempt with its commit, its parent attempt's commit and run
//! forming the attempts' tree as git has it; review verdicts as tags; a server stopped for 20 s
//! mid-run, a `kill -9` of the runner and `resume`, and a second export lose and duplicate nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::TestRepo;
use crate::launchers::servers::{free_port, Server};

/// The venv `.ci/run` installs MLflow into (or `GIT_CONFERENCE_TEST_MLFLOW_VENV`).
fn venv() -> PathBuf {
    std::env::var_os("GIT_CONFERENCE_TEST_MLFLOW_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/mlflow-venv"))
}

/// A tracking server on a free loopback port, its database and artifacts under `dir`.
struct Mlflow {
    server: Server,
    port: u16,
    dir: PathBuf,
}

impl Mlflow {
    fn start(dir: &Path) -> Mlflow {
        std::fs::create_dir_all(dir).unwrap();
        let mut m = Mlflow {
            server: Server::spawn(&mut Command::new("true")),
            port: free_port(),
            dir: dir.to_path_buf(),
        };
        m.restart();
        m
    }

    /// (Re)starts the server on the same port and database.
    fn restart(&mut self) {
        self.server.stop();
        let log = std::fs::File::create(self.dir.join("server.log")).unwrap();
        self.server = Server::spawn_group(
            Command::new(venv().join("bin/mlflow"))
                .arg("server")
                .arg("--backend-store-uri")
                .arg(format!("sqlite:///{}", self.dir.join("db").display()))
                .arg("--artifacts-destination")
                .arg(self.dir.join("art"))
                .args(["--serve-artifacts", "--host", "127.0.0.1", "--workers", "1"])
                .args(["--port", &self.port.to_string()])
                // No job runner (its dozen of consumers are not needed to track runs).
                .env("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log),
        );
        // The first start creates the database: slow on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(300);
        while !self.healthy() {
            assert!(
                Instant::now() < deadline,
                "mlflow server never answered: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn healthy(&self) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            && self.python("import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=5)").0
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn python(&self, script: &str) -> (bool, String) {
        let out = Command::new(venv().join("bin/python"))
            .args(["-c", script, &self.uri()])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// Every run of `experiment`, through MLflow's own client: run id, status, tags.
    fn runs(&self, experiment: &str) -> Vec<Value> {
        let script = format!(
            r#"import sys, json
from mlflow.tracking import MlflowClient
c = MlflowClient(sys.argv[1])
e = c.get_experiment_by_name({experiment:?})
runs = c.search_runs([e.experiment_id], max_results=5000) if e else []
print(json.dumps([{{"run_id": r.info.run_id, "status": r.info.status, "tags": r.data.tags,
  "params": r.data.params, "metrics": r.data.metrics,
  "artifacts": [a.path for a in c.list_artifacts(r.info.run_id)]}} for r in runs]))"#
        );
        let (ok, out) = self.python(&script);
        assert!(ok, "{out}");
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    }
}

/// A conference of `builtin:tune` on the 2-D fixture that sends to `uri`, its evaluation taking
/// `eval_sleep` seconds.
fn repo(uri: &str, eval_sleep: &str, rounds: u32) -> TestRepo {
    let repo = TestRepo::from_fixture("tune-2d");
    repo.write_executable(
        "eval.sh",
        &format!("#!/bin/sh\nsleep {eval_sleep}\n{}", repo.read("eval.sh")),
    );
    repo.write(
        "conference.md",
        &format!(
            "# Conference: tracked\n## Goal\nLower f.\n## Mode\nmetric\n## Success Metric\n- **Metric:** f\n- **Target:** -10\n- **Direction:** minimize\n\
             ## Researchers\n- **Count:** 2\n- **Iterations per round:** 4\n- **Max rounds:** {rounds}\n## Search Space\n**Allowed changes:**\n- params.sh\n\
             ## Evaluation\n- command: ./eval.sh\n- timeout: 30s\n- frozen: eval.sh\n## Agent\n- command: builtin:tune\n\
             ## Environment\n- mlflow: {uri}\n- mlflow experiment: tracked-exp\n"
        ),
    );
    repo.commit_all("start");
    repo
}

/// The commits of the attempts the event log recorded (iterations with a commit, and attempts a
/// kill interrupted, which `resume` records); none while the runner has not recorded the
/// conference yet.
fn attempt_commits(repo: &TestRepo) -> Vec<String> {
    let log = repo.conference(&["log", "tracked", "--format", "jsonl"]);
    if log.code != 0 && log.stderr.contains("no conference named `tracked`") {
        return Vec::new();
    }
    let log = log.ok();
    let mut out: Vec<String> = log
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "researcher.iteration" || e["event"] == "attempt.interrupted")
        .filter_map(|e| e["payload"]["commit"].as_str().map(str::to_string))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// One child run per attempt, each with its commit, linked to the conference run and to its
/// parent attempt's run as git's commit graph and the attempts ref have them.
fn assert_runs_form_the_attempt_tree(repo: &TestRepo, runs: &[Value]) {
    let tag = |r: &Value, k: &str| r["tags"][k].as_str().map(str::to_string);
    let conference: Vec<&Value> = runs
        .iter()
        .filter(|r| r["tags"]["kind"] == "conference")
        .collect();
    assert_eq!(conference.len(), 1, "{runs:#?}");
    let parent_id = conference[0]["run_id"].as_str().unwrap();
    let attempts: Vec<&Value> = runs
        .iter()
        .filter(|r| r["tags"]["kind"] == "attempt")
        .collect();
    let mut commits: Vec<String> = attempts
        .iter()
        .filter_map(|r| tag(r, "mlflow.source.git.commit"))
        .collect();
    commits.sort();
    let expected = attempt_commits(repo);
    assert!(!expected.is_empty());
    assert_eq!(commits, expected, "one run per attempt, none twice");
    let run_of = |commit: &str| {
        attempts
            .iter()
            .find(|r| tag(r, "commit").as_deref() == Some(commit))
            .map(|r| r["run_id"].as_str().unwrap().to_string())
    };
    for r in &attempts {
        let commit = tag(r, "commit").unwrap();
        assert_eq!(tag(r, "mlflow.parentRunId").as_deref(), Some(parent_id));
        assert_ne!(r["status"], "RUNNING", "{r:#}");
        let git_parent = repo
            .git(&["rev-parse", &format!("{commit}^")])
            .trim()
            .to_string();
        assert_eq!(
            tag(r, "parent_commit").as_deref(),
            Some(git_parent.as_str())
        );
        let expected_parent_run = run_of(&git_parent).unwrap_or_else(|| parent_id.to_string());
        assert_eq!(tag(r, "parent_run_id"), Some(expected_parent_run));
        // Reachable from the attempts ref, as every attempt is.
        let reachable = repo.git_run(&[
            "merge-base",
            "--is-ancestor",
            &commit,
            "refs/conference/tracked/attempts",
        ]);
        assert_eq!(reachable.code, 0, "{commit} is not on the attempts ref");
        // An attempt a kill interrupted was never measured: a KILLED run without the metric.
        if r["tags"]["verdict"] == "interrupted" {
            assert_eq!(r["status"], "KILLED", "{r:#}");
            continue;
        }
        assert!(r["metrics"]["f"].is_number(), "{r:#}");
        assert!(
            r["params"]["files"].as_str().unwrap().contains("params.sh"),
            "{r:#}"
        );
    }
    // Review verdicts are tags of the findings' runs.
    let reviews: Vec<Value> = repo
        .events_named("tracked", "round.peer_review")
        .into_iter()
        .filter_map(|e| e["payload"].get("findings").cloned())
        .flat_map(|f| f.as_array().cloned().unwrap_or_default())
        .collect();
    assert!(!reviews.is_empty());
    for f in reviews {
        let run = attempts
            .iter()
            .find(|r| tag(r, "commit").as_deref() == f["commit"].as_str())
            .expect("a finding's run");
        assert_eq!(run["tags"]["review"], f["verdict"], "{run:#}");
    }
}

/// The server stopped for 20 s while the conference runs costs no attempt and loses nothing; a
/// second `export mlflow` adds nothing.
#[test]
#[cfg_attr(
    not(has_mlflow),
    ignore = "needs MLflow in .ci/mlflow-venv: .ci/run installs it"
)]
fn every_attempt_is_a_run_across_a_tracker_outage_and_a_second_export() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mlflow = Mlflow::start(&tmp.path().join("mlflow"));
    let repo = repo(&mlflow.uri(), "1", 2);
    let runner = repo
        .command(env!("CARGO_BIN_EXE_git-conference"))
        .args(["start", "tracked"])
        .env("GIT_CONFERENCE_MLFLOW_FLUSH", "240")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Down once the conference's run is there, for 20 s, then back on the same port and data.
    let deadline = Instant::now() + Duration::from_secs(120);
    while mlflow.runs("tracked-exp").is_empty() {
        assert!(
            Instant::now() < deadline,
            "nothing arrived: {}",
            mlflow.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    mlflow.server.stop();
    std::thread::sleep(Duration::from_secs(20));
    mlflow.restart();
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("MLflow at") && stderr.contains("cannot be reached"),
        "{stderr}"
    );
    assert!(!stderr.contains("not sent yet"), "{stderr}");
    // No attempt failed for it: every iteration was measured.
    let st = repo.status_json("tracked");
    assert_eq!(st["total_iterations"], 16, "{st:#}");
    let runs = mlflow.runs("tracked-exp");
    assert_runs_form_the_attempt_tree(&repo, &runs);
    assert!(
        runs.iter().any(|r| r["tags"]["best"] == "true"),
        "the best's run is tagged"
    );
    assert!(
        runs.iter().any(|r| r["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "diff.patch")),
        "small diffs are artifacts"
    );
    for _ in 0..2 {
        let export = repo.conference(&["export", "mlflow", "tracked"]).ok();
        assert!(
            export.stdout.contains("0 attempt runs made"),
            "{}",
            export.stdout
        );
    }
    assert_eq!(mlflow.runs("tracked-exp").len(), runs.len());
}

/// A runner killed with SIGKILL mid-run and resumed sends every attempt once; a conference that
/// ran without a tracker exported twice (from a fresh clone the second time) is one set of runs.
#[test]
#[cfg_attr(
    not(has_mlflow),
    ignore = "needs MLflow in .ci/mlflow-venv: .ci/run installs it"
)]
fn kill_resume_and_export_from_a_fresh_clone_duplicate_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mlflow = Mlflow::start(&tmp.path().join("mlflow"));
    let repo = repo(&mlflow.uri(), "0.5", 2);
    let runner = repo
        .command(env!("CARGO_BIN_EXE_git-conference"))
        .args(["start", "tracked"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while attempt_commits(&repo).len() < 3 {
        assert!(Instant::now() < deadline, "no attempts");
        std::thread::sleep(Duration::from_millis(200));
    }
    repo.kill_runner("tracked", runner);
    let resumed = repo
        .conference_env(
            &["resume", "tracked"],
            &[("GIT_CONFERENCE_MLFLOW_FLUSH", "240")],
        )
        .ok();
    assert!(
        !resumed.stderr.contains("not sent yet"),
        "{}",
        resumed.stderr
    );
    assert_runs_form_the_attempt_tree(&repo, &mlflow.runs("tracked-exp"));

    // Exported into another experiment: once from here, once from a fresh clone of its refs.
    let first = repo
        .conference(&["export", "mlflow", "tracked", "--experiment", "again"])
        .ok();
    assert!(
        !first.stdout.contains(" 0 attempt runs made"),
        "{}",
        first.stdout
    );
    let runs = mlflow.runs("again");
    assert_runs_form_the_attempt_tree(&repo, &runs);
    let clone = TestRepo::new();
    let origin = repo.dir.display().to_string();
    clone.git(&[
        "fetch",
        "-q",
        &origin,
        "+refs/conference/*:refs/conference/*",
        "+refs/heads/conference/*:refs/heads/conference/*",
        "+refs/notes/*:refs/notes/*",
    ]);
    let again = clone
        .conference(&[
            "export",
            "mlflow",
            "tracked",
            "--experiment",
            "again",
            "--uri",
            &mlflow.uri(),
        ])
        .ok();
    assert!(
        again.stdout.contains(" 0 attempt runs made"),
        "{}",
        again.stdout
    );
    assert_eq!(mlflow.runs("again").len(), runs.len());
}
