//! One runner per conference: an OS advisory lock on the file `lock` in the conference's run
//! folder, held for the runner's whole life.
//!
//! The lock is a POSIX record lock, which belongs to the process (`os::try_lock_process`): the
//! kernel releases it when the process dies, however it dies, so there is no stale lock to detect
//! and no pid that a later process could reuse, and a child never holds it. (It was a `flock`,
//! which belongs to the open file: a child the runner had forked and not yet exec'd kept it
//! after a `kill -9` of the runner, and the next `resume` was told a dead runner was running,
//! issue #45.) The file also names the holder (pid, host, start time), for the message a second
//! runner prints; its descriptor is close-on-exec.
//!
//! A process lock ends when its process closes any descriptor of the file, and a second lock the
//! same process takes always succeeds: this process's own locks are kept in [`HELD`], so it never
//! opens a file it holds again and never takes one twice.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The lock files this process holds, (device, inode), each with the line it wrote in it.
static HELD: Mutex<BTreeMap<(u64, u64), String>> = Mutex::new(BTreeMap::new());

/// How long a lock held by a process that is being killed is waited for (its kernel teardown
/// takes moments; on a loaded machine, longer).
const DYING_WAIT: Duration = Duration::from_secs(10);

pub struct RunLock {
    path: PathBuf,
    key: (u64, u64),
    /// Holds the lock; closing it (drop, or the process's death) releases it.
    _file: File,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn key(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// The line this process wrote in the lock file at `path`, when it holds it.
fn held_here(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    HELD.lock().unwrap().get(&key(&meta)).cloned()
}

/// Whether process `pid` is on its way out: gone, a zombie, or with a SIGKILL pending (Linux;
/// elsewhere only "gone" is seen). Its locks are released in a moment.
fn dying(pid: i32) -> bool {
    if !crate::os::is_alive(pid) {
        return true;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    if matches!(state, Some("Z" | "X" | "x")) {
        return true;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().any(|line| {
        let pending = line
            .strip_prefix("SigPnd:")
            .or_else(|| line.strip_prefix("ShdPnd:"));
        pending
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (libc::SIGKILL - 1)) != 0)
    })
}

/// Who holds the lock, whose pid is `pid` (as the kernel says): "<pid> <host> <since>" as its
/// file says. The holder rewrites the file right after taking the lock, so for a moment it may
/// be empty or still name an earlier holder: it is read again until it agrees. (This process's
/// own lock is never read from the file: closing it would release the lock.)
fn holder(path: &Path, pid: i32) -> (String, String) {
    for _ in 0..50 {
        let text = match held_here(path) {
            Some(line) => line,
            None => std::fs::read_to_string(path).unwrap_or_default(),
        };
        let mut parts = text.split_whitespace();
        if let (Some(named), Some(host), Some(since)) = (parts.next(), parts.next(), parts.next()) {
            if named == pid.to_string() {
                return (host.to_string(), since.to_string());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    ("?".into(), "?".into())
}

/// The process running the conference whose run folder is `dir`, if one is alive: `status` and
/// `list` tell a running conference from one a Ctrl-C or a crash stopped. It only looks, never
/// locks. A runner that exits deletes the file; a killed one leaves it unlocked.
pub fn runner(dir: &Path) -> Option<String> {
    let path = dir.join("lock");
    if held_here(&path).is_some() {
        return Some(std::process::id().to_string());
    }
    let file = File::open(&path).ok()?;
    crate::os::lock_owner(&file).map(|pid| pid.to_string())
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

/// What one try to lock the file found.
enum Try {
    /// The file, its (device, inode) and the line written in it.
    Taken(File, (u64, u64), String),
    /// The file was replaced meanwhile (its holder let go): try again.
    Again,
    /// Held by this live process.
    Held(i32),
}

impl RunLock {
    /// Takes the lock of the conference whose run folder is `dir`, or fails naming the live
    /// process that holds it.
    pub fn acquire(dir: &Path, name: &str) -> Result<RunLock> {
        RunLock::acquire_for(dir, &format!("conference `{name}`"))
    }

    /// Takes the lock in folder `dir` held by whoever runs `what` (for the message naming the
    /// live holder when it cannot be taken). A holder that is being killed is waited for, up to
    /// [`DYING_WAIT`]: `resume` right after a `kill -9` is not refused.
    pub fn acquire_for(dir: &Path, what: &str) -> Result<RunLock> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("lock");
        let refused = |pid: i32| {
            let (host, since) = holder(&path, pid);
            anyhow::anyhow!(
                "{what} is already running (process {pid} on {host}, since {since}); \
                 wait for it, or stop it with `kill -INT {pid}`"
            )
        };
        if held_here(&path).is_some() {
            return Err(refused(std::process::id() as i32));
        }
        let mut dying_since: Option<Instant> = None;
        for _ in 0..1000 {
            match try_once(&path)? {
                Try::Taken(file, key, line) => {
                    HELD.lock().unwrap().insert(key, line);
                    return Ok(RunLock {
                        path,
                        key,
                        _file: file,
                    });
                }
                Try::Again => continue,
                Try::Held(pid) if dying(pid) => {
                    let since = *dying_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > DYING_WAIT {
                        bail!(
                            "{what} is still locked by process {pid}, which is ending (killed); \
                             run the command again in a moment"
                        );
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Try::Held(pid) => return Err(refused(pid)),
            }
        }
        bail!("could not take the run lock {}", path.display())
    }
}

/// One try to take the lock at `path`.
fn try_once(path: &Path) -> Result<Try> {
    // std opens with O_CLOEXEC: no program this process starts has the descriptor.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot open the run lock {}", path.display()))?;
    match crate::os::try_lock_process(&file) {
        Ok(true) => {}
        Ok(false) => {
            return Ok(match crate::os::lock_owner(&file) {
                Some(pid) => Try::Held(pid),
                // Released between the two calls.
                None => Try::Again,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(Try::Again),
        Err(e) => return Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
    // A runner that releases the lock deletes the file first: the file locked here must still
    // be the one at `path`, else another process may lock the new one.
    let ours = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(now) if key(&now) == key(&ours) => {}
        _ => return Ok(Try::Again),
    }
    let line = format!(
        "{} {} {}",
        std::process::id(),
        hostname(),
        crate::clock::now_iso()
    );
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{line}")?;
    Ok(Try::Taken(file, key(&ours), line))
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Deleted while still locked (the descriptor closes after this), see `try_once`.
        let _ = std::fs::remove_file(&self.path);
        HELD.lock().unwrap().remove(&self.key);
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
        // Neither the refused second try nor `runner` let go of the lock (closing any
        // descriptor of the file in this process would).
        assert!(!crate::os::lockable_by_another_process(
            &tmp.path().join("lock")
        ));
        drop(lock);
        assert!(!tmp.path().join("lock").exists());
        assert_eq!(runner(tmp.path()), None);
        // A file left by a killed runner (no lock on it) names no live runner.
        std::fs::write(tmp.path().join("lock"), "999999999 host now\n").unwrap();
        assert_eq!(runner(tmp.path()), None);
        std::fs::remove_file(tmp.path().join("lock")).unwrap();
        RunLock::acquire(tmp.path(), "x").unwrap();
    }

    /// A holder on its way out (killed, not yet gone: a zombie here) is told from a live one.
    #[test]
    fn a_killed_process_is_dying_and_a_running_one_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(!dying(pid));
        assert!(crate::os::kill_process(pid));
        // Not reaped yet: a zombie until `wait`.
        let start = Instant::now();
        while !dying(pid) && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(dying(pid));
        child.wait().unwrap();
        assert!(dying(pid), "a process that is gone counts as ending");
    }
}
