//! Measuring: an evaluation run on a candidate and turned into a result, which evaluation runs
//! when and on which device, the guards a candidate must pass, pruning a running evaluation,
//! review-grade readings of a commit, and which change mattered across the attempts
//! (`importance`: gathered from the attempts' commits, scored by `protocol::importance`). May
//! import the engine's other rooms and the layers below it; never a phase, a command or the run.

pub mod evaluate;
pub mod guards;
pub mod importance;
pub mod pruning;
pub mod race;
pub mod review_grade;
pub mod schedule;
