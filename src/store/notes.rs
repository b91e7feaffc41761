//! Notes on snapshot commits in `refs/notes/conference`: one JSON object per line.
//!
//! A later verdict (peer review) appends a line instead of replacing the note, so notes written on
//! different machines merge with `git notes merge -s cat_sort_uniq`. Notes are written with a
//! two-level fan-out (`ab/cdef…`, as git does for large notes trees) so that adding a note rewrites
//! two small trees, not one tree with an entry per attempt. Several notes go into one notes commit.

use anyhow::Result;
use git2::{build::TreeUpdateBuilder, FileMode, Oid, Repository};

use super::events::{cas_update, read_path};
use super::refs::NOTES_REF;
use super::signature;

/// The note attached to `commit`, if any (flat or fanned-out layout).
pub fn read_note(repo: &Repository, commit: Oid) -> Result<Option<String>> {
    let Some(tree) = notes_tree(repo)? else {
        return Ok(None);
    };
    for path in note_paths(commit) {
        if let Some(bytes) = read_path(repo, tree, &path)? {
            return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    Ok(None)
}

/// Appends one line to the note of each commit, in a single notes commit. Lines already present
/// are not repeated, so replaying the same write (after a crash) changes nothing.
pub fn append_lines(repo: &Repository, entries: &[(Oid, String)]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    for attempt in 0..20u64 {
        if attempt > 0 {
            // Another process (a second conference) writes notes too: back off and retry.
            std::thread::sleep(std::time::Duration::from_millis(attempt * 5));
        }
        let parent = current_notes_commit(repo)?;
        let base = match parent {
            Some(c) => repo.find_commit(c)?.tree()?,
            None => repo.find_tree(repo.treebuilder(None)?.write()?)?,
        };
        let mut update = TreeUpdateBuilder::new();
        let mut changed = false;
        // Entries for the same commit accumulate in `pending` before they are written.
        let mut pending: std::collections::BTreeMap<Oid, String> = Default::default();
        for (commit, line) in entries {
            let existing = match pending.get(commit) {
                Some(text) => Some(text.clone()),
                None => {
                    let mut found = None;
                    for path in note_paths(*commit) {
                        if let Some(bytes) = read_path(repo, base.id(), &path)? {
                            found = Some(String::from_utf8_lossy(&bytes).into_owned());
                            if path.len() == 40 {
                                update.remove(path.as_str());
                            }
                            break;
                        }
                    }
                    found
                }
            };
            let line = line.trim_end();
            let text = match existing {
                Some(text) if text.lines().any(|l| l == line) => text,
                Some(text) => {
                    changed = true;
                    let mut text = text;
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(line);
                    text.push('\n');
                    text
                }
                None => {
                    changed = true;
                    format!("{line}\n")
                }
            };
            pending.insert(*commit, text);
        }
        if !changed {
            return Ok(());
        }
        for (commit, text) in &pending {
            let blob = repo.blob(text.as_bytes())?;
            update.upsert(fanout_path(*commit).as_str(), blob, FileMode::Blob);
        }
        let tree = repo.find_tree(update.create_updated(repo, &base)?)?;
        let sig = signature(repo);
        let parents: Vec<git2::Commit> = match parent {
            Some(c) => vec![repo.find_commit(c)?],
            None => vec![],
        };
        let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
        let message = format!("Notes added by 'git conference' ({} notes)", pending.len());
        let commit = repo.commit(None, &sig, &sig, &message, &tree, &parent_refs)?;
        crate::failpoint::hit("note.before-ref");
        // Another conference of this repository may write notes at the same time: retry on a race.
        if cas_update(repo, NOTES_REF, commit, parent, "git conference: notes").is_ok() {
            crate::failpoint::hit("note.written");
            return Ok(());
        }
    }
    anyhow::bail!("could not update {NOTES_REF}: it kept changing under us")
}

fn current_notes_commit(repo: &Repository) -> Result<Option<Oid>> {
    match repo.find_reference(NOTES_REF) {
        Ok(r) => Ok(Some(r.peel_to_commit()?.id())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn notes_tree(repo: &Repository) -> Result<Option<Oid>> {
    Ok(match current_notes_commit(repo)? {
        Some(c) => Some(repo.find_commit(c)?.tree_id()),
        None => None,
    })
}

fn fanout_path(commit: Oid) -> String {
    let hex = commit.to_string();
    format!("{}/{}", &hex[..2], &hex[2..])
}

fn note_paths(commit: Oid) -> [String; 2] {
    [fanout_path(commit), commit.to_string()]
}
