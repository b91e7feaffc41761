//! The tree of ideas as the record holds it (DESIGN.md §12): the rules' settings from the
//! configuration, a node's depth from git, the node a `BRANCH: <id>` line names (an attempt id,
//! a commit of the conference's tree, the baseline), and what a round start does to each
//! researcher's branches. The rules themselves are `protocol::tree`; the research phase plans an
//! attempt's step with them, the round start here.

use std::collections::BTreeMap;

use anyhow::Result;
use git2::{Oid, Repository};

use crate::engine::record::ledger;
use crate::engine::state::State;
use crate::engine::Conference;
use crate::model::tree::{attempt_label, Branch, Branching, Closed, Node, RoundBranches};
use crate::model::{CommitId, Verdict};
use crate::protocol::tree::Rules;

/// The rules' settings: N, the noise threshold, the direction.
pub fn rules(conf: &Conference, st: &State) -> Rules {
    Rules {
        max_alive: conf.config.max_alive_branches,
        noise: crate::engine::stop::rules::noise_threshold(conf, st),
        direction: conf.direction(),
    }
}

/// Whether this conference keeps a tree.
pub fn on(conf: &Conference) -> bool {
    conf.config.branching.is_on()
}

/// Commits from the baseline to `commit` along first parents (the kept steps to it).
pub fn depth(repo: &Repository, baseline: &CommitId, commit: Oid) -> u32 {
    let count = || -> Result<u32, git2::Error> {
        let mut walk = repo.revwalk()?;
        walk.push(commit)?;
        walk.hide(baseline.oid())?;
        walk.simplify_first_parent()?;
        Ok(walk.count() as u32)
    };
    count().unwrap_or(0)
}

/// The baseline as a node.
pub fn baseline_node(st: &State) -> Node {
    Node {
        commit: st.baseline_commit.clone(),
        metric: st.baseline_metric,
        label: "baseline".into(),
        depth: 0,
    }
}

/// The node a `BRANCH:` line names: `baseline`, an attempt id (`A-r1-i3`), or a commit (at
/// least 4 hex digits) of an alive branch or a measured attempt of this conference. Err: why
/// it names none, as the attempt's warning says it.
pub fn resolve(conf: &Conference, st: &State, text: &str) -> Result<Node, String> {
    let text = text.trim();
    let named = |why: &str| {
        format!(
            "BRANCH: `{text}` {why} (write an attempt id such as A-r1-i3, a commit of one, `baseline` or `fork`)"
        )
    };
    if text.is_empty() {
        return Err(named("names no node"));
    }
    if text.eq_ignore_ascii_case("baseline") {
        return Ok(baseline_node(st));
    }
    let repo = conf.open_repo().map_err(|e| named(&e.to_string()))?;
    let hex = text.len() >= 4 && text.chars().all(|c| c.is_ascii_hexdigit());
    let lower = text.to_ascii_lowercase();
    if hex {
        let alive = st.researchers.values().flat_map(|r| r.branches.iter());
        let mut found: Vec<Node> = alive
            .filter(|b| b.head.starts_with(&lower))
            .map(Branch::node)
            .collect();
        if st.baseline_commit.starts_with(&lower) {
            found.push(baseline_node(st));
        }
        if found.is_empty() {
            found = measured_attempts(conf, st, |a| {
                a.commit.as_ref().is_some_and(|c| c.starts_with(&lower))
            })
            .map_err(|e| named(&e.to_string()))?
            .into_iter()
            .map(|(label, commit, metric)| node(&repo, st, label, commit, metric))
            .collect();
        }
        found.dedup_by(|a, b| a.commit == b.commit);
        return match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(named("is no measured node of this conference")),
            n => Err(named(&format!("is ambiguous ({n} nodes start with it)"))),
        };
    }
    let Some((researcher, round, iteration)) = parse_label(text) else {
        return Err(named("is neither an attempt id nor a commit"));
    };
    let label = attempt_label(&researcher, round, iteration);
    let records = ledger::round_attempts(conf, round).map_err(|e| named(&e.to_string()))?;
    let Some(a) = records
        .iter()
        .rev()
        .find(|a| a.researcher == researcher && a.iteration == iteration)
    else {
        return Err(named("is no attempt of this conference"));
    };
    match (&a.commit, a.metric, measured(a.verdict.known())) {
        (Some(commit), Some(metric), true) => {
            Ok(node(&repo, st, label, commit.clone(), Some(metric)))
        }
        _ => Err(named(&format!(
            "was {} without a measurement to start from",
            a.verdict
        ))),
    }
}

/// Verdicts whose attempt measured its tree in full: nodes one may start from.
fn measured(verdict: Option<Verdict>) -> bool {
    matches!(verdict, Some(Verdict::Kept | Verdict::Reverted))
}

fn node(
    repo: &Repository,
    st: &State,
    label: String,
    commit: CommitId,
    metric: Option<f64>,
) -> Node {
    Node {
        depth: depth(repo, &st.baseline_commit, commit.oid()),
        commit,
        metric,
        label,
    }
}

/// (label, commit, metric) of every measured attempt `keep` holds, oldest first.
fn measured_attempts(
    conf: &Conference,
    st: &State,
    keep: impl Fn(&crate::model::AttemptRecord) -> bool,
) -> Result<Vec<(String, CommitId, Option<f64>)>> {
    Ok(ledger::all_attempts(conf, st)?
        .into_iter()
        .filter(|a| measured(a.verdict.known()) && keep(a))
        .filter_map(|a| {
            let label = attempt_label(&a.researcher, a.round, a.iteration);
            Some((label, a.commit?, a.metric))
        })
        .collect())
}

/// `A-r1-i3` (also `a-R1-I3`, `A r1 i3`) → (researcher, round, iteration).
pub fn parse_label(text: &str) -> Option<(String, u32, u32)> {
    let parts: Vec<&str> = text
        .split(|c: char| c == '-' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .collect();
    let [who, round, iteration] = parts.as_slice() else {
        return None;
    };
    let number = |p: &str, prefix: char| {
        let rest = p
            .strip_prefix(prefix)
            .or(p.strip_prefix(prefix.to_ascii_uppercase()))?;
        rest.parse::<u32>().ok()
    };
    let who_ok = !who.is_empty() && who.chars().all(|c| c.is_ascii_alphabetic());
    Some((
        who_ok.then(|| who.to_ascii_uppercase())?,
        number(round, 'r')?,
        number(iteration, 'i')?,
    ))
}

/// What the start of `round` does to each researcher's branches (with branching on; empty
/// off): the round's start (`heads`, the conference's best) opens a branch, the researcher's
/// previous best head gives way to it (its line continues in best when review validated it),
/// and past N alive the worst are closed. The other alive branches stay: a researcher may go
/// back to them.
pub fn round_branches(
    conf: &Conference,
    st: &State,
    round: u32,
    heads: &BTreeMap<String, CommitId>,
) -> Result<BTreeMap<String, RoundBranches>> {
    let mut out = BTreeMap::new();
    if !on(conf) {
        return Ok(out);
    }
    let repo = conf.open_repo()?;
    let rules = rules(conf, st);
    for (id, r) in &st.researchers {
        let Some(head) = heads.get(id) else { continue };
        let label = if *head == st.baseline_commit {
            "baseline".to_string()
        } else {
            format!("round {round} start")
        };
        let opened = Branch {
            head: head.clone(),
            metric: st.best.metric,
            label,
            depth: depth(&repo, &st.baseline_commit, head.oid()),
            tries: 0,
            stale: 0,
            tried: Vec::new(),
        };
        let mut closed: Vec<Closed> = r
            .branches
            .iter()
            .filter(|b| b.head == r.head && b.head != *head)
            .map(|b| Closed {
                head: b.head.clone(),
                label: b.label.clone(),
                reason: format!("round {round} starts from the conference's best"),
            })
            .collect();
        let mut alive: Vec<Branch> = r.branches.clone();
        crate::protocol::tree::close(&mut alive, &closed);
        if !alive.iter().any(|b| b.head == opened.head) {
            alive.insert(0, opened.clone());
        }
        closed.extend(crate::protocol::tree::cap(&alive, &opened.head, &rules));
        out.insert(id.clone(), RoundBranches { opened, closed });
    }
    Ok(out)
}

/// The mode in force (for the layers that only read).
pub fn mode(conf: &Conference) -> Branching {
    conf.config.branching
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_ids_as_people_write_them() {
        for (text, expected) in [
            ("A-r1-i3", Some(("A", 1, 3))),
            ("b-R12-I4", Some(("B", 12, 4))),
            ("C r2 i10", Some(("C", 2, 10))),
            ("A-r1", None),
            ("A-x1-i3", None),
            ("1-r1-i3", None),
        ] {
            let got = parse_label(text);
            let want = expected.map(|(w, r, i)| (w.to_string(), r, i));
            assert_eq!(got, want, "{text}");
        }
    }
}
