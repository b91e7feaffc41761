//! Taking what an agent changed in a worktree as a tree, and putting a worktree back.
//!
//! The worktree's own index is the stat cache: adding everything looks at each file's stat data
//! and hashes only files that changed, so a snapshot costs what git itself must do. New, modified
//! and deleted files count; ignored files (build caches) are neither snapshotted nor removed.
//! Putting a worktree back is a forced checkout that also removes untracked, non-ignored files, so
//! junk left by an agent or an evaluation never leaks into the next attempt.
//!
//! A folder with its own `.git` (an agent ran `git init`, `git clone` or a scaffolder) cannot be
//! part of a snapshot: git would record it as a gitlink to commits nobody else has. A snapshot
//! leaves such nested repositories out and names them, so that the attempt is rejected, and a
//! revert removes them like any other untracked folder (unless they are ignored).

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use anyhow::Result;
use git2::{build::CheckoutBuilder, IndexAddOption, Oid, Repository, Signature};

/// What a worktree holds: the tree of its files, and the nested git repositories found in it
/// (left out of the tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub tree: Oid,
    /// Folders (relative to the worktree) with their own `.git`, not ignored.
    pub nested_repos: Vec<String>,
}

impl Snapshot {
    /// Why the attempt cannot be taken: it created nested repositories.
    pub fn rejection(&self) -> Option<String> {
        if self.nested_repos.is_empty() {
            return None;
        }
        Some(format!(
            "created a nested git repository ({}): a repository inside the worktree cannot be \
             part of an attempt; copy the files needed without their .git folder",
            self.nested_repos
                .iter()
                .map(|p| format!("{p}/"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// The tree of the worktree's current files (writes the objects that changed).
///
/// One pass over the worktree (what `git add -A` does): a diff of the index against the files,
/// untracked ones included, then only the paths it names are added to or removed from the index.
/// (`add_all` followed by `update_all` walked the whole worktree twice.)
pub fn capture(wt: &Repository) -> Result<Snapshot> {
    let mut index = wt.index()?;
    let mut opts = git2::DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_typechange(true)
        .update_index(true); // refreshes the stat data of files touched but not changed
    let diff = wt.diff_index_to_workdir(Some(&index), Some(&mut opts))?;
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for delta in diff.deltas() {
        match delta.status() {
            git2::Delta::Deleted => removed.extend(delta.old_file().path().map(Path::to_path_buf)),
            git2::Delta::Unmodified | git2::Delta::Ignored => {}
            _ => added.extend(delta.new_file().path().map(Path::to_path_buf)),
        }
    }
    drop(diff);
    let workdir = wt.workdir().map(Path::to_path_buf).unwrap_or_default();
    let mut nested = BTreeSet::new();
    // Removals first, so that a file replaced by a folder (or the reverse) never collides.
    for path in &removed {
        index.remove_path(path)?;
    }
    for path in &added {
        if workdir.join(path).is_dir() {
            // The diff names a folder only when it did not open it: a nested repository.
            match nested_root(&workdir, path) {
                Some(root) => {
                    nested.insert(root);
                }
                None => add_folder(&mut index, path, &mut nested)?,
            }
        } else {
            index.add_path(path)?;
        }
    }
    drop_new_gitlinks(wt, &mut index, &mut nested)?;
    let tree = index.write_tree()?;
    index.write()?;
    Ok(Snapshot {
        tree,
        nested_repos: names(nested),
    })
}

/// Takes out of the index the gitlinks that HEAD does not have (an agent that ran `git add -A`
/// over a repository it cloned staged one), noting them in `nested`. Gitlinks of HEAD (the
/// project's own submodules) stay, whatever commit they point at.
fn drop_new_gitlinks(
    wt: &Repository,
    index: &mut git2::Index,
    nested: &mut BTreeSet<PathBuf>,
) -> Result<()> {
    const GITLINK: u32 = 0o160000;
    let head = wt.head().ok().and_then(|h| h.peel_to_tree().ok());
    let new: Vec<PathBuf> = index
        .iter()
        .filter(|e| e.mode == GITLINK)
        .map(|e| PathBuf::from(std::ffi::OsStr::from_bytes(&e.path)))
        .filter(|p| {
            let in_head = head.as_ref().and_then(|t| t.get_path(p).ok());
            in_head.is_none_or(|e| e.filemode() as u32 != GITLINK)
        })
        .collect();
    for path in new {
        index.remove_path(&path)?;
        nested.insert(path);
    }
    Ok(())
}

/// Adds a folder's files (as `add_all` does), leaving out the nested repositories below it and
/// noting them in `nested`.
fn add_folder(index: &mut git2::Index, path: &Path, nested: &mut BTreeSet<PathBuf>) -> Result<()> {
    // libgit2 names a nested repository as a folder path ending in '/'; adding it fails with
    // "invalid path": skip it (a positive return value skips the entry).
    let mut skip_nested = |p: &Path, _: &[u8]| -> i32 {
        let bytes = p.as_os_str().as_bytes();
        match bytes.strip_suffix(b"/") {
            Some(dir) => {
                nested.insert(PathBuf::from(std::ffi::OsStr::from_bytes(dir)));
                1
            }
            None => 0,
        }
    };
    index.add_all(
        [path],
        IndexAddOption::DISABLE_PATHSPEC_MATCH,
        Some(&mut skip_nested),
    )?;
    Ok(())
}

/// The nested repository holding `rel` (a path relative to the worktree): the folder before a
/// `.git` component of `rel`, or `rel` or one of its parents when it has a `.git` entry.
fn nested_root(workdir: &Path, rel: &Path) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    for component in rel.components() {
        let Component::Normal(name) = component else {
            return None;
        };
        if name == ".git" {
            return (!prefix.as_os_str().is_empty()).then_some(prefix);
        }
        prefix.push(name);
        if std::fs::symlink_metadata(workdir.join(&prefix).join(".git")).is_ok() {
            return Some(prefix);
        }
    }
    None
}

fn names(paths: BTreeSet<PathBuf>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// Whether an untracked `path` is ignored (then a snapshot and a revert leave it alone).
fn ignored_untracked(wt: &Repository, index: &git2::Index, path: &Path) -> Result<bool> {
    Ok(index.get_path(path, 0).is_none() && wt.is_path_ignored(path)?)
}

/// Paths that differ between two trees (added, modified, deleted, both sides of a rename), in
/// tree order.
///
/// Subtrees with the same id on both sides are skipped unopened, so the cost follows what changed,
/// not the size of the repository (a libgit2 tree diff walks every entry of both trees).
pub fn changed_paths(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<String>> {
    let mut paths = Vec::new();
    if old != new {
        diff_subtrees(repo, Some(old), Some(new), "", &mut paths)?;
    }
    Ok(paths)
}

/// One side of a tree entry: its id, its mode, and whether it is a folder.
type Side = Option<(Oid, i32, bool)>;

fn diff_subtrees(
    repo: &Repository,
    old: Option<Oid>,
    new: Option<Oid>,
    prefix: &str,
    out: &mut Vec<String>,
) -> Result<()> {
    let mut entries: std::collections::BTreeMap<Vec<u8>, [Side; 2]> = Default::default();
    for (side, tree) in [old, new].into_iter().enumerate() {
        let Some(tree) = tree else { continue };
        for entry in repo.find_tree(tree)?.iter() {
            let is_tree = entry.kind() == Some(git2::ObjectType::Tree);
            entries.entry(entry.name_bytes().to_vec()).or_default()[side] =
                Some((entry.id(), entry.filemode(), is_tree));
        }
    }
    for (name, [a, b]) in entries {
        if a == b {
            continue;
        }
        let path = format!("{prefix}{}", String::from_utf8_lossy(&name));
        let file = |s: Side| s.filter(|(_, _, is_tree)| !is_tree);
        let folder = |s: Side| s.filter(|(_, _, is_tree)| *is_tree).map(|(id, _, _)| id);
        if file(a).is_some() || file(b).is_some() {
            out.push(path.clone());
        }
        let (fa, fb) = (folder(a), folder(b));
        if (fa.is_some() || fb.is_some()) && fa != fb {
            diff_subtrees(repo, fa, fb, &format!("{path}/"), out)?;
        }
    }
    Ok(())
}

/// `git diff --stat`-like summary of two trees: (files changed, insertions, deletions).
pub fn diff_stat(repo: &Repository, old: Oid, new: Oid) -> Result<(usize, usize, usize)> {
    let old = repo.find_tree(old)?;
    let new = repo.find_tree(new)?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let stats = diff.stats()?;
    Ok((stats.files_changed(), stats.insertions(), stats.deletions()))
}

/// A unified diff of two trees, as text.
pub fn diff_text(repo: &Repository, old: Oid, new: Oid) -> Result<String> {
    let old = repo.find_tree(old)?;
    let new = repo.find_tree(new)?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut out = String::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        match line.origin() {
            '+' | '-' | ' ' => out.push(line.origin()),
            _ => {}
        }
        out.push_str(&String::from_utf8_lossy(line.content()));
        true
    })?;
    Ok(out)
}

/// Writes a commit object (no ref moves): the snapshot of an attempt.
pub fn commit(
    repo: &Repository,
    tree: Oid,
    parents: &[Oid],
    message: &str,
    author: &Signature,
) -> Result<Oid> {
    let tree = repo.find_tree(tree)?;
    let parents: Vec<git2::Commit> = parents
        .iter()
        .map(|p| repo.find_commit(*p))
        .collect::<Result<_, _>>()?;
    let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
    let committer = crate::store::signature(repo);
    Ok(repo.commit(None, author, &committer, message, &tree, &parent_refs)?)
}

/// Puts the worktree's files and index exactly at `commit`'s tree and points HEAD at `head_ref`
/// (a branch) or detaches it at `commit` when `head_ref` is None. Only differing files are written.
/// Untracked nested repositories (which libgit2's checkout leaves in place) are removed too.
pub fn reset(wt: &Repository, commit: Oid, head_ref: Option<&str>) -> Result<()> {
    let target = wt.find_commit(commit)?;
    let workdir = wt.workdir().map(Path::to_path_buf).unwrap_or_default();
    let mut nested = Vec::new();
    {
        let mut opts = CheckoutBuilder::new();
        opts.force()
            .remove_untracked(true)
            .notify_on(git2::CheckoutNotificationType::UNTRACKED)
            .notify(|_, path, _, _, _| {
                if let Some(path) = path {
                    if workdir.join(path).join(".git").exists() {
                        nested.push(path.to_path_buf());
                    }
                }
                true
            });
        wt.checkout_tree(target.as_object(), Some(&mut opts))?;
    }
    for path in nested {
        remove_any(&workdir.join(&path))?;
        // The checkout emptied its parent folders but could not remove them while it was there.
        for parent in path.ancestors().skip(1) {
            if parent.as_os_str().is_empty() || std::fs::remove_dir(workdir.join(parent)).is_err() {
                break;
            }
        }
    }
    point_head(wt, commit, head_ref)
}

/// Removes a file, symlink or folder (with everything in it); a missing one is no error.
fn remove_any(full: &Path) -> Result<()> {
    match std::fs::symlink_metadata(full) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(full)?,
        Ok(_) => std::fs::remove_file(full)?,
        Err(_) => {}
    }
    Ok(())
}

fn point_head(wt: &Repository, commit: Oid, head_ref: Option<&str>) -> Result<()> {
    match head_ref {
        Some(name) => {
            let current = wt.head().ok().and_then(|h| h.name().map(str::to_string));
            if current.as_deref() != Some(name) || wt.head_detached().unwrap_or(true) {
                wt.set_head(name)?;
            }
        }
        None => wt.set_head_detached(commit)?,
    }
    Ok(())
}

/// The tree of the worktree after changes to `paths` only (files or folders, deleted ones
/// included), the rest being as the index has it: what [`capture`] gives when the caller knows
/// which paths changed (see `watch`).
pub fn capture_paths(wt: &Repository, paths: &[PathBuf]) -> Result<Snapshot> {
    let mut index = wt.index()?;
    let workdir = wt.workdir().map(Path::to_path_buf).unwrap_or_default();
    let mut nested = BTreeSet::new();
    for path in paths {
        if let Some(root) = nested_root(&workdir, path) {
            if !ignored_untracked(wt, &index, &root)? {
                nested.insert(root);
            }
            continue;
        }
        match std::fs::symlink_metadata(workdir.join(path)) {
            Err(_) => {
                let _ = index.remove_path(path);
                let _ = index.remove_dir(path, 0);
            }
            Ok(meta) if meta.is_dir() => {
                let _ = index.remove_path(path);
                add_folder(&mut index, path, &mut nested)?;
            }
            Ok(_) => {
                if ignored_untracked(wt, &index, path)? {
                    continue;
                }
                let _ = index.remove_dir(path, 0);
                index.add_path(path)?;
            }
        }
    }
    // The index stays in memory (the caller's handle); the revert that follows writes it.
    Ok(Snapshot {
        tree: index.write_tree()?,
        nested_repos: names(nested),
    })
}

/// Moves a worktree whose files and index matched the tree `from` when `watch` last settled to
/// `commit` (HEAD at `head_ref`): only the paths that differ between the two trees, and those the
/// watch saw touched since, are rewritten, so a round start costs what the new best changed, not
/// what the repository holds. When the watch cannot vouch (or there is none) the whole worktree
/// is checked out, as [`reset`] does. The watch is settled after the move.
pub fn advance(
    wt: &Repository,
    from: Oid,
    commit: Oid,
    head_ref: Option<&str>,
    watch: Option<&mut crate::git::watch::Watch>,
) -> Result<()> {
    let Some(watch) = watch else {
        return reset(wt, commit, head_ref);
    };
    match watch.take() {
        crate::git::watch::Changes::Paths(touched) => {
            let to = wt.find_commit(commit)?.tree_id();
            let mut paths: std::collections::BTreeSet<PathBuf> = touched.into_iter().collect();
            paths.extend(changed_paths(wt, from, to)?.into_iter().map(PathBuf::from));
            let paths: Vec<PathBuf> = paths.into_iter().collect();
            reset_paths(wt, commit, head_ref, &paths, from != to)?;
        }
        crate::git::watch::Changes::Everything => reset(wt, commit, head_ref)?,
    }
    watch.settle();
    Ok(())
}

/// Puts `paths` (and only them) back as they are at `commit`, in the files and the in-memory
/// index: what [`reset`] does when the caller knows which paths changed. Untracked, non-ignored
/// paths are removed; ignored ones are left alone. The index file is written only with
/// `write_index` (when its content moved to a new commit): after a revert it already holds the
/// right content, and writing it would cost a pass over every entry.
pub fn reset_paths(
    wt: &Repository,
    commit: Oid,
    head_ref: Option<&str>,
    paths: &[PathBuf],
    write_index: bool,
) -> Result<()> {
    let tree = wt.find_commit(commit)?.tree()?;
    let workdir = wt.workdir().map(Path::to_path_buf).unwrap_or_default();
    let mut index = wt.index()?;
    let mut restore: Vec<(PathBuf, git2::Oid, i32)> = Vec::new();
    for path in paths {
        if let Some(root) = nested_root(&workdir, path) {
            // A nested repository, or a path inside one: its `.git` goes, and the folder too
            // unless `commit` has it; ignored ones stay.
            if !ignored_untracked(wt, &index, &root)? {
                remove_any(&workdir.join(&root).join(".git"))?;
                if tree.get_path(&root).is_err() {
                    remove_any(&workdir.join(&root))?;
                    let _ = index.remove_dir(&root, 0);
                }
            }
            continue;
        }
        match tree.get_path(path) {
            Ok(entry) if entry.kind() == Some(git2::ObjectType::Tree) => {
                // A folder at `commit` (the agent replaced or removed it): restore all of it.
                let full = workdir.join(path);
                if std::fs::symlink_metadata(&full)
                    .map(|m| !m.is_dir())
                    .unwrap_or(false)
                {
                    std::fs::remove_file(&full)?;
                    let _ = index.remove_path(path);
                }
                let sub = wt.find_tree(entry.id())?;
                sub.walk(git2::TreeWalkMode::PreOrder, |root, e| {
                    if e.kind() != Some(git2::ObjectType::Tree) {
                        let p = path.join(root).join(e.name().unwrap_or(""));
                        restore.push((p, e.id(), e.filemode()));
                    }
                    git2::TreeWalkResult::Ok
                })?;
            }
            Ok(entry) => restore.push((path.clone(), entry.id(), entry.filemode())),
            Err(_) => {
                if ignored_untracked(wt, &index, path)? {
                    continue;
                }
                remove_any(&workdir.join(path))?;
                let _ = index.remove_path(path);
                let _ = index.remove_dir(path, 0);
            }
        }
    }
    for (path, blob, mode) in restore {
        write_blob(wt, &workdir.join(&path), blob, mode)?;
        // A folder the agent put where this file was is gone with its entries.
        let _ = index.remove_dir(&path, 0);
        if mode != 0o160000 {
            index.add_path(&path)?;
        }
    }
    if write_index {
        index.write()?;
    }
    point_head(wt, commit, head_ref)
}

/// Writes a blob to `full` as git would check it out (regular, executable or symlink).
fn write_blob(wt: &Repository, full: &Path, blob: Oid, mode: i32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if mode == 0o160000 {
        return Ok(()); // a submodule: nothing to write here
    }
    if let Ok(m) = std::fs::symlink_metadata(full) {
        if m.is_dir() {
            std::fs::remove_dir_all(full)?;
        } else {
            std::fs::remove_file(full)?;
        }
    }
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let blob = wt.find_blob(blob)?;
    if mode == 0o120000 {
        let target = std::ffi::OsStr::from_bytes(blob.content());
        std::os::unix::fs::symlink(target, full)?;
    } else {
        std::fs::write(full, blob.content())?;
        let perm = if mode == 0o100755 { 0o755 } else { 0o644 };
        std::fs::set_permissions(full, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(())
}

/// Reads the files under `paths` at `tree` (text files only), for the built-in tuner.
pub fn read_files(repo: &Repository, tree: Oid, paths: &[String]) -> Result<Vec<(String, String)>> {
    let tree = repo.find_tree(tree)?;
    let mut out = Vec::new();
    for p in paths {
        if let Ok(entry) = tree.get_path(Path::new(p)) {
            if let Ok(blob) = repo.find_blob(entry.id()) {
                if let Ok(text) = std::str::from_utf8(blob.content()) {
                    out.push((p.clone(), text.to_string()));
                }
            }
        }
    }
    Ok(out)
}

/// `tree` with the file at `path` (which it holds) replaced by `content`, its mode kept: a
/// sweep's variant, the agent's edit with one literal set to another value.
pub fn with_file(repo: &Repository, tree: Oid, path: &str, content: &[u8]) -> Result<Oid> {
    let tree = repo.find_tree(tree)?;
    let (dir, name) = match path.rsplit_once('/') {
        Some((dir, name)) => (Some(dir), name),
        None => (None, path),
    };
    let sub = match dir {
        Some(dir) => repo.find_tree(tree.get_path(Path::new(dir))?.id())?,
        None => tree.clone(),
    };
    let mode = sub.get_name(name).map_or(0o100644, |e| e.filemode());
    let mut builder = repo.treebuilder(Some(&sub))?;
    builder.insert(name, repo.blob(content)?, mode)?;
    let mut id = builder.write()?;
    // Up the folders to the root, each with its new subtree.
    let mut at = dir;
    while let Some(dir) = at {
        let (parent, name) = match dir.rsplit_once('/') {
            Some((parent, name)) => (Some(parent), name),
            None => (None, dir),
        };
        let above = match parent {
            Some(p) => repo.find_tree(tree.get_path(Path::new(p))?.id())?,
            None => tree.clone(),
        };
        let mut builder = repo.treebuilder(Some(&above))?;
        builder.insert(name, id, 0o040000)?;
        id = builder.write()?;
        at = parent;
    }
    Ok(id)
}

/// Every file path in a tree (for matching globs against the whole project).
pub fn list_files(repo: &Repository, tree: Oid) -> Result<Vec<String>> {
    let tree = repo.find_tree(tree)?;
    let mut out = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            out.push(format!("{root}{}", entry.name().unwrap_or("")));
        }
        git2::TreeWalkResult::Ok
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests;
