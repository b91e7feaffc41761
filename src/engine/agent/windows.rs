//! When each researcher's agent ran, to name the researchers whose agent may have made a change
//! found outside their own worktree (in the user's working tree, or in another researcher's):
//! nothing tells which process wrote a file, but only an agent that was running can have.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

/// Per researcher: whether its agent runs now, and when its last run ended.
static WINDOWS: Mutex<BTreeMap<String, (bool, Option<Instant>)>> = Mutex::new(BTreeMap::new());

/// Researcher `id`'s agent starts.
pub fn began(id: &str) {
    if let Ok(mut w) = WINDOWS.lock() {
        w.entry(id.to_string()).or_default().0 = true;
    }
}

/// Researcher `id`'s agent ended.
pub fn ended(id: &str) {
    if let Ok(mut w) = WINDOWS.lock() {
        *w.entry(id.to_string()).or_default() = (false, Some(Instant::now()));
    }
}

/// The researchers other than `id` whose agent ran at some time since `since` (still running,
/// or ended after it), in order.
pub fn others_since(id: &str, since: Instant) -> Vec<String> {
    let Ok(w) = WINDOWS.lock() else {
        return Vec::new();
    };
    w.iter()
        .filter(|(other, (running, end))| {
            other.as_str() != id && (*running || end.is_some_and(|e| e > since))
        })
        .map(|(other, _)| other.clone())
        .collect()
}

/// "researcher A", "researcher A or B", … for a line naming who may have done something.
pub fn who(ids: &[String]) -> String {
    match ids {
        [] => "no agent (none ran then)".to_string(),
        [one] => format!("researcher {one}'s agent"),
        [first @ .., last] => format!("the agent of researcher {} or {last}", first.join(", ")),
    }
}
