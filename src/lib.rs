//! git-conference: automated research conferences inside a git repository.
//!
//! Layout (docs/development.md has the whole map): `config` reads conference.md; `store` owns
//! every ref, the event log and the notes; `git` moves worktrees and snapshots; `exec` runs
//! commands and reads metrics; `researchers` holds the built-in researchers (`builtin:tune`,
//! `builtin:openai`); `launch` says where an evaluation runs and `remote` coordinates several
//! machines; `engine` runs the protocol (its phases, the run, and the rooms they share); `cli` has
//! one file per subcommand. Below them all, with no I/O: `clock` (the time), `model` (the stored
//! data and words) and `protocol` (the rules as pure functions: keep/revert, review, pick, stop).
//! Below everything, `os` holds every system call std does not wrap: the only `unsafe` code of
//! the crate.

#![deny(unsafe_code)]

pub mod agents;
pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod error;
pub mod exec;
pub mod failpoint;
pub mod git;
pub mod hooks;
pub mod launch;
pub mod lock;
pub mod model;
#[allow(unsafe_code)]
pub mod os;
pub mod protocol;
pub mod remote;
pub mod render;
pub mod researchers;
pub mod serve;
pub mod store;
pub mod tracker;
pub mod trust;
pub mod ui;
