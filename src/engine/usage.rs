//! What an agent run used, as the agent reported it: recorded in the attempt's event payload and
//! note as `"tokens": {"input": N, "output": M}` (DESIGN.md §5).

use serde::{Deserialize, Serialize};

/// Tokens one agent run read and wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

impl std::ops::AddAssign for Tokens {
    fn add_assign(&mut self, other: Tokens) {
        self.input += other.input;
        self.output += other.output;
    }
}
