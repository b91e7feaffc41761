//! What `start` (and a resume that applied new settings) tells the user about the rules the
//! conference enforces: every path rule with where it came from, which guards run and which
//! cannot be checked, and what of the working tree is not part of the baseline. Users read this
//! before the first attempt is rejected, not in `log --format jsonl` after.

use git2::Repository;

use crate::config::guard;
use crate::engine::Conference;
use crate::ui::Ui;

/// Prints the effective rules of `conf`, one `rules:` line each, then what cannot be checked.
pub fn print_rules(conf: &Conference, ui: &Ui) {
    for line in conf.guard.describe() {
        ui.info(&format!("rules: {line}"));
    }
    for command in guard::commands(&conf.config.guard) {
        ui.info(&format!(
            "rules: guard: `{command}` must pass in the candidate's worktree before a better candidate is kept"
        ));
    }
    for item in &conf.guard.unenforced {
        ui.info(&format!(
            "note: the forbidden change `{item}` names no path: agents are told, but diffs cannot be checked against it (name the files or globs to have it enforced)"
        ));
    }
    for item in guard::prose(&conf.config.guard) {
        ui.info(&format!(
            "note: the guard `{item}` is prose: agents are told, but it cannot be checked (write `- run: <command>` to have it enforced)"
        ));
    }
}

/// Tracked files with uncommitted changes in the user's working tree (modified, staged or
/// deleted), except `config` (conference.md itself): the conference starts from the committed
/// baseline, never from these.
pub fn uncommitted_tracked(repo: &Repository, config: &std::path::Path) -> Vec<String> {
    let Some(top) = repo.workdir() else {
        return Vec::new();
    };
    let config = config.strip_prefix(top).unwrap_or(config);
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(false).include_ignored(false);
    let Ok(statuses) = repo.statuses(Some(&mut opts)) else {
        return Vec::new();
    };
    statuses
        .iter()
        .filter(|s| s.status() != git2::Status::CURRENT)
        .filter_map(|s| s.path().map(str::to_string))
        .filter(|p| std::path::Path::new(p) != config)
        .collect()
}
