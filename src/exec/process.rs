//! Child processes with a timeout that kills the whole process group.
//!
//! Every command runs as `sh -c` would run it, in its own process group, so a timeout or Ctrl-C
//! kills the evaluation together with everything it started; what left the group (`setsid`,
//! daemons) is found by its run mark and killed too (`contain`). Its logs are cut to their cap
//! while it runs (`caps`). A command made of plain words naming
//! an executable file (`./eval.sh`, `python3 train.py --fast`) is started directly, as git does
//! for such commands: the same program with the same arguments, one process fewer per run. Output goes to files rather than pipes: a
//! grandchild that keeps a pipe open can then never hang the conference, and the log of every run
//! stays on disk for the user to read.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;

static CANCELLED: AtomicBool = AtomicBool::new(false);
/// Running process groups by slot; a finished run frees its slot for the next one.
static RUNNING_GROUPS: Mutex<Vec<Option<i32>>> = Mutex::new(Vec::new());
/// Folder where each running group is written down, so that the next runner can kill the groups
/// a killed runner left behind: file `slot-<n>` holds `<pgid> <leader start time>` while slot n
/// is in use and only spaces after. The files are written over in place, padded to
/// [`SLOT_WIDTH`], neither created and deleted per run (on a busy filesystem each new file costs
/// more than the write) nor truncated (on ext4, closing a file truncated and written again starts
/// its writeback at once).
static GROUPS_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// What to run.
pub struct Spec<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// Where stdout and stderr are written (the directory must exist).
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub stdin: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Cancelled,
    /// Ended early because its output watcher asked for it (pruning).
    Stopped,
}

impl Outcome {
    pub fn success(&self) -> bool {
        *self == Outcome::Exited(0)
    }
    pub fn describe(&self) -> String {
        match self {
            Outcome::Exited(code) => format!("exit status {code}"),
            Outcome::Signaled(sig) => format!("killed by signal {sig}"),
            Outcome::TimedOut => "timed out".into(),
            Outcome::Cancelled => "interrupted".into(),
            Outcome::Stopped => "stopped early".into(),
        }
    }
}

pub struct Finished {
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// Asks every running command to stop (Ctrl-C): kills their process groups.
pub fn cancel_all() {
    CANCELLED.store(true, Ordering::SeqCst);
    for pgid in RUNNING_GROUPS.lock().unwrap().iter().flatten() {
        kill_group(*pgid);
    }
}

pub fn cancelled() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

/// SIGINTs closer than this to the first one are the same press. One Ctrl-C through
/// `git conference` arrives twice: git forwards it to its `git-conference` child, and the terminal
/// sends it to the whole foreground process group, a fraction of a millisecond apart.
const SAME_PRESS: Duration = Duration::from_millis(1000);

/// Ctrl-C for the whole run, from the moment the lock is taken: the first press asks for a
/// graceful stop (`cancelled()` becomes true; the engine's watcher kills the running groups and
/// the run exits 130 with the resume hint); a second press, at least [`SAME_PRESS`] later,
/// exits at once. This handler stays installed when tokio adds its own (signal-hook chains to it),
/// so it alone decides what a signal means.
pub fn handle_early_interrupts() {
    crate::os::on_interrupt(&CANCELLED, SAME_PRESS, 130);
}

fn kill_group(pgid: i32) {
    // A stale group id is harmless (ESRCH).
    crate::os::kill_group(pgid);
}

/// The length every slot file's record is padded to.
const SLOT_WIDTH: usize = 64;

/// Writes slot `slot`'s record over the old one (see [`GROUPS_DIR`]).
fn write_slot(slot: usize, record: &str) {
    use std::os::unix::fs::FileExt;
    if let Some(dir) = GROUPS_DIR.get() {
        let path = dir.join(format!("slot-{slot}"));
        let padded = format!("{record:<SLOT_WIDTH$}");
        if let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
        {
            let _ = file.write_all_at(padded.as_bytes(), 0);
        }
    }
}

/// Notes a running group whose leader started at `start` (ticks since boot; in memory for
/// Ctrl-C, on disk for the next runner); returns its slot.
fn register(pgid: i32, start: Option<u64>) -> usize {
    let slot = {
        let mut groups = RUNNING_GROUPS.lock().unwrap();
        let slot = groups
            .iter()
            .position(Option::is_none)
            .unwrap_or(groups.len());
        if slot == groups.len() {
            groups.push(None);
        }
        groups[slot] = Some(pgid);
        slot
    };
    if let Some(start) = start {
        write_slot(slot, &format!("{pgid} {start}"));
    }
    slot
}

fn unregister(slot: usize) {
    write_slot(slot, "");
    RUNNING_GROUPS.lock().unwrap()[slot] = None;
}

/// Records running process groups under `dir` from now on (call with the run lock held).
/// From then on this process also adopts orphaned descendants, so that none escapes a sweep.
/// A watchdog ends this runner's runs when it dies (see `watchdog`).
pub fn track_groups_in(dir: &Path) {
    crate::os::set_child_subreaper();
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = GROUPS_DIR.set(dir.to_path_buf());
        super::watchdog::start(dir);
    }
}

/// Kills the process groups that a killed runner left running (agents and evaluations still
/// writing into worktrees), and what its runs started outside them (`setsid`, daemons). A group
/// whose leader now has another start time is someone else's, and so is one none of whose
/// processes carries this run folder's mark (the records came with a copy of the repository).
pub fn kill_orphaned_groups(dir: &Path) -> usize {
    let mut killed = super::contain::sweep_left_behind(dir);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let recorded = std::fs::read_to_string(&path).unwrap_or_default();
        let mut fields = recorded.split_whitespace();
        let (Some(Ok(pgid)), Some(recorded)) =
            (fields.next().map(str::parse::<i32>), fields.next())
        else {
            // A free slot (or one cut short by a kill while it was written).
            let _ = std::fs::remove_file(&path);
            continue;
        };
        let same_leader = match super::contain::start_ticks(pgid) {
            Some(now) => recorded.parse() == Ok(now),
            // The leader is gone; while its group lives, no new process can take its id.
            None => true,
        };
        if pgid > 1 && same_leader && super::contain::group_started_from(pgid, dir) {
            // A process group we started; ESRCH when it is already gone.
            if crate::os::kill_group(pgid) {
                killed += 1;
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    killed
}

/// Sees each complete line a running command writes to its stdout, soon after it is written;
/// returns true to end the run early ([`Outcome::Stopped`]).
pub type OnLine<'a> = &'a mut (dyn FnMut(&str) -> bool + Send);

/// Runs `spec` to completion, timeout or cancellation.
pub async fn run(spec: Spec<'_>) -> Result<Finished> {
    let timeout = spec.timeout;
    match start(spec).await? {
        Some(running) => running.wait(timeout, None).await,
        None => Ok(Finished {
            outcome: Outcome::Cancelled,
            elapsed: Duration::ZERO,
        }),
    }
}

/// A command started by [`start`]: its process group runs until [`Running::wait`] returns or
/// [`Running::cancel`] ends it.
pub struct Running {
    child: tokio::process::Child,
    pgid: i32,
    slot: usize,
    mark: String,
    /// Where the run's processes are to be found (see `contain::sweep`).
    origin: super::contain::Origin,
    logs: [PathBuf; 2],
    started: Instant,
}

/// Ends a running command's process group: [`Running::cancel`], usable while another task waits.
#[derive(Debug, Clone, Copy)]
pub struct GroupCanceller(i32);

impl GroupCanceller {
    pub fn cancel(&self) {
        kill_group(self.0);
    }
}

/// Starts `spec` in a process group of its own (its stdin written and closed); None when
/// Ctrl-C came first. `spec.timeout` is not used: the caller passes it to [`Running::wait`].
pub async fn start(spec: Spec<'_>) -> Result<Option<Running>> {
    let started = Instant::now();
    if cancelled() {
        return Ok(None);
    }
    let stdout = create_log(&spec.stdout)?;
    let stderr = create_log(&spec.stderr)?;
    // Variables from the user's git invocation must not leak into commands run in worktrees.
    let mut cmd = match direct_argv(spec.command, spec.cwd, &spec.env) {
        Some((program, args)) => {
            let mut cmd = super::async_command(program, super::GitEnv::Clear);
            cmd.args(args);
            cmd
        }
        None => {
            let mut cmd = super::async_command("sh", super::GitEnv::Clear);
            cmd.arg("-c").arg(spec.command);
            cmd
        }
    };
    cmd.current_dir(spec.cwd)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .process_group(0)
        .kill_on_drop(true);
    // A runner killed with SIGKILL takes its command with it.
    crate::os::die_with_parent(&mut cmd);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let mark = super::contain::new_mark(GROUPS_DIR.get().map(PathBuf::as_path));
    cmd.env(super::contain::MARK_VAR, &mark);
    let before = super::contain::Census::now();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            super::contain::sweep(&mark, 0, None);
            return Err(e).with_context(|| {
                format!("cannot run `{}` in {}", spec.command, spec.cwd.display())
            });
        }
    };
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    // Read now, while the leader runs: every process of the run starts at or after it.
    let origin = super::contain::Origin::of(pgid, before);
    let slot = register(pgid, origin.start_ticks());
    if cancelled() {
        kill_group(pgid);
    }
    if let (Some(input), Some(mut stdin)) = (spec.stdin, child.stdin.take()) {
        // A command that does not read its stdin must not fail the run.
        let _ = stdin.write_all(&input).await;
        drop(stdin);
    }
    Ok(Some(Running {
        child,
        pgid,
        slot,
        mark,
        origin,
        logs: [spec.stdout, spec.stderr],
        started,
    }))
}

impl Running {
    /// Ends the command and everything in its process group: the one way a run is cut short
    /// (a timeout, Ctrl-C, its watcher's stop, a launcher's cancel).
    pub fn cancel(&self) {
        self.canceller().cancel();
    }

    /// A handle that cancels this command from elsewhere while [`Running::wait`] waits.
    pub fn canceller(&self) -> GroupCanceller {
        GroupCanceller(self.pgid)
    }

    /// Cuts the run short ([`Running::cancel`]) and reaps its leader.
    async fn end(&mut self) {
        self.cancel();
        let _ = self.child.wait().await;
    }

    /// Waits for the command to end, cancelling it after `timeout` or when `on_line` (shown
    /// each line of stdout as it is written) asks to stop ([`Outcome::Stopped`]); then ends
    /// what it left behind (its group, what left the group) and cuts its logs to their cap.
    pub async fn wait(
        mut self,
        timeout: Option<Duration>,
        mut on_line: Option<OnLine<'_>>,
    ) -> Result<Finished> {
        let paths = self.logs.clone();
        let logs = [paths[0].as_path(), paths[1].as_path()];
        let mut cut = [0u64; 2];
        let mut lines = on_line.as_mut().map(|f| LineTail::new(logs[0], &mut **f));
        let waiting = wait_capping(&mut self.child, &logs, &mut cut, lines.as_mut());
        let waited = match timeout {
            Some(limit) => tokio::time::timeout(limit, waiting).await.ok(),
            None => Some(waiting.await),
        };
        let outcome = match waited {
            None => {
                self.end().await;
                Outcome::TimedOut
            }
            Some(waited) => match waited? {
                Waited::Stop => {
                    self.end().await;
                    Outcome::Stopped
                }
                Waited::Exited(status) => {
                    // The lines written last, for the watcher's record (too late to stop anything).
                    if let Some(lines) = lines.as_mut() {
                        lines.read_new();
                    }
                    // The leader is gone; stragglers it left in its group go with it.
                    kill_group(self.pgid);
                    exited(status)
                }
            },
        };
        // Children that left the group (`setsid`, daemons) go too.
        super::contain::sweep(&self.mark, self.pgid, Some(&self.origin));
        for (log, cut) in logs.iter().zip(cut) {
            let _ = super::caps::cap_log(log, super::caps::LOG_CAP, cut);
        }
        unregister(self.slot);
        Ok(Finished {
            outcome,
            elapsed: self.started.elapsed(),
        })
    }
}

/// The outcome of a run whose leader exited by itself.
fn exited(status: std::process::ExitStatus) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    if cancelled() {
        Outcome::Cancelled
    } else if let Some(code) = status.code() {
        Outcome::Exited(code)
    } else {
        Outcome::Signaled(status.signal().unwrap_or(0))
    }
}

/// A log file, empty, written in append mode: [`super::caps::cap_log`] can cut it while the
/// run writes to it.
fn create_log(path: &Path) -> Result<std::fs::File> {
    std::fs::File::create(path)
        .and_then(|_| std::fs::OpenOptions::new().append(true).open(path))
        .with_context(|| format!("cannot create {}", path.display()))
}

/// How waiting for a child ended.
enum Waited {
    Exited(std::process::ExitStatus),
    /// The stdout watcher asked to stop the run.
    Stop,
}

/// The longest unfinished line a watcher's reader holds on to.
const MAX_LINE: usize = 64 * 1024;

/// The lines a run appends to its stdout log, handed to a watcher as they complete (launchers
/// tail the file where a remote run's stdout appears here the same way).
pub struct LineTail<'p, 'f> {
    path: &'p Path,
    offset: u64,
    partial: Vec<u8>,
    on_line: &'f mut (dyn FnMut(&str) -> bool + Send),
}

impl<'p, 'f> LineTail<'p, 'f> {
    pub fn new(path: &'p Path, on_line: &'f mut (dyn FnMut(&str) -> bool + Send)) -> Self {
        LineTail {
            path,
            offset: 0,
            partial: Vec::new(),
            on_line,
        }
    }

    /// Reads what was appended since the last call; true when the watcher asked to stop.
    pub fn read_new(&mut self) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(self.path) else {
            return false;
        };
        let len = file.metadata().map_or(0, |m| m.len());
        if len < self.offset {
            // The log was cut to its cap: what was cut is gone, go on from its end.
            self.offset = len;
            self.partial.clear();
        }
        let mut new = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_end(&mut new).is_err() {
            return false;
        }
        self.offset += new.len() as u64;
        self.partial.extend_from_slice(&new);
        let mut stop = false;
        // Progress bars redraw a line with '\r': each redraw is a line of its own.
        while let Some(end) = self.partial.iter().position(|b| matches!(b, b'\n' | b'\r')) {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            stop |= (self.on_line)(String::from_utf8_lossy(&line[..end]).as_ref());
        }
        // A line that never ends is no reading: what is held of it stays bounded.
        if self.partial.len() > MAX_LINE {
            self.partial.clear();
        }
        stop
    }
}

/// Waits for the child, cutting its logs to their cap every half second meanwhile, and showing
/// a watcher each new line of stdout every 25 ms (a pruned run is ended within that of the
/// reading that decided it; reading a log's new bytes costs a stat and a read).
async fn wait_capping(
    child: &mut tokio::process::Child,
    logs: &[&Path],
    cut: &mut [u64; 2],
    mut lines: Option<&mut LineTail<'_, '_>>,
) -> std::io::Result<Waited> {
    let tick = Duration::from_millis(if lines.is_some() { 25 } else { 500 });
    let mut last_cap = Instant::now();
    loop {
        tokio::select! {
            status = child.wait() => return status.map(Waited::Exited),
            _ = tokio::time::sleep(tick) => {
                if lines.as_mut().is_some_and(|l| l.read_new()) {
                    return Ok(Waited::Stop);
                }
                if last_cap.elapsed() >= Duration::from_millis(500) || lines.is_none() {
                    last_cap = Instant::now();
                    for (log, cut) in logs.iter().zip(cut.iter_mut()) {
                        *cut += super::caps::cap_log(log, super::caps::LOG_CAP, *cut)
                            .unwrap_or(0);
                    }
                }
            }
        }
    }
}

/// Characters that give a command a meaning only a shell can provide (quoting, expansion,
/// redirection, pipes, assignments, globs, comments).
pub(crate) const SHELL_SYNTAX: &[char] = &[
    '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', '*', '?', '[', ']', '#', '~',
    '=', '%', '{', '}', '!', '\n',
];

/// Words that are shell builtins or keywords (or behave differently outside a shell).
pub(crate) const SHELL_WORDS: &[&str] = &[
    ".", ":", "alias", "bg", "break", "case", "cd", "command", "continue", "do", "done", "elif",
    "else", "esac", "eval", "exec", "exit", "export", "false", "fg", "fi", "for", "getopts",
    "hash", "if", "in", "jobs", "local", "read", "readonly", "return", "select", "set", "shift",
    "source", "then", "time", "times", "trap", "true", "type", "ulimit", "umask", "unalias",
    "unset", "until", "wait", "while",
];

/// The program and arguments of a command that `sh -c` would run as one plain program: words
/// separated by blanks, no shell syntax, the first naming an executable file that the kernel can
/// start itself (a `#!` script or a binary). None: the command goes through `sh -c`.
fn direct_argv(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
) -> Option<(PathBuf, Vec<String>)> {
    if command.contains(SHELL_SYNTAX) {
        return None;
    }
    let mut words = command.split([' ', '\t']).filter(|w| !w.is_empty());
    let program = words.next()?;
    if SHELL_WORDS.contains(&program) {
        return None;
    }
    let path = if program.contains('/') {
        Some(cwd.join(program))
    } else {
        let path_var = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"))?;
        std::env::split_paths(&path_var)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| cwd.join(dir).join(program))
            .find(|p| is_executable_file(p))
    }?;
    if !is_executable_file(&path) || !kernel_can_start(&path) {
        return None;
    }
    Some((path, words.map(str::to_string).collect()))
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A `#!` script or an ELF binary; anything else `sh` would read as a shell script.
fn kernel_can_start(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|_| head.starts_with(b"#!") || head == *b"\x7fELF")
}

/// Reads a log file written by [`run`], lossily.
pub fn read_output(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// For a command a shell interprets: the shell's "not found" (exit 127) on a first run is a
/// configuration error (exit 2) naming the command, not one crashed attempt of many.
pub fn not_found_at_run(
    what: &str,
    command: &str,
    code: i32,
    stderr: &str,
) -> Option<anyhow::Error> {
    if code != 127 {
        return None;
    }
    let line = stderr
        .lines()
        .find(|l| l.to_lowercase().contains("not found"))?
        .trim();
    Some(crate::error::usage(format!(
        "{what} `{command}` cannot run: {line}. Install the missing program (or fix `- command:` \
         in conference.md: `resume` applies the edited file), then `git conference resume`"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(dir.join(name), text).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Plain words naming an executable start it directly; anything a shell would interpret,
    /// a builtin, an unknown program or a script without `#!` goes through `sh -c`.
    #[test]
    fn only_plain_commands_skip_the_shell() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        script(dir, "eval.sh", "#!/bin/sh\necho score: 1\n");
        script(dir, "bare.sh", "echo score: 1\n");
        let direct = |c: &str| direct_argv(c, dir, &[]);
        let (program, args) = direct("./eval.sh --fast  2").unwrap();
        assert_eq!(program, dir.join("./eval.sh"));
        assert_eq!(args, ["--fast", "2"]);
        let (program, args) = direct("sh eval.sh").unwrap();
        assert!(program.ends_with("sh") && program.is_absolute());
        assert_eq!(args, ["eval.sh"]);
        for shell_only in [
            "./eval.sh > out",
            "./eval.sh | tail -1",
            "X=1 ./eval.sh",
            "./eval.sh \"a b\"",
            "./eval.sh $HOME",
            "./eval.sh *.txt",
            "cd sub",
            "exit 3",
            "./bare.sh",
            "./missing.sh",
            "no-such-program-here",
            "",
        ] {
            assert!(
                direct(shell_only).is_none(),
                "{shell_only:?} must go through sh"
            );
        }
        // PATH from the command's own environment is the one searched.
        let path = vec![("PATH".to_string(), dir.display().to_string())];
        assert_eq!(
            direct_argv("eval.sh", Path::new("/"), &path).unwrap().0,
            dir.join("eval.sh")
        );
    }

    /// Runs `script` in `dir` (up to 30 s) with `on_line` watching its stdout.
    async fn run_watched(dir: &Path, script: &str, on_line: OnLine<'_>) -> Finished {
        let running = start(Spec {
            command: script,
            cwd: dir,
            env: vec![],
            timeout: None,
            stdout: dir.join("out"),
            stderr: dir.join("err"),
            stdin: None,
        })
        .await
        .unwrap()
        .expect("started");
        running
            .wait(Some(Duration::from_secs(30)), Some(on_line))
            .await
            .unwrap()
    }

    /// A watcher sees each line (a `\r` redraw too) while the command runs, and its stop ends
    /// the run at once: the command's last line is never written.
    #[tokio::test]
    async fn a_watcher_sees_lines_as_they_come_and_can_stop_the_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let script = "printf 'a\\rb\\n'; echo step 1; sleep 0.3; echo step 2; sleep 10; touch done";
        let mut seen = Vec::new();
        let mut on_line = |line: &str| {
            seen.push(line.to_string());
            line == "step 2"
        };
        let started = Instant::now();
        let finished = run_watched(dir, script, &mut on_line).await;
        assert_eq!(finished.outcome, Outcome::Stopped);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(seen, ["a", "b", "step 1", "step 2"]);
        assert!(!dir.join("done").exists());
    }

    /// A watcher's stop ends the run promptly: from the moment the deciding line is written to
    /// the run's end (its group killed and its leader reaped) takes about the watcher's tick
    /// (25 ms) and the kill; the median of 10 runs is printed (`--nocapture`) and must be under
    /// half a second even on a loaded machine.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_stop_ends_the_run_within_a_tick_of_the_deciding_line() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut latencies = Vec::new();
        for _ in 0..10 {
            let script = "sleep 0.05; date +%s.%N > written; echo step 1; sleep 10";
            let mut on_line = |line: &str| line == "step 1";
            let finished = run_watched(dir, script, &mut on_line).await;
            let ended = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert_eq!(finished.outcome, Outcome::Stopped);
            let written: f64 = std::fs::read_to_string(dir.join("written"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            latencies.push(ended - written);
        }
        latencies.sort_by(f64::total_cmp);
        let median = (latencies[4] + latencies[5]) / 2.0;
        eprintln!(
            "stop latency: median {:.1} ms, max {:.1} ms",
            median * 1e3,
            latencies[9] * 1e3
        );
        assert!(median < 0.5, "{latencies:?}");
    }

    /// A directly started command behaves as under `sh -c`: arguments, exit status, output.
    #[tokio::test]
    async fn a_direct_run_matches_sh() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        script(dir, "echo.sh", "#!/bin/sh\necho \"$# $1 $2\"\nexit 7\n");
        for command in ["./echo.sh a  b", "./echo.sh a b | cat; exit 7"] {
            let out = dir.join("out");
            let finished = run(Spec {
                command,
                cwd: dir,
                env: vec![],
                timeout: Some(Duration::from_secs(10)),
                stdout: out.clone(),
                stderr: dir.join("err"),
                stdin: None,
            })
            .await
            .unwrap();
            assert_eq!(finished.outcome, Outcome::Exited(7), "{command}");
            assert_eq!(read_output(&out), "2 a b\n", "{command}");
        }
    }

    #[test]
    fn not_found_only_for_127_and_the_shells_message() {
        let err = not_found_at_run(
            "the agent command",
            "x && claude",
            127,
            "sh: 1: claude: not found\n",
        )
        .unwrap();
        assert!(err.to_string().contains("claude: not found"));
        assert!(crate::error::exit_code(&err) == crate::error::EXIT_USAGE);
        assert!(not_found_at_run("a", "b", 1, "not found").is_none());
        assert!(not_found_at_run("a", "b", 127, "something else").is_none());
    }
}
