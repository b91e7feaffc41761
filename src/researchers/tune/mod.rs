//! `builtin:tune`: the researcher built into the binary. It improves the metric by changing numeric
//! literals in the files a researcher may touch, one proposal per iteration, with a derivative-free
//! optimiser whose whole state is derived from the evaluated history (so a killed conference resumes
//! with the same proposals). Literal handling lives in `literals`, the optimiser in `search`; the
//! marker convention users write is described in `README.md` next to this file.

use std::collections::BTreeMap;

mod gp;
mod literals;
mod search;
#[cfg(test)]
mod tests;

pub use literals::{
    empty_markers, extract_params, find_all, find_literals, literal_values, problems, rewrite,
};

/// One numeric literal that `builtin:tune` may change.
#[derive(Debug, Clone, PartialEq)]
pub struct Literal {
    /// File path, relative to the repository root.
    pub path: String,
    /// Stable identifier: `path:name` when a name precedes the literal on its line
    /// (`x=1.5`, `lr = 0.01`, `"x": 3`, `--lr 0.1`), else `path#<ordinal>`.
    pub key: String,
    /// 1-based line number, for messages.
    pub line: usize,
    /// Byte range of the literal (sign included, type suffix such as `f` excluded) in the file.
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

/// Everything `propose` may look at.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Current content (the researcher's kept state) of the files it may touch, paths relative to the
    /// repository root.
    pub files: &'a [(String, String)],
    /// Every evaluated point known, in a deterministic order. The conference gives every
    /// researcher the same one at the same iteration (lock-step): the baseline, then by round
    /// the round start and the attempts of every researcher, by iteration and researcher, up to
    /// the iteration before this one.
    pub history: &'a [Trial],
    /// Points measured (or being measured) that the history does not hold: never proposed.
    pub avoid: &'a [BTreeMap<String, f64>],
    pub minimize: bool,
    pub seed: u64,
    /// 0-based researcher index (A = 0).
    pub researcher: usize,
    /// Number of researchers.
    pub researchers: usize,
    /// `assigned` partitioning: tune a disjoint subset of literals per researcher (round-robin by
    /// key order; when there are fewer literals than researchers, they share).
    pub assigned: bool,
    /// The devil's advocate's index, if there is one: it makes bold, contrarian jumps instead of
    /// careful local refinement.
    pub advocate: Option<usize>,
    /// Each researcher's attempts in a row without improvement (by index; empty if unknown): a
    /// researcher near the conference's stuck limit refines instead of exploring.
    pub streaks: &'a [u32],
    /// Remaining evaluations for this researcher, if known.
    pub budget_left: Option<u64>,
    /// Evaluations (attempts) the whole conference may make, if known: sizes the space-filling
    /// design and the phases.
    pub budget_total: Option<u64>,
    /// This researcher's attempts in the current round before this one, and the attempts its
    /// round allows, if known: a researcher that has kept nothing this round refines carefully
    /// only near the round's end (where a round without a kept attempt counts as stalled).
    pub round_progress: Option<(u64, u64)>,
    /// With `Branching: best-first`, when the conference chose a head other than the
    /// researcher's best (it left its leader): the files hold that head, so the local search
    /// refines the region holding it (the region whose best point is nearest) instead of
    /// choosing its own — the tuner's regions are its tree, and the conference picks which
    /// branch it extends. From the best the tuner chooses as it does without a tree.
    pub chosen_head: bool,
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
/// representable point nearby has been evaluated). Deterministic for given inputs, and never a
/// point already in `req.history` or `req.avoid`. Researchers that share literals (`free`
/// partitioning) and see the same history never propose the same point: each one first works
/// out what the researchers before it propose in this iteration, and avoids those points.
pub fn propose(req: &Request) -> Option<Proposal> {
    search::propose(req)
}

/// Up to `q` distinct points to measure at once (`- sweep: q` under `## Agent`), as `propose`
/// would give them one after another were each measured at the model's prediction: see
/// `search::propose_batch`. Deterministic like `propose`; fewer when fewer are left.
pub fn propose_batch(req: &Request, q: usize) -> Vec<Proposal> {
    search::propose_batch(req, q)
}
