//! The crash harness: runs `git-conference` as its own process (so its pid and how it ended are
//! the program's), stops it from outside (a signal after a delay, or once the engine runs), and
//! kills whatever a killed run left behind. The resume tests use it; so can any test that kills
//! a conference.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::TestRepo;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_git-conference")
}

/// Events of conference `name` whose names are in `names`, counted from `git log` subjects.
pub fn count_events(repo: &TestRepo, name: &str, names: &[&str]) -> usize {
    let r = repo.git_run(&[
        "log",
        "--format=%s",
        &format!("refs/conference/{name}/events"),
    ]);
    r.stdout
        .lines()
        .filter(|l| names.iter().any(|n| l.starts_with(&format!("{n}:"))))
        .count()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Code(i32),
    Signal(i32),
}

pub struct Leg {
    pub ending: Ending,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Display for Leg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.ending, self.stdout, self.stderr
        )
    }
}

/// How a leg is stopped from outside.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// Runs until it exits (or a failpoint kills it).
    Never,
    /// `kill -<signal>` this long after the process started.
    After(Duration, i32),
    /// `kill -<signal>` this long after the run recorded `conference.resumed` (or
    /// `conference.started`), i.e. once the engine runs and Ctrl-C is handled.
    AfterEngine(Duration, i32),
}

/// `git-conference <args>` run directly (not through `git`), so that its pid and how it ended are
/// the program's own.
pub fn spawn(repo: &TestRepo, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = repo.command(bin());
    cmd.args(args)
        .env_remove("GIT_CONFERENCE_FAILPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn git-conference")
}

pub fn finish(child: Child) -> Leg {
    let out = child.wait_with_output().expect("wait for git-conference");
    use std::os::unix::process::ExitStatusExt;
    let ending = match out.status.code() {
        Some(c) => Ending::Code(c),
        None => Ending::Signal(out.status.signal().unwrap_or(0)),
    };
    Leg {
        ending,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn send(pid: u32, signal: i32) {
    // SAFETY: sending a signal to our own child (not yet reaped, so the pid is still ours).
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

pub fn run(repo: &TestRepo, name: &str, args: &[&str], env: &[(&str, &str)], stop: Stop) -> Leg {
    let started = Instant::now();
    let mut child = spawn(repo, args, env);
    match stop {
        Stop::Never => {}
        Stop::After(delay, signal) => {
            std::thread::sleep(delay.saturating_sub(started.elapsed()));
            send(child.id(), signal);
        }
        Stop::AfterEngine(delay, signal) => {
            let before = count_events(repo, name, &["conference.resumed", "conference.started"]);
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if count_events(repo, name, &["conference.resumed", "conference.started"]) > before
                {
                    std::thread::sleep(delay);
                    send(child.id(), signal);
                    break;
                }
                assert!(Instant::now() < deadline, "the run never got going");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    finish(child)
}

/// Kills what a SIGKILLed conference left running (agents and evaluations live in their own
/// process groups, so killing the conference does not stop them): every process whose working
/// directory is inside this test's temporary folder. Returns how many it found.
pub fn kill_strays(repo: &TestRepo) -> usize {
    let root = std::fs::canonicalize(repo.tmp.path()).unwrap();
    let me = std::process::id();
    let mut total = 0;
    for _ in 0..100 {
        let mut found = 0;
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
                if cwd.starts_with(&root) {
                    send(pid, libc::SIGKILL);
                    found += 1;
                }
            }
        }
        if found == 0 {
            return total;
        }
        total += found;
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("processes under {} keep running", root.display());
}
