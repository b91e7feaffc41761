//! Test harness: runs the real binary as `git conference …` through the real `git`, in temporary
//! repositories with a hermetic environment (no user or system git config, fixed identity, UTC).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary repository plus the environment every command in it runs with.
pub struct TestRepo {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    bin_dir: PathBuf,
    home: PathBuf,
}

/// The repository's fixtures folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "command failed\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
}

impl TestRepo {
    /// An empty repository (with `git init`).
    pub fn new() -> TestRepo {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        let bin_dir = tmp.path().join("bin");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&bin_dir).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_git-conference"), bin_dir.join("git-conference")).unwrap();
        let repo = TestRepo { tmp, dir, bin_dir, home };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository holding a copy of `fixtures/<name>`, committed.
    pub fn from_fixture(name: &str) -> TestRepo {
        let repo = TestRepo::new();
        copy_dir(&fixtures().join(name), &repo.dir);
        repo.commit_all("fixture");
        repo
    }

    /// A command with the hermetic environment, run in the repository.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        let path = format!("{}:{}", self.bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        cmd.current_dir(&self.dir)
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test User")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test User")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("TZ", "UTC")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        cmd
    }

    /// `git <args>`; panics on failure; returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let run = self.git_run(args);
        assert_eq!(run.code, 0, "git {args:?} failed: {}{}", run.stdout, run.stderr);
        run.stdout
    }

    /// `git <args>`, whatever its exit code.
    pub fn git_run(&self, args: &[&str]) -> Run {
        Run::from(self.command("git").args(args).output().unwrap())
    }

    /// `git conference <args>`, whatever its exit code.
    pub fn conference(&self, args: &[&str]) -> Run {
        let mut full = vec!["conference"];
        full.extend_from_slice(args);
        Run::from(self.command("git").args(&full).stdin(std::process::Stdio::null()).output().unwrap())
    }

    pub fn write(&self, path: &str, text: &str) {
        let p = self.dir.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.dir.join(path)).unwrap()
    }

    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// `status --format json` of a conference.
    pub fn status_json(&self, name: &str) -> serde_json::Value {
        let run = self.conference(&["status", name, "--format", "json"]).ok();
        serde_json::from_str(&run.stdout).unwrap()
    }

    /// Every event of a conference, read with `git log` (not through the program).
    pub fn events(&self, name: &str) -> Vec<serde_json::Value> {
        let out = self.git(&["log", "--reverse", "--format=%B%x00", &format!("refs/conference/{name}/events")]);
        out.split('\0')
            .filter(|m| !m.trim().is_empty())
            .map(|m| {
                let json = m.lines().find(|l| l.starts_with('{')).expect("event has a JSON line");
                serde_json::from_str(json).unwrap()
            })
            .collect()
    }

    /// The note of a commit in refs/notes/conference, one JSON value per line.
    pub fn notes(&self, commit: &str) -> Vec<serde_json::Value> {
        let run = self.git_run(&["notes", "--ref=conference", "show", commit]);
        if run.code != 0 {
            return vec![];
        }
        run.stdout.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}
