//! When each researcher's agent ran, to name the researchers whose agent may have made a change
//! found outside their own worktree (in the user's working tree, or in another researcher's):
//! nothing tells which process wrote a file, but only an agent that was running can have.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

/// Per researcher: whether its agent runs now, and when its last run ended.
static WINDOWS: Mutex<Windows> = Mutex::new(BTreeMap::new());

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
    others(id, |_| Some(since))
}

/// The researchers other than `id` whose agent ran at some time since `id`'s own last run
/// ended (all that ran, before its first), in order.
pub fn others_since_own_last(id: &str) -> Vec<String> {
    others(id, |w| w.get(id).and_then(|(_, end)| *end))
}

type Windows = BTreeMap<String, (bool, Option<Instant>)>;

fn others(id: &str, since: impl Fn(&Windows) -> Option<Instant>) -> Vec<String> {
    let Ok(w) = WINDOWS.lock() else {
        return Vec::new();
    };
    let since = since(&w);
    w.iter()
        .filter(|(other, (running, end))| {
            other.as_str() != id && (*running || end.is_some_and(|e| since.is_none_or(|s| e > s)))
        })
        .map(|(other, _)| other.clone())
        .collect()
}

/// "researcher A", "researcher A or B", … for a line naming who may have done something.
pub fn who(ids: &[String]) -> String {
    match ids {
        [] => "a process other than an agent".to_string(),
        [one] => format!("researcher {one}'s agent"),
        [first @ .., last] => format!("the agent of researcher {} or {last}", first.join(", ")),
    }
}
