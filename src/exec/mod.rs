//! Running the user's commands (agents, evaluations, hooks) as child processes, and reading what
//! they print. `process` owns timeouts, process groups and Ctrl-C; `metric` turns an evaluation's
//! output into numbers.

pub mod metric;
pub mod process;
