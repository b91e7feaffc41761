//! The record: where an event is recorded (the commit point), the one reader of the state
//! tree's records, stored state validated as input, attempts committed and kept reachable, the
//! results tables, the run's logs, and recovery, which brings branches, notes and worktrees in
//! line with the record before a run. May import the engine's other rooms and the layers below.

pub mod attempt;
pub mod ledger;
pub mod lineage;
pub mod recorder;
pub mod recovery;
pub mod run_logs;
pub mod set_aside;
pub mod stored;
pub mod tables;
pub mod tree;
