//! What `status` and the final report say of the conversation with people: what a pause waits
//! for, the agents' open questions (at the top), the guidance in force, the answers and the
//! human-in-the-loop decisions. From the state only (`model::talk`).

use std::fmt::Write;

use crate::model::state::State;
use crate::model::talk::{OpenQuestion, GUIDANCE_IN_FORCE};

/// `text` on one line, cut to `max` characters.
fn line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &joined[..i]),
        None => joined,
    }
}

fn question_line(q: &OpenQuestion) -> String {
    format!(
        "{}{} (researcher {}, round {}): {}",
        q.id,
        if q.blocking { " [blocking]" } else { "" },
        q.researcher,
        q.round,
        line(&q.text, 300)
    )
}

/// The first lines of `status`: what the pause waits for, a stop asked for, the open questions.
pub fn status_top(st: &State, name: &str) -> Vec<String> {
    let mut lines = Vec::new();
    if let (Some(w), "paused") = (&st.waiting, st.status.as_str()) {
        lines.push(format!("Waiting:    {}", w.detail));
    }
    let approval = (st.approvals.iter())
        .find(|a| a.round == st.round && st.phase == crate::model::state::Phase::Transfer);
    if let (Some(a), "paused", None) = (approval, st.status.as_str(), &st.waiting) {
        lines.push(format!(
            "Approved:   round {}'s candidates for best{}; continue with `git conference resume {name}`",
            a.round,
            if a.dropped.is_empty() {
                String::new()
            } else {
                format!(", less {}", a.dropped.join(", "))
            }
        ));
    }
    if st.stop_requested {
        lines.push(
            "Stopping:   `git conference stop` asked; it stops after the running attempts".into(),
        );
    }
    let open: Vec<&OpenQuestion> = st.questions.iter().filter(|q| q.is_open()).collect();
    if !open.is_empty() {
        lines.push(format!(
            "Open questions ({}; answer with `git conference answer {name} Qn \"…\"`):",
            open.len()
        ));
        lines.extend(open.iter().map(|q| format!("  {}", question_line(q))));
    }
    lines
}

/// `status`'s guidance lines: the guidance in force, newest first, and how many older pieces
/// are no longer in the prompts.
pub fn status_guidance(st: &State) -> Vec<String> {
    if st.guidance.is_empty() {
        return vec![];
    }
    let in_force = st.guidance.len().min(GUIDANCE_IN_FORCE);
    let mut lines = vec![format!(
        "Guidance:   {in_force} piece(s) in force, newest first (in every researcher's next prompt):"
    )];
    lines.extend(
        (st.guidance.iter().rev().take(GUIDANCE_IN_FORCE))
            .map(|g| format!("  - (round {}) {}", g.round, line(&g.text, 300))),
    );
    let older = st.guidance.len() - in_force;
    if older > 0 {
        lines.push(format!(
            "  ({older} older piece(s) no longer in the prompts: see `git conference log`)"
        ));
    }
    lines
}

/// The final report's section near its top: open questions, then the guidance given, the
/// answers and the approvals (empty when nobody talked to the conference).
pub fn report_section(st: &State) -> String {
    let mut s = String::new();
    let open: Vec<&OpenQuestion> = st.questions.iter().filter(|q| q.is_open()).collect();
    if !open.is_empty() {
        let _ = writeln!(s, "## Open questions from the researchers\n");
        for q in open {
            let _ = writeln!(s, "- {}", question_line(q));
        }
        s.push('\n');
    }
    if !st.guidance.is_empty() {
        let _ = writeln!(s, "## Guidance given (newest first)\n");
        for g in st.guidance.iter().rev() {
            let _ = writeln!(s, "- round {} ({}): {}", g.round, g.at, line(&g.text, 600));
        }
        s.push('\n');
    }
    let answered: Vec<&OpenQuestion> = st.questions.iter().filter(|q| !q.is_open()).collect();
    if !answered.is_empty() {
        let _ = writeln!(s, "## Questions answered\n");
        for q in answered {
            let answer = line(q.answer.as_deref().unwrap_or(""), 600);
            let _ = writeln!(s, "- {} — answer: {answer}", question_line(q));
        }
        s.push('\n');
    }
    if !st.approvals.is_empty() || !st.pauses.is_empty() {
        let _ = writeln!(s, "## Pauses and decisions\n");
        for p in &st.pauses {
            let _ = writeln!(s, "- round {}: paused, {}", p.round, line(&p.detail, 600));
        }
        for a in &st.approvals {
            let dropped = if a.dropped.is_empty() {
                "nothing dropped".to_string()
            } else {
                format!("dropped {}", a.dropped.join(", "))
            };
            let _ = writeln!(
                s,
                "- round {}: candidates for best approved, {dropped}",
                a.round
            );
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::state::Phase;
    use crate::model::talk::{Approval, GuidanceNote, WaitKind, Waiting};

    fn state_with_guidance(pieces: usize) -> State {
        let mut st = crate::model::state::sample();
        st.guidance = (1..=pieces)
            .map(|i| GuidanceNote {
                text: format!("hint {i}"),
                round: 1,
                at: "2026-11-27T00:00:00Z".into(),
            })
            .collect();
        st
    }

    #[test]
    fn status_lists_the_guidance_in_force_newest_first_and_counts_the_older() {
        let lines = status_guidance(&state_with_guidance(GUIDANCE_IN_FORCE + 2));
        assert!(lines[0].contains("5 piece(s) in force"), "{lines:?}");
        let listed: Vec<&String> = lines.iter().filter(|l| l.contains("hint")).collect();
        assert_eq!(listed.len(), GUIDANCE_IN_FORCE);
        assert!(listed[0].ends_with("hint 7") && listed[4].ends_with("hint 3"));
        assert!(
            lines.last().unwrap().contains("2 older piece(s)"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_few_pieces_are_all_in_force() {
        let lines = status_guidance(&state_with_guidance(2));
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("older")));
        assert!(status_guidance(&crate::model::state::sample()).is_empty());
    }

    /// A state where people and agents said something of each kind: an answered, a blocking
    /// and an open question, guidance, a pause waiting for an answer, a stop asked for, an
    /// approval.
    fn talked() -> State {
        let mut st = crate::model::state::sample();
        let question = |n: u32, blocking: bool, answer: Option<&str>| OpenQuestion {
            id: format!("Q{n}"),
            researcher: "B".into(),
            round: 1,
            iteration: n,
            text: format!("Is\nthe test set {n} fixed?"),
            blocking,
            answer: answer.map(String::from),
        };
        st.questions = vec![
            question(1, false, Some("yes, never touch it")),
            question(2, true, None),
            question(3, false, None),
        ];
        st.guidance = vec![GuidanceNote {
            text: "Try a smaller batch first.".into(),
            round: 1,
            at: "2026-11-27T09:00:00Z".into(),
        }];
        let waiting = Waiting {
            kind: WaitKind::Answer,
            detail: "Q2 is blocking: `git conference answer c Q2 \"…\"`".into(),
            round: 1,
        };
        st.status = "paused".into();
        st.pauses = vec![waiting.clone()];
        st.waiting = Some(waiting);
        st.stop_requested = true;
        st.approvals = vec![Approval {
            round: 1,
            dropped: vec!["B".into()],
        }];
        st
    }

    /// The talk's lines of `status` (paused, then approved before the transfer) and its
    /// section of the final report.
    #[test]
    fn the_talk_in_status_and_in_the_report() {
        let st = talked();
        let mut approved = talked();
        approved.waiting = None;
        approved.stop_requested = false;
        approved.phase = Phase::Transfer;
        let status = [
            status_top(&st, "c"),
            status_guidance(&st),
            vec!["-- approved, before the transfer:".into()],
            status_top(&approved, "c"),
        ]
        .concat();
        insta::assert_snapshot!(status.join("\n"));
        insta::assert_snapshot!(report_section(&st));
        assert_eq!(report_section(&crate::model::state::sample()), "");
    }
}
