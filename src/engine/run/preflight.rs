//! Checks made before a conference starts, against the repository and the machine: what
//! conference.md names must exist, so that a missing program or harness file stops `start` with
//! exit 2 and the line to fix, instead of every attempt crashing the same way ("agent exit status
//! 127" eighteen times, then "stalled").
//!
//! A command's program is checked when it can be told without running the command: its first
//! word (after `NAME=value` assignments), unless that word is shell syntax or a shell builtin.
//! A bare name must be on PATH; a path must be committed at the baseline (for commands that run
//! in a worktree) or exist. For commands a shell must interpret, `exec::process::not_found_at_run` turns
//! the shell's "not found" (exit 127) on a first run into the same configuration error.

use crate::config::keys::Key;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::config::paths::PathRules;
use crate::config::sections::SectionKind;
use crate::config::{self, Config, ConfigError};
use crate::exec::process::{SHELL_SYNTAX, SHELL_WORDS};
use crate::git::snapshot;

/// Where a command runs: a researcher's worktree (a checkout of the baseline), or the
/// conference's run folder (the prose commands).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cwd {
    Worktree,
    RunDir,
}

/// A command of conference.md: what it is for, where it is written, where it runs.
struct Site<'a> {
    what: &'static str,
    section: SectionKind,
    key: &'static str,
    command: &'a str,
    cwd: Cwd,
}

/// Slurm's own refusal of `- slurm args:` (`sbatch --test-only`), and Ray's of the address, the
/// resources or the runtime env (a check job), before anything is submitted.
fn launcher_refusal(cfg: &Config, text: &str) -> Option<ConfigError> {
    use crate::config::launcher::LauncherKind;
    let launch = &cfg.environment.launch;
    let (said, keys, hint) = match launch.kind {
        LauncherKind::Slurm => (
            format!(
                "Slurm refuses these slurm args: {}",
                crate::launch::check_slurm_args(&launch.slurm_args).err()?
            ),
            &["slurm args"][..],
            "- slurm args: --partition=gpu --gres=gpu:1 --time=00:20:00 (as `sbatch` takes them)",
        ),
        LauncherKind::Ray => {
            let said = ray_refusal(launch)?;
            let keys: &[&str] = if said.contains("cannot reach") || said.contains("RAY_ADDRESS") {
                &["ray address"]
            } else if said.contains("resources") {
                &["ray resources", "ray runtime env"]
            } else {
                &["ray runtime env", "ray resources"]
            };
            (said, keys, "- ray address: http://head.example:8265 (the dashboard's address; see docs/launchers-ray.md)")
        }
        _ => return None,
    };
    let line = (keys.iter())
        .map(|k| config::setting_line(text, SectionKind::Environment, k, None))
        .find(|l| *l != 0)
        .unwrap_or_else(|| config::setting_line(text, SectionKind::Environment, "launcher", None));
    Some(ConfigError {
        line,
        message: said,
        hint: hint.into(),
    })
}

/// Ray's refusal, asked on a runtime of its own (the checks run before the conference's).
fn ray_refusal(launch: &crate::config::launcher::Launch) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(crate::launch::check_ray(launch)).err()
}

/// Every problem with the harness and the commands of `cfg` at baseline `base`, each tied to its
/// line of `text` (conference.md). `run_dir` is where the prose commands run.
pub fn check(
    repo: &Repository,
    cfg: &Config,
    text: &str,
    base: Oid,
    run_dir: &Path,
) -> anyhow::Result<Vec<ConfigError>> {
    let files = snapshot::list_files(repo, repo.find_commit(base)?.tree_id())?;
    let short = &crate::model::short_oid(base);
    let mut errors = Vec::new();
    for pattern in &cfg.evaluation.frozen {
        let rules = PathRules::new(std::slice::from_ref(pattern));
        if !files.iter().any(|f| rules.matches(f)) {
            errors.push(ConfigError {
                line: config::setting_line(text, SectionKind::Evaluation, "frozen", Some(pattern)),
                message: format!(
                    "frozen: `{pattern}` matches no file committed at {short} (the baseline)"
                ),
                hint: "commit the evaluation harness, or fix the path (- frozen: eval.sh, data/**)"
                    .into(),
            });
        }
    }
    errors.extend(crate::engine::agent::workspace::preflight(repo, cfg, base)?);
    let tree = repo.find_commit(base)?.tree()?;
    let exists = |p: &str| tree.get_path(Path::new(p)).is_ok();
    errors.extend(frozen_by_inference(cfg, text, &exists));
    if let Some(brief) = cfg.brief.as_deref() {
        let file = tree.get_path(Path::new(brief)).ok();
        if file.is_none_or(|f| f.kind() != Some(git2::ObjectType::Blob)) {
            errors.push(ConfigError {
                line: config::setting_line(text, SectionKind::Goal, "Brief", None),
                message: format!(
                    "brief: {brief} is not a file committed at {short} (the baseline)"
                ),
                hint: format!("commit {brief}, or fix the path (- brief: program.md)"),
            });
        }
    }
    for site in sites(cfg) {
        if let Some((message, hint)) = check_program(&site, &tree, short, run_dir) {
            errors.push(ConfigError {
                line: config::setting_line(text, site.section, site.key, None),
                message,
                hint,
            });
        }
    }
    if cfg.agent.kind() == crate::agents::Kind::OpenAi {
        // No program to find; the endpoint must be named (a key is optional: local servers).
        if let Err(m) = crate::researchers::openai::endpoint(&cfg.agent, &|n| std::env::var(n).ok())
        {
            errors.push(ConfigError {
                line: config::setting_line(text, SectionKind::Agent, m.key, None),
                message: m.message,
                hint: m.hint,
            });
        }
    }
    errors.extend(claude_version_refusal(cfg, text));
    errors.extend(launcher_refusal(cfg, text));
    for (command, line) in config::guard::command_lines(text) {
        let site = Site {
            what: "the guard command",
            section: SectionKind::Guard,
            key: "run",
            command: &command,
            cwd: Cwd::Worktree,
        };
        if let Some((message, hint)) = check_program(&site, &tree, short, run_dir) {
            errors.push(ConfigError {
                line,
                message,
                hint,
            });
        }
    }
    Ok(errors)
}

/// The first night's trap, stopped before the night: in an unattended run with Allowed changes
/// empty, a file the evaluation command names (`python3 train.py` names train.py) is frozen by
/// inference while every other file is open, so every edit to the file the researchers were
/// meant to improve is rejected until the budget is spent. The user says which it is: allowed,
/// or frozen on purpose. A run that pauses (`Pause every`) only gets `start`'s warning.
fn frozen_by_inference(
    cfg: &Config,
    text: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Option<ConfigError> {
    let ev = &cfg.evaluation;
    if cfg.pause_every.is_some() || ev.frozen_none {
        return None;
    }
    if crate::config::paths::Guard::new(cfg, exists)
        .allowed
        .is_some()
    {
        return None;
    }
    let explicit = PathRules::new(&ev.frozen);
    let inferred: Vec<String> = crate::config::paths::command_files(&ev.command, exists)
        .into_iter()
        .filter(|f| !explicit.matches(f))
        .collect();
    let first = inferred.first()?;
    let files = inferred.join(", ");
    let (it, is) = if inferred.len() == 1 {
        ("it", "is")
    } else {
        ("them", "are")
    };
    Some(ConfigError {
        line: config::setting_line(text, SectionKind::Evaluation, "command", None),
        message: format!(
            "`{}` names {files}, so {files} {is} frozen (no researcher may change {it}) while \
             Allowed changes is empty (researchers may change every other file): an unattended \
             run would reject every edit to {files}",
            ev.command
        ),
        hint: format!(
            "say which: if researchers should edit {it}, list {it} under ## Search Space → \
             **Allowed changes:** (`- {first}`); if {it} {is} the harness, confirm with \
             `- frozen: {files}` under ## Evaluation"
        ),
    })
}

fn sites(cfg: &Config) -> Vec<Site<'_>> {
    use SectionKind::{Agent, Evaluation};
    let mut sites = vec![
        Site {
            what: "the agent command",
            section: Agent,
            key: "command",
            command: &cfg.agent.command,
            cwd: Cwd::Worktree,
        },
        Site {
            what: "the evaluation command",
            section: Evaluation,
            key: "command",
            command: &cfg.evaluation.command,
            cwd: Cwd::Worktree,
        },
    ];
    let optional = [
        (
            "the hold-out command",
            Evaluation,
            "holdout",
            &cfg.evaluation.holdout,
            Cwd::Worktree,
        ),
        (
            "the judge command",
            Evaluation,
            "judge",
            &cfg.evaluation.judge,
            Cwd::Worktree,
        ),
        (
            "the chair command",
            Agent,
            "chair",
            &cfg.agent.chair,
            Cwd::RunDir,
        ),
        (
            "the reviewer command",
            Agent,
            "reviewer",
            &cfg.agent.reviewer,
            Cwd::RunDir,
        ),
        (
            "the synthesizer command",
            Agent,
            "synthesizer",
            &cfg.agent.synthesizer,
            Cwd::RunDir,
        ),
        (
            "the retrospective command",
            Agent,
            "retrospective",
            &cfg.agent.retrospective,
            Cwd::RunDir,
        ),
    ];
    let setup = (
        "the setup command",
        SectionKind::Environment,
        "setup",
        &cfg.environment.setup,
        Cwd::Worktree,
    );
    // With a remote launcher setup runs where evaluations run, not here: its program need
    // not exist on this machine.
    let setup = cfg.environment.local_setup().is_some().then_some(setup);
    for (what, section, key, command, cwd) in optional.into_iter().chain(setup) {
        if let Some(command) = command {
            sites.push(Site {
                what,
                section,
                key,
                command,
                cwd,
            });
        }
    }
    sites
}

/// The program a command starts, when that can be told without a shell: its first word after
/// `NAME=value` assignments. None for builtin: commands and shell constructs.
pub fn program_of(command: &str) -> Option<&str> {
    let command = command.trim();
    if crate::agents::Kind::of(command).is_builtin() {
        return None;
    }
    let mut words = command.split_whitespace();
    let word = words.find(|w| !is_assignment(w))?;
    if word.contains(SHELL_SYNTAX) || SHELL_WORDS.contains(&word) {
        return None;
    }
    Some(word)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, value)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && !value.contains(|c: char| SHELL_SYNTAX.contains(&c) && c != '=')
        }
        None => false,
    }
}

/// Why `site`'s program cannot run, with the fix; None when it can (or cannot be told).
fn check_program(
    site: &Site,
    tree: &git2::Tree,
    short: &str,
    run_dir: &Path,
) -> Option<(String, String)> {
    let program = program_of(site.command)?;
    let what = site.what;
    if !program.contains('/') {
        if on_path(program).is_some() {
            return None;
        }
        let mut hint = format!(
            "install `{program}` (or put it on PATH), or write the program's full path in `- {}:`",
            site.key
        );
        if site.section == SectionKind::Agent && site.key == "command" {
            hint.push_str("; `- command: builtin:tune` needs no AI service");
        }
        return Some((
            format!("{what} runs `{program}`, which is not found on PATH"),
            hint,
        ));
    }
    let path = Path::new(program);
    if path.is_absolute() {
        return match executable(path) {
            Some(true) => None,
            Some(false) => Some((
                format!("{what} runs `{program}`, which is not executable"),
                format!("chmod +x {program}"),
            )),
            None => Some((
                format!("{what} runs `{program}`, which does not exist"),
                "fix the path".into(),
            )),
        };
    }
    match site.cwd {
        Cwd::Worktree => {
            let rel = normalize(path);
            match tree.get_path(&rel) {
                Ok(entry) if entry.filemode() == 0o100755 => None,
                Ok(entry) if entry.filemode() == 0o100644 => Some((
                    format!(
                        "{what} runs `{program}`, which is committed at {short} without the \
                         executable bit"
                    ),
                    format!(
                        "git update-index --chmod=+x {} && git commit (or run it with its \
                         interpreter, e.g. `sh {program}`)",
                        rel.display()
                    ),
                )),
                Ok(_) => None,
                Err(_) => Some((
                    format!(
                        "{what} runs `{program}`, which is not committed at {short} (every \
                         worktree is a checkout of that commit)"
                    ),
                    format!("git add {} && git commit", rel.display()),
                )),
            }
        }
        Cwd::RunDir => match executable(&run_dir.join(path)) {
            Some(true) => None,
            _ => Some((
                format!(
                    "{what} runs `{program}` from the conference's run folder ({}), where there \
                     is no such program",
                    run_dir.display()
                ),
                "write the program's absolute path".into(),
            )),
        },
    }
}

/// `./a/../b.sh` → `b.sh` (the path inside the worktree).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Some(is executable) for an existing file, None when there is none.
fn executable(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    Some(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Where `program` is on PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|p| executable(p) == Some(true))
}

/// Uncommitted changes (modified, staged, deleted or new files) to frozen paths in the user's
/// working tree: the conference uses the baseline commit, never these.
pub fn uncommitted_frozen(repo: &Repository, cfg: &Config) -> Vec<String> {
    if cfg.evaluation.frozen.is_empty() || repo.is_bare() {
        return Vec::new();
    }
    let rules = PathRules::new(&cfg.evaluation.frozen);
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let Ok(statuses) = repo.statuses(Some(&mut opts)) else {
        return Vec::new();
    };
    statuses
        .iter()
        .filter_map(|s| s.path().map(str::to_string))
        .filter(|p| rules.matches(p))
        .collect()
}

/// The problem with running `cfg`'s preset at the version installed, tied to its line of
/// `text` (conference.md).
fn claude_version_refusal(cfg: &Config, text: &str) -> Vec<ConfigError> {
    let Some((crate::agents::Preset::Claude, program)) = cfg.agent.preset() else {
        return Vec::new();
    };
    if cfg.cost_budget.is_none() {
        return Vec::new();
    }
    let Some(version) = crate::agents::version::version_of(&program) else {
        return Vec::new();
    };
    match crate::agents::version::major(&version) {
        Some(m) if m < 2 => vec![ConfigError {
            line: config::setting_line(
                text,
                SectionKind::Constraints,
                Key::CostBudget.name(),
                None,
            ),
            message: format!(
                "Cost budget: it is passed to Claude Code as --max-budget-usd, which Claude Code \
                 {version} does not have (it came with 2.0)"
            ),
            hint: "upgrade Claude Code (npm install -g @anthropic-ai/claude-code), or write \
                   - **Cost budget:** none"
                .into(),
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_of_a_command() {
        assert_eq!(program_of("claude -p \"$(cat x)\""), Some("claude"));
        assert_eq!(program_of("./agent.sh --fast"), Some("./agent.sh"));
        assert_eq!(program_of("FOO=1 BAR=x python3 a.py"), Some("python3"));
        assert_eq!(program_of("builtin:tune"), None);
        assert_eq!(program_of("cd sub && make"), None);
        assert_eq!(program_of("$AGENT run"), None);
        assert_eq!(program_of("(cd x; y)"), None);
        assert_eq!(program_of("FOO=\"a b\" claude"), None);
        assert_eq!(program_of("exec claude"), None);
    }
}
