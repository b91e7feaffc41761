//! Which settings may change while a conference runs, and what changed between two copies of
//! conference.md.
//!
//! `resume` re-reads the user's conference.md and applies what changed between rounds (budgets,
//! timeouts, the agent, repeats and noise settings, guard, and any setting added later). This is
//! the one place that says what may not change: [`class`]. Every setting not named there may
//! change between rounds, so a new key is changeable without touching this file.

use super::keys::Key;
use super::parse::{read, Document};
use super::sections::{SectionKind, SECTIONS};

/// When a setting may change after `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Between rounds, at any time.
    Changeable,
    /// Only while the baseline is not measured yet: it decides how every metric is measured, so
    /// changing it later would compare numbers measured two ways.
    BeforeBaseline,
    /// Never: the conference is about this metric, this direction, this mode, these
    /// researchers, this shape of search (a tree or chains).
    Fixed,
}

/// The class of `key` (template spelling) in section `kind`; `None` is the section's text.
pub fn class(kind: SectionKind, key: Option<&str>) -> Class {
    use SectionKind as S;
    match (kind, key) {
        (S::Mode, _) => Class::Fixed,
        (S::SuccessMetric, Some("Metric" | "Direction")) => Class::Fixed,
        (S::Researchers, Some("Count")) => Class::Fixed,
        // The events' shape follows it (a tree recorded, or none).
        (S::Researchers, Some("Branching")) => Class::Fixed,
        (S::PreFlightGate, Some(k)) if k == Key::ResearcherCount.name() => Class::Fixed,
        (S::Evaluation, Some("command" | "judge" | "metric from")) => Class::BeforeBaseline,
        _ => Class::Changeable,
    }
}

/// One setting (or a section's text) that differs between two copies of conference.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub section: &'static str,
    /// The key's template spelling, or `text` for a section's prose and bullets.
    pub key: String,
    pub old: String,
    pub new: String,
    /// The line in the new copy (0 when the setting was removed).
    pub line: usize,
    pub class: Class,
}

impl Change {
    /// `Max rounds: 4 → 8` (texts shortened).
    pub fn describe(&self) -> String {
        let short = |v: &str| {
            let one = v.split_whitespace().collect::<Vec<_>>().join(" ");
            match one.chars().count() {
                0 => "(none)".to_string(),
                n if n > 60 => format!("{}…", one.chars().take(59).collect::<String>()),
                _ => one,
            }
        };
        let what = if self.key == "text" {
            format!("## {} text", self.section)
        } else {
            format!("{} ({})", self.key, self.section)
        };
        format!("{what}: {} → {}", short(&self.old), short(&self.new))
    }
}

/// Sections the conference maintains itself: never a user's change.
pub const MAINTAINED: &[SectionKind] = &[SectionKind::SharedKnowledge, SectionKind::ConferenceLog];

/// What differs between conference.md `old` and `new`, setting by setting, in the template's
/// order. Spelling (bold or plain keys, comments, blank lines) does not count, only values.
pub fn diff(old: &str, new: &str) -> Vec<Change> {
    let (a, _) = read(old);
    let (b, _) = read(new);
    let mut out = Vec::new();
    let title = |d: &Document| d.title.as_ref().map(|t| t.value.trim().to_string());
    if title(&a) != title(&b) {
        out.push(Change {
            section: "Title",
            key: "text".into(),
            old: title(&a).unwrap_or_default(),
            new: title(&b).unwrap_or_default(),
            line: b.title.as_ref().map_or(0, |t| t.line),
            class: Class::Changeable,
        });
    }
    for section in SECTIONS {
        if MAINTAINED.contains(&section.kind) {
            continue;
        }
        for key in section.keys {
            let (old, _) = value(&a, section.kind, key.name);
            let (new, line) = value(&b, section.kind, key.name);
            if old != new {
                out.push(Change {
                    section: section.name,
                    key: key.name.to_string(),
                    old,
                    new,
                    line,
                    class: class(section.kind, Some(key.name)),
                });
            }
        }
        let (old, _) = text(&a, section.kind);
        let (new, line) = text(&b, section.kind);
        if old != new {
            out.push(Change {
                section: section.name,
                key: "text".into(),
                old,
                new,
                line,
                class: class(section.kind, None),
            });
        }
    }
    out
}

/// A setting's value with its list items, and its line.
fn value(doc: &Document, kind: SectionKind, key: &str) -> (String, usize) {
    match doc.setting(kind, key) {
        Some(s) => {
            let items: Vec<&str> = std::iter::once(s.value.as_str())
                .chain(s.items.iter().map(|i| i.value.as_str()))
                .filter(|v| !v.is_empty())
                .collect();
            (items.join("\n"), s.line)
        }
        None => (String::new(), 0),
    }
}

/// A section's prose, bullets and sub-sections, blank lines aside, and its heading's line.
fn text(doc: &Document, kind: SectionKind) -> (String, usize) {
    let Some(s) = doc.section(kind) else {
        return (String::new(), 0);
    };
    let mut lines: Vec<String> = s
        .lines
        .iter()
        .map(|l| l.value.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    for sub in &s.subsections {
        lines.push(format!("### {}", sub.heading));
        lines.extend(
            sub.lines
                .iter()
                .map(|l| l.value.trim().to_string())
                .filter(|l| !l.is_empty()),
        );
    }
    let first = s
        .lines
        .first()
        .map(|l| l.line)
        .or(s.subsections.first().map(|x| x.line))
        .unwrap_or(s.line);
    (lines.join("\n"), first)
}

/// A unified diff of two texts (for the event's payload).
pub fn unified(old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(1)
        .header("conference.md (stored)", "conference.md (edited)")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> String {
        crate::config::template::render(&Default::default())
    }

    #[test]
    fn budgets_change_metric_does_not() {
        let old = base();
        let new = old
            .replace("- **Max rounds:** 4", "- max rounds: 8")
            .replace("- **Timeout:** 15m", "- **Timeout:** 20m");
        let changes = diff(&old, &new);
        let keys: Vec<(&str, &str, Class)> = changes
            .iter()
            .map(|c| (c.section, c.key.as_str(), c.class))
            .collect();
        assert_eq!(
            keys,
            [
                ("Researchers", Key::MaxRounds.name(), Class::Changeable),
                ("Pre-Flight Gate", Key::MaxRounds.name(), Class::Changeable),
                ("Evaluation", "timeout", Class::Changeable)
            ]
        );
        assert_eq!(changes[0].describe(), "Max rounds (Researchers): 4 → 8");
        assert!(changes[0].line > 0);
        let new = old.replace("- **Direction:** maximize", "- **Direction:** minimize");
        assert_eq!(diff(&old, &new)[0].class, Class::Fixed);
        let new = old.replace("- **Command:** ./eval.sh", "- **Command:** ./eval2.sh");
        assert_eq!(diff(&old, &new)[0].class, Class::BeforeBaseline);
        // Spelling and comments are not changes; maintained sections are not the user's.
        let new = old.replace("- **Max rounds:** 4", "- max_rounds: 4 <!-- same -->");
        let new = crate::config::edit::append_shared_knowledge(&new, "a finding");
        assert!(diff(&old, &new).is_empty(), "{:?}", diff(&old, &new));
        // A guard bullet is the Guard section's text.
        let new = old.replace("## Guard\n", "## Guard\n- run: true\n");
        let c = diff(&old, &new);
        assert_eq!((c[0].section, c[0].key.as_str()), ("Guard", "text"));
        assert_eq!(c[0].class, Class::Changeable);
    }
}
