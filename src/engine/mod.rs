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
pub mod driver;
pub mod evaluate;
pub mod paths;
pub mod prompt;
pub mod prose;
pub mod research;
pub mod review;
pub mod state;
pub mod stop;
pub mod synthesis;
pub mod transfer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};
use serde_json::{json, Value};

use crate::config::Config;
use crate::git::{snapshot, worktree};
use crate::hooks::Hooks;
use crate::store::{self, notes, ConferenceRefs, Event, EventLog, StateChange};
use crate::ui::Ui;
use state::{files, Phase, State};

/// How a run of the engine ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// converged / budget_stop / stalled
    Completed(String),
    Paused,
    Interrupted,
}

/// Shared, lock-protected recording side of the engine.
pub struct Recorder {
    pub repo: Repository,
    pub log: EventLog,
    pub state: State,
    hooks: Hooks,
    /// Note lines of recorded events not written yet: notes go out in batches (one notes commit
    /// for many attempts). Every note is also in its event's payload, so none is lost to a kill.
    pending_notes: Vec<(Oid, String)>,
    notes_flushed: std::time::Instant,
    /// Evaluation cache entries (`evaluations/…`) not in the state tree yet: they join the next
    /// event that writes a batch, not each iteration's (four objects fewer per iteration). Within
    /// a run `Conference::evaluations` serves them; after a kill `reconcile` rebuilds them from
    /// the iteration events, which carry each result.
    pending_cache: std::collections::BTreeMap<String, Vec<u8>>,
}

/// Events before which every pending note must be written: `reconcile` replays notes only back
/// to the latest of these.
const NOTE_CHECKPOINTS: &[&str] = &[
    "round.completed",
    "conference.resumed",
    "conference.completed",
];
/// Pending notes are written at least this often while researchers iterate.
const NOTES_MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

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
}

/// Current time as the seed's ISO-8601 timestamp.
pub fn now_iso() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
        .split('.')
        .next()
        .map(|s| {
            if s.ends_with('Z') {
                s.to_string()
            } else {
                format!("{s}Z")
            }
        })
        .unwrap_or_default()
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Conference {
    /// Opens an existing conference from its refs.
    pub fn open(repo_dir: &Path, name: &str, ui: Ui) -> Result<Conference> {
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
        Self::assemble(repo, log, state, config, config_text, ui)
    }

    fn assemble(
        repo: Repository,
        log: EventLog,
        state: State,
        config: Config,
        config_text: String,
        ui: Ui,
    ) -> Result<Conference> {
        let name = state.name.clone();
        let repo_dir = repo.commondir().to_path_buf();
        let run_dir = worktree::run_dir(&repo, &name);
        std::fs::create_dir_all(run_dir.join("logs"))?;
        let baseline = repo
            .find_commit(git2::Oid::from_str(&state.baseline_commit)?)?
            .tree()?;
        let exists = |p: &str| baseline.get_path(Path::new(p)).is_ok();
        let guard = paths::Guard::new(&config, &exists);
        drop(baseline);
        let hooks = Hooks::new(&repo);
        Ok(Conference {
            name: name.clone(),
            repo_dir,
            run_dir,
            refs: ConferenceRefs::new(&name),
            guard,
            config,
            config_text,
            recorder: Arc::new(Mutex::new(Recorder {
                repo,
                log,
                state,
                hooks,
                pending_notes: Vec::new(),
                notes_flushed: std::time::Instant::now(),
                pending_cache: Default::default(),
            })),
            ui,
            evaluations: Mutex::new(Default::default()),
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
        let base_hex = base.to_string();
        let researchers = config
            .researcher_ids()
            .into_iter()
            .map(|id| {
                (
                    id,
                    state::ResearcherState {
                        head: base_hex.clone(),
                        best_metric: None,
                        round_start: base_hex.clone(),
                        round_start_metric: None,
                        round_iterations: 0,
                        round_finished: None,
                        counts: Default::default(),
                        round_counts: Default::default(),
                        consecutive_fails: 0,
                        stuck_level: 0,
                        attempts: 0,
                        last_verdict: None,
                        respawned: false,
                    },
                )
            })
            .collect();
        let metric = evaluate::metric_name(&config);
        let now = now_iso();
        let state = State {
            name: name.to_string(),
            status: "running".into(),
            phase: Phase::Between,
            round: 0,
            baseline_commit: base_hex.clone(),
            baseline_metric: None,
            baseline_runs: Vec::new(),
            best: state::Best {
                commit: base_hex,
                metric: None,
                researcher: None,
                round: 0,
            },
            researchers,
            total_iterations: 0,
            started_at: now.clone(),
            updated_at: now.clone(),
            started_unix: now_unix(),
            events: 1,
            last_event: "conference.started".into(),
            round_bests: vec![],
            plateau_rounds: 0,
            high_score_rounds: 0,
            final_status: None,
            stop_reason: None,
            shared_knowledge: config.shared_knowledge.clone(),
            eval_settings: evaluate::settings_hash(
                config.eval_command(),
                config.evaluation.repeats,
                config.evaluation.timeout,
                &metric,
            ),
            transfer_done: vec![],
            paused_at_round: 0,
        };
        let payload = json!({
            "researchers": config.count,
            "mode": config.mode,
            "goal": config.goal,
            "config_summary": format!(
                "{} researchers x {} iterations/round, max {} rounds, metric {}",
                config.count, config.iterations_per_round, config.max_rounds, metric
            ),
            "base": base.to_string(),
        });
        let event = Event {
            event: "conference.started".into(),
            timestamp: now,
            payload,
        };
        let changes = vec![
            StateChange::Put(files::CONFIG.into(), config_text.clone().into_bytes()),
            StateChange::Put(files::STATE.into(), serde_json::to_vec_pretty(&state)?),
        ];
        let summary = format!("{} ({} researchers)", config.title, config.count);
        log.append(&repo, &event, &summary, &changes)?;
        let conf = Self::assemble(repo, log, state, config, config_text, ui)?;
        conf.recorder.lock().unwrap().run_hook(&event);
        Ok(conf)
    }

    /// A copy of the current state.
    pub fn state(&self) -> State {
        self.recorder.lock().unwrap().state.clone()
    }

    /// Records an event: `update` changes the state and returns extra state-tree changes. The
    /// event commit is the commit point; the in-memory state changes only once it is written.
    pub fn record(
        &self,
        event: &str,
        summary: &str,
        payload: Value,
        update: impl FnOnce(&mut State, &Recorder) -> Result<Vec<StateChange>>,
    ) -> Result<()> {
        let mut rec = self.recorder.lock().unwrap();
        let mut next = rec.state.clone();
        let changes = update(&mut next, &rec)?;
        // Between iterations notes and cache entries wait for a batch; any other step (and an
        // iteration once the batch is old enough) writes them out.
        let between_iterations = matches!(event, "researcher.iteration" | "researcher.stuck");
        let batch_due = !between_iterations || rec.notes_flushed.elapsed() >= NOTES_MAX_DELAY;
        let (cache, mut changes): (Vec<_>, Vec<_>) = changes.into_iter().partition(
            |c| matches!(c, StateChange::Put(path, _) if path.starts_with(files::EVAL_CACHE_DIR)),
        );
        rec.pending_cache
            .extend(cache.into_iter().filter_map(|c| match c {
                StateChange::Put(path, bytes) => Some((path, bytes)),
                StateChange::Remove(_) => None,
            }));
        if batch_due {
            let batch = std::mem::take(&mut rec.pending_cache);
            changes.extend(batch.into_iter().map(|(p, b)| StateChange::Put(p, b)));
        }
        let timestamp = now_iso();
        next.events += 1;
        next.last_event = event.to_string();
        next.updated_at = timestamp.clone();
        changes.push(StateChange::Put(
            files::STATE.into(),
            serde_json::to_vec_pretty(&next)?,
        ));
        let ev = Event {
            event: event.to_string(),
            timestamp,
            payload,
        };
        if NOTE_CHECKPOINTS.contains(&event) {
            rec.flush_notes()?;
        }
        let Recorder { repo, log, .. } = &mut *rec;
        log.append(repo, &ev, summary, &changes)?;
        rec.state = next;
        rec.run_hook(&ev);
        if !between_iterations {
            rec.flush_notes()?;
        }
        Ok(())
    }

    /// Reads a file of the current state tree.
    pub fn read_state_file(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let rec = self.recorder.lock().unwrap();
        if let Some(bytes) = rec.pending_cache.get(path) {
            return Ok(Some(bytes.clone()));
        }
        rec.log.read(&rec.repo, path)
    }

    /// Writes notes (one JSON line each) on snapshot commits.
    pub fn note(&self, entries: &[(Oid, Value)]) -> Result<()> {
        let mut rec = self.recorder.lock().unwrap();
        rec.pending_notes
            .extend(entries.iter().map(|(c, v)| (*c, v.to_string())));
        if rec.notes_flushed.elapsed() >= NOTES_MAX_DELAY {
            rec.flush_notes()?;
        }
        Ok(())
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
        store::events::cas_update(&rec.repo, refname, new, expected, "git conference")
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
        let wt = Repository::open(&path)?;
        let head_ref = branch.map(|b| format!("refs/heads/{b}"));
        snapshot::reset(&wt, oid, head_ref.as_deref())?;
        Ok(path)
    }

    /// Brings branches, notes and worktrees in line with the recorded state (after a crash, a
    /// kill, or on a fresh clone). Partial work found in a worktree is recorded, never dropped.
    pub fn reconcile(&self) -> Result<Vec<String>> {
        let st = self.state();
        let mut reverted = Vec::new();
        self.clear_stale_locks()?;
        for (id, r) in &st.researchers {
            self.move_branch(&self.refs.researcher(id), &r.head, None)?;
            let branch = self.refs.researcher_branch(id);
            let label = format!("researcher-{id}");
            let repo = self.open_repo()?;
            let path = worktree::worktree_path(&repo, &self.name, &label);
            if path.join(".git").exists() || path.exists() {
                let _ = worktree::repair_gitfile(&repo, &path);
            }
            if let Ok(wt) = Repository::open(&path) {
                // Partial work, or changes made by hand in any phase: recorded, never dropped.
                if let Some(commit) = research::set_aside_partial(self, id, &wt)? {
                    reverted.push(format!("{id}:{commit}"));
                }
            }
            self.prepare_worktree(&label, Some(&branch), &r.head)?;
        }
        self.move_branch(&self.refs.best(), &st.best.commit, None)?;
        self.replay_missing_notes()?;
        Ok(reverted)
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
        // Shared with other conferences of the repository: a live writer holds these for an
        // instant, so only a lock that stays for a second is stale.
        for shared in ["refs/notes/conference.lock", "packed-refs.lock"] {
            let path = repo.commondir().join(shared);
            let mut waits = 0;
            while path.exists() && waits < 20 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                waits += 1;
            }
            if waits == 20 {
                let _ = std::fs::remove_file(&path);
            }
        }
        Ok(())
    }

    /// Notes are written after their event, in batches; a kill in between leaves notes missing,
    /// and evaluation cache entries not yet in the state tree. A live process writes both before
    /// it records `round.completed`, and a resume replays them before it records
    /// `conference.resumed`: only events after the latest of those two can lack them, so the
    /// walk stops there (resume cost does not grow with the log).
    fn replay_missing_notes(&self) -> Result<()> {
        let mut rec = self.recorder.lock().unwrap();
        let mut pending: Vec<(Oid, String)> = Vec::new();
        let mut cache: Vec<(String, Vec<u8>)> = Vec::new();
        let settings = rec.state.eval_settings.clone();
        rec.log.walk(&rec.repo, |e| {
            if matches!(
                e.event.event.as_str(),
                "round.completed" | "conference.resumed"
            ) {
                return false;
            }
            pending.extend(notes_of_event(&e.event));
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
        notes::append_lines(&rec.repo, &missing)
    }

    /// `CONFERENCE_*` variables for agents and evaluations.
    pub fn context_env(
        &self,
        researcher: &str,
        round: u32,
        iteration: u32,
        best: Option<f64>,
    ) -> Vec<(String, String)> {
        vec![
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
        ]
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

/// The note lines an event implies: (snapshot commit, JSON line).
pub fn notes_of_event(event: &Event) -> Vec<(Oid, String)> {
    let Some(notes) = event.payload.get("notes").and_then(|n| n.as_array()) else {
        return vec![];
    };
    notes
        .iter()
        .filter_map(|n| {
            let commit = n.get("commit")?.as_str()?;
            Some((Oid::from_str(commit).ok()?, n.to_string()))
        })
        .collect()
}

impl Recorder {
    fn flush_notes(&mut self) -> Result<()> {
        if !self.pending_notes.is_empty() {
            notes::append_lines(&self.repo, &self.pending_notes)?;
            self.pending_notes.clear();
        }
        self.notes_flushed = std::time::Instant::now();
        Ok(())
    }

    fn run_hook(&mut self, event: &Event) {
        self.hooks.run(&self.state.name, event);
    }

    /// Waits (bounded) for hooks still running, before the program exits.
    pub fn finish_hooks(&mut self) {
        self.hooks.finish();
    }
}
