//! The Agent section: the command (a preset, a built-in, any command line), its options, and
//! the HTTP agent's endpoint settings.

use super::values::{is_env_name, positive, positive_duration};
use super::*;
use crate::config::sections::SectionKind;
use crate::config::Agent;
use SectionKind as S;

impl<'a> Validator<'a> {
    pub(super) fn agent(&mut self) -> Option<Agent> {
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
        let sweep = self.tuner_batch(&command);
        Some(Agent {
            command,
            timeout,
            seed,
            sweep,
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

    /// `- sweep: q` (2 to 8): builtin:tune proposes q points per iteration, measured at once
    /// as one batch. Only the tuner proposes batches; an agent sweeps one literal with
    /// `- **Parameter sweep:** on` under `## Researchers`.
    fn tuner_batch(&mut self, command: &str) -> Option<u32> {
        let s = self.get(S::Agent, "sweep")?;
        let range = crate::model::sweep::MIN_VALUES as u32..=crate::model::sweep::MAX_VALUES as u32;
        if crate::agents::Kind::of(command) != crate::agents::Kind::Tune {
            let message = format!(
                "`{}: {}` — only builtin:tune proposes a batch of points; an agent asks for a \
                 sweep itself",
                s.written, s.value
            );
            let fix = "remove this line, and write `- **Parameter sweep:** on` under \
                       `## Researchers` to let the agent sweep one literal";
            self.error(s.line, message, fix);
            return None;
        }
        match s.value.trim().parse::<u32>() {
            Ok(q) if range.contains(&q) => Some(q),
            _ => {
                let message = format!(
                    "`{}: {}` — a batch is {} to {} points per iteration",
                    s.written,
                    s.value,
                    range.start(),
                    range.end()
                );
                self.error(
                    s.line,
                    message,
                    "- sweep: 4   (or remove the line: one point per iteration)",
                );
                None
            }
        }
    }

    /// A `builtin:` name this release does not have would run as a shell command and fail on
    /// the first attempt: refused here, with the names it has.
    pub(super) fn builtin_exists(&mut self, command: &str) {
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
    pub(super) fn preset_options(&mut self, command: &str) -> (Option<u32>, Option<String>) {
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
    pub(super) fn http_agent(
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
}
