//! Grows a real conference to many attempts cheaply: rounds of `researcher.iteration` events,
//! each with its attempt's line in the round's attempts file and the state the reducer makes of
//! it, written as event commits by the store's own `write_commit` (the stored form the engine
//! records) — chained in one go, the events ref moved once at the end, with no agent or
//! evaluation run. Each attempt names a real commit (its researcher's head), so its diff and
//! note can be served.
//!
//! Shared by the test of `serve` at 10,000 attempts and the benchmark helper
//! (`benches/serve_attempts.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use git2::{Oid, Repository};
use git_conference::engine::state::{files, State};
use git_conference::model::event::{self as events, Event};
use git_conference::model::{AttemptRecord, CommitId, Verdict};
use git_conference::store::{events::write_commit, ConferenceRefs, EventLog, StateChange};

/// The log being grown: its tip and the state at it.
struct Growing {
    repo: Repository,
    tip: Option<Oid>,
    state: State,
}

impl Growing {
    /// Writes `event` (with the state after it and `changes`) on top of the tip.
    fn record(&mut self, event: Event, summary: &str, mut changes: Vec<StateChange>) {
        let timestamp = git_conference::clock::now_iso();
        event.apply(&mut self.state);
        self.state
            .count_event(&event, &timestamp, None, Some(0.001));
        let state = serde_json::to_vec_pretty(&self.state).expect("state");
        changes.push(StateChange::Put(files::STATE.into(), state));
        let line = event.line(timestamp);
        let commit = write_commit(&self.repo, self.tip, &line, summary, &changes).expect("commit");
        self.tip = Some(commit);
    }
}

/// Adds `rounds` rounds of `per_round` attempts (researchers in turn) to conference `name`;
/// with `own_commits` each attempt is a commit of its own (a child of its researcher's head,
/// with the attempt's trailer), so that each is a node of the attempt tree.
pub fn grow(repo_dir: &Path, name: &str, rounds: u32, per_round: u32, own_commits: bool) {
    let repo = Repository::open(repo_dir).expect("a repository");
    let refs = ConferenceRefs::new(name);
    let log = EventLog::open(&repo, refs.clone()).expect("its log");
    let state = log
        .read(&repo, files::STATE)
        .expect("read")
        .expect("a state");
    let mut g = Growing {
        tip: log.tip(),
        state: serde_json::from_slice(&state).expect("a state"),
        repo,
    };
    let ids: Vec<String> = g.state.researchers.keys().cloned().collect();
    for _ in 0..rounds {
        let round = g.state.round + 1;
        let heads: BTreeMap<String, CommitId> = g
            .state
            .researchers
            .iter()
            .map(|(id, r)| (id.clone(), r.head.clone()))
            .collect();
        let best = g.state.best.clone();
        let started = Event::RoundStarted(events::RoundStarted {
            round,
            researcher_states: vec![],
            endgame: false,
            best_metric: best.metric,
            best_commit: best.commit.clone(),
            heads: heads.clone(),
            branches: Default::default(),
        });
        g.record(started, &format!("round {round}"), vec![]);
        for i in 0..per_round {
            let id = &ids[i as usize % ids.len()];
            let iteration = i / ids.len() as u32 + 1;
            let commit = match own_commits {
                true => own_commit(&g.repo, heads[id].oid(), id, round, iteration),
                false => heads[id].to_string(),
            };
            let (event, line) = attempt(round, iteration, id, commit);
            g.record(
                event,
                &format!("{id} r{round} i{iteration} reverted"),
                vec![line],
            );
        }
        let completed = Event::RoundCompleted(events::RoundCompleted {
            round,
            best_metric: best.metric,
            best_researcher: best.researcher,
            best_commit: best.commit,
            converged: false,
            shared_knowledge_added: vec![],
            streaks: Default::default(),
        });
        g.record(completed, &format!("round {round} done"), vec![]);
    }
    let tip = g.tip.expect("events");
    g.repo
        .reference(&refs.events(), tip, true, "grown for a benchmark")
        .expect("move the events ref");
}

/// A commit for attempt `id`-r`round`-i`iteration` on `parent`: the same files, the trailer
/// the engine writes.
fn own_commit(repo: &Repository, parent: Oid, id: &str, round: u32, iteration: u32) -> String {
    let parent = repo.find_commit(parent).expect("the head");
    let who = git2::Signature::now("Bench", "bench@example.com").expect("a signature");
    let message = format!(
        "synthetic attempt {iteration} of round {round}\n\nResearcher {id} · round {round} · iteration {iteration}\n"
    );
    let tree = parent.tree().expect("its tree");
    let commit = repo
        .commit(None, &who, &who, &message, &tree, &[&parent])
        .expect("a commit");
    commit.to_string()
}

/// One reverted attempt of researcher `id`: its event and its line of the attempts file.
fn attempt(round: u32, iteration: u32, id: &str, commit: String) -> (Event, StateChange) {
    let metric = 100.0 + f64::from(iteration % 17);
    let description = format!("synthetic attempt {iteration} of round {round}");
    let id_of_commit = CommitId::try_from(commit.clone()).expect("a commit");
    let record = AttemptRecord {
        round,
        researcher: id.to_string(),
        iteration,
        commit: Some(id_of_commit.clone()),
        tree: commit.clone(),
        metric: Some(metric),
        delta: Some(1.0),
        verdict: "reverted".into(),
        description: description.clone(),
        reason: None,
        timestamp: git_conference::clock::now_iso(),
        sub_metrics: Default::default(),
        tokens: None,
        cost_usd: None,
        agent_s: Some(0.01),
        eval_s: Some(0.01),
        placement: None,
        machine: None,
        sweep: None,
    };
    let event = Event::Iteration(events::Iteration {
        researcher: id.to_string(),
        round,
        iteration,
        metric_value: Some(metric),
        delta: Some("+1".into()),
        status: Verdict::Reverted.into(),
        commit: Some(id_of_commit),
        tree: commit,
        description,
        reason: None,
        sub_metrics: Default::default(),
        evaluated: true,
        notes: vec![],
        tokens: None,
        cost_usd: None,
        agent_s: Some(0.01),
        eval_s: Some(0.01),
        questions: vec![],
        placement: None,
        branch: None,
        sweep: None,
    });
    let line = StateChange::AppendLine(
        format!("{}/attempts.jsonl", files::round_dir(round)),
        serde_json::to_string(&record).expect("a record"),
    );
    (event, line)
}
