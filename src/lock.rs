//! One runner per conference: a lock file in the conference's run folder names the process that
//! holds it. A lock whose process is gone (killed, machine rebooted) is stale and taken over.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

pub struct RunLock {
    path: PathBuf,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl RunLock {
    /// Takes the lock of the conference whose run folder is `dir`.
    pub fn acquire(dir: &Path, name: &str) -> Result<RunLock> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("lock");
        for _ in 0..3 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    writeln!(
                        f,
                        "{} {} {}",
                        std::process::id(),
                        hostname(),
                        crate::engine::now_iso()
                    )?;
                    return Ok(RunLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let mut parts = text.split_whitespace();
                    let pid: i32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
                    let host = parts.next().unwrap_or("").to_string();
                    let since = parts.next().unwrap_or("").to_string();
                    if pid > 0
                        && host == hostname()
                        && alive(pid)
                        && pid as u32 != std::process::id()
                    {
                        bail!(
                            "conference `{name}` is already running (process {pid} on {host}, since {since}); \
                             wait for it, or stop it with `kill -INT {pid}`"
                        );
                    }
                    if !host.is_empty() && host != hostname() {
                        bail!(
                            "conference `{name}` is locked by process {pid} on another host ({host}); \
                             if that run is dead, remove {}",
                            path.display()
                        );
                    }
                    // Stale: its process is gone. Take it over.
                    let _ = std::fs::remove_file(&path);
                }
                Err(e) => return Err(e.into()),
            }
        }
        bail!("could not take the lock {}", path.display())
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
