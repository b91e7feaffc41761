//! A researcher's agent run, the room every phase that asks an agent goes through: where an agent
//! runs (a command, the built-in tuner, the HTTP agent), the prompt and what it says about the
//! past, the worktree it runs in, what it may break in git and how that is repaired, and prose.
//! May import the engine's other rooms (`record`, `measure`, `stop`) and the layers below the
//! engine; never a phase, a command or the run.

pub mod briefing;
pub mod dispatch;
pub mod integrity;
pub mod prompt;
pub mod prose;
pub mod tune_batch;
pub mod tune_history;
pub mod windows;
pub mod workspace;
