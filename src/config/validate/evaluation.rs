//! The Evaluation section: the command, timeout, repeats, frozen paths, how the metric is read
//! and pruning.

use super::values::{is_none, metric_from, positive, positive_duration, prune_setting};
use super::*;
use crate::config::sections::SectionKind;
use crate::config::{Evaluation, Mode};
use SectionKind as S;

impl<'a> Validator<'a> {
    pub(super) fn evaluation(&mut self, mode: Option<Mode>) -> Option<Evaluation> {
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
                .map(|p| crate::config::parse::unquote(p).to_string())
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
            .map_or(crate::config::DEFAULT_PRUNE_WARMUP, |(v, _, _)| v);
        let hardware_same = self
            .value(
                S::Evaluation,
                "hardware",
                "must be same (every reading on the first one's GPU model and count) or any",
                |v| match v.trim().to_ascii_lowercase().as_str() {
                    "same" => Some(true),
                    "any" => Some(false),
                    _ => None,
                },
            )
            .is_some_and(|(v, _, _)| v);
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
            hardware_same,
            holdout,
            judge,
        })
    }
}
