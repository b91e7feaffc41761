//! MLflow's REST API (`/api/2.0/mlflow/…`), the few calls the sink makes, over reqwest's blocking
//! client (the sink is a thread of its own; `export mlflow` a plain command): no Python on the
//! runner. A call that could not reach the server, timed out, or got a 5xx or 429 is
//! [`Failure::Unreachable`] and is tried again later; any other refusal is
//! [`Failure::Refused`], with MLflow's own message, and is not.

use std::time::Duration;

use serde_json::{json, Value};

/// How long one call may take before it counts as a server that is down.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Entities MLflow takes in one `runs/log-batch` (its documented limits).
pub const MAX_METRICS: usize = 1000;
pub const MAX_PARAMS: usize = 100;
pub const MAX_TAGS: usize = 100;
/// The longest param value and tag value MLflow stores (longer ones are refused).
pub const MAX_PARAM_VALUE: usize = 6000;
pub const MAX_TAG_VALUE: usize = 8000;

#[derive(Debug, Clone)]
pub enum Failure {
    /// Down, slow or overloaded: try again later.
    Unreachable(String),
    /// The server said no (bad value, missing resource): trying again changes nothing.
    Refused { code: String, message: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(why) => write!(f, "{why}"),
            Failure::Refused { code, message } => write!(f, "{code}: {message}"),
        }
    }
}

pub type Reply = Result<Value, Failure>;

/// A run as the server returned it: what the sink keeps of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub run_id: String,
    pub status: String,
    pub artifact_uri: String,
    pub tags: Vec<(String, String)>,
}

impl RunInfo {
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One metric reading (`timestamp` in ms since the epoch: a reading logged again with the same
/// key, value, step and timestamp is one reading to MLflow's SQL store).
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub key: String,
    pub value: f64,
    pub step: u64,
    pub timestamp: i64,
}

pub struct Client {
    base: String,
    http: reqwest::blocking::Client,
}

impl Client {
    pub fn new(base: &str) -> Client {
        let http = reqwest::blocking::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(3))
            .build()
            .expect("a TLS backend for reqwest");
        Client {
            base: base.trim_end_matches('/').to_string(),
            http,
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn reply(result: reqwest::Result<reqwest::blocking::Response>) -> Reply {
        let response = result.map_err(|e| Failure::Unreachable(plain_error(&e)))?;
        let status = response.status();
        let body: Value = response.json().unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let text = |k: &str| {
            body.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(Failure::Unreachable(format!(
                "HTTP {status} {}",
                text("message")
            )));
        }
        Err(Failure::Refused {
            code: Some(text("error_code"))
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| format!("HTTP {}", status.as_u16())),
            message: text("message"),
        })
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        let url = format!("{}/api/2.0/mlflow/{path}", self.base);
        Self::reply(self.http.post(url).json(body).send())
    }

    fn get(&self, path: &str, query: &[(&str, &str)]) -> Reply {
        let url = format!("{}/api/2.0/mlflow/{path}", self.base);
        Self::reply(self.http.get(url).query(query).send())
    }

    /// The experiment named `name`, made when there is none; its id.
    pub fn experiment(&self, name: &str) -> Result<String, Failure> {
        for _ in 0..2 {
            match self.get("experiments/get-by-name", &[("experiment_name", name)]) {
                Ok(v) => return id_of(&v["experiment"], "experiment_id"),
                Err(Failure::Refused { code, .. }) if code == "RESOURCE_DOES_NOT_EXIST" => {}
                Err(e) => return Err(e),
            }
            match self.post("experiments/create", &json!({ "name": name })) {
                Ok(v) => return id_of(&v, "experiment_id"),
                // Made meanwhile by another machine: read it.
                Err(Failure::Refused { code, .. }) if code == "RESOURCE_ALREADY_EXISTS" => {}
                Err(e) => return Err(e),
            }
        }
        Err(Failure::Unreachable(format!(
            "experiment `{name}` is neither there nor can it be made"
        )))
    }

    /// Every run of `experiment` that `filter` selects (MLflow's search syntax), all pages.
    pub fn search(&self, experiment: &str, filter: &str) -> Result<Vec<RunInfo>, Failure> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({
                "experiment_ids": [experiment],
                "filter": filter,
                "max_results": 1000,
                "run_view_type": "ALL",
            });
            if let Some(t) = &token {
                body["page_token"] = t.clone().into();
            }
            let page = self.post("runs/search", &body)?;
            for run in page["runs"].as_array().into_iter().flatten() {
                out.push(run_info(run)?);
            }
            token = page["next_page_token"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Makes a run with its first tags; the run as made.
    pub fn create_run(
        &self,
        experiment: &str,
        run_name: &str,
        start_time: i64,
        tags: &[(String, String)],
    ) -> Result<RunInfo, Failure> {
        let v = self.post(
            "runs/create",
            &json!({
                "experiment_id": experiment,
                "run_name": run_name,
                "start_time": start_time,
                "tags": pairs(tags),
            }),
        )?;
        run_info(&v["run"])
    }

    /// Logs params, metrics and tags, split into the batches MLflow accepts.
    pub fn log_batch(
        &self,
        run_id: &str,
        params: &[(String, String)],
        metrics: &[Metric],
        tags: &[(String, String)],
    ) -> Result<(), Failure> {
        let mut params = params.chunks(MAX_PARAMS);
        let mut metrics = metrics.chunks(MAX_METRICS - MAX_PARAMS - MAX_TAGS);
        let mut tags = tags.chunks(MAX_TAGS);
        loop {
            let (p, m, t) = (params.next(), metrics.next(), tags.next());
            if p.is_none() && m.is_none() && t.is_none() {
                return Ok(());
            }
            let metrics: Vec<Value> = m
                .unwrap_or_default()
                .iter()
                .map(|m| {
                    json!({"key": m.key, "value": m.value, "timestamp": m.timestamp, "step": m.step})
                })
                .collect();
            self.post(
                "runs/log-batch",
                &json!({
                    "run_id": run_id,
                    "params": pairs(p.unwrap_or_default()),
                    "metrics": metrics,
                    "tags": pairs(t.unwrap_or_default()),
                }),
            )?;
        }
    }

    /// Ends a run: `FINISHED`, `FAILED`, `KILLED`.
    pub fn end_run(&self, run_id: &str, status: &str, end_time: i64) -> Result<(), Failure> {
        self.post(
            "runs/update",
            &json!({"run_id": run_id, "status": status, "end_time": end_time}),
        )
        .map(|_| ())
    }

    /// Stores `bytes` as the run's artifact `name`, through the server's artifact proxy (a server
    /// started with `--serve-artifacts`, whose runs' artifact URIs are `mlflow-artifacts:/…`).
    /// Ok(false): the run's artifacts are stored elsewhere, which needs MLflow's own client.
    pub fn put_artifact(&self, run: &RunInfo, name: &str, bytes: Vec<u8>) -> Result<bool, Failure> {
        let Some(path) = run
            .artifact_uri
            .strip_prefix("mlflow-artifacts:")
            .map(|p| p.trim_start_matches('/'))
        else {
            return Ok(false);
        };
        let url = format!(
            "{}/api/2.0/mlflow-artifacts/artifacts/{path}/{name}",
            self.base
        );
        Self::reply(self.http.put(url).body(bytes).send()).map(|_| true)
    }
}

fn pairs(kv: &[(String, String)]) -> Vec<Value> {
    kv.iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect()
}

fn id_of(v: &Value, key: &str) -> Result<String, Failure> {
    v.get(key)
        .and_then(|i| i.as_str())
        .map(str::to_string)
        .ok_or_else(|| Failure::Refused {
            code: "BAD_REPLY".into(),
            message: format!("the server's reply has no {key}"),
        })
}

/// A run of a reply, validated: the server's data is input like any other.
fn run_info(run: &Value) -> Result<RunInfo, Failure> {
    let info = &run["info"];
    let tags = run["data"]["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t.get("key")?.as_str()?.to_string(),
                t.get("value")?.as_str()?.to_string(),
            ))
        })
        .collect();
    Ok(RunInfo {
        run_id: id_of(info, "run_id")?,
        status: info["status"].as_str().unwrap_or("RUNNING").to_string(),
        artifact_uri: info["artifact_uri"].as_str().unwrap_or("").to_string(),
        tags,
    })
}

/// reqwest's error with its causes, on one line (`error sending request: … Connection refused`).
fn plain_error(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
