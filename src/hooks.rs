//! Event hooks, as git has hooks: after an event is recorded, an executable named after the event
//! (`round.completed`, `conference.completed`, …) in the hooks folder runs with the event's JSON
//! on stdin and `CONFERENCE_NAME`/`CONFERENCE_EVENT` in its environment.
//!
//! The folder is the git config `conference.hooksPath`, else `<git-common-dir>/conference/hooks`.
//! A hook is a guest: it must never hold up or stop the conference. So it runs in the background
//! in its own process group, its output goes to `<run dir>/logs/hook-<event>.log` (not to the
//! conference's stdout or stderr, which a `| tee` would keep open), and past
//! `conference.hookTimeout` (default 30s) its whole group is killed. A failing, killed or
//! non-executable hook is reported in one line and the conference goes on. [`Hooks::finish`] waits
//! for the ones still running at exit, never past their time limit.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use git2::Repository;

use crate::store::EventLine;

pub const HOOKS_PATH_KEY: &str = "conference.hooksPath";
/// How long a hook may run before its process group is killed (a duration: `30s`, `2m`).
pub const HOOK_TIMEOUT_KEY: &str = "conference.hookTimeout";
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);
/// git's own switch for the "hook was ignored because it's not set as executable" hint.
const ADVICE_IGNORED_HOOK_KEY: &str = "advice.ignoredHook";

pub struct Hooks {
    dir: PathBuf,
    /// The repository's git dir: the conference's log folder is found from it when a hook runs.
    git_dir: PathBuf,
    timeout: Duration,
    advise_ignored: bool,
    /// Hooks already reported as not executable (once each).
    warned: BTreeSet<String>,
    running: Vec<Running>,
}

struct Running {
    event: String,
    child: Child,
    deadline: Instant,
    log: PathBuf,
}

/// The hooks folder of a repository.
pub fn hooks_dir(repo: &Repository) -> PathBuf {
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path(HOOKS_PATH_KEY).ok());
    match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => repo.workdir().unwrap_or_else(|| repo.commondir()).join(p),
        None => repo.commondir().join("conference").join("hooks"),
    }
}

/// `conference.hookTimeout`, or the default; a value that is not a duration is reported once.
fn hook_timeout(repo: &Repository) -> Duration {
    let Some(text) = repo
        .config()
        .ok()
        .and_then(|c| c.get_string(HOOK_TIMEOUT_KEY).ok())
    else {
        return DEFAULT_HOOK_TIMEOUT;
    };
    match crate::config::duration::parse_duration(&text) {
        Some(d) if !d.is_zero() => d,
        _ => {
            crate::errln!(
                "git-conference: git config {HOOK_TIMEOUT_KEY} = `{text}` is not a duration \
                 (e.g. 30s, 2m); using {}s",
                DEFAULT_HOOK_TIMEOUT.as_secs()
            );
            DEFAULT_HOOK_TIMEOUT
        }
    }
}

impl Hooks {
    pub fn new(repo: &Repository) -> Hooks {
        let advise_ignored = repo
            .config()
            .ok()
            .and_then(|c| c.get_bool(ADVICE_IGNORED_HOOK_KEY).ok())
            .unwrap_or(true);
        Hooks {
            dir: hooks_dir(repo),
            git_dir: repo.path().to_path_buf(),
            timeout: hook_timeout(repo),
            advise_ignored,
            warned: BTreeSet::new(),
            running: Vec::new(),
        }
    }

    /// Starts the hook for `event` if there is an executable one.
    pub fn run(&mut self, conference: &str, event: &EventLine) {
        self.reap();
        let path = self.dir.join(&event.event);
        let Ok(meta) = std::fs::metadata(&path) else {
            return;
        };
        if !meta.is_file() {
            return;
        }
        if meta.permissions().mode() & 0o111 == 0 {
            if self.advise_ignored && self.warned.insert(event.event.clone()) {
                crate::errln!(
                    "hint: the hook {} was ignored because it's not set as executable (chmod +x \
                     it; `git config {ADVICE_IGNORED_HOOK_KEY} false` silences this)",
                    path.display()
                );
            }
            return;
        }
        let log = match self.open_log(conference, &event.event) {
            Ok(log) => log,
            Err(e) => {
                crate::errln!("git-conference: hook {} could not run: {e}", path.display());
                return;
            }
        };
        let (log_path, out) = log;
        let spawned = out.try_clone().and_then(|err| {
            // A hook acts on the user's repository, as git's own hooks do.
            crate::exec::command(&path, crate::exec::GitEnv::Inherit)
                .env("CONFERENCE_NAME", conference)
                .env("CONFERENCE_EVENT", &event.event)
                .stdin(Stdio::piped())
                .stdout(out)
                .stderr(err)
                .process_group(0)
                .spawn()
        });
        match spawned {
            Ok(mut child) => {
                // From a thread: a hook that does not read its stdin must not block the caller.
                if let Some(mut stdin) = child.stdin.take() {
                    let mut json = serde_json::to_string(event).unwrap_or_default();
                    json.push('\n');
                    std::thread::spawn(move || {
                        let _ = stdin.write_all(json.as_bytes());
                    });
                }
                self.running.push(Running {
                    event: event.event.clone(),
                    child,
                    deadline: Instant::now() + self.timeout,
                    log: log_path,
                });
            }
            Err(e) => crate::errln!("git-conference: hook {} could not run: {e}", path.display()),
        }
    }

    /// `<run dir>/logs/hook-<event>.log`, opened for appending, with a line naming this run.
    fn open_log(&self, conference: &str, event: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
        let repo = Repository::open(&self.git_dir).map_err(std::io::Error::other)?;
        let dir = crate::git::worktree::run_dir(&repo, conference).join("logs");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("hook-{event}.log"));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        writeln!(file, "== {} {event}", crate::clock::now_iso())?;
        Ok((path, file))
    }

    /// Collects finished hooks and kills the ones past their time limit, reporting failures.
    fn reap(&mut self) {
        let timeout = self.timeout;
        self.running.retain_mut(|h| match h.child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    crate::errln!(
                        "git-conference: hook {} failed ({status}; its output is in {}); the \
                         conference goes on",
                        h.event,
                        h.log.display()
                    );
                }
                false
            }
            Ok(None) if Instant::now() >= h.deadline => {
                kill_group(&mut h.child);
                crate::errln!(
                    "git-conference: hook {} ran longer than {HOOK_TIMEOUT_KEY} ({}s) and was \
                     killed with its process group (its output is in {}); the conference goes on",
                    h.event,
                    timeout.as_secs_f64(),
                    h.log.display()
                );
                false
            }
            Ok(None) => true,
            Err(_) => false,
        });
    }

    /// Waits for the hooks still running, each until its time limit at most (then it is killed):
    /// the program exits at most `conference.hookTimeout` after the last hook started.
    pub fn finish(&mut self) {
        loop {
            self.reap();
            if self.running.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Hooks {
    /// A run that ends without `finish` (an error, a command that records an event) leaves no
    /// hook behind past its time limit.
    fn drop(&mut self) {
        self.finish();
    }
}

/// Kills a hook's whole process group (it was started as the group's leader) and reaps it.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // The process group this hook leads (its pgid is its pid).
        crate::os::kill_group(pid);
    }
    let _ = child.wait();
}
