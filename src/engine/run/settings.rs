//! `resume` reads the user's conference.md again and applies what changed (see
//! `config::changes` for what may change, `engine::run::reconfigure` for how it is recorded).
//!
//! It is automatic, and never silent: every change is printed before anything runs, a change
//! that may not be made stops the resume with exit 2 and the line, and a file that belongs to
//! another conference (another title) is left alone with a note. The file is the working tree's
//! conference.md, or `--config PATH`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use crate::config::changes::{self, Change, Class};
use crate::config::{self, Config, ConfigError};
use crate::engine::run::preflight;
use crate::engine::Conference;
use crate::error::usage;

/// Settings to apply on resume: the merged text to store, its config, and what changed.
pub struct Plan {
    pub text: String,
    pub config: Config,
    pub changes: Vec<Change>,
    pub file: PathBuf,
}

/// What the user's conference.md changes, checked; None when there is nothing to apply.
pub fn plan(
    repo: &Repository,
    conf: &Conference,
    config_arg: Option<&Path>,
    base: Oid,
) -> Result<Option<Plan>> {
    let top = workdir(repo)?;
    let explicit = config_arg.is_some();
    let path = match config_arg {
        Some(p) if p.is_absolute() => p.to_path_buf(),
        Some(p) => top.join(p),
        None => top.join("conference.md"),
    };
    if !path.exists() {
        if explicit {
            return Err(usage(format!("{} does not exist", path.display())));
        }
        return Ok(None);
    }
    let text = read_text(&path)?;
    let (doc, _) = config::parse::read(&text);
    let title = doc.title.as_ref().map(|t| t.value.trim().to_string());
    if !explicit && title.as_deref() != Some(conf.config.title.as_str()) {
        crate::errln!(
            "note: {} is titled `{}`, not `{}`: settings of `{}` left as they are (pass --config FILE to apply a file)",
            path.display(),
            title.unwrap_or_default(),
            conf.config.title,
            conf.name
        );
        return Ok(None);
    }
    // One edit of a setting the Pre-Flight Gate repeats is enough: the copy still holding the
    // value the conference ran with takes the edited one.
    let (text, settled) = config::repeated::settle(&conf.config_text, &text);
    config::load(&text).map_err(|errs| usage(config::describe_errors(&path, &errs)))?;
    let changes = changes::diff(&conf.config_text, &text);
    if changes.is_empty() {
        return Ok(None);
    }
    let measured = conf.state().baseline_metric.is_some();
    let refused: Vec<ConfigError> = changes
        .iter()
        .filter(|c| c.class == Class::Fixed || (c.class == Class::BeforeBaseline && measured))
        .map(|c| refusal(c, &conf.name))
        .collect();
    if !refused.is_empty() {
        return Err(usage(format!(
            "{}\nNothing was changed or run.",
            config::describe_errors(&path, &refused)
        )));
    }
    let merged = config::edit::carry_sections(&conf.config_text, &text, changes::MAINTAINED);
    let new = config::load(&merged).map_err(|errs| usage(config::describe_errors(&path, &errs)))?;
    let problems = preflight::check(repo, &new, &merged, base, &conf.run_dir)?;
    if !problems.is_empty() {
        return Err(usage(config::describe_errors(&path, &problems)));
    }
    crate::engine::agent::dispatch::check_tunable(&new, repo, base)?;
    if !settled.is_empty() {
        std::fs::write(&path, &text)?;
        for s in &settled {
            crate::errln!("{}: {}", path.display(), s.describe());
        }
    }
    Ok(Some(Plan {
        text: merged,
        config: new,
        changes,
        file: path,
    }))
}

fn refusal(c: &Change, name: &str) -> ConfigError {
    let when = match c.class {
        Class::BeforeBaseline => {
            "once the baseline is measured (metrics would be measured two ways)"
        }
        _ => "after start",
    };
    let what = if c.key == "text" {
        format!("## {}", c.section)
    } else {
        format!("`{}` in ## {}", c.key, c.section)
    };
    ConfigError {
        line: c.line,
        message: format!(
            "{what} cannot change {when}: the conference `{name}` has `{}`, this file `{}`",
            c.old.replace('\n', ", "),
            c.new.replace('\n', ", ")
        ),
        hint: format!(
            "put back `{}`, or start a new conference under another name (`git conference start <new-name>`)",
            c.old.replace('\n', ", ")
        ),
    }
}

/// Prints the changes a resume applies.
pub fn print(plan: &Plan) {
    crate::errln!(
        "Settings changed in {} (applied from this round on):",
        plan.file.display()
    );
    for c in &plan.changes {
        let place = if c.line > 0 {
            format!("   (line {})", c.line)
        } else {
            String::new()
        };
        crate::errln!("- {}{place}", c.describe());
    }
}

/// Whether the working tree's conference.md, of this conference's title, names other commands
/// than the stored config (what `trust` and `join` say of a conference on several machines,
/// which runs the stored ones). False when there is no such file or it does not load.
pub fn local_commands_differ(repo: &Repository, conf: &Conference) -> bool {
    let Ok(top) = workdir(repo) else {
        return false;
    };
    let Ok(text) = std::fs::read_to_string(top.join("conference.md")) else {
        return false;
    };
    match config::load(&text) {
        Ok(local) => {
            local.title == conf.config.title
                && crate::trust::describe(&local) != crate::trust::describe(&conf.config)
        }
        Err(_) => false,
    }
}

/// The folder that holds the repository's main working tree (for conference.md and apply).
pub fn workdir(repo: &Repository) -> Result<PathBuf> {
    repo.workdir()
        .map(Path::to_path_buf)
        .ok_or_else(|| usage("this repository has no working tree (bare repositories can run `status`, `log` and `report` only)"))
}

/// Reads a conference.md, with the path in the error. A folder or bytes that are not UTF-8
/// are the user's input to fix (exit 2, with the reason and where); a UTF-8 byte order mark is
/// dropped.
pub fn read_text(path: &Path) -> Result<String> {
    if path.is_dir() {
        return Err(crate::error::usage(format!(
            "{} is a folder, not a conference.md file: pass the file (e.g. {})",
            path.display(),
            path.join("conference.md").display()
        )));
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_string()),
        Err(e) => {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            Err(crate::error::usage(format!(
                "{} is not UTF-8 text: line {line} holds a byte sequence that is not UTF-8 (byte {}); save the file as UTF-8",
                path.display(),
                e.valid_up_to()
            )))
        }
    }
}
