//! Checking a parsed conference.md and building the [`Config`] the conference runs on.
//!
//! The seed says: if any required field is missing or invalid, stop and tell the user what needs
//! fixing. So every check here records an error (with the line, and an example line to write) and
//! carries on; the user sees all problems at once. Values the Pre-Flight Gate repeats from other
//! sections must agree with them.
//!
//! The folder: the validator and the whole config's assembly here; one file per group of
//! sections (`research`, `rounds`, `evaluation`, `agent`) and the value readers (`values`).

mod agent;
mod evaluation;
mod research;
mod rounds;
mod values;

use super::keys::Key;
use std::time::Duration;
use values::{is_none, strategy};

use super::parse::{Document, Setting};
use super::sections::{key_spec, SectionKind};
use super::{Config, ConfigError, Strategy};
use SectionKind as S;

/// Default per-experiment evaluation timeout.
/// 15 minutes: room for a 5-minute training (autoresearch's own budget) with its start-up,
/// data loading and final validation, without letting a hung run hold a device for long.
pub const DEFAULT_EVAL_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How long one agent run may take unless `- timeout:` in the Agent section says otherwise.
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(1800);

/// Check `doc` and build the configuration, or return every problem found.
pub fn validate(doc: &Document) -> Result<Config, Vec<ConfigError>> {
    let mut v = Validator {
        doc,
        errors: Vec::new(),
    };
    let config = v.config();
    let mut errors = v.errors;
    match config {
        Some(config) if errors.is_empty() => Ok(config),
        _ => {
            sort_errors(&mut errors);
            Err(errors)
        }
    }
}

/// By line, missing-field errors (line 0) last.
pub(crate) fn sort_errors(errors: &mut [ConfigError]) {
    errors.sort_by_key(|e| if e.line == 0 { usize::MAX } else { e.line });
}

struct Validator<'a> {
    doc: &'a Document,
    errors: Vec<ConfigError>,
}

/// The Constraints section's values, as the config holds them.
struct Budgets {
    max_total_iterations: Option<u32>,
    time_budget: Option<Duration>,
    token_budget: Option<u64>,
    cost_budget: Option<(f64, bool)>,
    researcher_timeout: Option<Duration>,
    pause_every: Option<u32>,
    stall_rounds: Option<u32>,
    lease: Option<Duration>,
}

/// Where a value was found: its setting line and section, for messages naming both lines.
type Found<T> = Option<(T, &'static str, usize)>;

impl<'a> Validator<'a> {
    pub(super) fn error(
        &mut self,
        line: usize,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.errors.push(ConfigError {
            line,
            message: message.into(),
            hint: hint.into(),
        });
    }

    pub(super) fn get(&self, kind: SectionKind, key: &str) -> Option<&'a Setting> {
        self.doc.setting(kind, key)
    }

    pub(super) fn text(&self, kind: SectionKind) -> String {
        self.doc.section(kind).map(|s| s.text()).unwrap_or_default()
    }

    /// Report a bad value of `setting` in `kind`, with the key's example as the hint.
    pub(super) fn invalid(&mut self, kind: SectionKind, setting: &Setting, what: &str) {
        let example = key_spec(kind, setting.key).example;
        let mut message =
            format!("`{}: {}` — {what}", setting.written, setting.value).replace(": ` —", ":` —");
        if setting.value.contains(" #") {
            message.push_str(
                " (a value is the whole rest of its line: a note after `#` goes in a \
                 `<!-- … -->` comment of its own)",
            );
        }
        self.error(setting.line, message, example);
    }

    pub(super) fn missing(&mut self, kind: SectionKind, key: &str, why: &str) {
        let section = super::sections::spec(kind).name;
        let example = key_spec(kind, key).example;
        let message = format!("missing `{key}` in `## {section}`{why}");
        self.error(0, message, format!("add under `## {section}`: {example}"));
    }

    /// Parse `key` of `kind` with `parse`; a value it rejects is reported with `what`.
    pub(super) fn value<T>(
        &mut self,
        kind: SectionKind,
        key: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Found<T> {
        let setting = self.get(kind, key)?;
        match parse(&setting.value) {
            Some(v) => Some((v, setting.key, setting.line)),
            None => {
                self.invalid(kind, setting, what);
                None
            }
        }
    }

    /// A value set in its own section and possibly repeated in the Pre-Flight Gate: both must agree.
    pub(super) fn agreed<T: PartialEq + std::fmt::Debug>(
        &mut self,
        own: (SectionKind, &str),
        gate_key: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let mine = self.value(own.0, own.1, what, &parse);
        let gate = self.value(S::PreFlightGate, gate_key, what, &parse);
        match (mine, gate) {
            (Some((a, a_key, a_line)), Some((b, b_key, b_line))) => {
                if a != b {
                    let section = super::sections::spec(own.0).name;
                    let written = |kind, key| self.get(kind, key).map_or("", |s| s.value.as_str());
                    let message = format!(
                        "Pre-Flight Gate `{b_key}` (line {b_line}: {}) disagrees with `## {section}` `{a_key}` (line {a_line}: {})",
                        written(S::PreFlightGate, gate_key),
                        written(own.0, own.1),
                    );
                    let hint = format!(
                        "make them agree: - **{}:** {}",
                        key_spec(S::PreFlightGate, gate_key).name,
                        written(own.0, own.1)
                    );
                    self.error(b_line, message, hint);
                }
                Some(a)
            }
            (mine, gate) => mine.or(gate).map(|(v, _, _)| v),
        }
    }

    /// Checks every section, recording each problem; the config unless a required value is
    /// missing or invalid.
    pub(super) fn config(&mut self) -> Option<Config> {
        let title = self.title();
        let goal = self.goal();
        let mode = self.mode();
        let metric = self.metric(mode);
        let criteria = self.criteria(mode);
        let count = self.count();
        let (iterations_per_round, max_rounds) = self.round_sizes();
        let (devils_advocate, final_confirmation) = self.gate_answers();
        let strategy = self
            .agreed(
                (S::Partitioning, "Strategy"),
                "Partitioning",
                "must be assigned or free",
                strategy,
            )
            .unwrap_or(Strategy::Free);
        let focus = self.focus(count, strategy);
        let (allowed, forbidden) = (
            self.list(S::SearchSpace, "Allowed changes"),
            self.list(S::SearchSpace, "Forbidden changes"),
        );
        let (noise_runs, min_consensus_delta) = self.noise_handling();
        let budgets = self.budgets();
        let evaluation = self.evaluation(mode);
        let agent = self.agent();
        let guard = self.items(S::Guard);
        let shared_knowledge = self.items(S::SharedKnowledge);
        let mut environment = super::environment::read(self.doc, &mut self.errors);
        // The tracker's keys sit in `## Environment` but are read by `config::tracker`, which
        // uses the environment's helpers (so the environment does not call it).
        environment.mlflow = super::tracker::read(self.doc, &mut self.errors);
        let brief = self.brief();
        let (branching, max_alive_branches) = self.branching();
        let parameter_sweep = self.parameter_sweep();
        Some(Config {
            title: title?,
            goal: goal?,
            brief,
            mode: mode?,
            metric,
            criteria,
            count: count?,
            iterations_per_round: iterations_per_round?,
            max_rounds: max_rounds?,
            devils_advocate,
            final_confirmation,
            allowed,
            forbidden,
            strategy,
            focus,
            guard,
            noise_runs,
            min_consensus_delta,
            max_total_iterations: budgets.max_total_iterations,
            time_budget: budgets.time_budget,
            token_budget: budgets.token_budget,
            cost_budget: budgets.cost_budget.map(|(usd, _)| usd),
            cost_budget_per_researcher: budgets.cost_budget.is_some_and(|(_, each)| each),
            researcher_timeout: budgets.researcher_timeout,
            pause_every: budgets.pause_every,
            stall_rounds: budgets.stall_rounds,
            lease: budgets.lease,
            evaluation: evaluation?,
            agent: agent?,
            success_definition: self.optional(S::PreFlightGate, Key::SuccessDefinition.name()),
            current_approach: self.text(S::CurrentApproach),
            shared_knowledge,
            context: self.text(S::Context),
            environment,
            loop_mode: self.loop_mode(),
            branching,
            max_alive_branches,
            parameter_sweep,
        })
    }
}

impl<'a> Validator<'a> {
    /// A list key's items: the inline value (if any) then the bullets under it.
    pub(super) fn list(&self, kind: SectionKind, key: &str) -> Vec<String> {
        let Some(s) = self.get(kind, key) else {
            return Vec::new();
        };
        std::iter::once(s.value.as_str())
            .chain(s.items.iter().map(|i| i.value.as_str()))
            .filter(|v| !v.is_empty() && !super::parse::is_placeholder(v))
            .map(str::to_string)
            .collect()
    }

    pub(super) fn items(&self, kind: SectionKind) -> Vec<String> {
        self.doc.section(kind).map_or(Vec::new(), |s| {
            s.lines
                .iter()
                .map(|l| l.value.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect()
        })
    }
}

impl<'a> Validator<'a> {
    pub(super) fn command(&mut self, kind: SectionKind, key: &str, why: &str) -> Option<String> {
        match self.get(kind, key) {
            Some(s) if !s.value.is_empty() => Some(s.value.clone()),
            Some(s) => {
                self.invalid(kind, s, "the command is empty");
                None
            }
            None => {
                self.missing(kind, key, why);
                None
            }
        }
    }

    pub(super) fn optional(&self, kind: SectionKind, key: &str) -> Option<String> {
        self.get(kind, key)
            .map(|s| s.value.clone())
            .filter(|v| !v.is_empty() && !is_none(v))
    }
}

#[cfg(test)]
mod tests;
