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
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=T",
                "-c",
                "user.email=t@e",
                "-c",
                "core.autocrlf=false",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `capture` takes exactly what `git add -A` would: new (also in new folders), modified,
    /// deleted, mode changes, a file replaced by a folder; ignored files stay out.
    #[test]
    fn capture_matches_git_add_all() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q"]);
        for (p, t) in [
            ("a.txt", "a"),
            ("d/b.txt", "b"),
            ("d/e/c.txt", "c"),
            ("x", "x"),
            (".gitignore", "build/\n*.log\n"),
            ("run.sh", "#!/bin/sh\n"),
        ] {
            std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
            std::fs::write(dir.join(p), t).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        std::fs::write(dir.join("a.txt"), "changed").unwrap();
        std::fs::remove_file(dir.join("d/e/c.txt")).unwrap();
        std::fs::create_dir_all(dir.join("new/deep")).unwrap();
        std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
        std::fs::remove_file(dir.join("x")).unwrap();
        std::fs::create_dir_all(dir.join("x")).unwrap();
        std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
        std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::create_dir_all(dir.join("build")).unwrap();
        std::fs::write(dir.join("build/out.o"), "o").unwrap();
        std::fs::write(dir.join("debug.log"), "l").unwrap();
        let repo = Repository::open(dir).unwrap();
        let tree = capture(&repo).unwrap().tree;
        git(dir, &["add", "-A"]);
        assert_eq!(tree.to_string(), git(dir, &["write-tree"]));
        // Nothing changed since: the same tree again.
        assert_eq!(capture(&repo).unwrap().tree, tree);
    }

    /// `changed_paths` names what `git diff --name-only --no-renames` names: modified, deleted,
    /// added in new folders, a file replaced by a folder, a mode change; untouched folders are
    /// left out.
    #[test]
    fn changed_paths_matches_git_diff_name_only() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q"]);
        for (p, t) in [
            ("a.txt", "a"),
            ("d/b.txt", "b"),
            ("d/e/c.txt", "c"),
            ("same/s.txt", "s"),
            ("x", "x"),
            ("run.sh", "#!/bin/sh\n"),
        ] {
            std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
            std::fs::write(dir.join(p), t).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        std::fs::write(dir.join("a.txt"), "changed").unwrap();
        std::fs::remove_file(dir.join("d/e/c.txt")).unwrap();
        std::fs::create_dir_all(dir.join("new/deep")).unwrap();
        std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
        std::fs::remove_file(dir.join("x")).unwrap();
        std::fs::create_dir_all(dir.join("x")).unwrap();
        std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
        std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "changes"]);
        let repo = Repository::open(dir).unwrap();
        let tree = |rev: &str| {
            repo.revparse_single(rev)
                .unwrap()
                .peel_to_tree()
                .unwrap()
                .id()
        };
        let mut ours = changed_paths(&repo, tree("HEAD~1"), tree("HEAD")).unwrap();
        ours.sort();
        let theirs = git(
            dir,
            &["diff", "--name-only", "--no-renames", "HEAD~1", "HEAD"],
        );
        let mut theirs: Vec<String> = theirs.lines().map(str::to_string).collect();
        theirs.sort();
        assert_eq!(ours, theirs);
        assert!(ours.contains(&"x/inside.txt".to_string()) && ours.contains(&"x".to_string()));
        // Both directions, and nothing for the same tree.
        let mut back = changed_paths(&repo, tree("HEAD"), tree("HEAD~1")).unwrap();
        back.sort();
        assert_eq!(back, theirs);
        assert!(changed_paths(&repo, tree("HEAD"), tree("HEAD"))
            .unwrap()
            .is_empty());
    }

    /// With a watch, the snapshot of the reported paths equals `git add -A`, and putting only
    /// those paths back leaves a clean worktree at the base commit, ignored files untouched.
    #[test]
    fn watched_capture_and_reset_follow_the_changed_paths() {
        use crate::git::watch::{Changes, Watch};
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q"]);
        for (p, t) in [
            ("a.txt", "a"),
            ("d/b.txt", "b"),
            ("d/e/c.txt", "c"),
            ("x", "x"),
            ("gone/g.txt", "g"),
            (".gitignore", "build/\n*.log\n"),
            ("run.sh", "#!/bin/sh\n"),
        ] {
            std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
            std::fs::write(dir.join(p), t).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        let base = Oid::from_str(&git(dir, &["rev-parse", "HEAD"])).unwrap();
        let repo = Repository::open(dir).unwrap();
        let index_file = repo.path().join("index");
        std::fs::create_dir_all(dir.join("build")).unwrap();
        let skip = |p: &Path| repo.is_path_ignored(p).unwrap_or(false);
        let mut watch = Watch::start(dir, &index_file, &skip).expect("inotify");
        assert_eq!(watch.take(), Changes::Paths(vec![]));

        std::fs::write(dir.join("a.txt"), "changed").unwrap();
        std::fs::remove_file(dir.join("d/e/c.txt")).unwrap();
        std::fs::create_dir_all(dir.join("new/deep")).unwrap();
        std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
        std::fs::remove_file(dir.join("x")).unwrap();
        std::fs::create_dir_all(dir.join("x")).unwrap();
        std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
        std::fs::remove_dir_all(dir.join("gone")).unwrap();
        std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(dir.join("build/out.o"), "o").unwrap();
        std::fs::write(dir.join("debug.log"), "l").unwrap();

        let Changes::Paths(paths) = watch.take() else {
            panic!("expected paths")
        };
        let tree = capture_paths(&repo, &paths).unwrap().tree;
        watch.settle();
        git(dir, &["add", "-A"]);
        assert_eq!(tree.to_string(), git(dir, &["write-tree"]));
        watch.settle();

        reset_paths(&repo, base, None, &paths, true).unwrap();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a");
        assert_eq!(std::fs::read_to_string(dir.join("x")).unwrap(), "x");
        assert!(dir.join("gone/g.txt").exists() && !dir.join("new").exists());
        assert!(dir.join("build/out.o").exists() && dir.join("debug.log").exists());

        // A revert that does not write the index file leaves it right for git too.
        watch.settle();
        std::fs::write(dir.join("a.txt"), "again").unwrap();
        std::fs::write(dir.join("junk.txt"), "j").unwrap();
        let Changes::Paths(paths) = watch.take() else {
            panic!("expected paths")
        };
        capture_paths(&repo, &paths).unwrap();
        reset_paths(&repo, base, None, &paths, false).unwrap();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a");

        // Touching the index (an agent running `git add`) makes the watch ask for a scan.
        watch.settle();
        std::fs::write(dir.join("a.txt"), "staged").unwrap();
        git(dir, &["add", "a.txt"]);
        assert_eq!(watch.take(), Changes::Everything);
    }

    /// A round start with a watch: moving a clean worktree to a new best rewrites the paths the
    /// two trees differ in (changed, added in a new folder, deleted, replaced by a folder) and
    /// the touched ones, ends exactly at the new commit for git, and leaves every other file
    /// alone (not even rewritten); without a watch's word it checks everything out.
    #[test]
    fn advance_rewrites_only_the_difference() {
        use crate::git::watch::Watch;
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        for i in 0..50 {
            std::fs::create_dir_all(dir.join(format!("src/d{}", i % 5))).unwrap();
            std::fs::write(dir.join(format!("src/d{}/f{i}.txt", i % 5)), format!("{i}")).unwrap();
        }
        std::fs::write(dir.join("x"), "x").unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "old"]);
        let old = git(dir, &["rev-parse", "HEAD"]);
        std::fs::write(dir.join("src/d0/f0.txt"), "changed").unwrap();
        std::fs::remove_file(dir.join("src/d1/f1.txt")).unwrap();
        std::fs::create_dir_all(dir.join("new/deep")).unwrap();
        std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
        std::fs::remove_file(dir.join("x")).unwrap();
        std::fs::create_dir_all(dir.join("x")).unwrap();
        std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "new best"]);
        let new = Oid::from_str(&git(dir, &["rev-parse", "HEAD"])).unwrap();
        git(dir, &["branch", "researcher", &old]);
        git(dir, &["checkout", "-q", "researcher"]);
        let repo = Repository::open(dir).unwrap();
        let old_tree = repo
            .revparse_single(&format!("{old}^{{tree}}"))
            .unwrap()
            .id();
        // The branch moves to the new best (as a round start does); files are still the old ones.
        git(
            dir,
            &["update-ref", "refs/heads/researcher", &new.to_string()],
        );
        // Left behind after the last revert and reported by the watch: an untracked file.
        let skip = |p: &Path| repo.is_path_ignored(p).unwrap_or(false);
        let mut watch = Watch::start(dir, &repo.path().join("index"), &skip).expect("inotify");
        std::fs::write(dir.join("src/d2/leftover.tmp"), "t").unwrap();
        let inode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().ino();
        let untouched = inode("src/d3/f3.txt");
        advance(
            &repo,
            old_tree,
            new,
            Some("refs/heads/researcher"),
            Some(&mut watch),
        )
        .unwrap();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert_eq!(git(dir, &["rev-parse", "HEAD"]), new.to_string());
        assert_eq!(
            std::fs::read_to_string(dir.join("src/d0/f0.txt")).unwrap(),
            "changed"
        );
        assert!(!dir.join("src/d1/f1.txt").exists() && !dir.join("src/d2/leftover.tmp").exists());
        assert_eq!(
            std::fs::read_to_string(dir.join("x/inside.txt")).unwrap(),
            "i"
        );
        assert_eq!(
            inode("src/d3/f3.txt"),
            untouched,
            "a file outside the difference was rewritten"
        );

        // Without a watch, a change it was not told about is checked out too.
        git(dir, &["update-ref", "refs/heads/researcher", &old]);
        std::fs::write(dir.join("src/d4/f4.txt"), "edited by hand").unwrap();
        let new_tree = repo.find_commit(new).unwrap().tree_id();
        advance(
            &repo,
            new_tree,
            Oid::from_str(&old).unwrap(),
            Some("refs/heads/researcher"),
            None,
        )
        .unwrap();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert_eq!(
            std::fs::read_to_string(dir.join("src/d4/f4.txt")).unwrap(),
            "4"
        );
        assert_eq!(std::fs::read_to_string(dir.join("x")).unwrap(), "x");
    }

    /// Makes a repository with one commit at `dir/rel` (what `git clone` or a scaffolder leaves).
    fn nested_repo(dir: &Path, rel: &str) {
        let d = dir.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        git(&d, &["init", "-q"]);
        std::fs::write(d.join("f.txt"), "x").unwrap();
        git(&d, &["add", "f.txt"]);
        git(&d, &["commit", "-q", "-m", "nested"]);
    }

    /// Nested repositories are left out of a snapshot and named (both the scan and the watched
    /// paths), ignored ones are not; a revert removes the named ones and keeps the ignored one.
    #[test]
    fn nested_repositories_are_named_left_out_and_removed() {
        use crate::git::watch::{Changes, Watch};
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q"]);
        std::fs::write(dir.join("a.txt"), "a").unwrap();
        std::fs::write(dir.join(".gitignore"), "build/\n").unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        let base = Oid::from_str(&git(dir, &["rev-parse", "HEAD"])).unwrap();
        let repo = Repository::open(dir).unwrap();
        std::fs::create_dir_all(dir.join("build")).unwrap();
        let index_file = repo.path().join("index");
        let skip = |p: &Path| repo.is_path_ignored(p).unwrap_or(false);
        let mut watch = Watch::start(dir, &index_file, &skip).expect("inotify");

        let make = || {
            std::fs::write(dir.join("a.txt"), "changed").unwrap();
            nested_repo(dir, "sub");
            std::fs::create_dir_all(dir.join("new")).unwrap();
            std::fs::write(dir.join("new/n.txt"), "n").unwrap();
            nested_repo(dir, "new/vendor");
            if !dir.join("build/dep").exists() {
                nested_repo(dir, "build/dep");
            }
        };
        let expected_tree = |repo: &Repository| {
            // What the snapshot must hold: a.txt changed and new/n.txt, nothing nested.
            let mut b = repo.treebuilder(None).unwrap();
            let blob = |t: &str| repo.blob(t.as_bytes()).unwrap();
            let mut newdir = repo.treebuilder(None).unwrap();
            newdir.insert("n.txt", blob("n"), 0o100644).unwrap();
            b.insert(".gitignore", blob("build/\n"), 0o100644).unwrap();
            b.insert("a.txt", blob("changed"), 0o100644).unwrap();
            b.insert("new", newdir.write().unwrap(), 0o040000).unwrap();
            b.write().unwrap()
        };

        // Watched paths.
        make();
        let Changes::Paths(paths) = watch.take() else {
            panic!("expected paths")
        };
        let snap = capture_paths(&repo, &paths).unwrap();
        assert_eq!(snap.nested_repos, vec!["new/vendor", "sub"]);
        assert_eq!(snap.tree, expected_tree(&repo));
        let why = snap.rejection().unwrap();
        assert!(why.contains("sub/") && why.contains("new/vendor/"), "{why}");
        reset_paths(&repo, base, None, &paths, true).unwrap();
        watch.settle();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert!(!dir.join("sub").exists() && !dir.join("new").exists());
        assert!(dir.join("build/dep/.git").exists(), "the ignored one stays");

        // A full scan, and a full reset.
        make();
        let snap = capture(&repo).unwrap();
        assert_eq!(snap.nested_repos, vec!["new/vendor", "sub"]);
        assert_eq!(snap.tree, expected_tree(&repo));
        reset(&repo, base, None).unwrap();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert!(!dir.join("sub").exists() && !dir.join("new").exists());
        assert!(dir.join("build/dep/.git").exists(), "the ignored one stays");
        let clean = capture(&repo).unwrap();
        assert!(clean.nested_repos.is_empty() && clean.rejection().is_none());

        // Staged as a gitlink by `git add -A`: taken out of the index all the same.
        make();
        git(dir, &["add", "-A"]);
        assert!(git(dir, &["ls-files", "-s"]).contains("160000"));
        let snap = capture(&repo).unwrap();
        assert_eq!(snap.nested_repos, vec!["new/vendor", "sub"]);
        assert_eq!(snap.tree, expected_tree(&repo));
        reset(&repo, base, None).unwrap();
        assert_eq!(git(dir, &["status", "--porcelain"]), "");
        assert!(!dir.join("sub").exists() && !dir.join("new").exists());
        assert!(!git(dir, &["ls-files", "-s"]).contains("160000"));
    }
}
