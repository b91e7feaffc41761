//! The `slurm` launcher: the commit is staged under a shared-filesystem folder (`- staging:`,
//! else the conference's run folder under `.git`), the wrapper submitted with `sbatch` and the
//! `slurm args`, under a job name unique to the run (written down before `sbatch` returns, so a
//! job whose id never reached the runner can still be cancelled by name). The wrapper's files
//! say when the command started and how it ended; `squeue` only tells a job that vanished
//! without them (cancelled by someone else, a node that failed).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::wrapper::Report;
use super::{records, Ended, Launcher, Request, Stop};
use crate::exec::process::{LineTail, OnLine, Outcome};
use crate::model::Placement;

pub struct Job {
    name: String,
    id: String,
    dir: PathBuf,
    record: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    queue_timeout: Option<Duration>,
}

/// Stages the commit and submits it.
pub async fn start(launcher: &Launcher, req: Request<'_>) -> Result<Job> {
    let name = super::unique_name(&req.stdout);
    let root = launcher.staging_root();
    let root = std::path::absolute(&root).unwrap_or(root);
    let dir = root.join(&name);
    let record = records::Record::Slurm {
        name: name.clone(),
        dir: dir.clone(),
    };
    let record = records::write(&launcher.records_dir(), &name, &record)?;
    let script = launcher.wrapper_script(&req, Report::Files);
    super::stage::unpack(&launcher.git_dir, req.commit, &dir, &script).await?;
    let out = slurm_command("sbatch")
        .args(["--parsable", "--job-name", &name])
        .arg(format!("--output={}", dir.join("slurm.out").display()))
        .arg(format!("--chdir={}", dir.display()))
        .args(&launcher.settings.slurm_args)
        .arg(dir.join("run.sh"))
        .arg(&dir)
        .output()
        .await
        .context("cannot run sbatch")?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&record);
        bail!(
            "sbatch refused the job: {} (check `- slurm args:` in ## Environment)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let id = String::from_utf8_lossy(&out.stdout);
    let id = id.trim().split(';').next().unwrap_or("").to_string();
    Ok(Job {
        name,
        id,
        dir,
        record,
        stdout: req.stdout,
        stderr: req.stderr,
        queue_timeout: launcher.settings.queue_timeout,
    })
}

fn slurm_command(program: &str) -> tokio::process::Command {
    let mut cmd = crate::exec::async_command(program, crate::exec::GitEnv::Clear);
    cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
    cmd
}

/// Slurm's own word on `args` before a start (`sbatch --test-only`): Err with what it said.
pub fn check_args(args: &[String]) -> std::result::Result<(), String> {
    let out = crate::exec::command("sbatch", crate::exec::GitEnv::Clear)
        .arg("--test-only")
        .args(args)
        .args(["--wrap", "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run sbatch: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
}

/// Cancels the job named `name` and waits (up to 30 s) until Slurm no longer lists it.
pub async fn cancel_by_name(name: &str) {
    // Not killed if this runner is torn down meanwhile: the job must go whatever happens here.
    let _ = slurm_command("scancel")
        .args(["--name", name])
        .kill_on_drop(false)
        .status()
        .await;
    for _ in 0..300 {
        if job_state(&["--name", name]).await.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The state Slurm lists for the job (`PENDING`, `RUNNING`…); None when it lists none.
async fn job_state(select: &[&str]) -> Option<String> {
    let out = slurm_command("squeue")
        .args(["-h", "-o", "%T %r"])
        .args(select)
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Cancels job `id` (and, should the id be lost, every job of its unique name).
pub async fn cancel(id: &str, name: &str) {
    if !id.is_empty() {
        let _ = slurm_command("scancel")
            .arg(id)
            .kill_on_drop(false)
            .status()
            .await;
    }
    cancel_by_name(name).await;
}

impl Job {
    pub fn canceller(&self) -> super::Canceller {
        super::Canceller::Slurm {
            id: self.id.clone(),
            name: self.name.clone(),
        }
    }

    async fn cancel(&self) {
        self.canceller().cancel().await;
    }

    /// `on_line` tails the wrapper's `out` in the staging folder (on the shared filesystem, so
    /// it grows here as the job writes it on its node).
    pub async fn wait(self, timeout: Duration, mut on_line: Option<OnLine<'_>>) -> Result<Ended> {
        let out = self.dir.join("out");
        let mut lines = on_line.as_mut().map(|f| LineTail::new(&out, &mut **f));
        let queued = self.until_started().await;
        let (stop, started, failure) =
            match queued {
                Ok(true) => {
                    let started = Instant::now();
                    let deadline = Some(started + timeout);
                    let stop = self.until_exit(deadline, lines.as_mut()).await.err();
                    (stop, Some(started), None)
                }
                Ok(false) => (None, None, None),
                Err(Waited::Stop(stop)) => (Some(stop), None, None),
                Err(Waited::Queue(state)) => (
                    Some(Stop::TimedOut),
                    None,
                    Some(format!(
                    "the Slurm job waited in the queue longer than the queue timeout ({}; {state})",
                    crate::config::duration::format_duration(self.queue_timeout.unwrap_or_default())
                )),
                ),
            };
        if stop.is_some() {
            self.cancel().await;
        } else if let Some(lines) = lines.as_mut() {
            // The lines written last, for the watcher's record (too late to stop anything).
            lines.read_new();
        }
        let elapsed = started.map(|s| s.elapsed()).unwrap_or_default();
        let ended = self.collect(stop, failure, elapsed);
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.record);
        ended
    }

    /// Waits until the wrapper's command starts (true), the job ends first (false, e.g. setup
    /// failed), the queue timeout passes or Ctrl-C.
    async fn until_started(&self) -> Result<bool, Waited> {
        let queued = Instant::now();
        let mut checked = Instant::now();
        loop {
            if self.dir.join("started").exists() {
                return Ok(true);
            }
            if self.dir.join("exit").exists() {
                return Ok(false);
            }
            if crate::exec::process::cancelled() {
                return Err(Waited::Stop(Stop::Cancelled));
            }
            if checked.elapsed() >= Duration::from_secs(1) {
                checked = Instant::now();
                let state = job_state(&["-j", &self.id]).await;
                if state.is_none() && !self.dir.join("started").exists() {
                    return Ok(false);
                }
                let pending = state.as_deref().is_some_and(|s| s.starts_with("PENDING"));
                if pending && self.queue_timeout.is_some_and(|q| queued.elapsed() >= q) {
                    return Err(Waited::Queue(state.unwrap_or_default()));
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the exit file, a job that vanished without it, the deadline, Ctrl-C or the
    /// line watcher's stop.
    async fn until_exit(
        &self,
        deadline: Option<Instant>,
        mut lines: Option<&mut LineTail<'_, '_>>,
    ) -> Result<(), Stop> {
        let mut checked = Instant::now();
        loop {
            if self.dir.join("exit").exists() {
                return Ok(());
            }
            if lines.as_mut().is_some_and(|l| l.read_new()) {
                return Err(Stop::Watcher);
            }
            if crate::exec::process::cancelled() {
                return Err(Stop::Cancelled);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Stop::TimedOut);
            }
            if checked.elapsed() >= Duration::from_secs(1) {
                checked = Instant::now();
                if job_state(&["-j", &self.id]).await.is_none() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The wrapper's files as the run's outcome, logs and placement.
    fn collect(
        &self,
        stop: Option<Stop>,
        failure: Option<String>,
        elapsed: Duration,
    ) -> Result<Ended> {
        let read = |name: &str| std::fs::read(self.dir.join(name)).unwrap_or_default();
        std::fs::write(&self.stdout, read("out"))?;
        std::fs::write(&self.stderr, read("err"))?;
        let mut placement =
            Placement::read_lines("slurm", &String::from_utf8_lossy(&read("where")));
        placement.job = Some(self.id.clone());
        let exit = String::from_utf8_lossy(&read("exit"))
            .trim()
            .parse::<i32>()
            .ok();
        let (outcome, failure) = match (stop, exit) {
            (Some(stop), _) => (stop.outcome(), failure),
            (None, Some(code)) => (Outcome::Exited(code), None),
            (None, None) => {
                let log = String::from_utf8_lossy(&read("slurm.out")).into_owned();
                let why = format!(
                    "Slurm job {} ended without the wrapper's exit code{}",
                    self.id,
                    Some(super::tail(&log))
                        .filter(|t| !t.is_empty())
                        .map(|t| format!(": {t}"))
                        .unwrap_or_default()
                );
                (Outcome::Exited(255), Some(why))
            }
        };
        Ok(Ended {
            outcome,
            elapsed,
            placement,
            launcher_failure: failure,
        })
    }
}

/// Why waiting for a queued job stopped.
enum Waited {
    Stop(Stop),
    /// The queue timeout passed; Slurm's state and reason.
    Queue(String),
}
