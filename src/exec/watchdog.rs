//! The runner's watchdog: a small process of its own that ends the runner's agents and
//! evaluations when the runner dies, however it dies.
//!
//! A runner killed with SIGKILL cannot end what it started. Its direct children die with it
//! (`os::die_with_parent`), but not what they started: a leader's children in its group, a
//! `setsid` child, a daemon. Left alone they ran until the next `resume`, past their own
//! timeout, writing into the worktrees. So the runner starts this watchdog (`git-conference
//! __watchdog <run folder> <runner pid>`, in a process group of its own, so that a Ctrl-C or a
//! kill of the runner's group leaves it) holding the read end of a pipe whose only write end
//! the runner keeps, closed on exec so no child inherits it. When the runner's process ends, the
//! kernel closes that end; the watchdog reads end-of-file and kills every process carrying
//! one of the runner's run marks (`contain`), with their groups, then exits. After a normal end
//! it finds nothing to kill. A watchdog killed too leaves the next `resume` to do it, as before.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::OnceLock;

/// The hidden subcommand the watchdog runs as.
pub const SUBCOMMAND: &str = "__watchdog";

/// The variable that carries the runner's pid to its watchdog: the hidden subcommand runs only
/// when it matches the last argument, so a user who types it gets the usual unknown-command error.
const RUNNER_VAR: &str = "GIT_CONFERENCE_WATCHDOG_OF";

/// The write end of the watchdog's pipe, held open for the runner's lifetime (never dropped).
static PIPE: OnceLock<ChildStdin> = OnceLock::new();

/// Starts the watchdog of this runner's runs from `run_dir` (once per process; nothing when the
/// program cannot start itself).
pub fn start(run_dir: &Path) {
    if PIPE.get().is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = super::command(exe, super::GitEnv::Clear);
    // Out of the repository's folder: a process that waits there for as long as the runner
    // lives would be taken for one of its runs' (and would keep the folder busy).
    if run_dir.is_absolute() {
        cmd.current_dir("/");
    }
    let spawned = cmd
        .arg(SUBCOMMAND)
        .arg(run_dir)
        .arg(std::process::id().to_string())
        .env_remove(super::contain::MARK_VAR)
        .env(RUNNER_VAR, std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if let Ok(mut child) = spawned {
        if let Some(pipe) = child.stdin.take() {
            let _ = PIPE.set(pipe);
        }
    }
}

/// The run folder and the runner's pid when this process was started as a runner's watchdog
/// (`git-conference __watchdog <run folder> <runner pid>`, the pid also in [`RUNNER_VAR`]).
pub fn invoked() -> Option<(PathBuf, i32)> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let [_, sub, run_dir, runner] = args.as_slice() else {
        return None;
    };
    let runner_var = std::env::var_os(RUNNER_VAR)?;
    if sub != SUBCOMMAND || *runner != runner_var {
        return None;
    }
    Some((PathBuf::from(run_dir), runner.to_str()?.parse().ok()?))
}

/// The watchdog itself: waits for the runner `runner` to end (end-of-file on stdin), then
/// kills what its runs from `run_dir` left, again while a pass finds something (a process
/// forked during the last). Returns the exit code.
pub fn watch(run_dir: &Path, runner: i32) -> i32 {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 64];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    for _ in 0..5 {
        if super::contain::kill_runs_of(run_dir, runner) == 0 {
            break;
        }
    }
    0
}
