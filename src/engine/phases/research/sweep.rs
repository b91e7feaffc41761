//! Parameter sweeps (`- **Parameter sweep:** on`, docs/tree.md "Sweeps"): an agent that ends its
//! note with `SWEEP: <path>:<name> = v1, v2, …` has its edit measured once per value of that
//! literal. Each value is a commit whose parent is the node the attempt started from (the agent's
//! edit with the literal set, written the way `builtin:tune` writes it), made reachable before
//! anything runs; all are evaluated at once, each in a detached checkout of its own, through the
//! same evaluation slots as every evaluation (devices, hosts, `max parallel evaluations`). The best
//! is the attempt, kept or not by the usual rule; the others are its siblings, recorded in the
//! same `researcher.iteration` event (the commit point: a kill before it redoes the iteration, as
//! for any attempt, and recovery sets the agent's edit aside), each with a note of its own.
//!
//! A batch of `builtin:tune` (`- sweep: q` under `## Agent`) goes the same way: the tuner's q
//! points are the variants, each its own edit of the node the attempt started from (several
//! literals may move), recorded as a sweep marked `batch`.
//!
//! A line that cannot be followed (no such file or literal, a path the attempt may not change, a
//! value the literal cannot take) is a warning in the event and the note, and the attempt goes
//! on as a plain one.

use anyhow::Result;
use git2::Oid;

use super::judge::evaluate_cached;
use super::*;
use crate::engine::measure::evaluate::EvalResult;
use crate::engine::record::attempt::{attempt_message, Attempt, SweepDone};
use crate::engine::state::{ResearcherState, State};
use crate::model::sweep::{SweepRequest, Variant};
use crate::model::{EvalStatus, Verdict};

/// What a sweep measures: a `SWEEP:` line checked against the attempt's tree (one edit per
/// value of its literal), or the tuner's batch (one edit per point).
pub(super) struct Plan {
    /// The record's `literal`: the swept literal's key, or the keys a batch moves.
    literal: String,
    batch: bool,
    /// The tree every edit applies to: the attempt's (a sweep edits the agent's change), or
    /// None for the node the attempt started from (a batch's points each stand alone).
    base: Option<Oid>,
    edits: Vec<Edit>,
}

/// One variant to make: its value (or point), and the files it changes, full content.
struct Edit {
    value: String,
    files: Vec<(String, String)>,
}

/// The note less its last `SWEEP:` line, and what that line asked (sweeps on).
pub(super) fn split(
    note: Option<String>,
) -> (
    Option<String>,
    Option<std::result::Result<SweepRequest, String>>,
) {
    match note {
        Some(note) => {
            let (text, request) = crate::model::sweep::split_sweep(&note);
            ((!text.is_empty()).then_some(text), request)
        }
        None => (None, None),
    }
}

impl<'a> Session<'a> {
    /// The sweep an agent's `SWEEP:` line asked for, checked against the tree it left, or the
    /// warning why it cannot be followed (said on the terminal too).
    pub(super) fn plan(
        &self,
        request: Option<std::result::Result<SweepRequest, String>>,
        tree: Oid,
    ) -> (Option<Plan>, Option<String>) {
        let warning = match request.map(|r| r.and_then(|r| self.plan_sweep(r, tree))) {
            None => return (None, None),
            Some(Ok(plan)) => return (Some(plan), None),
            Some(Err(warning)) => warning,
        };
        self.conf.ui.warn(&format!(
            "warning: researcher {}: {warning}; the attempt goes on without a sweep",
            self.id
        ));
        (None, Some(warning))
    }

    /// Checks a sweep request against the tree the agent left: the file is there and may change,
    /// it holds the literal, and every value is one the literal can take. Err: the warning.
    pub(super) fn plan_sweep(
        &self,
        request: SweepRequest,
        tree: Oid,
    ) -> std::result::Result<Plan, String> {
        let path = request.path.trim_start_matches("./").to_string();
        let files = crate::git::snapshot::read_files(&self.repo, tree, std::slice::from_ref(&path))
            .map_err(|e| format!("SWEEP: `{path}` cannot be read: {e}"))?;
        let Some((_, text)) = files.into_iter().next() else {
            return Err(format!(
                "SWEEP: no text file `{path}` in this attempt (a path from the repository's root)"
            ));
        };
        if let Some(why) = self.conf.guard().violation(std::slice::from_ref(&path)) {
            return Err(format!("SWEEP: `{path}` may not change: {why}"));
        }
        let key = format!("{path}:{}", request.name);
        let found = crate::researchers::tune::find_literals(&path, &text);
        let Some(literal) = found.into_iter().find(|l| l.key == key) else {
            return Err(format!(
                "SWEEP: no literal `{}` in `{path}` that builtin:tune can change (a number that is \
                 the whole value of an assignment, such as `{} = 3e-4`)",
                request.name, request.name
            ));
        };
        for value in &request.values {
            let v: f64 = value.parse().unwrap_or(f64::NAN);
            if literal.integer && v.fract() != 0.0 {
                return Err(format!(
                    "SWEEP: `{}` is a whole number; `{value}` is not",
                    request.name
                ));
            }
            let below = literal.lower.is_some_and(|lo| v < lo);
            if below || literal.upper.is_some_and(|hi| v > hi) {
                return Err(format!(
                    "SWEEP: `{value}` is outside the bounds `{}`'s tune marker gives",
                    request.name
                ));
            }
        }
        let edits = (request.values.iter())
            .map(|value| Edit {
                files: vec![(
                    path.clone(),
                    crate::researchers::tune::rewrite(
                        &text,
                        &literal,
                        value.parse().unwrap_or(0.0),
                    ),
                )],
                value: value.clone(),
            })
            .collect();
        Ok(Plan {
            literal: key,
            batch: false,
            base: Some(tree),
            edits,
        })
    }

    /// Measures every value of the sweep, keeps the best as the attempt and records it with its
    /// siblings. None on Ctrl-C (nothing recorded).
    pub(super) async fn sweep(
        &mut self,
        st: &State,
        r: &ResearcherState,
        attempt: &Attempt<'_>,
        plan: Plan,
        report: &crate::agents::AgentReport,
        env: &[(String, String)],
    ) -> Result<Option<Verdict>> {
        let variants = self.commit_variants(attempt, &plan)?;
        let (conf, remaining) = (self.conf, self.remaining());
        let Some(results) =
            evaluate_variants(conf, st, attempt, &plan, &variants, env, remaining).await?
        else {
            return Ok(None);
        };
        crate::failpoint::hit("sweep.evaluated");
        let direction = self.conf.direction();
        let chosen = best_of(&results, direction);
        let record = crate::model::sweep::Sweep {
            literal: plan.literal.clone(),
            variants: (plan.edits.iter().zip(&variants).zip(&results))
                .map(|((edit, (commit, tree)), (result, _))| Variant {
                    value: edit.value.clone(),
                    commit: (*commit).into(),
                    tree: tree.to_string(),
                    metric: result.metric,
                    status: result.status.clone(),
                    reason: result.reason.clone(),
                    eval_s: (result.seconds > 0.0).then(|| super::record::tenths(result.seconds)),
                })
                .collect(),
            chosen,
            batch: plan.batch,
        };
        let done = SweepDone { record, results };
        let line = done.record.summary();
        self.sweep_line = Some(line);
        let (commit, tree) = variants[chosen];
        // A batch's attempt is its chosen point: the description says which.
        let description = match plan.batch {
            true => format!(
                "tune {}: best of a {}",
                plan.edits[chosen].value,
                attempt.description.trim_start_matches("tune: ")
            ),
            false => attempt.description.to_string(),
        };
        let chosen_attempt = Attempt {
            tree,
            description: &description,
            head: attempt.head,
            branch: attempt.branch.clone(),
            questions: attempt.questions.clone(),
            sweep: Some(&done),
            sweep_warning: None,
            ..*attempt
        };
        let (result, of_the_tree) = &done.results[chosen];
        let measured = Measured {
            result,
            of_the_tree: *of_the_tree,
        };
        let cwd = crate::git::worktree::worktree_path(
            &self.repo,
            &self.conf.name,
            &variant_label(self.id, chosen),
        );
        self.decide(
            st,
            r,
            &chosen_attempt,
            Some(commit),
            measured,
            report,
            env,
            &cwd,
        )
        .await
    }

    /// One commit per value, each a child of the node the attempt started from, kept reachable
    /// before any is evaluated: (commit, tree) in the line's order.
    fn commit_variants(&self, a: &Attempt<'_>, plan: &Plan) -> Result<Vec<(Oid, Oid)>> {
        let conf = self.conf;
        let st = conf.state();
        let author = crate::store::researcher_signature(&self.repo, a.id);
        let mut made = Vec::new();
        for (k, edit) in plan.edits.iter().enumerate() {
            let mut tree = match plan.base {
                Some(tree) => tree,
                None => self.repo.find_commit(a.head.oid())?.tree_id(),
            };
            for (path, text) in &edit.files {
                tree = crate::git::snapshot::with_file(&self.repo, tree, path, text.as_bytes())?;
            }
            let what = match plan.batch {
                true => format!(
                    "Batch point {} of {}: {}",
                    k + 1,
                    plan.edits.len(),
                    edit.value
                ),
                false => format!("Sweep: {} = {}", plan.literal, edit.value),
            };
            let message = attempt_message(conf, a, st.round, Some(&what));
            let commit =
                crate::git::snapshot::commit(&self.repo, tree, &[a.head.oid()], &message, &author)?;
            made.push((commit, tree));
        }
        crate::failpoint::hit("sweep.committed");
        // Reachable before anything is recorded: a kill now loses none of them.
        conf.keep_reachable(&made.iter().map(|(c, _)| *c).collect::<Vec<_>>())?;
        Ok(made)
    }
}

/// Evaluates every variant at once, each in a detached checkout of its own
/// (`sweep-<researcher>-<k>`); the evaluation slots decide how many run together. None on
/// Ctrl-C. `remaining`: what is left of the researcher's round time.
async fn evaluate_variants(
    conf: &Conference,
    st: &State,
    a: &Attempt<'_>,
    plan: &Plan,
    variants: &[(Oid, Oid)],
    env: &[(String, String)],
    remaining: Option<std::time::Duration>,
) -> Result<Option<Vec<(EvalResult, bool)>>> {
    let mut places = Vec::new();
    for (k, (commit, _)) in variants.iter().enumerate() {
        let label = variant_label(a.id, k);
        let path = conf.prepare_worktree(&label, None, &(*commit).into())?;
        crate::engine::agent::workspace::remove_ignored(conf, &path)?;
        places.push((label, path));
    }
    let seats = crate::engine::measure::race::seats(&plan.labels());
    let runs = places.iter().enumerate().map(|(k, (label, path))| {
        let (commit, tree) = variants[k];
        let mut env = env.to_vec();
        env.push(("CONFERENCE_SWEEP_LITERAL".into(), plan.literal.clone()));
        env.push(("CONFERENCE_SWEEP_VALUE".into(), plan.edits[k].value.clone()));
        let log = format!("{}-r{}-i{}-v{}.eval", a.id, st.round, a.iteration, k + 1);
        let prune = crate::engine::measure::pruning::for_variant(conf, st, a.id, seats[k].clone());
        async move {
            let ready = crate::engine::agent::workspace::ready_checkout(conf, path, label).await?;
            if !ready {
                return Ok(None);
            }
            let id = (a.id, log.as_str());
            let measured =
                evaluate_cached(conf, id, (tree, commit), path, env, remaining, prune).await?;
            anyhow::Ok(Some(measured))
        }
    });
    let mut results = Vec::new();
    for done in futures_util::future::join_all(runs).await {
        match done? {
            Some((result, _)) if result.status == EvalStatus::Interrupted => return Ok(None),
            Some(measured) => results.push(measured),
            None => return Ok(None),
        }
    }
    Ok(Some(results))
}

impl Plan {
    /// The tuner's batch: one edit per point, each of the node the attempt started from.
    pub(super) fn batch(request: crate::model::sweep::BatchRequest) -> Plan {
        Plan {
            literal: request.keys.join(", "),
            batch: true,
            base: None,
            edits: (request.points.into_iter())
                .map(|p| Edit {
                    value: p.label,
                    files: p.files,
                })
                .collect(),
        }
    }

    /// Every file a variant changes.
    pub(super) fn paths(&self) -> Vec<String> {
        let paths = self
            .edits
            .iter()
            .flat_map(|e| e.files.iter().map(|(p, _)| p));
        let set: std::collections::BTreeSet<&String> = paths.collect();
        set.into_iter().cloned().collect()
    }

    /// Each variant as a halving reason names it: `LEARNING_RATE = 0.01`; a batch's point.
    fn labels(&self) -> Vec<String> {
        let name = self.literal.rsplit(':').next().unwrap_or(&self.literal);
        let label = |e: &Edit| match self.batch {
            true => e.value.clone(),
            false => format!("{name} = {}", e.value),
        };
        self.edits.iter().map(label).collect()
    }
}

/// The checkout variant `k` of researcher `id`'s sweeps is evaluated in.
fn variant_label(id: &str, k: usize) -> String {
    format!("sweep-{id}-{}", k + 1)
}

/// The variant that is the attempt: the best measured metric (the first of equals), or the
/// first variant when none measured.
fn best_of(results: &[(EvalResult, bool)], direction: Option<crate::config::Direction>) -> usize {
    let mut best: Option<(usize, f64)> = None;
    for (k, (result, _)) in results.iter().enumerate() {
        let Some(m) = result.metric.filter(|_| result.ok()) else {
            continue;
        };
        if best.is_none_or(|(_, b)| crate::protocol::keep::improves(m, Some(b), direction)) {
            best = Some((k, m));
        }
    }
    best.map_or(0, |(k, _)| k)
}
