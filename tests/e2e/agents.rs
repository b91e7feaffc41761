//! End-to-end tests with real agent CLIs as researchers: Claude Code (npm) and aider (PyPI),
//! each talking to a scripted model endpoint on loopback (`tests/agents/scripted_llm.py`)
//! that answers by request content: read the file, edit it, write the note, say done.
//!
//! The project is laid out like autoresearch: `python3 train.py` evaluates the `train.py` agents
//! edit (allowed, so not frozen) and prints `val_bpb`; `prepare.py` (the harness it imports) is
//! frozen.
//!
//! Each CLI is the executable GIT_CONFERENCE_TEST_CLAUDE / _AIDER / _CODEX / _GEMINI /
//! _OPENCODE names. `build.rs` reads these when the tests are built: a test whose CLI is not
//! named is `#[ignore]`d with the reason (`cargo test` prints `ignored, needs Claude Code: …` and
//! counts it), never passed without having run. `.ci/run` installs pinned Claude Code, Codex and
//! aider and names them; under CI (`CI` set) their tests always run, and a missing one fails.
//!
//! Codex, Gemini CLI and opencode (from npm: `@openai/codex`, `@google/gemini-cli`,
//! `opencode-ai`) each get their endpoint from a configuration file in the test's HOME, as a
//! user would set it up; Gemini CLI and opencode are slower and left to be run by hand. They
//! were last run with Codex 0.169.0, Gemini CLI 0.61.0 and opencode 1.18.33 (opencode takes
//! about 12 s a run on two cores).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use common::{ConfigBuilder, TestRepo};
use serde_json::{json, Value};

const PREPARE: &str = "\
# The evaluation harness (frozen): the loss of a learning rate.
def evaluate(lr):
    return 1.0 + 100.0 * (lr - 0.01) ** 2
";

const TRAIN: &str = "\
from prepare import evaluate

lr = 0.1
print(f\"val_bpb: {evaluate(lr):.6f}\")
";

/// The CLI `$var` names. A test that needs one is ignored when it is not named (see build.rs),
/// except under CI: there, or when ignored tests are run on purpose, a missing CLI fails here.
fn cli(var: &str, product: &str) -> PathBuf {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        _ => panic!(
            "{product} is not installed: set {var} to its executable (.ci/run installs it and \
             sets the variable)"
        ),
    }
}

/// The scripted endpoint, stopped when dropped.
struct Endpoint {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Endpoint {
    fn start(dir: &Path, steps: Value) -> Endpoint {
        let port_file = dir.join("endpoint.port");
        let log = dir.join("endpoint.log");
        let scenario = dir.join("scenario.json");
        let spec = json!({"port_file": port_file, "log": log, "steps": steps});
        std::fs::write(&scenario, spec.to_string()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/scripted_llm.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(&scenario)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p.trim().parse().unwrap();
            }
            assert!(
                started.elapsed().as_secs() < 20,
                "the scripted endpoint did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Endpoint { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests of the conference's conversations (not the CLI's side requests).
    fn main_requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["kind"] == "main")
            .collect()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A repository in the autoresearch layout, with the CLI on its PATH as `name`.
fn autoresearch(cli: &Path, name: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("prepare.py", PREPARE);
    repo.write("train.py", TRAIN);
    repo.commit_all("autoresearch layout");
    repo.link_program(name, cli);
    repo
}

fn config(title: &str, iterations: u32, rounds: u32, agent: &[&str], budget: &[&str]) -> String {
    let mut b = ConfigBuilder::new(title, agent[0])
        .iterations(iterations)
        .rounds(rounds)
        .agent_timeout("3m")
        .frozen("prepare.py");
    // `python3 train.py` evaluates the train.py the agents edit: allowed, so not frozen.
    b.eval = "python3 train.py".into();
    for line in budget {
        b = b.constraint(line);
    }
    let text = b
        .build()
        .replace("- **Metric:** score", "- **Metric:** val_bpb")
        .replace(
            "## Search Space Partitioning",
            "## Search Space\n- **Allowed changes:** train.py\n\n## Search Space Partitioning",
        );
    let mut text = text;
    for line in &agent[1..] {
        text.push_str(line);
        text.push('\n');
    }
    text
}

fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
        .into_iter()
        .map(|e| e["payload"].clone())
        .collect()
}

fn claude_env(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", endpoint.url()),
        ("ANTHROPIC_API_KEY", "sk-ant-test".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
    ]
}

fn start(repo: &TestRepo, name: &str, text: &str, env: &[(&'static str, String)]) -> common::Run {
    repo.write("conference.md", text);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    repo.conference_env(&["start", name], &env)
}

/// One Claude Code conversation: Read the file, Edit it, Write the note, then say `say`.
fn claude_edit(file: &str, old: &str, new: &str, note: &str, say: &str) -> Value {
    json!({"actions": [
        {"tool": "Read", "file": file},
        {"tool": "Edit", "file": file, "old": old, "new": new},
        {"tool": "Write", "file": ".conference/note.md", "content": format!("{note}\n")},
    ], "say": say})
}

/// Three Claude Code conversations, each lowering train.py's learning rate (0.1, 0.05, 0.02,
/// 0.01).
fn three_claude_lr_edits() -> Value {
    json!([
        claude_edit("train.py", "lr = 0.1", "lr = 0.05", "lower lr", "Done."),
        claude_edit(
            "train.py",
            "lr = 0.05",
            "lr = 0.02",
            "lower lr more",
            "Done."
        ),
        claude_edit(
            "train.py",
            "lr = 0.02",
            "lr = 0.01",
            "lower lr again",
            "Done."
        ),
    ])
}

fn files_of(repo: &TestRepo, commit: &str) -> Vec<String> {
    repo.git(&["show", "--name-only", "--format=", commit])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
#[cfg_attr(
    not(agent_cli_claude),
    ignore = "needs Claude Code: set GIT_CONFERENCE_TEST_CLAUDE to its executable, or run .ci/run"
)]
fn claude_code_researcher_keeps_rejects_and_records_refusals_and_usage() {
    let claude = cli("GIT_CONFERENCE_TEST_CLAUDE", "Claude Code");
    let repo = autoresearch(&claude, "claude");
    let endpoint = Endpoint::start(
        repo.tmp.path(),
        json!([
            claude_edit("train.py", "lr = 0.1", "lr = 0.03", "lower lr to 0.03", "Lowered the learning rate."),
            claude_edit("prepare.py", "return 1.0 + 100.0 * (lr - 0.01) ** 2", "return 0.0", "a perfect loss", "Done."),
            // A Write outside the worktree: Claude Code's acceptEdits refuses it.
            {"actions": [{"tool": "Read", "file": "train.py"},
                         {"tool": "Write", "file": "../outside.py", "content": "lr = 0.01\n"}],
             "say": "Lowered the learning rate."},
            claude_edit("train.py", "lr = 0.03", "lr = 0.01", "lower lr to 0.01", "Done."),
        ]),
    );
    let text = config("cc", 4, 1, &["claude"], &[]);
    let run = start(&repo, "cc", &text, &claude_env(&endpoint));
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("--permission-mode acceptEdits --output-format json")
            || run
                .stderr
                .contains("--permission-mode acceptEdits --output-format json"),
        "start prints the expanded command:\n{}{}",
        run.stdout,
        run.stderr
    );

    let its = iterations(&repo, "cc");
    let verdicts: Vec<&str> = its.iter().map(|p| p["status"].as_str().unwrap()).collect();
    assert_eq!(
        verdicts,
        ["kept", "rejected", "no_change", "kept"],
        "{its:#?}\n{}",
        run.stderr
    );
    assert!(
        its[1]["reason"].as_str().unwrap().contains("frozen"),
        "{}",
        its[1]
    );
    let refused = its[2]["reason"].as_str().unwrap();
    assert!(
        refused.starts_with("the agent's edit was refused: Write of ")
            && refused.contains("outside.py"),
        "{refused}"
    );
    assert!(!repo.worktrees_root().join("cc/outside.py").exists());
    // Not what the agent claimed ("Lowered the learning rate."): why nothing changed.
    assert_eq!(its[2]["description"], format!("no change: {refused}"));
    assert!(
        run.stderr
            .contains("no_change best 1.040000  no change: the agent's edit was refused"),
        "the progress line says it:\n{}",
        run.stderr
    );
    // Every attempt records what Claude Code reported (1000 + 100 tokens per model call).
    for p in &its {
        assert!(p["tokens"]["input"].as_u64().unwrap() >= 1000, "{p}");
        assert!(p["tokens"]["output"].as_u64().unwrap() >= 100, "{p}");
        assert!(p["cost_usd"].as_f64().unwrap() > 0.0, "{p}");
    }
    // The notes (git notes --ref=conference) have them too; the kept snapshots hold only the
    // agent's edit (not its note, prompt or anything under .conference/).
    for p in [&its[0], &its[3]] {
        let commit = p["commit"].as_str().unwrap();
        let note = &repo.notes(commit)[0];
        assert!(note["tokens"]["input"].as_u64().unwrap() >= 1000, "{note}");
        assert!(note["cost_usd"].as_f64().unwrap() > 0.0, "{note}");
        assert_eq!(files_of(&repo, commit), ["train.py"]);
    }
    assert_eq!(its[0]["description"], "lower lr to 0.03");
    let best = repo.show("conference/cc/best", "train.py").unwrap();
    assert!(best.contains("lr = 0.01"), "{best}");
    assert_eq!(
        repo.show("conference/cc/best", "prepare.py").unwrap(),
        PREPARE
    );
    // Worktrees live outside every .git directory.
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(list.contains("repo.conference/cc/researcher-A"), "{list}");
    assert!(!list.contains("/.git/"), "{list}");
    // Status shows the spend.
    let status = repo.conference(&["status", "cc"]).ok().stdout;
    assert!(
        status.contains("Spend:") && status.contains("researcher A:"),
        "{status}"
    );
    // Four conversations, each at least Read + edit + final answer.
    let main = endpoint.main_requests();
    assert!(main.iter().any(|r| r["step"] == 3), "{main:?}");
}

#[test]
#[cfg_attr(
    not(agent_cli_claude),
    ignore = "needs Claude Code: set GIT_CONFERENCE_TEST_CLAUDE to its executable, or run .ci/run"
)]
fn a_cost_budget_stops_the_conference_and_caps_claude_code() {
    let claude = cli("GIT_CONFERENCE_TEST_CLAUDE", "Claude Code");
    let repo = autoresearch(&claude, "claude");
    // Each model call costs $0.0075 at the default model's prices: a run of 4 calls $0.03.
    let endpoint = Endpoint::start(repo.tmp.path(), three_claude_lr_edits());
    let text = config("money", 5, 3, &["claude"], &["- **Cost budget:** $0.05"]);
    let run = start(&repo, "money", &text, &claude_env(&endpoint));
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let its = iterations(&repo, "money");
    assert_eq!(
        its.len(),
        2,
        "no agent run starts once $0.05 is spent: {its:#?}"
    );
    // The second run got what was left ($0.02) as --max-budget-usd and stopped at it.
    let second = its[1]["reason"].as_str().unwrap_or_default();
    assert!(second.contains("spending cap"), "{:#}", its[1]);
    let st = repo.status_json("money");
    assert_eq!(st["final_status"], "budget_stop", "{st}");
    assert!(
        st["stop_reason"].as_str().unwrap().contains("cost_budget"),
        "{st}"
    );
    let spent = st["spend"]["cost_usd"].as_f64().unwrap();
    assert!(spent >= 0.05, "{st}");
    let stop = repo.events_named("money", "conference.budget_stop");
    assert_eq!(stop[0]["payload"]["reason"], "cost_budget", "{stop:?}");
    let status = repo.conference(&["status", "money"]).ok().stdout;
    assert!(status.contains("cost_budget"), "{status}");
    assert!(
        status.contains("Cost:") && status.contains("of $0.05"),
        "{status}"
    );
    assert!(status.contains("Spend:"), "{status}");
    // The final report has the spend per researcher and per round.
    let out = repo.tmp.path().join("report");
    repo.conference(&["report", "money", "--output", out.to_str().unwrap()])
        .ok();
    let report = std::fs::read_to_string(out.join("final_report.md")).unwrap();
    assert!(report.contains("## Agent spend"), "{report}");
    assert!(report.contains("| Researcher A | 2 |"), "{report}");
    assert!(report.contains("| Round 1 | 2 |"), "{report}");
    assert!(report.contains("Cost budget: $0.05"), "{report}");
}

/// aider's SEARCH/REPLACE answer for `file`.
fn aider_edit(file: &str, old: &str, new: &str) -> Value {
    json!({
        "reply": format!("Here is the change.\n\n{file}\n```python\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n```\n"),
        "say": "I could not apply that."
    })
}

#[test]
#[cfg_attr(
    not(agent_cli_aider),
    ignore = "needs aider: set GIT_CONFERENCE_TEST_AIDER to its executable, or run .ci/run"
)]
fn aider_researcher_keeps_rejects_and_records_failed_edits_and_usage() {
    let aider = cli("GIT_CONFERENCE_TEST_AIDER", "aider");
    let repo = autoresearch(&aider, "aider");
    let endpoint = Endpoint::start(
        repo.tmp.path(),
        json!([
            aider_edit("train.py", "lr = 0.1", "lr = 0.02"),
            aider_edit(
                "prepare.py",
                "    return 1.0 + 100.0 * (lr - 0.01) ** 2",
                "    return 0.0"
            ),
            // A SEARCH block that matches nothing: aider cannot apply it.
            aider_edit("train.py", "lr = 0.5", "lr = 0.01"),
        ]),
    );
    let text = config(
        "ai",
        3,
        1,
        &[
            "aider",
            "- model: openai/gpt-4o-mini",
            "- extra args: --edit-format diff",
        ],
        &[],
    );
    let env = vec![
        ("OPENAI_API_BASE", format!("{}/v1", endpoint.url())),
        ("OPENAI_API_KEY", "sk-test".to_string()),
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True".to_string()),
    ];
    let run = start(&repo, "ai", &text, &env);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let its = iterations(&repo, "ai");
    let verdicts: Vec<&str> = its.iter().map(|p| p["status"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["kept", "rejected", "no_change"], "{its:#?}");
    assert!(
        its[1]["reason"].as_str().unwrap().contains("frozen"),
        "{}",
        its[1]
    );
    let failed = its[2]["reason"].as_str().unwrap();
    assert!(
        failed.contains("SEARCH/REPLACE block failed to match"),
        "{failed}"
    );
    for p in &its {
        assert!(p["tokens"]["input"].as_u64().unwrap() > 0, "{p}");
        assert!(p["cost_usd"].as_f64().unwrap() > 0.0, "{p}");
    }
    let kept = its[0]["commit"].as_str().unwrap();
    let note = &repo.notes(kept)[0];
    assert!(note["tokens"]["output"].as_u64().unwrap() > 0, "{note}");
    assert!(note["cost_usd"].as_f64().unwrap() > 0.0, "{note}");
    // aider's own files (.aider.tags.cache.v4, chat history) are not part of the attempt.
    assert_eq!(files_of(&repo, kept), ["train.py"]);
    assert!(repo
        .show("conference/ai/best", "train.py")
        .unwrap()
        .contains("lr = 0.02"));
    // aider committed nothing itself: the researcher branch holds only conference commits.
    let log = repo.git(&["log", "--format=%an", "conference/ai/researcher-A"]);
    assert!(!log.contains("aider"), "{log}");
    assert!(endpoint.main_requests().len() >= 3);
}

/// Everything `start` printed.
fn said(run: &common::Run) -> String {
    format!("{}{}", run.stdout, run.stderr)
}

/// A command line of its own that runs Claude Code (not the preset) gets what the preset gets:
/// its JSON is read for tokens and cost, and a Cost budget stops the conference.
#[test]
#[cfg_attr(
    not(agent_cli_claude),
    ignore = "needs Claude Code: set GIT_CONFERENCE_TEST_CLAUDE to its executable, or run .ci/run"
)]
fn a_custom_claude_code_line_is_read_and_held_to_its_cost_budget() {
    let claude = cli("GIT_CONFERENCE_TEST_CLAUDE", "Claude Code");
    let repo = autoresearch(&claude, "claude");
    // Each run makes 4 model calls at $0.0075: $0.03.
    let endpoint = Endpoint::start(repo.tmp.path(), three_claude_lr_edits());
    let line = r#"claude -p "$(cat "$CONFERENCE_PROMPT_FILE")" --permission-mode acceptEdits --output-format json"#;
    let text = config("own", 5, 3, &[line], &["- **Cost budget:** $0.05"]);
    let run = start(&repo, "own", &text, &claude_env(&endpoint));
    assert_eq!(run.code, 0, "{}", said(&run));
    assert!(
        said(&run).contains("agent output: read as Claude Code's JSON when it is"),
        "start says how the output is read:\n{}",
        said(&run)
    );
    assert!(!said(&run).contains("reports no cost"), "{}", said(&run));
    let its = iterations(&repo, "own");
    assert_eq!(its.len(), 2, "no run starts once $0.05 is spent: {its:#?}");
    for p in &its {
        assert_eq!(p["status"], "kept", "{p}");
        assert!(p["tokens"]["input"].as_u64().unwrap() >= 1000, "{p}");
        assert!(p["cost_usd"].as_f64().unwrap() >= 0.03, "{p}");
    }
    let st = repo.status_json("own");
    assert_eq!(st["final_status"], "budget_stop", "{st}");
    let stop = repo.events_named("own", "conference.budget_stop");
    assert_eq!(stop[0]["payload"]["reason"], "cost_budget", "{stop:?}");
}

/// A team's wrapper script around Claude Code: its output is Claude Code's JSON, so its usage
/// is recorded as the preset's would be.
#[test]
#[cfg_attr(
    not(agent_cli_claude),
    ignore = "needs Claude Code: set GIT_CONFERENCE_TEST_CLAUDE to its executable, or run .ci/run"
)]
fn a_wrapper_script_that_runs_claude_code_gets_its_usage() {
    let claude = cli("GIT_CONFERENCE_TEST_CLAUDE", "Claude Code");
    let repo = autoresearch(&claude, "claude");
    let endpoint = Endpoint::start(
        repo.tmp.path(),
        json!([claude_edit(
            "train.py",
            "lr = 0.1",
            "lr = 0.03",
            "lower lr to 0.03",
            "Done."
        )]),
    );
    let wrapper = repo.tmp.path().join("our-agent");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\necho \"our-agent: starting in $PWD\" >&2\n\
         exec claude -p --permission-mode acceptEdits --output-format json <\"$CONFERENCE_PROMPT_FILE\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let text = config("wrap", 1, 1, &[wrapper.to_str().unwrap()], &[]);
    let run = start(&repo, "wrap", &text, &claude_env(&endpoint));
    assert_eq!(run.code, 0, "{}", said(&run));
    let its = iterations(&repo, "wrap");
    assert_eq!(its[0]["status"], "kept", "{its:#?}");
    assert_eq!(its[0]["description"], "lower lr to 0.03");
    assert!(
        its[0]["tokens"]["input"].as_u64().unwrap() >= 1000,
        "{}",
        its[0]
    );
    assert!(its[0]["cost_usd"].as_f64().unwrap() > 0.0, "{}", its[0]);
    let note = &repo.notes(its[0]["commit"].as_str().unwrap())[0];
    assert!(note["cost_usd"].as_f64().unwrap() > 0.0, "{note}");
    let st = repo.status_json("wrap");
    assert!(st["spend"]["cost_usd"].as_f64().unwrap() > 0.0, "{st}");
}

/// aider run by a command line of its own (not the preset, so none of the preset's flags that
/// move or disable its files): the files aider keeps in its working folder (chat and input
/// history, tags cache) are not the attempt, nor is the `.gitignore` edit it would make for
/// them; the improving edit is kept, with aider's tokens and cost. Once as a user may write the
/// line, once with `--no-gitignore` (aider's files then lie in the worktree unignored by git).
#[test]
#[cfg_attr(
    not(agent_cli_aider),
    ignore = "needs aider: set GIT_CONFERENCE_TEST_AIDER to its executable, or run .ci/run"
)]
fn a_custom_aider_line_keeps_an_improving_attempt() {
    let aider = cli("GIT_CONFERENCE_TEST_AIDER", "aider");
    let repo = autoresearch(&aider, "aider");
    for (name, flags) in [("aid", ""), ("noign", " --no-gitignore")] {
        std::fs::create_dir_all(repo.tmp.path().join(name)).unwrap();
        let endpoint = Endpoint::start(
            &repo.tmp.path().join(name),
            json!([aider_edit("train.py", "lr = 0.1", "lr = 0.02")]),
        );
        let line = format!(
            "aider --message-file \"$CONFERENCE_PROMPT_FILE\" --yes-always --model \
             openai/gpt-4o-mini --edit-format diff --no-check-update --no-analytics{flags}"
        );
        let text = config(name, 1, 1, &[&line], &[]);
        let env = vec![
            ("OPENAI_API_BASE", format!("{}/v1", endpoint.url())),
            ("OPENAI_API_KEY", "sk-test".to_string()),
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True".to_string()),
        ];
        let run = start(&repo, name, &text, &env);
        assert_eq!(run.code, 0, "{}", said(&run));
        assert!(
            said(&run)
                .contains("agent output: read as aider's `Tokens:`/`Cost:` lines when it is one")
                && said(&run).contains("aider's files (.aider*) are never part of an attempt"),
            "{}",
            said(&run)
        );
        let its = iterations(&repo, name);
        assert_eq!(its[0]["status"], "kept", "{its:#?}\n{}", run.stderr);
        let commit = its[0]["commit"].as_str().unwrap();
        assert_eq!(files_of(&repo, commit), ["train.py"]);
        assert!(
            its[0]["tokens"]["input"].as_u64().unwrap() > 0,
            "{}",
            its[0]
        );
        assert!(its[0]["cost_usd"].as_f64().unwrap() > 0.0, "{}", its[0]);
        let best = format!("conference/{name}/best");
        assert!(repo.show(&best, "train.py").unwrap().contains("lr = 0.02"));
        assert_eq!(repo.show(&best, ".gitignore"), None);
    }
}

fn worktree_paths(repo: &TestRepo) -> Vec<String> {
    repo.git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_string)
        .collect()
}

#[test]
fn worktrees_go_where_configured_and_old_conferences_keep_theirs() {
    // `conference.worktreesPath` names the folder; the conference records it.
    let repo = TestRepo::from_fixture("loop");
    let elsewhere = repo.tmp.path().canonicalize().unwrap().join("elsewhere");
    repo.git(&[
        "config",
        "conference.worktreesPath",
        elsewhere.to_str().unwrap(),
    ]);
    let text = ConfigBuilder::new("Conf", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .constraint("- **Token budget:** 1M tokens")
        .build();
    let run = repo.start("conf", &text).ok();
    // A script reports no usage: the budget cannot hold it, and `start` says so.
    assert!(
        run.stderr
            .contains("warning: Token budget is set, but the agent `./agents/seq.sh improve` reports no usage"),
        "{}",
        run.stderr
    );
    let paths = worktree_paths(&repo);
    let wanted = elsewhere.join("conf/researcher-A");
    assert!(paths.contains(&wanted.display().to_string()), "{paths:?}");
    assert_eq!(
        repo.git_dir_file("conference/conf/worktrees-root").trim(),
        elsewhere.join("conf").display().to_string()
    );

    // A conference made before worktrees moved out of .git keeps them there on resume.
    let repo = TestRepo::from_fixture("loop");
    let text = ConfigBuilder::new("Old", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(2)
        .frozen("eval.sh, agents/**")
        .constraint("- **Pause every:** 1")
        .build();
    assert_eq!(repo.start("old", &text).code, 3, "paused after round 1");
    let new_root = repo.worktrees_root().join("old");
    let old_root = repo.git_dir().join("conference/old/worktrees");
    std::fs::create_dir_all(&old_root).unwrap();
    for entry in std::fs::read_dir(&new_root).unwrap() {
        let from = entry.unwrap().path();
        let to = old_root.join(from.file_name().unwrap());
        repo.git(&[
            "worktree",
            "move",
            from.to_str().unwrap(),
            to.to_str().unwrap(),
        ]);
    }
    std::fs::remove_dir_all(repo.worktrees_root()).unwrap();
    std::fs::remove_file(repo.git_dir().join("conference/old/worktrees-root")).unwrap();
    repo.conference(&["resume", "old"]).ok();
    assert_eq!(iterations(&repo, "old").len(), 2, "round 2 ran");
    let paths = worktree_paths(&repo);
    let old_a = old_root.canonicalize().unwrap().join("researcher-A");
    assert!(paths.contains(&old_a.display().to_string()), "{paths:?}");
    assert!(
        !repo.worktrees_root().exists(),
        "no worktree was made in the new place: {paths:?}"
    );
}

/// A stand-in for `codex` (the real one is not installed here): it checks it was called the
/// way the preset calls it, lowers `lr` in train.py, and prints Codex's `exec --json` events
/// with 600k input and 10k output tokens.
const FAKE_CODEX: &str = r###"#!/usr/bin/env python3
import json, re, sys
assert sys.argv[1:4] == ["exec", "--sandbox", "workspace-write"], sys.argv
assert "--json" in sys.argv and sys.argv[-1] == "-", sys.argv
assert "## How to work" in sys.stdin.read()
text = open("train.py").read()
lr = float(re.search(r"lr = ([0-9.]+)", text).group(1))
open("train.py", "w").write(text.replace("lr = %s" % lr, "lr = %s" % round(lr / 2, 6)))
for event in [{"type": "thread.started", "thread_id": "t1"}, {"type": "turn.started"},
              {"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": "Halved the learning rate."}},
              {"type": "turn.completed", "usage": {"input_tokens": 600000, "cached_input_tokens": 0, "output_tokens": 10000}}]:
    print(json.dumps(event))
"###;

#[test]
fn a_token_budget_stops_new_agent_runs() {
    let repo = TestRepo::new();
    repo.write("prepare.py", PREPARE);
    repo.write("train.py", TRAIN);
    repo.commit_all("autoresearch layout");
    let fake = repo.tmp.path().join("fake-codex");
    std::fs::write(&fake, FAKE_CODEX).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    repo.link_program("codex", &fake);
    let text = config("tok", 5, 3, &["codex"], &["- **Token budget:** 1M tokens"]);
    repo.start("tok", &text).ok();
    let its = iterations(&repo, "tok");
    // 610k tokens per run: the second run reaches 1M, no third starts.
    assert_eq!(its.len(), 2, "{its:#?}");
    assert_eq!(its[0]["tokens"], json!({"input": 600000, "output": 10000}));
    assert!(its[0].get("cost_usd").is_none(), "Codex reports no cost");
    assert_eq!(its[0]["description"], "Halved the learning rate.");
    let st = repo.status_json("tok");
    assert_eq!(st["spend"]["input"], 1_200_000, "{st}");
    assert_eq!(st["researchers"]["A"]["spend"]["output"], 20_000, "{st}");
    assert_eq!(st["round_spend"][0]["runs"], 2, "{st}");
    let stop = repo.events_named("tok", "conference.budget_stop");
    assert_eq!(stop[0]["payload"]["reason"], "token_budget", "{stop:?}");
    let status = repo.conference(&["status", "tok"]).ok().stdout;
    assert!(
        status.contains("Tokens:     1.22M of 1.00M (Token budget)"),
        "{status}"
    );
    assert!(status.contains("researcher A: 1.22M tokens"), "{status}");
    assert!(status.contains("round 1: 1.22M tokens"), "{status}");
}

/// Writes `text` to `rel` under the test's HOME (where the CLIs read their configuration).
fn home_file(repo: &TestRepo, rel: &str, text: &str) {
    let path = repo.tmp.path().join("home").join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The three attempts every real-CLI test makes: an improving edit (kept), an edit to the
/// frozen harness (rejected), a write outside the worktree the CLI refuses (no_change).
fn three_attempts() -> Value {
    json!([
        claude_edit("train.py", "lr = 0.1", "lr = 0.03", "lower lr to 0.03", "Lowered the learning rate."),
        claude_edit("prepare.py", "return 1.0 + 100.0 * (lr - 0.01) ** 2", "return 0.0", "a perfect loss", "Done."),
        {"actions": [{"tool": "Read", "file": "train.py"},
                     {"tool": "Write", "file": "../outside.py", "content": "lr = 0.01\n"}],
         "say": "Lowered the learning rate."},
    ])
}

/// Runs conference `name` with `agent` lines against `endpoint` and checks the three attempts:
/// verdicts, the refusal's reason (`refused` in it), the tokens in the events and the kept
/// attempt's note, and that nothing was written outside the worktree. Returns the iterations.
fn check_three_attempts(
    repo: &TestRepo,
    name: &str,
    agent: &[&str],
    env: &[(&'static str, String)],
    refused: &str,
) -> Vec<Value> {
    let text = config(name, 3, 1, agent, &[]);
    let run = start(repo, name, &text, env);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let its = iterations(repo, name);
    let verdicts: Vec<&str> = its.iter().map(|p| p["status"].as_str().unwrap()).collect();
    assert_eq!(
        verdicts,
        ["kept", "rejected", "no_change"],
        "{its:#?}\n{}",
        run.stderr
    );
    assert!(
        its[1]["reason"].as_str().unwrap().contains("frozen"),
        "{}",
        its[1]
    );
    let reason = its[2]["reason"].as_str().unwrap();
    assert!(reason.contains(refused), "{reason}");
    assert!(!repo.worktrees_root().join(name).join("outside.py").exists());
    for p in &its {
        assert!(p["tokens"]["input"].as_u64().unwrap() >= 1000, "{p}");
        assert!(p["tokens"]["output"].as_u64().unwrap() >= 100, "{p}");
    }
    let kept = its[0]["commit"].as_str().unwrap();
    assert_eq!(its[0]["description"], "lower lr to 0.03");
    assert!(repo.notes(kept)[0]["tokens"]["input"].as_u64().unwrap() >= 1000);
    assert_eq!(files_of(repo, kept), ["train.py"]);
    let best = repo
        .show(&format!("conference/{name}/best"), "train.py")
        .unwrap();
    assert!(best.contains("lr = 0.03"), "{best}");
    its
}

#[test]
#[cfg_attr(
    not(agent_cli_codex),
    ignore = "needs Codex: set GIT_CONFERENCE_TEST_CODEX to its executable, or run .ci/run"
)]
fn codex_researcher_keeps_rejects_and_records_refusals_and_usage() {
    let codex = cli("GIT_CONFERENCE_TEST_CODEX", "Codex");
    let repo = autoresearch(&codex, "codex");
    let endpoint = Endpoint::start(repo.tmp.path(), three_attempts());
    // Codex reads its endpoint from its configuration only (not OPENAI_BASE_URL).
    home_file(
        &repo,
        ".codex/config.toml",
        &format!(
            "model_provider = \"scripted\"\nmodel = \"gpt-5-codex\"\n\
             [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\n\
             env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
            endpoint.url()
        ),
    );
    // The test's worktrees are under /tmp, which workspace-write lets Codex write: closed.
    let agent = [
        "codex",
        "- extra args: -c sandbox_workspace_write.exclude_slash_tmp=true \
         -c sandbox_workspace_write.exclude_tmpdir_env_var=true",
    ];
    let env = vec![("OPENAI_API_KEY", "sk-test".to_string())];
    let its = check_three_attempts(
        &repo,
        "cx",
        &agent,
        &env,
        "the agent's edit was refused: patch rejected",
    );
    assert!(its[0].get("cost_usd").is_none(), "Codex reports no cost");
}

#[test]
#[cfg_attr(
    not(agent_cli_gemini),
    ignore = "needs Gemini CLI: set GIT_CONFERENCE_TEST_GEMINI to its executable"
)]
fn gemini_cli_researcher_keeps_rejects_and_records_refusals_and_usage() {
    let gemini = cli("GIT_CONFERENCE_TEST_GEMINI", "Gemini CLI");
    let repo = autoresearch(&gemini, "gemini");
    let endpoint = Endpoint::start(repo.tmp.path(), three_attempts());
    home_file(
        &repo,
        ".gemini/settings.json",
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false},"general":{"disableAutoUpdate":true}}"#,
    );
    let env = vec![
        ("GOOGLE_GEMINI_BASE_URL", endpoint.url()),
        ("GEMINI_API_KEY", "test-key".to_string()),
    ];
    check_three_attempts(
        &repo,
        "gm",
        &["gemini"],
        &env,
        "the agent's edit was refused: write_file: Path not in workspace",
    );
}

#[test]
#[cfg_attr(
    not(agent_cli_opencode),
    ignore = "needs opencode: set GIT_CONFERENCE_TEST_OPENCODE to its executable"
)]
fn opencode_researcher_keeps_rejects_and_records_refusals_and_usage() {
    let opencode = cli("GIT_CONFERENCE_TEST_OPENCODE", "opencode");
    let repo = autoresearch(&opencode, "opencode");
    let endpoint = Endpoint::start(repo.tmp.path(), three_attempts());
    home_file(
        &repo,
        ".config/opencode/opencode.json",
        &json!({
            "autoupdate": false,
            "share": "disabled",
            "provider": {"scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": format!("{}/v1", endpoint.url()), "apiKey": "sk-test"},
                "models": {"m": {"name": "m", "cost": {"input": 3, "output": 15}}}
            }}
        })
        .to_string(),
    );
    let its = check_three_attempts(
        &repo,
        "oc",
        &["opencode", "- model: scripted/m"],
        &[],
        "the agent's edit was refused: write of ../outside.py",
    );
    // $3 and $15 per million tokens: each model call costs $0.0045.
    assert!(its[0]["cost_usd"].as_f64().unwrap() >= 0.0045, "{}", its[0]);
}

/// The preset's own command line, run by `sh` in the repository with a 200 KB prompt (over
/// Linux's 128 KiB limit on one argument): the CLI gets it whole and makes its edit.
fn run_preset_with_a_long_prompt(
    repo: &TestRepo,
    preset: git_conference::agents::Preset,
    cli: &Path,
    endpoint: &Endpoint,
    env: &[(&str, String)],
) {
    let options = git_conference::agents::preset::Options {
        model: (preset == git_conference::agents::Preset::Opencode).then_some("scripted/m"),
        ..Default::default()
    };
    let line = preset.command_line(cli.to_str().unwrap(), &options);
    let files = git_conference::agents::prepare(&repo.dir, "").unwrap();
    let history: String = (0..4000)
        .map(|i| {
            format!(
                "- attempt {i:05}: lr {:.5} rejected, val_bpb worse\n",
                i as f64 / 1e5
            )
        })
        .collect();
    let prompt =
        format!("# Research task\n\n## History\n\n{history}\n## How to work\n\nEdit train.py.\n");
    assert!(prompt.len() > 200_000);
    std::fs::write(&files.prompt, prompt).unwrap();
    let mut cmd = repo.command("sh");
    cmd.arg("-c")
        .arg(&line)
        .env("CONFERENCE_PROMPT_FILE", &files.prompt)
        .env("CONFERENCE_AGENT_DIR", &files.dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{line}\n{stderr}");
    let train = std::fs::read_to_string(repo.dir.join("train.py")).unwrap();
    assert!(train.contains("lr = 0.03"), "{line}\n{stderr}");
    assert!(!endpoint.main_requests().is_empty());
}

fn one_edit() -> Value {
    json!([{"actions": [{"tool": "Read", "file": "train.py"},
                        {"tool": "Edit", "file": "train.py", "old": "lr = 0.1", "new": "lr = 0.03"}],
            "say": "Lowered the learning rate."}])
}

#[test]
#[cfg_attr(
    not(agent_cli_gemini),
    ignore = "needs Gemini CLI: set GIT_CONFERENCE_TEST_GEMINI to its executable"
)]
fn gemini_cli_takes_a_prompt_over_128_kib() {
    let gemini = cli("GIT_CONFERENCE_TEST_GEMINI", "Gemini CLI");
    let repo = autoresearch(&gemini, "gemini");
    let endpoint = Endpoint::start(repo.tmp.path(), one_edit());
    home_file(
        &repo,
        ".gemini/settings.json",
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
    );
    let env = [
        ("GOOGLE_GEMINI_BASE_URL", endpoint.url()),
        ("GEMINI_API_KEY", "test-key".to_string()),
    ];
    run_preset_with_a_long_prompt(
        &repo,
        git_conference::agents::Preset::Gemini,
        &gemini,
        &endpoint,
        &env,
    );
}

#[test]
#[cfg_attr(
    not(agent_cli_opencode),
    ignore = "needs opencode: set GIT_CONFERENCE_TEST_OPENCODE to its executable"
)]
fn opencode_takes_a_prompt_over_128_kib() {
    let opencode = cli("GIT_CONFERENCE_TEST_OPENCODE", "opencode");
    let repo = autoresearch(&opencode, "opencode");
    let endpoint = Endpoint::start(repo.tmp.path(), one_edit());
    home_file(
        &repo,
        ".config/opencode/opencode.json",
        &json!({"provider": {"scripted": {
            "npm": "@ai-sdk/openai-compatible",
            "options": {"baseURL": format!("{}/v1", endpoint.url()), "apiKey": "sk-test"},
            "models": {"m": {"name": "m"}}}}})
        .to_string(),
    );
    run_preset_with_a_long_prompt(
        &repo,
        git_conference::agents::Preset::Opencode,
        &opencode,
        &endpoint,
        &[],
    );
}

/// A stand-in for `claude` at `version`: it answers `--version` as Claude Code does, refuses
/// `--max-budget-usd` before 2.0 as 1.0.128 does, and otherwise changes nothing and says so.
fn fake_claude(version: &str) -> String {
    format!(
        r#"#!/bin/sh
if [ "$1" = --version ]; then echo "{version} (Claude Code)"; exit 0; fi
case "{version} $*" in
  1.*--max-budget-usd*) echo "error: unknown option '--max-budget-usd'" >&2; exit 1;;
esac
echo '{{"type":"result","subtype":"success","is_error":false,"result":"Nothing to change.","total_cost_usd":0.01,"usage":{{"input_tokens":1000,"output_tokens":100}}}}'
"#
    )
}

#[test]
fn a_cost_budget_with_a_claude_code_without_its_cap_is_refused_at_start() {
    let text = config("old", 1, 1, &["claude"], &["- **Cost budget:** $5"]);
    for (version, refused) in [("1.0.128", true), ("2.1.197", false)] {
        let repo = TestRepo::new();
        repo.write("prepare.py", PREPARE);
        repo.write("train.py", TRAIN);
        repo.commit_all("autoresearch layout");
        let fake = repo.tmp.path().join("fake-claude");
        std::fs::write(&fake, fake_claude(version)).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        repo.link_program("claude", &fake);
        let run = start(&repo, "old", &text, &[]);
        if refused {
            assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
            let line = text
                .lines()
                .position(|l| l.contains("Cost budget"))
                .unwrap()
                + 1;
            assert!(
                run.stderr
                    .contains(&format!("conference.md:{line}: Cost budget"))
                    && run.stderr.contains("Claude Code 1.0.128 does not have")
                    && run.stderr.contains("- **Cost budget:** none"),
                "{}",
                run.stderr
            );
            // Refused before anything was made.
            assert_eq!(repo.git(&["for-each-ref", "refs/conference/"]), "");
        } else {
            assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
            let its = iterations(&repo, "old");
            assert_eq!(its[0]["status"], "no_change", "{its:#?}");
            assert_eq!(its[0]["cost_usd"], 0.01, "{its:#?}");
        }
    }
}
