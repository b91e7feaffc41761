//! The event log as the read-only commands read it (`log`, `log --follow`, `report`, the
//! conference names): every event, or those recorded since the newest one already seen.

use anyhow::Result;
use git2::{Oid, Repository};

use crate::store::{ConferenceRefs, EventLog, LoggedEvent};

/// Every event of conference `name`, oldest first, and the log's tip.
pub fn read_all(repo: &Repository, name: &str) -> Result<(Vec<LoggedEvent>, Option<Oid>)> {
    let log = EventLog::open(repo, ConferenceRefs::new(name))?;
    Ok((log.read_all(repo)?, log.tip()))
}

/// The events recorded after `seen` (the tip read last), newest first, and the log's tip now;
/// none while the tip is still `seen`.
pub fn recorded_since(
    repo: &Repository,
    name: &str,
    seen: Option<Oid>,
) -> Result<(Vec<LoggedEvent>, Option<Oid>)> {
    let log = EventLog::open(repo, ConferenceRefs::new(name))?;
    if log.tip() == seen {
        return Ok((Vec::new(), seen));
    }
    let mut fresh = Vec::new();
    log.walk(repo, |e| {
        if Some(e.commit) == seen {
            return false;
        }
        fresh.push(e);
        true
    })?;
    Ok((fresh, log.tip()))
}

/// The names of the conferences in the repository.
pub fn conference_names(repo: &Repository) -> Result<Vec<String>> {
    Ok(crate::store::refs::conference_names(repo)?)
}
