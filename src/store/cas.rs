//! Compare-and-swap of a ref, the one way every ref git-conference owns moves.
//!
//! A ref moves only from the value its writer read: a crash before the swap leaves the old
//! value, a crash after it has recorded the step, and a second writer that moved it meanwhile
//! makes the swap fail instead of being overwritten. Refs several writers share (the notes, the
//! attempts chain: every conference of a repository, every researcher) retry through
//! [`with_backoff`], reading the new value each time; the event log has one writer and does not.

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

/// Moves `name` to `new` only if it still points at `expected` (None: must not exist yet).
/// Ok(false): another writer moved it first.
pub fn try_update(
    repo: &Repository,
    name: &str,
    new: Oid,
    expected: Option<Oid>,
    log_message: &str,
) -> Result<bool> {
    // Every ref a conference moves keeps a reflog: the way back if git loses its objects.
    super::recovery::keep_log(repo, name);
    let result = match expected {
        Some(old) => repo.reference_matching(name, new, true, old, log_message),
        None => repo.reference(name, new, false, log_message),
    };
    match result {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.code(),
                git2::ErrorCode::Modified | git2::ErrorCode::Exists | git2::ErrorCode::Locked
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e).with_context(|| format!("cannot update {name}")),
    }
}

/// [`try_update`] for a ref with one writer: a lost race is an error naming the likely cause.
pub fn update(
    repo: &Repository,
    name: &str,
    new: Oid,
    expected: Option<Oid>,
    log_message: &str,
) -> Result<()> {
    if try_update(repo, name, new, expected, log_message)? {
        return Ok(());
    }
    bail!(
        "{name} was changed by someone else (expected {}); is another git-conference running?",
        expected
            .map(|o| o.to_string())
            .unwrap_or_else(|| "no ref".into())
    )
}

/// How many times a shared ref's writer tries before giving up.
pub const SHARED_TRIES: u64 = 20;

/// Runs `attempt` (read the ref, build on it, [`try_update`]) until it returns Some, waiting a
/// little longer after each lost race; gives up after `tries`.
pub fn with_backoff<T>(
    name: &str,
    tries: u64,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    for n in 0..tries {
        if n > 0 {
            std::thread::sleep(std::time::Duration::from_millis(n * 5));
        }
        if let Some(done) = attempt()? {
            return Ok(done);
        }
    }
    bail!("could not update {name}: it kept changing under us")
}
