//! Making a worktree able to run the project's code: shared paths linked in, setup run once.
//!
//! **Shared paths** (`- shared: data/, .venv`) are git-ignored (or untracked) paths of the user's
//! working tree, linked (symlinks) into every researcher worktree and review checkout, so each
//! trains on the data `prepare.py` made and runs in the one virtual environment. They are the
//! environment, not the project: every handle this program opens on a worktree ignores them
//! ([`open_worktree`]), so no snapshot takes them and no revert or clean checkout
//! deletes them or follows into them. They are read-only to candidates: an attempt that replaces
//! a link, names a shared path in its changes, or writes through a link into the user's files is
//! rejected (what it wrote there cannot be undone by a revert, and the rejection says so).
//!
//! **Setup** (`- setup: uv sync --frozen`) runs once in each new worktree, before its first
//! evaluation, with the `CONFERENCE_*` environment, its own timeout and its output in the run
//! folder's logs. What it creates (a `.venv`, build output) counts as environment too, like the
//! shared paths. Completion is recorded by a marker file in the worktree's own git folder
//! (`<git-dir>/worktrees/<label>/conference-setup.json`), written (by rename) only after the
//! command succeeded. That is the crash-safe place: a kill at any instant before the rename
//! leaves no marker, so setup runs again; the marker goes away with the worktree, so a worktree
//! re-created after `clean` (or on another machine after `fetch`) is set up again; an event in
//! the log would outlive the worktree it describes and skip setup on a fresh checkout. A changed
//! setup command (settings changed between rounds) does not match the marker and runs again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError};
use crate::engine::Conference;
use crate::exec::process::{self, Outcome, Spec};
use crate::model::event::{self as events, Event};

/// The marker file, in a worktree's own git folder.
const SETUP_MARKER: &str = "conference-setup.json";
/// Files of a shared folder compared before and after an agent run, at most (a large virtual
/// environment is read in well under a second; past this the rest goes unchecked).
const MAX_FINGERPRINT_FILES: usize = 200_000;

/// What a completed setup left: its command, and the paths it created (environment, like the
/// shared paths: never snapshotted, never cleaned).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct SetupMarker {
    command: String,
    #[serde(default)]
    made: Vec<String>,
}

/// A setup command that failed: what ran, how it ended, the end of its output.
#[derive(Debug)]
pub struct SetupFailed {
    pub command: String,
    pub outcome: String,
    pub tail: String,
    pub log: PathBuf,
}

impl std::fmt::Display for SetupFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "setup `{}` failed ({}){} (log: {})",
            self.command,
            self.outcome,
            if self.tail.is_empty() {
                String::new()
            } else {
                format!(": {}", self.tail)
            },
            self.log.display()
        )
    }
}

impl std::error::Error for SetupFailed {}

/// Opens a conference worktree with the shared paths, what setup made and the known agent
/// CLIs' own files ignored, so that snapshots, reverts and checkouts through this handle
/// leave them alone. Every handle on a worktree must come from here.
pub fn open_worktree(conf: &Conference, path: &Path) -> Result<Repository> {
    let wt = Repository::open(path)?;
    let mut rules: Vec<String> = environment_paths(conf, &wt)
        .iter()
        .map(|p| format!("/{p}"))
        .collect();
    rules.extend(
        crate::agents::own_files_of_every_cli()
            .iter()
            .map(|p| p.to_string()),
    );
    wt.add_ignore_rule(&rules.join("\n"))?;
    Ok(wt)
}

/// Paths of the worktree `wt` a revert keeps although git ignores them: the shared paths, what
/// setup made, and the agent's own folder.
pub fn kept_ignored_paths(conf: &Conference, wt: &Repository) -> Vec<String> {
    let mut keep = environment_paths(conf, wt);
    keep.push(crate::agents::AGENT_DIR.to_string());
    keep
}

/// The worktree's environment: the shared paths and what setup made there.
fn environment_paths(conf: &Conference, wt: &Repository) -> Vec<String> {
    let mut paths: Vec<String> = conf
        .config
        .environment
        .shared_paths()
        .map(str::to_string)
        .collect();
    paths.extend(read_marker(wt).made);
    paths
}

/// The user's working tree, where shared paths come from.
fn user_tree(conf: &Conference) -> Result<PathBuf> {
    let repo = conf.open_repo()?;
    repo.workdir().map(Path::to_path_buf).with_context(|| {
        "shared paths need a working tree, and this repository is bare".to_string()
    })
}

/// One line saying what `## Environment` does, for `start` (None when it is empty).
pub fn describe(env: &crate::config::environment::Environment) -> Option<String> {
    let mut parts = Vec::new();
    match (&env.setup, env.local_setup()) {
        (Some(setup), Some(_)) => parts.push(format!("setup `{setup}` once in each new worktree")),
        (Some(setup), None) => parts.push(format!(
            "setup `{setup}` where evaluations run (once in each staged tree, before its \
             command), not in the local worktrees"
        )),
        (None, _) => {}
    }
    if !env.shared.is_empty() {
        let paths: Vec<&str> = env.shared_paths().collect();
        parts.push(format!(
            "shared read-only from your working tree: {}",
            paths.join(", ")
        ));
    }
    match (env.devices.len(), env.max_parallel_evaluations) {
        (0, None) => {}
        (0, Some(n)) => parts.push(format!("at most {n} evaluation(s) at once")),
        (_, limit) => parts.push(format!(
            "evaluations on devices {} (one each at a time{}; agents see none)",
            env.devices.join(", "),
            limit.map_or(String::new(), |n| format!(", at most {n} at once"))
        )),
    }
    (!parts.is_empty()).then(|| format!("environment: {}", parts.join("; ")))
}

/// Links every shared path into the worktree at `path` (again, when a link was removed or
/// replaced). Something else in a link's place was put there by an agent inside the worktree: it
/// is removed (never followed).
pub fn link_shared(conf: &Conference, path: &Path) -> Result<()> {
    let env = &conf.config.environment;
    if env.shared.is_empty() {
        return Ok(());
    }
    let top = user_tree(conf)?;
    for rel in env.shared_paths() {
        let source = top.join(rel);
        if std::fs::metadata(&source).is_err() {
            anyhow::bail!(
                "shared path {rel} is missing from your working tree ({}): create it again (e.g. python3 prepare.py), then resume",
                source.display()
            );
        }
        let link = path.join(rel);
        if std::fs::read_link(&link).is_ok_and(|t| t == source) {
            continue;
        }
        remove_entry(&link)?;
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(&source, &link)
            .with_context(|| format!("cannot link {} to {}", link.display(), source.display()))?;
    }
    Ok(())
}

/// Removes a file, a symlink (not what it points to) or a folder; a missing one is fine.
fn remove_entry(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    Ok(())
}

fn read_marker(wt: &Repository) -> SetupMarker {
    std::fs::read(wt.path().join(SETUP_MARKER))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Whether the worktree `wt` is set up (or needs no setup): only then can an agent have run in
/// it.
pub fn set_up(conf: &Conference, wt: &Repository) -> bool {
    conf.config
        .environment
        .local_setup()
        .is_none_or(|command| read_marker(wt).command == command)
}

/// Runs the setup command in the worktree at `path` unless it completed there already. Ok(false)
/// when Ctrl-C stopped it; an error that is a [`SetupFailed`] when it failed.
pub async fn ensure_setup(conf: &Conference, path: &Path, label: &str) -> Result<bool> {
    let Some(command) = conf.config.environment.local_setup() else {
        return Ok(true);
    };
    let wt = open_worktree(conf, path)?;
    if set_up(conf, &wt) {
        return Ok(true);
    }
    let st = conf.state();
    let log = conf.log_path(&format!("setup-{label}"));
    let (stdout, stderr) = (log.with_extension("out"), log.with_extension("err"));
    conf.ui
        .info(&format!("setting up the {label} worktree: {command}"));
    let finished = process::run(Spec {
        command,
        cwd: path,
        // A researcher's worktree is set up as that researcher (`A`); a checkout by its label.
        env: conf.context_env(
            label.strip_prefix("researcher-").unwrap_or(label),
            st.round,
            0,
            st.best.metric,
        ),
        timeout: Some(conf.config.environment.setup_timeout()),
        stdout: stdout.clone(),
        stderr: stderr.clone(),
        stdin: None,
    })
    .await?;
    let failed = |outcome: String, tail: String| SetupFailed {
        command: command.to_string(),
        outcome,
        tail,
        log: stdout.clone(),
    };
    match finished.outcome {
        Outcome::Cancelled => return Ok(false),
        Outcome::TimedOut => {
            let why = format!(
                "timed out after {}",
                crate::config::duration::format_duration(conf.config.environment.setup_timeout())
            );
            return Err(failed(why, output_tail(&stdout, &stderr)).into());
        }
        ref o if !o.success() => {
            return Err(failed(o.describe(), output_tail(&stdout, &stderr)).into())
        }
        _ => {}
    }
    let changed = changed_tracked(&wt)?;
    if !changed.is_empty() {
        let why = format!(
            "it changed committed files ({}); setup must leave them as committed (e.g. uv sync --frozen)",
            changed.join(", ")
        );
        return Err(failed(why, String::new()).into());
    }
    // No agent ran in a worktree before its setup completed, so every untracked or ignored
    // entry but the shared links is setup's (a killed earlier attempt at it included).
    let shared: BTreeSet<&str> = conf.config.environment.shared_paths().collect();
    let made: Vec<String> = untracked_entries(&wt)?
        .into_iter()
        .filter(|p| !shared.contains(p.as_str()))
        .collect();
    let marker = SetupMarker {
        command: command.to_string(),
        made,
    };
    let tmp = wt.path().join(format!("{SETUP_MARKER}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&marker)?)?;
    std::fs::rename(&tmp, wt.path().join(SETUP_MARKER))?;
    Ok(true)
}

/// The last lines a command printed (stderr first, where errors go), on one line.
fn output_tail(stdout: &Path, stderr: &Path) -> String {
    let mut text = process::read_output(stderr);
    if text.trim().is_empty() {
        text = process::read_output(stdout);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Top-level untracked and ignored entries of a worktree (folders as one entry, no trailing
/// slash).
fn untracked_entries(wt: &Repository) -> Result<BTreeSet<String>> {
    let mut opts = git2::StatusOptions::new();
    opts.include_ignored(true)
        .include_untracked(true)
        .recurse_ignored_dirs(false)
        .recurse_untracked_dirs(false)
        .exclude_submodules(true);
    Ok(wt
        .statuses(Some(&mut opts))?
        .iter()
        .filter(|e| {
            e.status()
                .intersects(git2::Status::WT_NEW | git2::Status::IGNORED)
        })
        .filter_map(|e| e.path().map(|p| p.trim_end_matches('/').to_string()))
        .collect())
}

/// Committed files a command changed or deleted in the worktree.
fn changed_tracked(wt: &Repository) -> Result<Vec<String>> {
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(false).exclude_submodules(true);
    Ok(wt
        .statuses(Some(&mut opts))?
        .iter()
        .filter(|e| {
            e.status().intersects(
                git2::Status::WT_MODIFIED | git2::Status::WT_DELETED | git2::Status::WT_TYPECHANGE,
            )
        })
        .filter_map(|e| e.path().map(str::to_string))
        .collect())
}

/// Readies a researcher's new worktree. None when it is ready; otherwise why its round ends:
/// a failed setup is recorded (`researcher.setup_failed`, with the command, how it ended and
/// the end of its output) and no agent runs on the broken worktree; the next round tries again.
pub async fn ready_researcher(conf: &Conference, id: &str, path: &Path) -> Result<Option<String>> {
    let label = format!("researcher-{id}");
    let err = match ensure_setup(conf, path, &label).await {
        Ok(true) => return Ok(None),
        Ok(false) => return Ok(Some("interrupted".into())),
        Err(e) => e,
    };
    let failed = err.downcast::<SetupFailed>()?;
    let round = conf.state().round;
    conf.record(
        Event::SetupFailed(events::SetupFailed {
            researcher: id.to_string(),
            round,
            command: failed.command.clone(),
            status: failed.outcome.clone(),
            reason: failed.to_string(),
            output_tail: failed.tail.clone(),
            log: failed.log.clone(),
        }),
        &format!("{id} r{round}: setup failed ({})", failed.outcome),
        vec![],
    )?;
    conf.ui.warn(&format!(
        "researcher {id}: {failed}; no agent runs on this worktree this round"
    ));
    Ok(Some("setup failed".into()))
}

/// Readies a detached checkout (`best` for the baseline and transfers, `review`): the shared
/// links are there (see `prepare_worktree`); setup runs if it has not there. Ok(false) on Ctrl-C.
pub async fn ready_checkout(conf: &Conference, path: &Path, label: &str) -> Result<bool> {
    ensure_setup(conf, path, label).await.with_context(|| {
        format!(
            "the {label} checkout cannot be set up; fix the setup command (## Environment) or the project, then run `git conference resume {}`",
            conf.name
        )
    })
}

/// A clean checkout has no ignored files either: caches and build output an earlier measurement
/// left behind must not decide the next one. The shared links and what setup made stay: they
/// are the environment (and removing a link never touches what it points to).
pub fn remove_ignored(conf: &Conference, path: &Path) -> Result<()> {
    let wt = open_worktree(conf, path)?;
    let keep = environment_paths(conf, &wt);
    let mut opts = git2::StatusOptions::new();
    opts.include_ignored(true)
        .include_untracked(false)
        .recurse_ignored_dirs(false)
        .exclude_submodules(true);
    let ignored: Vec<String> = wt
        .statuses(Some(&mut opts))?
        .iter()
        .filter(|e| e.status().is_ignored())
        .filter_map(|e| e.path().map(|p| p.trim_end_matches('/').to_string()))
        .collect();
    for rel in ignored {
        let kept = keep.iter().any(|k| {
            rel == *k || rel.starts_with(&format!("{k}/")) || k.starts_with(&format!("{rel}/"))
        });
        if kept {
            continue;
        }
        let full = path.join(&rel);
        remove_entry(&full).map_err(|e| anyhow::anyhow!("cannot clean {}: {e}", full.display()))?;
    }
    Ok(())
}

/// What the shared paths hold, to tell whether an agent wrote through a link: each file's
/// size and modification time (Python's `__pycache__` left out: importing writes there).
#[derive(Debug, Default, PartialEq)]
pub struct SharedState {
    files: BTreeMap<String, (u64, Option<std::time::SystemTime>)>,
}

impl SharedState {
    /// Reads the shared paths of the user's working tree (nothing when none are shared).
    pub fn read(conf: &Conference) -> SharedState {
        let mut files = BTreeMap::new();
        if conf.config.environment.shared.is_empty() {
            return SharedState { files };
        }
        let Ok(top) = user_tree(conf) else {
            return SharedState { files };
        };
        for rel in conf.config.environment.shared_paths() {
            fingerprint(&top.join(rel), rel, &mut files);
        }
        SharedState { files }
    }

    /// Why an attempt touches the shared paths, if it does: its changes name one, a link in
    /// the worktree at `path` was replaced or removed, or files behind a link changed since
    /// `self` was read.
    pub fn violation(&self, conf: &Conference, path: &Path, changed: &[String]) -> Option<String> {
        let env = &conf.config.environment;
        if env.shared.is_empty() {
            return None;
        }
        let under = |p: &str, k: &str| p == k || p.starts_with(&format!("{k}/"));
        if let Some(p) = changed
            .iter()
            .find(|p| env.shared_paths().any(|k| under(p, k)))
        {
            return Some(format!(
                "changes {p}, in a shared path (shared read-only from your working tree)"
            ));
        }
        let top = user_tree(conf).ok()?;
        for rel in env.shared_paths() {
            let link = path.join(rel);
            if std::fs::read_link(&link).ok() != Some(top.join(rel)) {
                return Some(format!(
                    "replaced or removed the shared path {rel} (linked read-only from your working tree)"
                ));
            }
        }
        let now = SharedState::read(conf);
        if now != *self {
            let mut differing: Vec<&String> = now
                .files
                .iter()
                .filter(|(k, v)| self.files.get(*k) != Some(v))
                .map(|(k, _)| k)
                .chain(self.files.keys().filter(|k| !now.files.contains_key(*k)))
                .collect();
            differing.sort();
            differing.dedup();
            let named: Vec<&str> = differing.iter().take(3).map(|s| s.as_str()).collect();
            return Some(format!(
                "wrote into a shared path ({}{}), which is read-only: the change was made in your working tree and is not undone",
                named.join(", "),
                if differing.len() > 3 { ", …" } else { "" }
            ));
        }
        None
    }
}

/// Adds the files under `full` (named `rel`) to `out`, not following symlinks below the top.
fn fingerprint(
    full: &Path,
    rel: &str,
    out: &mut BTreeMap<String, (u64, Option<std::time::SystemTime>)>,
) {
    let mut stack = vec![(full.to_path_buf(), rel.to_string())];
    while let Some((dir, name)) = stack.pop() {
        if out.len() >= MAX_FINGERPRINT_FILES {
            return;
        }
        let meta = if name == rel {
            std::fs::metadata(&dir)
        } else {
            std::fs::symlink_metadata(&dir)
        };
        let Ok(meta) = meta else { continue };
        if !meta.is_dir() {
            out.insert(name, (meta.len(), meta.modified().ok()));
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut children: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
        children.sort();
        for child in children {
            let child_name = child.to_string_lossy().into_owned();
            if child_name == "__pycache__" {
                continue;
            }
            stack.push((dir.join(&child), format!("{name}/{child_name}")));
        }
    }
}

/// Problems with the shared paths against the repository, each on its line of `text`: a path
/// tracked at the baseline (sharing is for ignored or untracked paths; the checkout has tracked
/// ones already), or one missing from the user's working tree.
pub fn preflight(repo: &Repository, cfg: &Config, base: Oid) -> Result<Vec<ConfigError>> {
    let env = &cfg.environment;
    if env.shared.is_empty() {
        return Ok(vec![]);
    }
    let tree = repo.find_commit(base)?.tree()?;
    let main = Repository::open(repo.commondir())?;
    let top = main.workdir().map(Path::to_path_buf);
    let short = &crate::model::short_oid(base);
    let mut errors = Vec::new();
    for shared in &env.shared {
        let p = &shared.path;
        if tree.get_path(Path::new(p)).is_ok() {
            errors.push(ConfigError {
                line: shared.line,
                message: format!(
                    "shared: `{p}` is tracked by git at {short} (the baseline): every worktree has it already, and sharing is only for git-ignored or untracked paths"
                ),
                hint: format!(
                    "remove `{p}` from shared, or stop tracking it: git rm -r --cached {p} && echo '/{p}' >> .gitignore"
                ),
            });
            continue;
        }
        let Some(top) = &top else {
            errors.push(ConfigError {
                line: shared.line,
                message: "shared paths need a working tree, and this repository is bare".into(),
                hint: "run the conference from a clone with a working tree".into(),
            });
            continue;
        };
        if std::fs::metadata(top.join(p)).is_err() {
            errors.push(ConfigError {
                line: shared.line,
                message: format!(
                    "shared: `{p}` does not exist in your working tree ({})",
                    top.join(p).display()
                ),
                hint: format!(
                    "create it first (e.g. python3 prepare.py, uv sync), or remove `{p}` from - shared:"
                ),
            });
        }
    }
    Ok(errors)
}
