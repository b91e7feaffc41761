//! What agent runs used: one run's [`Usage`] as its CLI reported it, recorded in the attempt's
//! event payload and note as `"tokens": {"input": N, "output": M}` and `cost_usd` (DESIGN.md §5),
//! and the [`Spend`] the state sums from them.

use serde::{Deserialize, Serialize};

/// Tokens one agent run read and wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

impl Tokens {
    /// The tokens of one run's usage.
    pub fn of(u: Usage) -> Tokens {
        Tokens {
            input: u.input,
            output: u.output,
        }
    }
}

impl std::ops::AddAssign for Tokens {
    fn add_assign(&mut self, other: Tokens) {
        self.input += other.input;
        self.output += other.output;
    }
}

/// Tokens (and the cost, when the CLI reports one) of one agent run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cache reads and writes included (what the model processed).
    pub input: u64,
    /// Completion tokens, reasoning included.
    pub output: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    pub fn tokens(&self) -> u64 {
        self.input + self.output
    }
}

/// Usage summed over agent runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub input: u64,
    pub output: u64,
    pub cost_usd: f64,
    /// Agent runs that reported usage.
    pub runs: u64,
}

impl Spend {
    pub fn add(&mut self, u: &Usage) {
        self.input += u.input;
        self.output += u.output;
        self.cost_usd += u.cost_usd.unwrap_or(0.0);
        self.runs += 1;
    }

    pub fn tokens(&self) -> u64 {
        self.input + self.output
    }
}
