//! An iteration in the tree of ideas (branching on, DESIGN.md §12): the node the attempt starts
//! from (the one its researcher's last attempt recorded, else its best head), the worktree
//! moved there (on the researcher's branch at its best head, detached elsewhere), and the step
//! its event records — the branch it opens, those it closes and the node the next attempt
//! starts from (best-first's pick, or what the agent's `BRANCH:` line asked) — planned with
//! `protocol::tree` before anything follows from it. With branching off nothing here runs.

use anyhow::Result;
use git2::Oid;

use super::*;
use crate::engine::record::attempt::{Attempt, AttemptBranch};
use crate::engine::record::tree;
use crate::engine::state::{ResearcherState, State};
use crate::engine::Conference;
use crate::model::tree::{attempt_label, Branch, BranchRequest, Branching, Node, TreeStep};
use crate::model::{CommitId, Verdict};

impl<'a> Session<'a> {
    /// The node this iteration starts from: None with branching off (the researcher's head).
    pub(super) fn start_node(&self, st: &State, r: &ResearcherState) -> Option<Node> {
        if !tree::on(self.conf) {
            return None;
        }
        Some(
            r.next
                .clone()
                .unwrap_or_else(|| match r.branches.iter().find(|b| b.head == r.head) {
                    Some(b) => b.node(),
                    None => Node {
                        commit: r.head.clone(),
                        metric: r.best_metric,
                        label: if r.head == st.baseline_commit {
                            "baseline".into()
                        } else {
                            format!("round {} start", st.round)
                        },
                        depth: 0,
                    },
                }),
        )
    }

    /// Moves the worktree to `base` when it is elsewhere: only what differs between the two
    /// trees (and what the watch saw touched) is rewritten. HEAD is the researcher's branch at
    /// its head, detached at any other node.
    pub(super) fn go_to(&mut self, base: &CommitId, r: &ResearcherState) -> Result<()> {
        if self.at == *base {
            return Ok(());
        }
        let branch_ref = self.conf.refs.researcher(self.id);
        let from_tree = self.repo.find_commit(self.at.oid())?.tree_id();
        let head_ref = (*base == r.head).then_some(branch_ref.as_str());
        crate::git::snapshot::advance(
            &self.wt,
            from_tree,
            base.oid(),
            head_ref,
            self.watch.as_mut(),
        )?;
        crate::failpoint::hit("tree.moved");
        self.at = base.clone();
        Ok(())
    }

    /// A kept attempt whose tree is the tree of one of its researcher's alive branches adds no
    /// node: it is recorded as no change, saying which.
    pub(super) fn same_as_alive(&self, r: &ResearcherState, tree: Oid) -> Option<String> {
        r.branches.iter().find_map(|b| {
            let same = self
                .repo
                .find_commit(b.head.oid())
                .is_ok_and(|c| c.tree_id() == tree);
            same.then(|| format!("the same tree as the alive branch {}", b.label))
        })
    }
}

/// What the attempt's event records of the tree (None with branching off): planned from the
/// researcher's branches as they are, its verdict and the node the next attempt starts from.
pub(super) fn plan_step(
    conf: &Conference,
    st: &State,
    a: &Attempt,
    commit: Option<Oid>,
    verdict: Verdict,
    metric: Option<f64>,
) -> Option<TreeStep> {
    let AttemptBranch { from, request } = a.branch.clone()?;
    let r = st.researcher(a.id);
    let rules = tree::rules(conf, st);
    // The researcher's attempts, this one included (best-first's patience with its leader).
    let record = crate::protocol::tree::Record {
        attempts: r.counts.total() + 1,
        kept: r.counts.kept + u64::from(verdict == Verdict::Kept),
    };
    let opened = match (verdict, commit) {
        (Verdict::Kept, Some(c)) => Some(Branch {
            head: c.into(),
            metric,
            label: attempt_label(a.id, st.round, a.iteration),
            depth: from.depth + 1,
            tries: 0,
            stale: 0,
            tried: Vec::new(),
        }),
        _ => None,
    };
    let tried = crate::protocol::tree::tried_line(verdict.as_str(), a.description);
    let mode = conf.config.branching;
    let asked = match (&request, mode) {
        (Some(BranchRequest::Node(id)), Branching::AgentDecided) => {
            Some(tree::resolve(conf, st, id))
        }
        _ => None,
    };
    Some(crate::protocol::tree::plan(
        &r.branches,
        from,
        opened,
        tried,
        &rules,
        |alive, from, opened| {
            let ask = (request, asked);
            next_node(mode, (&rules, record), alive, from, opened, ask)
        },
    ))
}

/// The node the next attempt starts from, why, and the warning a `BRANCH:` line that could not
/// be followed leaves. `ask` is the attempt's `BRANCH:` request and, for a node, what it names.
fn next_node(
    mode: Branching,
    (rules, record): (&crate::protocol::tree::Rules, crate::protocol::tree::Record),
    alive: &[Branch],
    from: &Node,
    opened: Option<&Branch>,
    (request, asked): (
        Option<BranchRequest>,
        Option<std::result::Result<Node, String>>,
    ),
) -> (Node, String, Option<String>) {
    // Without a request: on from the branch the attempt opened, else from the same node (or,
    // when that one was just closed, from the leader).
    let on = || match opened {
        Some(b) => (b.node(), format!("continue from {}", b.label)),
        None if alive.iter().any(|b| b.head == from.commit) => {
            (from.clone(), format!("again from {}", from.label))
        }
        None => match crate::protocol::tree::leader(alive, rules) {
            Some(lead) => (
                lead.node(),
                format!("{} was closed: from the leader {}", from.label, lead.label),
            ),
            None => (from.clone(), format!("again from {}", from.label)),
        },
    };
    match mode {
        Branching::BestFirst => {
            let (node, why) =
                crate::protocol::tree::pick_best_first(alive, rules, &from.commit, record)
                    .unwrap_or_else(on);
            let warning = request.map(|_| {
                "a BRANCH: line is followed with `Branching: agent-decided`; here best-first picks the node".to_string()
            });
            (node, why, warning)
        }
        Branching::AgentDecided => match (request, asked) {
            (Some(BranchRequest::Fork), _) => (
                from.clone(),
                format!("BRANCH: fork from {}", from.label),
                None,
            ),
            (_, Some(Ok(node))) => {
                let why = format!("BRANCH: {}", node.label);
                (node, why, None)
            }
            (_, Some(Err(warning))) => {
                let (node, why) = on();
                let warning = format!("{warning}; the next attempt starts from {}", node.label);
                (node, why, Some(warning))
            }
            _ => {
                let (node, why) = on();
                (node, why, None)
            }
        },
        Branching::Off => {
            let (node, why) = on();
            (node, why, None)
        }
    }
}

/// What the summary line of the attempt's event adds: where it started, what it closed, where
/// the next one starts (`git conference log` shows it).
pub(super) fn summary(step: &TreeStep) -> String {
    let mut s = format!(" from {}", step.from.label);
    for c in &step.closed {
        s.push_str(&format!("; closed {} ({})", c.label, c.reason));
    }
    s.push_str(&format!("; next from {}", step.next.label));
    if step.warning.is_some() {
        s.push_str(" (BRANCH line not followed)");
    }
    s
}
