//! Running the user's commands (agents, evaluations, hooks) as child processes, and reading what
//! they print. `spawn` builds every process the program starts; `process` owns timeouts,
//! process groups and Ctrl-C; `contain` ends what a run
//! started outside its group; `watchdog` ends what a runner that died started; `metric` turns an evaluation's
//! output into numbers. (`engine::run::preflight` checks before a start that the commands can run at all.)

pub mod caps;
pub mod contain;
pub mod metric;
pub mod process;
pub mod spawn;
pub mod watchdog;

pub use spawn::{async_command, command, GitEnv};
