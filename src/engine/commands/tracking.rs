//! The hook-up of the MLflow tracker (`crate::tracker`): a run's sink is one more observer of the
//! recorder, fed every event it records, and `export mlflow` sends a conference's whole log.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use git2::Repository;

use crate::engine::record::recorder::Observer;
use crate::engine::Conference;
use crate::model::EventLine;
use crate::tracker::mlflow::{Client, Failure};
use crate::tracker::runs::{Runs, Sent, Settings};
use crate::tracker::{Sink, FLUSH};

/// The sink as an observer: each event is handed over, and the end waits a bounded time.
struct Tracker {
    sink: Sink,
    say: crate::tracker::Say,
}

impl Observer for Tracker {
    fn recorded(&mut self, _conference: &str, line: &EventLine) {
        self.sink.send(line);
    }
    fn finish(&mut self) {
        if let Some(line) = self.sink.finish(flush_time()) {
            (self.say)(&format!("git-conference: {line}"));
        }
    }
}

/// How long the end waits for what is still to send: [`FLUSH`], or the seconds
/// `GIT_CONFERENCE_MLFLOW_FLUSH` names (a slow tracker on a loaded machine).
fn flush_time() -> std::time::Duration {
    std::env::var("GIT_CONFERENCE_MLFLOW_FLUSH")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(std::time::Duration::from_secs_f64)
        .unwrap_or(FLUSH)
}

fn settings(conf: &Conference, experiment: String, everything: bool) -> Settings {
    Settings {
        conference: conf.name.clone(),
        experiment,
        metric: crate::engine::measure::evaluate::metric_name(&conf.config),
        direction: (conf.config.metric.as_ref())
            .and_then(|m| serde_json::to_value(m.direction).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        machine: conf.link().map(|l| l.machine.clone()),
        everything,
    }
}

/// Starts sending `conf` to MLflow when its `## Environment` names a tracking server: what the
/// log holds already (a killed run's unsent events), then every event as it is recorded.
pub fn attach(conf: &Conference) -> Result<()> {
    let Some(mlflow) = &conf.config.environment.mlflow else {
        return Ok(());
    };
    let ui = conf.ui.clone();
    let say: crate::tracker::Say = Arc::new(move |line: &str| ui.warn(line));
    let uri = match mlflow.resolved_uri() {
        Ok(uri) => uri,
        Err(why) => {
            say(&format!(
                "git-conference: MLflow: {why}; nothing is sent (`git conference export mlflow {} --uri URL` sends it later)",
                conf.name
            ));
            return Ok(());
        }
    };
    let experiment = mlflow.experiment_for(&conf.name);
    let runs = Runs::new(
        Client::new(&uri),
        settings(conf, experiment, false),
        conf.open_repo()?,
    );
    let (dir, name) = (conf.repo_dir.clone(), conf.name.clone());
    let history: crate::tracker::History = Box::new(move || {
        let repo = Repository::open(&dir)?;
        let (events, _) = super::log::read_all(&repo, &name)?;
        Ok(events.into_iter().map(|e| e.event).collect())
    });
    let sink = Sink::start(runs, history, say.clone());
    conf.recorder
        .lock()
        .unwrap()
        .observe(Box::new(Tracker { sink, say }));
    Ok(())
}

/// What `export mlflow` did.
pub struct Exported {
    pub uri: String,
    pub experiment: String,
    pub experiment_id: String,
    pub conference_run: Option<String>,
    pub sent: Sent,
    pub events: usize,
    /// Events the server refused, with its reason.
    pub refused: Vec<String>,
}

/// Sends every event of conference `name` to MLflow at `uri` (default: its `- mlflow:`), into
/// `experiment` (default: its `- mlflow experiment:`, else its name). Idempotent: runs already
/// there are found by their commit tags and not made again.
pub fn export(
    repo_dir: &Path,
    name: &str,
    uri: Option<String>,
    experiment: Option<String>,
) -> Result<Exported> {
    let conf = Conference::view(repo_dir, name)?;
    let configured = conf.config.environment.mlflow.clone();
    let uri = match (uri, &configured) {
        (Some(u), _) => crate::config::tracker::http_url(&u).map_err(crate::error::usage)?,
        (None, Some(m)) => m.resolved_uri().map_err(crate::error::usage)?,
        (None, None) => crate::config::tracker::Mlflow {
            uri: None,
            experiment: None,
        }
        .resolved_uri()
        .map_err(|_| {
            crate::error::usage(format!(
                "where is the MLflow server? `{name}` names none (`- mlflow:` under ## Environment): give `--uri http://HOST:PORT`, or set MLFLOW_TRACKING_URI"
            ))
        })?,
    };
    let experiment = experiment
        .or_else(|| configured.and_then(|m| m.experiment))
        .unwrap_or_else(|| name.to_string());
    let mut runs = Runs::new(
        Client::new(&uri),
        settings(&conf, experiment.clone(), true),
        conf.open_repo()?,
    );
    let (events, _) = super::log::read_all(&conf.open_repo()?, name)?;
    let mut refused = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let sent = with_retries(|| {
            if !runs.connected() {
                runs.connect()?;
            }
            runs.send(&e.event)
        });
        match sent {
            Ok(()) => {}
            Err(Failure::Refused { code, message }) => {
                refused.push(format!("{} ({code}: {message})", e.event.event))
            }
            Err(down) => anyhow::bail!(
                "MLflow at {uri}: {down}; {i} of {} events were sent, run `git conference export mlflow {name}` again to send the rest (nothing is sent twice)",
                events.len()
            ),
        }
    }
    let (experiment_id, run) = runs.ids();
    Ok(Exported {
        experiment_id: experiment_id.unwrap_or_default().to_string(),
        conference_run: run.map(str::to_string),
        uri,
        experiment,
        sent: runs.sent,
        events: events.len(),
        refused,
    })
}

/// `send` tried again while the server cannot be reached, for up to half a minute (the one
/// backoff policy, with jitter).
fn with_retries(mut send: impl FnMut() -> Result<(), Failure>) -> Result<(), Failure> {
    use std::time::Duration;
    let mut backoff = crate::store::cas::Backoff::new(
        Duration::from_millis(200),
        Duration::from_secs(5),
        Some(Duration::from_secs(30)),
    );
    loop {
        match send() {
            Err(Failure::Unreachable(why)) => match backoff.next_delay() {
                Some(wait) => std::thread::sleep(wait),
                None => return Err(Failure::Unreachable(why)),
            },
            other => return other,
        }
    }
}
