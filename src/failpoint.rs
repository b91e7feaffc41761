//! Named crash points for the crash-safety tests: `GIT_CONFERENCE_FAILPOINT=<name>:<n>` makes the
//! process kill itself with SIGKILL the n-th time it passes `<name>` (n defaults to 1). Unset,
//! a failpoint costs one lookup of an already-read variable.
//!
//! `GIT_CONFERENCE_FAILPOINT=<name>:pause=<folder>` makes it wait there instead, for a test whose
//! agent must act at exactly that point: each time it passes `<name>` while `<folder>/armed`
//! exists, it renames that file to `<folder>/paused` and waits (a minute at most) until the file
//! is gone.
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

/// The folder of a pausing failpoint (`<name>:pause=<folder>`).
fn pause_folder() -> Option<std::path::PathBuf> {
    let spec = std::env::var("GIT_CONFERENCE_FAILPOINT").ok()?;
    let folder = spec.split_once(":pause=")?.1;
    Some(std::path::PathBuf::from(folder))
}

/// Kills the process here if the failpoint `name` is armed and this is its n-th hit (or pauses
/// here, see the module's doc).
pub fn hit(name: &str) {
    if let Some((armed, n)) = target() {
        if armed != name {
            return;
        }
        if let Some(folder) = pause_folder() {
            return pause(&folder);
        }
        if HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            // Nothing runs after it.
            crate::os::kill_self();
        }
    }
}

fn pause(folder: &std::path::Path) {
    let paused = folder.join("paused");
    if std::fs::rename(folder.join("armed"), &paused).is_err() {
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while paused.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
