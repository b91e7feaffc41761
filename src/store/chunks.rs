//! How a records file (one JSON line per attempt, per transfer pick) is laid out in the state
//! tree, so that appending a line costs the same on a round's 10,000th attempt as on its first.
//!
//! Rewriting a whole records file per line stores K² bytes over a round of K lines (1.1 GB over
//! 5,000 iterations). So `round-3/attempts.jsonl` is stored in chunks of `CHUNK_LINES` lines,
//! and the chunks in group folders of `CHUNKS_PER_GROUP`:
//! `round-3/attempts.jsonl.d/000000/000000.jsonl`, …, `000000/000063.jsonl`,
//! `000001/000064.jsonl`, … — names in order, so `git ls-tree -r` lists the file's pieces in the
//! order they join. An append writes one chunk, one group listing of at most 64 entries and a
//! top listing of one entry per 4,096 lines: a few kilobytes whatever the round's length, where a
//! single flat folder of chunks grew by one entry per 64 lines and was rewritten whole each time.
//!
//! Older layouts keep growing as they began, so a conference begun by an earlier release reads
//! and continues as it always did: a file stored whole (rounds before chunks, imported rounds)
//! grows whole, and a folder of chunks without groups (the release before groups) grows flat.
//! Every reader goes through `blobs`, which reads all three.

use anyhow::Result;
use git2::{ObjectType, Oid, Repository, Tree, TreeEntry};
use std::path::Path;

/// Lines per chunk of a records file.
pub const CHUNK_LINES: usize = 64;

/// Chunks per group folder.
pub const CHUNKS_PER_GROUP: usize = 64;

/// The folder that holds the records file `path` in chunks: `round-3/attempts.jsonl.d`.
pub fn folder(path: &str) -> String {
    format!("{path}.d")
}

/// Where a line appended to the records file `path` in `base` goes, with that file's bytes
/// there so far (the line is added to them and the result stored at the returned path).
pub fn append_target(repo: &Repository, base: &Tree, path: &str) -> Result<(String, Vec<u8>)> {
    if let Ok(entry) = base.get_path(Path::new(path)) {
        return Ok((path.to_string(), blob_bytes(repo, &entry)?));
    }
    let dir = folder(path);
    let first_chunk = chunk_path(&format!("{dir}/{}", group_name(0)), 0);
    let Some(top) = subtree(repo, base, &dir)? else {
        return Ok((first_chunk, Vec::new()));
    };
    let Some(last) = last_entry(&top) else {
        return Ok((first_chunk, Vec::new()));
    };
    if last.kind() == Some(ObjectType::Blob) {
        // A flat folder, begun by the release before groups: it grows flat.
        return Ok(match with_room(repo, &dir, &last)? {
            Some(target) => target,
            None => (chunk_path(&dir, number_after(&last, &top)), Vec::new()),
        });
    }
    let group_dir = format!("{dir}/{}", entry_name(&last));
    let group = repo.find_tree(last.id())?;
    let Some(last_chunk) = last_entry(&group) else {
        return Ok((chunk_path(&group_dir, 0), Vec::new()));
    };
    if let Some(target) = with_room(repo, &group_dir, &last_chunk)? {
        return Ok(target);
    }
    let next_chunk = number_after(&last_chunk, &group);
    if group.len() < CHUNKS_PER_GROUP {
        return Ok((chunk_path(&group_dir, next_chunk), Vec::new()));
    }
    let new_group = format!("{dir}/{}", group_name(number_after(&last, &top)));
    Ok((chunk_path(&new_group, next_chunk), Vec::new()))
}

/// The blobs that hold the records file `path` in `tree`, in order: the file itself when it is
/// stored whole, else its chunks (none when absent). A reader that keeps what it parsed by blob
/// id re-reads only the chunk that grew.
pub fn blobs(repo: &Repository, tree: &Tree, path: &str) -> Result<Vec<Oid>> {
    if let Ok(entry) = tree.get_path(Path::new(path)) {
        if entry.kind() == Some(ObjectType::Blob) {
            return Ok(vec![entry.id()]);
        }
    }
    let Some(top) = subtree(repo, tree, &folder(path))? else {
        return Ok(Vec::new());
    };
    let mut ids = Vec::new();
    for entry in top.iter() {
        match entry.kind() {
            Some(ObjectType::Tree) => {
                ids.extend(repo.find_tree(entry.id())?.iter().map(|e| e.id()))
            }
            _ => ids.push(entry.id()),
        }
    }
    Ok(ids)
}

/// The chunk `last` of the folder `dir` with its bytes, when it has room for a line.
fn with_room(repo: &Repository, dir: &str, last: &TreeEntry) -> Result<Option<(String, Vec<u8>)>> {
    let bytes = blob_bytes(repo, last)?;
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    Ok((lines < CHUNK_LINES).then(|| (format!("{dir}/{}", entry_name(last)), bytes)))
}

/// The number of the chunk or group that follows `last` in `folder`: named after the last one,
/// not by count, so that one another machine's replay added out of turn still sorts before it.
fn number_after(last: &TreeEntry, folder: &Tree) -> usize {
    name_number(last).map_or(folder.len(), |n| n + 1)
}

fn last_entry<'t>(folder: &'t Tree) -> Option<TreeEntry<'t>> {
    folder.get(folder.len().checked_sub(1)?)
}

fn chunk_path(dir: &str, index: usize) -> String {
    format!("{dir}/{index:06}.jsonl")
}

fn group_name(index: usize) -> String {
    format!("{index:06}")
}

/// The number a chunk or group is named by (`000064.jsonl`, `000001`).
fn name_number(entry: &TreeEntry) -> Option<usize> {
    let name = entry.name()?;
    name.strip_suffix(".jsonl").unwrap_or(name).parse().ok()
}

fn entry_name(entry: &TreeEntry) -> String {
    String::from_utf8_lossy(entry.name_bytes()).into_owned()
}

fn blob_bytes(repo: &Repository, entry: &TreeEntry) -> Result<Vec<u8>> {
    Ok(repo.find_blob(entry.id())?.content().to_vec())
}

/// The folder at `path` in `tree` (None when there is none, or a file is there).
fn subtree<'r>(repo: &'r Repository, tree: &Tree, path: &str) -> Result<Option<Tree<'r>>> {
    match tree.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(ObjectType::Tree) => {
            Ok(Some(repo.find_tree(entry.id())?))
        }
        Ok(_) => Ok(None),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::build::TreeUpdateBuilder;
    use git2::FileMode;

    const PATH: &str = "round-1/attempts.jsonl";

    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        (dir, repo)
    }

    fn empty(repo: &Repository) -> Oid {
        repo.treebuilder(None).unwrap().write().unwrap()
    }

    /// A tree holding one file at `path`: the numbered lines 0 to `lines` - 1.
    fn holding(repo: &Repository, path: &str, lines: usize) -> Oid {
        let text: String = (0..lines).map(|n| format!("{n}\n")).collect();
        let mut update = TreeUpdateBuilder::new();
        update.upsert(path, repo.blob(text.as_bytes()).unwrap(), FileMode::Blob);
        let base = repo.find_tree(empty(repo)).unwrap();
        update.create_updated(repo, &base).unwrap()
    }

    /// Appends `lines` numbered lines to `PATH` in `tree`, one tree per line as the log does.
    fn append(repo: &Repository, mut tree: Oid, from: usize, lines: usize) -> Oid {
        for n in from..from + lines {
            let base = repo.find_tree(tree).unwrap();
            let (target, mut bytes) = append_target(repo, &base, PATH).unwrap();
            bytes.extend_from_slice(format!("{n}\n").as_bytes());
            let mut update = TreeUpdateBuilder::new();
            update.upsert(target, repo.blob(&bytes).unwrap(), FileMode::Blob);
            tree = update.create_updated(repo, &base).unwrap();
        }
        tree
    }

    fn joined(repo: &Repository, tree: Oid) -> Vec<usize> {
        let tree = repo.find_tree(tree).unwrap();
        let mut text = String::new();
        for id in blobs(repo, &tree, PATH).unwrap() {
            text.push_str(std::str::from_utf8(repo.find_blob(id).unwrap().content()).unwrap());
        }
        text.lines().map(|l| l.parse().unwrap()).collect()
    }

    fn listing(repo: &Repository, tree: Oid, path: &str) -> Vec<String> {
        let tree = repo.find_tree(tree).unwrap();
        let folder = subtree(repo, &tree, path).unwrap().unwrap();
        folder.iter().map(|e| entry_name(&e)).collect()
    }

    #[test]
    fn a_long_file_fills_groups_of_64_chunks_of_64_lines_in_order() {
        let (_dir, repo) = repo();
        let lines = CHUNK_LINES * CHUNKS_PER_GROUP + CHUNK_LINES + 1;
        let tree = append(&repo, empty(&repo), 0, lines);
        assert_eq!(joined(&repo, tree), (0..lines).collect::<Vec<_>>());
        let dir = folder(PATH);
        assert_eq!(listing(&repo, tree, &dir), ["000000", "000001"]);
        let first = listing(&repo, tree, &format!("{dir}/000000"));
        assert_eq!(first.len(), CHUNKS_PER_GROUP);
        assert_eq!(
            (first[0].as_str(), first[63].as_str()),
            ("000000.jsonl", "000063.jsonl")
        );
        assert_eq!(
            listing(&repo, tree, &format!("{dir}/000001")),
            ["000064.jsonl", "000065.jsonl"]
        );
    }

    #[test]
    fn a_file_stored_whole_grows_whole() {
        let (_dir, repo) = repo();
        let tree = holding(&repo, PATH, 2);
        let tree = append(&repo, tree, 2, CHUNK_LINES * 2);
        assert_eq!(
            joined(&repo, tree),
            (0..CHUNK_LINES * 2 + 2).collect::<Vec<_>>()
        );
        let listing = listing(&repo, tree, "round-1");
        assert_eq!(listing, ["attempts.jsonl"]);
    }

    #[test]
    fn a_flat_folder_of_chunks_grows_flat() {
        let (_dir, repo) = repo();
        let dir = folder(PATH);
        let tree = holding(&repo, &format!("{dir}/000000.jsonl"), CHUNK_LINES);
        let tree = append(&repo, tree, CHUNK_LINES, CHUNK_LINES + 1);
        assert_eq!(
            joined(&repo, tree),
            (0..CHUNK_LINES * 2 + 1).collect::<Vec<_>>()
        );
        assert_eq!(
            listing(&repo, tree, &dir),
            ["000000.jsonl", "000001.jsonl", "000002.jsonl"]
        );
    }

    #[test]
    fn a_chunk_added_out_of_turn_is_followed_not_overwritten() {
        // Another machine's replay left a chunk named past the count of its folder.
        let (_dir, repo) = repo();
        let dir = folder(PATH);
        let tree = holding(&repo, &format!("{dir}/000000/000005.jsonl"), CHUNK_LINES);
        let tree = append(&repo, tree, CHUNK_LINES, 1);
        assert_eq!(
            listing(&repo, tree, &format!("{dir}/000000")),
            ["000005.jsonl", "000006.jsonl"]
        );
        assert_eq!(joined(&repo, tree), (0..=CHUNK_LINES).collect::<Vec<_>>());
    }
}
