//! `builtin:tune`: the researcher built into the binary. It improves the metric by changing numeric
//! literals in the files a researcher may touch, one proposal per iteration, with a derivative-free
//! optimiser whose whole state is derived from the evaluated history (so a killed conference resumes
//! with the same proposals). Literal handling lives in `literals`, the optimiser in `search`; the
//! marker convention users write is described in `README.md` next to this file.

use std::collections::BTreeMap;

mod literals;
mod search;
#[cfg(test)]
mod tests;

pub use literals::{extract_params, find_all, find_literals, rewrite};

/// One numeric literal that `builtin:tune` may change.
#[derive(Debug, Clone, PartialEq)]
pub struct Literal {
    /// File path, relative to the repository root.
    pub path: String,
    /// Stable identifier: `path:name` when a name precedes the literal on its line
    /// (`x=1.5`, `lr = 0.01`, `"x": 3`, `--lr 0.1`), else `path#<ordinal>`.
    pub key: String,
    /// Byte range of the literal (sign included) in the file.
    pub start: usize,
    pub end: usize,
    /// The literal as written.
    pub text: String,
    pub value: f64,
    /// Integer-valued parameter (written without `.`/exponent, or marked `int`).
    pub integer: bool,
    /// Bounds written by the user in a `tune: [lo, hi]` marker.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

/// One evaluated point.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub params: BTreeMap<String, f64>,
    /// `None` = crashed (or timed out, or produced no metric).
    pub metric: Option<f64>,
}

/// How the researcher behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Normal,
    /// Bold, contrarian jumps across the range instead of careful local refinement.
    DevilsAdvocate,
}

/// Everything `propose` may look at.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Current content (the researcher's kept state) of the files it may touch, paths relative to the
    /// repository root.
    pub files: &'a [(String, String)],
    /// Every evaluated point known to this researcher, chronological (its own attempts plus the
    /// round-start best points).
    pub history: &'a [Trial],
    pub minimize: bool,
    pub seed: u64,
    /// 0-based researcher index (A = 0).
    pub researcher: usize,
    /// Number of researchers.
    pub researchers: usize,
    /// `assigned` partitioning: tune a disjoint subset of literals per researcher (round-robin by
    /// key order; when there are fewer literals than researchers, they share).
    pub assigned: bool,
    pub role: Role,
    /// This researcher's attempt counter.
    pub attempt: u64,
    /// Remaining evaluations for this researcher, if known.
    pub budget_left: Option<u64>,
}

/// One proposed change.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// Only the changed files, with their full new content.
    pub files: Vec<(String, String)>,
    /// One line, e.g. `tune params.sh:x: -1.0 -> -1.5 (step 0.5)`.
    pub description: String,
    /// Every tunable literal's value after the change (the same keys `extract_params` returns).
    pub params: BTreeMap<String, f64>,
}

/// The next point to evaluate, or `None` when nothing is left to try (no literals, or every
/// representable point nearby has been evaluated). Deterministic for given inputs, and never a point
/// already in `req.history`.
pub fn propose(req: &Request) -> Option<Proposal> {
    search::propose(req)
}
