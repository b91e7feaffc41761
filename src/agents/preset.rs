//! Presets: `- **Command:** claude` (or `codex`, `aider`, `gemini`, `opencode`, or a path to
//! one of these programs) expands to that CLI's documented headless invocation, with edits
//! auto-approved inside the working directory (the researcher's worktree) and nothing else,
//! and machine-readable output that [`super::usage`] reads.
//!
//! The expansion is a shell command line like any written by hand: `start` prints it, the
//! preset table of docs/agents.md lists each one. The prompt comes from
//! `$CONFERENCE_PROMPT_FILE`, always on stdin (or, for aider, by its file name), never as an
//! argument: Linux caps one argument at 128 KiB and a prompt with a long history exceeds it.
//! The remaining cost budget (Claude Code's native cap) comes from
//! `$CONFERENCE_MAX_BUDGET_USD`, set per run.
//!
//! Each flag was checked against the `--help` of the real CLI and a real run (Claude Code
//! 2.1.197 and 1.0.128, Codex 0.169.0, aider 0.86.2, Gemini CLI 0.61.0, opencode 1.18.33):
//! Gemini CLI needs `--skip-trust`, or in a folder it has not been told to trust it turns
//! `auto_edit` back into `default` and approves no edit.

use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Claude,
    Codex,
    Aider,
    Gemini,
    Opencode,
}

pub const ALL: [Preset; 5] = [
    Preset::Claude,
    Preset::Codex,
    Preset::Aider,
    Preset::Gemini,
    Preset::Opencode,
];

/// Environment variable holding the remaining cost budget in USD (for CLIs with a native cap).
pub const MAX_BUDGET_ENV: &str = "CONFERENCE_MAX_BUDGET_USD";

/// The optional Agent keys a preset takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options<'a> {
    pub model: Option<&'a str>,
    pub max_turns: Option<u32>,
    /// Appended verbatim (shell words) before the prompt.
    pub extra_args: Option<&'a str>,
    /// Pass the remaining cost budget down (`Cost budget` is set and the CLI has a cap).
    pub cost_cap: bool,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Claude => "claude",
            Preset::Codex => "codex",
            Preset::Aider => "aider",
            Preset::Gemini => "gemini",
            Preset::Opencode => "opencode",
        }
    }

    /// The CLI's product name, for messages.
    pub fn product(self) -> &'static str {
        match self {
            Preset::Claude => "Claude Code",
            Preset::Codex => "Codex",
            Preset::Aider => "aider",
            Preset::Gemini => "Gemini CLI",
            Preset::Opencode => "opencode",
        }
    }

    /// The preset a command names, with the program to run: a single word that is a preset's
    /// name, or a path whose file name is (`/opt/agents/bin/claude`). Anything with arguments
    /// is a command line of its own.
    pub fn from_command(command: &str) -> Option<(Preset, String)> {
        let word = command.trim();
        if word.is_empty() || word.contains(char::is_whitespace) {
            return None;
        }
        let file = word.rsplit('/').next().unwrap_or(word);
        ALL.into_iter()
            .find(|p| p.name() == file)
            .map(|p| (p, word.to_string()))
    }

    /// Why `model` cannot be this CLI's `--model`, if it cannot: opencode takes
    /// `provider/model` (1.18.33, given a bare model name, only says "Unexpected server
    /// error").
    pub fn model_problem(self, model: &str) -> Option<String> {
        let bare = !model.contains('/');
        (self == Preset::Opencode && bare)
            .then(|| "opencode takes its model as provider/model".to_string())
    }

    /// Whether the CLI has a turn limit flag.
    pub fn honours_max_turns(self) -> bool {
        self == Preset::Claude
    }

    /// Whether the CLI takes a spending cap (`--max-budget-usd`).
    pub fn has_cost_cap(self) -> bool {
        self == Preset::Claude
    }

    /// Whether the CLI reports a cost in USD (aider only for models whose prices it knows).
    pub fn reports_cost(self) -> bool {
        matches!(self, Preset::Claude | Preset::Aider | Preset::Opencode)
    }

    /// What this CLI leaves in its working folder as its own state, never part of an attempt
    /// (gitignore patterns from the worktree's root). aider: chat and input history, tags cache
    /// (`.aider.chat.history.md`, `.aider.input.history`, `.aider.tags.cache.v4/`); Claude Code:
    /// its local settings and task lock; Gemini CLI before mid-2025: its shell history; opencode:
    /// the plugin install and plans it writes under `.opencode/`. Codex keeps everything under
    /// `~/.codex`. A tracked file is never hidden by these: a change to it still counts.
    pub fn own_files(self) -> &'static [&'static str] {
        match self {
            Preset::Aider => &["/.aider*"],
            Preset::Claude => &[
                "/.claude/settings.local.json",
                "/.claude/scheduled_tasks.lock",
            ],
            Preset::Codex => &[],
            Preset::Gemini => &["/.gemini/shell_history"],
            Preset::Opencode => &[
                "/.opencode/node_modules/",
                "/.opencode/package.json",
                "/.opencode/package-lock.json",
                "/.opencode/bun.lock",
                "/.opencode/.gitignore",
                "/.opencode/plans/",
            ],
        }
    }

    /// The machine-readable report the CLI prints, for messages.
    pub fn report_format(self) -> &'static str {
        match self {
            Preset::Claude => "Claude Code's JSON",
            Preset::Codex => "Codex's JSON events",
            Preset::Aider => "aider's `Tokens:`/`Cost:` lines",
            Preset::Gemini => "Gemini CLI's JSON",
            Preset::Opencode => "opencode's JSON events",
        }
    }

    /// The flag a command line needs for the CLI to print that report (aider always prints it).
    pub fn report_flag(self) -> Option<&'static str> {
        match self {
            Preset::Claude | Preset::Gemini => Some("--output-format json"),
            Preset::Codex => Some("--json"),
            Preset::Opencode => Some("--format json"),
            Preset::Aider => None,
        }
    }

    /// Whether the command line `line` (one that runs this CLI) asks for its report
    /// (`--output-format json` or `stream-json`, `=` or a space between).
    pub fn reports_on(self, line: &str) -> bool {
        let given = |flag: &str, values: &[&str]| {
            values.iter().any(|v| {
                line.contains(&format!("{flag} {v}")) || line.contains(&format!("{flag}={v}"))
            })
        };
        match self {
            Preset::Claude | Preset::Gemini => given("--output-format", &["json", "stream-json"]),
            Preset::Codex => line.split_whitespace().any(|w| w == "--json"),
            Preset::Opencode => given("--format", &["json"]),
            Preset::Aider => true,
        }
    }

    /// The known CLIs a command line of its own runs: each word (after shell punctuation) whose
    /// file name is a CLI's (`claude -p …`, `/opt/bin/aider --message-file …`).
    pub fn named_in(line: &str) -> Vec<Preset> {
        let words = line.split(|c: char| c.is_whitespace() || ";|&()<>\"'`$".contains(c));
        let mut named = Vec::new();
        for word in words {
            let file = word.rsplit('/').next().unwrap_or(word);
            if let Some(p) = ALL.into_iter().find(|p| p.name() == file) {
                if !named.contains(&p) {
                    named.push(p);
                }
            }
        }
        named
    }

    /// The command line this preset runs (`program` is what the user wrote: `claude` or a path).
    pub fn command_line(self, program: &str, o: &Options) -> String {
        let mut s = String::new();
        let prog = quote(program);
        let model = o.model.map(|m| format!(" --model {}", quote(m)));
        let model = model.as_deref().unwrap_or("");
        let extra = o.extra_args.map(|a| format!(" {}", a.trim()));
        let extra = extra.as_deref().unwrap_or("");
        match self {
            Preset::Claude => {
                let _ = write!(
                    s,
                    "{prog} -p --permission-mode acceptEdits --output-format json{model}"
                );
                if let Some(n) = o.max_turns {
                    let _ = write!(s, " --max-turns {n}");
                }
                if o.cost_cap {
                    let _ = write!(s, " --max-budget-usd \"${MAX_BUDGET_ENV}\"");
                }
                let _ = write!(s, "{extra} < \"$CONFERENCE_PROMPT_FILE\"");
            }
            Preset::Codex => {
                let _ = write!(
                    s,
                    "{prog} exec --sandbox workspace-write --json{model}{extra} - < \"$CONFERENCE_PROMPT_FILE\""
                );
            }
            Preset::Aider => {
                let _ = write!(
                    s,
                    "{prog} --message-file \"$CONFERENCE_PROMPT_FILE\" --yes-always \
                     --no-auto-commits --no-dirty-commits --no-gitignore \
                     --no-suggest-shell-commands --no-detect-urls --no-check-update \
                     --no-analytics --no-show-release-notes --no-show-model-warnings \
                     --no-pretty --no-fancy-input --no-restore-chat-history \
                     --chat-history-file \"$CONFERENCE_AGENT_DIR/aider.chat.history.md\" \
                     --input-history-file \"$CONFERENCE_AGENT_DIR/aider.input.history\"\
                     {model}{extra} < /dev/null"
                );
            }
            // Both read the prompt from stdin when it is not a terminal (Gemini CLI 0.61,
            // opencode 1.18): no argument holds it, so no argv size limit applies.
            Preset::Gemini => {
                let _ = write!(
                    s,
                    "{prog} --skip-trust --approval-mode=auto_edit --output-format json{model}{extra} \
                     < \"$CONFERENCE_PROMPT_FILE\""
                );
            }
            Preset::Opencode => {
                let _ = write!(
                    s,
                    "OPENCODE_CONFIG_CONTENT='{{\"permission\":{{\"edit\":\"allow\",\"bash\":\"deny\",\"webfetch\":\"deny\"}}}}' \
                     {prog} run --format json{model}{extra} < \"$CONFERENCE_PROMPT_FILE\""
                );
            }
        }
        s
    }
}

/// `word` as one shell word: unchanged when it is plain, else in single quotes.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Why `args` cannot be appended to a command line as arguments, if it cannot: shell operators
/// would run something else than the CLI.
pub fn extra_args_problem(args: &str) -> Option<String> {
    for op in [";", "|", "&", ">", "<", "`", "$(", "\n"] {
        if args.contains(op) {
            return Some(format!(
                "`{op}` is a shell operator; extra args are arguments for the CLI only"
            ));
        }
    }
    let singles = args.matches('\'').count();
    let doubles = args.matches('"').count();
    if singles % 2 == 1 || doubles % 2 == 1 {
        return Some("a quote is not closed".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_are_presets_command_lines_are_not() {
        assert_eq!(
            Preset::from_command(" claude "),
            Some((Preset::Claude, "claude".into()))
        );
        assert_eq!(
            Preset::from_command("/opt/agents/bin/aider"),
            Some((Preset::Aider, "/opt/agents/bin/aider".into()))
        );
        assert_eq!(Preset::from_command("claude -p hi"), None);
        assert_eq!(Preset::from_command("./agent.sh"), None);
        assert_eq!(Preset::from_command("builtin:tune"), None);
    }

    #[test]
    fn each_preset_expands_to_its_headless_invocation() {
        let none = Options::default();
        assert_eq!(
            Preset::Claude.command_line("claude", &none),
            "claude -p --permission-mode acceptEdits --output-format json < \"$CONFERENCE_PROMPT_FILE\""
        );
        assert_eq!(
            Preset::Codex.command_line("codex", &none),
            "codex exec --sandbox workspace-write --json - < \"$CONFERENCE_PROMPT_FILE\""
        );
        let aider = Preset::Aider.command_line("aider", &none);
        for flag in [
            "--message-file \"$CONFERENCE_PROMPT_FILE\"",
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-check-update",
            "--no-analytics",
        ] {
            assert!(aider.contains(flag), "{aider}");
        }
        assert_eq!(
            Preset::Gemini.command_line("gemini", &none),
            "gemini --skip-trust --approval-mode=auto_edit --output-format json < \"$CONFERENCE_PROMPT_FILE\""
        );
        assert_eq!(
            Preset::Opencode.command_line("opencode", &none),
            "OPENCODE_CONFIG_CONTENT='{\"permission\":{\"edit\":\"allow\",\"bash\":\"deny\",\"webfetch\":\"deny\"}}' \
             opencode run --format json < \"$CONFERENCE_PROMPT_FILE\""
        );
    }

    /// Run through `sh` with a 200 KB prompt (over Linux's 128 KiB per argument): every preset
    /// hands the prompt over whole, on stdin or as a file name, never in one argument.
    #[test]
    fn no_preset_puts_the_prompt_in_an_argument() {
        let tmp = tempfile::tempdir().unwrap();
        // A stand-in for every CLI: its arguments' sizes, then what stdin held.
        let cli = tmp.path().join("cli");
        std::fs::write(
            &cli,
            "#!/bin/sh\nfor a in \"$@\"; do echo \"arg ${#a}\"; done\necho \"stdin $(wc -c)\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&cli, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let prompt = tmp.path().join("prompt.md");
        std::fs::write(&prompt, "x".repeat(200_000)).unwrap();
        for preset in ALL {
            let line = preset.command_line(cli.to_str().unwrap(), &Options::default());
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(&line)
                .env("CONFERENCE_PROMPT_FILE", &prompt)
                .env("CONFERENCE_AGENT_DIR", tmp.path())
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&out.stdout);
            let longest = out
                .lines()
                .filter_map(|l| l.strip_prefix("arg ")?.parse::<usize>().ok())
                .max()
                .unwrap_or(0);
            assert!(longest < 4096, "{preset:?}: an argument of {longest} bytes");
            let stdin: usize = out
                .lines()
                .find_map(|l| l.strip_prefix("stdin ")?.trim().parse().ok())
                .unwrap();
            let by_file = line.contains("--message-file \"$CONFERENCE_PROMPT_FILE\"");
            assert!(
                stdin == 200_000 || by_file,
                "{preset:?} reads the prompt from stdin ({stdin} bytes) or its file: {line}"
            );
        }
    }

    #[test]
    fn options_go_where_the_cli_reads_them() {
        let o = Options {
            model: Some("claude sonnet"),
            max_turns: Some(12),
            extra_args: Some("--verbose"),
            cost_cap: true,
        };
        assert_eq!(
            Preset::Claude.command_line("/x/claude", &o),
            "/x/claude -p --permission-mode acceptEdits --output-format json --model 'claude sonnet' \
             --max-turns 12 --max-budget-usd \"$CONFERENCE_MAX_BUDGET_USD\" --verbose < \"$CONFERENCE_PROMPT_FILE\""
        );
        let o = Options {
            model: Some("openai/gpt-4o"),
            ..Default::default()
        };
        assert!(Preset::Aider
            .command_line("aider", &o)
            .ends_with("--model openai/gpt-4o < /dev/null"));
    }

    /// The preset table of docs/agents.md shows the exact line each preset runs.
    #[test]
    fn the_docs_show_each_preset_line() {
        let agents = include_str!("../../docs/agents.md");
        for preset in ALL {
            let row = format!(
                "| `{}` | `{}` |",
                preset.name(),
                preset.command_line(preset.name(), &Options::default())
            );
            assert!(agents.contains(&row), "docs/agents.md lacks the row {row}");
        }
    }

    #[test]
    fn the_clis_a_command_line_runs() {
        let line = r#"claude -p "$(cat "$CONFERENCE_PROMPT_FILE")" --output-format json"#;
        assert_eq!(Preset::named_in(line), [Preset::Claude]);
        assert!(Preset::Claude.reports_on(line));
        assert!(!Preset::Claude.reports_on("claude -p hi"));
        assert!(!Preset::Claude.reports_on("claude -p hi --output-format text"));
        assert!(Preset::Claude.reports_on("claude -p --output-format=stream-json --verbose"));
        assert!(Preset::Opencode.reports_on("opencode run --format json"));
        assert_eq!(
            Preset::named_in("cd sub && /opt/bin/aider --message-file x; codex exec"),
            [Preset::Aider, Preset::Codex]
        );
        assert!(Preset::named_in("./agent.sh --claude-like claudes").is_empty());
    }

    #[test]
    fn extra_args_are_arguments_only() {
        assert!(extra_args_problem("--verbose --foo 'a b'").is_none());
        assert!(extra_args_problem("--x; rm -rf /").is_some());
        assert!(extra_args_problem("--x $(id)").is_some());
        assert!(extra_args_problem("--x 'open").is_some());
    }
}
