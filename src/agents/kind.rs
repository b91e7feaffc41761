//! Which researcher an agent command names, decided once from its text: the built-in tuner, the
//! built-in HTTP agent, a preset CLI, or a command line of the user's own. Everything that
//! differs by kind (how a run starts, what preflight checks, what reports usage, whether a
//! round may end as stuck) matches on [`Kind`], so a new built-in researcher is a new variant
//! the compiler asks every `match` about, never a string compared in one place and missed in
//! another.

use super::Preset;

/// The command that names the built-in tuner.
pub const BUILTIN_TUNE: &str = "builtin:tune";
/// The command that names the built-in HTTP agent (an OpenAI-compatible endpoint).
pub const BUILTIN_OPENAI: &str = "builtin:openai";
/// Every built-in researcher's command (what an unknown `builtin:` name is told to write).
pub const BUILTINS: [&str; 2] = [BUILTIN_TUNE, BUILTIN_OPENAI];

/// What runs as a researcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `builtin:tune`: proposes values for marked numeric literals, in-process.
    Tune,
    /// `builtin:openai`: asks a chat-completions endpoint for edits, in-process.
    OpenAi,
    /// A `builtin:` name this release does not have (validation refuses it).
    UnknownBuiltin(String),
    /// A preset CLI (`claude`, `codex`, ...), with the program to run.
    Preset(Preset, String),
    /// A command line of the user's own, run by the shell.
    Command,
}

impl Kind {
    /// The kind `command` (conference.md's `- command:`) names.
    pub fn of(command: &str) -> Kind {
        let command = command.trim();
        match command {
            BUILTIN_TUNE => Kind::Tune,
            BUILTIN_OPENAI => Kind::OpenAi,
            _ if command.starts_with("builtin:") => Kind::UnknownBuiltin(command.to_string()),
            _ => match Preset::from_command(command) {
                Some((preset, program)) => Kind::Preset(preset, program),
                None => Kind::Command,
            },
        }
    }

    /// Built into the program: nothing to install, no program to look up, no CLI output.
    pub fn is_builtin(&self) -> bool {
        matches!(self, Kind::Tune | Kind::OpenAi | Kind::UnknownBuiltin(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_names_one_kind() {
        let table = [
            ("builtin:tune", Kind::Tune),
            (" builtin:openai ", Kind::OpenAi),
            ("builtin:tun", Kind::UnknownBuiltin("builtin:tun".into())),
            ("claude", Kind::Preset(Preset::Claude, "claude".into())),
            (
                "/opt/bin/aider",
                Kind::Preset(Preset::Aider, "/opt/bin/aider".into()),
            ),
            ("claude -p hi", Kind::Command),
            ("./agent.sh", Kind::Command),
        ];
        for (command, kind) in table {
            assert_eq!(Kind::of(command), kind, "{command}");
        }
        assert!(Kind::of("builtin:tune").is_builtin());
        assert!(!Kind::of("./agent.sh").is_builtin());
    }
}
