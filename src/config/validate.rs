//! Checking a parsed conference.md and building the [`Config`] the conference runs on.
//!
//! The seed says: if any required field is missing or invalid, stop and tell the user what needs
//! fixing. So every check here records an error (with the line, and an example line to write) and
//! carries on; the user sees all problems at once. Values the Pre-Flight Gate repeats from other
//! sections must agree with them.

use super::keys::Key;
use std::collections::BTreeMap;
use std::time::Duration;

use super::duration::parse_duration;
use super::parse::{key_spec, Document, SectionKind, Setting};
use super::{
    researcher_id, Agent, Config, ConfigError, DevilsAdvocate, Direction, Evaluation, MetricSpec,
    Mode, Strategy, Tolerance,
};
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
    fn error(&mut self, line: usize, message: impl Into<String>, hint: impl Into<String>) {
        self.errors.push(ConfigError {
            line,
            message: message.into(),
            hint: hint.into(),
        });
    }

    fn get(&self, kind: SectionKind, key: &str) -> Option<&'a Setting> {
        self.doc.setting(kind, key)
    }

    fn text(&self, kind: SectionKind) -> String {
        self.doc.section(kind).map(|s| s.text()).unwrap_or_default()
    }

    /// Report a bad value of `setting` in `kind`, with the key's example as the hint.
    fn invalid(&mut self, kind: SectionKind, setting: &Setting, what: &str) {
        let example = key_spec(kind, setting.key).example;
        let message =
            format!("`{}: {}` — {what}", setting.written, setting.value).replace(": ` —", ":` —");
        self.error(setting.line, message, example);
    }

    fn missing(&mut self, kind: SectionKind, key: &str, why: &str) {
        let section = super::parse::spec(kind).name;
        let example = key_spec(kind, key).example;
        let message = format!("missing `{key}` in `## {section}`{why}");
        self.error(0, message, format!("add under `## {section}`: {example}"));
    }

    /// Parse `key` of `kind` with `parse`; a value it rejects is reported with `what`.
    fn value<T>(
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
    fn agreed<T: PartialEq + std::fmt::Debug>(
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
                    let section = super::parse::spec(own.0).name;
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
    fn config(&mut self) -> Option<Config> {
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
        let environment = super::environment::read(self.doc, &mut self.errors);
        let brief = self.brief();
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
        })
    }

    /// `- mode: agentic | human-in-the-loop` under `## Researchers` (agentic when absent).
    fn loop_mode(&mut self) -> super::LoopMode {
        self.value(
            S::Researchers,
            "Mode",
            "must be agentic or human-in-the-loop",
            super::LoopMode::parse,
        )
        .map_or(super::LoopMode::Agentic, |(v, _, _)| v)
    }

    /// Iterations per round and max rounds, each agreed with the gate and required in one of them.
    fn round_sizes(&mut self) -> (Option<u32>, Option<u32>) {
        let iterations_per_round = self.agreed(
            (S::Researchers, Key::IterationsPerRound.name()),
            Key::IterationsPerRound.name(),
            "must be a whole number ≥ 1",
            positive,
        );
        let max_rounds = self.agreed(
            (S::Researchers, Key::MaxRounds.name()),
            Key::MaxRounds.name(),
            "must be a whole number ≥ 1",
            positive,
        );
        if iterations_per_round.is_none()
            && self
                .get(S::Researchers, Key::IterationsPerRound.name())
                .is_none()
            && self
                .get(S::PreFlightGate, Key::IterationsPerRound.name())
                .is_none()
        {
            self.missing(S::Researchers, Key::IterationsPerRound.name(), "");
        }
        if max_rounds.is_none()
            && self.get(S::Researchers, Key::MaxRounds.name()).is_none()
            && self.get(S::PreFlightGate, Key::MaxRounds.name()).is_none()
        {
            self.missing(S::Researchers, Key::MaxRounds.name(), "");
        }
        (iterations_per_round, max_rounds)
    }

    /// The Pre-Flight Gate's own answers: devil's advocate and final confirmation (Unattended
    /// is only checked).
    fn gate_answers(&mut self) -> (DevilsAdvocate, Option<String>) {
        let devils_advocate = self
            .value(
                S::PreFlightGate,
                "Critic / Devil's Advocate",
                "must be enabled, disabled or ask user before run",
                devils_advocate,
            )
            .map_or(DevilsAdvocate::Disabled, |(v, _, _)| v);
        self.value(S::PreFlightGate, "Unattended", "must be yes or no", yes_no);
        let final_confirmation = self
            .get(S::PreFlightGate, "Final confirmation")
            .map(|s| s.value.clone())
            .filter(|v| !v.is_empty());
        (devils_advocate, final_confirmation)
    }

    /// Noise Handling: noise runs (default 1) and the min consensus delta.
    fn noise_handling(&mut self) -> (u32, Option<Tolerance>) {
        let noise_runs = self
            .value(
                S::NoiseHandling,
                Key::NoiseRuns.name(),
                "must be a whole number ≥ 1",
                positive,
            )
            .map_or(1, |(v, _, _)| v);
        let min_consensus_delta = self
            .value(
                S::NoiseHandling,
                "Min consensus delta",
                "must be a percentage (1%) or a non-negative number (0.02)",
                tolerance,
            )
            .and_then(|(v, _, _)| v);
        (noise_runs, min_consensus_delta)
    }

    /// Constraints: the budgets, the pause and the stall rule.
    fn budgets(&mut self) -> Budgets {
        let max_total_iterations = self.agreed(
            (S::Constraints, Key::MaxTotalIterations.name()),
            Key::MaxTotalIterations.name(),
            "must be a whole number ≥ 1",
            positive,
        );
        let time_budget = self
            .value(
                S::Constraints,
                Key::TimeBudget.name(),
                "must be a positive duration (2h, 90m, 1h30m) or none",
                optional_duration,
            )
            .and_then(|(v, _, _)| v);
        let token_budget = self
            .value(
                S::Constraints,
                Key::TokenBudget.name(),
                "must be a number of tokens (2M tokens, 500k, 2000000) or none",
                token_count,
            )
            .and_then(|(v, _, _)| v);
        let cost_budget = self
            .value(
                S::Constraints,
                Key::CostBudget.name(),
                "must be an amount in US dollars ($20, 20 USD, 12.50, $20 per researcher) or none",
                cost_amount,
            )
            .and_then(|(v, _, _)| v);
        let researcher_timeout = self
            .value(
                S::Constraints,
                Key::ResearcherTimeout.name(),
                "must be a positive duration (30m, 1h) or none",
                optional_duration,
            )
            .and_then(|(v, _, _)| v);
        let pause_every = self
            .agreed(
                (S::Constraints, Key::PauseEvery.name()),
                Key::PauseEvery.name(),
                "must be never or a number of rounds ≥ 1",
                pause_every,
            )
            .flatten();
        let stall_rounds = self
            .value(
                S::Constraints,
                "Stall rounds",
                "must be never or a number of rounds ≥ 1",
                self::pause_every,
            )
            .map_or(Some(super::DEFAULT_STALL_ROUNDS), |(v, _, _)| v);
        let lease = self
            .value(
                S::Constraints,
                "Lease",
                "must be a duration of at least 1s (30s, 2m)",
                |v| positive_duration(v).filter(|d| d.as_secs() >= 1),
            )
            .map(|(v, _, _)| v);
        Budgets {
            max_total_iterations,
            time_budget,
            token_budget,
            cost_budget,
            researcher_timeout,
            pause_every,
            stall_rounds,
            lease,
        }
    }

    fn title(&mut self) -> Option<String> {
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

    fn goal(&mut self) -> Option<String> {
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
    fn brief(&mut self) -> Option<String> {
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

    fn mode(&mut self) -> Option<Mode> {
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

    fn metric(&mut self, mode: Option<Mode>) -> Option<MetricSpec> {
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

    fn criteria(&mut self, mode: Option<Mode>) -> Option<String> {
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

    fn count(&mut self) -> Option<usize> {
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

    fn focus(&mut self, count: Option<usize>, strategy: Strategy) -> BTreeMap<String, String> {
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

    /// A list key's items: the inline value (if any) then the bullets under it.
    fn list(&self, kind: SectionKind, key: &str) -> Vec<String> {
        let Some(s) = self.get(kind, key) else {
            return Vec::new();
        };
        std::iter::once(s.value.as_str())
            .chain(s.items.iter().map(|i| i.value.as_str()))
            .filter(|v| !v.is_empty() && !super::parse::is_placeholder(v))
            .map(str::to_string)
            .collect()
    }

    fn items(&self, kind: SectionKind) -> Vec<String> {
        self.doc.section(kind).map_or(Vec::new(), |s| {
            s.lines
                .iter()
                .map(|l| l.value.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect()
        })
    }

    fn evaluation(&mut self, mode: Option<Mode>) -> Option<Evaluation> {
        let command = self.command(S::Evaluation, "command", " (it prints the metric)");
        let timeout = self
            .value(
                S::Evaluation,
                "timeout",
                "must be a positive duration (5m, 90s)",
                positive_duration,
            )
            .map_or(DEFAULT_EVAL_TIMEOUT, |(v, _, _)| v);
        let repeats = self
            .value(
                S::Evaluation,
                "repeats",
                "must be a whole number ≥ 1",
                positive,
            )
            .map_or(1, |(v, _, _)| v);
        let frozen: Vec<String> = self.get(S::Evaluation, "frozen").map_or(Vec::new(), |s| {
            s.value
                .split(',')
                .chain(s.items.iter().flat_map(|i| i.value.split(',')))
                .map(|p| super::parse::unquote(p).to_string())
                .filter(|p| !p.is_empty())
                .collect()
        });
        // `frozen: none` says nothing is frozen; `none` next to paths is a mistake.
        let frozen_none = !frozen.is_empty() && frozen.iter().all(|p| is_none(p));
        if !frozen_none && frozen.iter().any(|p| is_none(p)) {
            if let Some(s) = self.get(S::Evaluation, "frozen") {
                self.invalid(S::Evaluation, s, "`none` cannot be listed with paths");
            }
        }
        let frozen = if frozen_none { Vec::new() } else { frozen };
        let last_number = self
            .value(
                S::Evaluation,
                "metric from",
                "must be name (read the metric's `name: value` line) or last number",
                metric_from,
            )
            .is_some_and(|(v, _, _)| v);
        let (prune, prune_early) = self
            .value(
                S::Evaluation,
                "prune",
                "must be on, off or early",
                prune_setting,
            )
            .map_or((false, false), |(v, _, _)| v);
        let prune_warmup = self
            .value(
                S::Evaluation,
                "prune warmup",
                "must be a whole number of readings ≥ 0 (e.g. 2)",
                |v| v.trim().parse::<u32>().ok(),
            )
            .map_or(super::DEFAULT_PRUNE_WARMUP, |(v, _, _)| v);
        let holdout = self.optional(S::Evaluation, "holdout");
        let judge = self.optional(S::Evaluation, "judge");
        if mode == Some(Mode::Qualitative) && judge.is_none() {
            self.missing(
                S::Evaluation,
                "judge",
                " (qualitative mode needs a command that prints a 0-10 score)",
            );
        }
        Some(Evaluation {
            command: command?,
            timeout,
            repeats,
            frozen,
            frozen_none,
            last_number,
            prune,
            prune_early,
            prune_warmup,
            holdout,
            judge,
        })
    }

    fn agent(&mut self) -> Option<Agent> {
        let command = self.command(S::Agent, "command", " (any program, or builtin:tune)");
        let seed = self
            .value(S::Agent, "seed", "must be a whole number ≥ 0", |v| {
                v.parse::<u64>().ok()
            })
            .map_or(0, |(v, _, _)| v);
        let timeout = self
            .value(
                S::Agent,
                "timeout",
                "must be a positive duration (30m, 2h)",
                positive_duration,
            )
            .map_or(DEFAULT_AGENT_TIMEOUT, |(v, _, _)| v);
        let (model, base_url, api_key_env) = self.http_agent(command.as_deref());
        let command = command?;
        self.builtin_exists(&command);
        let (max_turns, extra_args) = self.preset_options(&command);
        Some(Agent {
            command,
            timeout,
            seed,
            max_turns,
            extra_args,
            chair: self.optional(S::Agent, "chair"),
            reviewer: self.optional(S::Agent, "reviewer"),
            synthesizer: self.optional(S::Agent, "synthesizer"),
            retrospective: self.optional(S::Agent, "retrospective"),
            model,
            base_url,
            api_key_env,
        })
    }

    /// A `builtin:` name this release does not have would run as a shell command and fail on
    /// the first attempt: refused here, with the names it has.
    fn builtin_exists(&mut self, command: &str) {
        let crate::agents::Kind::UnknownBuiltin(name) = crate::agents::Kind::of(command) else {
            return;
        };
        if let Some(s) = self.get(S::Agent, "command") {
            let builtins = crate::agents::kind::BUILTINS.join(" or ");
            let message =
                format!("`{name}` is not built in; the built-in researchers are {builtins}");
            self.error(s.line, message, "- command: builtin:tune");
        }
    }

    /// `max turns` and `extra args` of the Agent section: options of a preset, each only where
    /// the preset's CLI honours it (`model` is read by `http_agent`).
    fn preset_options(&mut self, command: &str) -> (Option<u32>, Option<String>) {
        let preset = crate::agents::Preset::from_command(command).map(|(p, _)| p);
        let max_turns = self
            .value(
                S::Agent,
                "max turns",
                "must be a whole number ≥ 1",
                positive,
            )
            .map(|(v, _, _)| v);
        let extra_args = self.optional(S::Agent, "extra args");
        let presets = "claude, codex, aider, gemini or opencode";
        if let Some(s) = self.get(S::Agent, "max turns") {
            match preset {
                Some(p) if p.honours_max_turns() => {}
                Some(p) => {
                    let message = format!(
                        "`{}: {}` — {} has no turn limit option; remove this line",
                        s.written,
                        s.value,
                        p.product()
                    );
                    self.error(
                        s.line,
                        message,
                        "- command: claude   (with - max turns: 30)",
                    );
                }
                None => {
                    let message = format!(
                        "`{}: {}` — only a preset ({presets}) takes a turn limit",
                        s.written, s.value
                    );
                    self.error(s.line, message, "- command: claude");
                }
            }
        }
        if let Some(s) = self.get(S::Agent, "model") {
            if let Some(problem) = preset.and_then(|p| p.model_problem(&s.value)) {
                let message = format!("`{}: {}` — {problem}", s.written, s.value);
                self.error(s.line, message, "- model: anthropic/claude-sonnet-4-5");
            }
        }
        if let Some(s) = self.get(S::Agent, "extra args") {
            if preset.is_none() {
                let message = format!(
                    "`{}: {}` — only a preset ({presets}) takes extra args; write them in your \
                     command line instead",
                    s.written, s.value
                );
                self.error(s.line, message, "- command: claude");
            } else if let Some(problem) = crate::agents::preset::extra_args_problem(&s.value) {
                let message = format!("`{}: {}` — {problem}", s.written, s.value);
                self.error(s.line, message, "- extra args: --verbose");
            }
        }
        (max_turns, extra_args)
    }

    /// The Agent keys of `builtin:openai` (model, base url, api key env), checked; a key another
    /// command would not read is refused with its line rather than silently ignored (a preset
    /// reads `model` too: `--model`).
    fn http_agent(
        &mut self,
        command: Option<&str>,
    ) -> (Option<String>, Option<String>, Option<String>) {
        let kind = command.map(crate::agents::Kind::of);
        let http = kind
            .as_ref()
            .is_none_or(|k| *k == crate::agents::Kind::OpenAi);
        let preset = matches!(kind, Some(crate::agents::Kind::Preset(..)));
        for key in ["model", "base url", "api key env"] {
            let reads = http || (preset && key == "model");
            match self.get(S::Agent, key) {
                Some(s) if !reads => {
                    let or_preset = if key == "model" {
                        " or a preset (claude, codex, aider, gemini, opencode)"
                    } else {
                        ""
                    };
                    let message = format!(
                        "`{}:` is read only by `- command: builtin:openai`{or_preset}, not by `{}`",
                        s.written,
                        command.unwrap_or_default()
                    );
                    self.error(
                        s.line,
                        message,
                        "remove the line, or use - command: builtin:openai",
                    );
                }
                _ => {}
            }
        }
        let base_url = self
            .value(
                S::Agent,
                "base url",
                "must be an http:// or https:// address (the API's base, usually ending in /v1)",
                |v| {
                    let v = v.trim();
                    let scheme = v.starts_with("http://") || v.starts_with("https://");
                    let host = reqwest::Url::parse(v)
                        .is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()));
                    (scheme && host && !v.contains(char::is_whitespace)).then(|| v.to_string())
                },
            )
            .map(|(v, _, _)| v);
        let api_key_env = match self.get(S::Agent, "api key env") {
            Some(s) if is_env_name(&s.value) => Some(s.value.trim().to_string()),
            Some(s) => {
                let what = if s.value.trim().starts_with("sk-") || s.value.trim().len() > 40 {
                    "this looks like a key: never write a key in conference.md (it is stored in \
                     the conference's refs and pushed with them); name the environment variable \
                     that holds it"
                } else {
                    "must be the name of an environment variable (letters, digits, _)"
                };
                self.invalid(S::Agent, s, what);
                None
            }
            None => None,
        };
        let model = self.optional(S::Agent, "model");
        (model, base_url, api_key_env)
    }

    fn command(&mut self, kind: SectionKind, key: &str, why: &str) -> Option<String> {
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

    fn optional(&self, kind: SectionKind, key: &str) -> Option<String> {
        self.get(kind, key)
            .map(|s| s.value.clone())
            .filter(|v| !v.is_empty() && !is_none(v))
    }
}

fn is_none(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "none" | "no" | "-" | "n/a" | "unlimited" | "never"
    )
}

/// `2M tokens`, `500k`, `2,000,000`, `2000000` → the number; `none` → no budget.
fn token_count(value: &str) -> Option<Option<u64>> {
    // The original skill's unfilled template: `{optional — omit or set a cap}`.
    let v = value.trim();
    if v.starts_with('{') && v.ends_with('}') && v.contains("optional") {
        return Some(None);
    }
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim().to_ascii_lowercase();
    let v = v
        .trim_end_matches("tokens")
        .trim_end_matches("token")
        .trim();
    let v = v.replace([',', '_'], "");
    let (number, scale) = match v.chars().last()? {
        'k' => (&v[..v.len() - 1], 1e3),
        'm' => (&v[..v.len() - 1], 1e6),
        'b' | 'g' => (&v[..v.len() - 1], 1e9),
        _ => (v.as_str(), 1.0),
    };
    let n: f64 = number.trim().parse().ok()?;
    (n.is_finite() && n > 0.0).then(|| Some((n * scale).round() as u64))
}

/// `$20`, `20 USD`, `20$`, `12.50 dollars` → the amount; `none` → no budget.
fn usd_amount(value: &str) -> Option<Option<f64>> {
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim().to_ascii_lowercase();
    let v = v.trim_start_matches("us").trim();
    let v = v.trim_start_matches('$').trim_end_matches('$').trim();
    let v = ["usd", "dollars", "dollar"]
        .iter()
        .fold(v, |v, unit| v.trim_end_matches(unit).trim());
    let n: f64 = v.replace(',', "").parse().ok()?;
    (n.is_finite() && n > 0.0).then_some(Some(n))
}

/// `Cost budget`: an amount for the whole conference, or with `per researcher` (`each`) for
/// each researcher's share.
fn cost_amount(value: &str) -> Option<Option<(f64, bool)>> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    let each = ["per researcher", "/researcher", "each"]
        .iter()
        .find_map(|tail| lower.strip_suffix(tail).map(|rest| rest.len()));
    match each {
        Some(len) => usd_amount(&v[..len]).map(|a| a.map(|usd| (usd, true))),
        None => usd_amount(v).map(|a| a.map(|usd| (usd, false))),
    }
}

fn is_env_name(value: &str) -> bool {
    let v = value.trim();
    !v.is_empty()
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `metric from`: `name` (default) → false; `last number` → true.
fn metric_from(value: &str) -> Option<bool> {
    match super::parse::normalize(value).as_str() {
        "name" | "named" | "key" => Some(false),
        "lastnumber" | "last" => Some(true),
        _ => None,
    }
}

/// `prune`: on / off (the words `yes_no` takes), or early → (pruning, without the catch-up check).
fn prune_setting(value: &str) -> Option<(bool, bool)> {
    match value.trim().to_ascii_lowercase().as_str() {
        "early" => Some((true, true)),
        v => yes_no(v).map(|on| (on, false)),
    }
}

fn positive(value: &str) -> Option<u32> {
    value.trim().parse::<u32>().ok().filter(|&n| n >= 1)
}

fn yes_no(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" | "on" | "enabled" => Some(true),
        "no" | "n" | "false" | "off" | "disabled" => Some(false),
        _ => None,
    }
}

fn devils_advocate(value: &str) -> Option<DevilsAdvocate> {
    let v = value.trim().to_ascii_lowercase();
    if v.starts_with("ask") {
        return Some(DevilsAdvocate::Ask);
    }
    match v.as_str() {
        "enabled" | "enable" => Some(DevilsAdvocate::Enabled),
        "disabled" | "disable" | "none" => Some(DevilsAdvocate::Disabled),
        _ => yes_no(&v).map(|on| {
            if on {
                DevilsAdvocate::Enabled
            } else {
                DevilsAdvocate::Disabled
            }
        }),
    }
}

fn strategy(value: &str) -> Option<Strategy> {
    match super::parse::normalize(value).as_str() {
        "assigned" => Some(Strategy::Assigned),
        "free" => Some(Strategy::Free),
        _ => None,
    }
}

fn direction(value: &str) -> Option<Direction> {
    match super::parse::normalize(value).as_str() {
        "maximize" | "maximise" | "max" | "higher" | "higherisbetter" | "increase" => {
            Some(Direction::Maximize)
        }
        "minimize" | "minimise" | "min" | "lower" | "lowerisbetter" | "decrease" => {
            Some(Direction::Minimize)
        }
        _ => None,
    }
}

/// `40`, `< 50ms`, `> 95%`, `> 8/10` → the number; `none` → no target.
fn target(value: &str) -> Option<Option<f64>> {
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim_start_matches(|c: char| "<>=≤≥~ ".contains(c));
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || ".eE+-".contains(c)))
        .unwrap_or(v.len());
    let number: f64 = v[..end].parse().ok()?;
    number.is_finite().then_some(Some(number))
}

/// `1%` → percent of the baseline; `0.02` → absolute; `none` → the default.
fn tolerance(value: &str) -> Option<Option<Tolerance>> {
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim();
    let (number, percent) = match v.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (v, false),
    };
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    Some(Some(if percent {
        Tolerance::Percent(n)
    } else {
        Tolerance::Absolute(n)
    }))
}

fn positive_duration(value: &str) -> Option<Duration> {
    parse_duration(value).filter(|d| !d.is_zero())
}

fn optional_duration(value: &str) -> Option<Option<Duration>> {
    if is_none(value) && !value.trim().is_empty() {
        return Some(None);
    }
    positive_duration(value).map(Some)
}

/// `never` → no pause; `2` (or `2 rounds`) → every 2 rounds.
fn pause_every(value: &str) -> Option<Option<u32>> {
    if is_none(value) && !value.trim().is_empty() {
        return Some(None);
    }
    let v = value.trim().to_ascii_lowercase();
    let v = v
        .trim_end_matches("rounds")
        .trim_end_matches("round")
        .trim();
    positive(v).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load;

    const EXAMPLE: &str = include_str!("../../tests/data/config/example.md");

    fn errors(text: &str) -> Vec<ConfigError> {
        load(text).expect_err("should not validate")
    }

    /// The error on `line` whose message contains `needle`.
    fn has_error(errors: &[ConfigError], line: usize, needle: &str) -> bool {
        errors
            .iter()
            .any(|e| e.line == line && e.message.contains(needle))
    }

    fn assert_error(text: &str, line: usize, needle: &str) -> ConfigError {
        let errors = errors(text);
        errors
            .iter()
            .find(|e| e.line == line && e.message.contains(needle))
            .cloned()
            .unwrap_or_else(|| panic!("no error at line {line} with {needle:?} in {errors:#?}"))
    }

    /// A small valid file in plain keys, the base of the error tests.
    const PLAIN: &str = "\
# Conference: Plain
## Goal
Make it fast.
## Mode
- mode: metric
## Success Metric
- metric: ms
- target: none
- direction: lower is better
## Researchers
- count: 2
- iterations_per_round: 3
- max rounds: 2
## Evaluation
- command: ./eval.sh # the shell's comment, kept
## Agent
- command: builtin:tune
";

    #[test]
    fn the_example_round_trips_every_field() {
        let c = load(EXAMPLE).expect("example validates");
        let s = |v: &str| v.to_string();
        let expected = Config {
            title: s("Faster tokenizer"),
            goal: s("Cut the tokenizer benchmark's median time without changing its output."),
            brief: None,
            mode: Mode::Metric,
            metric: Some(MetricSpec {
                name: s("median_ms"),
                target: Some(40.0),
                direction: Direction::Minimize,
            }),
            criteria: None,
            count: 3,
            iterations_per_round: 5,
            max_rounds: 4,
            devils_advocate: DevilsAdvocate::Enabled,
            final_confirmation: Some(s("confirmed")),
            allowed: vec![s("src/tokenizer/**"), s("Cargo.toml (features only)")],
            forbidden: vec![
                s("benches/** and tests/** (the evaluation harness)"),
                s("Do not change the public API."),
            ],
            strategy: Strategy::Assigned,
            focus: [
                ("A", "Allocation: fewer copies, reuse buffers."),
                ("B", "Algorithm: the matching loop."),
                ("C", "Data layout and caching."),
            ]
            .into_iter()
            .map(|(k, v)| (s(k), s(v)))
            .collect(),
            guard: vec![s("cargo test --release must pass")],
            noise_runs: 3,
            min_consensus_delta: Some(Tolerance::Percent(1.0)),
            max_total_iterations: Some(60),
            time_budget: Some(Duration::from_secs(6 * 3600)),
            token_budget: None,
            cost_budget: None,
            cost_budget_per_researcher: false,
            researcher_timeout: Some(Duration::from_secs(45 * 60)),
            pause_every: None,
            stall_rounds: Some(2),
            lease: None,
            evaluation: Evaluation {
                command: s("./bench.sh"),
                timeout: Duration::from_secs(300),
                repeats: 1,
                frozen: vec![s("bench.sh"), s("benches/**")],
                frozen_none: false,
                last_number: false,
                prune: false,
                prune_early: false,
                prune_warmup: 2,
                holdout: None,
                judge: None,
            },
            agent: Agent {
                command: s(
                    r#"claude -p "$(cat "$CONFERENCE_PROMPT_FILE")" --permission-mode acceptEdits"#,
                ),
                timeout: DEFAULT_AGENT_TIMEOUT,
                seed: 0,
                max_turns: None,
                extra_args: None,
                chair: None,
                reviewer: None,
                synthesizer: None,
                retrospective: None,
                model: None,
                base_url: None,
                api_key_env: None,
            },
            success_definition: Some(s("median_ms <= 40 with identical output")),
            current_approach: s(
                "A straightforward byte-by-byte scanner with a HashMap vocabulary.",
            ),
            shared_knowledge: vec![],
            context: s("- benches/README.md explains the benchmark."),
            environment: Default::default(),
            loop_mode: Default::default(),
        };
        assert_eq!(c, expected);
        assert_eq!(c.devils_advocate_id().as_deref(), Some("C"));
    }

    #[test]
    fn plain_keys_and_defaults() {
        let c = load(PLAIN).expect("plain form validates");
        assert_eq!(c.title, "Plain");
        assert_eq!(c.count, 2);
        assert_eq!(c.iterations_per_round, 3);
        assert_eq!(c.max_rounds, 2);
        let m = c.metric.expect("metric");
        assert_eq!(
            (m.name.as_str(), m.target, m.direction),
            ("ms", None, Direction::Minimize)
        );
        assert_eq!(
            c.evaluation.command,
            "./eval.sh # the shell's comment, kept"
        );
        assert_eq!(c.evaluation.timeout, DEFAULT_EVAL_TIMEOUT);
        assert_eq!(c.evaluation.repeats, 1);
        assert_eq!(c.agent.command, "builtin:tune");
        assert_eq!(c.strategy, Strategy::Free);
        assert_eq!(c.devils_advocate, DevilsAdvocate::Disabled);
        assert_eq!(c.noise_runs, 1);
        assert_eq!(c.min_consensus_delta, None);
        assert_eq!(c.pause_every, None);
        assert_eq!(c.final_confirmation, None);
    }

    #[test]
    fn mixed_form_and_spellings() {
        let text = "\
# Conference: Mixed

## Goal
Be *better*.

Second paragraph.
## Mode
<!-- metric or qualitative -->
`metric` (numeric optimization)
## Success Metric
- **Metric:** accuracy on test set
- **Target:** > 95%
**Direction:** higher is better
## Researchers
Count: 4
- **Iterations-Per-Round:** 2
- MAX_ROUNDS: 3
## Pre-Flight Gate
- **Researcher count:** 4
- **Critic / Devil's Advocate:** ask user before run
- **Unattended:** no
- **Pause every:** 2 rounds
- **Final confirmation:** pending
## Search Space
- **Allowed changes:** {What researchers CAN modify}
- **Forbidden changes:**
  - data/**
  - note: keep the API
## Search Space Partitioning
- strategy: free
## Noise Handling
- noise_runs: 2
- min consensus delta: 0.02
## Constraints
- **Time budget:** 1.5h
- **Token budget:** 2M tokens
- **Researcher timeout:** 45 min
## Evaluation
- command: `python eval.py --split dev`
- timeout: 90
- repeats: 3
- frozen:
  - eval.py
  - data/**, fixtures/*.json
- holdout: python eval.py --split test
## Agent
- **Command:** ./agent.sh
- **Seed:** 42
- chair: ./prose.sh chair
## Guard
- tests pass
* no new dependencies
## Shared Knowledge
- buffers help
## Conference Log
| Round | Researcher | Best Metric | Key Finding | Status |
|---|---|---|---|---|
| 1 | A | 0.9 | x | kept |
";
        let c = load(text).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(c.goal, "Be *better*.\n\nSecond paragraph.");
        assert_eq!(c.metric.as_ref().map(|m| m.target), Some(Some(95.0)));
        assert_eq!(
            c.metric.as_ref().map(|m| m.direction),
            Some(Direction::Maximize)
        );
        assert_eq!(
            c.metric.map(|m| m.name).as_deref(),
            Some("accuracy on test set")
        );
        assert_eq!((c.count, c.iterations_per_round, c.max_rounds), (4, 2, 3));
        assert_eq!(c.devils_advocate, DevilsAdvocate::Ask);
        assert_eq!(c.pause_every, Some(2));
        assert_eq!(c.final_confirmation.as_deref(), Some("pending"));
        assert!(
            c.allowed.is_empty(),
            "unfilled placeholder: {:?}",
            c.allowed
        );
        assert_eq!(c.forbidden, vec!["data/**", "note: keep the API"]);
        assert_eq!(c.noise_runs, 2);
        assert_eq!(c.min_consensus_delta, Some(Tolerance::Absolute(0.02)));
        assert_eq!(c.time_budget, Some(Duration::from_secs(5400)));
        assert_eq!(c.token_budget, Some(2_000_000));
        assert_eq!(c.researcher_timeout, Some(Duration::from_secs(2700)));
        assert_eq!(c.max_total_iterations, None);
        assert_eq!(c.evaluation.command, "python eval.py --split dev");
        assert_eq!(c.evaluation.timeout, Duration::from_secs(90));
        assert_eq!(c.evaluation.repeats, 3);
        assert_eq!(
            c.evaluation.frozen,
            vec!["eval.py", "data/**", "fixtures/*.json"]
        );
        assert_eq!(
            c.evaluation.holdout.as_deref(),
            Some("python eval.py --split test")
        );
        assert_eq!(c.agent.seed, 42);
        assert_eq!(c.agent.chair.as_deref(), Some("./prose.sh chair"));
        assert_eq!(c.guard, vec!["tests pass", "no new dependencies"]);
        assert_eq!(c.shared_knowledge, vec!["buffers help"]);
    }

    #[test]
    fn qualitative_mode_needs_criteria_and_judge() {
        let text = PLAIN.replace("- mode: metric", "qualitative");
        let e = errors(&text);
        assert!(has_error(&e, 0, "Success Criteria"), "{e:#?}");
        assert!(has_error(&e, 0, "`judge`"), "{e:#?}");
        let ok = format!("{text}## Success Criteria\nClear and correct.\n")
            .replace("## Agent", "- judge: ./judge.sh\n## Agent");
        let c = load(&ok).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(c.mode, Mode::Qualitative);
        assert_eq!(c.metric, None);
        assert_eq!(c.criteria.as_deref(), Some("Clear and correct."));
        assert_eq!(c.evaluation.judge.as_deref(), Some("./judge.sh"));
    }

    #[test]
    fn each_bad_value_is_reported_on_its_line() {
        let cases = [
            (
                "- mode: metric",
                "- mode: numbers",
                5,
                "must be metric or qualitative",
            ),
            ("- target: none", "- target: fast", 8, "must be a number"),
            (
                "- direction: lower is better",
                "- direction: sideways",
                9,
                "maximize or minimize",
            ),
            ("- count: 2", "- count: 0", 11, "≥ 1"),
            (
                "- iterations_per_round: 3",
                "- iterations_per_round: many",
                12,
                "≥ 1",
            ),
            ("- max rounds: 2", "- max rounds: -1", 13, "≥ 1"),
            ("- command: builtin:tune", "- command:", 17, "empty"),
            (
                "- command: builtin:tune",
                "- command: builtin:tun",
                17,
                "`builtin:tun` is not built in; the built-in researchers are builtin:tune or \
                 builtin:openai",
            ),
        ];
        for (from, to, line, needle) in cases {
            let e = assert_error(&PLAIN.replace(from, to), line, needle);
            assert!(!e.hint.is_empty(), "{e:?}");
        }
    }

    #[test]
    fn budgets_must_be_positive() {
        let text = format!(
            "{PLAIN}## Constraints\n- max total iterations: 0\n- time budget: 0s\n- researcher timeout: soon\n- pause every: 0\n## Noise Handling\n- noise runs: 0\n- min consensus delta: -1%\n"
        );
        let e = errors(&text);
        for line in 19..=22 {
            assert!(e.iter().any(|e| e.line == line), "line {line}: {e:#?}");
        }
        for line in 24..=25 {
            assert!(e.iter().any(|e| e.line == line), "line {line}: {e:#?}");
        }
        let e = assert_error(
            &PLAIN.replace("./eval.sh #", "./eval.sh\n- timeout: 0s #"),
            16,
            "timeout",
        );
        assert_eq!(e.hint, "- timeout: 5m");
    }

    #[test]
    fn stall_rounds_is_never_or_a_count_and_defaults_to_two() {
        assert_eq!(load(PLAIN).unwrap().stall_rounds, Some(2));
        for (value, want) in [("never", None), ("3", Some(3)), ("1 round", Some(1))] {
            let text = format!("{PLAIN}## Constraints\n- stall rounds: {value}\n");
            assert_eq!(load(&text).unwrap().stall_rounds, want, "{value}");
        }
        let text = format!("{PLAIN}## Constraints\n- **Stall rounds:** 0\n");
        let e = assert_error(&text, 19, "never or a number of rounds");
        assert!(e.hint.contains("Stall rounds"), "{e:?}");
    }

    #[test]
    fn missing_required_fields_name_themselves() {
        let e = errors("## Goal\n\n## Researchers\n- count: 1\n");
        assert!(has_error(&e, 0, "title"), "{e:#?}");
        assert!(has_error(&e, 1, "goal"), "{e:#?}");
        assert!(has_error(&e, 0, "## Mode"), "{e:#?}");
        assert!(has_error(&e, 0, "`Iterations per round`"), "{e:#?}");
        assert!(has_error(&e, 0, "`Max rounds`"), "{e:#?}");
        let eval = e
            .iter()
            .find(|e| e.message.contains("## Evaluation"))
            .expect("eval");
        assert!(eval.hint.contains("- command: ./eval.sh"), "{eval:?}");
        assert!(has_error(&e, 0, "## Agent"), "{e:#?}");
        // Errors come sorted, missing fields (line 0) last.
        assert_eq!(e.first().map(|e| e.line), Some(1));
        let e = errors(
            &PLAIN
                .replace("- metric: ms\n", "")
                .replace("- direction: lower is better\n", ""),
        );
        assert!(has_error(&e, 0, "`Metric`"), "{e:#?}");
        assert!(has_error(&e, 0, "`Direction`"), "{e:#?}");
        assert_eq!(e.len(), 2, "{e:#?}");
    }

    #[test]
    fn pre_flight_gate_must_agree() {
        let text =
            format!("{PLAIN}## Pre-Flight Gate\n- **Researcher count:** 3\n- **Max rounds:** 2\n");
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_eq!(e[0].line, 19);
        assert!(
            e[0].message.contains("line 19") && e[0].message.contains("line 11"),
            "{e:?}"
        );
        // A value only in the gate is used.
        let c = load(&format!(
            "{}## Pre-Flight Gate\n- researcher count: 3\n- partitioning: free\n",
            PLAIN.replace("- count: 2\n", "")
        ))
        .unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(c.count, 3);
    }

    #[test]
    fn assigned_strategy_needs_a_focus_per_researcher() {
        let text = format!(
            "{PLAIN}## Search Space Partitioning\n**Strategy:** assigned\n### Researcher A Focus\nLoops.\n### Researcher C Focus\nToo many.\n"
        );
        let e = errors(&text);
        assert!(has_error(&e, 22, "count is 2"), "{e:#?}");
        let b = e
            .iter()
            .find(|e| e.message.contains("researcher B"))
            .expect("B missing");
        assert_eq!(b.line, 0);
        assert!(b.hint.contains("### Researcher B Focus"), "{b:?}");
        assert_eq!(e.len(), 2, "{e:#?}");
    }

    #[test]
    fn final_confirmation_pending_is_kept_not_rejected() {
        let text = format!("{PLAIN}## Pre-Flight Gate\n- **Final confirmation:** pending\n");
        let c = load(&text).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(c.final_confirmation.as_deref(), Some("pending"));
    }

    #[test]
    fn all_errors_are_collected() {
        let text = PLAIN
            .replace("- count: 2", "- count: zero")
            .replace("- max rounds: 2", "- max rounds: 2\n- bogus: 1")
            .replace("## Agent", "## Agnet");
        let e = errors(&text);
        assert!(has_error(&e, 11, "≥ 1"), "{e:#?}");
        assert!(has_error(&e, 14, "unknown key `bogus`"), "{e:#?}");
        assert!(has_error(&e, 17, "unknown section"), "{e:#?}");
        assert!(has_error(&e, 0, "## Agent"), "{e:#?}");
    }

    #[test]
    fn the_original_skills_unfilled_template_names_what_to_fill_in() {
        let e = errors(include_str!("../../tests/data/config/original-template.md"));
        let lines: Vec<usize> = e.iter().map(|e| e.line).collect();
        assert_eq!(lines, [3, 6, 28, 0, 0], "{e:#?}");
        assert!(e[1].message.contains("`## Mode` is empty"), "{e:#?}");
        assert!(e[3].message.contains("## Evaluation") && e[4].message.contains("## Agent"));
    }

    #[test]
    fn value_parsers() {
        assert_eq!(target("< 50ms"), Some(Some(50.0)));
        assert_eq!(target("> 8/10"), Some(Some(8.0)));
        assert_eq!(target("-0.5"), Some(Some(-0.5)));
        assert_eq!(target("None"), Some(None));
        assert_eq!(target(""), None);
        assert_eq!(tolerance("1%"), Some(Some(Tolerance::Percent(1.0))));
        assert_eq!(tolerance("0.5 %"), Some(Some(Tolerance::Percent(0.5))));
        assert_eq!(tolerance("abc"), None);
        assert_eq!(direction("Min"), Some(Direction::Minimize));
        assert_eq!(direction("MAXIMISE"), Some(Direction::Maximize));
        assert_eq!(devils_advocate("yes"), Some(DevilsAdvocate::Enabled));
        assert_eq!(devils_advocate("false"), Some(DevilsAdvocate::Disabled));
        assert_eq!(
            devils_advocate("Ask user before run"),
            Some(DevilsAdvocate::Ask)
        );
        assert_eq!(devils_advocate("maybe"), None);
        assert_eq!(pause_every("never"), Some(None));
        assert_eq!(pause_every("3"), Some(Some(3)));
        assert_eq!(pause_every("0"), None);
        assert_eq!(optional_duration("none"), Some(None));
        assert_eq!(optional_duration("0m"), None);
    }

    fn openai(lines: &str) -> String {
        PLAIN.replace(
            "- command: builtin:tune",
            &format!("- command: builtin:openai\n{lines}"),
        )
    }

    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|l| l.contains(needle)).unwrap() + 1
    }

    #[test]
    fn http_agent_keys() {
        let text = openai(
            "- model: qwen2.5-coder\n- base url: http://127.0.0.1:11434/v1\n- api key env: MY_KEY",
        );
        let c = load(&text).expect("validates");
        assert_eq!(c.agent.model.as_deref(), Some("qwen2.5-coder"));
        assert_eq!(
            c.agent.base_url.as_deref(),
            Some("http://127.0.0.1:11434/v1")
        );
        assert_eq!(c.agent.api_key_env.as_deref(), Some("MY_KEY"));
        let bare = load(&openai("")).expect("validates without keys (environment variables)");
        assert_eq!(bare.agent.model, None);
    }

    #[test]
    fn http_agent_keys_are_checked_with_their_line() {
        for bad in ["localhost:8000", "http://", "http:// x/v1"] {
            let text = openai(&format!("- base url: {bad}"));
            assert_error(&text, line_of(&text, "base url"), "http:// or https://");
        }
        let text = openai("- api key env: sk-proj-abcdef0123456789");
        let e = assert_error(&text, line_of(&text, "api key env"), "looks like a key");
        assert!(e.hint.contains("api key env: OPENAI_API_KEY"), "{e:?}");
        let text = openai("- api key env: my key");
        assert_error(&text, line_of(&text, "api key env"), "environment variable");
        let text = PLAIN.replace(
            "- command: builtin:tune",
            "- command: builtin:tune\n- base url: http://x/v1",
        );
        assert_error(
            &text,
            line_of(&text, "base url"),
            "only by `- command: builtin:openai`",
        );
    }
}
