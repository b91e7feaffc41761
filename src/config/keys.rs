//! The settings of conference.md that more than one place names, by typed id: each key's
//! spelling as the template writes it lives in [`Key::name`] once, so the parser's table, the
//! bounds, the repeated-settings list, validation, the template and the budget stops all name
//! `Key::IterationsPerRound` rather than repeating the display string (a typo in one copy used to
//! be a silent second key).

/// A setting conference.md's sections accept, named once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    IterationsPerRound,
    MaxRounds,
    MaxTotalIterations,
    PauseEvery,
    ResearcherCount,
    NoiseRuns,
    TimeBudget,
    ResearcherTimeout,
    CostBudget,
    TokenBudget,
    SuccessDefinition,
}

impl Key {
    /// The key as the template writes it (`Iterations per round`); what users read and write.
    pub const fn name(self) -> &'static str {
        match self {
            Key::IterationsPerRound => "Iterations per round",
            Key::MaxRounds => "Max rounds",
            Key::MaxTotalIterations => "Max total iterations",
            Key::PauseEvery => "Pause every",
            Key::ResearcherCount => "Researcher count",
            Key::NoiseRuns => "Noise runs",
            Key::TimeBudget => "Time budget",
            Key::ResearcherTimeout => "Researcher timeout",
            Key::CostBudget => "Cost budget",
            Key::TokenBudget => "Token budget",
            Key::SuccessDefinition => "Success definition",
        }
    }
}
