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
    for line in conf.guard().describe() {
        ui.info(&format!("rules: {line}"));
    }
    for command in guard::commands(&conf.config().guard) {
        ui.info(&format!(
            "rules: guard: `{command}` must pass in the candidate's worktree before a better candidate is kept"
        ));
    }
    for item in &conf.guard().unenforced {
        ui.info(&format!(
            "note: the forbidden change `{item}` names no path: agents are told, but diffs cannot be checked against it (name the files or globs to have it enforced)"
        ));
    }
    for item in guard::prose(&conf.config().guard) {
        ui.info(&format!(
            "note: the guard `{item}` is prose: agents are told, but it cannot be checked (write `- run: <command>` to have it enforced)"
        ));
    }
    if let Some(line) = crate::engine::agent::workspace::describe(&conf.config().environment) {
        ui.info(&format!("rules: {line}"));
    }
    if let Some(warning) = open_search_space(conf) {
        ui.info(&warning);
    }
}

/// The first-evening trap: `python3 train.py` names train.py, so with no Allowed changes the file
/// the agent should edit is frozen and everything else, the harness that measures it included,
/// is open. Said before the first attempt is rejected.
fn open_search_space(conf: &Conference) -> Option<String> {
    let g = &conf.guard();
    let inferred: Vec<&str> = g
        .frozen_patterns()
        .iter()
        .zip(&g.frozen_sources)
        .filter(|(_, source)| source.as_str() != crate::config::paths::FROZEN_BY_USER)
        .map(|(p, _)| p.as_str())
        .collect();
    if g.allowed.is_some() || inferred.is_empty() {
        return None;
    }
    Some(format!(
        "warning: Allowed changes is empty, so researchers may change every file but the frozen ones, \
         and {} is frozen because the evaluation command names it. If researchers should edit it, \
         list it under Allowed changes (`- {}`); freeze the harness it reads with `- frozen: …` \
         under ## Evaluation.",
        inferred.join(", "),
        inferred[0]
    ))
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
