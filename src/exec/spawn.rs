//! Every process the program starts is built here: the user's `git`, agents, evaluations, hooks,
//! an agent CLI asked for its version. One place decides what a child inherits of this
//! process's environment, so that no call site forgets the variables by which git finds a
//! repository (`git --git-dir=… conference` exports them to us).
//!
//! Only the environment is decided here; what differs by purpose stays at the call site: the
//! process group (the user's git runs in its own group so that Ctrl-C stops the conference
//! gracefully, but a `git push` stays in the terminal's group where a credential helper can ask
//! for a password), stdin, where output goes. It uses nothing else of the crate, so every layer
//! may call it.

use std::ffi::OsStr;

/// The variables by which git finds a repository, its index or its objects. `git --git-dir=…
/// conference` exports them; a git started for another repository (a worktree, the demo's)
/// must not inherit them, or it would act on the repository they name.
pub const REPOSITORY_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_IMPLICIT_WORK_TREE",
];

/// What a child inherits of the variables in [`REPOSITORY_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitEnv {
    /// All of them: the child acts on the repository as the user's own `git` sees it (a hook,
    /// `git rev-parse` asked why the repository here cannot be opened), or never looks (an
    /// agent CLI's `--version`).
    Inherit,
    /// None of them: the child works in a worktree or another repository (agents, evaluations,
    /// the git commands the conference runs with `-C`, the demo's git).
    Clear,
}

/// A command for `program` with the environment [`GitEnv`] says (everything else inherited).
pub fn command(program: impl AsRef<OsStr>, git_env: GitEnv) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    if git_env == GitEnv::Clear {
        for var in REPOSITORY_ENV {
            cmd.env_remove(var);
        }
    }
    cmd
}

/// [`command`] for tokio.
pub fn async_command(program: impl AsRef<OsStr>, git_env: GitEnv) -> tokio::process::Command {
    tokio::process::Command::from(command(program, git_env))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables the command removes from what it inherits, and the ones it sets.
    fn changes(cmd: &std::process::Command) -> (Vec<String>, usize) {
        let removed = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        let set = cmd.get_envs().filter(|(_, v)| v.is_some()).count();
        (removed, set)
    }

    /// Cleared, every variable that names a repository is removed and nothing else changes;
    /// inherited, the environment is passed on untouched.
    #[test]
    fn only_a_cleared_command_forgets_the_repository() {
        let (removed, set) = changes(&command("sh", GitEnv::Clear));
        let mut want: Vec<String> = REPOSITORY_ENV.iter().map(|v| v.to_string()).collect();
        want.sort();
        assert_eq!((removed, set), (want, 0));
        assert_eq!(changes(&command("sh", GitEnv::Inherit)), (Vec::new(), 0));
        let out = command("sh", GitEnv::Clear)
            .args(["-c", "echo $PATH"])
            .output()
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
    }

    #[tokio::test]
    async fn the_async_command_carries_the_same_environment() {
        let cmd = async_command("sh", GitEnv::Clear);
        assert_eq!(changes(cmd.as_std()).0.len(), REPOSITORY_ENV.len());
    }
}
