//! Several machines (DESIGN.md §7), the rooms the run's shared loop stands on: the check of
//! what other machines publish before it is followed, and the thread that publishes what this
//! machine recorded. May import the engine's other rooms and the layers below it (`remote/`
//! does the pushes); never a phase, a command or the run.

pub mod arriving;
pub mod cache_entries;
pub mod publisher;
