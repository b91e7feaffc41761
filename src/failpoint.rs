//! Named crash points for the crash-safety tests: `GIT_CONFERENCE_FAILPOINT=<name>:<n>` makes the
//! process kill itself with SIGKILL the n-th time it passes `<name>` (n defaults to 1). Unset,
//! a failpoint costs one lookup of an already-read variable.
//!
//! The points sit between the effects of one step (agent run, snapshot commit, evaluation, event
//! append, note write, branch move, cherry-pick, report), so a test can prove that a kill between
//! any two of them is recovered by `resume`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
static HITS: AtomicU64 = AtomicU64::new(0);

fn target() -> &'static Option<(String, u64)> {
    TARGET.get_or_init(|| {
        let spec = std::env::var("GIT_CONFERENCE_FAILPOINT").ok()?;
        let (name, n) = match spec.split_once(':') {
            Some((name, n)) => (name.to_string(), n.parse().unwrap_or(1)),
            None => (spec, 1),
        };
        Some((name, n))
    })
}

/// Kills the process here if the failpoint `name` is armed and this is its n-th hit.
pub fn hit(name: &str) {
    if let Some((armed, n)) = target() {
        if armed == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            // Nothing runs after it.
            crate::os::kill_self();
        }
    }
}
