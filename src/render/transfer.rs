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
        &st.best.commit[..10]
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
