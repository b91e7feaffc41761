//! Knowing what changed in a worktree without looking at every file: an inotify watch on its
//! folders, read after the agent and after the evaluation.
//!
//! A snapshot then adds only the paths the kernel reported, and a revert rewrites only those, so
//! an iteration's cost follows the files touched, not the size of the repository (scanning 10,000
//! files twice per iteration costs more than all the rest of the bookkeeping). Whenever the watch
//! cannot vouch for the answer — no inotify, too many folders, a queue overflow, a folder moved,
//! the worktree's index touched by the agent — it answers `Everything` and the caller scans.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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

const MASK: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW
    | libc::IN_EXCL_UNLINK;

pub struct Watch {
    fd: i32,
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
    /// folders not worth watching (ignored ones). None when inotify is not available.
    pub fn start(root: &Path, index_file: &Path, skip: &dyn Fn(&Path) -> bool) -> Option<Watch> {
        // SAFETY: plain syscall; the descriptor is closed in Drop.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        let mut watch = Watch {
            fd,
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
            let Ok(c) = CString::new(full.as_os_str().as_bytes()) else {
                return false;
            };
            // SAFETY: valid descriptor and NUL-terminated path.
            let wd = unsafe { libc::inotify_add_watch(self.fd, c.as_ptr(), MASK) };
            if wd < 0 {
                // Gone already (then its parent reported it), or out of watches.
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
                    continue;
                }
                return false;
            }
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
        loop {
            // SAFETY: reading into an owned buffer of the given length.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return;
            }
            let mut offset = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while offset + header <= n as usize {
                // SAFETY: the kernel wrote a whole event here; read_unaligned copes with alignment.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf.as_ptr().add(offset).cast()) };
                let name_bytes = &buf[offset + header..offset + header + event.len as usize];
                let name_end = name_bytes
                    .iter()
                    .position(|&b| b == 0)
                    .unwrap_or(name_bytes.len());
                let name = std::ffi::OsStr::from_bytes(&name_bytes[..name_end]);
                self.note(event.wd, event.mask, name);
                offset += header + event.len as usize;
            }
        }
    }

    fn note(&mut self, wd: i32, mask: u32, name: &std::ffi::OsStr) {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            self.rescan = true;
            return;
        }
        if mask & libc::IN_IGNORED != 0 {
            self.dirs.remove(&wd);
            return;
        }
        let Some(dir) = self.dirs.get(&wd).cloned() else {
            return;
        };
        if mask & (libc::IN_MOVE_SELF | libc::IN_DELETE_SELF) != 0 {
            // A watched folder moved or went away: its old path is already reported by its
            // parent; a move leaves this watch under a stale name, so scan.
            if mask & libc::IN_MOVE_SELF != 0 {
                self.rescan = true;
            }
            return;
        }
        let path = dir.join(name);
        if path.as_os_str() == ".git" || path.starts_with(".git") {
            return;
        }
        if mask & libc::IN_ISDIR != 0 {
            if mask & (libc::IN_MOVED_FROM | libc::IN_MOVED_TO) != 0 {
                self.rescan = true;
                return;
            }
            if mask & libc::IN_CREATE != 0 && !self.add_tree(&path, &|_| false) {
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

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor we opened.
        unsafe {
            libc::close(self.fd);
        }
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
