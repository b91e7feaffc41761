//! A round's poster session page: each researcher's round best, its attempts by verdict, why it
//! finished, and its top kept findings.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::format::{change_text, fmt, gain_text, pct};
use crate::model::state::{ResearcherState, State};
use crate::model::Direction;
use crate::model::{short_id, AttemptRecord, CommitId, Verdict};

/// What the poster of a round shows.
pub struct Poster<'a> {
    pub title: &'a str,
    pub metric: &'a str,
    pub direction: Option<Direction>,
    pub state: &'a State,
    /// The round's attempts.
    pub attempts: &'a [AttemptRecord],
    /// `N files, +I −D` of kept attempts' commits, by commit id.
    pub diff_stats: &'a BTreeMap<CommitId, String>,
}

/// The page (markdown) and its one-line summary for the event.
pub fn render(p: &Poster) -> (String, String) {
    let st = p.state;
    let mut md = String::new();
    let _ = writeln!(md, "# Poster Session — Round {}\n", st.round);
    let _ = writeln!(md, "Conference: {} · metric: {}\n", p.title, p.metric);
    let mut summary = Vec::new();
    for (id, r) in &st.researchers {
        researcher_section(&mut md, p, id, r);
        let kept = r.round_counts.kept;
        summary.push(format!("{id}: {} ({kept} kept)", fmt(r.best_metric)));
    }
    (md, summary.join(", "))
}

fn researcher_section(md: &mut String, p: &Poster, id: &str, r: &ResearcherState) {
    let dir = p.direction.unwrap_or(Direction::Maximize);
    let _ = writeln!(md, "## Researcher {id}\n");
    let change = match (r.round_start_metric, r.best_metric) {
        (Some(s), Some(b)) => format!("{}{}", change_text(dir, s, b), pct(dir.gain(b, s), s)),
        _ => "-".into(),
    };
    let _ = writeln!(
        md,
        "- **Round best:** {} (from the round start: {change})",
        fmt(r.best_metric)
    );
    let c = &r.round_counts;
    let _ = writeln!(
        md,
        "- **Attempts:** {} — kept {}, reverted {}, crashed {}, timeout {}, rejected {}, no change {}{}",
        c.total(), c.kept, c.reverted, c.crashed, c.timeout, c.rejected, c.no_change,
        if c.pruned > 0 { format!(", pruned {}", c.pruned) } else { String::new() }
    );
    let _ = writeln!(
        md,
        "- **Finished:** {}",
        r.round_finished.as_deref().unwrap_or("-")
    );
    let _ = writeln!(md, "- **Stuck level:** {}", r.stuck_level);
    top_findings(md, p, id);
}

/// The researcher's three best kept attempts of the round (in the order kept when the
/// conference has no direction).
fn top_findings(md: &mut String, p: &Poster, id: &str) {
    let dir = p.direction.unwrap_or(Direction::Maximize);
    let mut kept: Vec<_> = p
        .attempts
        .iter()
        .filter(|a| a.researcher == id && a.verdict == Verdict::Kept)
        .collect();
    if kept.is_empty() {
        let _ = writeln!(md, "- **Top findings:** none kept this round\n");
        return;
    }
    let _ = writeln!(md, "- **Top findings:**");
    if let Some(dir) = p.direction {
        kept.sort_by(|a, b| {
            let ga = dir.gain(a.metric.unwrap_or(f64::NAN), 0.0);
            let gb = dir.gain(b.metric.unwrap_or(f64::NAN), 0.0);
            gb.partial_cmp(&ga).unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    for a in kept.iter().take(3) {
        let stat = (a.commit.as_ref())
            .and_then(|c| p.diff_stats.get(c))
            .map_or("", String::as_str);
        let _ = writeln!(
            md,
            "  - `{}` {} — {} ({}) — {stat}",
            a.commit.as_deref().map_or("", short_id),
            a.description,
            fmt(a.metric),
            a.delta
                .map(|d| gain_text(dir.gain(d, 0.0)))
                .unwrap_or_else(|| "-".into())
        );
    }
    md.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt record as the attempts files hold it.
    fn attempt(
        researcher: &str,
        iteration: u32,
        verdict: &str,
        commit: char,
        metric: f64,
    ) -> AttemptRecord {
        serde_json::from_value(serde_json::json!({
            "round": 1, "researcher": researcher, "iteration": iteration,
            "commit": commit.to_string().repeat(40), "tree": "e".repeat(40),
            "metric": metric, "delta": metric - 10.0, "verdict": verdict,
            "description": format!("idea {iteration}"), "timestamp": "2026-11-27T00:00:00Z"
        }))
        .unwrap()
    }

    /// The poster of round 1: A kept four attempts (the three best are shown, best first, with
    /// their diff stats) and finished the round; B kept none and is stuck.
    #[test]
    fn the_poster_page() {
        let mut st = crate::model::state::sample();
        let a = st.researchers.get_mut("A").unwrap();
        a.best_metric = Some(9.2);
        a.round_counts.kept = 4;
        a.round_counts.reverted = 2;
        a.round_counts.pruned = 1;
        a.round_finished = Some("completed".into());
        let b = st.researchers.get_mut("B").unwrap();
        b.round_counts.crashed = 3;
        b.stuck_level = 2;
        b.round_finished = Some("stuck".into());
        let attempts = [
            attempt("A", 1, "kept", 'a', 9.8),
            attempt("A", 2, "reverted", 'b', 9.9),
            attempt("A", 3, "kept", 'c', 9.2),
            attempt("A", 4, "kept", 'd', 9.5),
            attempt("A", 5, "kept", 'f', 9.6),
            attempt("B", 1, "crashed", '1', 0.0),
        ];
        // No stat for f's commit (git no longer had it).
        let diff_stats = serde_json::from_value(serde_json::json!({
            "c".repeat(40): "1 file, +2 −1", "d".repeat(40): "2 files, +8 −3"
        }))
        .unwrap();
        let poster = Poster {
            title: "Faster training",
            metric: "val_loss",
            direction: Some(Direction::Minimize),
            state: &st,
            attempts: &attempts,
            diff_stats: &diff_stats,
        };
        let (page, summary) = render(&poster);
        insta::assert_snapshot!(page);
        assert_eq!(summary, "A: 9.200000 (4 kept), B: 10.000000 (0 kept)");
    }
}
