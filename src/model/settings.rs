//! The conference's settings that the pure rules read: which way the metric improves, how far
//! apart two readings must be to differ, and whether the loop ever waits for a person. They are
//! set in conference.md (`config/` parses them) but live here, at the bottom, so `protocol/` and
//! `render/` can take them without importing the configuration above them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Minimize,
    Maximize,
}

impl Direction {
    /// True when `candidate` is strictly better than `current`.
    pub fn better(self, candidate: f64, current: f64) -> bool {
        match self {
            Direction::Minimize => candidate < current,
            Direction::Maximize => candidate > current,
        }
    }
    /// Signed improvement of `new` over `old`: positive means better.
    pub fn gain(self, new: f64, old: f64) -> f64 {
        match self {
            Direction::Minimize => old - new,
            Direction::Maximize => new - old,
        }
    }
}

/// `- mode:` under `## Researchers`: whether the conference ever waits for a person.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopMode {
    /// Never asks: questions are answered when people answer them, the loop goes on.
    #[default]
    Agentic,
    /// Pauses (exit 3) before knowledge transfer puts findings on best, when every researcher
    /// is stalled, and on a blocking question (DESIGN.md §10).
    HumanInTheLoop,
}

impl LoopMode {
    /// The word conference.md writes.
    pub fn parse(value: &str) -> Option<LoopMode> {
        match value
            .trim()
            .to_lowercase()
            .replace([' ', '_'], "-")
            .as_str()
        {
            "agentic" => Some(LoopMode::Agentic),
            "human-in-the-loop" => Some(LoopMode::HumanInTheLoop),
            _ => None,
        }
    }
}

/// A tolerance that is either absolute or a percentage of the baseline metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Tolerance {
    Absolute(f64),
    Percent(f64),
}

impl Tolerance {
    pub fn resolve(self, baseline: f64) -> f64 {
        match self {
            Tolerance::Absolute(v) => v.abs(),
            Tolerance::Percent(p) => (baseline * p / 100.0).abs(),
        }
    }
}
