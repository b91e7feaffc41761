//! The only place that talks to the operating system below std: every `libc` call and every
//! `unsafe` block of the program is here, each behind a small safe function whose doc comment
//! says why it is safe. The rest of the crate is compiled with `#![deny(unsafe_code)]`, so the
//! compiler keeps it that way.
//!
//! It sits below everything (it uses nothing of the crate), and it decides nothing: each
//! function does one system call (or a fixed handful), and the callers say what it is for.
//! Signals sent here are always SIGKILL: nothing the program stops is asked to clean up first.

pub mod inotify;

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, Ordering};
use std::time::Duration;

/// Milliseconds on the monotonic clock, plus one (so that 0 can mean "never").
///
/// Safety: `clock_gettime` only writes into the `timespec` it is given, which lives on this
/// stack frame; it is async-signal-safe, so the SIGINT handler below may call this.
pub fn monotonic_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: see the doc comment: `ts` is a valid, exclusively borrowed timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000 + 1
}

/// What the SIGINT handler sets on the first press (null: nothing installed yet).
static SIGINT_FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());
/// Monotonic time of the first press in ms (from [`monotonic_ms`]; 0: no press yet).
static SIGINT_FIRST_MS: AtomicI64 = AtomicI64::new(0);
/// Presses closer than this to the first one count as the same press.
static SIGINT_SAME_PRESS_MS: AtomicI64 = AtomicI64::new(0);
/// The exit status of a second press.
static SIGINT_EXIT_CODE: AtomicI32 = AtomicI32::new(130);

extern "C" fn on_sigint(_: libc::c_int) {
    let now = monotonic_ms();
    match SIGINT_FIRST_MS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            let flag = SIGINT_FLAG.load(Ordering::SeqCst);
            // SAFETY: the pointer is null or comes from a `&'static AtomicBool` (see
            // `on_interrupt`), so it is valid for the whole life of the process.
            if let Some(flag) = unsafe { flag.as_ref() } {
                flag.store(true, Ordering::SeqCst);
            }
        }
        Err(first) if now - first < SIGINT_SAME_PRESS_MS.load(Ordering::SeqCst) => {}
        // SAFETY: _exit is async-signal-safe and ends the process without running anything.
        Err(_) => unsafe { libc::_exit(SIGINT_EXIT_CODE.load(Ordering::SeqCst)) },
    }
}

/// Installs the process's SIGINT handler: the first press sets `first_press`; presses within
/// `same_press` of the first are ignored (one Ctrl-C can arrive twice); a later press ends the
/// process at once with `exit_code`, running nothing more. Calling it again replaces the
/// settings. A handler installed later by someone else (tokio's) chains to this one.
///
/// Safety: the handler only loads and stores atomics, reads the monotonic clock and calls
/// `_exit`, all async-signal-safe; the flag it stores to is `'static`, so it outlives any signal.
pub fn on_interrupt(first_press: &'static AtomicBool, same_press: Duration, exit_code: i32) {
    SIGINT_SAME_PRESS_MS.store(same_press.as_millis() as i64, Ordering::SeqCst);
    SIGINT_EXIT_CODE.store(exit_code, Ordering::SeqCst);
    SIGINT_FLAG.store(
        first_press as *const AtomicBool as *mut AtomicBool,
        Ordering::SeqCst,
    );
    // SAFETY: see the doc comment: the handler is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// Hands the heap's free memory back to the kernel (glibc's `malloc_trim`). A long-lived server
/// whose requests each build and drop megabytes otherwise keeps the freed pages of every
/// malloc arena its threads used: its resident memory creeps up with no leak. Elsewhere (musl)
/// it does nothing.
///
/// Safety: `malloc_trim` takes the allocator's own locks and only releases pages that hold no
/// allocation; it touches no memory the program owns.
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: see the doc comment.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes the allocator give every block of `bytes` or more its own mapping, returned to the
/// kernel when freed, instead of raising that threshold as it goes (glibc raises it to the size
/// of each large block freed, up to 32 MiB, after which large blocks are cut from the heap and
/// the freed space stays resident). Elsewhere (musl) it does nothing.
///
/// Safety: `mallopt` only sets a parameter of the allocator; called at start-up, before other
/// threads allocate, it races with nothing.
pub fn fixed_mmap_threshold(bytes: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: see the doc comment.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bytes;
}

/// Makes every thread allocate from one malloc arena (glibc's main heap) instead of one arena per
/// thread, up to eight per core. Each arena keeps its own freed pages between live blocks; a
/// process that runs for days on a pool of threads spreads its long-lived blocks over all of
/// them. Elsewhere (musl) it does nothing.
///
/// Safety: `mallopt` only sets a parameter of the allocator; called at start-up, before other
/// threads allocate, it races with nothing.
pub fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: see the doc comment.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Writes to a closed pipe fail with an error (EPIPE) instead of killing the process.
///
/// Safety: setting a signal's disposition to "ignore" installs no handler.
pub fn ignore_sigpipe() {
    // SAFETY: see the doc comment.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// A write to a closed pipe kills the process quietly, as it does a C program such as git.
///
/// Safety: restoring a signal's default disposition installs no handler.
pub fn default_sigpipe() {
    // SAFETY: see the doc comment.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Sends SIGKILL to the process group `pgid`; true when it was sent. Group ids below 1 (this
/// process's own group, or every process) are refused, returning false.
///
/// Safety: `killpg` touches no memory of this process; a stale id is answered with ESRCH.
pub fn kill_group(pgid: i32) -> bool {
    // SAFETY: see the doc comment.
    pgid > 0 && unsafe { libc::killpg(pgid, libc::SIGKILL) } == 0
}

/// Sends SIGKILL to the process `pid`; true when it was sent. Ids below 1 (which name groups
/// or every process) are refused, returning false.
///
/// Safety: `kill` touches no memory of this process; a stale pid is answered with ESRCH.
pub fn kill_process(pid: i32) -> bool {
    // SAFETY: see the doc comment.
    pid > 0 && unsafe { libc::kill(pid, libc::SIGKILL) } == 0
}

/// Kills this process with SIGKILL, as a crash would: no destructor, no buffered output, no exit
/// handler runs (the crash tests' failpoints).
///
/// Safety: `kill` on our own pid touches no memory; the signal is delivered before it returns.
pub fn kill_self() {
    // SAFETY: see the doc comment.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

/// Whether a process `pid` exists and this user may signal it (`kill(pid, 0)`); false for ids
/// below 1.
///
/// Safety: signal 0 sends nothing; it only checks.
pub fn is_alive(pid: i32) -> bool {
    // SAFETY: see the doc comment.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// Makes this process the reaper of its orphaned descendants (Linux; elsewhere nothing).
///
/// Safety: `prctl(PR_SET_CHILD_SUBREAPER)` only sets a flag on this process.
pub fn set_child_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: see the doc comment.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Has the child `cmd` starts killed (SIGKILL) when the thread that started it ends, which for
/// the runner's long-lived worker threads means when the runner dies, even by SIGKILL (Linux's
/// parent-death signal; elsewhere nothing). A parent that died before the flag was set is
/// caught too: the child then kills itself before it runs anything. Only the child itself is
/// covered; what it starts is not (the runner's watchdog ends those).
///
/// Safety: the closure runs in the child between fork and exec, where only async-signal-safe
/// calls are allowed: `prctl`, `getppid` and `raise` are, and it allocates nothing (the parent's
/// id is copied in before the fork).
pub fn die_with_parent(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: see the doc comment.
        let parent = unsafe { libc::getpid() };
        // SAFETY: see the doc comment.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// Reaps the child `pid` if it has ended, without waiting. True when there is nothing left to
/// wait for (it was reaped, or it is not a child of ours); false while it still runs.
///
/// Safety: `waitpid` with a null status pointer writes nothing. Only call it for children no
/// `Child` handle waits for (adopted orphans), else that handle loses the exit status.
pub fn try_reap(pid: i32) -> bool {
    // SAFETY: see the doc comment.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) != 0 }
}

/// The whole-file write lock `fcntl` takes or queries.
fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers, for which all zeroes is a valid value.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock
}

/// Takes an exclusive POSIX record lock (`fcntl(F_SETLK)`) on the whole of `file` without
/// waiting: true when taken, false when another process holds it. An error of kind
/// `Interrupted` (EINTR) means "try again".
///
/// The lock belongs to this process, not to the open file (unlike `flock`): a child never
/// holds it, not even between its fork and its exec, so it ends with this process however it
/// ends. It also ends when this process closes *any* descriptor of the file: callers open the
/// file once while they hold it.
///
/// Safety: `fcntl` on a descriptor borrowed from a live `File` reads the `flock` struct on
/// this stack frame and writes nothing.
pub fn try_lock_process(file: &File) -> std::io::Result<bool> {
    let lock = whole_file(libc::F_WRLCK);
    // SAFETY: see the doc comment.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EAGAIN) => Ok(false),
        _ => Err(err),
    }
}

/// The process that holds a lock of [`try_lock_process`] on `file` (another process: this
/// one's own locks never conflict with it), None when the file is free.
///
/// Safety: `fcntl(F_GETLK)` on a borrowed, open descriptor writes only into the `flock`
/// struct on this stack frame.
pub fn lock_owner(file: &File) -> Option<i32> {
    let mut lock = whole_file(libc::F_WRLCK);
    // SAFETY: see the doc comment.
    let answered = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) } == 0;
    (answered && lock.l_type != libc::F_UNLCK as libc::c_short).then_some(lock.l_pid)
}

/// Whether the descriptor is closed when this process starts another program (FD_CLOEXEC).
///
/// Safety: `fcntl(F_GETFD)` on a borrowed, open descriptor only reads its flags.
pub fn is_close_on_exec(fd: &impl AsFd) -> bool {
    // SAFETY: see the doc comment.
    let flags = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GETFD) };
    flags >= 0 && flags & libc::FD_CLOEXEC != 0
}

#[cfg(test)]
/// Whether a process other than this one could take the lock on `path` now: a forked
/// child tries, and says so by its exit status (it only opens, locks and exits). For tests.
pub fn lockable_by_another_process(path: &std::path::Path) -> bool {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the child calls only async-signal-safe functions (open, fcntl, _exit).
    unsafe {
        match libc::fork() {
            0 => {
                let fd = libc::open(path.as_ptr(), libc::O_RDWR);
                let lock = whole_file(libc::F_WRLCK);
                let taken = fd >= 0 && libc::fcntl(fd, libc::F_SETLK, &lock) == 0;
                libc::_exit(if taken { 0 } else { 1 })
            }
            pid => {
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_below_one_are_never_signalled() {
        assert!(!kill_group(0));
        assert!(!kill_group(-1));
        assert!(!kill_process(0));
        assert!(!kill_process(-1));
        assert!(!is_alive(0));
        assert!(is_alive(std::process::id() as i32));
    }

    #[test]
    fn the_lock_keeps_other_processes_out_until_it_is_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("lock");
        let open = || {
            File::options()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap()
        };
        let first = open();
        assert_eq!(lock_owner(&first), None);
        assert!(try_lock_process(&first).unwrap());
        assert!(!lockable_by_another_process(&path));
        assert!(is_close_on_exec(&first));
        drop(first);
        assert!(lockable_by_another_process(&path));
    }

    /// The cause of a `resume` refused right after a kill (issue #45): with `flock`, a child that
    /// the runner forked and that had not exec'd yet held the lock after the runner died. A
    /// process lock is never the child's.
    #[test]
    fn a_child_between_fork_and_exec_does_not_keep_the_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("lock");
        let file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        assert!(try_lock_process(&file).unwrap());
        // SAFETY: the child only sleeps (nanosleep) and exits, both async-signal-safe.
        let child = unsafe {
            match libc::fork() {
                0 => {
                    let ts = libc::timespec {
                        tv_sec: 30,
                        tv_nsec: 0,
                    };
                    libc::nanosleep(&ts, std::ptr::null_mut());
                    libc::_exit(0)
                }
                pid => pid,
            }
        };
        // The holder lets go (as its death does) while the child still has the descriptor.
        drop(file);
        let free = lockable_by_another_process(&path);
        assert!(kill_process(child));
        // SAFETY: waits for our own child, into no memory.
        unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
        assert!(free, "the forked child kept the lock");
    }

    #[test]
    fn the_monotonic_clock_never_goes_back() {
        let a = monotonic_ms();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_ms() > a && a > 0);
    }
}
