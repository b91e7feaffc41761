//! git-conference: automated research conferences inside a git repository.
//!
//! Layout: `config` reads conference.md; `store` owns every ref, the event log and the notes;
//! `git` moves worktrees and snapshots; `exec` runs commands and reads metrics; `engine` runs the
//! protocol (research, poster session, peer review, knowledge transfer, stop rules, synthesis);
//! `tune` is the built-in researcher; `cli` has one file per subcommand. Below them all, with no
//! I/O: `clock` (the time), `model` (the stored verdict and status words) and `protocol` (the
//! rules as pure functions: keep/revert, review, pick, stop). Below everything, `os` holds every
//! system call std does not wrap: the only `unsafe` code of the crate.

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
pub mod serve;
pub mod store;
pub mod tracker;
pub mod trust;
pub mod tune;
pub mod ui;
