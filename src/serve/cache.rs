//! The attempts of the conference last asked for, kept for the events tip they were read at.
//! Every event makes the page ask for the attempts since the last it has, and every reload for
//! all of them: at 10,000 attempts, reading them anew each time costs most of a first paint and
//! churns megabytes per request. One entry is kept (the server's memory stays that of one
//! conference's attempts); a new event moves the tip and the next request reads them again.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use git2::Oid;

use crate::engine::Conference;

use crate::model::AttemptRecord;

/// One conference's attempts at one events tip.
struct Entry {
    name: String,
    tip: Oid,
    attempts: Arc<Vec<AttemptRecord>>,
}

#[derive(Default)]
pub struct AttemptsCache(Mutex<Option<Entry>>);

impl AttemptsCache {
    /// Conference `conf`'s attempts: kept ones when they were read at the events tip `conf`
    /// was opened at, else those `read` returns (then kept).
    pub fn get(
        &self,
        conf: &Conference,
        read: impl FnOnce() -> Result<Vec<AttemptRecord>>,
    ) -> Result<Arc<Vec<AttemptRecord>>> {
        let (name, tip) = (conf.name(), conf.events_tip());
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(entry), Some(tip)) = (kept.as_ref(), tip) {
            if entry.name == *name && entry.tip == tip {
                return Ok(entry.attempts.clone());
            }
        }
        // Dropped before reading: at most one conference's attempts are held at once.
        *kept = None;
        let attempts = Arc::new(read()?);
        if let Some(tip) = tip {
            *kept = Some(Entry {
                name: name.to_string(),
                tip,
                attempts: attempts.clone(),
            });
        }
        Ok(attempts)
    }
}
