//! A run that goes on through a `git gc --prune=now` (or `git prune`, `git pack-refs`) the
//! user runs meanwhile, even in a loop. Such a command may delete objects the run had just
//! written before a ref named them, or hold a file the run was writing: the step fails, with
//! nothing recorded for it (the event log is the commit point). The run then does what
//! `resume` would: puts back the refs whose objects are gone, stops what the failed run left
//! running, reopens the repository (libgit2 forgets the packs `git gc` deleted), reconciles the
//! worktrees with the recorded state and runs on from there, writing the objects again. Only a
//! repository that keeps changing under the run for [`GIVES_UP_AFTER`] stops it, with the
//! sentence that says what to do (`session::said_of_git`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use git2::Repository;

use super::session::{changed_under_it, recover_lost_refs, run, Ended};
use crate::engine::Conference;
use crate::remote::link::Link;

/// How long the repository may keep changing under the run, each step failing, before the run
/// stops: a prune that keeps deleting for a minute is not one that ran once.
const GIVES_UP_AFTER: Duration = Duration::from_secs(60);

/// A pause before the run goes on: the `git gc` that failed the step is likely still running.
const PAUSE: Duration = Duration::from_millis(500);

/// Runs `conf` (see [`run`]) and runs it again from its recorded state each time a step failed
/// because the repository changed under it, until it has kept failing for [`GIVES_UP_AFTER`].
pub fn run_through_gc(repo: &Repository, conf: Conference) -> Result<Ended> {
    let (name, ui, link) = (conf.name.clone(), conf.ui.clone(), conf.link());
    let run_dir = conf.run_dir().to_path_buf();
    let mut conf = conf;
    let mut failing_since: Option<Instant> = None;
    loop {
        let before = events_tip(repo, &name);
        let result = run(conf);
        let what = match &result {
            Err(e) => changed_under_it(e),
            Ok(_) => None,
        };
        let Some(what) = what else {
            return result;
        };
        if events_tip(repo, &name) != before {
            // It recorded steps before this failure: a new streak.
            failing_since = None;
        }
        if failing_since.get_or_insert_with(Instant::now).elapsed() > GIVES_UP_AFTER {
            return result;
        }
        let e = result.err().unwrap_or_else(|| anyhow::anyhow!("{what}"));
        let said = format!("{e:#}");
        ui.warn(&format!(
            "warning: {what}: {}; `{name}` puts back what git lost and goes on from its last recorded step",
            said.lines().next().unwrap_or_default()
        ));
        std::thread::sleep(PAUSE);
        conf = reopened(repo, &name, &ui, &run_dir, link.clone())?;
    }
}

/// Where the event log of conference `name` stands (None: nowhere yet).
fn events_tip(repo: &Repository, name: &str) -> Option<git2::Oid> {
    let events = crate::store::ConferenceRefs::new(name).events();
    repo.refname_to_id(&events).ok()
}

/// The conference as `resume` finds it after a failed run: refs whose objects are gone put
/// back, what the run left running stopped, worktrees reconciled, the link shared again.
fn reopened(
    repo: &Repository,
    name: &str,
    ui: &crate::ui::Ui,
    run_dir: &std::path::Path,
    link: Option<Arc<Link>>,
) -> Result<Conference> {
    crate::exec::process::kill_orphaned_groups(&run_dir.join("running"));
    // A handle of its own: the caller's may still read packs `git gc` deleted.
    let repo = Repository::open(repo.path())?;
    recover_lost_refs(&repo, name, ui)?;
    let conf = Conference::open(repo.path(), name, ui.clone())?;
    crate::engine::record::recovery::reconcile(&conf, false)?;
    if let Some(link) = link {
        conf.share(link)?;
    }
    Ok(conf)
}
