//! The loop's settings: the loop mode, round sizes, the pre-flight answers (devil's advocate,
//! pause), noise handling and the budgets.

use crate::config::keys::Key;

use super::values::{
    cost_amount, devils_advocate, optional_duration, pause_every, positive, positive_duration,
    token_count, tolerance, yes_no,
};
use super::*;
use crate::config::sections::SectionKind;
use crate::config::{DevilsAdvocate, Tolerance};
use SectionKind as S;

impl<'a> Validator<'a> {
    /// `- mode: agentic | human-in-the-loop` under `## Researchers` (agentic when absent).
    pub(super) fn loop_mode(&mut self) -> crate::config::LoopMode {
        self.value(
            S::Researchers,
            "Mode",
            "must be agentic or human-in-the-loop",
            crate::config::LoopMode::parse,
        )
        .map_or(crate::config::LoopMode::Agentic, |(v, _, _)| v)
    }

    /// `- **Branching:** off | agent-decided | best-first` and `- **Max alive branches:** N`
    /// under `## Researchers`. N without branching would change nothing: it is refused, as
    /// is N = 1 (one alive branch is branching off).
    pub(super) fn branching(&mut self) -> (crate::model::tree::Branching, u32) {
        use crate::model::tree::{Branching, DEFAULT_MAX_ALIVE};
        let mode = self
            .value(
                S::Researchers,
                "Branching",
                "must be off, agent-decided or best-first",
                Branching::parse,
            )
            .map_or(Branching::Off, |(v, _, _)| v);
        let max = self.value(
            S::Researchers,
            "Max alive branches",
            "must be a whole number from 2 to 64 (the alive branches a researcher keeps)",
            |v| positive(v).filter(|n| (2..=64).contains(n)),
        );
        if let (Some((_, _, line)), Branching::Off) = (&max, mode) {
            if self
                .get(S::Researchers, "Branching")
                .is_some_and(|b| Branching::parse(&b.value).is_some())
            {
                self.error(
                    *line,
                    "`Max alive branches` is set, but branching is off: it would change nothing",
                    "- **Branching:** best-first   (or: agent-decided), or remove this line",
                );
            } else if self.get(S::Researchers, "Branching").is_none() {
                self.error(
                    *line,
                    "`Max alive branches` is set, but no `Branching` line turns branching on",
                    "add under `## Researchers`: - **Branching:** best-first   (or: agent-decided), or remove this line",
                );
            }
        }
        (mode, max.map_or(DEFAULT_MAX_ALIVE, |(n, _, _)| n))
    }

    /// `- **Parameter sweep:** on` under `## Researchers` (off when it does not say): an agent's
    /// `SWEEP:` line is followed (`engine::phases::research::sweep`).
    pub(super) fn parameter_sweep(&mut self) -> bool {
        self.value(
            S::Researchers,
            "Parameter sweep",
            "must be on or off",
            yes_no,
        )
        .is_some_and(|(on, _, _)| on)
    }

    /// Iterations per round and max rounds, each agreed with the gate and required in one of them.
    pub(super) fn round_sizes(&mut self) -> (Option<u32>, Option<u32>) {
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
    pub(super) fn gate_answers(&mut self) -> (DevilsAdvocate, Option<String>) {
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
    pub(super) fn noise_handling(&mut self) -> (u32, Option<Tolerance>) {
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
    pub(super) fn budgets(&mut self) -> Budgets {
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
            .map_or(Some(crate::config::DEFAULT_STALL_ROUNDS), |(v, _, _)| v);
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
}
