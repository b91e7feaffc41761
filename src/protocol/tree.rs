//! The rules of the tree of ideas (DESIGN.md §12), as pure functions over a researcher's alive
//! branches (`model::tree`), with table tests:
//!
//! - an attempt counts as a try of the node it started from; when kept (it beats that node) its
//!   commit opens a branch, and the node it started from stays alive too (it may be extended
//!   again, in another direction) until it is closed;
//! - branches are closed past N alive (the worst beyond N), and when one is behind the leader
//!   by more than the noise after [`STALE_TRIES`] attempts from it without a gain; the leader
//!   (the researcher's best alive head) is never closed;
//! - `best-first` picks the head to extend by [`pick_best_first`]: the best while it gives
//!   (until its run of failures is one its researcher's success rate does not explain), then
//!   the others by a score with a bonus for heads with few children (UCB).
//!
//! The engine plans an attempt's [`TreeStep`] with [`plan`] before recording it; the reducer
//! applies the recorded step with [`apply`], so both run the same code and a resume replays the
//! tree from the events alone.

use crate::model::tree::{Branch, Closed, Node, TreeStep, TRIED_KEPT};
use crate::model::{CommitId, Direction};

/// Attempts from a branch without a gain after which it is closed if it is behind the leader by
/// more than the noise: the first stuck level's count (`keep::STUCK_LEVELS`), where the loop
/// advises a researcher to switch strategy.
pub const STALE_TRIES: u32 = 3;

/// The weight of the exploration bonus in [`pick_best_first`], on metrics scaled so that the
/// alive branches span 0 to 1 (UCB1's √2, rounded down: the metric counts as much as the bonus).
pub const EXPLORATION: f64 = 1.0;

/// What the rules read: N, the noise, the direction.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub max_alive: u32,
    /// How far apart two metrics must be to differ (`round::noise_threshold`).
    pub noise: f64,
    pub direction: Option<Direction>,
}

impl Rules {
    /// How much better `a` is than `b` (positive: better); a missing metric is the worst.
    fn gain(&self, a: Option<f64>, b: Option<f64>) -> f64 {
        match (a, b) {
            (Some(a), Some(b)) => match self.direction {
                Some(d) => d.gain(a, b),
                None => a - b,
            },
            (Some(_), None) => f64::INFINITY,
            (None, Some(_)) => f64::NEG_INFINITY,
            (None, None) => 0.0,
        }
    }
}

/// The leader: the best alive head (ties: the first opened).
pub fn leader<'a>(branches: &'a [Branch], rules: &Rules) -> Option<&'a Branch> {
    branches
        .iter()
        .fold(None, |best: Option<&Branch>, b| match best {
            Some(l) if rules.gain(b.metric, l.metric) <= 0.0 => Some(l),
            _ => Some(b),
        })
}

/// The line a branch's listing keeps for one attempt tried from it.
pub fn tried_line(verdict: &str, description: &str) -> String {
    let line = description.lines().next().unwrap_or("").trim();
    let cut: String = line.chars().take(100).collect();
    let more = if cut.len() < line.len() { "…" } else { "" };
    format!("{verdict}: {cut}{more}")
}

/// A number as a sentence shows it: at most 6 significant digits, no trailing zeros.
fn number(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Applies a recorded step to the researcher's branches: the try of the node it started from,
/// the branch it opened, the branches it closed. Returns the new best head's metric.
pub fn apply(branches: &mut Vec<Branch>, step: &TreeStep, tried: String) -> Option<f64> {
    if let Some(from) = branches.iter_mut().find(|b| b.head == step.from.commit) {
        from.tries += 1;
        from.stale = if step.opened.is_some() {
            0
        } else {
            from.stale + 1
        };
        from.tried.push(tried);
        let over = from.tried.len().saturating_sub(TRIED_KEPT);
        from.tried.drain(..over);
    }
    if let Some(opened) = &step.opened {
        if !branches.iter().any(|b| b.head == opened.head) {
            branches.push(opened.clone());
        }
    }
    close(branches, &step.closed);
    branches
        .iter()
        .find(|b| b.head == step.head)
        .and_then(|b| b.metric)
}

/// Takes the closed branches out.
pub fn close(branches: &mut Vec<Branch>, closed: &[Closed]) {
    branches.retain(|b| !closed.iter().any(|c| c.head == b.head));
}

/// The branches to close: the stale ones (behind the leader by more than the noise after
/// [`STALE_TRIES`] attempts without a gain), then, past N alive, the worst beyond N (ties: the
/// one tried more, then the older). Never the leader.
pub fn closings(branches: &[Branch], rules: &Rules) -> Vec<Closed> {
    let Some(lead) = leader(branches, rules) else {
        return Vec::new();
    };
    let lead_metric = lead.metric;
    let lead_head = lead.head.clone();
    let mut closed: Vec<Closed> = branches
        .iter()
        .filter(|b| b.head != lead_head && b.stale >= STALE_TRIES)
        .filter(|b| rules.gain(lead_metric, b.metric) > rules.noise)
        .map(|b| Closed {
            head: b.head.clone(),
            label: b.label.clone(),
            reason: format!(
                "behind the leader {} by more than the noise ({}) after {} attempts without a gain",
                lead.label,
                number(rules.noise),
                b.stale
            ),
        })
        .collect();
    let alive: Vec<Branch> = branches
        .iter()
        .filter(|b| !closed.iter().any(|c| c.head == b.head))
        .cloned()
        .collect();
    closed.extend(cap(&alive, &lead_head, rules));
    closed
}

/// Past N alive, the worst beyond N (ties: the one tried more, then the older), never `keep`.
pub fn cap(branches: &[Branch], keep: &CommitId, rules: &Rules) -> Vec<Closed> {
    let mut alive: Vec<&Branch> = branches.iter().collect();
    let mut closed = Vec::new();
    let max = rules.max_alive.max(1) as usize;
    while alive.len() > max {
        let count = alive.len();
        let Some(worst) = (0..count)
            .filter(|&i| alive[i].head != *keep)
            .min_by(|&i, &j| {
                rules
                    .gain(alive[i].metric, alive[j].metric)
                    .total_cmp(&0.0)
                    .then(alive[j].tries.cmp(&alive[i].tries))
                    .then(i.cmp(&j))
            })
        else {
            break;
        };
        let b = alive.remove(worst);
        closed.push(Closed {
            head: b.head.clone(),
            label: b.label.clone(),
            reason: format!("past {max} alive: the worst of {count}"),
        });
    }
    closed
}

/// The chance below which a leader's run of attempts without a gain counts as stuck in
/// [`patience`]: a run its researcher's success rate explains 19 times in 20 is left alone.
pub const STUCK_CHANCE: f64 = 0.05;

/// The most attempts in a row without a gain [`patience`] waits for, however rarely the
/// researcher's attempts gain.
pub const MAX_PATIENCE: u32 = 12;

/// A researcher's attempts so far, this one included: how many, and how many were kept.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Record {
    pub attempts: u64,
    pub kept: u64,
}

/// How many attempts in a row without a gain from the leader `best-first` waits for before it
/// tries elsewhere, given the researcher's record before the leader's current run of `stale`
/// failures: the shortest run, at least [`STALE_TRIES`] and at most [`MAX_PATIENCE`], whose
/// chance is below [`STUCK_CHANCE`] at the researcher's success rate
/// `p = (kept + 1) / (attempts before the run + 2)` (Laplace's rule: 2/3 after one kept).
///
/// Why: a searcher that refines a good leader (a hill climber's steps, builtin:tune's
/// shrinking local search) fails most of its attempts near it, and three failures in a row are
/// then its usual way to converge, not a dead end; leaving the leader there spends attempts on
/// heads behind it. A first gain that is a dead end fails where its researcher's attempts had
/// been gaining: its run is soon improbable, and it is left as early as before.
pub fn patience(record: Record, stale: u32) -> u32 {
    let before = record.attempts.saturating_sub(stale as u64);
    let kept = record.kept.min(before);
    let p = (kept as f64 + 1.0) / (before as f64 + 2.0);
    let mut n = STALE_TRIES;
    while n < MAX_PATIENCE && (1.0 - p).powi(n as i32) >= STUCK_CHANCE {
        n += 1;
    }
    n
}

/// `best-first`'s pick of the head to extend:
///
/// - the leader (the best alive head) while it gives: until its run of attempts without a gain
///   is longer than its researcher's success rate explains ([`patience`]; once the conference
///   left it, [`STALE_TRIES`] keep it left, so that a gain behind it does not call it back);
/// - then, among the other alive heads, the one with the highest
///
///     score = v + EXPLORATION · √( ln(1 + T) / (1 + n) )
///
///   where v is its metric scaled so that the worst alive head is 0 and the leader 1 (the span
///   is at least the noise), n the attempts made from it (its children) and T those made from
///   every alive head: UCB1 with the head's own metric as its value, so a head with few
///   children (a fresh branch, a fork point) gets its turn before one that keeps failing.
///
/// `from` is the node the attempt just made started from, `record` its researcher's attempts.
///
/// Why: extending the best is what the loop without a tree does, and while the best keeps
/// improving nothing beats it; a best that failed more often in a row than its researcher's
/// attempts usually do may be a dead end (the first big gain often is), and the way on may
/// start from a smaller gain elsewhere. A pure UCB over all heads needs a large bonus to ever
/// leave a leader whose metric is far ahead (the whole 0..1 range), and that bonus then spreads
/// attempts over ancestors while the best still gives; here the bonus only orders the
/// alternatives. An alternative that fails [`STALE_TRIES`] times while behind the leader is
/// closed ([`closings`]), so a dead end costs a few attempts, not a share of the budget. Ties:
/// the better metric, then the first opened.
pub fn pick_best_first(
    branches: &[Branch],
    rules: &Rules,
    from: &CommitId,
    record: Record,
) -> Option<(Node, String)> {
    let lead = leader(branches, rules)?;
    let wait = if *from == lead.head {
        patience(record, lead.stale)
    } else {
        STALE_TRIES
    };
    if lead.stale < wait || branches.len() == 1 {
        let why = format!(
            "best-first: the leader {} ({} attempt(s) from it without a gain)",
            lead.label, lead.stale
        );
        return Some((lead.node(), why));
    }
    let worst = branches
        .iter()
        .map(|b| rules.gain(lead.metric, b.metric))
        .filter(|g| g.is_finite())
        .fold(0.0_f64, f64::max);
    let span = worst.max(rules.noise).max(f64::MIN_POSITIVE);
    let total: u32 = branches.iter().map(|b| b.tries).sum();
    let log_total = (1.0 + total as f64).ln();
    let score = |b: &Branch| {
        let behind = rules.gain(lead.metric, b.metric);
        let v = if behind.is_finite() {
            1.0 - behind / span
        } else {
            0.0
        };
        v + EXPLORATION * (log_total / (1.0 + b.tries as f64)).sqrt()
    };
    let mut best: Option<(&Branch, f64)> = None;
    for b in branches.iter().filter(|b| b.head != lead.head) {
        let s = score(b);
        let better = match best {
            None => true,
            Some((c, cs)) => {
                s > cs + 1e-12 || ((s - cs).abs() <= 1e-12 && rules.gain(b.metric, c.metric) > 0.0)
            }
        };
        if better {
            best = Some((b, s));
        }
    }
    let (b, s) = best?;
    let why = format!(
        "best-first: {} (the leader {} failed {} times in a row; score {s:.2}, {} children)",
        b.label, lead.label, lead.stale, b.tries
    );
    Some((b.node(), why))
}

/// What an attempt does to the tree, planned before it is recorded: `branches` as they were
/// when it started, the node it started from, the branch it opened (kept) and the line its
/// try adds. `next` chooses the node the next attempt starts from among the branches left.
pub fn plan(
    branches: &[Branch],
    from: Node,
    opened: Option<Branch>,
    tried: String,
    rules: &Rules,
    next: impl FnOnce(&[Branch], &Node, Option<&Branch>) -> (Node, String, Option<String>),
) -> TreeStep {
    let mut after = branches.to_vec();
    let mut step = TreeStep {
        from,
        opened,
        closed: Vec::new(),
        head: CommitId::try_from("0".repeat(40).as_str()).expect("a commit id"),
        next: Node {
            commit: CommitId::try_from("0".repeat(40).as_str()).expect("a commit id"),
            metric: None,
            label: String::new(),
            depth: 0,
        },
        why: String::new(),
        warning: None,
    };
    apply(&mut after, &step, tried.clone());
    step.closed = closings(&after, rules);
    close(&mut after, &step.closed);
    step.head = leader(&after, rules)
        .map(|b| b.head.clone())
        .unwrap_or_else(|| step.from.commit.clone());
    let (node, why, warning) = next(&after, &step.from, step.opened.as_ref());
    step.next = node;
    step.why = why;
    step.warning = warning;
    step
}

#[cfg(test)]
mod tests;
