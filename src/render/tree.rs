//! The tree of ideas as people and agents read it (DESIGN.md §12), pure functions of
//! `model::tree` data: the prompt's section on a researcher's branches (with how to write a
//! `BRANCH:` line under `agent-decided`), the attempt tree `git conference log --graph` draws,
//! and the final report's path from the baseline to best, one line per step.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::tree::{Branching, LineageNode, TreeBrief};

/// A metric as these texts show it.
fn metric(m: Option<f64>) -> String {
    m.map(|v| format!("{v}"))
        .unwrap_or_else(|| "not measured".into())
}

/// The prompt's section on the tree: where this attempt starts, the alive branches (best
/// first), and who chooses where the next attempt starts.
pub fn prompt_section(t: &TreeBrief) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Your branches (the tree of ideas)");
    let _ = writeln!(
        s,
        "This attempt starts from {} (metric {}, depth {}): it is kept when it beats {}.",
        t.from.label,
        metric(t.from.metric),
        t.from.depth,
        metric(t.from.metric)
    );
    let mut alive: Vec<_> = t.branches.iter().collect();
    alive.sort_by(|a, b| {
        let (x, y) = (a.metric.unwrap_or(f64::NAN), b.metric.unwrap_or(f64::NAN));
        let order = x.total_cmp(&y);
        if t.minimize {
            order
        } else {
            order.reverse()
        }
    });
    let _ = writeln!(
        s,
        "Your alive branches (at most {}), best first; each kept attempt opens one:",
        t.max_alive
    );
    for b in alive {
        let _ = write!(
            s,
            "- {} (commit {})  metric {}  depth {}  {} attempt(s) from it",
            b.label,
            crate::model::short_id(&b.head),
            metric(b.metric),
            b.depth,
            b.tries
        );
        if b.tried.is_empty() {
            s.push('\n');
        } else {
            let _ = writeln!(s, "; latest: {}", b.tried.join(" | "));
        }
    }
    match t.mode {
        Branching::AgentDecided => {
            let _ = writeln!(
                s,
                "\nTo choose where your next attempt starts, end your note with one line: \
                 `BRANCH: fork` (it starts from the same node as this one, opening a second \
                 branch there: try the other of two promising directions), or `BRANCH: <id>` (an \
                 attempt id such as A-r1-i3, a commit, or `baseline`: any measured node of this \
                 conference, another researcher's included). Without one, the next attempt goes \
                 on from this one if it is kept, else starts again from the same node."
            );
        }
        Branching::BestFirst => {
            let _ = writeln!(
                s,
                "\nThe conference picks the node each attempt starts from: the best branch, with \
                 a bonus for branches with few attempts from them."
            );
        }
        Branching::Off => {}
    }
    s.push('\n');
    s
}

/// The attempt tree as `git conference log --graph` draws it: one line per node, its verdict,
/// metric and commit in columns, then its id drawn under its parent (oldest child first) with
/// what it changed, the path from the baseline to best marked `*`. `alive_only` folds the tree
/// as the page does (`model::tree::collapsed`), saying how many were folded.
pub fn graph(nodes: &[LineageNode], alive_only: bool) -> String {
    let by_commit: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.commit.as_str(), i))
        .collect();
    let mut children: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let parent = n.parent.as_deref().and_then(|p| by_commit.get(p).copied());
        children.entry(parent).or_default().push(i);
    }
    let folded = alive_only.then(|| crate::model::tree::collapsed(nodes).0);
    let shown = |i: usize| folded.as_ref().is_none_or(|shown| shown[i]);
    let mut out = String::new();
    let roots = children.get(&None).cloned().unwrap_or_default();
    let mut drawing = Drawing {
        nodes,
        children: &children,
        shown: &shown,
        out: &mut out,
    };
    for (k, &root) in roots.iter().enumerate() {
        drawing.draw(root, "", k + 1 == roots.len(), true);
    }
    out
}

/// What drawing one tree holds: the nodes, each one's children, which are shown, the text so
/// far.
struct Drawing<'a> {
    nodes: &'a [LineageNode],
    children: &'a BTreeMap<Option<usize>, Vec<usize>>,
    shown: &'a dyn Fn(usize) -> bool,
    out: &'a mut String,
}

impl Drawing<'_> {
    fn draw(&mut self, at: usize, prefix: &str, last: bool, root: bool) {
        let n = &self.nodes[at];
        let (branch, indent) = match (root, last) {
            (true, _) => ("", ""),
            (false, true) => ("└─ ", "   "),
            (false, false) => ("├─ ", "│  "),
        };
        let (columns, text) = node_line(n);
        let _ = writeln!(self.out, "{columns}  {prefix}{branch}{text}");
        let prefix = format!("{prefix}{indent}");
        let kids = self.children.get(&Some(at)).cloned().unwrap_or_default();
        let visible: Vec<usize> = kids.iter().copied().filter(|&c| (self.shown)(c)).collect();
        let hidden = kids.len() - visible.len();
        for (k, &c) in visible.iter().enumerate() {
            let last = k + 1 == visible.len() && hidden == 0;
            self.draw(c, &prefix, last, false);
        }
        if hidden > 0 {
            let _ = writeln!(
                self.out,
                "{prefix}└─ ({hidden} more attempt(s) from here, folded)"
            );
        }
    }
}

/// One node's line, as its aligned columns (the best-path mark, verdict, metric, commit) and
/// the text drawn in the tree (id, what it changed, whether it is alive or best).
fn node_line(n: &LineageNode) -> (String, String) {
    let mark = if n.on_best_path { '*' } else { ' ' };
    let columns = format!(
        "{mark} {:<9} {:<10} {}",
        n.verdict,
        n.metric
            .map(|m| format!("{m}"))
            .unwrap_or_else(|| "-".into()),
        crate::model::short_id(&n.commit)
    );
    let mut text = n.label.clone();
    if !n.description.is_empty() {
        let _ = write!(text, "  {}", super::format::one_line(&n.description, 70));
    }
    let mut tags = Vec::new();
    if n.alive {
        tags.push("alive");
    }
    if n.best {
        tags.push("best");
    }
    if !tags.is_empty() {
        let _ = write!(text, "  ({})", tags.join(", "));
    }
    (columns, text)
}

/// The final report's path from the baseline to best, one line per step: each kept step's id,
/// its metric and what it changed. A step that does not start from the line before it says where
/// it started (a finding that went back to an earlier node), and a pick on best what it merged
/// onto what: with branching, the finding a round merged may have started from an older node
/// than the best it was merged onto.
pub fn best_path(nodes: &[LineageNode]) -> String {
    let mut path: Vec<&LineageNode> = nodes.iter().filter(|n| n.on_best_path).collect();
    path.sort_by_key(|n| n.best_path_step);
    if path.is_empty() {
        return String::new();
    }
    let label_of = |commit: &str| {
        nodes.iter().find(|n| n.commit == commit).map_or_else(
            || crate::model::short_id(commit).to_string(),
            |n| n.label.clone(),
        )
    };
    let mut s = String::from("## Path from the baseline to best\n\n");
    for (k, n) in path.iter().enumerate() {
        let what = if n.description.is_empty() {
            String::new()
        } else {
            format!(" — {}", super::format::one_line(&n.description, 120))
        };
        let before = k.checked_sub(1).map(|j| path[j]);
        let whence = match (&n.parent, before) {
            (Some(parent), Some(b)) if *parent != b.commit => match n.verdict.as_str() {
                "merged" => format!(", {} merged onto {}", b.label, label_of(parent)),
                _ => format!(", from {}", label_of(parent)),
            },
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{}. {} ({}{whence}): {}{what}",
            k + 1,
            n.label,
            crate::model::short_id(&n.commit),
            metric(n.metric)
        );
    }
    s.push('\n');
    s
}

/// What `status` shows of each researcher's tree (branching on; nothing off): its alive
/// branches best first, `*` its best (where its branch points), `>` the node its next attempt
/// starts from, with each one's metric, depth and attempts.
pub fn status_lines(st: &crate::model::state::State, name: &str, minimize: bool) -> Vec<String> {
    let mut lines = Vec::new();
    if st.researchers.values().all(|r| r.branches.is_empty()) {
        return lines;
    }
    lines.push(String::new());
    lines.push(format!(
        "Branches (* best head, > next attempt's start; `git conference log {name} --graph` draws the tree):"
    ));
    for (id, r) in &st.researchers {
        let mut alive: Vec<_> = r.branches.iter().collect();
        alive.sort_by(|a, b| {
            let (x, y) = (a.metric.unwrap_or(f64::NAN), b.metric.unwrap_or(f64::NAN));
            let order = x.total_cmp(&y);
            if minimize {
                order
            } else {
                order.reverse()
            }
        });
        let next = r.next.as_ref().map(|n| &n.commit);
        for b in alive {
            let mark = match (b.head == r.head, Some(&b.head) == next) {
                (true, true) => "*>",
                (true, false) => "* ",
                (false, true) => " >",
                (false, false) => "  ",
            };
            lines.push(format!(
                "  {id} {mark} {:<16} {:>12}  depth {:<3} {} attempt(s) from it",
                b.label,
                super::format::fmt(b.metric),
                b.depth,
                b.tries
            ));
        }
        if let Some(n) = r
            .next
            .as_ref()
            .filter(|n| !r.branches.iter().any(|b| b.head == n.commit))
        {
            lines.push(format!(
                "  {id}  > {:<16} {:>12}  depth {:<3} (not an alive branch)",
                n.label,
                super::format::fmt(n.metric),
                n.depth
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        commit: &str,
        parent: Option<&str>,
        label: &str,
        verdict: &str,
        step: u32,
    ) -> LineageNode {
        LineageNode {
            commit: commit.repeat(40),
            parent: parent.map(|p| p.repeat(40)),
            label: label.into(),
            researcher: None,
            round: None,
            iteration: None,
            verdict: verdict.into(),
            metric: Some(1.0),
            description: String::new(),
            alive: false,
            best: false,
            on_best_path: true,
            best_path_step: Some(step),
        }
    }

    /// Round 2's finding went back to the baseline; the path says so, and what the pick on best
    /// merged onto what, instead of reading as a step from best r1 to the finding.
    #[test]
    fn the_path_says_where_a_step_that_went_back_started() {
        let nodes = [
            node("a", None, "baseline", "baseline", 0),
            node("b", Some("a"), "A-r1-i1", "kept", 1),
            node("c", Some("b"), "best r1 (A)", "merged", 2),
            node("d", Some("a"), "A-r2-i4", "kept", 3),
            node("e", Some("d"), "A-r2-i5", "kept", 4),
            node("f", Some("c"), "best r2 (A)", "merged", 5),
        ];
        let text = best_path(&nodes);
        let lines: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(lines[1], "2. A-r1-i1 (bbbbbbbbbb): 1", "{text}");
        assert_eq!(lines[2], "3. best r1 (A) (cccccccccc): 1", "{text}");
        assert_eq!(
            lines[3], "4. A-r2-i4 (dddddddddd, from baseline): 1",
            "{text}"
        );
        assert_eq!(lines[4], "5. A-r2-i5 (eeeeeeeeee): 1", "{text}");
        assert_eq!(
            lines[5], "6. best r2 (A) (ffffffffff, A-r2-i5 merged onto best r1 (A)): 1",
            "{text}"
        );
    }
}
