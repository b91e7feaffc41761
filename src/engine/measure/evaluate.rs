//! Running the evaluation command on a candidate and turning it into a result.
//!
//! A result is cached in the conference state by tree id and evaluation settings, so the same tree
//! is never evaluated twice with the same settings (not by two researchers, not after a resume).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::exec::metric::{self, Reading};
use crate::exec::process::Outcome;
use crate::model::EvalStatus;
use crate::model::Pruned;
use crate::protocol::prune::{self, Point};

/// What one evaluation (all its repeats) gave.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EvalResult {
    /// Mean of the runs' metrics; None when the candidate crashed.
    pub metric: Option<f64>,
    /// Each run's metric.
    pub runs: Vec<f64>,
    pub sub_metrics: std::collections::BTreeMap<String, f64>,
    /// ok | crashed | timeout | interrupted
    pub status: String,
    /// Why it crashed, in words.
    pub reason: Option<String>,
    pub seconds: f64,
    /// The intermediate readings the (first) run printed, `[step, value]` in the order printed
    /// (absent when it printed none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<Point>,
    /// Where pruning stopped it (status `pruned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned: Option<Pruned>,
    /// Where it ran (launcher, host, Slurm job and node, GPU model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::model::Placement>,
    /// The launcher could not run it (a host that refused connections, a queue timeout): a
    /// crash that says nothing about the tree, so it is never cached.
    #[serde(skip)]
    pub launcher_failed: bool,
}

impl EvalResult {
    pub fn ok(&self) -> bool {
        self.status == EvalStatus::Ok
    }
}

/// The cache key part that stands for the evaluation settings.
pub fn settings_hash(command: &str, repeats: u32, timeout: Duration, metric: &str) -> String {
    let mut h = Sha256::new();
    h.update(command.as_bytes());
    h.update(b"\0");
    h.update(repeats.to_le_bytes());
    h.update(timeout.as_secs().to_le_bytes());
    h.update(metric.as_bytes());
    let digest = h.finalize();
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// The metric name evaluations are read for.
pub fn metric_name(config: &Config) -> String {
    config
        .metric
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_else(|| "score".to_string())
}

pub struct EvalRequest<'a> {
    pub command: &'a str,
    pub metric: &'a str,
    /// `metric from: last number`: an output that does not name the metric gives its last number.
    pub last_number: bool,
    pub runs: u32,
    pub timeout: Duration,
    pub cwd: &'a Path,
    /// The commit checked out in `cwd`: what a remote launcher ships.
    pub commit: &'a str,
    pub env: Vec<(String, String)>,
    /// Log file prefix, e.g. `<run-dir>/logs/A-r1-i3.eval`.
    pub log_prefix: std::path::PathBuf,
    /// Where the evaluation waits for its slot (and device): `&conf.scheduler`.
    pub scheduler: &'a crate::engine::measure::schedule::Scheduler,
    /// Stop a run early when it falls behind (`prune: on`, a researcher's attempt); None for
    /// the baseline, review and transfer readings, which are never pruned.
    pub prune: Option<PruneRule>,
    /// Where each run happens: `&conf.launcher`.
    pub launcher: &'a crate::launch::Launcher,
}

/// What pruning compares a running evaluation with (the rule: `protocol::prune::decide`).
#[derive(Debug, Clone)]
pub struct PruneRule {
    /// The researcher's best's curve.
    pub reference: Vec<Point>,
    pub warmup: u32,
    pub margin: f64,
    /// One reading's noise sd, estimated from the reference (`prune::reading_noise`; 0 when
    /// unknown): it widens the margin.
    pub noise: f64,
    pub direction: Option<crate::config::Direction>,
    /// `prune: early`: behind the reference at the same step is enough (no extrapolation).
    pub early: bool,
    /// A sweep's variant: its seat in the race among the sweep's variants (successive halving,
    /// `race`), besides the reference.
    pub race: Option<super::race::Seat>,
}

impl PruneRule {
    /// The pure rule's view of it.
    pub fn as_rule(&self) -> prune::Rule<'_> {
        prune::Rule {
            reference: &self.reference,
            warmup: self.warmup,
            margin: self.margin,
            noise: self.noise,
            direction: self.direction,
            early: self.early,
        }
    }
}

/// One run's intermediate readings, read as it prints them, and where pruning stopped it.
#[derive(Default)]
struct Watch {
    curve: Vec<Point>,
    pruned: Option<Pruned>,
    /// Why the sweep's race stopped it, when that stopped it.
    raced: Option<String>,
}

impl Watch {
    /// Takes one line of the run's stdout; true when the run must stop now.
    fn line(&mut self, line: &str, metric: &str, rule: Option<&PruneRule>) -> bool {
        let Some(point) = metric::reading_at_step(line, metric) else {
            return false;
        };
        self.curve.push(point);
        let Some(rule) = rule.filter(|_| self.pruned.is_none()) else {
            return false;
        };
        self.pruned = prune::decide(&self.curve, &rule.as_rule());
        if let (None, Some(seat)) = (&self.pruned, &rule.race) {
            if let Some((pruned, why)) = seat.reading(&self.curve, &rule.as_rule()) {
                (self.pruned, self.raced) = (Some(pruned), Some(why));
            }
        }
        self.pruned.is_some()
    }
}

/// A run that gave no usable metric: its status (crashed, timeout, interrupted) and why.
type RunFailure = (&'static str, String);

/// A run's metric and the sub-metrics it printed.
type RunMetric = (f64, BTreeMap<String, f64>);

/// Runs the evaluation `runs` times through the launcher, on one slot of the scheduler (waiting
/// for it first); stops at the first run that fails.
pub async fn evaluate(req: EvalRequest<'_>) -> Result<EvalResult> {
    let who = req
        .log_prefix
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let slot = req
        .scheduler
        .acquire(who.as_deref().unwrap_or("evaluation"))
        .await;
    let mut base_env = req.env.clone();
    slot.apply(&mut base_env);
    let mut runs = Vec::new();
    let mut sub_metrics = Default::default();
    let mut seconds = 0.0;
    let mut curve = None;
    let mut placement = None;
    for run in 0..req.runs.max(1) {
        let stdout = req.log_prefix.with_extension(format!("{run}.out"));
        let stderr = req.log_prefix.with_extension(format!("{run}.err"));
        let mut watch = Watch::default();
        let mut on_line = |line: &str| watch.line(line, req.metric, req.prune.as_ref());
        let env = run_env(&base_env, run);
        let files = (stdout.as_path(), stderr.as_path());
        let ended = run_once(&req, env, files, slot.host(), &mut on_line).await?;
        seconds += ended.elapsed.as_secs_f64();
        // A local run on a machine without a GPU says nothing worth a field.
        placement = Some(ended.placement).filter(|p| p.launcher != "local" || p.gpu.is_some());
        let curve = curve.get_or_insert_with(|| watch.curve.clone());
        let launcher_failed = ended.launcher_failure.is_some();
        let reading = match (&ended.outcome, watch.pruned, ended.launcher_failure) {
            (Outcome::Stopped, Some(pruned), _) => {
                let mut result = pruned_result(runs, seconds, req.metric, pruned, req.prune);
                result.reason = watch.raced.or(result.reason);
                result.curve = watch.curve;
                result.placement = placement;
                return Ok(result);
            }
            (_, _, Some(why)) => Err((EvalStatus::Crashed.as_str(), why)),
            (outcome, _, None) => match run_failure(outcome, &stderr, req.timeout) {
                Some(failure) => Err(failure),
                None => read_metric(&req, &stdout, &stderr),
            },
        };
        match reading {
            Ok((v, subs)) => {
                runs.push(v);
                sub_metrics = subs;
            }
            Err((status, reason)) => {
                return Ok(EvalResult {
                    metric: None,
                    runs,
                    sub_metrics: Default::default(),
                    status: status.to_string(),
                    reason: Some(reason),
                    seconds,
                    curve: std::mem::take(curve),
                    pruned: None,
                    placement,
                    launcher_failed,
                });
            }
        }
    }
    let mut result = mean_result(runs, sub_metrics, seconds, req.metric);
    result.curve = curve.unwrap_or_default();
    result.placement = placement;
    Ok(result)
}

/// The result of a run pruning stopped: no metric, the step, its reading and the reference's.
fn pruned_result(
    runs: Vec<f64>,
    seconds: f64,
    metric: &str,
    pruned: Pruned,
    rule: Option<PruneRule>,
) -> EvalResult {
    let fmt = |v: f64| crate::render::format::fmt(Some(v));
    let reason = match rule.as_ref() {
        Some(r) if !r.early => {
            let end = r
                .reference
                .iter()
                .filter(|(_, v)| v.is_finite())
                .max_by_key(|(s, _)| *s)
                .map_or(pruned.reference, |(_, v)| *v);
            format!(
                "at step {} {metric} {} was behind the best's curve ({} there) by more than the \
                 noise margin {} and could not end within it of the best's {}, even \
                 extrapolated optimistically",
                pruned.step,
                pruned.value,
                fmt(pruned.reference),
                fmt(r.as_rule().effective_margin()),
                fmt(end),
            )
        }
        r => format!(
            "at step {} {metric} {} was behind the best's {} there by more than the noise margin {}",
            pruned.step,
            pruned.value,
            fmt(pruned.reference),
            fmt(r.map_or(0.0, |r| r.as_rule().effective_margin())),
        ),
    };
    EvalResult {
        metric: None,
        runs,
        sub_metrics: Default::default(),
        status: EvalStatus::Pruned.into(),
        reason: Some(reason),
        seconds,
        curve: Vec::new(),
        pruned: Some(pruned),
        ..Default::default()
    }
}

/// One run through the launcher: started, then waited for (its timeout and Ctrl-C cancel it).
/// `on_line` sees the lines of its stdout as they arrive (as soon as the launcher brings them
/// here); when it asks to stop, the launcher's cancel ends the run ([`Outcome::Stopped`]).
async fn run_once(
    req: &EvalRequest<'_>,
    env: Vec<(String, String)>,
    (stdout, stderr): (&Path, &Path),
    host: Option<&str>,
    on_line: crate::exec::process::OnLine<'_>,
) -> Result<crate::launch::Ended> {
    let job = req
        .launcher
        .start(crate::launch::Request {
            command: req.command,
            cwd: req.cwd,
            commit: req.commit,
            env,
            stdout: stdout.to_path_buf(),
            stderr: stderr.to_path_buf(),
            host,
            stream: req.prune.is_some(),
        })
        .await?;
    match job {
        Some(job) => {
            let mut ended = job.wait(req.timeout, Some(on_line)).await?;
            if let Ok(out) = std::fs::read(stdout) {
                ended
                    .placement
                    .read_versions(&crate::exec::metric::text_of(&out));
            }
            req.launcher.admit(&mut ended);
            Ok(ended)
        }
        None => Ok(crate::launch::Ended {
            outcome: Outcome::Cancelled,
            elapsed: Duration::ZERO,
            placement: Default::default(),
            launcher_failure: None,
        }),
    }
}

/// The environment of run `run`: `base_env` with `CONFERENCE_EVAL_RUN` counted on from the
/// reading `base_env` names (a caller that runs one reading at a time, as the review's
/// interleaved runs do, says which reading this is), else from 0.
fn run_env(base_env: &[(String, String)], run: u32) -> Vec<(String, String)> {
    let first = base_env
        .iter()
        .find(|(k, _)| k == "CONFERENCE_EVAL_RUN")
        .and_then(|(_, v)| v.parse::<u32>().ok())
        .unwrap_or(0);
    let mut env: Vec<(String, String)> = base_env
        .iter()
        .filter(|(k, _)| k != "CONFERENCE_EVAL_RUN")
        .cloned()
        .collect();
    env.push(("CONFERENCE_EVAL_RUN".into(), (first + run).to_string()));
    env
}

/// The status and reason of a run that did not exit 0 (the end of its stderr for a crash);
/// None when it did.
fn run_failure(outcome: &Outcome, stderr: &Path, timeout: Duration) -> Option<RunFailure> {
    match outcome {
        Outcome::TimedOut => Some((
            EvalStatus::Timeout.as_str(),
            format!("evaluation timed out after {timeout:?}"),
        )),
        Outcome::Cancelled => Some((EvalStatus::Interrupted.as_str(), "interrupted".into())),
        o if !o.success() => {
            let text = read_text(stderr);
            let mut tail = tail(&text, 3);
            // The program's own error line first, when it printed more after it.
            if let Some(error) =
                crate::model::reasons::last_error_line(text.lines()).filter(|e| !tail.contains(e))
            {
                let rest = tail.strip_prefix(": ").unwrap_or(&tail);
                tail = format!(": {} | … | {rest}", metric::escape_controls(error));
            }
            Some((
                EvalStatus::Crashed.as_str(),
                format!("evaluation {}{tail}", o.describe()),
            ))
        }
        _ => None,
    }
}

/// The metric a successful run printed (on stdout, else on stderr) with its sub-metrics, or
/// the crash status and why it cannot be read.
fn read_metric(
    req: &EvalRequest,
    stdout: &Path,
    stderr: &Path,
) -> std::result::Result<RunMetric, RunFailure> {
    let out = read_text(stdout);
    let mut m = metric::parse_with(&out, req.metric, req.last_number);
    if m.reading == Reading::Missing {
        m = metric::parse_with(&read_text(stderr), req.metric, req.last_number);
    }
    let crashed = EvalStatus::Crashed.as_str();
    match m.reading {
        Reading::Value(v) => Ok((v, m.sub_metrics)),
        Reading::NotFinite(text) => Err((crashed, format!("metric {} is {text}", req.metric))),
        Reading::Unreadable(line) => Err((
            crashed,
            format!(
                "metric `{0}` printed in a form that cannot be read: `{line}` (print \
                 `{0}: <number>`, `{0}=<number>` or a JSON object with a `{0}` key)",
                req.metric
            ),
        )),
        Reading::Conflicting(a, b) => Err((
            crashed,
            format!(
                "metric {0} printed twice with different values: {a} and {b} (print it once, \
                 at the end; progress lines in another form, such as `{0}@step=200: 1.41`, are \
                 not read as the metric)",
                req.metric
            ),
        )),
        Reading::Missing => Err((crashed, missing_metric(req.metric, &out))),
    }
}

/// What a run wrote to `path`, as text: a byte that is not UTF-8 written as `\xNN`.
fn read_text(path: &Path) -> String {
    metric::text_of(&std::fs::read(path).unwrap_or_default())
}

/// The result of runs that all read the metric: their mean, or a crash when the mean is not
/// a finite number.
fn mean_result(
    runs: Vec<f64>,
    sub_metrics: BTreeMap<String, f64>,
    seconds: f64,
    metric: &str,
) -> EvalResult {
    let mean = runs.iter().sum::<f64>() / runs.len() as f64;
    if !mean.is_finite() {
        // Two readings of -1.7e308 sum to -inf: never a metric (JSON cannot even store it).
        let readings: Vec<String> = runs.iter().map(|v| format!("{v:e}")).collect();
        let reason = format!(
            "the mean of the {} runs of metric {} is not a finite number (readings {}): print \
             values that can be added up",
            runs.len(),
            metric,
            readings.join(", ")
        );
        return EvalResult {
            metric: None,
            runs,
            sub_metrics: Default::default(),
            status: "crashed".into(),
            reason: Some(reason),
            seconds,
            curve: Vec::new(),
            pruned: None,
            placement: None,
            launcher_failed: false,
        };
    }
    EvalResult {
        metric: Some(mean),
        runs,
        sub_metrics,
        status: EvalStatus::Ok.into(),
        reason: None,
        seconds,
        curve: Vec::new(),
        pruned: None,
        placement: None,
        launcher_failed: false,
    }
}

/// Why a run whose output does not name the metric is a crash: the metric, the end of what the
/// run printed, and the two ways out.
fn missing_metric(metric: &str, output: &str) -> String {
    let last = tail(output, 3);
    let last = if last.is_empty() {
        "; it printed nothing".to_string()
    } else {
        format!("; last lines{last}")
    };
    if output
        .lines()
        .any(|l| metric::reading_at_step(l, metric).is_some())
    {
        // Readings at a step (`name@step=N: v`, JSON with `step`) are progress, never the metric.
        return format!(
            "metric {metric} not in the output{last} (it printed readings at steps, which are \
             progress, not the metric: print the final `{metric}: <number>` at the end)"
        );
    }
    format!(
        "metric {metric} not in the output{last} (print `{metric}: <number>`, or add `- metric \
         from: last number` under ## Evaluation to read the last number printed)"
    )
}

/// The last `lines` non-blank lines, joined with ` | `, after `: ` (empty when there are none),
/// control characters escaped.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.is_empty() {
        return String::new();
    }
    let start = all.len().saturating_sub(lines);
    metric::escape_controls(&format!(": {}", all[start..].join(" | ")))
}

/// Mean and sample standard deviation.
pub fn mean_sd(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}
