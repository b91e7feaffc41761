//! Where an evaluation runs: a launcher starts one run of the evaluation command on a commit and
//! hands back a [`Job`] to wait for or cancel.
//!
//! `local` (the default) runs the command in the worktree as a child process group, as
//! evaluations always ran. The others ship exactly the attempt's commit (`git archive`, never the
//! worktree) into a fresh folder under a staging root and run it there through one wrapper script
//! (`wrapper.rs`): `command` fills a template with it (SkyPilot, Ray Jobs, kubectl…), `ssh` runs it
//! on a host of `hosts`, `slurm` submits it with `sbatch`; `ray` uploads it as a Ray job's working
//! directory over Ray's Jobs API (`ray.rs`). Every early end of a run (its timeout,
//! Ctrl-C, an early stop such as pruning's) goes through [`Job::cancel`]. What a remote run leaves (a job, a remote
//! process group, a staged folder) is written down under `<run-dir>/launched/` before it is
//! submitted, so that the next runner (`resume`, `clean`) cancels what a killed one left:
//! [`cancel_left_behind`].

mod command;
mod leftovers;
mod ray;
mod records;
mod slurm;
mod ssh;
mod stage;
pub mod wrapper;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::config::environment::Environment;
use crate::config::launcher::{Launch, LauncherKind};
use crate::exec::process::{self, OnLine, Outcome, Running, Spec};
use crate::model::Placement;

pub use leftovers::cancel_left_behind;
pub use ray::check as check_ray;
pub use slurm::check_args as check_slurm_args;

/// A launcher, made from `## Environment`.
pub struct Launcher {
    pub settings: Launch,
    setup: Option<String>,
    setup_timeout: Duration,
    /// The repository's git folder, for `git archive`.
    git_dir: PathBuf,
    /// The conference's run folder: the records of what was submitted, the default staging root.
    run_dir: PathBuf,
    /// `hardware: same`: the class every reading must be taken on, once the first one named it.
    pinned_class: Option<std::sync::Mutex<Option<String>>>,
}

/// One run of the evaluation command.
pub struct Request<'a> {
    pub command: &'a str,
    /// The worktree holding `commit` (where a local run happens).
    pub cwd: &'a Path,
    /// What a remote run ships.
    pub commit: &'a str,
    pub env: Vec<(String, String)>,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// The ssh host the evaluation's slot holds.
    pub host: Option<&'a str>,
    /// Whether the run's stdout is wanted here while it runs (pruning watches it), not only at
    /// its end: ssh then streams it back as it grows.
    pub stream: bool,
}

/// How a run ended, and where it ran.
pub struct Ended {
    pub outcome: Outcome,
    /// From the command's start (after setup and any queue) to its end.
    pub elapsed: Duration,
    pub placement: Placement,
    /// Why the launcher could not run it (a host that refuses connections, a queue timeout):
    /// the run says nothing about the tree.
    pub launcher_failure: Option<String>,
}

/// A running evaluation.
pub enum Job {
    Local(Running, Placement),
    Command(command::Job),
    Ssh(ssh::Job),
    Slurm(slurm::Job),
    Ray(ray::Job),
}

impl Launcher {
    pub fn new(env: &Environment, git_dir: &Path, run_dir: &Path) -> Launcher {
        Launcher {
            pinned_class: None,
            settings: env.launch.clone(),
            setup: env.setup.clone(),
            setup_timeout: env.setup_timeout(),
            git_dir: git_dir.to_path_buf(),
            run_dir: run_dir.to_path_buf(),
        }
    }

    /// Keeps every reading on one hardware class (`- hardware: same`): the first reading that
    /// names a class pins it (`class`, when the conference already knows it).
    pub fn keep_to_one_class(mut self, class: Option<String>) -> Launcher {
        self.pinned_class = Some(std::sync::Mutex::new(class));
        self
    }

    /// With `hardware: same`, a run on another class than the pinned one becomes a launcher
    /// failure: its reading is not comparable, and says nothing about the tree.
    pub fn admit(&self, ended: &mut Ended) {
        let (Some(pin), Some(class)) = (&self.pinned_class, ended.placement.class()) else {
            return;
        };
        let mut pin = pin.lock().unwrap_or_else(|e| e.into_inner());
        match pin.as_deref() {
            None => *pin = Some(class),
            Some(pinned) if pinned != class && ended.launcher_failure.is_none() => {
                ended.launcher_failure = Some(format!(
                    "ran on {class}, and this conference measures on {pinned} (`- hardware: same` under ## Evaluation): the reading is not comparable"
                ));
            }
            Some(_) => {}
        }
    }

    pub fn kind(&self) -> LauncherKind {
        self.settings.kind
    }

    /// Whether runs happen somewhere else than the worktree (then they get a staged tree).
    pub fn is_remote(&self) -> bool {
        self.kind() != LauncherKind::Local
    }

    /// Starts one run; None when Ctrl-C came first.
    pub async fn start(&self, req: Request<'_>) -> Result<Option<Job>> {
        if process::cancelled() {
            return Ok(None);
        }
        Ok(Some(match self.kind() {
            LauncherKind::Local => {
                let spec = Spec {
                    command: req.command,
                    cwd: req.cwd,
                    env: req.env,
                    timeout: None,
                    stdout: req.stdout,
                    stderr: req.stderr,
                    stdin: None,
                };
                let Some(running) = process::start(spec).await? else {
                    return Ok(None);
                };
                Job::Local(running, local_placement())
            }
            LauncherKind::Command => match command::start(self, req).await? {
                Some(job) => Job::Command(job),
                None => return Ok(None),
            },
            LauncherKind::Ssh => Job::Ssh(ssh::start(self, req).await?),
            LauncherKind::Slurm => Job::Slurm(slurm::start(self, req).await?),
            LauncherKind::Ray => Job::Ray(ray::start(self, req).await?),
        }))
    }

    /// The root under which local staged trees go (`command`, `slurm`).
    fn staging_root(&self) -> PathBuf {
        match &self.settings.staging {
            Some(s) => PathBuf::from(s),
            None => self.run_dir.join("staging"),
        }
    }

    /// The wrapper script a staged tree runs for `req`: its command, environment, setup and
    /// remote shared data, reporting as `report` says.
    fn wrapper_script(&self, req: &Request<'_>, report: wrapper::Report) -> String {
        wrapper::script(&wrapper::Wrapped {
            command: req.command,
            env: &req.env,
            setup: self.setup.as_deref(),
            shared: &self.settings.remote_shared,
            report,
        })
    }

    fn records_dir(&self) -> PathBuf {
        self.run_dir.join("launched")
    }
}

impl Job {
    /// Waits for the run to end; `timeout` counts from when its command starts (a queue and
    /// setup before it do not count). On the timeout or Ctrl-C the run is cancelled.
    ///
    /// `on_line` is shown each line of the run's stdout as it arrives here: `local` and
    /// `command` tail the local stdout log as the command (or the submitter, which streams the
    /// remote output back) writes it; `slurm` tails the wrapper's `out` in the staging folder on
    /// the shared filesystem; `ssh` appends what the host streams back to the local stdout log
    /// and tails that (with [`Request::stream`]; else the output and the lines come at the end). When `on_line` asks to stop, the run is cancelled as a
    /// timeout cancels it ([`Job::cancel`]'s kill) and ends [`Outcome::Stopped`].
    pub async fn wait(self, timeout: Duration, on_line: Option<OnLine<'_>>) -> Result<Ended> {
        match self {
            Job::Local(running, placement) => {
                let finished = running.wait(Some(timeout), on_line).await?;
                Ok(Ended {
                    outcome: finished.outcome,
                    elapsed: finished.elapsed,
                    placement,
                    launcher_failure: None,
                })
            }
            Job::Command(job) => job.wait(timeout, on_line).await,
            Job::Ssh(job) => job.wait(timeout, on_line).await,
            Job::Slurm(job) => job.wait(timeout, on_line).await,
            Job::Ray(job) => job.wait(timeout, on_line).await,
        }
    }

    /// Ends the run wherever it runs: the one way a running evaluation is stopped early (its
    /// timeout and Ctrl-C inside [`Job::wait`]; an early stop from outside through
    /// [`Job::canceller`]).
    pub async fn cancel(&self) {
        self.canceller().cancel().await;
    }

    /// A handle to [`Job::cancel`] for another task while this one waits (an early stop).
    pub fn canceller(&self) -> Canceller {
        match self {
            Job::Local(running, _) => Canceller::Group(running.canceller()),
            Job::Command(job) => Canceller::Group(job.canceller()),
            Job::Ssh(job) => job.canceller(),
            Job::Slurm(job) => job.canceller(),
            Job::Ray(job) => job.canceller(),
        }
    }
}

/// Cancels one running job: what [`Job::cancel`] does, detached from the job.
#[derive(Debug, Clone)]
pub enum Canceller {
    /// A local process group (a local run, a `command` submitter).
    Group(process::GroupCanceller),
    /// The wrapper's process group on an ssh host.
    Ssh {
        ssh: Vec<String>,
        host: String,
        dir: String,
    },
    /// A Slurm job, by id and by its unique name.
    Slurm { id: String, name: String },
    /// A Ray job, by its submission id.
    Ray { api: ray::Api, id: String },
}

impl Canceller {
    pub async fn cancel(&self) {
        match self {
            Canceller::Group(group) => group.cancel(),
            Canceller::Ssh { ssh, host, dir } => ssh::kill_remote(ssh, host, dir, false).await,
            Canceller::Slurm { id, name } => slurm::cancel(id, name).await,
            Canceller::Ray { api, id } => api.stop(id).await,
        }
    }
}

/// Why waiting stopped before the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    TimedOut,
    Cancelled,
    /// The run's line watcher asked to stop it (pruning).
    Watcher,
}

/// Resolves when `deadline` passes or Ctrl-C is pressed (checked every 50 ms).
async fn stopped(deadline: Option<Instant>) -> Stop {
    loop {
        if process::cancelled() {
            return Stop::Cancelled;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Stop::TimedOut;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Stop {
    fn outcome(self) -> Outcome {
        match self {
            Stop::TimedOut => Outcome::TimedOut,
            Stop::Cancelled => Outcome::Cancelled,
            Stop::Watcher => Outcome::Stopped,
        }
    }
}

/// This machine, for a local run: its host name, and the model and driver of its first GPU as
/// `nvidia-smi` names them (asked once; no count: `devices` decides what a run sees).
fn local_placement() -> Placement {
    static HERE: std::sync::OnceLock<Placement> = std::sync::OnceLock::new();
    HERE.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string());
        let gpus = crate::exec::command("nvidia-smi", crate::exec::GitEnv::Clear)
            .args(["--query-gpu=name,driver_version", "--format=csv,noheader"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let gpus: Vec<&str> = gpus.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut first = gpus
            .first()
            .map(|l| l.split(',').map(str::trim))
            .into_iter()
            .flatten();
        Placement {
            launcher: "local".into(),
            host,
            gpu: first.next().filter(|g| !g.is_empty()).map(str::to_string),
            driver: first.next().filter(|d| !d.is_empty()).map(str::to_string),
            ..Placement::default()
        }
    })
    .clone()
}

/// A name for a staged folder or job that no other run of this or another runner has:
/// the log's name, this process and the time.
fn unique_name(stdout: &Path) -> String {
    let stem = stdout
        .file_name()
        .map(|n| n.to_string_lossy().replace(['.', ' '], "-"))
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("gc-{stem}-{}-{nanos}", std::process::id())
}

/// The last lines of `text` after `: `, for reasons.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}
