//! The tree of ideas as data (DESIGN.md §12): every attempt is a commit whose git parent is the
//! node it started from, so the attempts form a tree, and with `- **Branching:**` on a
//! researcher keeps up to N of its nodes alive as heads it may extend (its branches). What an
//! attempt did to the tree (the node it started from, the branches it closed, the node the next
//! attempt starts from) is recorded in its `researcher.iteration` event ([`TreeStep`]), so the
//! reducer replays the tree from the events alone and a resume finds the same one.
//!
//! With branching off none of this is written: events, notes and `state.json` are the bytes
//! earlier releases wrote.

use serde::{Deserialize, Serialize};

use super::CommitId;

/// `- **Branching:**` under `## Researchers`: who picks the node the next attempt starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Branching {
    /// One chain per researcher: each attempt starts from its latest kept one (no tree kept).
    #[default]
    Off,
    /// The agent's note may end with `BRANCH: fork` or `BRANCH: <commit or attempt id>`.
    AgentDecided,
    /// The conference picks the head to extend: the best, with a bonus for heads with few
    /// children (`protocol::tree::pick_best_first`).
    BestFirst,
}

impl Branching {
    /// The word conference.md writes (`off`, `agent-decided`, `best-first`).
    pub fn parse(value: &str) -> Option<Branching> {
        match value
            .trim()
            .to_lowercase()
            .replace([' ', '_'], "-")
            .as_str()
        {
            "off" | "no" | "none" => Some(Branching::Off),
            "agent-decided" | "agent" => Some(Branching::AgentDecided),
            "best-first" => Some(Branching::BestFirst),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Branching::Off => "off",
            Branching::AgentDecided => "agent-decided",
            Branching::BestFirst => "best-first",
        }
    }

    pub fn is_on(self) -> bool {
        self != Branching::Off
    }
}

/// `- **Max alive branches:**` when conference.md does not say.
pub const DEFAULT_MAX_ALIVE: u32 = 3;

/// A node of the tree an attempt may start from: a commit and its metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub commit: CommitId,
    pub metric: Option<f64>,
    /// How people name it: an attempt id (`A-r1-i3`), `round 2 start`, `baseline`.
    pub label: String,
    /// Kept steps from the baseline to it.
    pub depth: u32,
}

/// Attempts from one branch, in words, that its listing keeps (the newest).
pub const TRIED_KEPT: usize = 4;

/// A researcher's alive branch: a head it may extend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    pub head: CommitId,
    pub metric: Option<f64>,
    /// `A-r1-i3`, or `round 2 start`.
    pub label: String,
    /// Kept steps from the baseline to the head.
    pub depth: u32,
    /// Attempts started from this head (its children in the tree).
    pub tries: u32,
    /// Attempts started from it since one of them was kept.
    pub stale: u32,
    /// What was tried from it, newest last (at most [`TRIED_KEPT`]): `reverted: lr 3e-4 -> 1e-3`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<String>,
}

impl Branch {
    /// The node at this branch's head.
    pub fn node(&self) -> Node {
        Node {
            commit: self.head.clone(),
            metric: self.metric,
            label: self.label.clone(),
            depth: self.depth,
        }
    }
}

/// A branch closed, and why (`past 3 alive: the worst of 4`, `behind the leader …`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Closed {
    pub head: CommitId,
    pub label: String,
    pub reason: String,
}

/// What one attempt did to its researcher's tree, recorded in its `researcher.iteration` event
/// (the commit point) before any effect: the reducer applies it as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeStep {
    /// The node the attempt started from (its commit's git parent).
    pub from: Node,
    /// Kept: the branch its commit opens (depth one more than `from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened: Option<Branch>,
    /// Branches closed after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed: Vec<Closed>,
    /// The researcher's best alive head after it (its branch ref points there).
    pub head: CommitId,
    /// The node the next attempt starts from, and why it was chosen.
    pub next: Node,
    pub why: String,
    /// A `BRANCH:` line that could not be followed, and what was done instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// What a round start does to one researcher's tree (`round.started`, with branching on): the
/// round's start opens a branch (the conference's best, every validated finding merged), the
/// researcher's previous best head gives way to it, and the worst beyond N alive are closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundBranches {
    pub opened: Branch,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed: Vec<Closed>,
}

/// What a researcher's prompt shows of its tree (branching on).
#[derive(Debug, Clone, PartialEq)]
pub struct TreeBrief {
    pub mode: Branching,
    /// The node this attempt starts from.
    pub from: Node,
    /// Its alive branches.
    pub branches: Vec<Branch>,
    pub max_alive: u32,
    /// Lower metric is better.
    pub minimize: bool,
}

/// One node of the attempt tree as `git conference log --graph`, its JSON, the page and the
/// final report show it: an attempt, the baseline, or a commit between them (a knowledge
/// transfer's pick on best, a round's start).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineageNode {
    pub commit: String,
    /// Its git parent (the node it started from); None for the baseline.
    pub parent: Option<String>,
    /// `A-r1-i3`, `baseline`, `best after round 1 (A)`, `round 2 start`.
    pub label: String,
    pub researcher: Option<String>,
    pub round: Option<u32>,
    pub iteration: Option<u32>,
    /// The attempt's verdict, `baseline`, `merged` (a pick on best) or `joined` (a round start).
    pub verdict: String,
    pub metric: Option<f64>,
    pub description: String,
    /// An alive branch's head (with branching off: a researcher's head).
    pub alive: bool,
    /// The conference's best.
    pub best: bool,
    /// On the path from the baseline to best.
    pub on_best_path: bool,
    /// Its step on that path (0: the baseline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_path_step: Option<u32>,
}

/// The id people write for an attempt: `A-r1-i3`.
pub fn attempt_label(researcher: &str, round: u32, iteration: u32) -> String {
    format!("{researcher}-r{round}-i{iteration}")
}

/// Which nodes the tree folded to its alive branches and the path to best shows (`log --graph`'s
/// and the page's default view): the roots, the alive heads, the nodes on the path to best, and
/// every node below one of them; and, for each shown node, how many nodes hang folded from it
/// (in the subtrees of its children that are not shown). Linear in the nodes: at 10,000
/// attempts the page asks for it at each event.
pub fn collapsed(nodes: &[LineageNode]) -> (Vec<bool>, Vec<usize>) {
    let at: std::collections::HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.commit.as_str(), i))
        .collect();
    let parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|n| n.parent.as_deref().and_then(|p| at.get(p).copied()))
        .collect();
    let mut shown = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if !(n.alive || n.on_best_path || parent[i].is_none()) {
            continue;
        }
        let mut k = Some(i);
        while let Some(j) = k.filter(|&j| !shown[j]) {
            shown[j] = true;
            k = parent[j];
        }
    }
    // Each folded node counts once, at its nearest shown ancestor (found once per node).
    let mut owner: Vec<Option<usize>> = (0..nodes.len()).map(|i| shown[i].then_some(i)).collect();
    let mut folded = vec![0; nodes.len()];
    let mut climbed = shown.clone();
    for i in 0..nodes.len() {
        let mut climb = Vec::new();
        let mut k = Some(i);
        while let Some(j) = k.filter(|&j| !climbed[j]) {
            climbed[j] = true;
            climb.push(j);
            k = parent[j];
        }
        let found = k.and_then(|j| owner[j]);
        for j in climb {
            owner[j] = found;
        }
        if let (false, Some(o)) = (shown[i], owner[i]) {
            folded[o] += 1;
        }
    }
    (shown, folded)
}

/// The node with commit `commit` and its ancestors, from the root (the baseline) down to it;
/// None when no node has that commit.
pub fn ancestry<'a>(nodes: &'a [LineageNode], commit: &str) -> Option<Vec<&'a LineageNode>> {
    let at: std::collections::HashMap<&str, &LineageNode> =
        nodes.iter().map(|n| (n.commit.as_str(), n)).collect();
    let mut path = vec![*at.get(commit)?];
    let mut seen = std::collections::HashSet::from([commit]);
    while let Some(p) = path.last().and_then(|n| n.parent.as_deref()) {
        match at.get(p) {
            Some(n) if seen.insert(p) => path.push(n),
            _ => break,
        }
    }
    path.reverse();
    Some(path)
}

/// The marker of a branch request in an agent's note.
pub const BRANCH_MARKER: &str = "BRANCH:";

/// What an agent's note asked of the tree: `BRANCH: fork` or `BRANCH: <id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchRequest {
    Fork,
    /// A commit (full or abbreviated), an attempt id (`A-r1-i3`) or `baseline`.
    Node(String),
}

/// Splits an agent's note into its text and the last `BRANCH:` line it holds (the note "ends
/// with" one; earlier ones give way to it). Case as written for ids; `fork` in any case.
pub fn split_branch(note: &str) -> (String, Option<BranchRequest>) {
    let (text, last) = split_marked(note, BRANCH_MARKER);
    let request = last.map(|what| {
        let what = what.trim_matches(|c: char| "`*\"'.".contains(c));
        if what.eq_ignore_ascii_case("fork") {
            BranchRequest::Fork
        } else {
            BranchRequest::Node(what.to_string())
        }
    });
    (text, request)
}

/// Splits an agent's note into its text without the lines that start with `marker` (in any
/// case, after leading blanks) and what follows the marker on the last of them, trimmed: the
/// one reading of the note's requests (`BRANCH:`, `SWEEP:`).
pub fn split_marked<'a>(note: &'a str, marker: &str) -> (String, Option<&'a str>) {
    let mut kept = Vec::new();
    let mut last = None;
    for line in note.lines() {
        let trimmed = line.trim_start();
        let marked = trimmed
            .get(..marker.len())
            .is_some_and(|m| m.eq_ignore_ascii_case(marker));
        match marked {
            true => last = Some(trimmed[marker.len()..].trim()),
            false => kept.push(line),
        }
    }
    (kept.join("\n").trim().to_string(), last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branching_words() {
        for (word, mode) in [
            ("off", Branching::Off),
            ("Agent-decided", Branching::AgentDecided),
            ("agent decided", Branching::AgentDecided),
            ("best_first", Branching::BestFirst),
            ("BEST-FIRST", Branching::BestFirst),
        ] {
            assert_eq!(Branching::parse(word), Some(mode), "{word}");
        }
        assert_eq!(Branching::parse("greedy"), None);
        assert_eq!(
            Branching::parse("best-first").unwrap().as_str(),
            "best-first"
        );
    }

    #[test]
    fn the_last_branch_line_of_a_note_is_its_request() {
        let (text, req) = split_branch("tried x\nBRANCH: fork\n");
        assert_eq!((text.as_str(), req), ("tried x", Some(BranchRequest::Fork)));
        let (text, req) = split_branch("a\nbranch: A-r1-i2\nmore\nBRANCH: `1a2b3c4`");
        assert_eq!(text, "a\nmore");
        assert_eq!(req, Some(BranchRequest::Node("1a2b3c4".into())));
        assert_eq!(split_branch("no request").1, None);
        assert_eq!(
            split_branch("BRANCH:").1,
            Some(BranchRequest::Node(String::new()))
        );
    }

    fn node(commit: char, parent: Option<char>, alive: bool, best_path: bool) -> LineageNode {
        LineageNode {
            commit: commit.to_string().repeat(40),
            parent: parent.map(|p| p.to_string().repeat(40)),
            label: commit.to_string(),
            researcher: None,
            round: None,
            iteration: None,
            verdict: "kept".into(),
            metric: None,
            description: String::new(),
            alive,
            best: false,
            on_best_path: best_path,
            best_path_step: None,
        }
    }

    /// a ─ b ─ c (best path); a ─ d ─ e (e alive); a ─ f ─ g (nothing: folded, two nodes at a);
    /// b ─ h (folded at b).
    #[test]
    fn the_collapsed_tree_keeps_alive_branches_and_the_best_path_and_counts_the_rest() {
        let nodes = [
            node('a', None, false, true),
            node('b', Some('a'), false, true),
            node('c', Some('b'), false, true),
            node('d', Some('a'), false, false),
            node('e', Some('d'), true, false),
            node('f', Some('a'), false, false),
            node('g', Some('f'), false, false),
            node('h', Some('b'), false, false),
        ];
        let (shown, folded) = collapsed(&nodes);
        let shown: String = nodes
            .iter()
            .zip(&shown)
            .filter(|(_, s)| **s)
            .map(|(n, _)| n.label.as_str())
            .collect();
        assert_eq!(shown, "abcde");
        assert_eq!(folded, [2, 1, 0, 0, 0, 0, 0, 0]);
        let path: Vec<&str> = ancestry(&nodes, &"g".repeat(40))
            .unwrap()
            .iter()
            .map(|n| n.label.as_str())
            .collect();
        assert_eq!(path, ["a", "f", "g"]);
        assert!(ancestry(&nodes, &"z".repeat(40)).is_none());
    }

    /// Refs are input: a parent loop ends the walks instead of hanging them.
    #[test]
    fn a_loop_of_parents_ends_the_walks() {
        let nodes = [
            node('a', Some('b'), false, false),
            node('b', Some('a'), true, false),
        ];
        let (shown, _) = collapsed(&nodes);
        assert_eq!(shown, [true, true]);
        assert_eq!(ancestry(&nodes, &"a".repeat(40)).unwrap().len(), 2);
    }
}
