//! Agent CLIs as researchers: the presets (`- **Command:** claude`, `codex`, `aider`, `gemini`,
//! `opencode`) that expand to each CLI's headless invocation, the parsers that read what each
//! one reports (usage, errors, refused edits), and the agent's folder inside its worktree.
//!
//! Everything an agent is given or asked to write (the prompt, the note) lives in
//! [`AGENT_DIR`] inside its worktree: agent CLIs only let the agent write under their working
//! directory. The folder holds a `.gitignore` of `*`, so git (and the snapshots, which leave
//! ignored files out) never takes it for part of an attempt.

pub mod call;
pub mod kind;
pub mod preset;
pub mod stderr;
pub mod usage;
pub mod version;

use std::path::{Path, PathBuf};

pub use kind::Kind;
pub use preset::Preset;
pub use usage::{AgentReport, Usage};

/// The agent's folder, relative to its worktree.
pub const AGENT_DIR: &str = ".conference";

/// The files of one agent run.
pub struct AgentFiles {
    pub dir: PathBuf,
    pub prompt: PathBuf,
    pub note: PathBuf,
}

/// Makes the agent folder of `worktree` (ignored by git through its own `.gitignore`), writes
/// the prompt there and removes the previous note.
pub fn prepare(worktree: &Path, prompt: &str) -> std::io::Result<AgentFiles> {
    let dir = worktree.join(AGENT_DIR);
    std::fs::create_dir_all(&dir)?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(
            &ignore,
            "# git-conference: the agent's prompt and note, never part of an attempt\n*\n",
        )?;
    }
    let files = AgentFiles {
        prompt: dir.join("prompt.md"),
        note: dir.join("note.md"),
        dir,
    };
    std::fs::write(&files.prompt, prompt)?;
    let _ = std::fs::remove_file(&files.note);
    Ok(files)
}

/// The note the agent wrote (trimmed, non-empty), which is then removed: the next run starts
/// without it.
pub fn take_note(files: &AgentFiles) -> Option<String> {
    let note = std::fs::read_to_string(&files.note).ok();
    let _ = std::fs::remove_file(&files.note);
    note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty())
}

/// Why an agent run left the worktree unchanged: what its CLI reported (a refused edit, an
/// error, a limit), else that it changed nothing, with its final words when it had some.
pub fn no_change_reason(report: &AgentReport) -> String {
    if let Some(problem) = &report.problem {
        return problem.clone();
    }
    match report
        .message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        Some(m) => {
            let said: String = m.split_whitespace().collect::<Vec<_>>().join(" ");
            let said = match said.char_indices().nth(160) {
                Some((i, _)) => format!("{}…", &said[..i]),
                None => said,
            };
            format!("the agent changed no file (it said: \"{said}\")")
        }
        None => "the agent changed no file".into(),
    }
}

/// What every known CLI leaves in its working folder as its own state (see
/// [`Preset::own_files`]): ignore rules of every handle on a researcher worktree, whatever the
/// agent command, so a command line of its own that runs aider is not rejected for aider's files.
pub fn own_files_of_every_cli() -> Vec<&'static str> {
    preset::ALL
        .into_iter()
        .flat_map(|p| p.own_files().iter().copied())
        .collect()
}

/// Environment every agent run gets, whatever its command: aider (unless `--gitignore` is on
/// its line) would otherwise add `.aider*` to the worktree's `.gitignore`, a change to a file the
/// researcher did not mean to make.
pub const RUN_ENV: &[(&str, &str)] = &[("AIDER_GITIGNORE", "false")];

/// The CLIs whose report a run of `command` prints: its preset's; for a command line of its
/// own, each known CLI it runs with the flag that makes it print its report. A wrapper script
/// names none, although its output may still be one (read all the same, see
/// [`usage::read`]).
pub fn reporting_clis(command: &str) -> Vec<Preset> {
    if let Some((preset, _)) = Preset::from_command(command) {
        return vec![preset];
    }
    Preset::named_in(command)
        .into_iter()
        .filter(|p| p.reports_on(command))
        .collect()
}

/// What `start` says about a command line of its own (not a preset, not built in): how its
/// output is read and which files are left out of every attempt, and a warning for a CLI it runs
/// without the flag that makes it report.
pub fn reading_of(command: &str) -> Option<(String, Vec<String>)> {
    if Kind::of(command) != Kind::Command {
        return None;
    }
    let command = command.trim();
    let named = Preset::named_in(command);
    let line = if named.is_empty() {
        "agent output: read as the report of Claude Code, Codex, Gemini CLI, opencode or aider \
         when it is one (a wrapper script's); those CLIs' own files are never part of an attempt"
            .to_string()
    } else {
        let formats: Vec<&str> = named.iter().map(|p| p.report_format()).collect();
        let owners: Vec<String> = named.iter().map(|p| format!("{}'s", p.product())).collect();
        let paths: Vec<&str> = named
            .iter()
            .flat_map(|p| p.own_files().iter().map(|f| f.trim_start_matches('/')))
            .collect();
        let files = if paths.is_empty() {
            "the files agent CLIs keep".to_string()
        } else {
            format!("{} files ({})", owners.join(" and "), paths.join(", "))
        };
        format!(
            "agent output: read as {} when it is one (tokens, cost, refusals); {files} are never \
             part of an attempt",
            formats.join(" or ")
        )
    };
    let warnings = named
        .iter()
        .filter(|p| !p.reports_on(command))
        .filter_map(|p| {
            Some(format!(
                "the agent command runs {} without `{}`: it prints no tokens or cost to read",
                p.product(),
                p.report_flag()?
            ))
        })
        .collect();
    Some((line, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_folder_is_ignored_by_git() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(tmp.path()).unwrap();
        let files = prepare(tmp.path(), "do it").unwrap();
        std::fs::write(&files.note, "  lowered lr \n").unwrap();
        assert!(repo
            .is_path_ignored(Path::new(".conference/note.md"))
            .unwrap());
        assert!(repo
            .is_path_ignored(Path::new(".conference/.gitignore"))
            .unwrap());
        let statuses = repo.statuses(None).unwrap();
        assert!(
            statuses.iter().all(|s| s.status().is_ignored()),
            "git sees nothing to add"
        );
        assert_eq!(take_note(&files).as_deref(), Some("lowered lr"));
        assert!(!files.note.exists(), "the note is removed once read");
        assert_eq!(std::fs::read_to_string(&files.prompt).unwrap(), "do it");
    }

    /// What `start` says of a command line of its own, and what it says nothing of.
    #[test]
    fn how_a_command_line_of_its_own_is_read() {
        let (line, warnings) = reading_of("claude -p \"$(cat x)\" --output-format json").unwrap();
        assert!(
            line.starts_with("agent output: read as Claude Code's JSON when it is one")
                && line.contains("(.claude/settings.local.json, .claude/scheduled_tasks.lock)"),
            "{line}"
        );
        assert!(warnings.is_empty());
        let (_, warnings) = reading_of("claude -p \"$(cat x)\"").unwrap();
        assert_eq!(
            warnings,
            [
                "the agent command runs Claude Code without `--output-format json`: it prints no \
              tokens or cost to read"
            ]
        );
        let (line, _) = reading_of("./our-agent.sh").unwrap();
        assert!(
            line.contains("Claude Code, Codex, Gemini CLI, opencode or aider"),
            "{line}"
        );
        for none in ["claude", "/opt/bin/aider", "builtin:tune", "builtin:openai"] {
            assert_eq!(reading_of(none), None, "{none}");
        }
        assert_eq!(reporting_clis("codex exec --json -"), [Preset::Codex]);
        assert!(reporting_clis("codex exec -").is_empty());
        assert_eq!(reporting_clis("gemini"), [Preset::Gemini]);
        // Every CLI's own files are ignored whatever the command.
        let all = own_files_of_every_cli();
        assert!(all.contains(&"/.aider*") && all.contains(&"/.opencode/node_modules/"));
    }
}
