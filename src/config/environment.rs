//! `## Environment`: what a worktree needs before ML code can run in it, and where evaluations run.
//!
//! A fresh checkout of an ML project cannot train: its data (`data/*.bin` made by `prepare.py`) and
//! its virtual environment are git-ignored, so they are not in the checkout. `setup` prepares each
//! new worktree once (`uv sync`); `shared` links git-ignored paths of the user's working tree into
//! every worktree, read-only to candidates; `devices` gives each evaluation its own device (a GPU)
//! and `max parallel evaluations` bounds how many run at once (CPU-bound work). The values are
//! read here; the engine enforces them (`engine::agent::workspace`, `engine::measure::schedule`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::duration::parse_duration;
use super::parse::{Document, Setting};
use super::sections::SectionKind;
use super::ConfigError;

/// Default time a setup command may take (installing a virtual environment can be slow).
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The `## Environment` settings. All optional: without them worktrees are plain checkouts and
/// evaluations run as soon as researchers ask for them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Run once in each new worktree before its first evaluation.
    #[serde(default)]
    pub setup: Option<String>,
    #[serde(default)]
    pub setup_timeout: Option<Duration>,
    /// Paths of the user's working tree (relative, no trailing slash) linked into every worktree.
    #[serde(default)]
    pub shared: Vec<SharedPath>,
    /// Device names, each given to one evaluation at a time as `CUDA_VISIBLE_DEVICES`.
    #[serde(default)]
    pub devices: Vec<String>,
    #[serde(default)]
    pub max_parallel_evaluations: Option<u32>,
    /// Where evaluations run (`launcher` and its keys).
    #[serde(default)]
    pub launch: super::launcher::Launch,
    /// The MLflow tracking server attempts are sent to (`mlflow`, `mlflow experiment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlflow: Option<super::tracker::Mlflow>,
}

/// A shared path and the line that names it (for errors found against the repository).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedPath {
    pub path: String,
    pub line: usize,
}

impl Environment {
    /// The setup command for the local worktrees: with a launcher that runs evaluations
    /// elsewhere, setup runs only there (in each staged tree, before the command): the local
    /// worktrees, where the agents work, evaluate nothing (docs/launchers.md).
    pub fn local_setup(&self) -> Option<&str> {
        match self.launch.kind {
            super::launcher::LauncherKind::Local => self.setup.as_deref(),
            _ => None,
        }
    }
    pub fn setup_timeout(&self) -> Duration {
        self.setup_timeout.unwrap_or(DEFAULT_SETUP_TIMEOUT)
    }
    pub fn shared_paths(&self) -> impl Iterator<Item = &str> {
        self.shared.iter().map(|s| s.path.as_str())
    }
}

/// Reads `## Environment` of `doc`; problems go to `errors`, each with its line.
pub fn read(doc: &Document, errors: &mut Vec<ConfigError>) -> Environment {
    let get = |key: &str| doc.setting(SectionKind::Environment, key);
    let mut env = Environment::default();
    if let Some(s) = get("setup") {
        env.setup = Some(s.value.clone()).filter(|v| !is_none(v));
    }
    if let Some(s) = get("setup timeout") {
        match parse_duration(&s.value).filter(|d| !d.is_zero()) {
            Some(d) => env.setup_timeout = Some(d),
            None => bad(errors, s, "must be a positive duration (30m, 1h)".into()),
        }
    }
    if let Some(s) = get("shared") {
        let items = std::iter::once((s.value.as_str(), s.line))
            .chain(s.items.iter().map(|i| (i.value.as_str(), i.line)));
        for (value, line) in items {
            for raw in value.split(',') {
                let raw = super::parse::unquote(raw).trim();
                if raw.is_empty() || is_none(raw) || super::parse::is_placeholder(raw) {
                    continue;
                }
                match shared_path(raw) {
                    Ok(path) => env.shared.push(SharedPath { path, line }),
                    Err(why) => errors.push(ConfigError {
                        line,
                        message: format!("shared: `{raw}` {why}"),
                        hint: "name paths of your working tree relative to its top, e.g. - shared: data/, .venv".into(),
                    }),
                }
            }
        }
        overlapping(&env.shared, errors);
    }
    if let Some(s) = get("devices") {
        match devices(&s.value) {
            Ok(list) => env.devices = list,
            Err(why) => bad(errors, s, why),
        }
    }
    if let Some(s) = get("max parallel evaluations") {
        if !is_none(&s.value) {
            match s.value.trim().parse::<u32>().ok().filter(|&n| n >= 1) {
                Some(n) if !env.devices.is_empty() && n as usize > env.devices.len() => bad(
                    errors,
                    s,
                    format!(
                        "more than the {} devices listed: each evaluation takes a device of its own, so at most {} run at once",
                        env.devices.len(),
                        env.devices.len()
                    ),
                ),
                Some(n) => env.max_parallel_evaluations = Some(n),
                None => bad(errors, s, "must be a whole number ≥ 1, or none".into()),
            }
        }
    }
    env.launch = super::launcher::read(doc, errors);
    env
}

/// A value of `s` that cannot be used, with the key's example as the fix.
fn bad(errors: &mut Vec<ConfigError>, s: &Setting, what: String) {
    errors.push(s.unusable(SectionKind::Environment, what));
}

fn is_none(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "none" | "no" | "-" | "n/a" | "unlimited"
    )
}

/// A shared path as written (`data/`, `./.venv`) made plain (`data`, `.venv`), or why it cannot be.
fn shared_path(raw: &str) -> Result<String, String> {
    if raw.starts_with('/') || raw.starts_with('~') {
        return Err("is not relative to the top of your working tree".into());
    }
    if raw.contains(['*', '?', '[']) {
        return Err("is a glob; name the folders or files themselves".into());
    }
    let parts: Vec<&str> = raw
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() {
        return Err("names the whole working tree".into());
    }
    if parts.contains(&"..") {
        return Err("leaves the working tree (`..`)".into());
    }
    if parts[0] == ".git" {
        return Err("is git's own folder".into());
    }
    Ok(parts.join("/"))
}

/// One shared path inside another (`data` and `data/train`) would be linked twice.
fn overlapping(shared: &[SharedPath], errors: &mut Vec<ConfigError>) {
    for (i, a) in shared.iter().enumerate() {
        for b in &shared[..i] {
            let inside = |x: &str, y: &str| x == y || x.starts_with(&format!("{y}/"));
            if inside(&a.path, &b.path) || inside(&b.path, &a.path) {
                errors.push(ConfigError {
                    line: a.line,
                    message: format!(
                        "shared: `{}` overlaps `{}` (line {}): each is linked as a whole",
                        a.path, b.path, b.line
                    ),
                    hint: format!("keep one of them, e.g. - shared: {}", b.path),
                });
            }
        }
    }
}

/// `0,1,2,3` (or `none`) as device names; each is what `CUDA_VISIBLE_DEVICES` gets.
fn devices(value: &str) -> Result<Vec<String>, String> {
    if is_none(value) {
        return Ok(vec![]);
    }
    let mut out: Vec<String> = Vec::new();
    for d in value.split(',').map(str::trim) {
        if d.is_empty() || d.contains(char::is_whitespace) {
            return Err("must be device names separated by commas (0,1,2,3)".into());
        }
        if out.iter().any(|o| o == d) {
            return Err(format!("device `{d}` is listed twice"));
        }
        out.push(d.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(body: &str) -> (Environment, Vec<ConfigError>) {
        let (doc, mut errors) = super::super::parse::read(&format!("## Environment\n{body}"));
        let env = read(&doc, &mut errors);
        errors.sort_by_key(|e| e.line);
        (env, errors)
    }

    #[test]
    fn every_setting_is_read() {
        let (env, errors) = read_text(
            "- setup: uv sync --frozen\n- setup timeout: 10m\n- shared: data/, ./.venv\n- devices: 0, 1\n- max parallel evaluations: 2\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(env.setup.as_deref(), Some("uv sync --frozen"));
        assert_eq!(env.setup_timeout(), Duration::from_secs(600));
        assert_eq!(env.shared_paths().collect::<Vec<_>>(), ["data", ".venv"]);
        assert_eq!(env.shared[1].line, 4);
        assert_eq!(env.devices, ["0", "1"]);
        assert_eq!(env.max_parallel_evaluations, Some(2));
    }

    #[test]
    fn none_means_not_set() {
        let (env, errors) = read_text(
            "- setup: none\n- shared: none\n- devices: none\n- max parallel evaluations: none\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(env, Environment::default());
    }

    #[test]
    fn bad_values_name_their_line() {
        let (_, errors) = read_text(
            "- setup timeout: soon\n- shared: /abs, data/*.bin, ../up, .git\n- devices: 0,,1\n- max parallel evaluations: 0\n",
        );
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 3, 3, 3, 4, 5], "{errors:#?}");
        assert!(errors[1].message.contains("`/abs` is not relative"));
        assert!(errors[2].message.contains("glob"));
        let (_, errors) = read_text("- devices: 0,1\n- max parallel evaluations: 3\n");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].line, 3);
        assert!(errors[0].message.contains("more than the 2 devices"));
        let (_, errors) = read_text("- devices: 0,0\n- shared:\n  - data\n  - data/train\n");
        assert!(errors[0].message.contains("listed twice"));
        assert_eq!(errors[1].line, 5);
        assert!(errors[1].message.contains("overlaps `data` (line 4)"));
    }
}
