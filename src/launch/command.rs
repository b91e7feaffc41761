//! The `command` launcher: `- launch:` is any submitter (SkyPilot, Ray Jobs, kubectl…) that runs
//! a command in a folder somewhere and streams its output back. The template gets `{dir}` (the
//! staged tree, with the wrapper in it as `.git-conference-run.sh`), `{command}` (what to run
//! there: `sh .git-conference-run.sh`) and `{env}` (the conference's variables as `K='v'`
//! words). The submitter runs here as a local process group: its exit code and output are the
//! evaluation's, its timeout and cancel are the local ones.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::wrapper::{self, Report};
use super::{records, Ended, Launcher, Request};
use crate::exec::process::{self, OnLine, Running, Spec};
use crate::model::Placement;

/// Where the wrapper sits in the staged tree.
pub const WRAPPER: &str = ".git-conference-run.sh";

pub struct Job {
    running: Running,
    dir: PathBuf,
    record: PathBuf,
    stderr: PathBuf,
}

/// Stages the commit and starts the filled-in template; None when Ctrl-C came first.
pub async fn start(launcher: &Launcher, req: Request<'_>) -> Result<Option<Job>> {
    let name = super::unique_name(&req.stdout);
    let dir = launcher.staging_root().join(&name);
    let record = records::write(
        &launcher.records_dir(),
        &name,
        &records::Record::Command { dir: dir.clone() },
    )?;
    let script = launcher.wrapper_script(&req, Report::Streams);
    super::stage::unpack(&launcher.git_dir, req.commit, &dir, &script).await?;
    let tree = dir.join("tree");
    std::fs::rename(dir.join("run.sh"), tree.join(WRAPPER))?;
    let template = launcher.settings.template.as_deref().unwrap_or("{command}");
    let command = fill(template, &tree.display().to_string(), &req.env);
    let spec = Spec {
        command: &command,
        cwd: &tree,
        env: req.env.clone(),
        timeout: None,
        stdout: req.stdout,
        stderr: req.stderr.clone(),
        stdin: None,
    };
    let running = match process::start(spec).await {
        Ok(Some(running)) => running,
        not_started => {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_file(&record);
            return not_started.map(|_| None);
        }
    };
    Ok(Some(Job {
        running,
        dir,
        record,
        stderr: req.stderr,
    }))
}

/// The template with `{dir}`, `{command}` and `{env}` filled in (each quoted for `sh`).
pub fn fill(template: &str, dir: &str, env: &[(String, String)]) -> String {
    template
        .replace("{dir}", &wrapper::quote(dir))
        .replace("{command}", &format!("sh {WRAPPER}"))
        .replace("{env}", &wrapper::assignments(env))
}

impl Job {
    pub fn canceller(&self) -> process::GroupCanceller {
        self.running.canceller()
    }

    /// `on_line` tails the submitter's stdout here, which is the run's as far as the submitter
    /// streams it back while the run goes on.
    pub async fn wait(self, timeout: Duration, on_line: Option<OnLine<'_>>) -> Result<Ended> {
        let finished = self.running.wait(Some(timeout), on_line).await;
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.record);
        let finished = finished?;
        let stderr = process::read_output(&self.stderr);
        let placement = Placement::read_lines(
            "command",
            &stderr
                .lines()
                .filter(|l| l.starts_with(crate::model::placement::WHERE_PREFIX))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        Ok(Ended {
            outcome: finished.outcome,
            elapsed: finished.elapsed,
            placement,
            launcher_failure: None,
        })
    }
}
