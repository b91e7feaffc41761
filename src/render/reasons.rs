//! Why attempts failed, summarised for people: the reports list each kind of failure with its
//! count and one example, and the progress line, `status`, `log` and the results table show an
//! attempt's reason next to its verdict. One place decides how a reason is worded and grouped.

use crate::model::reasons::{reason_text, shows_reason};
use crate::model::{AttemptRecord, Verdict, Word};
use crate::render::format::one_line;

/// The kind of failure a reason stands for: the verdict and the reason's first clause (up to a
/// colon or parenthesis, where details such as output tails begin).
pub fn kind(verdict: &Word<Verdict>, reason: Option<&str>) -> String {
    let text = reason_text(verdict, reason);
    let head = text
        .split([':', '(', '\n'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let head = if head.is_empty() { text } else { head };
    format!("{verdict}: {}", one_line(&head, 80))
}

/// One kind of failure: how many attempts, and the first one as an example.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub kind: String,
    pub count: usize,
    /// `round 2, researcher A, iteration 3: <reason>`
    pub example: String,
}

/// The failures among `attempts`, most frequent first (ties: first seen first).
pub fn summarise(attempts: &[AttemptRecord]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for a in attempts.iter().filter(|a| shows_reason(&a.verdict)) {
        let k = kind(&a.verdict, a.reason.as_deref());
        match groups.iter_mut().find(|g| g.kind == k) {
            Some(g) => g.count += 1,
            None => groups.push(Group {
                kind: k,
                count: 1,
                example: format!(
                    "round {}, researcher {}, iteration {}: {}",
                    a.round,
                    a.researcher,
                    a.iteration,
                    one_line(&reason_text(&a.verdict, a.reason.as_deref()), 200)
                ),
            }),
        }
    }
    // Stable: equal counts keep the order they were first seen in.
    groups.sort_by_key(|g| std::cmp::Reverse(g.count));
    groups
}

/// The summary as markdown bullets (a sentence when nothing failed).
pub fn markdown(attempts: &[AttemptRecord]) -> String {
    let groups = summarise(attempts);
    if groups.is_empty() {
        return format!(
            "No attempt was rejected, crashed, timed out or left the code unchanged ({} attempt(s) in all).\n",
            attempts.len()
        );
    }
    groups
        .iter()
        .map(|g| {
            format!(
                "- **{}** — {} attempt(s); e.g. {}\n",
                g.kind, g.count, g.example
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(i: u32, verdict: &str, reason: Option<&str>) -> AttemptRecord {
        AttemptRecord {
            round: 1,
            researcher: "A".into(),
            iteration: i,
            commit: None,
            tree: String::new(),
            metric: None,
            delta: None,
            verdict: verdict.into(),
            description: String::new(),
            reason: reason.map(str::to_string),
            timestamp: String::new(),
            sub_metrics: Default::default(),
            tokens: Default::default(),
            cost_usd: Default::default(),
            agent_s: None,
            eval_s: None,
            placement: None,
            machine: None,
            sweep: None,
        }
    }

    #[test]
    fn kinds_group_by_verdict_and_first_clause() {
        let cases = [
            (
                "rejected",
                Some("changes frozen path eval.sh (frozen: eval.sh)"),
                "rejected: changes frozen path eval.sh",
            ),
            (
                "crashed",
                Some("evaluation exited with code 1: Traceback | boom"),
                "crashed: evaluation exited with code 1",
            ),
            (
                "crashed",
                Some("no metric `score` in the output"),
                "crashed: no metric `score` in the output",
            ),
            ("no_change", None, "no_change: the agent changed nothing"),
            ("timeout", Some(""), "timeout: timed out"),
        ];
        for (verdict, reason, want) in cases {
            assert_eq!(kind(&verdict.into(), reason), want);
        }
    }

    #[test]
    fn summary_counts_each_kind_with_its_first_example() {
        let attempts = vec![
            attempt(1, "kept", None),
            attempt(2, "crashed", Some("evaluation exited with code 1: first")),
            attempt(3, "rejected", Some("changes frozen path a (frozen: a)")),
            attempt(4, "crashed", Some("evaluation exited with code 1: second")),
            attempt(5, "reverted", None),
        ];
        let groups = summarise(&attempts);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(groups[0].kind, "crashed: evaluation exited with code 1");
        assert_eq!(groups[0].count, 2);
        assert!(groups[0].example.contains("iteration 2") && groups[0].example.contains("first"));
        assert_eq!(groups[1].count, 1);
        assert!(markdown(&attempts).contains("— 2 attempt(s)"));
        assert!(markdown(&attempts[..1]).starts_with("No attempt was rejected"));
    }

    /// The reports' section on why attempts failed: kinds most frequent first, each with its
    /// first example (a long reason cut, on one line).
    #[test]
    fn the_failure_summary_in_the_reports() {
        let long = format!("evaluation exited with code 1: {}", "x".repeat(300));
        let attempts = vec![
            attempt(1, "crashed", Some(&long)),
            attempt(
                2,
                "rejected",
                Some("changes frozen path eval.sh (frozen: eval.sh)"),
            ),
            attempt(
                3,
                "crashed",
                Some("evaluation exited with code 1: second\nline"),
            ),
            attempt(4, "no_change", None),
            attempt(5, "timeout", Some("")),
            attempt(6, "kept", None),
        ];
        insta::assert_snapshot!(markdown(&attempts));
    }

    #[test]
    fn one_line_cuts_long_text() {
        assert_eq!(one_line("a\n b", 10), "a b");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
