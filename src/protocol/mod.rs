//! The protocol's rules as pure, synchronous functions over plain data (settings, state numbers,
//! measured values): no I/O, no `Conference`, so every threshold is pinned by a table-driven unit
//! test. The engine gathers the data, calls the rule, and records what it decided.
//!
//! - `reduce`: how the state changes on each event (the reducer the recorder applies).
//! - `importance`: which change mattered: the share of the metric's spread each literal or file
//!   explains (a main-effect variance decomposition; the report, the page, `status`).
//! - `keep`: keep or revert an attempt; stuck levels from a streak of non-improving attempts.
//! - `review_verdict`: the hold-out check that can challenge a validated finding (the verdict
//!   from the interleaved readings is `noise::judge`).
//! - `noise`: medians, pooled noise, the noise margin, and the review verdict from interleaved
//!   readings of a finding and of the round start.
//! - `pick`: the order knowledge transfer picks findings in; whether a pick stays on best.
//! - `prune`: whether a running evaluation is already lost against the reference curve.
//! - `round`: the noise threshold, progress in a round, the streaks the stop rules count.
//! - `schedule`: the iterations each researcher may run in a round, the endgame, the pause.
//! - `stop_rules`: whether the conference stops after a round, each rule in its order.
//! - `talk`: what people's requests mean for the run: researchers held, findings dropped.
//! - `tree`: the tree of ideas: branches opened and closed, best-first's pick of the head.

pub mod importance;
pub mod keep;
pub mod noise;
pub mod pick;
pub mod prune;
pub mod reduce;
pub mod review_verdict;
pub mod round;
pub mod schedule;
pub mod stop_rules;
pub mod talk;
pub mod tree;
