//! The conference engine: runs the protocol of seed 000 as a state machine over the event log.
//!
//! `Conference` holds the stored config and the current [`state::State`]. Every step ends by
//! recording one event (the commit point); effects that follow from an event (moving a branch,
//! writing a note, resetting a worktree) are re-derived from the state by [`record::recovery::reconcile`]
//! whenever a run starts, so a kill at any instant loses nothing and repeats nothing.
//!
//! Phases live in their own files: `research` (phase 1), `review` (poster session and peer
//! review), `transfer` (knowledge transfer), `stop` (stop rules), `synthesis` (report).

pub mod agent;
pub mod commands;
pub mod machines;
pub mod measure;
pub mod phases;
pub mod record;
pub mod run;
pub mod stop;
/// The path rules live beside the config (`config::paths`); engine code keeps its old path.
pub use crate::config::paths;
/// The state is model data (`model::state`); engine code keeps its old path.
pub use crate::model::state;
/// The noise rules are pure (`protocol::noise`); engine code keeps its old path.
pub use crate::protocol::noise;
/// How a failure's reason is worded for people is a page's concern (`render::reasons`).
pub use crate::render::reasons;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

use crate::config::Config;
use crate::git::{snapshot, worktree};
use crate::hooks::Hooks;
use crate::model::event::{self as events, Event};
use crate::model::CommitId;
use crate::remote::link::Link;
use crate::store::{self, ConferenceRefs, EventLog, StateChange};
use crate::ui::Ui;
pub use record::recorder::Recorder;
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

/// How long a sync with the shared remote waits for this machine's publications to go out.
const SYNC_WAITS_FOR_PUBLICATION: std::time::Duration = std::time::Duration::from_secs(10);

/// An open conference: its configuration, its refs, the recorder every event goes through,
/// and what one run shares between its researchers. The fields are the engine's own; the
/// layers above read what they need through the accessors below.
pub struct Conference {
    name: String,
    repo_dir: PathBuf,
    run_dir: PathBuf,
    config: Config,
    config_text: String,
    refs: ConferenceRefs,
    guard: paths::Guard,
    recorder: Arc<Mutex<Recorder>>,
    ui: Ui,
    /// Evaluations of this run by cache key, shared so a tree is measured once at a time.
    evaluations: Mutex<
        std::collections::HashMap<
            String,
            Arc<tokio::sync::OnceCell<measure::evaluate::EvalResult>>,
        >,
    >,
    /// Researcher worktrees between two research phases of this run, with the watch that has
    /// seen every change since they were left clean (see `phases::research::researcher_loop`).
    idle_worktrees:
        Mutex<std::collections::HashMap<String, phases::research::parked::IdleWorktree>>,
    /// Evaluation slots and devices (`## Environment`), shared by every evaluation of the run.
    scheduler: measure::schedule::Scheduler,
    /// Where evaluations run (`## Environment`'s launcher).
    launcher: crate::launch::Launcher,
    /// On several machines: the thread that publishes what is recorded (see `publisher`).
    publisher: Mutex<Option<machines::publisher::Publisher>>,
    /// On several machines: the conference's recorded running time when this run began to take
    /// part, and when, by this process's monotonic clock (see [`Conference::shared_since`]).
    shared_since: std::sync::OnceLock<(f64, std::time::Instant)>,
}

pub use crate::clock::{now_iso, now_unix};

/// What the layers above the engine (cli/, serve/) read of an open conference.
/// Why `start NAME` refuses a conference that exists, with the way on that works in its
/// situation: a conference whose baseline could not be measured goes on from the user's fixed
/// harness only with `--base HEAD` (plain `resume` measures the failing baseline again).
fn already_exists(repo: &Repository, log: &EventLog, name: &str) -> String {
    let unmeasured = log
        .read(repo, files::STATE)
        .ok()
        .flatten()
        .and_then(|bytes| record::stored::read(&bytes).ok())
        .is_some_and(|st| st.baseline_metric.is_none() && st.round == 0);
    let way_on = if unmeasured {
        format!(
            "its baseline could not be measured: once the harness is fixed and committed, continue it from your fix with `git conference resume {name} --base HEAD`"
        )
    } else {
        format!("continue it with `git conference resume {name}`")
    };
    format!(
        "conference `{name}` already exists; {way_on}, or remove it with `git conference clean --all {name}`"
    )
}

impl Conference {
    /// Whether a lower or a higher metric is better (None: judged without a metric).
    pub fn direction(&self) -> Option<crate::config::Direction> {
        self.config.metric.as_ref().map(|m| m.direction)
    }

    /// The conference's name (`git conference status <name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This run's folder under `.git/conference/<name>` (logs, locks, the inbox).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The configuration in force (the stored conference.md, validated).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The conference's ref names.
    pub fn refs(&self) -> &ConferenceRefs {
        &self.refs
    }

    /// The paths researchers may and may not change.
    pub fn guard(&self) -> &paths::Guard {
        &self.guard
    }
}

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
        let state = record::stored::parse(&state_bytes, name).map_err(|why| {
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
        let baseline = repo.find_commit(state.baseline_commit.oid())?.tree()?;
        let exists = |p: &str| baseline.get_path(Path::new(p)).is_ok();
        let guard = paths::Guard::new(&config, &exists);
        drop(baseline);
        let hooks = Hooks::new(&repo);
        let scheduler = match access {
            Access::Run => {
                measure::schedule::Scheduler::publishing(&config.environment, run_dir.clone())
            }
            Access::Read => measure::schedule::Scheduler::new(&config.environment),
        };
        let mut launcher = crate::launch::Launcher::new(&config.environment, &repo_dir, &run_dir);
        if config.evaluation.hardware_same {
            launcher = launcher.keep_to_one_class(None);
        }
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
            publisher: Mutex::new(None),
            shared_since: std::sync::OnceLock::new(),
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
            return Err(crate::error::usage(already_exists(&repo, &log, name)));
        }
        let now = now_iso();
        let state = initial_state(name, &config, base, &now);
        let metric = measure::evaluate::metric_name(&config);
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

    /// Runs this conference with other machines through `link` (see `engine::run::shared`): what it
    /// records from now on is published by a publisher of its own.
    pub fn share(&self, link: Arc<Link>) -> Result<()> {
        let arrivals = machines::arriving::Arrivals::new(self);
        link.check_arrivals_with(Box::new(move |repo, from, to| {
            arrivals.check(repo, from, to)
        }));
        let publisher = machines::publisher::Publisher::start(
            self.open_repo()?,
            self.recorder.clone(),
            link.clone(),
        );
        *self.publisher.lock().unwrap() = Some(publisher);
        self.recorder.lock().unwrap().link = Some(link);
        let _ = self
            .shared_since
            .set((self.state().running_seconds(), std::time::Instant::now()));
        Ok(())
    }

    /// On several machines: the running time recorded when this run began to take part, and
    /// when. No machine runs longer than the time since, so the running time counted against
    /// the time budget is never more than their sum, whatever `running_s` another machine's
    /// events claim (`stop::rules::running_seconds`).
    pub fn shared_since(&self) -> Option<(f64, std::time::Instant)> {
        self.shared_since.get().copied()
    }

    /// Publishes what was recorded and not published yet, and stops the publisher (before this
    /// machine gives its leases back).
    pub fn finish_publishing(&self) {
        let publisher = self.publisher.lock().unwrap().take();
        if let Some(publisher) = publisher {
            publisher.finish();
        }
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
        let Some(link) = self.link() else {
            return Ok(false);
        };
        // What this machine recorded goes out first (outside the recorder's lock): a sync over
        // unpublished events takes nothing of the remote's (see `Link::sync`).
        link.flush_publications(SYNC_WAITS_FOR_PUBLICATION);
        let mut rec = self.recorder.lock().unwrap();
        match link.sync(&rec.repo)? {
            Some(_) => {
                rec.reload()?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The event that the state read here follows (None: no event yet).
    pub fn events_tip(&self) -> Option<Oid> {
        self.recorder.lock().unwrap().log.tip()
    }

    /// Reads a file of the current state tree.
    pub fn read_state_file(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let rec = self.recorder.lock().unwrap();
        if let Some(bytes) = rec.pending_cache.get(path) {
            return Ok(Some(bytes.clone()));
        }
        rec.log.read(&rec.repo, path)
    }

    /// The blobs that hold the records file `path` of the current state, in order (see
    /// `store::events::record_blobs`).
    pub fn record_blob_ids(&self, path: &str) -> Result<Vec<Oid>> {
        let rec = self.recorder.lock().unwrap();
        match rec.log.state_tree(&rec.repo)? {
            Some(tree) => store::events::record_blobs(&rec.repo, tree, path),
            None => Ok(Vec::new()),
        }
    }

    /// A blob's bytes.
    pub fn read_blob(&self, id: Oid) -> Result<Vec<u8>> {
        let rec = self.recorder.lock().unwrap();
        let bytes = rec.repo.find_blob(id)?.content().to_vec();
        Ok(bytes)
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
        let root = (self.config.branching.is_on()).then(|| rec.state.baseline_commit.oid());
        store::keep_reachable(&rec.repo, &self.refs, commits, root)
    }

    /// Moves a branch to `new`, from whatever it points at now if `expected` is None.
    pub fn move_branch(
        &self,
        refname: &str,
        new: &CommitId,
        expected: Option<&CommitId>,
    ) -> Result<()> {
        let rec = self.recorder.lock().unwrap();
        let new = new.oid();
        let current = rec
            .repo
            .find_reference(refname)
            .ok()
            .and_then(|r| r.target());
        if current == Some(new) {
            return Ok(());
        }
        let expected = match expected {
            Some(e) => Some(e.oid()),
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
        commit: &CommitId,
    ) -> Result<PathBuf> {
        let repo = self.open_repo()?;
        let oid = commit.oid();
        let checkout = match branch {
            Some(b) => worktree::Checkout::Branch(b),
            None => worktree::Checkout::Detached(oid),
        };
        let path = worktree::ensure(&repo, &self.name, label, checkout)?;
        worktree::repair_gitfile(&repo, &path)?;
        let wt = agent::workspace::open_worktree(self, &path)?;
        let head_ref = branch.map(|b| format!("refs/heads/{b}"));
        snapshot::reset(&wt, oid, head_ref.as_deref())?;
        agent::workspace::link_shared(self, &path)?;
        Ok(path)
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
                measure::evaluate::metric_name(&self.config),
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

    /// The log file prefix for a step (`<run-dir>/logs/<what>`); old iterations' logs are
    /// pruned now and then (`run_logs`).
    pub fn log_path(&self, what: &str) -> PathBuf {
        let dir = self.run_dir.join("logs");
        record::run_logs::maybe_prune(&dir);
        dir.join(what)
    }
}

/// The reflog message of every branch move the program makes.
const PROGRAM_REFLOG_MESSAGE: &str = "git conference";

/// The state `conference.started` stores: every researcher at `base`, nothing measured yet.
fn initial_state(name: &str, config: &Config, base: Oid, now: &str) -> State {
    let base = CommitId::from(base);
    let researcher = state::ResearcherState::at(base.clone());
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
        sweeps: None,
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
        eval_settings: measure::evaluate::settings_hash(
            config.eval_command(),
            config.evaluation.repeats,
            config.evaluation.timeout,
            &measure::evaluate::metric_name(config),
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
        voided: Vec::new(),
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
