//! The `ssh` launcher: one ssh session per run ships the commit (a tar on stdin), starts the
//! wrapper in a session of its own on the host (`setsid`: its process group is what a cancel
//! kills), waits for it and sends back its files as a tar, then removes the staged folder.
//!
//! The session's stdout says, in order, `pid N` and `started` (the command started after setup:
//! the timeout runs from here), then `done` and the tar. ssh is the user's own: the `ssh` on PATH
//! with the user's config, or `- ssh command:`; `BatchMode` so that it never waits for a password.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout};

use super::wrapper::{quote, Report};
use super::{records, Ended, Launcher, Request, Stop};
use crate::config::launcher::DEFAULT_REMOTE_STAGING;
use crate::exec::process::{LineTail, OnLine, Outcome};
use crate::model::Placement;

pub struct Job {
    ssh: Vec<String>,
    host: String,
    dir: String,
    record: PathBuf,
    session: Child,
    out: BufReader<ChildStdout>,
    ssh_err: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    setup_timeout: Duration,
}

/// The ssh program and its options: `- ssh command:` or `ssh`, never asking for a password.
fn ssh_argv(launcher: &Launcher) -> Vec<String> {
    let mut argv: Vec<String> = launcher
        .settings
        .ssh_command
        .as_deref()
        .unwrap_or("ssh")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    argv.extend(["-o".into(), "BatchMode=yes".into()]);
    argv
}

/// Starts the session that stages and runs one evaluation on the slot's host.
pub async fn start(launcher: &Launcher, req: Request<'_>) -> Result<Job> {
    let target = req.host.context("an ssh evaluation without a host")?;
    let host = (launcher.settings.hosts.iter())
        .find(|h| h.target == target)
        .context("a host not in hosts")?;
    let root = host.staging.as_deref().unwrap_or(DEFAULT_REMOTE_STAGING);
    let name = super::unique_name(&req.stdout);
    let dir = format!("{}/{name}", root.trim_end_matches('/'));
    let ssh = ssh_argv(launcher);
    let record = records::Record::Ssh {
        ssh: ssh.clone(),
        host: target.to_string(),
        dir: dir.clone(),
    };
    let record = records::write(&launcher.records_dir(), &name, &record)?;
    let script = launcher.wrapper_script(&req, Report::Files);
    let tar = super::stage::archive(&launcher.git_dir, req.commit).await?;
    let ssh_err = req.stderr.with_extension("ssh");
    let session_script = session_script(&dir, &script, req.stream);
    let mut session = command(&ssh, target, &session_script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&ssh_err)?))
        .spawn()
        .with_context(|| format!("cannot run {}", ssh[0]))?;
    let mut stdin = session.stdin.take().expect("piped");
    tokio::spawn(async move {
        let _ = stdin.write_all(&tar).await;
    });
    let out = BufReader::new(session.stdout.take().expect("piped"));
    Ok(Job {
        ssh,
        host: target.to_string(),
        dir,
        record,
        session,
        out,
        ssh_err,
        stdout: req.stdout,
        stderr: req.stderr,
        setup_timeout: launcher.setup_timeout,
    })
}

/// `ssh … host 'sh -c <script>'` in a process group of its own (Ctrl-C is the runner's to
/// handle), with the repository's variables cleared.
fn command(ssh: &[String], host: &str, script: &str) -> tokio::process::Command {
    let mut cmd = crate::exec::async_command(&ssh[0], crate::exec::GitEnv::Clear);
    cmd.args(&ssh[1..])
        .arg(host)
        .arg(format!("sh -c {}", quote(script)))
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// What the session runs on the host. With `stream`, what the command writes to `out` is sent
/// back while it runs, every tenth of a second, as `chunk N` lines each followed by N bytes.
fn session_script(dir: &str, wrapper: &str, stream: bool) -> String {
    let wait = if stream { STREAMED_WAIT } else { "wait $p\n" };
    format!(
        "D={dir}\nmkdir -p \"$D/tree\" && cd \"$D\" && tar -x -C tree && printf '%s' {wrapper} >run.sh || exit 96\n\
         setsid sh run.sh \"$PWD\" </dev/null 2>/dev/null &\np=$!\necho \"pid $p\"\n{wait}echo done\n\
         touch out err where\ntar -c -f - out err where $([ -f exit ] && echo exit)\ncd / && rm -rf \"$D\"\n",
        dir = quote(dir),
        wrapper = quote(wrapper)
    )
}

/// Waits for the wrapper (pid `$p`) while a loop sends back what `out` grew by; the loop ends
/// once the wrapper is reaped (`.ended`) or gone, after sending the rest, before `done`.
const STREAMED_WAIT: &str = r#"send() {
    k=$(wc -c <out 2>/dev/null | tr -d ' ')
    [ -n "$k" ] && [ "$k" -gt "$n" ] || return 0
    echo "chunk $((k - n))"
    tail -c +$((n + 1)) out | head -c $((k - n))
    n=$k
}
( n=0
  while [ ! -e .ended ] && kill -0 $p 2>/dev/null; do send; sleep 0.1 2>/dev/null || sleep 1; done
  send ) &
w=$!
wait $p
touch .ended
wait $w
"#;

/// Kills the wrapper's process group on the host (its pid is in `dir/pid`), and removes the
/// staged folder when `remove`.
pub async fn kill_remote(ssh: &[String], host: &str, dir: &str, remove: bool) {
    let d = quote(dir);
    let mut script = format!(
        "p=$(cat {d}/pid 2>/dev/null) && [ -n \"$p\" ] && {{ kill -TERM -$p 2>/dev/null; sleep 0.2; kill -KILL -$p 2>/dev/null; }}; true"
    );
    if remove {
        script.push_str(&format!("; rm -rf {d}"));
    }
    // Not killed if this runner is torn down meanwhile (Ctrl-C ends the run while it waits):
    // the remote group must go whatever happens here.
    let run = command(ssh, host, &script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(false)
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(30), run).await;
}

impl Job {
    pub fn canceller(&self) -> super::Canceller {
        super::Canceller::Ssh {
            ssh: self.ssh.clone(),
            host: self.host.clone(),
            dir: self.dir.clone(),
        }
    }

    async fn cancel(&self) {
        self.canceller().cancel().await;
    }

    /// `on_line` tails the local stdout log, which grows as the host streams the run's output
    /// back (a session started with [`Request::stream`](super::Request)); without it the output
    /// comes back with the run's end (in the session's tar) and `on_line` sees the lines then.
    pub async fn wait(
        mut self,
        timeout: Duration,
        mut on_line: Option<OnLine<'_>>,
    ) -> Result<Ended> {
        let stdout = self.stdout.clone();
        let _ = std::fs::write(&stdout, b"");
        let mut lines = on_line.as_mut().map(|f| LineTail::new(&stdout, &mut **f));
        let first = (self.read_until("started", self.setup_timeout, lines.as_mut())).await;
        let (stop, started) = match first {
            Ok(true) => {
                let started = Instant::now();
                let done = self.read_until("done", timeout, lines.as_mut()).await;
                (done.err(), Some(started))
            }
            Ok(false) => (None, None),
            Err(stop) => (Some(stop), None),
        };
        match stop {
            // Ctrl-C: nothing of the run is wanted, and the runner is about to end.
            Some(Stop::Cancelled) => kill_remote(&self.ssh, &self.host, &self.dir, true).await,
            Some(Stop::TimedOut | Stop::Watcher) => self.cancel().await,
            None => {}
        }
        let elapsed = started.map(|s| s.elapsed()).unwrap_or_default();
        let record = self.record.clone();
        let ended = self.collect(stop, elapsed).await;
        let _ = std::fs::remove_file(record);
        if let Some(lines) = lines.as_mut().filter(|_| stop.is_none()) {
            // The rest of the output, now whole in the log, for the watcher's record.
            lines.read_new();
        }
        ended
    }

    /// Reads the session's lines until `want` (true), the end of the wrapper or of the session
    /// (false), or a stop after `limit`; output chunks go to the local stdout log, where
    /// `lines` (the watcher) reads them, and its stop is a stop too.
    async fn read_until(
        &mut self,
        want: &str,
        limit: Duration,
        mut lines: Option<&mut LineTail<'_, '_>>,
    ) -> Result<bool, Stop> {
        let deadline = Some(Instant::now() + limit);
        loop {
            let mut line = String::new();
            tokio::select! {
                read = self.out.read_line(&mut line) => match read {
                    Ok(0) | Err(_) => return Ok(false),
                    Ok(_) => match line.trim() {
                        l if l == want => return Ok(true),
                        "done" => return Ok(false),
                        l => {
                            let Some(n) = l.strip_prefix("chunk ").and_then(|n| n.parse().ok()) else {
                                continue;
                            };
                            if self.append_chunk(n).await.is_err() {
                                return Ok(false);
                            }
                            if lines.as_mut().is_some_and(|l| l.read_new()) {
                                return Err(Stop::Watcher);
                            }
                        }
                    },
                },
                stop = super::stopped(deadline) => return Err(stop),
            }
        }
    }

    /// Reads `n` bytes of streamed output and appends them to the local stdout log.
    async fn append_chunk(&mut self, n: usize) -> std::io::Result<()> {
        use std::io::Write;
        let mut bytes = vec![0; n];
        self.out.read_exact(&mut bytes).await?;
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.stdout)?;
        log.write_all(&bytes)
    }

    /// After `done` (or a stop): the files the session sends back, the outcome they say.
    async fn collect(mut self, stop: Option<Stop>, elapsed: Duration) -> Result<Ended> {
        let mut rest = Vec::new();
        let reading = self.out.read_to_end(&mut rest);
        let _ = tokio::time::timeout(Duration::from_secs(10), reading).await;
        let _ = self.session.start_kill();
        let status = self.session.wait().await.ok().and_then(|s| s.code());
        let files = unpack(&rest, &self.stdout).await;
        std::fs::write(&self.stdout, files.get("out").cloned().unwrap_or_default())?;
        std::fs::write(&self.stderr, files.get("err").cloned().unwrap_or_default())?;
        let where_text = String::from_utf8_lossy(files.get("where").map_or(&[][..], |v| v));
        let mut placement = Placement::read_lines("ssh", &where_text);
        placement.host = Some(self.host.clone());
        let exit = files
            .get("exit")
            .and_then(|b| String::from_utf8_lossy(b).trim().parse::<i32>().ok());
        let (outcome, failure) = match (stop, exit) {
            (Some(stop), _) => (stop.outcome(), None),
            (None, Some(code)) => (Outcome::Exited(code), None),
            (None, None) => {
                let said = std::fs::read_to_string(&self.ssh_err).unwrap_or_default();
                let why = format!(
                    "ssh to {} failed (exit status {}){}",
                    self.host,
                    status.map_or("none".to_string(), |c| c.to_string()),
                    Some(super::tail(&said))
                        .filter(|t| !t.is_empty())
                        .map(|t| format!(": {t}"))
                        .unwrap_or_default()
                );
                (Outcome::Exited(255), Some(why))
            }
        };
        if stop.is_some() || exit.is_none() {
            // The session may not have reached its own clean-up.
            kill_remote(&self.ssh, &self.host, &self.dir, true).await;
        }
        let _ = std::fs::remove_file(&self.ssh_err);
        Ok(Ended {
            outcome,
            elapsed,
            placement,
            launcher_failure: failure,
        })
    }
}

/// The files of a tar stream, by name (empty when it is cut short).
async fn unpack(tar: &[u8], near: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let Some(parent) = near.parent() else {
        return files;
    };
    let Ok(tmp) = tempfile::tempdir_in(parent) else {
        return files;
    };
    let child = crate::exec::async_command("tar", crate::exec::GitEnv::Clear)
        .arg("-x")
        .arg("-C")
        .arg(tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Ok(mut child) = child {
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(tar).await;
        }
        let _ = child.wait().await;
    }
    for name in ["out", "err", "where", "exit"] {
        if let Ok(bytes) = std::fs::read(tmp.path().join(name)) {
            files.insert(name.to_string(), bytes);
        }
    }
    files
}
