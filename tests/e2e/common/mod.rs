//! Test harness: runs the real binary as `git conference …` through the real `git`, in temporary
//! repositories with a hermetic environment (no user or system git config, fixed identity, UTC).
#![allow(dead_code)]

pub mod crash;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary repository plus the environment every command in it runs with.
pub struct TestRepo {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub bin_dir: PathBuf,
    home: PathBuf,
}

/// The repository's fixtures folder.
/// A new terminal: its master end (what a user's screen and keyboard are) and its slave end
/// (what a command gets as its standard input, output or error).
pub fn open_terminal() -> (std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut m, mut s) = (0, 0);
    // SAFETY: openpty writes two descriptors, owned by the values made from them.
    unsafe {
        assert_eq!(
            libc::openpty(
                &mut m,
                &mut s,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null()
            ),
            0
        );
        (
            std::fs::File::from_raw_fd(m),
            std::os::fd::OwnedFd::from_raw_fd(s),
        )
    }
}

/// The line number (1-based) of the first line of `text` containing `needle`.
/// Waits (a minute at most, else panics with `why` and the path) until `path` exists.
pub fn wait_for_file(path: &Path, why: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{why}: {}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in:\n{text}"))
        + 1
}

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
        assert_eq!(
            self.code, 0,
            "command failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl TestRepo {
    /// An empty repository (with `git init`).
    pub fn new() -> TestRepo {
        TestRepo::in_tempdir(tempfile::tempdir().unwrap())
    }

    /// An empty repository in a new folder under `parent` (for a fixture that outlives its
    /// tests, under Cargo's scratch folder rather than the system's).
    pub fn new_in(parent: &Path) -> TestRepo {
        std::fs::create_dir_all(parent).unwrap();
        TestRepo::in_tempdir(tempfile::tempdir_in(parent).unwrap())
    }

    fn in_tempdir(tmp: tempfile::TempDir) -> TestRepo {
        let dir = tmp.path().join("repo");
        let bin_dir = tmp.path().join("bin");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&bin_dir).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_git-conference"),
            bin_dir.join("git-conference"),
        )
        .unwrap();
        let repo = TestRepo {
            tmp,
            dir,
            bin_dir,
            home,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository holding a copy of `fixtures/<name>`, committed.
    pub fn from_fixture(name: &str) -> TestRepo {
        TestRepo::new().with_fixture(name)
    }

    /// This (empty) repository with a copy of `fixtures/<name>`, committed.
    pub fn with_fixture(self, name: &str) -> TestRepo {
        copy_dir(&fixtures().join(name), &self.dir);
        self.commit_all("fixture");
        self
    }

    /// A command with the hermetic environment, run in the repository.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
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
        assert_eq!(
            run.code, 0,
            "git {args:?} failed: {}{}",
            run.stdout, run.stderr
        );
        run.stdout
    }

    /// A commit with `rev`'s tree, `path` in it replaced by `bytes`, `rev`'s message and the one
    /// parent `parent`, made with git's plumbing alone (as a hand edit of the state tree or a
    /// crafted fetch would leave it); returns its id. Moves no ref.
    pub fn commit_with_file(&self, rev: &str, path: &str, bytes: &[u8], parent: &str) -> String {
        let scratch = tempfile::tempdir_in(self.tmp.path()).unwrap();
        let file = scratch.path().join("file");
        std::fs::write(&file, bytes).unwrap();
        let blob = self.git(&["hash-object", "-w", file.to_str().unwrap()]);
        let index = scratch.path().join("index");
        let in_index = |args: &[&str]| {
            let out = self
                .command("git")
                .env("GIT_INDEX_FILE", &index)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        in_index(&["read-tree", &format!("{rev}^{{tree}}")]);
        let entry = format!("100644,{},{path}", blob.trim());
        in_index(&["update-index", "--cacheinfo", &entry]);
        let tree = in_index(&["write-tree"]);
        let message = scratch.path().join("message");
        std::fs::write(&message, self.git(&["log", "-1", "--format=%B", rev])).unwrap();
        let commit = self.git(&[
            "commit-tree",
            &tree,
            "-p",
            parent,
            "-F",
            message.to_str().unwrap(),
        ]);
        commit.trim().to_string()
    }

    /// `git <args>`, whatever its exit code.
    pub fn git_run(&self, args: &[&str]) -> Run {
        Run::from(self.command("git").args(args).output().unwrap())
    }

    /// `git conference <args>`, whatever its exit code.
    pub fn conference(&self, args: &[&str]) -> Run {
        let mut full = vec!["conference"];
        full.extend_from_slice(args);
        Run::from(
            self.command("git")
                .args(&full)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap(),
        )
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
        let out = self.git(&[
            "log",
            "--reverse",
            "--format=%B%x00",
            &format!("refs/conference/{name}/events"),
        ]);
        out.split('\0')
            .filter(|m| !m.trim().is_empty())
            .map(|m| {
                let json = m
                    .lines()
                    .find(|l| l.starts_with('{'))
                    .expect("event has a JSON line");
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
        run.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Additions for the end-to-end tests (research_loop, conference).

impl TestRepo {
    /// `program <args>` with the hermetic environment, run in `dir` (e.g. a clone), any exit code.
    pub fn run_in(&self, dir: &Path, program: &str, args: &[&str]) -> Run {
        let mut cmd = self.command(program);
        cmd.current_dir(dir)
            .args(args)
            .stdin(std::process::Stdio::null());
        Run::from(cmd.output().unwrap())
    }

    /// `git <args>` in `dir`; panics on failure; returns stdout.
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let run = self.run_in(dir, "git", args);
        assert_eq!(
            run.code,
            0,
            "git {args:?} in {} failed: {}{}",
            dir.display(),
            run.stdout,
            run.stderr
        );
        run.stdout
    }

    /// `git conference <args>` with extra environment variables (e.g. an agent CLI's endpoint),
    /// any exit code.
    pub fn conference_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command("git");
        cmd.arg("conference")
            .args(args)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null());
        Run::from(cmd.output().unwrap())
    }

    /// `git conference <args>` in `dir`, any exit code.
    pub fn conference_in(&self, dir: &Path, args: &[&str]) -> Run {
        let mut full = vec!["conference"];
        full.extend_from_slice(args);
        self.run_in(dir, "git", &full)
    }

    /// Writes conference.md and runs `git conference start <name>`.
    pub fn start(&self, name: &str, config: &str) -> Run {
        self.write("conference.md", config);
        self.conference(&["start", name])
    }

    /// The repository's git dir (`.git`).
    pub fn git_dir(&self) -> PathBuf {
        self.dir.join(".git")
    }

    /// Runs `git conference ARGS` with a terminal as its standard input (so it asks its
    /// questions), typing `answers` there; returns what it printed and how it exited.
    pub fn conference_on_a_terminal(&self, args: &[&str], answers: &[u8]) -> Output {
        use std::io::Write;
        let (mut master, slave) = open_terminal();
        let child = self
            .command("git")
            .arg("conference")
            .args(args)
            .stdin(std::process::Stdio::from(slave))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        master.write_all(answers).unwrap();
        // The terminal echoes the input back on the master side: keep it drained.
        let drain = std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut master, &mut sink);
        });
        let out = child.wait_with_output().unwrap();
        drop(drain);
        out
    }

    /// A bare repository beside this one, added as its `origin`; returns its path.
    pub fn bare_origin(&self) -> PathBuf {
        let remote = self.tmp.path().join("remote.git");
        self.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
        self.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
        remote
    }

    /// The complement fixture after a finished 2-researcher, 2-iteration, 1-round conference
    /// named `name`.
    pub fn complement_conference(name: &str) -> TestRepo {
        let repo = TestRepo::from_fixture("complement");
        repo.start(name, &complement_config(2)).ok();
        repo
    }

    /// Starts `git-conference start NAME` in the background (output piped) and returns once the
    /// loop fixture's hanging agent has written its pid: the conference is then mid-iteration.
    pub fn start_until_the_agent_hangs(&self, name: &str) -> std::process::Child {
        self.start_until(name, "agent-sleep.pid")
    }

    /// Starts `git-conference start NAME` in the background (output piped) and returns once
    /// `marker` exists in the git dir (an agent of the fixture writes it when it runs).
    pub fn start_until(&self, name: &str, marker: &str) -> std::process::Child {
        let child = self.spawn_conference(&["start", name], &[]);
        wait_for_file(&self.git_dir().join(marker), "the agent never wrote it");
        child
    }

    /// `git-conference <args>` with `env` added, in the background (output piped).
    pub fn spawn_conference(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        self.command(env!("CARGO_BIN_EXE_git-conference"))
            .args(args)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// SIGKILLs the runner of conference `name` (the process its run lock names; `git` is only
    /// its parent), as a crash would, and waits for `runner` to end.
    pub fn kill_runner(&self, name: &str, mut runner: std::process::Child) {
        let lock = self.git_dir_file(&format!("conference/{name}/lock"));
        let pid = lock.split_whitespace().next().unwrap();
        std::process::Command::new("kill")
            .args(["-KILL", pid])
            .status()
            .unwrap();
        runner.wait().unwrap();
    }

    /// SIGKILLs the runner of conference `name` and, first, its watchdog (which would end
    /// what the runner started as soon as the runner died): as a `kill -9` of both, or the
    /// machine's OOM killer, would leave things for the next `resume` to end.
    pub fn kill_runner_and_watchdog(&self, name: &str, runner: std::process::Child) {
        let lock = self.git_dir_file(&format!("conference/{name}/lock"));
        let pid = lock.split_whitespace().next().unwrap();
        let pattern = format!("__watchdog .*/conference/{name}/running {pid}$");
        let found = std::process::Command::new("pgrep")
            .args(["-f", &pattern])
            .output()
            .unwrap();
        let watchdogs = String::from_utf8_lossy(&found.stdout).to_string();
        assert!(!watchdogs.trim().is_empty(), "no watchdog of runner {pid}");
        for watchdog in watchdogs.split_whitespace() {
            std::process::Command::new("kill")
                .args(["-KILL", watchdog])
                .status()
                .unwrap();
        }
        self.kill_runner(name, runner);
    }

    /// The path of a conference worktree (`researcher-A`, `review`, `best`): by default in the
    /// folder next to the repository, `<parent>/repo.conference/<name>/<label>`.
    pub fn worktree(&self, name: &str, label: &str) -> PathBuf {
        self.worktrees_root().join(name).join(label)
    }

    /// The default folder of every conference's worktrees: `<parent>/repo.conference`.
    pub fn worktrees_root(&self) -> PathBuf {
        self.dir
            .canonicalize()
            .unwrap()
            .parent()
            .unwrap()
            .join("repo.conference")
    }

    /// Puts `program` on the PATH of every command run in this repository under `name`
    /// (a symlink in the harness's bin folder).
    pub fn link_program(&self, name: &str, program: &Path) {
        let link = self.bin_dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(program, link).unwrap();
    }

    /// A file of the git dir as text ("" when missing): the fixtures log there.
    pub fn git_dir_file(&self, file: &str) -> String {
        std::fs::read_to_string(self.git_dir().join(file)).unwrap_or_default()
    }

    /// Every event of a conference with its commit message's first line, read with `git log`.
    pub fn event_subjects(&self, name: &str) -> Vec<String> {
        self.git(&[
            "log",
            "--reverse",
            "--format=%s",
            &format!("refs/conference/{name}/events"),
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// The events named `event`.
    pub fn events_named(&self, name: &str, event: &str) -> Vec<serde_json::Value> {
        self.events(name)
            .into_iter()
            .filter(|e| e["event"] == event)
            .collect()
    }

    /// A file of a revision, read with `git show REV:PATH` (None when it does not exist).
    pub fn show(&self, rev: &str, path: &str) -> Option<String> {
        let run = self.git_run(&["show", &format!("{rev}:{path}")]);
        (run.code == 0).then_some(run.stdout)
    }

    /// Every file of the working tree (not `.git`), with its bytes.
    pub fn files(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                let path = entry.path();
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if rel == ".git" {
                    continue;
                }
                if entry.file_type().unwrap().is_dir() {
                    walk(root, &path, out);
                } else {
                    out.insert(rel, std::fs::read(&path).unwrap());
                }
            }
        }
        let mut out = std::collections::BTreeMap::new();
        walk(&self.dir, &self.dir, &mut out);
        out
    }

    /// Makes `path` (relative to the repository) an executable file.
    pub fn write_executable(&self, path: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        self.write(path, text);
        let p = self.dir.join(path);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A conference.md in the seed's bold-key format, built from a few knobs; `extra` lines can be
/// added to any section.
#[derive(Clone, Debug)]
pub struct ConfigBuilder {
    pub title: String,
    pub count: u32,
    pub iterations: u32,
    pub rounds: u32,
    pub agent: String,
    pub agent_timeout: String,
    pub eval: String,
    pub eval_timeout: String,
    pub frozen: String,
    pub noise_runs: u32,
    pub max_total_iterations: u32,
    /// Extra lines for `## Constraints`.
    pub constraints: Vec<String>,
    /// Extra lines for `## Noise Handling`.
    pub noise: Vec<String>,
}

impl ConfigBuilder {
    pub fn new(title: &str, agent: &str) -> ConfigBuilder {
        ConfigBuilder {
            title: title.to_string(),
            count: 1,
            iterations: 3,
            rounds: 1,
            agent: agent.to_string(),
            agent_timeout: "30s".into(),
            eval: "./eval.sh".into(),
            eval_timeout: "30s".into(),
            frozen: "eval.sh".into(),
            noise_runs: 1,
            max_total_iterations: 100,
            constraints: vec![],
            noise: vec![],
        }
    }
    pub fn count(mut self, n: u32) -> Self {
        self.count = n;
        self
    }
    pub fn iterations(mut self, n: u32) -> Self {
        self.iterations = n;
        self
    }
    pub fn rounds(mut self, n: u32) -> Self {
        self.rounds = n;
        self
    }
    pub fn agent_timeout(mut self, t: &str) -> Self {
        self.agent_timeout = t.to_string();
        self
    }
    pub fn frozen(mut self, f: &str) -> Self {
        self.frozen = f.to_string();
        self
    }
    pub fn noise_runs(mut self, n: u32) -> Self {
        self.noise_runs = n;
        self
    }
    pub fn constraint(mut self, line: &str) -> Self {
        self.constraints.push(line.to_string());
        self
    }

    pub fn build(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("# Conference: {}\n\n", self.title));
        s.push_str("## Goal\nLower the score.\n\n");
        s.push_str("## Mode\nmetric\n\n");
        s.push_str("## Success Metric\n- **Metric:** score\n- **Target:** none\n- **Direction:** minimize\n\n");
        s.push_str(&format!(
            "## Researchers\n- **Count:** {}\n- **Iterations per round:** {}\n- **Max rounds:** {}\n\n",
            self.count, self.iterations, self.rounds
        ));
        s.push_str("## Search Space Partitioning\n**Strategy:** free\n\n");
        s.push_str(&format!(
            "## Noise Handling\n- **Noise runs:** {}\n",
            self.noise_runs
        ));
        for l in &self.noise {
            s.push_str(l);
            s.push('\n');
        }
        s.push('\n');
        s.push_str(&format!(
            "## Constraints\n- **Max total iterations:** {}\n",
            self.max_total_iterations
        ));
        for l in &self.constraints {
            s.push_str(l);
            s.push('\n');
        }
        s.push('\n');
        s.push_str(&format!(
            "## Evaluation\n- command: {}\n- timeout: {}\n- frozen: {}\n\n",
            self.eval, self.eval_timeout, self.frozen
        ));
        s.push_str(&format!(
            "## Agent\n- command: {}\n- timeout: {}\n",
            self.agent, self.agent_timeout
        ));
        s
    }
}

/// A `git daemon` on loopback serving `base`, ended when dropped.
pub struct Daemon(pub std::process::Child, pub u16);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn daemon(repo: &TestRepo, base: &Path) -> Daemon {
    daemon_on(repo, base, free_port())
}

/// A loopback port no one listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `git daemon` serving `base` on `port` (a remote that went down comes back on its port).
pub fn daemon_on(repo: &TestRepo, base: &Path, port: u16) -> Daemon {
    daemon_serving(repo, base, port, true)
}

/// A `git daemon` serving `base` read-only (no `receive-pack`: every push is refused).
pub fn read_only_daemon(repo: &TestRepo, base: &Path) -> Daemon {
    daemon_serving(repo, base, free_port(), false)
}

fn daemon_serving(repo: &TestRepo, base: &Path, port: u16, writable: bool) -> Daemon {
    // git-daemon itself, not `git daemon`: git runs the daemon as its child, and killing git
    // would leave the daemon serving after the test.
    let exec_path = repo.git(&["--exec-path"]);
    let program = Path::new(exec_path.trim()).join("git-daemon");
    let child = repo
        .command(program.to_str().unwrap())
        .args(["--export-all", "--reuseaddr", "--listen=127.0.0.1"])
        .args(writable.then_some("--enable=receive-pack"))
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", base.display()))
        .arg(base)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Owned at once, so that it is ended (and waited for) whatever happens next.
    let d = Daemon(child, port);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return d;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("git daemon did not listen on {port}");
}

/// The complement fixture's conference.md: 2 researchers, `iterations` each, 1 round.
pub fn complement_config(iterations: u32) -> String {
    ConfigBuilder::new("Complement", "./agent.sh")
        .count(2)
        .iterations(iterations)
        .rounds(1)
        .build()
}
