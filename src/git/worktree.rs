//! Researcher, review and best worktrees: real `git worktree`s outside the user's working tree.
//!
//! They live under `<git-common-dir>/conference/<name>/worktrees/` (or under the folder named by
//! the git config `conference.worktreesPath`), so the user's tree, index and branches are never
//! touched. Registration goes through the user's `git` once per conference; after that, moving a
//! worktree from one snapshot to another is a checkout of the files that differ (see `snapshot`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use git2::Repository;

use super::git;

/// Git config key naming the folder that holds conference worktrees.
pub const WORKTREES_PATH_KEY: &str = "conference.worktreesPath";

/// Per-conference working folder inside the git dir: lock, logs, prompts.
pub fn run_dir(repo: &Repository, name: &str) -> PathBuf {
    repo.commondir().join("conference").join(name)
}

/// Where the worktree `label` (e.g. `researcher-A`, `review`, `best`) of conference `name` lives.
pub fn worktree_path(repo: &Repository, name: &str, label: &str) -> PathBuf {
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path(WORKTREES_PATH_KEY).ok());
    match configured {
        Some(root) => root.join(name).join(label),
        None => run_dir(repo, name).join("worktrees").join(label),
    }
}

/// What a worktree should have checked out.
pub enum Checkout<'a> {
    /// A branch (short name, e.g. `conference/x/researcher-A`).
    Branch(&'a str),
    /// A detached commit.
    Detached(git2::Oid),
}

/// Makes sure the worktree exists and is registered; re-creates it when it went missing.
/// Returns its path. Does not change the files of an existing worktree, and never deletes any:
/// a folder whose links to the repository broke (the repository or the folder was moved, its
/// registration deleted) is linked again with its files as they are, so that the caller can
/// record what they hold; one that cannot be linked is moved aside, with a warning.
pub fn ensure(repo: &Repository, name: &str, label: &str, checkout: Checkout) -> Result<PathBuf> {
    let path = worktree_path(repo, name, label);
    if usable(&path) {
        return Ok(path);
    }
    let top = repo.commondir().to_path_buf();
    if path.exists() {
        if relink(repo, &path, &checkout).is_ok() && usable(&path) {
            return Ok(path);
        }
        let aside = path.with_file_name(format!("{label}.unlinked-{}", crate::engine::now_unix()));
        std::fs::rename(&path, &aside).with_context(|| {
            format!(
                "worktree {} is broken and could not be moved aside",
                path.display()
            )
        })?;
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "warning: worktree {} could not be linked to the repository again; its files were moved to {} (nothing was deleted) and the worktree is re-created",
            path.display(),
            aside.display()
        );
    }
    // A registration whose folder is gone blocks `worktree add`: prune it first. One left
    // `locked` by an `add` that was killed half-way is not pruned: `--force` twice overrides it.
    let _ = git(&top, &["worktree", "prune"]);
    drop_dead_registration(repo, &path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    add(&top, &path, &checkout, false)?;
    Ok(path)
}

fn usable(path: &Path) -> bool {
    path.join(".git").exists() && Repository::open(path).is_ok()
}

/// `git worktree add` of `checkout` at `path` (`--no-checkout`: registration and HEAD only).
fn add(top: &Path, path: &Path, checkout: &Checkout, no_checkout: bool) -> Result<()> {
    let path_str = path.to_string_lossy().into_owned();
    let mut argv = vec!["worktree", "add", "--force", "--force", "--quiet"];
    if no_checkout {
        argv.push("--no-checkout");
    }
    let commit;
    match checkout {
        Checkout::Branch(branch) => argv.extend([path_str.as_str(), branch]),
        Checkout::Detached(c) => {
            commit = c.to_string();
            argv.extend(["--detach", path_str.as_str(), commit.as_str()]);
        }
    }
    git(top, &argv)?;
    Ok(())
}

/// Links the worktree folder `path`, files untouched, to the repository again: its `.git` file
/// first (deleted by an agent), then both directions with `git worktree repair` (the repository
/// or the folder was moved), and when its registration is gone, a fresh one made at a scratch
/// path without checkout whose `.git` file then moves here. The worktree's index is then empty,
/// so all its files count as changes against HEAD: nothing in it is taken for committed.
fn relink(repo: &Repository, path: &Path, checkout: &Checkout) -> Result<()> {
    let top = repo.commondir().to_path_buf();
    let path_str = path.to_string_lossy().into_owned();
    let _ = repair_gitfile(repo, path);
    let _ = git(&top, &["worktree", "repair", &path_str]);
    if usable(path) {
        return Ok(());
    }
    let scratch = path.with_file_name(format!(
        "{}.relink",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    // Left by a relink killed half-way: it holds nothing but a `.git` file.
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)?;
    }
    let _ = git(&top, &["worktree", "prune"]);
    drop_dead_registration(repo, path);
    add(&top, &scratch, checkout, true)?;
    let moved = std::fs::rename(scratch.join(".git"), path.join(".git"));
    if moved.is_err() {
        // `path/.git` is something else (a folder): drop the scratch registration again.
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = git(&top, &["worktree", "prune"]);
    }
    moved?;
    std::fs::remove_dir(&scratch)?;
    git(&top, &["worktree", "repair", &path_str])?;
    Ok(())
}

/// Removes the registration of the worktree at `path`, which `ensure` found unusable. An `add`
/// killed half-way leaves one without `commondir`, on which every later `worktree add` fails.
fn drop_dead_registration(repo: &Repository, path: &Path) {
    let gitfile = path.join(".git");
    let Ok(entries) = std::fs::read_dir(repo.commondir().join("worktrees")) else {
        return;
    };
    for entry in entries.flatten() {
        let pointer = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
        if Path::new(pointer.trim()) == gitfile {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Removes a worktree (files and registration). Missing ones are fine.
pub fn remove(repo: &Repository, path: &Path) -> Result<()> {
    let top = repo.commondir().to_path_buf();
    if path.exists() {
        let p = path.to_string_lossy().into_owned();
        if git(&top, &["worktree", "remove", "--force", "--force", &p]).is_err() {
            std::fs::remove_dir_all(path)?;
        }
    }
    let _ = git(&top, &["worktree", "prune"]);
    Ok(())
}

/// Repairs the `.git` file of a worktree whose agent deleted it, so it can be opened again.
pub fn repair_gitfile(repo: &Repository, path: &Path) -> Result<()> {
    let gitfile = path.join(".git");
    if gitfile.exists() {
        return Ok(());
    }
    // Each registration's `gitdir` file names the worktree's `.git`: find the one pointing here.
    let admin_root = repo.commondir().join("worktrees");
    for entry in std::fs::read_dir(&admin_root)?.flatten() {
        let pointer = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
        if Path::new(pointer.trim()) == gitfile {
            std::fs::write(&gitfile, format!("gitdir: {}\n", entry.path().display()))?;
            return Ok(());
        }
    }
    anyhow::bail!("worktree {} lost its registration", path.display())
}
