//! A round's knowledge transfer page: best after the round, what became of each validated
//! finding, and the shared knowledge the round added.

use std::fmt::Write;

use super::format::fmt;
use crate::model::state::State;
use crate::model::PickRecord;

/// The round's knowledge transfer page: best after the round, each pick, the knowledge added.
pub fn render(st: &State, picks: &[PickRecord], knowledge: &[String]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Knowledge Transfer — Round {}\n", st.round);
    let _ = writeln!(
        md,
        "Best after the round: {} (`{}`)\n",
        fmt(st.best.metric),
        crate::model::short_id(&st.best.commit)
    );
    if picks.is_empty() {
        let _ = writeln!(md, "No validated finding to transfer this round.");
    }
    for p in picks {
        let conflicts = if p.conflicts.is_empty() {
            String::new()
        } else {
            format!(
                " (conflicting files kept from best, which has the larger gain: {})",
                p.conflicts.join(", ")
            )
        };
        let _ = writeln!(
            md,
            "- Researcher {}: **{}** — {}{conflicts}",
            p.researcher, p.result, p.reason
        );
    }
    if !knowledge.is_empty() {
        let _ = writeln!(md, "\n## Shared knowledge added\n");
    }
    for k in knowledge {
        let _ = writeln!(md, "- {k}");
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(researcher: &str, result: &str, reason: &str, conflicts: &[&str]) -> PickRecord {
        PickRecord {
            researcher: researcher.into(),
            finding: "1".repeat(40).try_into().unwrap(),
            result: result.into(),
            reason: reason.into(),
            conflicts: conflicts.iter().map(|c| c.to_string()).collect(),
            metric: Some(9.1),
        }
    }

    /// The knowledge transfer page: a merged pick with a conflict, a dropped one, the
    /// knowledge added; and a round with nothing to transfer.
    #[test]
    fn the_knowledge_transfer_page() {
        let mut st = crate::model::state::sample();
        st.round = 2;
        st.best.commit = "ab12cd34ef".repeat(4).try_into().unwrap();
        st.best.metric = Some(9.1);
        let picks = [
            pick(
                "A",
                "merged",
                "the combined best improved to 9.100000",
                &["train.py"],
            ),
            pick("B", "dropped", "the combined best did not improve", &[]),
        ];
        let knowledge = ["Round 2, A: a smaller learning rate (10.000000 → 9.100000)".to_string()];
        insta::assert_snapshot!(render(&st, &picks, &knowledge));
        insta::assert_snapshot!(render(&st, &[], &[]));
    }
}
