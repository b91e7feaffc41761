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

/// Takes an exclusive advisory lock (`flock`) on `file` without waiting: true when taken,
/// false when another open file holds it. An error of kind `Interrupted` (EINTR) means "try
/// again"; the lock lasts until every descriptor of this open file is closed.
///
/// Safety: `flock` on a descriptor borrowed from a live `File` touches no memory.
pub fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    // SAFETY: see the doc comment.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(err),
    }
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
    fn a_second_lock_on_the_same_file_is_refused_until_the_first_closes() {
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
        assert!(try_lock_exclusive(&first).unwrap());
        let second = open();
        assert!(!try_lock_exclusive(&second).unwrap());
        drop(first);
        assert!(try_lock_exclusive(&second).unwrap());
        assert!(is_close_on_exec(&second));
    }

    #[test]
    fn the_monotonic_clock_never_goes_back() {
        let a = monotonic_ms();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_ms() > a && a > 0);
    }
}
