//! The conference engine: runs the protocol of seed 000 as a state machine over the event log.
//!
//! `Conference` holds the stored config and the current [`state::State`]. Every step ends by
//! recording one event (the commit point); effects that follow from an event (moving a branch,
//! writing a note, resetting a worktree) are re-derived from the state by [`Conference::reconcile`]
//! whenever a run starts, so a kill at any instant loses nothing and repeats nothing.
//!
//! Phases live in their own files: `research` (phase 1), `review` (poster session and peer
//! review), `transfer` (knowledge transfer), `stop` (stop rules), `synthesis` (report).

pub mod agent;
mod agent_call;
pub mod arriving;
pub mod briefing;
pub mod budget;
pub mod driver;
pub mod evaluate;
pub mod guards;
pub mod import;
pub mod integrity;
pub mod knowledge;
pub mod ledger;
pub mod measure;
/// The noise rules are pure (`protocol::noise`); engine code keeps its old path.
pub use crate::protocol::noise;
pub mod openai;
pub mod preflight;
/// The path rules live beside the config (`config::paths`); engine code keeps its old path.
pub use crate::config::paths;
pub mod prompt;
pub mod prose;
pub mod pruning;
pub mod reasons;
pub mod reconfigure;
pub mod recorder;
pub mod research;
pub mod review;
pub mod schedule;
pub mod shared;
/// The state is model data (`model::state`); engine code keeps its old path.
pub use crate::model::state;
pub mod stop;
pub mod stored;
pub mod synthesis;
pub mod talk;
pub mod transfer;
pub mod workspace;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};
use serde_json::{json, Value};

use crate::config::Config;
use crate::git::{snapshot, worktree};
use crate::hooks::Hooks;
use crate::model::event::{self as events, Event};
use crate::remote::link::Link;
use crate::store::{self, notes, ConferenceRefs, EventLog, StateChange};
use crate::ui::Ui;
pub use recorder::Recorder;
use state::{files, Phase, State};

/// How a run of the engine ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// converged / budget_stop / stalled
    Completed(String),
    Paused,
    Interrupted,
    /// Paused for what the sentence says (`git conference stop`, or a person's decision in
    /// human-in-the-loop mode): exit 3, like `pause_every`.
    Waiting(String),
}

/// A git lock file shared with other processes (notes, packed-refs) that has stayed this long is
/// left by a killed process.
const STALE_LOCK_AGE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a conference is opened for: a run creates its run folder (logs, locks); a read
/// creates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Run,
    Read,
}

pub struct Conference {
    pub name: String,
    pub repo_dir: PathBuf,
    pub run_dir: PathBuf,
    pub config: Config,
    pub config_text: String,
    pub refs: ConferenceRefs,
    pub guard: paths::Guard,
    pub recorder: Arc<Mutex<Recorder>>,
    pub ui: Ui,
    /// Evaluations of this run by cache key, shared so a tree is measured once at a time.
    pub evaluations:
        Mutex<std::collections::HashMap<String, Arc<tokio::sync::OnceCell<evaluate::EvalResult>>>>,
    /// Researcher worktrees between two research phases of this run, with the watch that has
    /// seen every change since they were left clean (see `research::researcher_loop`).
    pub idle_worktrees: Mutex<std::collections::HashMap<String, research::IdleWorktree>>,
    /// Evaluation slots and devices (`## Environment`), shared by every evaluation of the run.
    pub scheduler: schedule::Scheduler,
    /// Where evaluations run (`## Environment`'s launcher).
    pub launcher: crate::launch::Launcher,
}

pub use crate::clock::{now_iso, now_unix};

impl Conference {
    /// Opens an existing conference from its refs, to run it.
    pub fn open(repo_dir: &Path, name: &str, ui: Ui) -> Result<Conference> {
        Self::open_for(repo_dir, name, ui, Access::Run)
    }

    /// Opens an existing conference to read it (`status`, `log`, `list`, `report`, `apply`,
    /// `trust`): nothing is created on disk, no event is recorded.
    pub fn view(repo_dir: &Path, name: &str) -> Result<Conference> {
        Self::open_for(repo_dir, name, Ui::new(true), Access::Read)
    }

    fn open_for(repo_dir: &Path, name: &str, ui: Ui, access: Access) -> Result<Conference> {
        let repo = Repository::open(repo_dir)?;
        let refs = ConferenceRefs::new(name);
        let log = EventLog::open(&repo, refs.clone())?;
        if log.tip().is_none() {
            bail!("no conference named `{name}` in this repository (see `git conference list`)");
        }
        let state_bytes = log
            .read(&repo, files::STATE)?
            .with_context(|| format!("conference `{name}` has no state.json in its event log"))?;
        let state: State = serde_json::from_slice(&state_bytes)
            .with_context(|| format!("conference `{name}`: state.json is corrupt"))?;
        let state = stored::checked(state, name).map_err(|why| {
            crate::error::usage(format!(
                "conference `{name}`: its stored state ({}:state.json) is not valid: {why}; it may have been edited or fetched from a broken copy (`git conference fetch` from a good one, or `git conference clean --all {name}`)",
                refs.events()
            ))
        })?;
        let config_text = log
            .read(&repo, files::CONFIG)?
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .with_context(|| format!("conference `{name}` has no stored conference.md"))?;
        let config = crate::config::load(&config_text).map_err(|errs| {
            anyhow::anyhow!(
                "the stored conference.md of `{name}` no longer validates:\n{}",
                errs.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })?;
        Self::assemble(repo, log, state, config, config_text, ui, access)
    }

    fn assemble(
        repo: Repository,
        log: EventLog,
        state: State,
        config: Config,
        config_text: String,
        ui: Ui,
        access: Access,
    ) -> Result<Conference> {
        let name = state.name.clone();
        crate::store::notes::remember_current(&repo);
        let repo_dir = repo.commondir().to_path_buf();
        let run_dir = worktree::run_dir(&repo, &name);
        if access == Access::Run {
            std::fs::create_dir_all(run_dir.join("logs"))?;
        }
        let baseline = repo
            .find_commit(git2::Oid::from_str(&state.baseline_commit)?)?
            .tree()?;
        let exists = |p: &str| baseline.get_path(Path::new(p)).is_ok();
        let guard = paths::Guard::new(&config, &exists);
        drop(baseline);
        let hooks = Hooks::new(&repo);
        let scheduler = match access {
            Access::Run => schedule::Scheduler::publishing(&config.environment, run_dir.clone()),
            Access::Read => schedule::Scheduler::new(&config.environment),
        };
        let launcher = crate::launch::Launcher::new(&config.environment, &repo_dir, &run_dir);
        Ok(Conference {
            name: name.clone(),
            repo_dir,
            run_dir,
            refs: ConferenceRefs::new(&name),
            guard,
            config,
            config_text,
            recorder: Arc::new(Mutex::new(Recorder::new(repo, log, state, hooks))),
            ui,
            evaluations: Mutex::new(Default::default()),
            idle_worktrees: Mutex::new(Default::default()),
            scheduler,
            launcher,
        })
    }

    /// Records `conference.started`: stores the config and the initial state. Branches and
    /// worktrees follow from the state (see `reconcile`).
    pub fn create(
        repo_dir: &Path,
        name: &str,
        config: Config,
        config_text: String,
        base: Oid,
        ui: Ui,
    ) -> Result<Conference> {
        let repo = Repository::open(repo_dir)?;
        let refs = ConferenceRefs::new(name);
        let mut log = EventLog::open(&repo, refs.clone())?;
        if log.tip().is_some() {
            return Err(crate::error::usage(format!(
                "conference `{name}` already exists; continue it with `git conference resume {name}` \
                 or remove it with `git conference clean --all {name}`"
            )));
        }
        let now = now_iso();
        let state = initial_state(name, &config, base, &now);
        let metric = evaluate::metric_name(&config);
        let event = Event::Started(events::Started {
            researchers: config.count,
            mode: serde_json::to_value(config.mode)?,
            goal: config.goal.clone(),
            config_summary: format!(
                "{} researchers x {} iterations/round, max {} rounds, metric {}",
                config.count, config.iterations_per_round, config.max_rounds, metric
            ),
            base: base.into(),
        });
        let line = event.line(now);
        let changes = vec![
            StateChange::Put(files::CONFIG.into(), config_text.clone().into_bytes()),
            StateChange::Put(files::STATE.into(), serde_json::to_vec_pretty(&state)?),
        ];
        let summary = format!("{} ({} researchers)", config.title, config.count);
        log.append(&repo, &line, &summary, &changes)?;
        let conf = Self::assemble(repo, log, state, config, config_text, ui, Access::Run)?;
        conf.recorder.lock().unwrap().notify(&line);
        Ok(conf)
    }

    /// A copy of the current state.
    pub fn state(&self) -> State {
        self.recorder.lock().unwrap().state.clone()
    }

    /// Records `event` with the state-tree files its step produced (see [`Recorder::record`]).
    pub fn record(&self, event: Event, summary: &str, produced: Vec<StateChange>) -> Result<()> {
        self.recorder
            .lock()
            .unwrap()
            .record(&event, summary, produced)
    }

    /// Runs this conference with other machines through `link` (see `engine::shared`).
    pub fn share(&self, link: Arc<Link>) {
        let arrivals = arriving::Arrivals::new(self);
        link.check_arrivals_with(Box::new(move |repo, from, to| {
            arrivals.check(repo, from, to)
        }));
        self.recorder.lock().unwrap().link = Some(link);
    }

    /// The shared remote this run coordinates through (None: it runs on this machine alone).
    pub fn link(&self) -> Option<Arc<Link>> {
        self.recorder.lock().unwrap().link.clone()
    }

    /// Whether this run runs researcher `id`: always on one machine; on several, while this
    /// machine holds its lease.
    pub fn runs_here(&self, id: &str) -> bool {
        self.link().is_none_or(|link| link.holds(id))
    }

    /// Takes the events other machines published (the shared remote's log moved on): the local
    /// log, branches and state follow it. True when they moved.
    pub fn sync_shared(&self) -> Result<bool> {
        let mut rec = self.recorder.lock().unwrap();
        let Some(link) = rec.link.clone() else {
            return Ok(false);
        };
        match link.sync(&rec.repo)? {
            Some(_) => {
                rec.reload()?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Reads a file of the current state tree.
    pub fn read_state_file(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let rec = self.recorder.lock().unwrap();
        if let Some(bytes) = rec.pending_cache.get(path) {
            return Ok(Some(bytes.clone()));
        }
        rec.log.read(&rec.repo, path)
    }

    /// Waits (bounded) for hooks still running, before the program exits.
    pub fn finish_hooks(&self) {
        self.recorder.lock().unwrap().finish_hooks();
    }

    /// Writes the notes still waiting for a batch (before the program exits).
    pub fn flush_notes(&self) -> Result<()> {
        self.recorder.lock().unwrap().flush_notes()
    }

    /// Keeps attempt commits reachable from the attempts ref (serialised with the other writers).
    pub fn keep_reachable(&self, commits: &[Oid]) -> Result<()> {
        let rec = self.recorder.lock().unwrap();
        store::keep_reachable(&rec.repo, &self.refs, commits)
    }

    /// Moves a branch to `new`, from whatever it points at now if `expected` is None.
    pub fn move_branch(&self, refname: &str, new: &str, expected: Option<&str>) -> Result<()> {
        let rec = self.recorder.lock().unwrap();
        let new = Oid::from_str(new)?;
        let current = rec
            .repo
            .find_reference(refname)
            .ok()
            .and_then(|r| r.target());
        if current == Some(new) {
            return Ok(());
        }
        let expected = match expected {
            Some(e) => Some(Oid::from_str(e)?),
            None => current,
        };
        store::events::cas_update(&rec.repo, refname, new, expected, PROGRAM_REFLOG_MESSAGE)
    }

    /// Opens the main repository (each task opens its own handle; git2 handles are not shared).
    pub fn open_repo(&self) -> Result<Repository> {
        Ok(Repository::open(&self.repo_dir)?)
    }

    /// Path of a worktree, created or repaired when needed, with its files at `commit`.
    pub fn prepare_worktree(
        &self,
        label: &str,
        branch: Option<&str>,
        commit: &str,
    ) -> Result<PathBuf> {
        let repo = self.open_repo()?;
        let oid = Oid::from_str(commit)?;
        let checkout = match branch {
            Some(b) => worktree::Checkout::Branch(b),
            None => worktree::Checkout::Detached(oid),
        };
        let path = worktree::ensure(&repo, &self.name, label, checkout)?;
        worktree::repair_gitfile(&repo, &path)?;
        let wt = self.open_worktree(&path)?;
        let head_ref = branch.map(|b| format!("refs/heads/{b}"));
        snapshot::reset(&wt, oid, head_ref.as_deref())?;
        workspace::link_shared(self, &path)?;
        Ok(path)
    }

    /// Brings branches, notes and worktrees in line with the recorded state (after a crash, a
    /// kill, or on a fresh clone). Partial work found in a worktree is recorded, never dropped. A
    /// branch moved by hand stops it (see `check_branches`) unless `force`, which sets the
    /// commits aside as recorded attempts first.
    pub fn reconcile(&self, force: bool) -> Result<Vec<String>> {
        self.clear_stale_locks()?;
        if let Some(said) = integrity::recover_config(&self.open_repo()?, &self.run_dir) {
            self.ui.warn(&said);
        }
        // First, so that any later event's notes commit may say "noted through" truthfully.
        self.replay_missing_notes()?;
        let moved = self.check_branches()?;
        if !moved.is_empty() && !force {
            return Err(moved_branches_error(&self.open_repo()?, &self.name, &moved));
        }
        let mut set_aside_trees = Vec::new();
        for m in &moved {
            set_aside_trees.push(self.set_aside_branch(m)?);
        }
        let st = self.state();
        let mut reverted = Vec::new();
        for (id, r) in &st.researchers {
            self.move_branch(&self.refs.researcher(id), &r.head, None)?;
            let branch = self.refs.researcher_branch(id);
            let label = format!("researcher-{id}");
            let repo = self.open_repo()?;
            let path = worktree::worktree_path(&repo, &self.name, &label);
            if path.exists() {
                // Broken links are repaired with the files as they are, so what they hold is
                // recorded below rather than lost.
                worktree::ensure(
                    &repo,
                    &self.name,
                    &label,
                    worktree::Checkout::Branch(&branch),
                )?;
            }
            if let Ok(wt) = self.open_worktree(&path) {
                // A commit set aside above, still checked out there, is recorded already.
                let already = !set_aside_trees.is_empty()
                    && snapshot::capture(&wt).is_ok_and(|s| set_aside_trees.contains(&s.tree));
                // Partial work, or changes made by hand in any phase: recorded, never dropped.
                // (Not in a worktree whose setup never completed: no agent ran there, and what
                // it holds is a killed setup's output.)
                if !already && workspace::set_up(self, &wt) {
                    if let Some(commit) = research::set_aside_partial(self, id, &wt)? {
                        reverted.push(format!("{id}:{commit}"));
                    }
                }
            }
            self.prepare_worktree(&label, Some(&branch), &r.head)?;
        }
        self.move_branch(&self.refs.best(), &st.best.commit, None)?;
        Ok(reverted)
    }

    /// The conference's branches that point where no run of the program can leave them.
    ///
    /// Every move the program makes goes forward, right after the event that records it: a
    /// kept attempt (a child of the researcher's head), a round start (a merge of the head and
    /// best, or a fast-forward to best), a knowledge-transfer pick (a child of best). A kill
    /// between the event and the move leaves the branch one such step behind the recorded
    /// commit: at its first parent, or, when the researcher's last move was its round start, at
    /// an ancestor of it. A missing branch is created. Anything else (a commit made in a
    /// worktree, `git branch -f`, `git update-ref`) was done by hand and is not overwritten
    /// unless it was set aside already (its note says so).
    fn check_branches(&self) -> Result<Vec<MovedBranch>> {
        let st = self.state();
        let repo = self.open_repo()?;
        let mut expected: Vec<(String, Option<String>, &str, bool)> = st
            .researchers
            .iter()
            .map(|(id, r)| {
                (
                    self.refs.researcher_branch(id),
                    Some(id.clone()),
                    r.head.as_str(),
                    r.head == r.round_start,
                )
            })
            .collect();
        expected.push((
            self.refs.best_branch(),
            None,
            st.best.commit.as_str(),
            false,
        ));
        let mut moved = Vec::new();
        for (branch, researcher, want, fast_forward) in expected {
            let want = Oid::from_str(want)?;
            let Some(found) = repo
                .find_reference(&format!("refs/heads/{branch}"))
                .ok()
                .and_then(|r| r.target())
            else {
                continue;
            };
            if found == want {
                continue;
            }
            let behind = repo.find_commit(want)?.parent_id(0).ok() == Some(found)
                || (fast_forward && repo.graph_descendant_of(want, found).unwrap_or(false));
            if behind
                || self.was_set_aside(&repo, found, &branch)?
                || moved_there_by_the_program(&repo, &format!("refs/heads/{branch}"), found)
            {
                continue;
            }
            moved.push(MovedBranch {
                branch,
                researcher,
                found,
                expected: want,
            });
        }
        Ok(moved)
    }

    /// Whether `commit` was set aside from `branch` already (a resume killed before it moved the
    /// branch back).
    fn was_set_aside(&self, repo: &Repository, commit: Oid, branch: &str) -> Result<bool> {
        let Some(note) = notes::read_note(repo, commit)? else {
            return Ok(false);
        };
        Ok(note.lines().any(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| {
                v["verdict"] == "set_aside" && v["branch"] == branch && v["conference"] == self.name
            })
        }))
    }

    /// `resume --force`: the commit a hand-moved branch points to is kept reachable, recorded
    /// (`branch.set_aside`, with a note), and the branch goes back to the recorded commit.
    /// Returns the set-aside commit's tree.
    fn set_aside_branch(&self, m: &MovedBranch) -> Result<Oid> {
        let repo = self.open_repo()?;
        let found = repo.find_commit(m.found).with_context(|| {
            format!(
                "branch {} points to {}, which is not a commit; point it back with `git branch -f {} {}`",
                m.branch, m.found, m.branch, m.expected
            )
        })?;
        self.keep_reachable(&[m.found])?;
        let st = self.state();
        let note = json!({"commit": m.found.to_string(), "conference": self.name,
                          "verdict": "set_aside", "branch": m.branch,
                          "researcher": m.researcher, "round": st.round,
                          "expected": m.expected.to_string()});
        self.record(
            Event::BranchSetAside(events::BranchSetAside {
                branch: m.branch.clone(),
                researcher: m.researcher.clone(),
                round: st.round,
                commit: m.found.into(),
                expected: m.expected.into(),
                subject: found.summary().unwrap_or("").to_string(),
                notes: vec![events::Note(note)],
            }),
            &format!(
                "{} moved by hand to {}; set aside",
                m.branch,
                &m.found.to_string()[..10]
            ),
            vec![],
        )?;
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!(
                "warning: branch {} was moved by hand to {}; set aside as a recorded attempt (event branch.set_aside, kept reachable from {}) and put back at {}\n",
                m.branch,
                &m.found.to_string()[..10],
                self.refs.attempts(),
                &m.expected.to_string()[..10]
            ),
        );
        self.move_branch(
            &format!("refs/heads/{}", m.branch),
            &m.expected.to_string(),
            Some(&m.found.to_string()),
        )?;
        Ok(found.tree_id())
    }

    /// A run killed while git wrote a worktree's index or HEAD, or one of this conference's refs,
    /// leaves its `.lock` file behind, and every later write fails with "locked". Only a runner
    /// holding the conference's run lock calls this, so no live process owns those files.
    fn clear_stale_locks(&self) -> Result<()> {
        let repo = self.open_repo()?;
        let mut labels: Vec<String> = self
            .state()
            .researchers
            .keys()
            .map(|id| format!("researcher-{id}"))
            .collect();
        labels.extend(["best".to_string(), "review".to_string()]);
        for label in labels {
            let path = worktree::worktree_path(&repo, &self.name, &label);
            if let Ok(wt) = Repository::open(&path) {
                for file in ["index.lock", "HEAD.lock"] {
                    let _ = std::fs::remove_file(wt.path().join(file));
                }
            }
        }
        clear_stale_ref_locks(repo.commondir(), &self.name);
        clear_shared_locks(repo.commondir());
        Ok(())
    }

    /// Notes are written after their event, in batches; a kill in between leaves notes missing,
    /// and evaluation cache entries not yet in the state tree. A live process writes both before
    /// it records `round.completed`, and a resume replays them before it records
    /// `conference.resumed`: only events after the latest of those two can lack them, so the
    /// walk stops there (resume cost does not grow with the log).
    ///
    /// Notes commits also say up to which event everything is written ("noted through", see
    /// `Recorder::flush_notes`): the walk stops there too, so it covers at most a batch of events
    /// even in a long round.
    fn replay_missing_notes(&self) -> Result<()> {
        let mut rec = self.recorder.lock().unwrap();
        let mut pending: Vec<(Oid, String)> = Vec::new();
        let mut cache: Vec<(String, Vec<u8>)> = Vec::new();
        let settings = rec.state.eval_settings.clone();
        let noted_through = notes::noted_through(&rec.repo, &self.name)?;
        // No mark of this conference in the notes: they were deleted (or never marked), so the
        // checkpoints below prove nothing and every event's notes are replayed.
        let whole_log = noted_through.is_none();
        rec.log.walk(&rec.repo, |e| {
            if Some(e.commit) == noted_through
                || (!whole_log
                    && matches!(
                        e.event.event.as_str(),
                        events::names::ROUND_COMPLETED | events::names::RESUMED
                    ))
            {
                return false;
            }
            pending.extend(recorder::notes_of_line(&e.event));
            cache.extend(research::cached_evaluation_of_event(&e.event, &settings));
            true
        })?;
        // Oldest first, so that a later result for the same tree wins, as it did when recorded.
        for (path, bytes) in cache.into_iter().rev() {
            if rec.log.read(&rec.repo, &path)?.is_none() {
                rec.pending_cache.insert(path, bytes);
            }
        }
        let mut missing = Vec::new();
        for (commit, line) in pending {
            let present = notes::read_note(&rec.repo, commit)?
                .map(|n| n.lines().any(|l| l == line))
                .unwrap_or(false);
            if !present && rec.repo.find_commit(commit).is_ok() {
                missing.push((commit, line));
            }
        }
        missing.reverse();
        // After a whole-log replay, a mark keeps the next resume's walk to a batch.
        let marker = match rec.log.tip() {
            Some(through) if whole_log && rec.pending_cache.is_empty() => Some(notes::Marker {
                name: &self.name,
                through,
                force: true,
            }),
            _ => None,
        };
        notes::append_lines(&rec.repo, &missing, marker)?;
        Ok(())
    }

    /// `CONFERENCE_*` variables for agents and evaluations.
    pub fn context_env(
        &self,
        researcher: &str,
        round: u32,
        iteration: u32,
        best: Option<f64>,
    ) -> Vec<(String, String)> {
        let mut env = vec![
            ("CONFERENCE_NAME".into(), self.name.clone()),
            ("CONFERENCE_RESEARCHER".into(), researcher.to_string()),
            ("CONFERENCE_ROUND".into(), round.to_string()),
            ("CONFERENCE_ITERATION".into(), iteration.to_string()),
            (
                "CONFERENCE_BEST_METRIC".into(),
                best.map(|b| b.to_string()).unwrap_or_default(),
            ),
            (
                "CONFERENCE_METRIC".into(),
                evaluate::metric_name(&self.config),
            ),
            (
                "CONFERENCE_DIRECTION".into(),
                self.config
                    .metric
                    .as_ref()
                    .map(|m| format!("{:?}", m.direction).to_lowercase())
                    .unwrap_or_else(|| "maximize".into()),
            ),
        ];
        // Evaluations get their device from their slot (see `schedule`); anything else none.
        env.extend(self.scheduler.no_device_env());
        env
    }

    /// The log file prefix for a step (`<run-dir>/logs/<what>`).
    pub fn log_path(&self, what: &str) -> PathBuf {
        self.run_dir.join("logs").join(what)
    }
}

/// Removes lock files left on the refs of conference `name` by a killed run. Call it only with
/// the conference's run lock held (no live process of this conference writes them then).
pub fn clear_stale_ref_locks(common_dir: &Path, name: &str) {
    for prefix in [
        format!("refs/conference/{name}"),
        format!("refs/heads/conference/{name}"),
    ] {
        remove_lock_files(&common_dir.join(prefix));
    }
}

/// Removes the lock files a killed process left on the refs `names` (each a ref, or a folder of
/// refs, under the common dir) that only the caller writes: call it only holding the lock that
/// keeps every other writer of them out (a killed `git conference fetch`, or the `git fetch` it
/// ran, leaves them on its tracking refs, and every later fetch would fail on them).
pub fn clear_stale_locks_of(common_dir: &Path, names: &[&str]) {
    for name in names {
        let path = common_dir.join(name);
        remove_lock_files(&path);
        let _ = std::fs::remove_file(common_dir.join(format!("{name}.lock")));
    }
}

/// The lock files every git process of the repository shares that a conference writes through:
/// the notes ref and `packed-refs` (see [`clear_shared_lock`]).
pub fn clear_shared_locks(common_dir: &Path) {
    for shared in ["refs/notes/conference.lock", "packed-refs.lock"] {
        clear_shared_lock(&common_dir.join(shared));
    }
}

/// A lock file shared with every git process of the repository (`packed-refs.lock`): a live
/// writer holds it for an instant, so a fresh one is waited for until it goes or turns a second
/// old (its age is read from the file, so one left long ago by a killed run costs nothing). One
/// that a live process has open is never removed, however old: it is named and left alone.
fn clear_shared_lock(path: &Path) {
    let deadline = std::time::Instant::now() + STALE_LOCK_AGE;
    while let Ok(meta) = std::fs::metadata(path) {
        let age = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .unwrap_or_default();
        if age >= STALE_LOCK_AGE || std::time::Instant::now() >= deadline {
            let holders = crate::lock::processes_holding(path);
            match holders.first() {
                None => {
                    let _ = std::fs::remove_file(path);
                }
                Some((pid, name)) => crate::errln!(
                    "warning: {} is held by process {pid} ({name}); left alone (git commands that rewrite packed refs wait for it)",
                    path.display()
                ),
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Removes `*.lock` files under `dir` (recursively); a missing folder is fine.
fn remove_lock_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            remove_lock_files(&path);
        } else if path.extension().is_some_and(|e| e == "lock") {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A conference branch that points where the event log does not put it.
struct MovedBranch {
    /// Short name, e.g. `conference/x/researcher-A`.
    branch: String,
    researcher: Option<String>,
    found: Oid,
    expected: Oid,
}

/// The error that stops a resume on hand-moved branches: which, where, and how to go on.
fn moved_branches_error(repo: &Repository, name: &str, moved: &[MovedBranch]) -> anyhow::Error {
    let mut text = format!(
        "conference `{name}`: {} moved outside the conference; nothing was changed.\n",
        if moved.len() == 1 {
            "a branch was"
        } else {
            "branches were"
        }
    );
    for m in moved {
        let subject = repo
            .find_commit(m.found)
            .ok()
            .and_then(|c| c.summary().map(|s| format!(" (\"{s}\")")))
            .unwrap_or_default();
        text.push_str(&format!(
            "  {} points to {}{subject}, but the event log expects {}\n",
            m.branch,
            &m.found.to_string()[..10],
            &m.expected.to_string()[..10]
        ));
    }
    text.push_str(&format!(
        "To go on, either let resume record those commits as set-aside attempts (kept reachable, \
         with a note) and put the branches back:\n  git conference resume {name} --force\n\
         or keep the work on a branch of your own and put the branches back yourself:\n"
    ));
    for (i, m) in moved.iter().enumerate() {
        let keep = if moved.len() == 1 {
            "my-work".to_string()
        } else {
            format!("my-work-{}", i + 1)
        };
        text.push_str(&format!("  git branch {keep} {}\n", m.found));
        text.push_str(&format!(
            "  git update-ref refs/heads/{} {} {}\n",
            m.branch, m.expected, m.found
        ));
    }
    anyhow::anyhow!(text.trim_end().to_string())
}

/// Whether the program itself moved `refname` to `found` (its reflog's newest entry says so):
/// a step whose event git lost (see `store::recovery`), put back where the state says, not a
/// move by hand.
fn moved_there_by_the_program(repo: &Repository, refname: &str, found: Oid) -> bool {
    repo.reflog(refname).is_ok_and(|log| {
        log.get(0).is_some_and(|newest| {
            newest.id_new() == found && newest.message() == Some(PROGRAM_REFLOG_MESSAGE)
        })
    })
}

/// The reflog message of every branch move the program makes.
const PROGRAM_REFLOG_MESSAGE: &str = "git conference";

/// The state `conference.started` stores: every researcher at `base`, nothing measured yet.
fn initial_state(name: &str, config: &Config, base: Oid, now: &str) -> State {
    let base = base.to_string();
    let researcher = state::ResearcherState {
        head: base.clone(),
        best_metric: None,
        round_start: base.clone(),
        round_start_metric: None,
        round_iterations: 0,
        round_finished: None,
        counts: Default::default(),
        round_counts: Default::default(),
        consecutive_fails: 0,
        stuck_level: 0,
        attempts: 0,
        last_verdict: None,
        last_reason: None,
        respawned: false,
        spend: Default::default(),
        agent_seconds: 0.0,
        eval_seconds: 0.0,
    };
    State {
        name: name.to_string(),
        status: crate::model::RunStatus::Running.into(),
        phase: Phase::Between,
        round: 0,
        baseline_commit: base.clone(),
        baseline_metric: None,
        baseline_runs: Vec::new(),
        best: state::Best {
            commit: base,
            metric: None,
            researcher: None,
            round: 0,
        },
        researchers: (config.researcher_ids().into_iter())
            .map(|id| (id, researcher.clone()))
            .collect(),
        total_iterations: 0,
        started_at: now.to_string(),
        updated_at: now.to_string(),
        started_unix: now_unix(),
        events: 1,
        last_event: events::names::STARTED.into(),
        round_bests: vec![],
        plateau_rounds: 0,
        high_score_rounds: 0,
        stalled_rounds: 0,
        final_status: None,
        stop_reason: None,
        shared_knowledge: config.shared_knowledge.clone(),
        eval_settings: evaluate::settings_hash(
            config.eval_command(),
            config.evaluation.repeats,
            config.evaluation.timeout,
            &evaluate::metric_name(config),
        ),
        transfer_done: vec![],
        noisy_evaluation: None,
        paused_at_round: 0,
        spend: Default::default(),
        round_spend: vec![],
        stopped_seconds: 0,
        recorded_running_seconds: Some(0.0),
        knowledge_brief: None,
        machines: Default::default(),
        guidance: vec![],
        questions: vec![],
        requests: vec![],
        stop_requested: false,
        waiting: None,
        pauses: vec![],
        approvals: vec![],
        stall_paused_round: 0,
    }
}
