//! A run that goes on through a `git gc --prune=now` (or `git prune`, `git pack-refs`) the
//! user runs meanwhile, even in a loop. Such a command may delete objects the run had just
//! written before a ref named them, or hold a file the run was writing: the step fails, with
//! nothing recorded for it (the event log is the commit point). The run then does what
//! `resume` would: puts back the refs whose objects are gone, stops what the failed run left
//! running, reopens the repository (libgit2 forgets the packs `git gc` deleted), reconciles the
//! worktrees with the recorded state and runs on from there, writing the objects again. The
//! first steps of a `start` (its first event, the worktrees) are done again the same way. Only
//! a repository that keeps changing under the run for [`GIVES_UP_AFTER`] and
//! [`GIVES_UP_AFTER_TRIES`] failed steps stops it, with the sentence that says what to do
//! (`session::said_of_git`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use git2::Repository;

use crate::engine::Conference;
use crate::remote::link::Link;

/// How long the repository may keep changing under the run, each step failing, before the run
/// stops: a prune that keeps deleting for a minute is not one that ran once.
const GIVES_UP_AFTER: Duration = Duration::from_secs(60);

/// How many times in a row a step fails before the run stops, however long that took: on a
/// loaded machine a step takes longer, so a minute of a `git gc` loop is a few tries of a long
/// step, each of which the next try may pass.
const GIVES_UP_AFTER_TRIES: u32 = 20;

/// A pause before the run goes on: the `git gc` that failed the step is likely still running.
const PAUSE: Duration = Duration::from_millis(500);

/// Runs `conf` with `run` (`session::run`) and runs it again from its recorded state each time
/// a step failed because the repository changed under it, until it has kept failing for
/// [`GIVES_UP_AFTER`].
pub fn run_through_gc<T>(
    repo: &Repository,
    conf: Conference,
    run: impl Fn(Conference) -> Result<T>,
) -> Result<T> {
    let (name, ui, link) = (conf.name.clone(), conf.ui.clone(), conf.link());
    let run_dir = conf.run_dir().to_path_buf();
    let mut conf = conf;
    let mut streak = Streak::default();
    loop {
        let before = events_tip(repo, &name);
        let result = run(conf);
        if events_tip(repo, &name) != before {
            // It recorded steps before this failure: a new streak.
            streak = Streak::default();
        }
        if let Some(ended) = streak.ends_with(result, &name, &ui) {
            return ended;
        }
        conf = reopened(repo, &name, &ui, &run_dir, link.clone())?;
    }
}

/// Does `step` again each time it failed because the repository changed under it, until it has
/// kept failing for [`GIVES_UP_AFTER`] and [`GIVES_UP_AFTER_TRIES`] tries, as a run does: the
/// first steps of a `start`, before the run (and [`run_through_gc`]) takes over. `step` puts
/// back what it needs itself (see [`reopened`]).
pub fn again_through_gc<T>(
    name: &str,
    ui: &crate::ui::Ui,
    mut step: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut streak = Streak::default();
    loop {
        if let Some(ended) = streak.ends_with(step(), name, ui) {
            return ended;
        }
    }
}

/// Consecutive failures of steps because the repository changed under them.
#[derive(Default)]
struct Streak {
    since: Option<Instant>,
    failed: u32,
}

impl Streak {
    /// `Some(result)` when a step's `result` ends the streak: it succeeded, it failed for
    /// another reason, or failures have lasted [`GIVES_UP_AFTER`] and numbered
    /// [`GIVES_UP_AFTER_TRIES`]. `None`, after a warning and a [`PAUSE`], when the step is to
    /// be done again.
    fn ends_with<T>(
        &mut self,
        result: Result<T>,
        name: &str,
        ui: &crate::ui::Ui,
    ) -> Option<Result<T>> {
        let Some(what) = result.as_ref().err().and_then(changed_under_it) else {
            return Some(result);
        };
        self.failed += 1;
        let lasted = self.since.get_or_insert_with(Instant::now).elapsed();
        if lasted > GIVES_UP_AFTER && self.failed >= GIVES_UP_AFTER_TRIES {
            return Some(result);
        }
        let said = result.err().map(|e| format!("{e:#}")).unwrap_or_default();
        ui.warn(&format!(
            "warning: {what}: {}; `{name}` puts back what git lost and goes on from its last recorded step",
            said.lines().next().unwrap_or_default()
        ));
        std::thread::sleep(PAUSE);
        None
    }
}

/// Where the event log of conference `name` stands (None: nowhere yet).
fn events_tip(repo: &Repository, name: &str) -> Option<git2::Oid> {
    let events = crate::store::ConferenceRefs::new(name).events();
    repo.refname_to_id(&events).ok()
}

/// The conference as `resume` finds it after a failed run: refs whose objects are gone put
/// back, what the run left running stopped, the link shared again, worktrees reconciled.
pub fn reopened(
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
    // Shared first: on several machines, what reconciling records names this machine.
    if let Some(link) = link {
        conf.share(link)?;
    }
    crate::engine::record::recovery::reconcile(&conf, false)?;
    Ok(conf)
}

/// Puts back the refs whose objects git lost (see `store::recovery`) and repairs the worktrees'
/// git links of a moved or copied repository, each said as a warning.
pub fn recover_lost_refs(repo: &Repository, name: &str, ui: &crate::ui::Ui) -> Result<()> {
    let conference = crate::store::ConferenceRefs::new(name);
    // First: the leases among them are also refs `recover` would try to put back.
    for view in crate::store::recovery::drop_broken_views(repo, &conference)? {
        ui.warn(&format!(
            "warning: {view} named objects this clone does not have whole; deleted (the next fetch of the shared remote brings it again)"
        ));
    }
    for lost in crate::store::recovery::recover(repo, &conference)? {
        ui.warn(&format!("warning: {}", lost.describe()));
    }
    if let Some(said) = crate::git::worktree::make_worktrees_own(repo, name)? {
        ui.warn(&format!("warning: {said}"));
    }
    Ok(())
}

/// What a run's failure says of the repository changing under it, when it says that.
pub fn changed_under_it(e: &anyhow::Error) -> Option<&'static str> {
    use git2::{ErrorClass, ErrorCode};
    if e.chain()
        .any(|c| c.is::<crate::store::protect::ObjectGone>())
    {
        return Some(
            "objects it had just written were deleted before a ref named them (a `git gc \
             --prune=now` or `git prune` while it ran?), so none does",
        );
    }
    let git = e.chain().find_map(|c| c.downcast_ref::<git2::Error>())?;
    let missing =
        git.message().contains("doesn't exist") || git.message().contains("invalid object");
    match (git.class(), git.code()) {
        (ErrorClass::Odb, _) | (_, ErrorCode::NotFound) => Some(
            "objects it needs are gone from the repository (a `git gc --prune=now` or `git \
             prune` while it ran?)",
        ),
        _ if missing => Some(
            "objects it needs are gone from the repository (a `git gc --prune=now` or `git \
             prune` while it ran?)",
        ),
        (_, ErrorCode::Locked) | (ErrorClass::Os, _) => Some(
            "another git command held or removed a file it was writing (a `git gc` while it ran?)",
        ),
        _ => None,
    }
}
