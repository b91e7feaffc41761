//! What `status` and the final report say of the conversation with people: what a pause waits
//! for, the agents' open questions (at the top), the guidance in force, the answers and the
//! human-in-the-loop decisions. From the state only (`model::talk`).

use std::fmt::Write;

use crate::model::state::State;
use crate::model::talk::OpenQuestion;

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

/// `status`'s guidance lines: the guidance in force, newest first.
pub fn status_guidance(st: &State) -> Vec<String> {
    if st.guidance.is_empty() {
        return vec![];
    }
    let mut lines = vec![format!(
        "Guidance:   {} piece(s), newest first (in every researcher's next prompt):",
        st.guidance.len()
    )];
    lines.extend(
        (st.guidance.iter().rev())
            .map(|g| format!("  - (round {}) {}", g.round, line(&g.text, 300))),
    );
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
