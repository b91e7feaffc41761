//! Running one conference on several machines through one shared git remote (issue #15): the
//! remote's atomic compare-and-swap on refs is the only coordination.
//!
//! - [`push`]: one atomic push of several refs, each guarded by the value the remote must hold;
//! - [`link`]: this machine's part — every publication (the event log, one chain the remote
//!   serialises, with leases, branches, attempts and notes), sync and claim;
//! - [`publish`]: how a refused publication's events are replayed over the remote's by the
//!   reducer before the push is tried again;
//! - [`lease`]: which machine runs a researcher or the chair's phases, claimed create-only,
//!   renewed and taken over by compare-and-swap, expired by the taker's own clock.
//!
//! Everything goes through the user's own `git`, as `push` and `fetch` do.

/// Every fetch of the protocol names where each ref goes, and nothing else: without this, git
/// also moves the user's remote-tracking branches (`refs/remotes/<remote>/…`) that the fetched
/// refs match, where a `git fetch` the user runs at the same instant holds the lock, and one of
/// the two fails.
pub const ONLY_THE_REFSPECS: &str = "--refmap=";

pub mod lease;
pub mod link;
pub mod publish;
pub mod push;

/// Whether `name` may name a machine (in ref names, events and the state).
pub fn valid_machine_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// What the tests of several machines share.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    /// Runs git in `dir`, which must succeed; its output.
    pub fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
