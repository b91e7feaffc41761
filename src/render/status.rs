//! The texts of `git conference status` that come from the state alone: how long the agents
//! and evaluations ran, the researchers' table and each one's last reason. `cli/status.rs`
//! prints them, line by line.

use super::format::fmt;
use crate::model::state::State;

/// How long the agents and the evaluations ran, in all and per researcher.
pub fn attempt_time(st: &State) -> Vec<String> {
    let mut lines = Vec::new();
    let time = super::format::seconds_text;
    let (agents, evaluations) = st.researchers.values().fold((0.0, 0.0), |(a, e), r| {
        (a + r.agent_seconds, e + r.eval_seconds)
    });
    if agents + evaluations > 0.0 {
        let each: Vec<String> = st
            .researchers
            .iter()
            .map(|(id, r)| format!("{id} {} + {}", time(r.agent_seconds), time(r.eval_seconds)))
            .collect();
        lines.push(format!(
            "Time:       agents {}, evaluations {} ({})",
            time(agents),
            time(evaluations),
            each.join(", ")
        ));
    }
    lines
}

/// The hardware classes the attempts' readings were taken on, with how many each; said to be
/// no one comparison when there are several. Nothing when no reading named a GPU.
pub fn hardware(attempts: &[crate::model::AttemptRecord]) -> Option<String> {
    let by = crate::model::readings_by_class(attempts);
    let classes: Vec<String> = (by.iter())
        .map(|(class, n)| format!("{class} ({n} reading{})", if *n == 1 { "" } else { "s" }))
        .collect();
    match classes.len() {
        0 => None,
        1 => Some(format!("Hardware:   {}", classes[0])),
        _ => Some(format!(
            "Hardware:   {} — readings of different classes are not one comparison",
            classes.join(", ")
        )),
    }
}

/// One row per researcher: attempts by verdict, stuck level, best and where its round is. The
/// `pruned` column shows once an attempt was pruned (`prune: on`).
pub fn researchers(st: &State) -> Vec<String> {
    let mut lines = Vec::new();
    let with_pruned = st.researchers.values().any(|r| r.counts.pruned > 0);
    let pruned = |v: &dyn std::fmt::Display| {
        if with_pruned {
            format!(" {v:>7}")
        } else {
            String::new()
        }
    };
    lines.push(String::new());
    lines.push(format!(
        "{:<11} {:>8} {:>5} {:>9} {:>8} {:>8} {:>9}{} {:>6} {:>14}  round",
        "researcher",
        "attempts",
        "kept",
        "reverted",
        "crashed",
        "timeout",
        "rejected",
        pruned(&"pruned"),
        "stuck",
        "best",
    ));
    for (id, r) in &st.researchers {
        let c = &r.counts;
        lines.push(format!(
            "{:<11} {:>8} {:>5} {:>9} {:>8} {:>8} {:>9}{} {:>6} {:>14}  {}",
            id,
            c.total(),
            c.kept,
            c.reverted,
            c.crashed,
            c.timeout,
            c.rejected,
            pruned(&c.pruned),
            format!("L{}", r.stuck_level),
            fmt(r.best_metric),
            r.round_finished
                .as_deref()
                .map(|f| format!("finished ({f})"))
                .unwrap_or_else(|| format!("iteration {}", r.round_iterations))
        ));
    }
    lines
}

/// Each researcher's last verdict with its reason, when there is one.
pub fn last_reasons(st: &State) -> Vec<String> {
    let mut lines = Vec::new();
    let reasons: Vec<_> = st
        .researchers
        .iter()
        .filter_map(|(id, r)| Some((id, r.last_verdict.as_deref()?, r.last_reason.as_deref()?)))
        .collect();
    if !reasons.is_empty() {
        lines.push(String::new());
        lines.push("Last attempt's reason:".to_string());
        for (id, verdict, why) in reasons {
            lines.push(format!(
                "  {id}: {verdict} — {}",
                super::format::one_line(why, 200)
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The researchers' table, the time line and the last reasons, as `status` prints them.
    #[test]
    fn the_status_tables() {
        let mut st = crate::model::state::sample();
        let a = st.researchers.get_mut("A").unwrap();
        a.counts.kept = 2;
        a.counts.reverted = 3;
        a.counts.pruned = 1;
        a.stuck_level = 1;
        a.round_iterations = 6;
        a.agent_seconds = 75.0;
        a.eval_seconds = 12.5;
        a.last_verdict = Some("crashed".into());
        a.last_reason = Some("exit status 1:\n  Traceback".into());
        st.researchers.get_mut("B").unwrap().round_finished = Some("stuck".into());
        let text = [attempt_time(&st), researchers(&st), last_reasons(&st)].concat();
        insta::assert_snapshot!(text.join("\n"));
    }
}
