//! What is researched: the title, the goal and its brief, the mode, the metric or criteria,
//! the researchers' count and their focus areas.

use crate::config::keys::Key;
use std::collections::BTreeMap;

use super::values::{direction, positive, target};
use super::*;
use crate::config::sections::SectionKind;
use crate::config::{researcher_id, MetricSpec, Mode, Strategy};
use SectionKind as S;

impl<'a> Validator<'a> {
    pub(super) fn title(&mut self) -> Option<String> {
        let hint = "# Conference: Faster tokenizer";
        match &self.doc.title {
            None => {
                self.error(
                    0,
                    "missing the title line",
                    format!("add as the first line: {hint}"),
                );
                None
            }
            Some(t) if t.value.trim().is_empty() => {
                self.error(t.line, "the title is empty", hint);
                None
            }
            Some(t) => Some(t.value.trim().to_string()),
        }
    }

    pub(super) fn goal(&mut self) -> Option<String> {
        let goal = self.text(S::Goal);
        if goal.is_empty() {
            let line = self.doc.section(S::Goal).map_or(0, |s| s.line);
            let message = "the goal is missing: say what the conference should achieve";
            self.error(line, message, "under `## Goal`, a line such as: Cut the benchmark's median time without changing its output.");
            return None;
        }
        Some(goal)
    }

    /// `- brief: program.md`: one file of the repository, named from its root.
    pub(super) fn brief(&mut self) -> Option<String> {
        let setting = self.get(S::Goal, "Brief")?;
        let value = setting.value.trim().trim_start_matches("./").to_string();
        let outside = value.starts_with('/') || value.split('/').any(|p| p == "..");
        let glob = value.contains(['*', '?', '[', ',']) || value.contains(char::is_whitespace);
        if value.is_empty() || outside || glob {
            let line = setting.line;
            self.error(
                line,
                format!("brief: `{value}` is not one file of the repository"),
                "- brief: program.md   (a committed file, named from the repository's root)",
            );
            return None;
        }
        Some(value)
    }

    pub(super) fn mode(&mut self) -> Option<Mode> {
        let hint = "write under `## Mode` the line: metric   (or: qualitative)";
        let Some(section) = self.doc.section(S::Mode) else {
            self.error(0, "missing section `## Mode`", hint);
            return None;
        };
        let (value, line) = match section.setting("Mode") {
            Some(s) => (s.value.clone(), s.line),
            None => match section.lines.iter().find(|l| !l.value.trim().is_empty()) {
                Some(l) => (l.value.clone(), l.line),
                None => {
                    self.error(section.line, "`## Mode` is empty", hint);
                    return None;
                }
            },
        };
        // `metric`, `**metric**`, `metric (numeric optimization)`; not `{metric | qualitative}`.
        let word = value
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(|c: char| "`*_\"'.,:;".contains(c))
            .to_ascii_lowercase();
        match word.as_str() {
            "metric" => Some(Mode::Metric),
            "qualitative" => Some(Mode::Qualitative),
            _ => {
                let message = format!("mode `{}` must be metric or qualitative", value.trim());
                self.error(line, message, "metric   (or: qualitative)");
                None
            }
        }
    }

    pub(super) fn metric(&mut self, mode: Option<Mode>) -> Option<MetricSpec> {
        if mode != Some(Mode::Metric) {
            return None;
        }
        const WHY: &str = " (metric mode needs a metric name, target and direction)";
        let name = match self.get(S::SuccessMetric, "Metric") {
            Some(s) if !s.value.is_empty() => Some(s.value.clone()),
            Some(s) => {
                self.invalid(S::SuccessMetric, s, "the metric name is empty");
                None
            }
            None => {
                self.missing(S::SuccessMetric, "Metric", WHY);
                None
            }
        };
        let target = self.value(
            S::SuccessMetric,
            "Target",
            "must be a number (40) or none",
            target,
        );
        if target.is_none() && self.get(S::SuccessMetric, "Target").is_none() {
            self.missing(S::SuccessMetric, "Target", WHY);
        }
        let direction = self.value(
            S::SuccessMetric,
            "Direction",
            "must be maximize or minimize",
            direction,
        );
        if direction.is_none() && self.get(S::SuccessMetric, "Direction").is_none() {
            self.missing(S::SuccessMetric, "Direction", WHY);
        }
        Some(MetricSpec {
            name: name?,
            target: target?.0,
            direction: direction?.0,
        })
    }

    pub(super) fn criteria(&mut self, mode: Option<Mode>) -> Option<String> {
        if mode != Some(Mode::Qualitative) {
            return None;
        }
        let criteria = self.text(S::SuccessCriteria);
        if criteria.is_empty() {
            let line = self.doc.section(S::SuccessCriteria).map_or(0, |s| s.line);
            let message =
                "qualitative mode needs `## Success Criteria`: what \"good\" means, in prose";
            let hint = "under `## Success Criteria`, a line such as: The summary is accurate, cites its sources and fits on one page.";
            self.error(line, message, hint);
        }
        Some(criteria)
    }

    pub(super) fn count(&mut self) -> Option<usize> {
        let count = self.agreed(
            (S::Researchers, "Count"),
            Key::ResearcherCount.name(),
            "must be a whole number ≥ 1",
            |v| positive(v).map(|n| n as usize),
        );
        if count.is_none()
            && self.get(S::Researchers, "Count").is_none()
            && self
                .get(S::PreFlightGate, Key::ResearcherCount.name())
                .is_none()
        {
            self.missing(S::Researchers, "Count", "");
        }
        count
    }

    pub(super) fn focus(
        &mut self,
        count: Option<usize>,
        strategy: Strategy,
    ) -> BTreeMap<String, String> {
        let mut focus = BTreeMap::new();
        let ids: Vec<String> = (0..count.unwrap_or(0)).map(researcher_id).collect();
        let Some(section) = self.doc.section(S::Partitioning) else {
            if strategy == Strategy::Assigned && count.is_some() {
                self.error(
                    0,
                    "strategy assigned needs `## Search Space Partitioning` with a focus per researcher",
                    "add `## Search Space Partitioning` with `**Strategy:** assigned` and a `### Researcher A Focus` section per researcher",
                );
            }
            return focus;
        };
        let mut lines: BTreeMap<String, usize> = BTreeMap::new();
        for sub in &section.subsections {
            let Some(id) = &sub.researcher else { continue };
            if let Some(first) = lines.get(id) {
                let message = format!(
                    "`### {}` appears twice (first at line {first})",
                    sub.heading
                );
                self.error(sub.line, message, "merge the two focus sections");
                continue;
            }
            lines.insert(id.clone(), sub.line);
            if count.is_some() && !ids.contains(id) {
                let last = ids.last().map_or("A".to_string(), Clone::clone);
                let message = format!(
                    "focus for researcher {id}, but the count is {} (researchers A..{last})",
                    ids.len()
                );
                let hint = format!(
                    "remove this section or raise the count: - **Count:** {}",
                    ids.len().max(1) + 1
                );
                self.error(sub.line, message, hint);
                continue;
            }
            let text = sub.text();
            if text.is_empty() && strategy == Strategy::Assigned {
                let message = format!("`### {}` is empty", sub.heading);
                self.error(sub.line, message, "describe this researcher's area, e.g. Allocation: fewer copies, reuse buffers.");
            }
            focus.insert(id.clone(), text);
        }
        if strategy == Strategy::Assigned {
            for id in ids.iter().filter(|id| !lines.contains_key(*id)) {
                let message =
                    format!("strategy assigned, but researcher {id} has no focus section");
                let hint = format!("add under `## Search Space Partitioning`: ### Researcher {id} Focus   (then a line describing this researcher's area)");
                self.error(0, message, hint);
            }
        }
        focus
    }
}
