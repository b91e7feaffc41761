//! Knowing what changed in a worktree without looking at every file: an inotify watch on its
//! folders, read after the agent and after the evaluation.
//!
//! A snapshot then adds only the paths the kernel reported, and a revert rewrites only those, so
//! an iteration's cost follows the files touched, not the size of the repository (scanning 10,000
//! files twice per iteration costs more than all the rest of the bookkeeping). Whenever the watch
//! cannot vouch for the answer — no inotify, too many folders, a queue overflow, a folder moved,
//! the worktree's index touched by the agent — it answers `Everything` and the caller scans.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::os::inotify::{self, Inotify};

/// What changed since the last `take`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Paths relative to the worktree (files or folders; deleted ones included).
    Paths(Vec<PathBuf>),
    /// Unknown: scan the worktree.
    Everything,
}

/// Folders watched at most; past this the worktree is scanned instead.
const MAX_DIRS: usize = 4096;

const MASK: u32 = inotify::IN_MODIFY
    | inotify::IN_ATTRIB
    | inotify::IN_CLOSE_WRITE
    | inotify::IN_CREATE
    | inotify::IN_DELETE
    | inotify::IN_MOVED_FROM
    | inotify::IN_MOVED_TO
    | inotify::IN_DELETE_SELF
    | inotify::IN_MOVE_SELF
    | inotify::IN_ONLYDIR
    | inotify::IN_DONT_FOLLOW
    | inotify::IN_EXCL_UNLINK;

/// Most watches (inotify instances) one process holds at once. A user has 128 instances by
/// default (`fs.inotify.max_user_instances`), shared with every other program they run: an
/// editor, `serve`, another conference. A runner of 256 researchers took them all, and those
/// programs failed with "Too many open files"; past this share a worktree is scanned instead.
pub const MAX_WATCHES: usize = 64;

/// How many watches this process holds.
static WATCHES: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_WATCHES`] a process may hold, given back when dropped.
struct WatchSlot;

impl WatchSlot {
    fn take() -> Option<WatchSlot> {
        WATCHES
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_WATCHES).then_some(n + 1)
            })
            .ok()
            .map(|_| WatchSlot)
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        WATCHES.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct Watch {
    inotify: Inotify,
    _slot: WatchSlot,
    root: PathBuf,
    /// Watch descriptor → folder relative to the root.
    dirs: HashMap<i32, PathBuf>,
    changed: BTreeSet<PathBuf>,
    rescan: bool,
    /// The worktree's index file as (len, mtime) at the last `take`: an agent running
    /// `git add` or `git commit` changes what a snapshot must start from.
    index_file: PathBuf,
    index_stamp: Option<(u64, std::time::SystemTime)>,
}

fn stamp(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

impl Watch {
    /// Starts watching the worktree at `root` (whose index file is `index_file`); `skip` names
    /// folders not worth watching (ignored ones). None when inotify is not available, or this
    /// process holds [`MAX_WATCHES`] already.
    pub fn start(root: &Path, index_file: &Path, skip: &dyn Fn(&Path) -> bool) -> Option<Watch> {
        let slot = WatchSlot::take()?;
        let inotify = Inotify::new().ok()?;
        let mut watch = Watch {
            inotify,
            _slot: slot,
            root: root.to_path_buf(),
            dirs: HashMap::new(),
            changed: BTreeSet::new(),
            rescan: false,
            index_file: index_file.to_path_buf(),
            index_stamp: stamp(index_file),
        };
        if !watch.add_tree(Path::new(""), skip) {
            return None;
        }
        Some(watch)
    }

    /// Watches `rel` and every folder below it; false when the limit is reached.
    fn add_tree(&mut self, rel: &Path, skip: &dyn Fn(&Path) -> bool) -> bool {
        let mut stack = vec![rel.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if self.dirs.len() >= MAX_DIRS {
                return false;
            }
            let full = self.root.join(&dir);
            let wd = match self.inotify.add_watch(&full, MASK) {
                Ok(wd) => wd,
                // Gone already (then its parent reported it).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                // Out of watches, or a path the kernel cannot take.
                Err(_) => return false,
            };
            self.dirs.insert(wd, dir.clone());
            for entry in std::fs::read_dir(&full).into_iter().flatten().flatten() {
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                let child = dir.join(entry.file_name());
                if is_dir && entry.file_name() != ".git" && !skip(&child) {
                    stack.push(child);
                }
            }
        }
        true
    }

    /// Reads the kernel's queue into the change set.
    fn drain(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Some(events) = self.inotify.read_events(&mut buf) {
            for event in events {
                self.note(event.wd, event.mask, &event.name);
            }
        }
    }

    fn note(&mut self, wd: i32, mask: u32, name: &std::ffi::OsStr) {
        if mask & inotify::IN_Q_OVERFLOW != 0 {
            self.rescan = true;
            return;
        }
        if mask & inotify::IN_IGNORED != 0 {
            self.dirs.remove(&wd);
            return;
        }
        let Some(dir) = self.dirs.get(&wd).cloned() else {
            return;
        };
        if mask & (inotify::IN_MOVE_SELF | inotify::IN_DELETE_SELF) != 0 {
            // A watched folder moved or went away: its old path is already reported by its
            // parent; a move leaves this watch under a stale name, so scan.
            if mask & inotify::IN_MOVE_SELF != 0 {
                self.rescan = true;
            }
            return;
        }
        let path = dir.join(name);
        if path.as_os_str() == ".git" || path.starts_with(".git") {
            return;
        }
        if mask & inotify::IN_ISDIR != 0 {
            if mask & (inotify::IN_MOVED_FROM | inotify::IN_MOVED_TO) != 0 {
                self.rescan = true;
                return;
            }
            if mask & inotify::IN_CREATE != 0 && !self.add_tree(&path, &|_| false) {
                self.rescan = true;
            }
        }
        self.changed.insert(path);
    }

    /// What changed since the last call (and forgets it).
    pub fn take(&mut self) -> Changes {
        self.drain();
        let index_now = stamp(&self.index_file);
        let index_touched = index_now != self.index_stamp;
        self.index_stamp = index_now;
        let changed = std::mem::take(&mut self.changed);
        if std::mem::take(&mut self.rescan) || index_touched {
            return Changes::Everything;
        }
        Changes::Paths(changed.into_iter().collect())
    }

    /// Forgets what happened so far (our own writes, e.g. a revert) and re-reads the index stamp.
    pub fn settle(&mut self) {
        self.drain();
        self.changed.clear();
        self.rescan = false;
        self.index_stamp = stamp(&self.index_file);
    }
}

/// Two change sets together (`Everything` wins).
pub fn union(a: &Changes, b: &Changes) -> Changes {
    match (a, b) {
        (Changes::Paths(x), Changes::Paths(y)) => {
            let mut all: BTreeSet<PathBuf> = x.iter().cloned().collect();
            all.extend(y.iter().cloned());
            Changes::Paths(all.into_iter().collect())
        }
        _ => Changes::Everything,
    }
}
