//! User-facing failures and the exit codes they map to (DESIGN.md §6): 0 done, 1 failure,
//! 2 bad usage or invalid conference.md, 3 paused, 130 interrupted by Ctrl-C.

/// Bad usage or an invalid conference.md: exit 2. The message names the fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_PAUSED: i32 = 3;
pub const EXIT_INTERRUPTED: i32 = 130;

/// The exit code for an error that reached `main`.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<UsageError>().is_some() {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}
