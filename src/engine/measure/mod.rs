//! Measuring: an evaluation run on a candidate and turned into a result, which evaluation runs
//! when and on which device, the guards a candidate must pass, pruning a running evaluation,
//! and review-grade readings of a commit. May import the engine's other rooms and the layers
//! below it; never a phase, a command or the run.

pub mod evaluate;
pub mod guards;
pub mod pruning;
pub mod review_grade;
pub mod schedule;
