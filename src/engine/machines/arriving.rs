//! What other machines publish is input, like anything read from refs: a participant of a shared
//! conference can push any commit onto the event log. Before this machine follows the remote's
//! log (or replays its own events over it), every event that arrives must be one the conference
//! could have recorded:
//!
//! - it reads as a typed event (numbers in range), of a kind recorded while the conference runs
//!   on several machines (never a second start, a new baseline or new commands: only `resume`,
//!   on one machine, records those), by a validly named machine;
//! - its `state.json` is exactly what the reducer makes of the previous state and the event (so
//!   best and the researchers' heads move only as the events say), and is valid stored state;
//! - every head it moves (and best, the branches it opens, the node a researcher's next attempt
//!   starts from) exists and leaves the frozen paths as the baseline has them, so no evaluation
//!   harness of another machine's making ever runs here.
//!
//! The first event that fails is refused with the machine that published it and why.

use git2::{Oid, Repository};

use crate::config::paths::PathRules;
use crate::engine::record::stored;
use crate::model::event::{Event, CHAIR};
use crate::model::state::{files, State};
use crate::model::CommitId;
use crate::remote::link::{NotFollowed, Refusal};
use crate::store::events::{parse_event_commit, read_path};

/// What an arriving event is checked against: this conference's name and frozen paths.
#[derive(Clone)]
pub struct Arrivals {
    name: String,
    frozen: PathRules,
}

impl Arrivals {
    pub fn new(conf: &crate::engine::Conference) -> Arrivals {
        Arrivals {
            name: conf.name.clone(),
            frozen: conf.guard.frozen.clone(),
        }
    }

    /// Checks every event after `from` up to `to`, oldest first. An event the conference could
    /// not have recorded is skipped when a later `event.voided` voids it (checked in turn: it
    /// must void an event this check refuses, and keep the state before it); else the first
    /// such event is returned to void ([`NotFollowed::Voidable`], naming its machine and why),
    /// or the commit it names that has not arrived yet.
    pub fn check(&self, repo: &Repository, from: Oid, to: Oid) -> Result<(), NotFollowed> {
        let chain = chain(repo, from, to)?;
        let mut i = 0;
        while i < chain.len() {
            let commit = chain[i];
            let not_followed = match self.check_one(repo, commit, None) {
                Ok(()) => {
                    i += 1;
                    continue;
                }
                Err(e) => e,
            };
            let after = parent(repo, commit)?;
            let voiding = (i + 1..chain.len()).find(|&j| {
                voided_after(repo, chain[j]) == Some(after)
                    && self
                        .check_one(repo, chain[j], Some((commit, after)))
                        .is_ok()
            });
            match (voiding, not_followed) {
                (Some(j), _) => i = j + 1,
                (None, Fault::Refused(why)) => {
                    return Err(NotFollowed::Voidable(refusal(repo, commit, after, why)))
                }
                (None, Fault::Missing(what)) => {
                    return Err(NotFollowed::NotHereYet(refusal(repo, commit, after, what)))
                }
            }
        }
        Ok(())
    }

    /// Checks one event against the state before it: its parent's, or, for an event that voids
    /// `voids` = (the first voided event, the event before it), the latter's.
    fn check_one(
        &self,
        repo: &Repository,
        commit: Oid,
        voids: Option<(Oid, Oid)>,
    ) -> Result<(), Fault> {
        let c = repo
            .find_commit(commit)
            .map_err(|e| Fault::Refused(e.to_string()))?;
        let short = &crate::model::short_oid(commit);
        let logged = parse_event_commit(commit, c.message().unwrap_or("")).map_err(|e| {
            let message = c.message().unwrap_or("");
            Fault::Refused(format!(
                "event {short} ({}) published by {} cannot be read: {e:#}",
                message.lines().next().unwrap_or(""),
                summary_machine(message)
            ))
        })?;
        let machine = logged.event.machine();
        let who = match machine {
            Some(m) if crate::remote::valid_machine_name(m) => format!("machine `{m}`"),
            Some(m) => format!("a machine named `{}`", m.escape_debug()),
            None => "an unnamed machine".to_string(),
        };
        let refused = |why: String| {
            Fault::Refused(format!(
                "event {short} ({}) published by {who} is not one the conference could have recorded: {why}",
                logged.summary
            ))
        };
        if !machine.is_some_and(crate::remote::valid_machine_name) {
            return Err(refused("it names no valid machine".into()));
        }
        let event = Event::parse(&logged.event).ok_or_else(|| {
            refused(format!(
                "a {} event whose fields cannot be read",
                logged.event.event
            ))
        })?;
        match (&event, voids) {
            (
                Event::Started(_) | Event::Rebased(_) | Event::ConfigChanged(_) | Event::Imported(_),
                _,
            ) => {
                return Err(refused(format!(
                    "a {} event is recorded by `start`, `resume` or `import` on one machine, never while the conference runs on several",
                    event.name()
                )))
            }
            (Event::Voided(v), Some((first, after)))
                if v.event.oid() == first && v.after.oid() == after => {}
            (Event::Voided(_), _) => {
                return Err(refused(
                    "it voids events this machine follows (the conference could have recorded them)".into(),
                ))
            }
            (_, Some(_)) => return Err(refused("it voids nothing".into())),
            _ => {}
        }
        let parent = match voids {
            Some((_, after)) => after,
            None => c.parent_id(0).map_err(|e| refused(e.to_string()))?,
        };
        let before =
            state_of(repo, parent).map_err(|e| refused(format!("the state before it: {e}")))?;
        let after = state_of(repo, commit).map_err(refused)?;
        let event = with_unstored_fields(event, &before, &after);
        let running_s = logged.event.running_s();
        let expected = reduced(&before, &event, &logged.event.timestamp, machine, running_s)
            .ok_or_else(|| {
                refused(format!(
                    "researcher {} is not in the conference",
                    event.slot()
                ))
            })?;
        let mut differ = Vec::new();
        differences(&to_value(&expected), &to_value(&after), "", &mut differ);
        if !differ.is_empty() {
            return Err(refused(format!(
                "its state.json differs from what the event makes of the previous state at `{}`",
                differ.join("`, `")
            )));
        }
        stored::checked(after.clone(), &self.name).map_err(refused)?;
        super::cache_entries::check(repo, parent, commit, &before, &event).map_err(refused)?;
        match self.heads_keep_the_harness(repo, &before, &after) {
            Err(Harness::Missing(what)) => Err(Fault::Missing(format!(
                "{what}, which event {short} from {who} names"
            ))),
            Err(Harness::Changed(why)) => Err(refused(why)),
            Ok(()) => Ok(()),
        }
    }

    /// Every head `after` moves (and best), where `before` had another: it exists here and
    /// changes no frozen path from the baseline.
    fn heads_keep_the_harness(
        &self,
        repo: &Repository,
        before: &State,
        after: &State,
    ) -> Result<(), Harness> {
        let mut moved = Vec::new();
        for (id, r) in &after.researchers {
            let b = before.researchers.get(id);
            if b.map(|b| &b.head) != Some(&r.head) {
                moved.push((format!("researchers.{id}.head"), r.head.clone()));
            }
            // With branching on: the heads it opens and the node its next attempt starts from.
            for branch in &r.branches {
                if !b.is_some_and(|b| b.branches.iter().any(|o| o.head == branch.head)) {
                    moved.push((format!("researchers.{id}.branches"), branch.head.clone()));
                }
            }
            if let Some(next) = &r.next {
                if b.and_then(|b| b.next.as_ref()).map(|n| &n.commit) != Some(&next.commit) {
                    moved.push((format!("researchers.{id}.next"), next.commit.clone()));
                }
            }
        }
        if after.best.commit != before.best.commit {
            moved.push(("best.commit".to_string(), after.best.commit.clone()));
        }
        if moved.is_empty() {
            return Ok(());
        }
        let tree_of = |field: &str, id: &CommitId| -> Result<git2::Tree<'_>, Harness> {
            let missing = || Harness::Missing(format!("commit {id} ({field})"));
            repo.find_commit(id.oid())
                .and_then(|c| c.tree())
                .map_err(|_| missing())
        };
        let baseline = tree_of("baseline_commit", &after.baseline_commit)?;
        let published = self.published_commits(repo);
        for (field, id) in moved {
            let tree = tree_of(&field, &id)?;
            if !Self::published(repo, &published, before, after, &id) {
                return Err(Harness::Missing(format!(
                    "commit {id} ({field}) in a machine's attempts"
                )));
            }
            let diff = repo
                .diff_tree_to_tree(Some(&baseline), Some(&tree), None)
                .map_err(|e| Harness::Changed(e.to_string()))?;
            for delta in diff.deltas() {
                let path = delta.new_file().path().or(delta.old_file().path());
                let path = path.map(|p| p.to_string_lossy().into_owned());
                if let Some(pattern) = path
                    .as_deref()
                    .and_then(|p| self.frozen.matching_pattern(p))
                {
                    return Err(Harness::Changed(format!(
                        "{field} moves to {}, which changes frozen path {} (frozen: {pattern})",
                        &id[..id.len().min(10)],
                        path.unwrap_or_default()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The events after `from` up to `to`, oldest first; refused when they are not one chain.
fn chain(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<Oid>, NotFollowed> {
    let refuse = |why: String| NotFollowed::Refused(why);
    let mut chain = Vec::new();
    let mut at = to;
    while at != from {
        let commit = repo
            .find_commit(at)
            .map_err(|e| refuse(format!("event {at}: {e}")))?;
        if commit.parent_count() != 1 {
            return Err(refuse(format!(
                "event commit {at} has {} parents (the event log is one chain)",
                commit.parent_count()
            )));
        }
        chain.push(at);
        at = commit.parent_id(0).map_err(|e| refuse(e.to_string()))?;
    }
    chain.reverse();
    Ok(chain)
}

/// The parent of an event of a chain [`chain`] read (it has one).
fn parent(repo: &Repository, commit: Oid) -> Result<Oid, NotFollowed> {
    repo.find_commit(commit)
        .and_then(|c| c.parent_id(0))
        .map_err(|e| NotFollowed::Refused(e.to_string()))
}

/// The event an `event.voided` commit continues (None: not one).
fn voided_after(repo: &Repository, commit: Oid) -> Option<Oid> {
    let c = repo.find_commit(commit).ok()?;
    let logged = parse_event_commit(commit, c.message().unwrap_or("")).ok()?;
    crate::store::events::voided_after(&logged.event)
}

/// What voiding the refused event `commit` (after `after`) records.
fn refusal(repo: &Repository, commit: Oid, after: Oid, why: String) -> Refusal {
    let message = repo
        .find_commit(commit)
        .ok()
        .and_then(|c| c.message().map(str::to_string))
        .unwrap_or_default();
    let participant = parse_event_commit(commit, &message)
        .ok()
        .and_then(|l| l.event.machine().map(str::to_string))
        .or_else(|| named_machine(&message).map(str::to_string))
        .filter(|m| crate::remote::valid_machine_name(m))
        .unwrap_or_else(|| "(unnamed)".to_string());
    Refusal {
        event: commit,
        after,
        summary: printable(message.lines().next().unwrap_or(""), 200),
        participant,
        why: printable(&why, 600),
    }
}

/// `text` as status and the report may print it: no control characters (a crafted event's
/// summary may hold terminal escapes), at most `max` characters.
fn printable(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

impl Arrivals {
    /// The tips of the attempts chains a head may come from: this clone's, and every machine's
    /// as the last fetch of the shared remote brought them.
    fn published_commits(&self, repo: &Repository) -> Vec<Oid> {
        let refs = crate::store::ConferenceRefs::new(&self.name);
        let mut tips: Vec<Oid> = repo
            .refname_to_id(&refs.attempts())
            .ok()
            .into_iter()
            .collect();
        let views = format!(
            "{}*/{}/machines/*/attempts",
            crate::store::refs::SHARED_REMOTE_VIEWS,
            self.name
        );
        if let Ok(found) = repo.references_glob(&views) {
            tips.extend(found.flatten().filter_map(|r| r.target()));
        }
        tips
    }

    /// Whether a head may move to `id`: the baseline, a head or best it had before, or a commit
    /// some machine published (reachable from an attempts chain): a commit that merely exists
    /// here (the user's own, an object a participant slipped in) is not one the conference made.
    fn published(
        repo: &Repository,
        tips: &[Oid],
        before: &State,
        after: &State,
        id: &CommitId,
    ) -> bool {
        let known = *id == after.baseline_commit
            || *id == before.best.commit
            || before
                .researchers
                .values()
                .any(|r| r.head == *id || r.round_start == *id);
        known
            || tips.iter().any(|&tip| {
                tip == id.oid() || repo.graph_descendant_of(tip, id.oid()).unwrap_or(false)
            })
    }
}

/// Why one event is not followed.
enum Fault {
    /// It is not one the conference could have recorded: why, naming its machine.
    Refused(String),
    /// A commit it names is not here (yet): which.
    Missing(String),
}

/// Why a head an event moves is not followed.
enum Harness {
    /// Its commit has not arrived (yet).
    Missing(String),
    /// It changes a frozen path.
    Changed(String),
}

/// `event` with the fields its payload does not store (`#[serde(skip)]`: the stop rules' streaks
/// of a round, a review's noise warning) as the arriving state `after` has them: they are
/// counters and a warning, which the state alone records.
fn with_unstored_fields(mut event: Event, before: &State, after: &State) -> Event {
    match &mut event {
        Event::RoundCompleted(e) => {
            e.streaks.plateau_rounds = after.plateau_rounds;
            e.streaks.stalled_rounds = after.stalled_rounds;
            e.streaks.high_score_rounds = after.high_score_rounds;
        }
        Event::PeerReview(e) if after.noisy_evaluation != before.noisy_evaluation => {
            e.noisy_evaluation = after.noisy_evaluation.clone();
        }
        _ => {}
    }
    event
}

/// The machine an event commit's summary names (the recorder ends it with ` [machine]`), for an
/// event whose payload cannot be read.
fn summary_machine(message: &str) -> String {
    match named_machine(message) {
        Some(m) => format!("machine `{m}`"),
        None => "an unnamed machine".into(),
    }
}

/// The valid machine name an event commit's summary ends with (` [machine]`).
fn named_machine(message: &str) -> Option<&str> {
    let first = message.lines().next().unwrap_or("");
    first
        .strip_suffix(']')
        .and_then(|s| s.rsplit_once(" ["))
        .map(|(_, m)| m)
        .filter(|m| crate::remote::valid_machine_name(m))
}

/// What the recorder stores after `event` on `before`: the reducer, then its bookkeeping. None
/// when the event names a researcher the conference does not have.
fn reduced(
    before: &State,
    event: &Event,
    timestamp: &str,
    machine: Option<&str>,
    running_s: Option<f64>,
) -> Option<State> {
    let slot = event.slot();
    if slot != CHAIR && !before.researchers.contains_key(slot) {
        return None;
    }
    let mut next = before.clone();
    event.apply(&mut next);
    next.count_event(event, timestamp, machine, running_s);
    Some(next)
}

/// The state stored at event commit `commit`.
fn state_of(repo: &Repository, commit: Oid) -> Result<State, String> {
    let tree = repo
        .find_commit(commit)
        .map_err(|e| e.to_string())?
        .tree_id();
    let bytes = read_path(repo, tree, files::STATE)
        .map_err(|e| e.to_string())?
        .ok_or("it has no state.json")?;
    stored::read(&bytes).map_err(|why| format!("its state.json cannot be read: {why}"))
}

fn to_value(state: &State) -> serde_json::Value {
    serde_json::to_value(state).unwrap_or_default()
}

/// The paths of the fields where `a` and `b` differ (`researchers.B.head`), in order, added to
/// `out`.
fn differences(a: &serde_json::Value, b: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    let join = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => differences(p, q, &join(k), out),
                    _ => out.push(join(k)),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &join(&i.to_string()), out);
            }
        }
        _ if a != b => out.push(if at.is_empty() { ".".into() } else { at.into() }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{self as events};
    use crate::model::{EventLine, Verdict};
    use crate::store::events::write_commit;
    use crate::store::StateChange;

    /// A commit of `files` (path, content) on `parent`.
    fn commit(repo: &Repository, parent: Option<Oid>, files: &[(&str, &str)]) -> Oid {
        let mut builder = repo.treebuilder(None).unwrap();
        for (path, text) in files {
            let blob = repo.blob(text.as_bytes()).unwrap();
            builder.insert(path, blob, 0o100644).unwrap();
        }
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let parents: Vec<git2::Commit> = parent
            .map(|p| repo.find_commit(p).unwrap())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(None, &sig, &sig, "c", &tree, &parents).unwrap()
    }

    /// An event log whose first event names `baseline` everywhere, then machine m9's iteration
    /// of researcher A kept at `candidate`, recorded as the recorder records it; (first, second).
    fn log_keeping(repo: &Repository, baseline: Oid, candidate: Oid) -> (Oid, Oid) {
        log_keeping_with(repo, baseline, candidate, |_| vec![])
    }

    /// [`log_keeping`] whose second event also writes the state-tree files `extra` returns for
    /// its state before.
    fn log_keeping_with(
        repo: &Repository,
        baseline: Oid,
        candidate: Oid,
        extra: impl Fn(&State) -> Vec<StateChange>,
    ) -> (Oid, Oid) {
        log_sweeping_with(repo, baseline, candidate, None, extra)
    }

    /// [`log_keeping_with`], the attempt a sweep when `sweep` is given.
    fn log_sweeping_with(
        repo: &Repository,
        baseline: Oid,
        candidate: Oid,
        sweep: Option<crate::model::sweep::Sweep>,
        extra: impl Fn(&State) -> Vec<StateChange>,
    ) -> (Oid, Oid) {
        let mut state = crate::model::state::sample();
        let base = crate::model::CommitId::from(baseline);
        state.baseline_commit = base.clone();
        state.best.commit = base.clone();
        for r in state.researchers.values_mut() {
            r.head = base.clone();
            r.round_start = base.clone();
        }
        let put = |st: &State| {
            vec![StateChange::Put(
                files::STATE.into(),
                serde_json::to_vec_pretty(st).unwrap(),
            )]
        };
        let first_line = EventLine {
            event: crate::model::event::names::ROUND_STARTED.into(),
            timestamp: "t1".into(),
            payload: serde_json::json!({}),
        };
        let first = write_commit(repo, None, &first_line, "round 1", &put(&state)).unwrap();
        let event = Event::Iteration(events::Iteration {
            researcher: "A".into(),
            round: 1,
            iteration: 1,
            metric_value: Some(9.0),
            delta: Some("-1.0".into()),
            status: Verdict::Kept.into(),
            commit: Some(candidate.into()),
            tree: repo.find_commit(candidate).unwrap().tree_id().to_string(),
            description: "d".into(),
            reason: None,
            sub_metrics: Default::default(),
            evaluated: true,
            notes: vec![],
            tokens: None,
            cost_usd: None,
            agent_s: None,
            eval_s: None,
            questions: vec![],
            placement: None,
            branch: None,
            sweep: sweep.map(|s| Box::new(crate::model::sweep::SweepStep::Ran(s))),
        });
        let next = reduced(&state, &event, "t2", Some("m9"), None).unwrap();
        let mut line = event.line("t2".into());
        line.payload["machine"] = "m9".into();
        // The machine published the candidate (it is in an attempts chain).
        repo.reference("refs/conference/c/attempts", candidate, true, "kept")
            .unwrap();
        let mut changes = put(&next);
        changes.extend(extra(&state));
        let second = write_commit(repo, Some(first), &line, "A r1 i1 [m9]", &changes).unwrap();
        (first, second)
    }

    /// A sweep's event may also write the entry of each variant it measured, holding that
    /// variant's metric; not one of a variant stopped early (pruned), nor another metric.
    #[test]
    fn a_sweep_writes_the_evaluation_cache_entries_of_its_measured_variants() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let baseline = commit(&repo, None, &[("x.txt", "1")]);
        let values = ["0", "7", "5"];
        let commits: Vec<Oid> = (values.iter())
            .map(|v| commit(&repo, Some(baseline), &[("x.txt", v)]))
            .collect();
        let tree_of = |c: Oid| repo.find_commit(c).unwrap().tree_id();
        let variant = |k: usize, metric: f64, status: &str| crate::model::sweep::Variant {
            value: values[k].into(),
            commit: commits[k].into(),
            tree: tree_of(commits[k]).to_string(),
            metric: Some(metric),
            status: status.into(),
            reason: None,
            eval_s: None,
        };
        let sweep = crate::model::sweep::Sweep {
            literal: "x.txt:X".into(),
            variants: vec![
                variant(0, 9.0, "ok"),
                variant(1, 12.0, "ok"),
                variant(2, 11.0, "pruned"),
            ],
            chosen: 0,
            batch: false,
        };
        let arrivals = Arrivals {
            name: "c".into(),
            frozen: PathRules::new(&[]),
        };
        let trees: Vec<String> = commits.iter().map(|c| tree_of(*c).to_string()).collect();
        let entries = |wrote: Vec<(usize, f64)>| {
            let trees = trees.clone();
            move |st: &State| {
                (wrote.iter())
                    .map(|(k, metric)| {
                        let result = serde_json::json!({"metric": metric, "runs": [metric],
                            "sub_metrics": {}, "status": "ok", "reason": null, "seconds": 1.0});
                        StateChange::Put(
                            files::eval_cache(&st.eval_settings, &trees[*k]),
                            serde_json::to_vec(&result).unwrap(),
                        )
                    })
                    .collect()
            }
        };
        let honest = entries(vec![(0, 9.0), (1, 12.0)]);
        let (first, second) =
            log_sweeping_with(&repo, baseline, commits[0], Some(sweep.clone()), honest);
        assert!(arrivals.check(&repo, first, second).is_ok());
        let planted = [
            (
                vec![(0, 9.0), (2, 11.0)],
                "not the one of the tree it measured",
            ),
            (vec![(0, 9.0), (1, 1.0)], "holds metric Some(1.0)"),
        ];
        for (wrote, why) in planted {
            let extra = entries(wrote);
            let (first, second) =
                log_sweeping_with(&repo, baseline, commits[0], Some(sweep.clone()), extra);
            match arrivals.check(&repo, first, second) {
                Err(NotFollowed::Voidable(refusal)) => {
                    assert!(refusal.why.contains(why), "{}", refusal.why);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// A kept attempt that the reducer accounts for is still refused when its commit changes a
    /// frozen path: another machine's evaluation harness never runs here.
    #[test]
    fn a_head_that_changes_a_frozen_path_is_refused_naming_the_machine() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let baseline = commit(&repo, None, &[("eval.sh", "measure"), ("x.txt", "1")]);
        let honest = commit(
            &repo,
            Some(baseline),
            &[("eval.sh", "measure"), ("x.txt", "0")],
        );
        let crafted = commit(
            &repo,
            Some(baseline),
            &[("eval.sh", "echo 0"), ("x.txt", "1")],
        );
        let arrivals = Arrivals {
            name: "c".into(),
            frozen: PathRules::new(&["eval.sh".to_string()]),
        };
        let (first, second) = log_keeping(&repo, baseline, honest);
        assert!(arrivals.check(&repo, first, second).is_ok());
        let (first, second) = log_keeping(&repo, baseline, crafted);
        match arrivals.check(&repo, first, second) {
            Err(NotFollowed::Voidable(refusal)) => {
                let why = refusal.why;
                assert!(why.contains("published by machine `m9`"), "{why}");
                assert!(why.contains("changes frozen path eval.sh"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A head moved to a commit that exists here but that no machine published (in no
    /// attempts chain) is not followed: it waits for it, and the run voids the event when it
    /// never comes.
    #[test]
    fn a_head_no_machine_published_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let baseline = commit(&repo, None, &[("x.txt", "1")]);
        let candidate = commit(&repo, Some(baseline), &[("x.txt", "0")]);
        let arrivals = Arrivals {
            name: "c".into(),
            frozen: PathRules::new(&[]),
        };
        let (first, second) = log_keeping(&repo, baseline, candidate);
        assert!(arrivals.check(&repo, first, second).is_ok());
        repo.find_reference("refs/conference/c/attempts")
            .unwrap()
            .delete()
            .unwrap();
        match arrivals.check(&repo, first, second) {
            Err(NotFollowed::NotHereYet(refusal)) => {
                assert!(
                    refusal.why.contains("in a machine's attempts"),
                    "{}",
                    refusal.why
                );
                assert_eq!(refusal.event, second);
                assert_eq!(refusal.after, first);
            }
            other => panic!("{other:?}"),
        }
    }

    /// An iteration may write the evaluation cache entry of its own candidate's tree, holding
    /// its own metric; an entry of another tree, or another metric, is a planted result.
    #[test]
    fn a_planted_evaluation_cache_entry_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let baseline = commit(&repo, None, &[("x.txt", "1")]);
        let candidate = commit(&repo, Some(baseline), &[("x.txt", "0")]);
        let other = commit(&repo, Some(baseline), &[("x.txt", "7")]);
        let arrivals = Arrivals {
            name: "c".into(),
            frozen: PathRules::new(&[]),
        };
        let entry = |tree: Oid, metric: f64| {
            move |st: &State| {
                let result = serde_json::json!({"metric": metric, "runs": [metric],
                    "sub_metrics": {}, "status": "ok", "reason": null, "seconds": 1.0});
                vec![StateChange::Put(
                    files::eval_cache(&st.eval_settings, &tree.to_string()),
                    serde_json::to_vec(&result).unwrap(),
                )]
            }
        };
        let tree_of = |c: Oid| repo.find_commit(c).unwrap().tree_id();
        let (first, second) =
            log_keeping_with(&repo, baseline, candidate, entry(tree_of(candidate), 9.0));
        assert!(arrivals.check(&repo, first, second).is_ok());
        let planted = [
            (
                entry(tree_of(other), 1.0),
                "not the one of the tree it measured",
            ),
            (entry(tree_of(candidate), 1.0), "holds metric Some(1.0)"),
        ];
        for (extra, why) in planted {
            let (first, second) = log_keeping_with(&repo, baseline, candidate, extra);
            match arrivals.check(&repo, first, second) {
                Err(NotFollowed::Voidable(refusal)) => {
                    assert!(refusal.why.contains(why), "{}", refusal.why);
                    assert_eq!(refusal.participant, "m9");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn every_differing_field_is_named() {
        let a =
            serde_json::json!({"best": {"commit": "a", "metric": 1.0}, "round": 1, "x": [1, 2]});
        let b = serde_json::json!({"best": {"commit": "b", "metric": 1.0}, "round": 2, "x": [1, 3], "y": 0});
        let mut found = Vec::new();
        differences(&a, &b, "", &mut found);
        assert_eq!(found, ["best.commit", "round", "x.1", "y"]);
        found.clear();
        differences(&a, &a, "", &mut found);
        assert!(found.is_empty());
    }
}
