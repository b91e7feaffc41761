//! The run: `start`, `resume` and `join` (the lock, the trust gate, the runtime: `session`),
//! the loop over phases on one machine (`driver`) and on several (`shared`), the checks before
//! a start, and conference.md's changes applied between rounds. The top floor of the engine: it
//! may import the phases, the commands, the rooms and every layer below.

pub mod driver;
pub mod preflight;
pub mod reconfigure;
pub mod session;
pub mod settings;
pub mod shared;
pub mod through_gc;
