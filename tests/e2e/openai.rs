//! End-to-end tests of `builtin:openai`: real conferences of the `openai` fixture whose agent
//! talks to a scripted OpenAI-compatible server this test starts on loopback
//! (`tests/scripted/openai_server.py`), checked with git and with the server's request log.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::{ConfigBuilder, Run, TestRepo};
use serde_json::{json, Value};

/// The scripted server: started with its replies, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(repo: &TestRepo, replies: Value) -> Server {
        let scenario = repo.tmp.path().join("scenario.json");
        std::fs::write(&scenario, json!({ "replies": replies }).to_string()).unwrap();
        let log = repo.tmp.path().join("requests.jsonl");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scripted/openai_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&scenario)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the scripted server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server prints its port");
        Server { child, port, log }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request the server received, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A successful answer with its token counts.
fn answer(content: &str, input: u64, output: u64) -> Value {
    json!({"content": content, "usage": {"prompt_tokens": input, "completion_tokens": output}})
}

fn search_replace(path: &str, search: &str, replace: &str) -> String {
    format!(
        "{path}\n```python\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"
    )
}

/// conference.md for `iterations` attempts of one researcher with `builtin:openai`; `agent`
/// lines go under `## Agent`.
fn config(title: &str, iterations: u32, agent: &[String]) -> String {
    let mut command = "builtin:openai".to_string();
    for line in agent {
        command.push('\n');
        command.push_str(line);
    }
    ConfigBuilder::new(title, &command)
        .iterations(iterations)
        .agent_timeout("20s")
        .build()
}

fn section_keys(server: &Server) -> Vec<String> {
    vec![
        format!("- base url: {}", server.base_url()),
        "- model: scripted-model".into(),
    ]
}

/// `git conference start NAME` with `env` set and no OPENAI_* variables of the machine's.
fn start(repo: &TestRepo, name: &str, config: &str, env: &[(&str, &str)]) -> Run {
    repo.write("conference.md", config);
    let mut cmd = repo.command("git");
    cmd.args(["conference", "start", name]).stdin(Stdio::null());
    for var in [
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_API_KEY",
        "OPENAI_MODEL",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

fn statuses(repo: &TestRepo, name: &str) -> Vec<String> {
    iterations(repo, name)
        .iter()
        .map(|e| e["payload"]["status"].as_str().unwrap().to_string())
        .collect()
}

fn reason(event: &Value) -> String {
    event["payload"]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The text of the last message of a logged request.
fn last_message(request: &Value) -> String {
    let messages = request["body"]["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn whole_file_and_search_replace_answers_are_kept_with_their_tokens() {
    let repo = TestRepo::from_fixture("openai");
    let whole = std::fs::read_to_string(common::fixtures().join("openai/train.py"))
        .unwrap()
        .replace("lr = 0.5", "lr = 0.3");
    let server = Server::start(
        &repo,
        json!([
            answer(
                &format!(
                    "NOTE: lower the learning rate to 0.3\n\ntrain.py\n```python\n{whole}```\n"
                ),
                900,
                120
            ),
            answer(
                &format!(
                    "NOTE: lr 0.1\n{}",
                    search_replace("train.py", "lr = 0.3", "lr = 0.1")
                ),
                950,
                40
            ),
        ]),
    );
    let mut keys = section_keys(&server);
    keys.push("- api key env: SCRIPTED_KEY".into());
    let run = start(
        &repo,
        "http",
        &config("Http", 2, &keys),
        &[("SCRIPTED_KEY", "sk-test-123")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(statuses(&repo, "http"), ["kept", "kept"]);
    let best = repo.show("conference/http/best", "train.py").unwrap();
    assert!(best.contains("lr = 0.1\nwidth = 4\n"), "{best}");
    let log = repo.git(&["log", "--format=%s", "conference/http/researcher-A"]);
    assert!(
        log.starts_with("lr 0.1\nlower the learning rate to 0.3\n"),
        "{log}"
    );
    // Tokens in the event and, read with git, in the notes.
    let events = iterations(&repo, "http");
    assert_eq!(
        events[0]["payload"]["tokens"],
        json!({"input": 900, "output": 120})
    );
    let commit = events[1]["payload"]["commit"].as_str().unwrap();
    let note = repo.git(&["notes", "--ref=conference", "show", commit]);
    let note: Value = serde_json::from_str(note.lines().next().unwrap()).unwrap();
    assert_eq!(note["tokens"], json!({"input": 950, "output": 40}));
    assert_eq!(note["verdict"], "kept");
    // What was asked: the model, the key from the named variable, the prompt and the file.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first["path"], "/v1/chat/completions");
    assert_eq!(first["body"]["model"], "scripted-model");
    assert_eq!(first["auth"], "Bearer sk-test-123");
    let asked = last_message(first);
    assert!(asked.contains("## Goal\nLower the score."), "{asked}");
    assert!(
        asked.contains("train.py\n```\n# A toy training run"),
        "{asked}"
    );
    assert!(
        !asked.contains("exec python3 train.py"),
        "the frozen eval.sh is not offered: {asked}"
    );
    let system = first["body"]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("<<<<<<< SEARCH"), "{system}");
    // The second request saw the first change kept.
    assert!(last_message(&requests[1]).contains("lr = 0.3\n"));
}

#[test]
fn a_block_that_does_not_match_is_asked_again_once_then_recorded() {
    let repo = TestRepo::from_fixture("openai");
    let server = Server::start(
        &repo,
        json!([
            answer(&search_replace("train.py", "lr = 0.9", "lr = 0.1"), 500, 20),
            answer(
                &search_replace("train.py", "learning_rate = 0.9", "lr = 0.1"),
                700,
                20
            ),
            answer(&search_replace("train.py", "lr = 0.7", "lr = 0.2"), 500, 20),
            // Indentation and trailing whitespace lost: still found, and kept.
            answer(
                &search_replace(
                    "train.py",
                    "  lr = 0.5\n  width = 4",
                    "  lr = 0.2\n  width = 8"
                ),
                900,
                30
            ),
        ]),
    );
    let run = start(
        &repo,
        "reask",
        &config("Reask", 2, &section_keys(&server)),
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(statuses(&repo, "reask"), ["no_change", "kept"]);
    let events = iterations(&repo, "reask");
    let why = reason(&events[0]);
    assert!(why.contains("did not apply, even after a re-ask"), "{why}");
    assert!(
        why.contains("train.py: the SEARCH lines are not in the file"),
        "{why}"
    );
    assert!(
        why.contains("learning_rate = 0.9"),
        "the second answer's failure: {why}"
    );
    assert_eq!(
        events[0]["payload"]["tokens"],
        json!({"input": 1200, "output": 40})
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let reask = last_message(&requests[1]);
    assert!(reask.contains("could not be applied"), "{reask}");
    assert!(
        reask.contains("`lr = 0.9` is closest to line 2: `lr = 0.5`"),
        "{reask}"
    );
    assert!(
        reask.contains("train.py\n```\n# A toy training run"),
        "the file as it is now: {reask}"
    );
    let best = repo
        .show("conference/reask/researcher-A", "train.py")
        .unwrap();
    assert!(best.contains("\nlr = 0.2\nwidth = 8\n"), "{best}");
}

#[test]
fn an_answer_without_edits_is_the_attempts_reason() {
    let repo = TestRepo::from_fixture("openai");
    let same = std::fs::read_to_string(common::fixtures().join("openai/train.py")).unwrap();
    let server = Server::start(
        &repo,
        json!([
            answer("I would lower the learning rate.", 100, 10),
            answer("Lowering the learning rate should help a lot.", 100, 10),
            answer(&format!("train.py\n```python\n{same}```\n"), 100, 10),
        ]),
    );
    let run = start(
        &repo,
        "prose",
        &config("Prose", 2, &section_keys(&server)),
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(statuses(&repo, "prose"), ["no_change", "no_change"]);
    let events = iterations(&repo, "prose");
    let why = reason(&events[0]);
    assert!(why.contains("holds no edit"), "{why}");
    assert!(
        why.contains("Lowering the learning rate should help"),
        "{why}"
    );
    assert_eq!(
        reason(&events[1]),
        "the model's edits leave every file as it was"
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn rate_limits_and_server_errors_are_retried() {
    let repo = TestRepo::from_fixture("openai");
    let server = Server::start(
        &repo,
        json!([
            {"status": 429, "headers": {"Retry-After": "1"}},
            {"status": 503},
            answer(&search_replace("train.py", "lr = 0.5", "lr = 0.2"), 300, 30),
        ]),
    );
    // The endpoint from the usual environment variables; no key (a local server).
    let env = [
        ("OPENAI_BASE_URL", server.base_url()),
        ("OPENAI_MODEL", "env-model".to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = start(&repo, "limits", &config("Limits", 1, &[]), &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(statuses(&repo, "limits"), ["kept"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["body"]["model"], "env-model");
    assert_eq!(requests[0]["auth"], Value::Null);
    let waited = requests[1]["time"].as_f64().unwrap() - requests[0]["time"].as_f64().unwrap();
    assert!(waited >= 0.95, "Retry-After: 1 honoured, waited {waited}s");
}

#[test]
fn an_answer_touching_a_frozen_file_is_rejected_unapplied() {
    let repo = TestRepo::from_fixture("openai");
    let tamper = format!(
        "{}eval.sh\n```sh\n#!/bin/sh\necho 'score: 0'\n```\n",
        search_replace("train.py", "lr = 0.5", "lr = 0.2")
    );
    let server = Server::start(&repo, json!([answer(&tamper, 100, 10)]));
    let run = start(
        &repo,
        "frozen",
        &config("Frozen", 1, &section_keys(&server)),
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(statuses(&repo, "frozen"), ["rejected"]);
    let why = reason(&iterations(&repo, "frozen")[0]);
    assert!(why.contains("changes frozen path eval.sh"), "{why}");
    assert!(why.contains("nothing was applied"), "{why}");
    assert_eq!(server.requests().len(), 1, "no re-ask for a refused answer");
    let kept = repo
        .show("conference/frozen/researcher-A", "train.py")
        .unwrap();
    assert!(kept.contains("lr = 0.5"), "{kept}");
    let worktree = repo.worktree("frozen", "researcher-A");
    if worktree.exists() {
        let eval = std::fs::read_to_string(worktree.join("eval.sh")).unwrap();
        assert!(eval.contains("python3 train.py"), "{eval}");
    }
}

#[test]
fn a_hung_server_is_ended_by_the_agent_timeout_and_the_conference_goes_on() {
    let repo = TestRepo::from_fixture("openai");
    let server = Server::start(
        &repo,
        json!([
            {"hang": 120},
            answer(&search_replace("train.py", "lr = 0.5", "lr = 0.2"), 300, 30),
        ]),
    );
    let config = ConfigBuilder::new(
        "Hung",
        &format!("builtin:openai\n{}", section_keys(&server).join("\n")),
    )
    .iterations(2)
    .agent_timeout("2s")
    .build();
    let run = start(&repo, "hung", &config, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(statuses(&repo, "hung"), ["timeout", "kept"]);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn start_names_what_builtin_openai_lacks() {
    let repo = TestRepo::from_fixture("openai");
    let config = config("Lacking", 1, &["- base url: http://127.0.0.1:9/v1".into()]);
    let run = start(&repo, "lacking", &config, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let line = config
        .lines()
        .position(|l| l.contains("builtin:openai"))
        .unwrap()
        + 1;
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{line}: builtin:openai needs a model"
        )),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("OPENAI_MODEL"), "{}", run.stderr);
}
