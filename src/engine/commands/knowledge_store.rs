//! The repository-wide knowledge store as `knowledge` lists, shows and forgets it (the store
//! itself, and how an entry is written, are `store::knowledge`'s; the retrospective that fills
//! it and the brief read from it are `engine::phases::knowledge`'s).

use anyhow::Result;
use git2::{Oid, Repository};

use crate::model::knowledge::Entry;
use crate::store::knowledge::{self as store, Store};

/// The ref the store is kept on (named in what `knowledge` prints).
pub const REF: &str = crate::store::refs::KNOWLEDGE_REF;

/// The store's entries, its tip, and the entries that cannot be read.
pub fn read(repo: &Repository) -> Result<Store> {
    store::read(repo)
}

/// Removes entry `id` in a commit of its own on the store's ref; the entry it removed.
pub fn forget(repo: &Repository, id: &str) -> Result<Entry> {
    store::forget(repo, id)
}

/// What `knowledge show` says of an id the store does not hold.
pub fn missing(store: &Store, id: &str) -> String {
    store::missing(store, id)
}

/// The commit the store's ref points to, if it has one.
pub fn tip(repo: &Repository) -> Result<Option<Oid>> {
    crate::store::cas::read(repo, REF)
}
