//! Settings conference.md writes twice: in their own section and again in the `## Pre-Flight
//! Gate` (the seed's template repeats the answers there). `validate` requires both copies to
//! agree; this module lets one edit of one line be enough when a conference is resumed: a copy
//! that still holds the value the conference ran with gives way to the copy the user changed,
//! and the file is rewritten so both hold the new value.

use super::keys::Key;
use super::parse::read;
use super::sections::SectionKind;

/// Each repeated setting: its own section and key, and its key in the Pre-Flight Gate (the
/// pairs `validate` checks with `agreed`; `tests::every_pair_is_checked_by_validate` keeps the
/// two lists the same).
pub const REPEATED: &[(SectionKind, &str, &str)] = &[
    (
        SectionKind::Researchers,
        "Count",
        Key::ResearcherCount.name(),
    ),
    (
        SectionKind::Researchers,
        Key::IterationsPerRound.name(),
        Key::IterationsPerRound.name(),
    ),
    (
        SectionKind::Researchers,
        Key::MaxRounds.name(),
        Key::MaxRounds.name(),
    ),
    (
        SectionKind::Constraints,
        Key::MaxTotalIterations.name(),
        Key::MaxTotalIterations.name(),
    ),
    (
        SectionKind::Constraints,
        Key::PauseEvery.name(),
        Key::PauseEvery.name(),
    ),
    (SectionKind::Partitioning, "Strategy", "Partitioning"),
];

/// One repeated setting the user changed in one copy only: the stale copy now holds `new` too.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub key: &'static str,
    pub new: String,
    pub old: String,
    /// The line the user changed, and the section it is in.
    pub edited_line: usize,
    pub edited_section: &'static str,
    /// The line rewritten from `old` to `new`, and its section.
    pub rewritten_line: usize,
    pub rewritten_section: &'static str,
}

impl Settled {
    /// `Max rounds: you changed it to 6 at line 12 (## Researchers); line 31 (## Pre-Flight
    /// Gate) still said 4: both now say 6 (line 31 rewritten)`.
    pub fn describe(&self) -> String {
        format!(
            "{}: you changed it to {} at line {} (## {}); line {} (## {}) still said {}: both now say {} (line {} rewritten)",
            self.key,
            self.new,
            self.edited_line,
            self.edited_section,
            self.rewritten_line,
            self.rewritten_section,
            self.old,
            self.new,
            self.rewritten_line
        )
    }
}

/// `edited` (the user's conference.md) with every repeated setting changed in one copy only
/// brought to the changed value in the other, against `stored` (the copy the conference ran
/// with), and what was settled. A setting whose copies both changed, or that the stored copy
/// does not hold, is left for `validate` to report.
pub fn settle(stored: &str, edited: &str) -> (String, Vec<Settled>) {
    let (before, _) = read(stored);
    let (after, _) = read(edited);
    let mut lines: Vec<String> = edited.split('\n').map(str::to_string).collect();
    let mut settled = Vec::new();
    for &(kind, key, gate_key) in REPEATED {
        let gate = SectionKind::PreFlightGate;
        let (Some(own), Some(repeat)) = (after.setting(kind, key), after.setting(gate, gate_key))
        else {
            continue;
        };
        if own.value == repeat.value {
            continue;
        }
        let was = |k, name| before.setting(k, name).map(|s| s.value.as_str());
        let (edited, stale, stale_key) = if was(gate, gate_key) == Some(repeat.value.as_str())
            && was(kind, key).is_some_and(|v| v != own.value)
        {
            ((own, kind), (repeat, gate), gate_key)
        } else if was(kind, key) == Some(own.value.as_str())
            && was(gate, gate_key).is_some_and(|v| v != repeat.value)
        {
            ((repeat, gate), (own, kind), key)
        } else {
            continue;
        };
        let Some(line) = lines.get_mut(stale.0.line.wrapping_sub(1)) else {
            continue;
        };
        let Some(rewritten) = with_value(line, &stale.0.value, &edited.0.value) else {
            continue;
        };
        *line = rewritten;
        settled.push(Settled {
            key: stale_key,
            new: edited.0.value.clone(),
            old: stale.0.value.clone(),
            edited_line: edited.0.line,
            edited_section: super::sections::spec(edited.1).name,
            rewritten_line: stale.0.line,
            rewritten_section: super::sections::spec(stale.1).name,
        });
    }
    (lines.join("\n"), settled)
}

/// `line` with the value `old` after its key's colon replaced by `new`; None when it is not
/// there as written.
fn with_value(line: &str, old: &str, new: &str) -> Option<String> {
    let colon = line.find(':')?;
    let at = colon + line[colon..].find(old)?;
    Some(format!("{}{new}{}", &line[..at], &line[at + old.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORED: &str = "\
# Conference: T
## Goal
g
## Mode
metric
## Success Metric
- **Metric:** score
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 2
- **Iterations per round:** 3
- **Max rounds:** 4
## Pre-Flight Gate
- **Researcher count:** 2
- **Iterations per round:** 3
- **Max rounds:** 4   <!-- the number of rounds -->
- **Max total iterations:** 24
- **Pause every:** never
- **Partitioning:** free
## Search Space Partitioning
**Strategy:** free
## Constraints
- **Max total iterations:** 24
- **Pause every:** never
## Evaluation
- command: ./eval.sh
## Agent
- command: builtin:tune
";

    #[test]
    fn one_edited_copy_is_enough_either_way() {
        let edited = STORED.replace("- **Max rounds:** 4\n## Pre", "- **Max rounds:** 6\n## Pre");
        let (text, settled) = settle(STORED, &edited);
        assert_eq!(
            text,
            edited.replace("- **Max rounds:** 4   <!--", "- **Max rounds:** 6   <!--")
        );
        assert_eq!(settled.len(), 1, "{settled:?}");
        assert_eq!(
            settled[0].describe(),
            "Max rounds: you changed it to 6 at line 13 (## Researchers); line 17 (## Pre-Flight Gate) still said 4: both now say 6 (line 17 rewritten)"
        );
        crate::config::load(&text).expect("both copies agree");

        let edited = STORED.replace("**Partitioning:** free", "**Partitioning:** assigned");
        let (text, settled) = settle(STORED, &edited);
        assert!(text.contains("**Strategy:** assigned\n"), "{text}");
        assert_eq!(settled[0].rewritten_section, "Search Space Partitioning");
    }

    #[test]
    fn both_copies_changed_or_nothing_changed_is_left_alone() {
        assert!(settle(STORED, STORED).1.is_empty());
        let both = STORED
            .replace("- **Max rounds:** 4\n## Pre", "- **Max rounds:** 6\n## Pre")
            .replace("- **Max rounds:** 4   <!--", "- **Max rounds:** 5   <!--");
        let (text, settled) = settle(STORED, &both);
        assert!(settled.is_empty());
        assert_eq!(text, both);
        assert!(crate::config::load(&text).is_err(), "validate reports it");
    }

    #[test]
    fn every_pair_is_checked_by_validate() {
        let (doc, _) = read(STORED);
        for &(kind, key, gate_key) in REPEATED {
            let own = doc.setting(kind, key).unwrap().value.clone();
            let repeat = doc.setting(SectionKind::PreFlightGate, gate_key);
            assert_eq!(Some(&own), repeat.map(|s| &s.value), "{key}");
            // Change the gate's copy only: validate must see the disagreement.
            let line = repeat.unwrap().line;
            let text: Vec<String> = STORED
                .split('\n')
                .enumerate()
                .map(|(i, l)| {
                    if i + 1 == line {
                        with_value(l, &own, if own == "free" { "assigned" } else { "7" }).unwrap()
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            let errors = crate::config::load(&text.join("\n")).unwrap_err();
            assert!(
                errors.iter().any(|e| e.message.contains("disagrees")),
                "{key}: {errors:?}"
            );
        }
    }
}
