//! `import`: a folder of the original prompt-based autoconference made into a git-native
//! conference (`engine::commands::import` does the work; this reads the arguments and says what it made
//! and what it could not map).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::error::usage;

/// Import a folder the original autoconference left (conference.md, conference_events.jsonl,
/// conference_results.tsv, researcher_*_results.tsv) as a git-native conference.
///
/// Its events become the event log (each marked imported), its completed rounds' results the
/// attempts, its `conference/best` branch (in this repository) the best branch, so `status`, `log`,
/// `report` and `resume` work on it. What has no place here is listed, never guessed. A
/// malformed line stops the import (exit 2, naming the file and line) before anything is made.
/// conference.md must validate as git-conference's (add `## Evaluation` and `## Agent` to the
/// original's, or pass `--config`).
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The folder the original conference wrote.
    pub dir: PathBuf,
    /// Conference name (default: the slug of conference.md's title).
    #[arg(long)]
    pub name: Option<String>,
    /// The conference.md to use (default: DIR/conference.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The baseline commit (default: HEAD).
    #[arg(long)]
    pub base: Option<String>,
}

pub fn run(args: ImportArgs) -> Result<i32> {
    let repo = super::discover()?;
    if !args.dir.is_dir() {
        return Err(usage(format!("{} is not a folder: pass the folder the original conference wrote (with its conference.md)", args.dir.display())));
    }
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(|| args.dir.join("conference.md"));
    let (text, cfg) = super::run::read_config(&config_path, true)?;
    let source = crate::engine::commands::import::read_source(&args.dir)?;
    let name = crate::engine::run::session::conference_name(&repo, args.name.clone(), &cfg)?;
    if super::conference_names(&repo)?.contains(&name) {
        return Err(usage(format!("conference `{name}` already exists: import under another name with `--name`, or remove it with `git conference clean --all {name}`")));
    }
    let base_rev = args.base.as_deref().unwrap_or("HEAD");
    let base = repo
        .revparse_single(base_rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| usage(format!("cannot find the baseline `{base_rev}`: commit the project first, or pass --base REV")))?
        .id();
    let best = repo
        .find_reference("refs/heads/conference/best")
        .ok()
        .and_then(|r| r.peel_to_commit().ok())
        .map(|c| c.id());
    let out =
        crate::engine::commands::import::import(&repo, &name, &cfg, &text, base, best, &source)?;
    // Imported from the user's own folder: this clone trusts its commands (as `start` does).
    crate::trust::approve(&repo, &name, &cfg)?;
    if best.is_some() {
        crate::engine::commands::import::point_best_branch(&repo, &name, &out.state.best.commit)?;
    }
    say(&name, &args.dir, &out);
    Ok(0)
}

/// What was made, what was not mapped, and what to do next.
fn say(name: &str, dir: &std::path::Path, out: &crate::engine::commands::import::Outcome) {
    let st = &out.state;
    crate::outln!(
        "Imported `{name}` from {}: {} events, {} attempts in {} completed round(s), {}; best {} at {} (branch conference/{name}/best).",
        dir.display(),
        out.events,
        out.attempts,
        st.round,
        st.phase.label(),
        crate::render::format::fmt(st.best.metric),
        crate::model::short_id(&st.best.commit)
    );
    if out.not_mapped.is_empty() {
        crate::outln!("Everything in the folder was mapped.");
    } else {
        crate::outln!("Not mapped:");
        for line in &out.not_mapped {
            crate::outln!("- {line}");
        }
    }
    crate::outln!("Look at it with `git conference status {name}`, `log {name}`, `report {name}`; continue it with `git conference resume {name}`.");
}
