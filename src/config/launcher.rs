//! Where evaluations run: the launcher keys of `## Environment` (`launcher`, `hosts`, `slurm
//! args`, `launch`, `staging`, `remote shared`, `queue timeout`, `ssh command`, `ray address`,
//! `ray resources`, `ray runtime env`).
//!
//! The values are read and checked here, each against its launcher, so that a key a launcher
//! does not read (hosts for Slurm, a template for ssh) is refused with its line instead of being
//! silently ignored; `crate::launch` runs evaluations with them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::duration::parse_duration;
use super::parse::{Document, Setting};
use super::sections::{key_spec, SectionKind};
use super::ConfigError;

/// Which launcher runs evaluations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LauncherKind {
    /// A child process group of the runner, in the worktree (what it always was).
    #[default]
    Local,
    /// The `launch:` template, run locally, submits the staged tree anywhere.
    Command,
    /// One evaluation at a time per host (per device with devices) over ssh.
    Ssh,
    /// `sbatch` on a shared filesystem.
    Slurm,
    /// A job over Ray's Jobs REST API, the commit uploaded as its working directory.
    Ray,
}

impl LauncherKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LauncherKind::Local => "local",
            LauncherKind::Command => "command",
            LauncherKind::Ssh => "ssh",
            LauncherKind::Slurm => "slurm",
            LauncherKind::Ray => "ray",
        }
    }
}

/// An ssh host: the name ssh is given (`gpu1`, `user@10.0.0.7`) and its staging folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub target: String,
    /// Where staged trees go on the host; None: [`DEFAULT_REMOTE_STAGING`].
    pub staging: Option<String>,
}

/// The staging folder on an ssh host named without one (relative to the remote home).
pub const DEFAULT_REMOTE_STAGING: &str = ".cache/git-conference/staging";

/// Shared data named by path on the remote side: linked as `name` into every staged tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteShared {
    pub name: String,
    pub path: String,
}

/// The launcher settings; all empty for `local`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    #[serde(default)]
    pub kind: LauncherKind,
    #[serde(default)]
    pub slurm_args: Vec<String>,
    #[serde(default)]
    pub hosts: Vec<Host>,
    #[serde(default)]
    pub template: Option<String>,
    #[serde(default)]
    pub staging: Option<String>,
    #[serde(default)]
    pub remote_shared: Vec<RemoteShared>,
    #[serde(default)]
    pub queue_timeout: Option<Duration>,
    #[serde(default)]
    pub ssh_command: Option<String>,
    /// The Ray dashboard (Jobs API) address; None: `RAY_ADDRESS` when the conference runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_address: Option<String>,
    /// What each evaluation's entrypoint reserves (`- ray resources:`).
    #[serde(default, skip_serializing_if = "RayResources::is_empty")]
    pub ray_resources: RayResources,
    /// `- ray runtime env:`, a JSON object passed through (the working directory is the commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_runtime_env: Option<String>,
}

/// A Ray entrypoint's resources: `gpus=1, cpus=4, memory=16G`, any other `name=N` custom.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RayResources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom: Vec<(String, f64)>,
}

impl RayResources {
    pub fn is_empty(&self) -> bool {
        *self == RayResources::default()
    }
}

/// Which launchers read each key besides `launcher` itself.
const READ_BY: &[(&str, &[LauncherKind])] = &[
    ("slurm args", &[LauncherKind::Slurm]),
    ("hosts", &[LauncherKind::Ssh]),
    ("launch", &[LauncherKind::Command]),
    ("staging", &[LauncherKind::Slurm, LauncherKind::Command]),
    (
        "remote shared",
        &[
            LauncherKind::Ssh,
            LauncherKind::Slurm,
            LauncherKind::Command,
            LauncherKind::Ray,
        ],
    ),
    ("queue timeout", &[LauncherKind::Slurm, LauncherKind::Ray]),
    ("ssh command", &[LauncherKind::Ssh]),
    ("ray address", &[LauncherKind::Ray]),
    ("ray resources", &[LauncherKind::Ray]),
    ("ray runtime env", &[LauncherKind::Ray]),
];

/// Reads the launcher keys of `doc`; problems go to `errors`, each with its line.
pub fn read(doc: &Document, errors: &mut Vec<ConfigError>) -> Launch {
    let get = |key: &str| doc.setting(SectionKind::Environment, key);
    let mut launch = Launch::default();
    if let Some(s) = get("launcher") {
        match s.value.trim().to_ascii_lowercase().as_str() {
            "local" | "" => {}
            "command" => launch.kind = LauncherKind::Command,
            "ssh" => launch.kind = LauncherKind::Ssh,
            "slurm" => launch.kind = LauncherKind::Slurm,
            "ray" => launch.kind = LauncherKind::Ray,
            _ => bad(
                errors,
                s,
                "must be local, ssh, slurm, ray or command".into(),
            ),
        }
    }
    for (key, kinds) in READ_BY {
        if let Some(s) = get(key).filter(|_| !kinds.contains(&launch.kind)) {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            errors.push(ConfigError {
                line: s.line,
                message: format!(
                    "`{}` is read by launcher {} only, and this conference's launcher is {}",
                    s.written,
                    names.join(" or "),
                    launch.kind.as_str()
                ),
                hint: format!("- launcher: {}  (or remove the line)", names[0]),
            });
        }
    }
    read_values(&get, &mut launch, errors);
    read_ray(&get, &mut launch, errors);
    required(doc, &launch, errors);
    if let Some(s) = get("devices").filter(|_| launch.kind == LauncherKind::Ray) {
        errors.push(ConfigError {
            line: s.line,
            message: format!(
                "`{}` names this machine's devices, and Ray places each evaluation on its own (it sets CUDA_VISIBLE_DEVICES)",
                s.written
            ),
            hint: "- ray resources: gpus=1  (and remove the devices line)".into(),
        });
    }
    launch
}

/// The values of the `ray …` keys.
fn read_ray<'a>(
    get: &dyn Fn(&str) -> Option<&'a Setting>,
    launch: &mut Launch,
    errors: &mut Vec<ConfigError>,
) {
    if let Some(s) = get("ray address") {
        match ray_address(&s.value) {
            Ok(a) => launch.ray_address = Some(a),
            Err(why) => bad(errors, s, why),
        }
    }
    if let Some(s) = get("ray resources") {
        for (value, line) in values_of(s) {
            if let Err(why) = ray_resource(value, &mut launch.ray_resources) {
                bad_at(errors, s, line, format!("`{value}` {why}"));
            }
        }
    }
    if let Some(s) = get("ray runtime env") {
        match serde_json::from_str::<serde_json::Value>(&s.value) {
            Ok(serde_json::Value::Object(map)) if map.contains_key("working_dir") => bad(
                errors,
                s,
                "must not set working_dir: each evaluation's working directory is its commit"
                    .into(),
            ),
            Ok(serde_json::Value::Object(_)) => launch.ray_runtime_env = Some(s.value.clone()),
            _ => bad(
                errors,
                s,
                "must be a JSON object on one line ({\"pip\": [\"torch==2.5.1\"]})".into(),
            ),
        }
    }
}

/// An `http(s)://host:port` address of Ray's dashboard (its Jobs API), without a trailing slash.
pub fn ray_address(value: &str) -> Result<String, String> {
    let value = value.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(value).ok();
    match url {
        Some(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
            Ok(value.to_string())
        }
        _ => Err(
            "must be the address of Ray's dashboard, which serves the Jobs API (http://head:8265)"
                .into(),
        ),
    }
}

/// One `name=amount` of `ray resources`, added to `r`.
fn ray_resource(value: &str, r: &mut RayResources) -> Result<(), String> {
    let Some((name, amount)) = value.split_once('=') else {
        return Err("must be name=amount (gpus=1, cpus=4, memory=16G)".into());
    };
    let (name, amount) = (name.trim(), amount.trim());
    if name.eq_ignore_ascii_case("memory") {
        r.memory = Some(bytes(amount).ok_or("must be an amount of memory (16G, 512M)")?);
        return Ok(());
    }
    let n = amount
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .ok_or("must be a number ≥ 0")?;
    match name.to_ascii_lowercase().as_str() {
        "gpus" | "gpu" => r.gpus = Some(n),
        "cpus" | "cpu" => r.cpus = Some(n),
        _ if name.is_empty() || name.contains(char::is_whitespace) => {
            return Err("must name a resource (gpus, cpus, memory or a custom one)".into())
        }
        _ => r.custom.push((name.to_string(), n)),
    }
    Ok(())
}

/// `16G`, `512M`, `1.5T`, `1000` (bytes; K, M, G, T are powers of 1024).
fn bytes(text: &str) -> Option<u64> {
    let text = text.trim().trim_end_matches(['B', 'b', 'i']);
    let (number, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, ' '),
    };
    let scale = match unit {
        ' ' => 1u64,
        'K' => 1 << 10,
        'M' => 1 << 20,
        'G' => 1 << 30,
        'T' => 1 << 40,
        _ => return None,
    };
    let n = number.trim().parse::<f64>().ok().filter(|n| *n > 0.0)?;
    Some((n * scale as f64) as u64)
}

/// The values of the keys other than `launcher`.
fn read_values<'a>(
    get: &dyn Fn(&str) -> Option<&'a Setting>,
    launch: &mut Launch,
    errors: &mut Vec<ConfigError>,
) {
    if let Some(s) = get("slurm args") {
        launch.slurm_args = s.value.split_whitespace().map(str::to_string).collect();
    }
    if let Some(s) = get("hosts") {
        for (value, line) in values_of(s) {
            match host(value) {
                Ok(h) if launch.hosts.iter().any(|o| o.target == h.target) => bad_at(
                    errors,
                    s,
                    line,
                    format!("host `{}` is listed twice", h.target),
                ),
                Ok(h) => launch.hosts.push(h),
                Err(why) => bad_at(errors, s, line, format!("`{value}` {why}")),
            }
        }
    }
    if let Some(s) = get("launch") {
        if !s.value.contains("{command}") {
            bad(
                errors,
                s,
                "must contain {command} (where the evaluation goes)".into(),
            );
        }
        launch.template = Some(s.value.clone());
    }
    if let Some(s) = get("staging").filter(|s| !s.value.trim().is_empty()) {
        launch.staging = Some(s.value.trim().to_string());
    }
    if let Some(s) = get("remote shared") {
        for (value, line) in values_of(s) {
            match remote_shared(value) {
                Ok(r) => launch.remote_shared.push(r),
                Err(why) => bad_at(errors, s, line, format!("`{value}` {why}")),
            }
        }
    }
    if let Some(s) = get("queue timeout") {
        match parse_duration(&s.value).filter(|d| !d.is_zero()) {
            Some(d) => launch.queue_timeout = Some(d),
            None => bad(errors, s, "must be a positive duration (30m, 2h)".into()),
        }
    }
    if let Some(s) = get("ssh command").filter(|s| !s.value.trim().is_empty()) {
        launch.ssh_command = Some(s.value.trim().to_string());
    }
}

/// The keys a launcher cannot run without.
fn required(doc: &Document, launch: &Launch, errors: &mut Vec<ConfigError>) {
    let Some(s) = doc.setting(SectionKind::Environment, "launcher") else {
        return;
    };
    let missing = match launch.kind {
        LauncherKind::Ssh if launch.hosts.is_empty() => Some("hosts"),
        LauncherKind::Command if launch.template.is_none() => Some("launch"),
        _ => None,
    };
    if let Some(key) = missing {
        errors.push(ConfigError {
            line: s.line,
            message: format!(
                "launcher {} needs `- {key}:` in ## Environment",
                launch.kind.as_str()
            ),
            hint: key_spec(SectionKind::Environment, key).example.to_string(),
        });
    }
}

/// The comma-separated values of a setting and its bullet items, each with its line.
fn values_of(s: &Setting) -> Vec<(&str, usize)> {
    std::iter::once((s.value.as_str(), s.line))
        .chain(s.items.iter().map(|i| (i.value.as_str(), i.line)))
        .flat_map(|(value, line)| value.split(',').map(move |v| (v.trim(), line)))
        .filter(|(v, _)| !v.is_empty())
        .collect()
}

/// `[user@]host[:path]`.
fn host(value: &str) -> Result<Host, String> {
    if value.contains(char::is_whitespace) || value.starts_with('-') {
        return Err(
            "is not a host as ssh names it (`gpu1`, `user@10.0.0.7`, `gpu2:/scratch/conf`)".into(),
        );
    }
    let (target, staging) = match value.split_once(':') {
        Some((t, p)) if !p.is_empty() => (t, Some(p.to_string())),
        Some((t, _)) => (t, None),
        None => (value, None),
    };
    if target.is_empty() {
        return Err("names no host".into());
    }
    Ok(Host {
        target: target.to_string(),
        staging,
    })
}

/// `name=/absolute/path`.
fn remote_shared(value: &str) -> Result<RemoteShared, String> {
    let Some((name, path)) = value.split_once('=') else {
        return Err("must be name=/path/on/the/remote/side".into());
    };
    let (name, path) = (name.trim().trim_end_matches('/'), path.trim());
    let plain = !name.is_empty()
        && !name.starts_with('/')
        && !name.split('/').any(|p| p == ".." || p == ".git");
    if !plain {
        return Err("must name a path inside the tree (data, data/train)".into());
    }
    if !path.starts_with('/') {
        return Err("must give an absolute path on the remote side".into());
    }
    if path.contains(['\'', '\n']) {
        return Err("must not contain quotes".into());
    }
    Ok(RemoteShared {
        name: name.to_string(),
        path: path.to_string(),
    })
}

fn bad(errors: &mut Vec<ConfigError>, s: &Setting, what: String) {
    bad_at(
        errors,
        s,
        s.line,
        format!("`{}: {}` — {what}", s.written, s.value),
    );
}

fn bad_at(errors: &mut Vec<ConfigError>, s: &Setting, line: usize, message: String) {
    errors.push(ConfigError {
        line,
        message,
        hint: key_spec(SectionKind::Environment, s.key)
            .example
            .to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(body: &str) -> (Launch, Vec<ConfigError>) {
        let (doc, mut errors) = super::super::parse::read(&format!("## Environment\n{body}"));
        let launch = read(&doc, &mut errors);
        (launch, errors)
    }

    #[test]
    fn every_launcher_key_is_read() {
        let (l, errors) = read_text(
            "- launcher: ssh\n- hosts: gpu1, u@h2:/scratch/c\n- remote shared: data=/d/x\n- ssh command: ssh -F /c\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(l.kind, LauncherKind::Ssh);
        assert_eq!(l.hosts[1].target, "u@h2");
        assert_eq!(l.hosts[1].staging.as_deref(), Some("/scratch/c"));
        assert_eq!(l.remote_shared[0].path, "/d/x");
        let (l, errors) = read_text(
            "- launcher: slurm\n- slurm args: -p debug  --time=1\n- queue timeout: 2h\n- staging: /s\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(l.slurm_args, ["-p", "debug", "--time=1"]);
        assert_eq!(l.queue_timeout, Some(Duration::from_secs(7200)));
    }

    #[test]
    fn a_key_of_another_launcher_or_a_missing_one_is_refused_with_its_line() {
        let (_, errors) = read_text("- launcher: slurm\n- hosts: gpu1\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].line, 3);
        let (_, errors) = read_text("- launcher: ssh\n");
        assert_eq!(errors[0].line, 2);
        let (_, errors) = read_text("- launcher: kubernetes\n");
        assert_eq!(errors[0].line, 2);
        let (_, errors) = read_text("- launcher: command\n- launch: sky exec c\n");
        assert_eq!(errors[0].line, 3);
        let (_, errors) = read_text("- launcher: ray\n- devices: 0,1\n");
        assert_eq!(errors[0].line, 3);
    }

    #[test]
    fn the_ray_keys_are_read() {
        let (l, errors) = read_text(
            "- launcher: ray\n- ray address: http://head:8265/\n- ray resources: gpus=1, cpus=4, memory=16G, accel_A100=1\n- ray runtime env: {\"pip\": [\"torch\"]}\n- queue timeout: 1h\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(l.kind, LauncherKind::Ray);
        assert_eq!(l.ray_address.as_deref(), Some("http://head:8265"));
        let r = &l.ray_resources;
        assert_eq!(
            (r.gpus, r.cpus, r.memory),
            (Some(1.0), Some(4.0), Some(16 << 30))
        );
        assert_eq!(r.custom, [("accel_A100".to_string(), 1.0)]);
        for bad in [
            "- ray address: head:8265\n",
            "- ray resources: gpus=one\n",
            "- ray resources: memory=lots\n",
            "- ray runtime env: [1]\n",
            "- ray runtime env: {\"working_dir\": \".\"}\n",
        ] {
            let (_, errors) = read_text(&format!("- launcher: ray\n{bad}"));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].line, 3, "{bad}");
        }
    }
}
