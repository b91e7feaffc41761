//! The attempt tree read back from the record and git (DESIGN.md §12): every attempt of the
//! conference is a node whose parent is its commit's git parent (the node it started from), the
//! baseline is the root, and the commits between (a knowledge transfer's pick on best, a
//! round's start joining best) are nodes too. What `git conference log --graph` draws, what its
//! JSON lists, what the page shows and the final report's path from the baseline to best.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::Result;
use git2::{Oid, Repository};

use crate::engine::record::ledger;
use crate::engine::Conference;
use crate::model::event::{Event, TransferPick};
use crate::model::tree::{attempt_label, LineageNode};
use crate::model::PickResult;

/// Steps a walk from an unknown commit down to a known node takes at most.
const WALK_LIMIT: usize = 10_000;

/// Every node of the conference's tree, the baseline first, then in the order they were made.
pub fn nodes(conf: &Conference) -> Result<Vec<LineageNode>> {
    nodes_of(conf, &ledger::all_attempts(conf, &conf.state())?)
}

/// [`nodes`], from the conference's attempts `all` already read.
pub fn nodes_of(
    conf: &Conference,
    all: &[crate::model::AttemptRecord],
) -> Result<Vec<LineageNode>> {
    nodes_with(conf, all, &mut TreeReads::default())
}

/// [`nodes`], from the conference's attempts `all`, with what an earlier tree of it read from
/// git (`reads`, brought up to date here; the page keeps it between events).
pub fn nodes_with(
    conf: &Conference,
    all: &[crate::model::AttemptRecord],
    reads: &mut TreeReads,
) -> Result<Vec<LineageNode>> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    reads.picks.update(conf, &repo)?;
    let mut tree = Tree::default();
    let baseline = st.baseline_commit.oid();
    tree.add(LineageNode {
        commit: baseline.to_string(),
        parent: None,
        label: "baseline".into(),
        researcher: None,
        round: None,
        iteration: None,
        verdict: "baseline".into(),
        metric: st.baseline_metric,
        description: String::new(),
        alive: false,
        best: false,
        on_best_path: false,
        best_path_step: None,
    });
    for a in all {
        let Some(commit) = a.commit.as_ref().map(|c| c.oid()) else {
            continue;
        };
        // A record without a commit of its own names the node it started from: not a node.
        if tree.has(commit) {
            continue;
        }
        let Some(parent) = reads.own_commit_parent(&repo, commit, a) else {
            continue;
        };
        let node = LineageNode {
            commit: commit.to_string(),
            parent,
            label: attempt_label(&a.researcher, a.round, a.iteration),
            researcher: Some(a.researcher.clone()),
            round: Some(a.round),
            iteration: Some(a.iteration),
            verdict: a.verdict.to_string(),
            metric: a.metric,
            description: a.description.clone(),
            alive: false,
            best: false,
            on_best_path: false,
            best_path_step: None,
        };
        let siblings = a
            .sweep
            .as_ref()
            .map(|s| swept(&node, s))
            .unwrap_or_default();
        tree.add(node);
        for sibling in siblings {
            if Oid::from_str(&sibling.commit).is_ok_and(|c| !tree.has(c)) {
                tree.add(sibling);
            }
        }
    }
    let picks = &reads.picks.picks;
    // Best and the researchers' heads, when no attempt made them (a pick, a round's start).
    let tips = std::iter::once(&st.best.commit).chain(
        st.researchers
            .values()
            .flat_map(|r| std::iter::once(&r.head).chain(r.branches.iter().map(|b| &b.head))),
    );
    for tip in tips {
        let tip = tip.oid();
        if !tree.has(tip) && repo.graph_descendant_of(tip, baseline).unwrap_or(false) {
            tree.add(between(&repo, tip, picks));
        }
    }
    tree.join_parents(&repo, baseline, picks);
    tree.mark(&st, picks);
    Ok(tree.nodes)
}

/// What making the tree reads from git that later events leave true: the picks merged onto best
/// (up to an events tip), and for each attempt's commit whether it is the attempt's own and its
/// first parent (commits never change). Where every attempt is a commit, reading 10,000 of them
/// and every event anew was most of what a tree cost at each event.
#[derive(Debug, Default)]
pub struct TreeReads {
    picks: MergedPicks,
    /// By commit and the attempt naming it: its first parent when it is that attempt's own.
    commits: HashMap<(Oid, String, u32, u32), Option<Option<String>>>,
}

impl TreeReads {
    /// `commit`'s first parent when `commit` is attempt `a`'s own ([`made_by`]); None when it
    /// is the node `a` started from.
    fn own_commit_parent(
        &mut self,
        repo: &Repository,
        commit: Oid,
        a: &crate::model::AttemptRecord,
    ) -> Option<Option<String>> {
        let key = (commit, a.researcher.clone(), a.round, a.iteration);
        self.commits
            .entry(key)
            .or_insert_with(|| {
                made_by(repo, commit, &a.researcher, a.round, a.iteration)
                    .then(|| first_parent(repo, commit))
            })
            .clone()
    }
}

#[derive(Default)]
struct Tree {
    nodes: Vec<LineageNode>,
    at: BTreeMap<String, usize>,
}

impl Tree {
    fn has(&self, commit: Oid) -> bool {
        self.at.contains_key(&commit.to_string())
    }

    fn add(&mut self, node: LineageNode) {
        self.at.insert(node.commit.clone(), self.nodes.len());
        self.nodes.push(node);
    }

    /// Adds the commits between a node and the node below it (picks on best, round starts),
    /// walking first parents down to a known node or the baseline.
    fn join_parents(
        &mut self,
        repo: &Repository,
        baseline: Oid,
        picks: &BTreeMap<Oid, TransferPick>,
    ) {
        let mut k = 0;
        while k < self.nodes.len() {
            let mut parent = self.nodes[k].parent.clone();
            let mut steps = 0;
            while let Some(p) = parent.as_deref().and_then(|p| Oid::from_str(p).ok()) {
                if self.has(p) || steps >= WALK_LIMIT {
                    break;
                }
                if !repo.graph_descendant_of(p, baseline).unwrap_or(false) {
                    // Below the baseline (the user's history): the node hangs off the baseline.
                    self.nodes[k].parent = Some(baseline.to_string());
                    break;
                }
                let node = between(repo, p, picks);
                parent = node.parent.clone();
                self.add(node);
                steps += 1;
            }
            k += 1;
        }
    }

    /// Marks the alive heads, best, and the path from the baseline to best: down best's first
    /// parents, and from each pick on best down the attempts of the finding it merged.
    fn mark(&mut self, st: &crate::engine::state::State, picks: &BTreeMap<Oid, TransferPick>) {
        let alive: BTreeSet<String> = st
            .researchers
            .values()
            .flat_map(|r| match r.branches.is_empty() {
                true => vec![r.head.to_string()],
                false => r.branches.iter().map(|b| b.head.to_string()).collect(),
            })
            .collect();
        for n in &mut self.nodes {
            n.alive = alive.contains(&n.commit);
            n.best = n.commit == st.best.commit.as_str();
        }
        let mut path = Vec::new();
        let mut at = Some(st.best.commit.to_string());
        while let Some(commit) = at.take() {
            let Some(&k) = self.at.get(&commit) else {
                break;
            };
            if path.contains(&k) || path.len() > WALK_LIMIT {
                break;
            }
            path.push(k);
            if let Some(pick) = Oid::from_str(&commit).ok().and_then(|c| picks.get(&c)) {
                self.finding_chain(&pick.finding.to_string(), &mut path);
            }
            at = self.nodes[k].parent.clone();
        }
        for (step, &k) in path.iter().rev().enumerate() {
            self.nodes[k].on_best_path = true;
            self.nodes[k].best_path_step = Some(step as u32);
        }
    }

    /// The finding's attempts, down to the first node that is not an attempt (newest first).
    fn finding_chain(&self, finding: &str, path: &mut Vec<usize>) {
        let mut at = Some(finding.to_string());
        while let Some(commit) = at.take() {
            let Some(&k) = self.at.get(&commit) else {
                break;
            };
            let n = &self.nodes[k];
            if n.iteration.is_none() || path.contains(&k) {
                break;
            }
            path.push(k);
            at = n.parent.clone();
        }
    }
}

/// A sweep's other variants, as nodes beside the attempt (`node`, the chosen variant): each
/// under the same node, its verdict `swept`, its label the attempt's with the value.
fn swept(node: &LineageNode, s: &crate::model::sweep::Sweep) -> Vec<LineageNode> {
    let others = s
        .variants
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != s.chosen);
    others
        .map(|(_, v)| LineageNode {
            commit: v.commit.to_string(),
            label: format!("{} {}", node.label, s.label(v)),
            verdict: "swept".into(),
            metric: v.metric,
            description: match v.status.as_str() {
                "ok" => format!("{}, swept with {}", s.said(v), node.label),
                status => format!("{} ({status}), swept with {}", s.said(v), node.label),
            },
            ..node.clone()
        })
        .collect()
}

/// Whether `commit` is the attempt researcher `id` made at `round`, `iteration` (its message
/// says so), not the node an attempt without a commit of its own started from.
fn made_by(repo: &Repository, commit: Oid, id: &str, round: u32, iteration: u32) -> bool {
    let trailer = crate::engine::record::attempt::attempt_trailer(id, round, iteration);
    repo.find_commit(commit)
        .is_ok_and(|c| c.message().is_some_and(|m| m.contains(&trailer)))
}

fn first_parent(repo: &Repository, commit: Oid) -> Option<String> {
    let c = repo.find_commit(commit).ok()?;
    c.parent_id(0).ok().map(|p| p.to_string())
}

/// A commit between attempts: a pick on best, a round's start, or (by its subject) another.
fn between(repo: &Repository, commit: Oid, picks: &BTreeMap<Oid, TransferPick>) -> LineageNode {
    let c = repo.find_commit(commit).ok();
    let subject = c
        .as_ref()
        .and_then(|c| c.summary().map(str::to_string))
        .unwrap_or_default();
    let (label, verdict, metric, round, researcher) = match picks.get(&commit) {
        Some(p) => (
            format!("best r{} ({})", p.round, p.researcher),
            "merged".to_string(),
            p.metric,
            Some(p.round),
            Some(p.researcher.clone()),
        ),
        None if subject.starts_with("Round ") && subject.contains("start from best") => {
            let round = subject[6..].split(':').next().and_then(|r| r.parse().ok());
            (
                format!("round {} start", round.unwrap_or(0)),
                "joined".to_string(),
                None,
                round,
                None,
            )
        }
        None => (
            crate::model::short_oid(commit),
            "-".to_string(),
            None,
            None,
            None,
        ),
    };
    LineageNode {
        commit: commit.to_string(),
        parent: first_parent(repo, commit),
        label,
        researcher,
        round,
        iteration: None,
        verdict,
        metric,
        description: if picks.contains_key(&commit) {
            String::new()
        } else {
            subject
        },
        alive: false,
        best: false,
        on_best_path: false,
        best_path_step: None,
    }
}

/// The picks knowledge transfer merged onto best, by the commit each made, as read up to an
/// events tip. Reading them means reading every event (10,000 and more at a big conference,
/// most of the cost of a tree), so [`MergedPicks::update`] reads only those since.
#[derive(Debug, Clone, Default)]
struct MergedPicks {
    tip: Option<Oid>,
    picks: BTreeMap<Oid, TransferPick>,
}

impl MergedPicks {
    /// Brings them up to the events' tip: the events since the tip they were read at, newest
    /// first down to it; all events again when that tip is no longer below (the log was
    /// replaced) or a new event voids others (it may void an older pick).
    fn update(&mut self, conf: &Conference, repo: &Repository) -> Result<()> {
        let log = crate::store::EventLog::open(repo, conf.refs().clone())?;
        if log.tip() == self.tip {
            return Ok(());
        }
        let (mut fresh, mut reached, mut voids) = (Vec::new(), self.tip.is_none(), false);
        log.walk(repo, |e| {
            if Some(e.commit) == self.tip {
                reached = true;
                return false;
            }
            voids |= crate::store::events::voided_after(&e.event).is_some();
            fresh.push(e);
            true
        })?;
        if !reached || (voids && self.tip.is_some()) {
            *self = MergedPicks::default();
            return self.update(conf, repo);
        }
        for e in fresh.iter().rev() {
            let Some(Event::TransferPick(p)) = Event::parse(&e.event) else {
                continue;
            };
            if let Some(commit) = p.commit.as_ref().map(|c| c.oid()) {
                if p.result == PickResult::Merged {
                    self.picks.insert(commit, p);
                }
            }
        }
        self.tip = log.tip();
        Ok(())
    }
}
