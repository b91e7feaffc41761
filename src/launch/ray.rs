//! The `ray` launcher: each evaluation is a Ray job submitted over Ray's Jobs REST API (the
//! dashboard's `/api/jobs/`), so the runner needs neither Python nor the Ray CLI. The commit is
//! uploaded as the job's working-directory package (`git archive --format=zip`, as
//! `gcs://_ray_pkg_<commit>.zip`, uploaded once per commit while Ray keeps it); the wrapper goes in
//! the job's environment and is the entrypoint. The submission id is chosen here and written down
//! before the submission is sent, so that a runner killed at any instant leaves a record that the
//! next one (`resume`, `clean`) stops the job by.
//!
//! A Ray job's log holds its stdout and stderr together, with Ray's own lines: the wrapper writes
//! the command's stdout as it is and its own lines behind [`LOG_MARK`] (where it ran, `started`,
//! the command's stderr at its end, `exit=N` last), and [`Log::read`] takes them apart. The exit
//! line is the truth; a job that ends without it (stopped by someone else, its node lost) is a
//! launcher failure with Ray's message.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{json, Value};

use super::wrapper::{Report, LOG_MARK};
use super::{records, Ended, Launcher, Request, Stop};
use crate::config::launcher::Launch;
use crate::exec::process::{LineTail, OnLine, Outcome};
use crate::model::Placement;

/// How long the Jobs API may stay unreachable while a job runs before the evaluation is given up
/// as crashed (a head restarting answers again within it).
const UNREACHABLE_GRACE: Duration = Duration::from_secs(5);
/// Between two looks at a job's status and log.
const POLL: Duration = Duration::from_millis(100);
/// How long a stopped job may take to end (Ray sends SIGTERM, then SIGKILL after 3 s).
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Ray's Jobs API at one address.
#[derive(Debug, Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
}

/// The address runs use: `- ray address:`, else `RAY_ADDRESS`.
pub fn address(launch: &Launch) -> std::result::Result<String, String> {
    if let Some(a) = &launch.ray_address {
        return Ok(a.clone());
    }
    match std::env::var("RAY_ADDRESS") {
        Ok(v) if !v.trim().is_empty() => {
            crate::config::launcher::ray_address(&v).map_err(|why| format!("RAY_ADDRESS={v} {why}"))
        }
        _ => Err("launcher ray needs `- ray address:` in ## Environment (or RAY_ADDRESS)".into()),
    }
}

impl Api {
    pub fn new(base: &str) -> Api {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Api {
            client,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// A request's answer: its status and body, or why there was none.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> std::result::Result<(u16, String), String> {
        let response = request.send().await.map_err(|e| {
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = format!("{why}: {s}");
                source = s.source();
            }
            format!("cannot reach Ray's Jobs API at {}: {why}", self.base)
        })?;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        Ok((status, body))
    }

    /// GET `path` as JSON (an answer other than 200 is an error with Ray's words).
    pub async fn get(&self, path: &str) -> std::result::Result<Value, String> {
        let (status, body) = self.send(self.client.get(self.url(path))).await?;
        if status != 200 {
            return Err(format!(
                "Ray answered {status} to GET {path}: {}",
                brief(&body)
            ));
        }
        serde_json::from_str(&body)
            .map_err(|e| format!("Ray's answer to GET {path} is not JSON: {e}"))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Uploads `zip` as package `name` unless Ray has it already.
    async fn ensure_package(
        &self,
        name: &str,
        zip: impl FnOnce() -> Vec<u8>,
    ) -> std::result::Result<(), String> {
        let path = format!("/api/packages/gcs/{name}");
        let (status, _) = self.send(self.client.get(self.url(&path))).await?;
        if status == 200 {
            return Ok(());
        }
        let (status, body) = self
            .send(self.client.put(self.url(&path)).body(zip()))
            .await?;
        match status {
            200 => Ok(()),
            _ => Err(format!(
                "Ray refused the upload of the commit ({status}): {}",
                brief(&body)
            )),
        }
    }

    /// Submits a job; Err with Ray's words when it refuses it.
    pub async fn submit(&self, body: &Value) -> std::result::Result<(), String> {
        let request = self.client.post(self.url("/api/jobs/")).json(body);
        let (status, body) = self.send(request).await?;
        match status {
            200 => Ok(()),
            _ => Err(format!("Ray refused the job ({status}): {}", brief(&body))),
        }
    }

    /// The job's details (`status`, `message`, `driver_agent_http_address`…); Ok(None) when Ray
    /// knows no such job.
    async fn job(&self, id: &str) -> std::result::Result<Option<Value>, String> {
        let path = format!("/api/jobs/{id}");
        let (status, body) = self.send(self.client.get(self.url(&path))).await?;
        match status {
            200 => serde_json::from_str(&body)
                .map(Some)
                .map_err(|e| e.to_string()),
            404 => Ok(None),
            _ => Err(format!(
                "Ray answered {status} to GET {path}: {}",
                brief(&body)
            )),
        }
    }

    async fn logs(&self, id: &str) -> std::result::Result<String, String> {
        let logs = self.get(&format!("/api/jobs/{id}/logs")).await?;
        Ok(logs["logs"].as_str().unwrap_or_default().to_string())
    }

    /// Stops job `id` and waits (up to [`STOP_WAIT`]) until Ray says it ended. A job Ray does not
    /// know yet is looked for once more a second later (a submission still on its way).
    pub async fn stop(&self, id: &str) {
        for tries in 0..2 {
            let path = format!("/api/jobs/{id}/stop");
            match self.send(self.client.post(self.url(&path))).await {
                Ok((404, _)) if tries == 0 => tokio::time::sleep(Duration::from_secs(1)).await,
                Ok(_) => break,
                Err(_) => return,
            }
        }
        let deadline = Instant::now() + STOP_WAIT;
        while Instant::now() < deadline {
            match self.job(id).await {
                Ok(Some(job)) if !terminal(&job) => tokio::time::sleep(POLL).await,
                _ => return,
            }
        }
    }
}

/// Whether a job's status is one it never leaves.
fn terminal(job: &Value) -> bool {
    matches!(
        job["status"].as_str(),
        Some("SUCCEEDED" | "FAILED" | "STOPPED")
    )
}

/// The first 300 characters of an answer, on one line.
fn brief(text: &str) -> String {
    let line = super::tail(text);
    match line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// The wrapper as one line of `sh` (Ray echoes the entrypoint into the job's log, and expands
/// `${…}` in a runtime env's variables, so it goes in neither as it is): the script's bytes
/// through `printf`, every one that is not plain as an octal escape.
fn entrypoint(wrapper: &str) -> String {
    let mut escaped = String::with_capacity(wrapper.len() * 2);
    for b in wrapper.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b' ' | b'-' | b'_' | b'.' | b'/' | b'=' => {
                escaped.push(b as char)
            }
            _ => escaped.push_str(&format!("\\{b:03o}")),
        }
    }
    format!("sh -c \"$(printf '{escaped}')\" git-conference")
}

/// The body of a submission: the wrapper as the entrypoint, the commit's package as its working
/// directory, the user's runtime env and the entrypoint's resources.
pub fn submission(launch: &Launch, id: &str, package: Option<&str>, wrapper: &str) -> Value {
    let mut env: serde_json::Map<String, Value> = (launch.ray_runtime_env.as_deref())
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    if let Some(package) = package {
        env.insert("working_dir".into(), json!(format!("gcs://{package}")));
    }
    let r = &launch.ray_resources;
    let mut body = json!({
        "entrypoint": entrypoint(wrapper),
        "submission_id": id,
        "runtime_env": env,
        "metadata": {"submitted_by": "git-conference"},
    });
    if let Some(gpus) = r.gpus {
        body["entrypoint_num_gpus"] = json!(gpus);
    }
    if let Some(cpus) = r.cpus {
        body["entrypoint_num_cpus"] = json!(cpus);
    }
    if let Some(memory) = r.memory {
        body["entrypoint_memory"] = json!(memory);
    }
    if !r.custom.is_empty() {
        let custom: serde_json::Map<String, Value> = r
            .custom
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        body["entrypoint_resources"] = Value::Object(custom);
    }
    body
}

pub struct Job {
    api: Api,
    id: String,
    record: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    queue_timeout: Option<Duration>,
    setup_timeout: Duration,
    /// Why it was never submitted (the API unreachable, Ray refused it).
    failure: Option<String>,
}

/// Uploads the commit (when Ray lacks it) and submits the job, its record written first.
pub async fn start(launcher: &Launcher, req: Request<'_>) -> Result<Job> {
    // The conference's name first, for whoever reads Ray's list of jobs.
    let conference =
        (launcher.run_dir.file_name()).map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let id = super::unique_name(&req.stdout).replacen("gc-", &format!("gc-{conference}-"), 1);
    let base = address(&launcher.settings);
    let api = Api::new(base.as_deref().unwrap_or_default());
    let record = records::write(
        &launcher.records_dir(),
        &id,
        &records::Record::Ray {
            address: api.base().to_string(),
            id: id.clone(),
        },
    )?;
    let mut job = Job {
        api,
        id,
        record,
        stdout: req.stdout.clone(),
        stderr: req.stderr.clone(),
        queue_timeout: launcher.settings.queue_timeout,
        setup_timeout: launcher.setup_timeout,
        failure: base.err(),
    };
    if job.failure.is_none() {
        job.failure = submit(launcher, &req, &job).await.err();
    }
    Ok(job)
}

async fn submit(
    launcher: &Launcher,
    req: &Request<'_>,
    job: &Job,
) -> std::result::Result<(), String> {
    let package = format!("_ray_pkg_{}.zip", req.commit);
    let zip = super::stage::archive_as(&launcher.git_dir, req.commit, "zip")
        .await
        .map_err(|e| format!("{e:#}"))?;
    job.api.ensure_package(&package, || zip).await?;
    let wrapper = launcher.wrapper_script(req, Report::Log);
    let body = submission(&launcher.settings, &job.id, Some(&package), &wrapper);
    job.api.submit(&body).await
}

/// What a job's log says, taken apart.
#[derive(Debug, Default, PartialEq)]
struct Log {
    started: bool,
    exit: Option<i32>,
    stdout: String,
    stderr: String,
    /// The wrapper's `key=value` lines of where it ran.
    place: String,
}

impl Log {
    /// Reads a job's log: what comes before the wrapper's `begin` is Ray's setting up (kept as
    /// stderr), Ray's `Running entrypoint for job …` line is dropped, the wrapper's own lines
    /// are sorted out, the rest is the command's stdout. `whole`: the job ended (else a last line
    /// without its newline is left for the next read).
    fn read(text: &str, id: &str, whole: bool) -> Log {
        let mut log = Log::default();
        let mut begun = false;
        let ray_line = format!("Running entrypoint for job {id}: ");
        for line in text.split_inclusive('\n') {
            if !whole && !line.ends_with('\n') {
                break;
            }
            let Some(at) = line.find(LOG_MARK) else {
                if line.starts_with(&ray_line) {
                    continue;
                }
                match begun {
                    true => log.stdout.push_str(line),
                    false => log.stderr.push_str(line),
                }
                continue;
            };
            // A command's last line without its newline runs into the wrapper's next line.
            log.stdout.push_str(&line[..at]);
            begun = true;
            let own = line[at + LOG_MARK.len()..].trim_end_matches(['\n', '\r']);
            match own {
                "begin" => begun = true,
                "started" => log.started = true,
                _ => {
                    if let Some(err) = own.strip_prefix("stderr ") {
                        log.stderr.push_str(err);
                        log.stderr.push('\n');
                    } else if let Some(code) = own.strip_prefix("exit=") {
                        log.exit = code.trim().parse().ok();
                    } else {
                        log.place.push_str(own);
                        log.place.push('\n');
                    }
                }
            }
        }
        log
    }
}

/// Where waiting for a job stands.
struct Watch {
    queued: Instant,
    running: Option<Instant>,
    started: Option<Instant>,
    unreachable: Option<(Instant, String)>,
    /// Bytes of stdout already written to the local log.
    written: usize,
}

impl Job {
    pub fn canceller(&self) -> super::Canceller {
        super::Canceller::Ray {
            api: self.api.clone(),
            id: self.id.clone(),
        }
    }

    /// Polls the job until it ends, its timeout (from the command's start), the queue timeout
    /// (while Ray has not started it), Ctrl-C or the line watcher's stop; then collects it.
    pub async fn wait(self, timeout: Duration, mut on_line: Option<OnLine<'_>>) -> Result<Ended> {
        if let Some(why) = self.failure.clone() {
            let _ = std::fs::remove_file(&self.record);
            let _ = std::fs::write(&self.stderr, format!("{why}\n"));
            return Ok(failed(why, Placement::default()));
        }
        let _ = std::fs::write(&self.stdout, b"");
        let mut lines = on_line
            .as_mut()
            .map(|f| LineTail::new(&self.stdout, &mut **f));
        let mut watch = Watch {
            queued: Instant::now(),
            running: None,
            started: None,
            unreachable: None,
            written: 0,
        };
        let ended = loop {
            match self.look(&mut watch, timeout, lines.as_mut()).await {
                Ok(Some(job)) => break Ok(job),
                Ok(None) => tokio::time::sleep(POLL).await,
                Err(stop) => break Err(stop),
            }
        };
        let (stop, job) = match ended {
            Ok(job) => (None, Some(job)),
            Err((stop, why)) => {
                self.api.stop(&self.id).await;
                (
                    Some((stop, why)),
                    self.api.job(&self.id).await.ok().flatten(),
                )
            }
        };
        let elapsed = watch.started.map(|s| s.elapsed()).unwrap_or_default();
        let ended = self.collect(stop, job, elapsed).await;
        if let Some(lines) = lines.as_mut() {
            lines.read_new();
        }
        let _ = std::fs::remove_file(&self.record);
        ended
    }

    /// One look at the job: Some(details) once it ended, Err when waiting must stop (and why,
    /// beyond the stop itself).
    async fn look(
        &self,
        w: &mut Watch,
        timeout: Duration,
        lines: Option<&mut LineTail<'_, '_>>,
    ) -> std::result::Result<Option<Value>, (Stop, Option<String>)> {
        if crate::exec::process::cancelled() {
            return Err((Stop::Cancelled, None));
        }
        let now = Instant::now();
        match (w.started, w.running) {
            (Some(s), _) if now >= s + timeout => return Err((Stop::TimedOut, None)),
            (None, Some(r)) if now >= r + self.setup_timeout => return Err((Stop::TimedOut, None)),
            (None, None) if self.queue_timeout.is_some_and(|q| now >= w.queued + q) => {
                let q = crate::config::duration::format_duration(
                    self.queue_timeout.unwrap_or_default(),
                );
                let why =
                    format!("the Ray job waited for resources longer than the queue timeout ({q})");
                return Err((Stop::TimedOut, Some(why)));
            }
            _ => {}
        }
        let job = match self.api.job(&self.id).await {
            Ok(Some(job)) => job,
            Ok(None) => return Err((Stop::TimedOut, Some(format!("Ray lost job {}", self.id)))),
            Err(why) => {
                let (since, _) = w.unreachable.get_or_insert((now, why.clone()));
                if now >= *since + UNREACHABLE_GRACE {
                    return Err((Stop::TimedOut, Some(why)));
                }
                return Ok(None);
            }
        };
        w.unreachable = None;
        let status = job["status"].as_str().unwrap_or_default();
        if status == "PENDING" {
            return Ok(None);
        }
        w.running.get_or_insert(now);
        if terminal(&job) {
            return Ok(Some(job));
        }
        if w.started.is_none() || lines.is_some() {
            let Ok(text) = self.api.logs(&self.id).await else {
                return Ok(None);
            };
            let log = Log::read(&text, &self.id, false);
            if log.started {
                w.started.get_or_insert(now);
            }
            if let Some(lines) = lines {
                if self.append(&log.stdout, &mut w.written) && lines.read_new() {
                    return Err((Stop::Watcher, None));
                }
            }
        }
        Ok(None)
    }

    /// Appends what `stdout` holds past `written` to the local stdout log; true when it grew.
    fn append(&self, stdout: &str, written: &mut usize) -> bool {
        use std::io::Write;
        let Some(new) = stdout.get(*written..).filter(|n| !n.is_empty()) else {
            return false;
        };
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.stdout)
            .and_then(|mut f| f.write_all(new.as_bytes()));
        *written = stdout.len();
        appended.is_ok()
    }

    /// The job's log as the run's output, outcome and placement.
    async fn collect(
        &self,
        stop: Option<(Stop, Option<String>)>,
        job: Option<Value>,
        elapsed: Duration,
    ) -> Result<Ended> {
        let text = self.api.logs(&self.id).await.unwrap_or_default();
        let log = Log::read(&text, &self.id, true);
        std::fs::write(&self.stdout, &log.stdout)?;
        std::fs::write(&self.stderr, &log.stderr)?;
        let mut placement = Placement::read_lines("ray", &log.place);
        placement.job = Some(self.id.clone());
        placement.node = job
            .as_ref()
            .and_then(|j| j["driver_agent_http_address"].as_str())
            .and_then(|a| reqwest::Url::parse(a).ok())
            .and_then(|u| u.host_str().map(str::to_string));
        let (outcome, failure) = match (stop, log.exit) {
            (Some((stop, why)), _) => (stop.outcome(), why),
            (None, Some(code)) => (Outcome::Exited(code), None),
            (None, None) => {
                let status = job
                    .as_ref()
                    .and_then(|j| j["status"].as_str())
                    .unwrap_or("gone");
                let message = job
                    .as_ref()
                    .and_then(|j| j["message"].as_str())
                    .unwrap_or_default();
                let said = Some(super::tail(message)).filter(|t| !t.is_empty());
                let why = format!(
                    "Ray job {} ended {status} without the wrapper's exit code{}",
                    self.id,
                    said.map(|t| format!(": {t}")).unwrap_or_default()
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

/// A run the launcher could not make.
fn failed(why: String, mut placement: Placement) -> Ended {
    placement.launcher = "ray".into();
    Ended {
        outcome: Outcome::Exited(255),
        elapsed: Duration::ZERO,
        placement,
        launcher_failure: Some(why),
    }
}

/// Ray's own word before a start: the Jobs API answers, and a check job with the conference's
/// runtime env and resources is accepted (then stopped and deleted at once), and some node of the
/// cluster has those resources at all. Err with what is wrong.
pub async fn check(launch: &Launch) -> std::result::Result<(), String> {
    let api = Api::new(&address(launch)?);
    api.get("/api/version").await?;
    let id = format!(
        "gc-check-{}-{}",
        std::process::id(),
        super::unique_name(std::path::Path::new("check"))
    );
    let body = submission(launch, &id, None, "true");
    api.submit(&body).await?;
    api.stop(&id).await;
    let _ = api
        .send(api.client.delete(api.url(&format!("/api/jobs/{id}"))))
        .await;
    feasible(&api, &launch.ray_resources).await
}

/// Whether some alive node of the cluster has `r` in total (a job asking more waits forever).
async fn feasible(
    api: &Api,
    r: &crate::config::launcher::RayResources,
) -> std::result::Result<(), String> {
    let Ok(nodes) = api.get("/api/v0/nodes?limit=10000").await else {
        return Ok(()); // Not every Ray serves the state API: nothing to compare with.
    };
    let Some(nodes) = nodes["data"]["result"]["result"].as_array() else {
        return Ok(());
    };
    let mut wanted: Vec<(String, f64)> = r.custom.clone();
    wanted.extend(r.gpus.map(|g| ("GPU".to_string(), g)));
    wanted.extend(r.cpus.map(|c| ("CPU".to_string(), c)));
    wanted.extend(r.memory.map(|m| ("memory".to_string(), m as f64)));
    let alive = nodes.iter().filter(|n| n["state"] == "ALIVE");
    let has = |n: &Value| {
        wanted
            .iter()
            .all(|(k, v)| n["resources_total"][k].as_f64().unwrap_or(0.0) >= *v)
    };
    if wanted.is_empty() || alive.clone().any(has) {
        return Ok(());
    }
    let largest: Vec<String> = alive
        .map(|n| {
            let t = &n["resources_total"];
            format!(
                "{}: GPU {}, CPU {}",
                n["node_ip"].as_str().unwrap_or("?"),
                t["GPU"].as_f64().unwrap_or(0.0),
                t["CPU"].as_f64().unwrap_or(0.0)
            )
        })
        .collect();
    Err(format!(
        "no node of the Ray cluster at {} has these resources, so its jobs would wait forever (nodes: {})",
        api.base,
        largest.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ray's lines, the wrapper's and the command's are told apart, also when the command's
    /// last line has no newline.
    #[test]
    fn a_jobs_log_is_taken_apart() {
        let m = LOG_MARK;
        let text = format!(
            "2026-11-28 21:06:11,405\tINFO job_manager.py:581 -- Runtime env is setting up.\n{m}begin\n{m}host=n1\n{m}gpu=NVIDIA A100\nRunning entrypoint for job j1: sh -c x\n{m}started\nscore: 3\npartial{m}stderr oops\n{m}exit=2\n"
        );
        let log = Log::read(&text, "j1", true);
        assert_eq!(log.stdout, "score: 3\npartial");
        assert!(log.stderr.starts_with("2026-11-28"), "{}", log.stderr);
        assert!(log.stderr.ends_with("oops\n"), "{}", log.stderr);
        assert_eq!((log.started, log.exit), (true, Some(2)));
        assert_eq!(log.place, "host=n1\ngpu=NVIDIA A100\n");
        let partial = Log::read(&format!("{m}begin\n{m}started\nscore"), "j1", false);
        assert_eq!(partial.stdout, "");
    }

    /// The submission carries the user's runtime env with the commit as its working directory
    /// and the wrapper in its variables, and the entrypoint's resources.
    #[test]
    fn a_submission_names_the_package_and_the_resources() {
        let mut launch = Launch {
            ray_runtime_env: Some(r#"{"pip": ["torch"], "env_vars": {"A": "1"}}"#.into()),
            ..Launch::default()
        };
        launch.ray_resources.gpus = Some(1.0);
        launch.ray_resources.memory = Some(1 << 30);
        launch.ray_resources.custom = vec![("accel".into(), 2.0)];
        let body = submission(&launch, "gc-1", Some("_ray_pkg_ab.zip"), "echo hi");
        assert_eq!(body["runtime_env"]["working_dir"], "gcs://_ray_pkg_ab.zip");
        assert_eq!(body["runtime_env"]["pip"][0], "torch");
        assert_eq!(body["runtime_env"]["env_vars"]["A"], "1");
        assert_eq!(
            body["runtime_env"]["env_vars"].as_object().map(|m| m.len()),
            Some(1)
        );
        assert_eq!(body["entrypoint_num_gpus"], 1.0);
        assert_eq!(body["entrypoint_memory"], 1u64 << 30);
        assert_eq!(body["entrypoint_resources"]["accel"], 2.0);
        assert_eq!(body["submission_id"], "gc-1");
    }

    /// The wrapper in log mode, run as Ray runs the entrypoint (stdout and stderr into one
    /// file), gives back the command's stdout, stderr, exit code and where it ran.
    #[test]
    fn the_log_wrappers_output_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let script = super::super::wrapper::script(&super::super::wrapper::Wrapped {
            command: "echo out1; echo err1 >&2; printf last; exit 3",
            env: &[("A".into(), "1".into())],
            setup: Some("echo setting up"),
            shared: &[],
            report: Report::Log,
        });
        let log = tmp.path().join("job.log");
        let file = std::fs::File::create(&log).unwrap();
        let status = std::process::Command::new("sh")
            .args(["-c", &entrypoint(&script)])
            .current_dir(tmp.path())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3));
        let text = format!(
            "Running entrypoint for job j: x\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        let read = Log::read(&text, "j", true);
        assert_eq!(read.stdout, "out1\nlast");
        assert_eq!(read.stderr, "err1\n");
        assert_eq!((read.started, read.exit), (true, Some(3)));
        assert!(read.place.starts_with("host="), "{}", read.place);
    }

    /// The one-line entrypoint runs the wrapper as it was written.
    #[test]
    fn the_entrypoint_is_the_wrapper_on_one_line() {
        let script = "echo \"it's ${HOME-x} 100% \\ done\"\nexit 4\n";
        let line = entrypoint(script);
        assert!(!line.contains('\n'));
        let out = std::process::Command::new("sh")
            .args(["-c", &line])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4));
        let home = std::env::var("HOME").unwrap_or_else(|_| "x".into());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("it's {home} 100% \\ done\n")
        );
    }
}
