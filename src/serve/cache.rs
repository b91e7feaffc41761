//! The attempts of the conference last asked for, kept for the events tip they were read at,
//! with the text the page embeds of them. Every event makes the page ask for the attempts since
//! the last it has, and every load for all of them: at 10,000 attempts, reading them anew each
//! time, and writing and escaping their 3.5 MB of JSON, costs most of a first paint and churns
//! megabytes per request. One entry is kept (the server's memory stays that of one conference's
//! attempts); a new event moves the tip and the next request reads them again. The attempt
//! tree made of them is kept with them.

use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Result;
use git2::Oid;

use crate::engine::Conference;

use crate::engine::record::lineage::{self, TreeReads};
use crate::model::tree::LineageNode;
use crate::model::AttemptRecord;

/// One conference's attempts at one events tip.
struct Entry {
    name: String,
    tip: Oid,
    attempts: Arc<Vec<AttemptRecord>>,
    /// All of them as the page's JSON, escaped for its script element; made on first use.
    page_text: Option<Arc<str>>,
    /// The attempt tree read from them; made on first use.
    lineage: Option<Arc<Vec<LineageNode>>>,
}

#[derive(Default)]
pub struct AttemptsCache {
    kept: Mutex<Option<Entry>>,
    /// What making the tree of the conference last drawn read from git, by its name: the next
    /// tree reads only the events and commits since.
    reads: Mutex<Option<(String, TreeReads)>>,
}

/// The cache, locked.
type Kept<'a> = MutexGuard<'a, Option<Entry>>;

impl AttemptsCache {
    /// Conference `conf`'s attempts: kept ones when they were read at the events tip `conf`
    /// was opened at, else those `read` returns (then kept).
    pub fn get(
        &self,
        conf: &Conference,
        read: impl FnOnce() -> Result<Vec<AttemptRecord>>,
    ) -> Result<Arc<Vec<AttemptRecord>>> {
        let (kept, attempts) = self.entry(conf, read)?;
        drop(kept);
        Ok(attempts)
    }

    /// What the page embeds of `conf`'s attempts: [`super::views::attempt_columns_text`] of all of
    /// them, escaped by [`super::views::script_json`]; kept with them.
    pub fn page_text(
        &self,
        conf: &Conference,
        read: impl FnOnce() -> Result<Vec<AttemptRecord>>,
    ) -> Result<Arc<str>> {
        let (mut kept, attempts) = self.entry(conf, read)?;
        if let Some(text) = kept.as_ref().and_then(|e| e.page_text.clone()) {
            return Ok(text);
        }
        let text: Arc<str> =
            super::views::script_json(&super::views::attempt_columns_text(&attempts)).into();
        if let Some(entry) = kept.as_mut() {
            entry.page_text = Some(text.clone());
        }
        Ok(text)
    }

    /// The attempt tree of `conf` (`engine::record::lineage::nodes_with` its attempts), kept
    /// with them: the page asks for it at each event.
    pub fn lineage(
        &self,
        conf: &Conference,
        read: impl FnOnce() -> Result<Vec<AttemptRecord>>,
    ) -> Result<Arc<Vec<LineageNode>>> {
        let (kept, attempts) = self.entry(conf, read)?;
        if let Some(nodes) = kept.as_ref().and_then(|e| e.lineage.clone()) {
            return Ok(nodes);
        }
        // Made unlocked: at 10,000 attempts it takes a tenth of a second (half a second when
        // every event was read anew for the picks), which a page loaded meanwhile must not
        // wait for.
        drop(kept);
        let mut reads = match self.reads.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some((name, reads)) if name == *conf.name() => reads,
            _ => TreeReads::default(),
        };
        let nodes = Arc::new(lineage::nodes_with(conf, &attempts, &mut reads)?);
        *self.reads.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((conf.name().to_string(), reads));
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let tip = conf.events_tip();
        if let Some(entry) = kept
            .as_mut()
            .filter(|e| e.name == *conf.name() && Some(e.tip) == tip)
        {
            entry.lineage = Some(nodes.clone());
        }
        Ok(nodes)
    }

    /// The entry of `conf` at its events tip (read with `read` when not kept), still locked, so
    /// that what is made of it is kept with it; and its attempts.
    fn entry(
        &self,
        conf: &Conference,
        read: impl FnOnce() -> Result<Vec<AttemptRecord>>,
    ) -> Result<(Kept<'_>, Arc<Vec<AttemptRecord>>)> {
        let (name, tip) = (conf.name(), conf.events_tip());
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(entry), Some(tip)) = (kept.as_ref(), tip) {
            if entry.name == *name && entry.tip == tip {
                let attempts = entry.attempts.clone();
                return Ok((kept, attempts));
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
                page_text: None,
                lineage: None,
            });
        }
        Ok((kept, attempts))
    }
}
