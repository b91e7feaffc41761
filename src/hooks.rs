//! Event hooks, as git has hooks: after an event is recorded, an executable named after the event
//! (`round.completed`, `conference.completed`, …) in the hooks folder runs with the event's JSON
//! on stdin and `CONFERENCE_NAME`/`CONFERENCE_EVENT` in its environment.
//!
//! The folder is the git config `conference.hooksPath`, else `<git-common-dir>/conference/hooks`.
//! Hooks run in the background; a failing or missing hook is reported and never stops the
//! conference. [`Hooks::finish`] waits (bounded) for the ones still running before the program exits.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use git2::Repository;

use crate::store::Event;

pub const HOOKS_PATH_KEY: &str = "conference.hooksPath";

pub struct Hooks {
    dir: PathBuf,
    running: Vec<(String, Child)>,
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

impl Hooks {
    pub fn new(repo: &Repository) -> Hooks {
        Hooks {
            dir: hooks_dir(repo),
            running: Vec::new(),
        }
    }

    /// Starts the hook for `event` if there is an executable one.
    pub fn run(&mut self, conference: &str, event: &Event) {
        self.reap(false);
        let path = self.dir.join(&event.event);
        let executable = std::fs::metadata(&path)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        if !executable {
            return;
        }
        let json = serde_json::to_string(event).unwrap_or_default();
        let spawned = Command::new(&path)
            .env("CONFERENCE_NAME", conference)
            .env("CONFERENCE_EVENT", &event.event)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn();
        match spawned {
            Ok(mut child) => {
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(json.as_bytes());
                    let _ = stdin.write_all(b"\n");
                }
                self.running.push((event.event.clone(), child));
            }
            Err(e) => eprintln!("git-conference: hook {} could not run: {e}", path.display()),
        }
    }

    /// Collects finished hooks, reporting failures; with `wait`, waits up to 30 s for the rest.
    pub fn reap(&mut self, wait: bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.running.retain_mut(|(name, child)| match child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        eprintln!("git-conference: hook {name} failed ({status}); the conference goes on");
                    }
                    false
                }
                Ok(None) => true,
                Err(_) => false,
            });
            if !wait || self.running.is_empty() || Instant::now() > deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn finish(&mut self) {
        self.reap(true);
    }
}
