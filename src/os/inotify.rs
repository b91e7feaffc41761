//! An inotify instance: the kernel's queue of changes to watched folders (Linux).

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub use libc::{
    IN_ATTRIB, IN_CLOSE_WRITE, IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_DONT_FOLLOW,
    IN_EXCL_UNLINK, IN_IGNORED, IN_ISDIR, IN_MODIFY, IN_MOVED_FROM, IN_MOVED_TO, IN_MOVE_SELF,
    IN_ONLYDIR, IN_Q_OVERFLOW,
};

/// One event from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The watch it came from, as [`Inotify::add_watch`] returned it.
    pub wd: i32,
    /// What happened (`IN_*` bits).
    pub mask: u32,
    /// The entry of the watched folder it is about (empty for the folder itself).
    pub name: OsString,
}

/// A non-blocking inotify descriptor, closed on drop and never inherited by children.
pub struct Inotify {
    file: File,
}

impl Inotify {
    /// A new instance (`inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`).
    ///
    /// Safety: the descriptor the kernel returns is new and owned by nobody else, so the
    /// `OwnedFd` made from it is its only owner and closes it once.
    pub fn new() -> std::io::Result<Inotify> {
        // SAFETY: a plain system call with no pointer argument.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: see the doc comment.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Inotify {
            file: File::from(owned),
        })
    }

    /// Watches the folder `path` for the events in `mask`; returns the watch descriptor.
    ///
    /// Safety: the path is passed as a NUL-terminated copy that lives across the call.
    pub fn add_watch(&self, path: &Path, mask: u32) -> std::io::Result<i32> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: see the doc comment; the descriptor is open while `self` lives.
        let wd = unsafe { libc::inotify_add_watch(self.file.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Blocks until the queue holds an event or `timeout` passes (None: no limit); true when
    /// there is something to read. The caller sleeps in the kernel meanwhile, costing no CPU.
    ///
    /// Safety: `poll` gets one `pollfd` that lives on the stack across the call.
    pub fn wait(&self, timeout: Option<std::time::Duration>) -> bool {
        let mut fd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: see the doc comment.
        let n = unsafe { libc::poll(&mut fd, 1, ms) };
        n > 0 && fd.revents & libc::POLLIN != 0
    }

    /// The events queued now, read with `buf` (which must hold at least one event with its
    /// name: 64 KiB does); None when the queue is empty or cannot be read.
    pub fn read_events(&self, buf: &mut [u8]) -> Option<Vec<Event>> {
        let n = match (&self.file).read(buf) {
            Ok(n) if n > 0 => n,
            _ => return None,
        };
        let header = std::mem::size_of::<libc::inotify_event>();
        let mut events = Vec::new();
        let mut offset = 0usize;
        while offset + header <= n {
            // SAFETY: the kernel wrote a whole event header at `offset` (offset + header <= n,
            // inside `buf`); read_unaligned copes with the byte buffer's alignment.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf.as_ptr().add(offset).cast()) };
            let name_bytes = &buf[offset + header..offset + header + event.len as usize];
            let name_end = name_bytes
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(name_bytes.len());
            events.push(Event {
                wd: event.wd,
                mask: event.mask,
                name: OsStr::from_bytes(&name_bytes[..name_end]).to_os_string(),
            });
            offset += header + event.len as usize;
        }
        Some(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_made_in_a_watched_folder_is_reported_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let wd = inotify
            .add_watch(tmp.path(), IN_CREATE | IN_ONLYDIR)
            .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        assert_eq!(inotify.read_events(&mut buf), None);
        std::fs::write(tmp.path().join("new.txt"), "x").unwrap();
        let events = inotify.read_events(&mut buf).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].wd, wd);
        assert!(events[0].mask & IN_CREATE != 0);
        assert_eq!(events[0].name, "new.txt");
        assert!(inotify
            .add_watch(&tmp.path().join("missing"), IN_CREATE)
            .is_err());
    }
}
