//! conference.md: the conference's configuration, read from the seed's markdown template.
//!
//! Users bring the original skill's file (bold keys, `### Researcher A Focus` sections, prose) or
//! write plain keys; both parse into [`Config`]. Parsing (`parse`) only reads the text and keeps
//! every line number; validation (`validate`) checks the values and says, per line, what to write
//! instead. `template` writes the commented file `init` produces, and `edit` rewrites the parts the
//! conference maintains (Shared Knowledge, Conference Log) in the stored copy.

#[cfg(test)]
pub(crate) mod agent_settings_tests;
pub mod bounds;
pub mod changes;
pub mod commands;
pub mod duration;
pub mod edit;
pub mod environment;
pub mod guard;
pub mod keys;
pub mod launcher;
pub mod parse;
pub mod paths;
pub mod repeated;
pub mod rules;
pub mod sections;
pub mod template;
pub mod tracker;
pub mod validate;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::model::{Direction, LoopMode, Tolerance};

/// A problem found in conference.md, tied to the line that needs fixing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line number in conference.md; 0 when the problem is a missing section or key.
    pub line: usize,
    /// What is wrong.
    pub message: String,
    /// What to write instead (an example line).
    pub hint: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.message)?;
        } else {
            write!(f, "{}", self.message)?;
        }
        if !self.hint.is_empty() {
            write!(f, "\n  hint: {}", self.hint)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Metric,
    Qualitative,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSpec {
    pub name: String,
    /// The value that ends the conference when reached (None: no target, run on budgets).
    pub target: Option<f64>,
    pub direction: Direction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    Assigned,
    Free,
}

/// `**Critic / Devil's Advocate:**` in the Pre-Flight Gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DevilsAdvocate {
    Enabled,
    Disabled,
    /// "ask user before run": asked by `init`/`start` on a TTY, treated as disabled otherwise.
    Ask,
}

/// A value that came from a line of conference.md, with that line (for error messages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// From `# Conference: <Title>`.
    pub title: String,
    pub goal: String,
    /// `- brief: program.md` under `## Goal`: a committed file (autoresearch's program.md) put
    /// into every researcher's prompt, within [`BRIEF_BYTES`], and frozen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brief: Option<String>,
    pub mode: Mode,
    /// Metric mode only.
    pub metric: Option<MetricSpec>,
    /// Qualitative mode only.
    pub criteria: Option<String>,
    /// Researcher count (A, B, C, ...).
    pub count: usize,
    pub iterations_per_round: u32,
    pub max_rounds: u32,
    /// Pre-Flight Gate answers.
    pub devils_advocate: DevilsAdvocate,
    /// `**Final confirmation:** pending` means the user has not confirmed: `start` refuses.
    pub final_confirmation: Option<String>,
    /// Search Space: allowed and forbidden changes, verbatim bullet items.
    pub allowed: Vec<String>,
    pub forbidden: Vec<String>,
    pub strategy: Strategy,
    /// `### Researcher A Focus` text by researcher letter.
    pub focus: BTreeMap<String, String>,
    /// Guard: free text bullets (conditions a change must keep).
    pub guard: Vec<String>,
    /// Noise Handling: runs per candidate in peer review (`**Noise runs:**`).
    pub noise_runs: u32,
    /// Noise Handling: `**Min consensus delta:**` (default 0.1% of baseline).
    pub min_consensus_delta: Option<Tolerance>,
    pub max_total_iterations: Option<u32>,
    pub time_budget: Option<Duration>,
    /// Tokens (input + output) the agents may use in all; no agent run starts once reached.
    pub token_budget: Option<u64>,
    /// USD the agents may spend in all; no agent run starts once reached.
    /// With `per researcher`: `cost_budget` is each researcher's share; one past it stops taking
    /// iterations while the others go on.
    #[serde(default)]
    pub cost_budget: Option<f64>,
    #[serde(default)]
    pub cost_budget_per_researcher: bool,
    pub researcher_timeout: Option<Duration>,
    /// Stop with exit 3 after every N rounds until `resume` (None: never pause).
    pub pause_every: Option<u32>,
    /// Constraints `**Stall rounds:**`: consecutive rounds without progress that end the
    /// conference (stalled, or converged on a plateau); None (`never`): only budgets and the
    /// target end it (seed 002's never-stop loop).
    #[serde(default = "default_stall_rounds")]
    pub stall_rounds: Option<u32>,
    /// Constraints `**Lease:**`: on several machines, how long a machine may stay silent before
    /// another takes over its researchers (None: [`DEFAULT_LEASE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Duration>,
    pub evaluation: Evaluation,
    pub agent: Agent,
    /// Pre-Flight Gate `**Success definition:**` (what "done" means, in the user's words).
    #[serde(default)]
    pub success_definition: Option<String>,
    /// `## Current Approach`: what the project does today (prose, comments removed).
    pub current_approach: String,
    pub shared_knowledge: Vec<String>,
    /// `## Context & References`: files, papers and links worth reading (prose).
    pub context: String,
    /// `## Environment`: setup command, shared paths, devices (see `environment`).
    #[serde(default)]
    pub environment: environment::Environment,
    /// `- mode:` under `## Researchers` (agentic unless it says human-in-the-loop).
    #[serde(default)]
    pub loop_mode: LoopMode,
    /// `- **Branching:**` under `## Researchers` (off unless it says agent-decided or
    /// best-first; `model::tree`).
    #[serde(default)]
    pub branching: crate::model::tree::Branching,
    /// `- **Max alive branches:**` (only with branching on; `model::tree::DEFAULT_MAX_ALIVE`
    /// when it does not say).
    #[serde(default = "default_max_alive")]
    pub max_alive_branches: u32,
    /// `- **Parameter sweep:** on` under `## Researchers`: an agent may end its note with
    /// `SWEEP: <path>:<name> = v1, v2, …` (`model::sweep`). Off unless it says on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parameter_sweep: bool,
}

fn default_max_alive() -> u32 {
    crate::model::tree::DEFAULT_MAX_ALIVE
}

/// Bytes of the Goal's brief a prompt holds; a longer file is cut at a line, with a line saying
/// how much was left out.
pub const BRIEF_BYTES: usize = 8 * 1024;

/// `**Stall rounds:**` when conference.md does not say: the seed's 2 rounds.
pub const DEFAULT_STALL_ROUNDS: u32 = 2;

/// How long a machine of a conference on several machines may stay silent before another takes
/// its researchers over, when conference.md says nothing (`- **Lease:** 30s`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

fn default_stall_rounds() -> Option<u32> {
    Some(DEFAULT_STALL_ROUNDS)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Prints the metric; runs in the candidate's worktree.
    pub command: String,
    /// Per experiment; a timed-out run is killed with its process group.
    pub timeout: Duration,
    /// Runs per candidate (the metric is their mean).
    pub repeats: u32,
    /// Paths (globs) no candidate may change: the evaluation harness.
    pub frozen: Vec<String>,
    /// `frozen: none`: nothing is frozen, not even the files the evaluation commands name.
    #[serde(default)]
    pub frozen_none: bool,
    /// `metric from: last number`: when the output does not name the metric, the last number
    /// printed is the metric (an explicit opt-in; by default such a run is a crash).
    #[serde(default)]
    pub last_number: bool,
    /// `prune: on`: an evaluation behind the researcher's best's curve at its step, whose
    /// intermediate readings, extrapolated optimistically, can no longer end within the noise
    /// margin of that curve's end, is stopped and recorded as `pruned` (`protocol::prune`).
    #[serde(default)]
    pub prune: bool,
    /// `prune: early`: behind the best's curve at the same step is enough, without the
    /// extrapolation (stops sooner; may stop a slow starter that would have ended better).
    #[serde(default)]
    pub prune_early: bool,
    /// `prune warmup`: intermediate readings a run prints before any pruning decision.
    #[serde(default = "default_prune_warmup")]
    pub prune_warmup: u32,
    /// `hardware: same`: every reading is taken on the hardware class (GPU model and count) of
    /// the first one; a reading another class gave is refused (crashed, never cached). `any`
    /// (the default) takes readings of any class and says when they mix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hardware_same: bool,
    /// Optional hold-out evaluation run only in peer review, never shown to researchers.
    pub holdout: Option<String>,
    /// Qualitative mode: prints a 0-10 score for a candidate.
    pub judge: Option<String>,
}

/// Readings before any pruning decision when `prune warmup` is not set.
pub const DEFAULT_PRUNE_WARMUP: u32 = 2;

fn default_prune_warmup() -> u32 {
    DEFAULT_PRUNE_WARMUP
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// A shell command, or `builtin:tune`.
    pub command: String,
    /// Per agent run: an agent still running then is killed and its attempt recorded as timeout.
    pub timeout: Duration,
    /// Seed for built-in researchers (deterministic per seed).
    pub seed: u64,
    /// `builtin:tune` proposes this many points per iteration, measured at once as one batch
    /// (`- sweep: 4`, 2 to 8; none: one point per iteration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<u32>,
    /// Preset options (see `crate::agents::preset`): a turn limit, extra arguments (and the
    /// model below).
    #[serde(default)]
    pub max_turns: Option<u32>,
    #[serde(default)]
    pub extra_args: Option<String>,
    /// Optional commands that write prose for the session chair, reviewer and synthesizer.
    pub chair: Option<String>,
    pub reviewer: Option<String>,
    pub synthesizer: Option<String>,
    /// Optional command that adds prose to each knowledge entry a conference's retrospective
    /// stores (the entry's text on stdin; never replaces its data).
    #[serde(default)]
    pub retrospective: Option<String>,
    /// The model an agent asks for (`builtin:openai`, where `OPENAI_MODEL` serves when unset;
    /// a preset's `--model`).
    #[serde(default)]
    pub model: Option<String>,
    /// `builtin:openai`: the OpenAI-compatible endpoint (`OPENAI_BASE_URL` when unset).
    #[serde(default)]
    pub base_url: Option<String>,
    /// `builtin:openai`: the environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
}

impl Agent {
    /// Which researcher the command names (the built-in tuner, a preset, ...).
    pub fn kind(&self) -> crate::agents::Kind {
        crate::agents::Kind::of(&self.command)
    }

    /// The preset the command names, with the program to run (`claude` or a path to it).
    pub fn preset(&self) -> Option<(crate::agents::Preset, String)> {
        match self.kind() {
            crate::agents::Kind::Preset(preset, program) => Some((preset, program)),
            _ => None,
        }
    }

    /// The command line a researcher runs: a preset's expansion, else the command as written.
    /// `cost_cap`: pass the remaining cost budget down (when the CLI takes one).
    pub fn command_line(&self, cost_cap: bool) -> String {
        match self.preset() {
            Some((preset, program)) => preset.command_line(
                &program,
                &crate::agents::preset::Options {
                    model: self.model.as_deref(),
                    max_turns: self.max_turns,
                    extra_args: self.extra_args.as_deref(),
                    cost_cap: cost_cap && preset.has_cost_cap(),
                },
            ),
            None => self.command.clone(),
        }
    }
}

impl Config {
    /// The lease of a machine on several machines (`- **Lease:**`, else [`DEFAULT_LEASE`]).
    pub fn lease(&self) -> Duration {
        self.lease.unwrap_or(DEFAULT_LEASE)
    }

    /// The command line researchers run (see [`Agent::command_line`]).
    pub fn agent_command(&self) -> String {
        self.agent.command_line(self.cost_budget.is_some())
    }

    /// Researcher IDs in order: A, B, C, ...
    pub fn researcher_ids(&self) -> Vec<String> {
        (0..self.count).map(researcher_id).collect()
    }
    /// The command that measures a candidate: the judge in qualitative mode (it prints a 0-10
    /// score), the evaluation command otherwise.
    pub fn eval_command(&self) -> &str {
        match (self.mode, &self.evaluation.judge) {
            (Mode::Qualitative, Some(judge)) => judge,
            _ => &self.evaluation.command,
        }
    }
    /// The researcher that plays devil's advocate, if enabled: the last one (when count >= 2).
    pub fn devils_advocate_id(&self) -> Option<String> {
        (self.devils_advocate == DevilsAdvocate::Enabled && self.count >= 2)
            .then(|| researcher_id(self.count - 1))
    }
}

/// A, B, ..., Z, then AA, AB, ...
pub fn researcher_id(index: usize) -> String {
    let letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if index < 26 {
        (letters[index] as char).to_string()
    } else {
        format!(
            "{}{}",
            researcher_id(index / 26 - 1),
            letters[index % 26] as char
        )
    }
}

/// The line of conference.md `text` that sets `key` (template spelling) in section `kind`, or,
/// with `item`, the line of the list item holding it (falling back to the key's line); 0 when the
/// key is not written. For problems found after loading (against the repository or the machine).
pub fn setting_line(
    text: &str,
    kind: sections::SectionKind,
    key: &str,
    item: Option<&str>,
) -> usize {
    let (doc, _) = parse::read(text);
    let Some(setting) = doc.setting(kind, key) else {
        return 0;
    };
    item.and_then(|item| {
        setting
            .items
            .iter()
            .find(|i| i.value.split(',').any(|v| parse::unquote(v) == item))
    })
    .map_or(setting.line, |i| i.line)
}

/// Problems with conference.md at `path`, one per line as `path:line: message` with the fix.
pub fn describe_errors(path: &std::path::Path, errors: &[ConfigError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| {
            let place = match e.line {
                0 => path.display().to_string(),
                n => format!("{}:{n}", path.display()),
            };
            let hint = if e.hint.is_empty() {
                String::new()
            } else {
                format!("\n      fix: {}", e.hint)
            };
            format!("  {place}: {}{hint}", e.message)
        })
        .collect();
    format!("{} is not valid:\n{}", path.display(), lines.join("\n"))
}

/// Parse and validate conference.md text in one step.
///
/// Every problem is reported, reading and checking alike, ordered by line (missing fields last).
pub fn load(text: &str) -> Result<Config, Vec<ConfigError>> {
    // A UTF-8 byte order mark (some Windows editors write one) is not part of the title line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (doc, mut errors) = parse::read(text);
    errors.extend(rules::frozen_and_allowed(&doc));
    errors.extend(guard::errors(&doc));
    let bounds = bounds::errors(text, &doc);
    validate::sort_errors(&mut errors);
    let mut result = match validate::validate(&doc) {
        Ok(config) if errors.is_empty() => Ok(config),
        Ok(_) => Err(errors),
        Err(more) => {
            errors.extend(more);
            Err(errors)
        }
    };
    if !bounds.is_empty() {
        let mut errors = result.err().unwrap_or_default();
        bounds::merge(&mut errors, bounds);
        result = Err(errors);
    }
    result.map_err(|mut errors| {
        validate::sort_errors(&mut errors);
        errors
    })
}
