use super::*;

fn sample(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/agent_output")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A run that wrote nothing on stderr.
fn parse_out(preset: Preset, stdout: &str) -> AgentReport {
    parse(preset, stdout, "")
}

fn usage(input: u64, output: u64, cost: Option<f64>) -> Option<Usage> {
    Some(Usage {
        input,
        output,
        cost_usd: cost,
    })
}

#[test]
fn claude_2_result_object_and_event_array() {
    let r = parse_out(Preset::Claude, &sample("claude-2.1-success.json"));
    assert_eq!(r.usage, usage(4000, 400, Some(0.03)));
    assert_eq!(r.problem, None);
    assert_eq!(r.message.as_deref(), Some("Lowered the learning rate."));
    // `--verbose`: an array of events, the result last.
    let r = parse_out(Preset::Claude, &sample("claude-2.1-verbose-events.json"));
    assert_eq!(r.usage, usage(4000, 400, Some(0.03)));
    assert_eq!(r.problem, None);
    // The same events one per line (stream-json).
    let lines: Vec<String> = json_values(&sample("claude-2.1-verbose-events.json"))
        .iter()
        .map(|v| v.to_string())
        .collect();
    let r = parse_out(Preset::Claude, &lines.join("\n"));
    assert_eq!(r.usage, usage(4000, 400, Some(0.03)));
}

#[test]
fn claude_refusals_and_limits_are_problems() {
    let r = parse_out(Preset::Claude, &sample("claude-2.1-refused.json"));
    assert_eq!(
        r.problem.as_deref(),
        Some("the agent's edit was refused: Write of /tmp/agsmp/outside.py")
    );
    assert_eq!(r.usage, usage(3000, 300, Some(0.0225)));
    let read_only = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok",
            "permission_denials":[{"tool_name":"Bash","tool_input":{"command":"python3 train.py"}}]}"#;
    assert_eq!(
        parse_out(Preset::Claude, read_only).problem.as_deref(),
        Some("the agent's tool calls were refused: Bash (python3 train.py)")
    );
    let r = parse_out(Preset::Claude, &sample("claude-2.1-max-turns.json"));
    assert!(r.problem.unwrap().contains("turn limit"));
    // Stopped by its budget: `usage` is zero, `modelUsage` has the tokens.
    let r = parse_out(Preset::Claude, &sample("claude-2.1-max-budget.json"));
    assert!(r.problem.unwrap().contains("spending cap"));
    assert_eq!(r.usage, usage(1000, 100, Some(0.0075)));
}

#[test]
fn claude_older_single_objects() {
    let r = parse_out(Preset::Claude, &sample("claude-1.0-object.json"));
    assert_eq!(r.usage, usage(12 + 5310 + 20480, 412, Some(0.0421)));
    assert_eq!(r.problem, None);
    let r = parse_out(Preset::Claude, &sample("claude-0.2-object.json"));
    assert_eq!(r.usage, usage(0, 0, Some(0.0034)));
    assert_eq!(
        r.message.as_deref(),
        Some("Done: lowered the learning rate.")
    );
}

#[test]
fn codex_events() {
    let r = parse_out(Preset::Codex, &sample("codex-exec-json.jsonl"));
    assert_eq!(r.usage, usage(24763, 122, None));
    assert_eq!(r.problem, None);
    assert_eq!(
        r.message.as_deref(),
        Some("Lowered the learning rate to 0.01.")
    );
    let r = parse_out(Preset::Codex, &sample("codex-exec-json-failed.jsonl"));
    let p = r.problem.unwrap();
    assert!(
        p.contains("refused: /repo/.git/conference/x/train.py"),
        "{p}"
    );
    assert!(p.contains("rate limit"), "{p}");
    assert_eq!(r.usage, None);
    let r = parse_out(Preset::Codex, &sample("codex-legacy-token-count.jsonl"));
    assert_eq!(r.usage, usage(5120, 240, None));
}

#[test]
fn aider_text() {
    let r = parse_out(Preset::Aider, &sample("aider-0.86-success.txt"));
    assert_eq!(r.usage, usage(2100, 34, Some(0.00034)));
    assert_eq!(r.problem, None);
    let r = parse_out(Preset::Aider, &sample("aider-0.86-no-match.txt"));
    assert_eq!(r.usage, usage(4300, 40, Some(0.00067)));
    let p = r.problem.unwrap();
    assert!(p.contains("SEARCH/REPLACE block failed to match"), "{p}");
    // The note folder is ignored on purpose: aider skipping it is no problem.
    let skipped = "Skipping edits to .conference/note.md that matches gitignore spec.";
    assert_eq!(parse_out(Preset::Aider, skipped).problem, None);
    let outside = "Skipping edits to ../outside.py, it is outside the repo.";
    assert!(parse_out(Preset::Aider, outside).problem.is_some());
    assert_eq!(aider_count("1.2M"), Some(1_200_000));
    assert_eq!(aider_count("12k"), Some(12_000));
}

#[test]
fn gemini_stats() {
    let r = parse_out(Preset::Gemini, &sample("gemini-json.json"));
    assert_eq!(r.usage, usage(24939 + 1200, 220 + 154 + 30, None));
    assert_eq!(r.problem, None);
    let r = parse_out(Preset::Gemini, &sample("gemini-json-error.json"));
    let p = r.problem.unwrap();
    assert!(
        p.contains("refused (1)") && p.contains("max session turns"),
        "{p}"
    );
}

#[test]
fn opencode_steps() {
    let r = parse_out(Preset::Opencode, &sample("opencode-run-json.jsonl"));
    assert_eq!(r.usage.unwrap().input, 10210 + 310 + 10200);
    assert_eq!(r.usage.unwrap().output, 88 + 14);
    assert!((r.usage.unwrap().cost_usd.unwrap() - 0.0053).abs() < 1e-9);
    assert_eq!(
        r.message.as_deref(),
        Some("Lowered the learning rate to 0.01.")
    );
    let r = parse_out(Preset::Opencode, &sample("opencode-run-json-denied.jsonl"));
    let p = r.problem.unwrap();
    assert!(
        p.contains("bash call was refused") && p.contains("invalid x-api-key"),
        "{p}"
    );
}

/// Recorded from the real CLIs against `tests/agents/scripted_llm.py` (1000 input and 100
/// output tokens per model call).
#[test]
fn claude_code_1_0_128_recorded() {
    // `usage` has the main model's 4 calls; `modelUsage` adds the title call to Haiku.
    let r = parse_out(Preset::Claude, &sample("claude-1.0.128-success.json"));
    // The CLI printed `0.019200000000000002`, and that is the figure read, to the bit.
    assert_eq!(r.usage, usage(5000, 500, Some(0.019200000000000002)));
    assert_eq!(r.problem, None);
    assert_eq!(r.message.as_deref(), Some("Lowered the learning rate."));
    let r = parse_out(Preset::Claude, &sample("claude-1.0.128-refused.json"));
    assert_eq!(
        r.problem.as_deref(),
        Some("the agent's edit was refused: Write of /tmp/rec/c1ref/outside.py")
    );
    let r = parse_out(Preset::Claude, &sample("claude-1.0.128-max-turns.json"));
    assert!(r.problem.unwrap().contains("turn limit"));
    // A Cost budget passes --max-budget-usd, which 1.x does not know: it exits 1.
    let stderr = sample("claude-1.0.128-max-budget-flag.stderr.txt");
    let p = parse(Preset::Claude, "", &stderr).problem.unwrap();
    assert!(
        p.contains("upgrade Claude Code or remove the Cost budget"),
        "{p}"
    );
}

#[test]
fn codex_0_169_recorded() {
    let r = parse_out(Preset::Codex, &sample("codex-0.169.0-success.jsonl"));
    assert_eq!(r.usage, usage(4000, 400, None));
    assert_eq!(r.problem, None, "a warning item is no problem");
    assert_eq!(r.message.as_deref(), Some("Lowered the learning rate."));
    // 30 of each call's 100 output tokens were reasoning: counted once.
    let r = parse_out(
        Preset::Codex,
        &sample("codex-0.169.0-outside-tmp-allowed.jsonl"),
    );
    assert_eq!(r.usage, usage(4000, 400, None));
    // The rejected patch is on stderr only.
    let stdout = sample("codex-0.169.0-refused.jsonl");
    assert_eq!(parse_out(Preset::Codex, &stdout).problem, None);
    let r = parse(
        Preset::Codex,
        &stdout,
        &sample("codex-0.169.0-refused.stderr.txt"),
    );
    assert_eq!(
        r.problem.as_deref(),
        Some(
            "the agent's edit was refused: patch rejected: writing outside of the project; \
                 rejected by user approval settings"
        )
    );
    let r = parse_out(Preset::Codex, &sample("codex-0.169.0-http-error.jsonl"));
    let p = r.problem.unwrap();
    assert!(
        p.starts_with("the agent's turn failed: unexpected status 404"),
        "{p}"
    );
    assert_eq!(r.usage, None);
}

#[test]
fn gemini_cli_0_61_recorded() {
    let r = parse_out(Preset::Gemini, &sample("gemini-0.61.0-success.json"));
    assert_eq!(r.usage, usage(5000, 500, None));
    assert_eq!(r.problem, None);
    assert_eq!(r.message.as_deref(), Some("Lowered the learning rate."));
    let stdout = sample("gemini-0.61.0-refused.json");
    let p = parse_out(Preset::Gemini, &stdout).problem.unwrap();
    assert!(
        p.starts_with("the agent's tool calls failed: ")
            && p.contains("write_file")
            && p.contains("run_shell_command"),
        "{p}"
    );
    let stderr = sample("gemini-0.61.0-refused.stderr.txt");
    let p = parse(Preset::Gemini, &stdout, &stderr).problem.unwrap();
    assert!(
        p.starts_with(
            "the agent's edit was refused: write_file: Path not in workspace: Attempted path"
        ) && p.ends_with("; the agent called a tool it may not use: run_shell_command"),
        "{p}"
    );
    // A failed run prints its JSON error object on stderr, after its log lines.
    let stderr = sample("gemini-0.61.0-api-error.stderr.txt");
    let p = parse(Preset::Gemini, "", &stderr).problem.unwrap();
    assert!(
        p.starts_with("the agent reported an error: {\"error\":{\"type\":\"not_found\""),
        "{p}"
    );
    let r = parse_out(
        Preset::Gemini,
        &sample("gemini-0.61.0-stdin-185k-prompt.json"),
    );
    assert_eq!(r.message.as_deref(), Some("Lowered the learning rate."));
    // The untrusted-folder note (a run without --skip-trust).
    let p = parse(
        Preset::Gemini,
        "",
        "Approval mode overridden to \"default\" because the current folder is not trusted.",
    );
    assert!(p.problem.unwrap().contains("--skip-trust"));
}

#[test]
fn opencode_1_18_recorded() {
    let r = parse_out(Preset::Opencode, &sample("opencode-1.18.33-success.jsonl"));
    let u = r.usage.unwrap();
    assert_eq!((u.input, u.output), (4000, 400));
    assert!((u.cost_usd.unwrap() - 0.018).abs() < 1e-9, "{u:?}");
    assert_eq!(r.problem, None);
    assert_eq!(r.message.as_deref(), Some("Lowered the learning rate."));
    let r = parse_out(Preset::Opencode, &sample("opencode-1.18.33-refused.jsonl"));
    assert_eq!(
        r.problem.as_deref(),
        Some("the agent's edit was refused: write of ../outside.py")
    );
    let r = parse_out(
        Preset::Opencode,
        &sample("opencode-1.18.33-bash-unavailable.jsonl"),
    );
    assert_eq!(
        r.problem.as_deref(),
        Some("the agent called a tool it may not use: bash")
    );
    let r = parse_out(
        Preset::Opencode,
        &sample("opencode-1.18.33-api-error.jsonl"),
    );
    assert_eq!(
        r.problem.as_deref(),
        Some(
            "the agent reported an error: Cannot connect to API: Unable to connect. Is the \
                 computer able to access the url?"
        )
    );
}

#[test]
fn unknown_flags_on_stderr_are_problems() {
    let p = parse(
        Preset::Codex,
        "",
        "\u{1b}[1;31merror:\u{1b}[0m unexpected argument '--bogus' found",
    );
    assert_eq!(
        p.problem.as_deref(),
        Some("Codex refused its command line: error: unexpected argument '--bogus' found")
    );
    let p = parse(Preset::Gemini, "", "Unknown argument: bogus");
    assert!(p
        .problem
        .unwrap()
        .starts_with("Gemini CLI refused its command line"));
    let p = parse(
        Preset::Aider,
        "",
        "aider: error: unrecognized arguments: --bogus",
    );
    assert!(p
        .problem
        .unwrap()
        .starts_with("aider refused its command line"));
    // What the CLIs print on stderr in a run that went well is no problem.
    for (preset, sample) in [
        (
            Preset::Codex,
            "WARNING: proceeding, even though we could not create PATH aliases",
        ),
        (
            Preset::Gemini,
            "Ripgrep is not available. Falling back to GrepTool.",
        ),
    ] {
        assert_eq!(parse(preset, "", sample).problem, None);
    }
}

/// The output of a command that is no preset is read as the CLI's whose report it is.
#[test]
fn any_output_is_read_as_the_cli_whose_report_it_is() {
    for (preset, name) in [
        (Preset::Claude, "claude-2.1-success.json"),
        (Preset::Claude, "claude-2.1-verbose-events.json"),
        (Preset::Claude, "claude-1.0.128-success.json"),
        (Preset::Codex, "codex-0.169.0-success.jsonl"),
        (Preset::Codex, "codex-legacy-token-count.jsonl"),
        (Preset::Aider, "aider-0.86-success.txt"),
        (Preset::Aider, "aider-0.86-no-match.txt"),
        (Preset::Gemini, "gemini-0.61.0-success.json"),
        (Preset::Opencode, "opencode-1.18.33-success.jsonl"),
    ] {
        let out = sample(name);
        let read = read(None, &out, "");
        assert_eq!(read, parse_out(preset, &out), "{name}");
        assert!(read.usage.is_some() || read.message.is_some(), "{name}");
    }
    // What the CLI says on stderr comes with its reading.
    let r = read(
        None,
        &sample("codex-0.169.0-refused.jsonl"),
        &sample("codex-0.169.0-refused.stderr.txt"),
    );
    assert!(r.problem.unwrap().contains("patch rejected"));
    // Without tokens or a final message an output is not taken for a report: a Gemini CLI
    // error object alone could be any program's.
    let error = sample("gemini-json-error.json");
    assert_eq!(read(None, &error, ""), AgentReport::default());
    // A script's own words are nobody's report.
    for out in ["", "lowered lr\n", "Tokens: many\n", "{\"x\": 1}", "[1, 2]"] {
        assert_eq!(
            read(None, out, "error: unknown option '--x'"),
            AgentReport::default()
        );
    }
}

#[test]
fn unknown_shapes_are_no_usage_never_an_error() {
    for preset in super::super::preset::ALL {
        for junk in [
            "",
            "not json at all",
            "{\"x\": 1}",
            "[1, 2, 3]",
            "{\"usage\": \"many\"}",
        ] {
            let r = parse(preset, junk, junk);
            assert_eq!(r.usage, None, "{preset:?} {junk}");
            assert_eq!(r.problem, None, "{preset:?} {junk}");
        }
    }
}
