//! Agent CLIs as researchers: the presets (`- **Command:** claude`, `codex`, `aider`, `gemini`,
//! `opencode`) that expand to each CLI's headless invocation, the parsers that read what each
//! one reports (usage, errors, refused edits), and the agent's folder inside its worktree.
//!
//! Everything an agent is given or asked to write (the prompt, the note) lives in
//! [`AGENT_DIR`] inside its worktree: agent CLIs only let the agent write under their working
//! directory. The folder holds a `.gitignore` of `*`, so git (and the snapshots, which leave
//! ignored files out) never takes it for part of an attempt.

pub mod preset;
pub mod usage;

use std::path::{Path, PathBuf};

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

/// Paths (gitignore patterns) an agent CLI leaves in its working directory that are its own
/// bookkeeping, never part of an attempt: added as ignore rules to the worktree's handle.
pub fn scratch_patterns(command: &str) -> &'static [&'static str] {
    match Preset::from_command(command) {
        Some((Preset::Aider, _)) => &["/.aider*"],
        _ => &[],
    }
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
}
