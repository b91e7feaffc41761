//! Child processes with a timeout that kills the whole process group.
//!
//! Every command runs through `sh -c` in its own process group, so a timeout or Ctrl-C kills the
//! evaluation together with everything it started. Output goes to files rather than pipes: a
//! grandchild that keeps a pipe open can then never hang the conference, and the log of every run
//! stays on disk for the user to read.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;

/// Variables from the user's git invocation that must not leak into commands run in worktrees.
const GIT_ENV_TO_CLEAR: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
];

static CANCELLED: AtomicBool = AtomicBool::new(false);
static RUNNING_GROUPS: Mutex<Option<HashSet<i32>>> = Mutex::new(None);
/// Folder where each running group leaves a file (`<pgid>` holding its leader's start time), so
/// that the next runner can kill the groups a killed runner left behind.
static GROUPS_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// What to run.
pub struct Spec<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// Where stdout and stderr are written (the directory must exist).
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub stdin: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Cancelled,
}

impl Outcome {
    pub fn success(&self) -> bool {
        *self == Outcome::Exited(0)
    }
    pub fn describe(&self) -> String {
        match self {
            Outcome::Exited(code) => format!("exit status {code}"),
            Outcome::Signaled(sig) => format!("killed by signal {sig}"),
            Outcome::TimedOut => "timed out".into(),
            Outcome::Cancelled => "interrupted".into(),
        }
    }
}

pub struct Finished {
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// Asks every running command to stop (Ctrl-C): kills their process groups.
pub fn cancel_all() {
    CANCELLED.store(true, Ordering::SeqCst);
    let groups = RUNNING_GROUPS.lock().unwrap();
    if let Some(groups) = groups.as_ref() {
        for pgid in groups {
            kill_group(*pgid);
        }
    }
}

pub fn cancelled() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

/// Ctrl-C while a run starts up (lock taken, worktrees being prepared), before the engine's
/// handler is in place: the first press asks for a graceful stop (the engine sees `cancelled()`
/// and exits 130 with the resume hint), a second one exits at once.
pub fn handle_early_interrupts() {
    extern "C" fn on_sigint(_: libc::c_int) {
        if CANCELLED.swap(true, Ordering::SeqCst) {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(130) };
        }
    }
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: killpg only sends a signal; a stale group id is harmless (ESRCH).
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

fn register(pgid: i32) {
    RUNNING_GROUPS
        .lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(pgid);
    if let (Some(dir), Some(start)) = (GROUPS_DIR.get(), start_time(pgid)) {
        let _ = std::fs::write(dir.join(pgid.to_string()), start);
    }
}

fn unregister(pgid: i32) {
    if let Some(groups) = RUNNING_GROUPS.lock().unwrap().as_mut() {
        groups.remove(&pgid);
    }
    if let Some(dir) = GROUPS_DIR.get() {
        let _ = std::fs::remove_file(dir.join(pgid.to_string()));
    }
}

/// The start time of process `pid` (field 22 of /proc/<pid>/stat), to tell it from a later
/// process that got the same id.
fn start_time(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19).map(str::to_string)
}

/// Records running process groups under `dir` from now on (call with the run lock held).
pub fn track_groups_in(dir: &Path) {
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = GROUPS_DIR.set(dir.to_path_buf());
    }
}

/// Kills the process groups that a killed runner left running (agents and evaluations still
/// writing into worktrees). A group whose leader now has another start time is someone else's.
pub fn kill_orphaned_groups(dir: &Path) -> usize {
    let mut killed = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let recorded = std::fs::read_to_string(&path).unwrap_or_default();
        if let Ok(pgid) = entry.file_name().to_string_lossy().parse::<i32>() {
            let same_leader = match start_time(pgid) {
                Some(now) => now == recorded.trim(),
                // The leader is gone; while its group lives, no new process can take its id.
                None => true,
            };
            if pgid > 1 && same_leader {
                // SAFETY: signals a process group we started; ESRCH when it is already gone.
                if unsafe { libc::killpg(pgid, libc::SIGKILL) } == 0 {
                    killed += 1;
                }
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    killed
}

/// Runs `spec` to completion, timeout or cancellation.
pub async fn run(spec: Spec<'_>) -> Result<Finished> {
    let started = Instant::now();
    if cancelled() {
        return Ok(Finished {
            outcome: Outcome::Cancelled,
            elapsed: Duration::ZERO,
        });
    }
    let stdout = std::fs::File::create(&spec.stdout)
        .with_context(|| format!("cannot create {}", spec.stdout.display()))?;
    let stderr = std::fs::File::create(&spec.stderr)
        .with_context(|| format!("cannot create {}", spec.stderr.display()))?;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(spec.command)
        .current_dir(spec.cwd)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .process_group(0)
        .kill_on_drop(true);
    for var in GIT_ENV_TO_CLEAR {
        cmd.env_remove(var);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run `{}` in {}", spec.command, spec.cwd.display()))?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    register(pgid);
    if cancelled() {
        kill_group(pgid);
    }
    if let (Some(input), Some(mut stdin)) = (spec.stdin, child.stdin.take()) {
        // A command that does not read its stdin must not fail the run.
        let _ = stdin.write_all(&input).await;
        drop(stdin);
    }
    let waited = match spec.timeout {
        Some(limit) => tokio::time::timeout(limit, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    let outcome = match waited {
        Some(status) => {
            let status = status?;
            // The leader is gone; stragglers it left in its group go with it.
            kill_group(pgid);
            if cancelled() {
                Outcome::Cancelled
            } else if let Some(code) = status.code() {
                Outcome::Exited(code)
            } else {
                use std::os::unix::process::ExitStatusExt;
                Outcome::Signaled(status.signal().unwrap_or(0))
            }
        }
        None => {
            kill_group(pgid);
            let _ = child.wait().await;
            Outcome::TimedOut
        }
    };
    unregister(pgid);
    Ok(Finished {
        outcome,
        elapsed: started.elapsed(),
    })
}

/// Reads a log file written by [`run`], lossily.
pub fn read_output(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}
