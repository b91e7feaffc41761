//! Knowing when a conference records an event, at no cost in between: one thread sleeps in the
//! kernel on an inotify watch of the folders git writes the events refs into (a ref update is a
//! lock file renamed into `refs/conference/<name>/`; `packed-refs` is rewritten the same way in
//! the git folder), and wakes only when one of them changes. It then reads each conference's
//! events ref and hands the events recorded since the last look to every open stream.
//!
//! With `--fetch`, the same thread also runs `git conference fetch` on the interval (a
//! conference running on other machines reaches this clone only that way): the fetch moves the
//! local events ref, which the watch then sees like any other event.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use git2::{Oid, Repository};
use tokio::sync::broadcast;

use crate::model::event::EventLine;
use crate::os::inotify::{self, Inotify};
use crate::store::{ConferenceRefs, EventLog};

/// The events one conference recorded since the last update, oldest first.
#[derive(Debug, Clone)]
pub struct Update {
    pub name: String,
    /// Events in its log after these.
    pub events: u64,
    pub lines: Vec<EventLine>,
}

/// The most events one update carries (a stream that falls further behind reloads).
const MAX_LINES: usize = 500;

const MASK: u32 = inotify::IN_MOVED_TO
    | inotify::IN_CREATE
    | inotify::IN_CLOSE_WRITE
    | inotify::IN_DELETE
    | inotify::IN_ONLYDIR;

/// Periodic `git conference fetch` of a shared remote.
#[derive(Debug, Clone)]
pub struct Fetch {
    pub every: Duration,
    pub remote: String,
}

/// Starts the watching thread of the repository whose git folder is `common_dir`.
pub fn spawn(
    common_dir: PathBuf,
    fetch: Option<Fetch>,
    updates: broadcast::Sender<Arc<Update>>,
) -> std::io::Result<()> {
    let inotify = Inotify::new()?;
    std::thread::Builder::new()
        .name("serve-watch".into())
        .spawn(move || watch_loop(&common_dir, &inotify, fetch, &updates))?;
    Ok(())
}

fn watch_loop(
    common_dir: &Path,
    inotify: &Inotify,
    fetch: Option<Fetch>,
    updates: &broadcast::Sender<Arc<Update>>,
) {
    let mut tips: HashMap<String, Oid> = HashMap::new();
    add_watches(common_dir, inotify);
    if let Ok(repo) = Repository::open(common_dir) {
        look(&repo, &mut tips, None);
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut next_fetch = fetch.as_ref().map(|f| Instant::now() + f.every);
    loop {
        let timeout = next_fetch.map(|at| at.saturating_duration_since(Instant::now()));
        if inotify.wait(timeout) {
            while inotify.read_events(&mut buf).is_some() {}
            // A folder made since (a new conference's) is watched from now on.
            add_watches(common_dir, inotify);
        }
        if let (Some(f), Some(at)) = (&fetch, next_fetch) {
            if Instant::now() >= at {
                run_fetch(common_dir, &f.remote);
                next_fetch = Some(Instant::now() + f.every);
            }
        }
        // Opened afresh each time: a repository kept open keeps libgit2's caches of every
        // event read, and a server left running for days would grow with its conference.
        if let Ok(repo) = Repository::open(common_dir) {
            look(&repo, &mut tips, Some(updates));
        }
    }
}

/// Watches the git folder (packed-refs), `refs/`, `refs/conference/` and each conference's
/// folder there; watching one already watched changes nothing.
fn add_watches(common_dir: &Path, inotify: &Inotify) {
    let conferences = common_dir.join("refs").join("conference");
    let mut dirs = vec![
        common_dir.to_path_buf(),
        common_dir.join("refs"),
        conferences.clone(),
    ];
    for entry in std::fs::read_dir(&conferences)
        .into_iter()
        .flatten()
        .flatten()
    {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(entry.path());
        }
    }
    for dir in dirs {
        let _ = inotify.add_watch(&dir, MASK);
    }
}

/// Reads each conference's events ref; sends what moved (when `updates` is given).
fn look(
    repo: &Repository,
    tips: &mut HashMap<String, Oid>,
    updates: Option<&broadcast::Sender<Arc<Update>>>,
) {
    let names = crate::store::refs::EVENTS_GLOB;
    let Ok(found) = repo.references_glob(names) else {
        return;
    };
    let now: Vec<(String, Oid)> = found
        .flatten()
        .filter_map(|r| {
            let name = crate::store::refs::conference_name_from_events_ref(r.name()?)?;
            Some((name.to_string(), r.target()?))
        })
        .collect();
    for (name, tip) in now {
        let before = tips.insert(name.clone(), tip);
        if before == Some(tip) {
            continue;
        }
        if let Some(updates) = updates {
            if let Some(update) = since(repo, &name, before) {
                let _ = updates.send(Arc::new(update));
            }
        }
    }
}

/// The events of `name` after `seen` (its tip at the last look), oldest first.
fn since(repo: &Repository, name: &str, seen: Option<Oid>) -> Option<Update> {
    let log = EventLog::open(repo, ConferenceRefs::new(name)).ok()?;
    let mut lines = Vec::new();
    log.walk(repo, |e| {
        if Some(e.commit) == seen || lines.len() >= MAX_LINES {
            return false;
        }
        lines.push(e.event);
        true
    })
    .ok()?;
    lines.reverse();
    let events = log
        .read(repo, crate::model::state::files::STATE)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("events")?.as_u64())
        .unwrap_or(0);
    Some(Update {
        name: name.to_string(),
        events,
        lines,
    })
}

/// `git conference fetch REMOTE` through this very binary: the fetch path users run, with its
/// locks and checks (a failure is printed and the next interval tries again).
fn run_fetch(common_dir: &Path, remote: &str) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    // The working tree around a `.git` folder, or the bare repository itself.
    let dir = match common_dir.file_name() {
        Some(n) if n == ".git" => common_dir.parent().unwrap_or(common_dir),
        _ => common_dir,
    };
    let out = std::process::Command::new(exe)
        .args(["--quiet", "fetch", remote])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output();
    if let Ok(out) = out {
        if !out.status.success() {
            crate::errln!(
                "git-conference serve: fetch from {remote} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
}
