//! The report's `## Which change mattered` section: the importance of each literal the attempts
//! changed (against the metric) and of each file they touched (against the gain over the
//! attempt's parent), as `protocol::importance` scores them, with what the score can and cannot say.

use crate::protocol::importance::{Factor, Importance};

/// Rows shown per table.
const SHOWN: usize = 12;

fn table(title: &str, what: &str, factors: &[Factor]) -> String {
    if factors.is_empty() {
        return String::new();
    }
    let mut s =
        format!("\n{title}\n\n| {what} | Importance | Attempts | Values |\n|---|---|---|---|\n");
    for f in factors.iter().take(SHOWN) {
        s.push_str(&format!(
            "| `{}` | {:.2} | {} | {} |\n",
            f.name.replace('|', "\\|").replace('`', "'"),
            f.importance,
            f.points,
            f.values
        ));
    }
    if factors.len() > SHOWN {
        s.push_str(&format!(
            "\n{} more, each less important.\n",
            factors.len() - SHOWN
        ));
    }
    s
}

/// The section (empty when no literal or file could be scored).
pub fn report_section(imp: &Importance, metric: &str) -> String {
    if imp.literals.is_empty() && imp.files.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n## Which change mattered\n\nImportance is the share of the spread of `{metric}` across attempts that a factor's value explains alone (ω², a main-effect variance decomposition: 0 = nothing beyond chance, 1 = all of it). It reads {} of {} measured attempts{}; interactions are not counted, factors always changed together share the credit, and it describes where the search went, not the whole space (docs/trackers.md).\n",
        imp.attempts_read,
        imp.attempts_total,
        if imp.attempts_read < imp.attempts_total { " (the newest)" } else { "" }
    );
    s.push_str(&table(
        &format!("Literals, against `{metric}`:"),
        "Literal",
        &imp.literals,
    ));
    s.push_str(&table(
        "Files, touched or not, against the gain over the attempt's parent:",
        "File",
        &imp.files,
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables() {
        let imp = Importance {
            literals: vec![Factor {
                name: "train.py:lr".into(),
                importance: 0.81,
                points: 40,
                values: 12,
            }],
            attempts_read: 40,
            attempts_total: 40,
            ..Importance::default()
        };
        let s = report_section(&imp, "val_bpb");
        assert!(s.contains("| `train.py:lr` | 0.81 | 40 | 12 |"), "{s}");
        assert!(!s.contains("Files, touched"));
        assert_eq!(report_section(&Importance::default(), "x"), "");
    }
}
