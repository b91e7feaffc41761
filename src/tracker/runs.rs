//! The conference as MLflow runs: one translation from the event log, shared by the live sink
//! and `export mlflow`. The conference is a parent run; every attempt (an event with a commit) a
//! child run (`mlflow.parentRunId`) with the attempt's commit as `mlflow.source.git.commit`, its
//! parent attempt's commit and run id as tags (the attempt tree), its verdict, researcher, round,
//! where it ran and what it cost; params are the literals it changed (old → new) and the files it
//! touched; metrics the metric, its sub-metrics and its intermediate readings by step; its diff
//! an artifact when small. Review verdicts, transfer picks and the best are tags set when they
//! happen.
//!
//! Exactly once comes from the data, not from a file of this machine: an attempt's run is looked
//! up by its commit tag (every run of the conference is read once, at [`Runs::connect`]) before
//! one is made, and only a run that is not finished gets its batch again. Everything else sent
//! is idempotent: tags and params are set to the same values, and a metric logged again with the
//! same key, value, step and timestamp (the event's own) is one reading to MLflow.

use std::collections::HashMap;

use git2::{Oid, Repository};
use serde_json::Value;

use super::mlflow::{Client, Failure, Metric, RunInfo, MAX_PARAM_VALUE, MAX_TAG_VALUE};
use crate::git::changes::{change_of, Change, LiteralCache};
use crate::model::{Event, EventLine};

/// The largest diff stored as an artifact.
const MAX_PATCH: usize = 64 * 1024;
/// Blobs whose literals are remembered before the cache starts afresh.
const CACHE_BLOBS: usize = 4096;

/// What the runs are named and tagged with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub conference: String,
    pub experiment: String,
    /// The metric's name (`val_bpb`).
    pub metric: String,
    pub direction: String,
    /// This machine on several machines: it sends the events it recorded (None: one machine).
    pub machine: Option<String>,
    /// `export mlflow`: every event, whoever recorded it, and the conference run made if missing.
    pub everything: bool,
}

/// What sending did, for `export`'s closing line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub made: u64,
    pub completed: u64,
    pub already: u64,
}

pub struct Runs {
    client: Client,
    settings: Settings,
    repo: Repository,
    cache: LiteralCache,
    experiment_id: Option<String>,
    conference_run: Option<RunInfo>,
    /// Attempt runs by commit.
    attempts: HashMap<String, RunInfo>,
    /// The finding whose pick last went onto best: its run is tagged the best at the end.
    best_finding: Option<String>,
    pub sent: Sent,
}

/// `s` cut to at most `max` bytes, at a character's boundary.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// A tag's value as MLflow takes it.
fn tag(key: &str, value: impl ToString) -> (String, String) {
    let mut v = value.to_string();
    cut(&mut v, MAX_TAG_VALUE);
    (key.to_string(), v)
}

/// A name MLflow takes as a param or metric key: letters, digits, `_ - . / space` only (a
/// literal's `train.py:lr` becomes `train.py/lr`).
pub fn key_name(raw: &str) -> String {
    let mut k: String = raw
        .chars()
        .map(|c| match c {
            ':' | '#' => '/',
            c if c.is_ascii_alphanumeric() || "_-./ ".contains(c) => c,
            _ => '_',
        })
        .collect();
    cut(&mut k, 250);
    k
}

/// Milliseconds since the epoch of an event's ISO timestamp (0 when unreadable).
pub fn millis(timestamp: &str) -> i64 {
    time::OffsetDateTime::parse(timestamp, &time::format_description::well_known::Rfc3339)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .unwrap_or(0)
}

/// The MLflow status of an attempt's run.
fn run_status(verdict: &str) -> &'static str {
    match verdict {
        "kept" | "reverted" | "no_change" => "FINISHED",
        "pruned" | "interrupted" => "KILLED",
        _ => "FAILED",
    }
}

fn not_yet(what: String) -> Failure {
    Failure::Unreachable(what)
}

impl Runs {
    pub fn new(client: Client, settings: Settings, repo: Repository) -> Runs {
        Runs {
            client,
            settings,
            repo,
            cache: LiteralCache::new(crate::researchers::tune::literal_values),
            experiment_id: None,
            conference_run: None,
            attempts: HashMap::new(),
            best_finding: None,
            sent: Sent::default(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn connected(&self) -> bool {
        self.experiment_id.is_some()
    }

    pub fn uri(&self) -> &str {
        self.client.base()
    }

    /// The experiment (made if missing), and every run of this conference already there.
    pub fn connect(&mut self) -> Result<(), Failure> {
        let experiment = self.client.experiment(&self.settings.experiment)?;
        let filter = format!("tags.conference = '{}'", self.settings.conference);
        let runs = self.client.search(&experiment, &filter)?;
        self.attempts.clear();
        for run in runs {
            match run.tag("kind") {
                Some("conference") => self.conference_run = Some(run),
                Some("attempt") => {
                    if let Some(c) = run.tag("commit") {
                        self.attempts.insert(c.to_string(), run);
                    }
                }
                _ => {}
            }
        }
        self.experiment_id = Some(experiment);
        Ok(())
    }

    /// The experiment's id and the conference run's, once known.
    pub fn ids(&self) -> (Option<&str>, Option<&str>) {
        (
            self.experiment_id.as_deref(),
            self.conference_run.as_ref().map(|r| r.run_id.as_str()),
        )
    }

    /// Whether this machine sends `line` (on several machines, each sends what it recorded).
    fn own(&self, line: &EventLine) -> bool {
        self.settings.everything || line.machine() == self.settings.machine.as_deref()
    }

    /// Sends what `line` means for the runs.
    pub fn send(&mut self, line: &EventLine) -> Result<(), Failure> {
        if !self.own(line) {
            return Ok(());
        }
        let Some(event) = Event::parse(line) else {
            return Ok(());
        };
        let at = millis(&line.timestamp);
        match &event {
            Event::Started(e) => self.conference(Some(e.base.to_string()), at).map(|_| ()),
            Event::BaselineMeasured(e) => {
                let run = self.conference(Some(e.commit.to_string()), at)?;
                let metric = Metric {
                    key: key_name(&self.settings.metric),
                    value: e.metric_value,
                    step: 0,
                    timestamp: at,
                };
                let tags = [tag("baseline_commit", &e.commit)];
                self.client.log_batch(&run, &[], &[metric], &tags)
            }
            Event::Iteration(e) => match &e.commit {
                Some(commit) => self.attempt(&attempt_of(e, line), commit.as_str(), at),
                None => Ok(()),
            },
            Event::AttemptInterrupted(e) => {
                let a = Attempt {
                    researcher: e.researcher.clone(),
                    round: e.round,
                    verdict: "interrupted".into(),
                    ..Attempt::default()
                };
                self.attempt(&a, e.commit.as_str(), at)
            }
            Event::PeerReview(e) => self.reviewed(&e.findings, at),
            Event::TransferPick(e) => {
                let tags = [
                    tag(
                        "transfer",
                        serde_json::to_value(e.result)
                            .unwrap_or_default()
                            .as_str()
                            .unwrap_or(""),
                    ),
                    tag("transfer_reason", &e.reason),
                ];
                if e.result == crate::model::PickResult::Merged {
                    self.best_finding = Some(e.finding.to_string());
                }
                self.tag_attempt(e.finding.as_str(), &tags)
            }
            Event::RoundCompleted(e) => {
                let run = self.conference(None, at)?;
                let metrics: Vec<Metric> = e
                    .best_metric
                    .filter(|v| v.is_finite())
                    .map(|v| Metric {
                        key: key_name(&format!("best_{}", self.settings.metric)),
                        value: v,
                        step: e.round as u64,
                        timestamp: at,
                    })
                    .into_iter()
                    .collect();
                self.client.log_batch(&run, &[], &metrics, &[])
            }
            Event::Stopped(e) => {
                let run = self.conference(None, at)?;
                let tags = [tag("stop_reason", &e.reason), tag("stop_detail", &e.detail)];
                self.client.log_batch(&run, &[], &[], &tags)
            }
            Event::Completed(e) => self.completed(e, at),
            _ => Ok(()),
        }
    }

    /// The conference run's id: made when missing and this machine makes it (the first event
    /// this machine recorded that needs it; on several machines the chair's events do).
    fn conference(&mut self, base: Option<String>, at: i64) -> Result<String, Failure> {
        if let Some(run) = &self.conference_run {
            return Ok(run.run_id.clone());
        }
        let experiment = self.experiment_id.clone().unwrap_or_default();
        let filter = format!(
            "tags.conference = '{}' and tags.kind = 'conference'",
            self.settings.conference
        );
        if let Some(run) = self.client.search(&experiment, &filter)?.into_iter().next() {
            self.conference_run = Some(run.clone());
            return Ok(run.run_id);
        }
        let s = &self.settings;
        let mut tags = vec![
            tag("conference", &s.conference),
            tag("kind", "conference"),
            tag("metric", &s.metric),
            tag("direction", &s.direction),
        ];
        if let Some(base) = base {
            tags.push(tag("mlflow.source.git.commit", base));
        }
        let run = self
            .client
            .create_run(&experiment, &s.conference.clone(), at, &tags)?;
        self.conference_run = Some(run.clone());
        Ok(run.run_id)
    }

    /// An attempt's run, made once (looked up by its commit first), then its batch, its diff
    /// and its end.
    fn attempt(&mut self, a: &Attempt, commit: &str, at: i64) -> Result<(), Failure> {
        if let Some(run) = self.attempts.get(commit) {
            if run.status != "RUNNING" {
                self.sent.already += 1;
                return Ok(());
            }
        }
        let parent_id = self.conference(None, at)?;
        let change = self.change(commit)?;
        let parent_commit = change.parent.map(|p| p.to_string());
        let parent_run = parent_commit
            .as_ref()
            .and_then(|p| self.attempts.get(p))
            .map(|r| r.run_id.clone());
        let run = match self.attempts.get(commit) {
            Some(run) => run.clone(),
            None => {
                let mut tags = a.tags(&self.settings, commit);
                tags.push(tag("mlflow.parentRunId", &parent_id));
                if let Some(p) = &parent_commit {
                    tags.push(tag("parent_commit", p));
                }
                tags.push(tag(
                    "parent_run_id",
                    parent_run.as_deref().unwrap_or(&parent_id),
                ));
                let experiment = self.experiment_id.clone().unwrap_or_default();
                let started = at - ((a.agent_s + a.eval_s) * 1000.0) as i64;
                let run = self
                    .client
                    .create_run(&experiment, &a.run_name(), started, &tags)?;
                self.sent.made += 1;
                self.attempts.insert(commit.to_string(), run.clone());
                run
            }
        };
        let params = params_of(&change);
        let metrics = a.metrics(&self.settings.metric, at);
        self.client.log_batch(&run.run_id, &params, &metrics, &[])?;
        if let Some(patch) = change.patch.filter(|p| !p.is_empty()) {
            self.client
                .put_artifact(&run, "diff.patch", patch.into_bytes())?;
        }
        self.client
            .end_run(&run.run_id, run_status(&a.verdict), at)?;
        if let Some(r) = self.attempts.get_mut(commit) {
            r.status = run_status(&a.verdict).into();
        }
        self.sent.completed += 1;
        Ok(())
    }

    /// What the attempt's commit changed (a commit this clone does not have changed nothing it
    /// can tell).
    fn change(&mut self, commit: &str) -> Result<Change, Failure> {
        if self.cache.len() > CACHE_BLOBS {
            self.cache = LiteralCache::new(crate::researchers::tune::literal_values);
        }
        let Ok(oid) = Oid::from_str(commit) else {
            return Ok(Change::default());
        };
        Ok(change_of(&self.repo, oid, MAX_PATCH, &mut self.cache).unwrap_or_default())
    }

    /// Sets tags on the run of the attempt at `commit`.
    fn tag_attempt(&mut self, commit: &str, tags: &[(String, String)]) -> Result<(), Failure> {
        let run = match self.attempts.get(commit) {
            Some(run) => run.run_id.clone(),
            None => {
                let experiment = self.experiment_id.clone().unwrap_or_default();
                let filter = format!(
                    "tags.conference = '{}' and tags.commit = '{commit}'",
                    self.settings.conference
                );
                match self.client.search(&experiment, &filter)?.into_iter().next() {
                    Some(run) => {
                        let id = run.run_id.clone();
                        self.attempts.insert(commit.to_string(), run);
                        id
                    }
                    // Another machine's attempt, not sent yet: later.
                    None => {
                        return Err(not_yet(format!(
                            "the run of attempt {commit} is not there yet"
                        )))
                    }
                }
            }
        };
        self.client.log_batch(&run, &[], &[], tags)
    }

    /// Peer review's verdicts on the findings' runs.
    fn reviewed(&mut self, findings: &Value, at: i64) -> Result<(), Failure> {
        for f in findings.as_array().into_iter().flatten() {
            let (Some(commit), Some(verdict)) = (
                f.get("commit").and_then(|v| v.as_str()),
                f.get("verdict").and_then(|v| v.as_str()),
            ) else {
                continue;
            };
            let reason = f.get("reasoning").and_then(|v| v.as_str()).unwrap_or("");
            let mut tags = vec![tag("review", verdict), tag("review_reason", reason)];
            if let Some(v) = f.get("reproduced").and_then(|v| v.as_f64()) {
                tags.push(tag("review_metric", v));
            }
            let _ = at;
            self.tag_attempt(commit, &tags)?;
        }
        Ok(())
    }

    /// The end: the best's run tagged, the conference run's outcome and end.
    fn completed(&mut self, e: &crate::model::event::Completed, at: i64) -> Result<(), Failure> {
        if let Some(finding) = self.best_finding.clone() {
            self.tag_attempt(&finding, &[tag("best", "true")])?;
        }
        let run = self.conference(None, at)?;
        let mut tags = vec![
            tag("status", e.status.as_deref().unwrap_or("completed")),
            tag("best_commit", &e.best_commit),
        ];
        if let Some(f) = &self.best_finding {
            tags.push(tag("best_attempt", f));
        }
        self.client.log_batch(&run, &[], &[], &tags)?;
        self.client.end_run(&run, "FINISHED", at)
    }
}

/// What an attempt's run shows, from its event.
#[derive(Debug, Clone, Default)]
struct Attempt {
    researcher: String,
    round: u32,
    iteration: u32,
    verdict: String,
    reason: Option<String>,
    description: String,
    metric: Option<f64>,
    sub_metrics: Vec<(String, f64)>,
    curve: Vec<(u64, f64)>,
    placement: Option<String>,
    tokens: Option<(u64, u64)>,
    cost_usd: Option<f64>,
    agent_s: f64,
    eval_s: f64,
    machine: Option<String>,
}

fn attempt_of(e: &crate::model::event::Iteration, line: &EventLine) -> Attempt {
    let note = e.notes.first().map(|n| &n.0);
    let curve = note
        .and_then(|n| n.get("curve"))
        .and_then(|c| serde_json::from_value::<Vec<(u64, f64)>>(c.clone()).ok())
        .unwrap_or_default();
    Attempt {
        researcher: e.researcher.clone(),
        round: e.round,
        iteration: e.iteration,
        verdict: e.status.as_str().to_string(),
        reason: e.reason.clone(),
        description: e.description.clone(),
        metric: e.metric_value,
        sub_metrics: e.sub_metrics.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        curve,
        placement: e.placement.as_ref().map(|p| p.describe()),
        tokens: e.tokens.map(|t| (t.input, t.output)),
        cost_usd: e.cost_usd,
        agent_s: e
            .agent_s
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(0.0),
        eval_s: e
            .eval_s
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(0.0),
        machine: line.machine().map(str::to_string),
    }
}

impl Attempt {
    fn run_name(&self) -> String {
        if self.iteration == 0 {
            return format!("{}-r{}-interrupted", self.researcher, self.round);
        }
        format!("{}-r{}-i{}", self.researcher, self.round, self.iteration)
    }

    fn tags(&self, s: &Settings, commit: &str) -> Vec<(String, String)> {
        let mut tags = vec![
            tag("conference", &s.conference),
            tag("kind", "attempt"),
            tag("commit", commit),
            tag("mlflow.source.git.commit", commit),
            tag("researcher", &self.researcher),
            tag("round", self.round),
            tag("iteration", self.iteration),
            tag("verdict", &self.verdict),
        ];
        let optional = [
            ("reason", self.reason.clone()),
            (
                "mlflow.note.content",
                Some(self.description.clone()).filter(|d| !d.is_empty()),
            ),
            ("placement", self.placement.clone()),
            ("tokens_input", self.tokens.map(|t| t.0.to_string())),
            ("tokens_output", self.tokens.map(|t| t.1.to_string())),
            ("cost_usd", self.cost_usd.map(|c| c.to_string())),
            (
                "agent_s",
                Some(format!("{:.1}", self.agent_s)).filter(|_| self.agent_s > 0.0),
            ),
            (
                "eval_s",
                Some(format!("{:.1}", self.eval_s)).filter(|_| self.eval_s > 0.0),
            ),
            ("machine", self.machine.clone()),
        ];
        tags.extend(
            optional
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| tag(k, v))),
        );
        tags
    }

    /// The metric, its sub-metrics (step 0) and its intermediate readings (`<metric>_by_step`).
    fn metrics(&self, metric: &str, at: i64) -> Vec<Metric> {
        let reading = |key: String, value: f64, step: u64| Metric {
            key,
            value,
            step,
            timestamp: at,
        };
        let mut out: Vec<Metric> = self
            .metric
            .map(|v| reading(key_name(metric), v, 0))
            .into_iter()
            .collect();
        for (k, v) in &self.sub_metrics {
            if k != metric {
                out.push(reading(key_name(k), *v, 0));
            }
        }
        let curve = key_name(&format!("{metric}_by_step"));
        out.extend(
            self.curve
                .iter()
                .map(|&(s, v)| reading(curve.clone(), v, s)),
        );
        out.retain(|m| m.value.is_finite());
        out
    }
}

/// Params: each literal changed (`train.py/lr` = `0.001 -> 0.003`) and the files touched.
fn params_of(change: &Change) -> Vec<(String, String)> {
    let side = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let mut params: Vec<(String, String)> = change
        .literals
        .iter()
        .map(|l| {
            (
                key_name(&l.key),
                format!("{} -> {}", side(l.old), side(l.new)),
            )
        })
        .collect();
    params.dedup_by(|a, b| a.0 == b.0);
    if !change.files.is_empty() {
        let mut files = change.files.join(", ");
        cut(&mut files, MAX_PARAM_VALUE);
        params.push(("files".into(), files));
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_times_as_mlflow_takes_them() {
        assert_eq!(key_name("train.py:lr"), "train.py/lr");
        assert_eq!(key_name("cfg.yaml#2"), "cfg.yaml/2");
        assert_eq!(key_name("a(b)"), "a_b_");
        assert_eq!(millis("2024-01-02T03:04:05.250Z"), 1_704_164_645_250);
        assert_eq!(run_status("pruned"), "KILLED");
        assert_eq!(run_status("crashed"), "FAILED");
    }
}
