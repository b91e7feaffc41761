//! One runner per conference: an OS advisory lock (`flock`) on the file `lock` in the
//! conference's run folder, held for the runner's whole life.
//!
//! The kernel releases the lock when its process dies, however it dies, so there is no stale lock
//! to detect and no pid that a later process could reuse: a lock that cannot be taken belongs to
//! a live process. The file also names that process (pid, host, start time), for the message a
//! second runner prints. Its descriptor is close-on-exec, so agents and evaluations never inherit
//! the lock (an orphaned agent must not keep the next `resume` out).

use std::fs::File;
use std::io::{Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub struct RunLock {
    path: PathBuf,
    /// Holds the flock; closing it (drop, or the process's death) releases the lock.
    _file: File,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// The pid that holds the flock on the file with inode `ino`, as the kernel lists it in
/// /proc/locks ("1: FLOCK  ADVISORY  WRITE <pid> <maj>:<min>:<inode> 0 EOF"); None where the
/// kernel offers no such list.
fn flock_holder(ino: u64) -> Option<String> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, file) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let inode = file.rsplit(':').next()?.parse::<u64>().ok()?;
        (*kind == "FLOCK" && inode == ino).then(|| pid.to_string())
    })
}

/// Who holds the lock: "<pid> <host> <since>" as its file says. The holder rewrites the file
/// right after taking the lock, so for a moment it may be empty or still name an earlier holder;
/// where the kernel names the holder (Linux), the file is read again until it agrees.
fn holder(path: &Path, ino: u64) -> (String, String, String) {
    let mut kernel = None;
    for _ in 0..50 {
        kernel = flock_holder(ino);
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut parts = text.split_whitespace();
        if let (Some(pid), Some(host), Some(since)) = (parts.next(), parts.next(), parts.next()) {
            if kernel.as_deref().is_none_or(|k| k == pid) {
                return (pid.to_string(), host.to_string(), since.to_string());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    (kernel.unwrap_or_else(|| "?".into()), "?".into(), "?".into())
}

/// The process running the conference whose run folder is `dir`, if one is alive: `status` and
/// `list` tell a running conference from one a Ctrl-C or a crash stopped. It only looks, never
/// locks: the kernel's lock list names the holder (Linux), else the pid the file names is checked
/// for life. A runner that exits deletes the file; a killed one leaves it unlocked.
pub fn runner(dir: &Path) -> Option<String> {
    let path = dir.join("lock");
    let ino = std::fs::metadata(&path).ok()?.ino();
    if std::path::Path::new("/proc/locks").exists() {
        return flock_holder(ino);
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let pid: i32 = text.split_whitespace().next()?.parse().ok()?;
    crate::os::is_alive(pid).then(|| pid.to_string())
}

/// A conference's status as people should read it: a state that says `running` with no live
/// runner was stopped by Ctrl-C or a crash.
pub fn shown_status(recorded: &str, runner: Option<&str>) -> String {
    match (recorded, runner) {
        ("running", Some(pid)) => format!("running (process {pid})"),
        ("running", None) => "interrupted (resume to continue)".to_string(),
        (other, _) => other.to_string(),
    }
}

impl RunLock {
    /// Takes the lock of the conference whose run folder is `dir`, or fails naming the live
    /// process that holds it.
    pub fn acquire(dir: &Path, name: &str) -> Result<RunLock> {
        RunLock::acquire_for(dir, &format!("conference `{name}`"))
    }

    /// Takes the lock in folder `dir` held by whoever runs `what` (for the message naming the
    /// live holder when it cannot be taken).
    pub fn acquire_for(dir: &Path, what: &str) -> Result<RunLock> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("lock");
        for _ in 0..50 {
            // std opens with O_CLOEXEC: children never inherit the descriptor, hence the lock.
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("cannot open the run lock {}", path.display()))?;
            match crate::os::try_lock_exclusive(&file) {
                Ok(true) => {}
                Ok(false) => {
                    let (pid, host, since) = holder(&path, file.metadata()?.ino());
                    bail!(
                        "{what} is already running (process {pid} on {host}, since {since}); \
                         wait for it, or stop it with `kill -INT {pid}`"
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot lock {}", path.display())),
            }
            // A runner that releases the lock deletes the file first: the file locked here must
            // still be the one at `path`, else another process may lock the new one.
            let ours = file.metadata()?;
            match std::fs::metadata(&path) {
                Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => {}
                _ => continue,
            }
            file.set_len(0)?;
            file.rewind()?;
            writeln!(
                file,
                "{} {} {}",
                std::process::id(),
                hostname(),
                crate::clock::now_iso()
            )?;
            return Ok(RunLock { path, _file: file });
        }
        bail!("could not take the run lock {}", path.display())
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Deleted while still locked (the descriptor closes after this), see `acquire`.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Processes (pid, command name), other than this one, that have the file `path` open, as /proc
/// lists them (empty where there is no /proc). A git lock file one of them holds is live, however
/// old it is.
pub fn processes_holding(path: &Path) -> Vec<(u32, String)> {
    let canonical = match (path.parent(), path.file_name()) {
        (Some(dir), Some(file)) => dir.canonicalize().map(|d| d.join(file)).ok(),
        _ => None,
    }
    .unwrap_or_else(|| path.to_path_buf());
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let holds = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == canonical))
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && holds(pid))
        .map(|pid| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (pid, name.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_status_table() {
        let cases = [
            ("running", Some("42"), "running (process 42)"),
            ("running", None, "interrupted (resume to continue)"),
            ("paused", None, "paused"),
            ("completed", None, "completed"),
            ("completed", Some("42"), "completed"),
        ];
        for (recorded, runner, want) in cases {
            assert_eq!(shown_status(recorded, runner), want);
        }
    }

    /// The lock excludes a second holder, and its descriptor is not inherited by children.
    #[test]
    fn exclusive_and_close_on_exec() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = RunLock::acquire(tmp.path(), "x").unwrap();
        let second = RunLock::acquire(tmp.path(), "x").err().unwrap().to_string();
        assert!(
            second.contains(&format!("process {}", std::process::id())),
            "{second}"
        );
        assert!(
            crate::os::is_close_on_exec(&lock._file),
            "the lock would leak into children"
        );
        assert_eq!(runner(tmp.path()), Some(std::process::id().to_string()));
        drop(lock);
        assert!(!tmp.path().join("lock").exists());
        assert_eq!(runner(tmp.path()), None);
        // A file left by a killed runner (no lock on it) names no live runner.
        std::fs::write(tmp.path().join("lock"), "999999999 host now\n").unwrap();
        assert_eq!(runner(tmp.path()), None);
        std::fs::remove_file(tmp.path().join("lock")).unwrap();
        RunLock::acquire(tmp.path(), "x").unwrap();
    }
}
