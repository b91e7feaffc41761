//! Researcher, review and best worktrees: real `git worktree`s outside the user's working tree.
//!
//! They live outside any `.git` directory, in a folder next to the repository:
//! `<repo-parent>/<repo-name>.conference/<name>/<label>` (or `<conference.worktreesPath>/<name>/`
//! when that git config is set), so the user's tree, index and branches are never touched, and
//! agent CLIs that protect `.git` (Claude Code, Codex's sandbox) let the agent edit there. The
//! folder a conference uses is recorded in its run folder when its first worktree is made, so
//! changing the setting later never loses a conference's worktrees; a conference made before
//! that record existed keeps the folder it had (`<git-common-dir>/conference/<name>/worktrees`). Registration goes through the user's `git` once per conference; after that, moving a
//! worktree from one snapshot to another is a checkout of the files that differ (see `snapshot`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use anyhow::{Context, Result};
use git2::Repository;

use super::git;

/// Git config key naming the folder that holds conference worktrees.
pub const WORKTREES_PATH_KEY: &str = "conference.worktreesPath";

/// `git worktree add` and `prune` read every registration under `.git/worktrees`, and `prune`
/// deletes one that lacks its files: run at once, as researchers making their sweeps' variant
/// worktrees do, an `add` fails on another's half-made registration ("failed to read
/// worktrees/sweep-D-3/commondir") or a `prune` deletes it. This process makes and removes
/// registrations one at a time.
static REGISTRATIONS: Mutex<()> = Mutex::new(());

/// Holds the registrations for one `ensure` or `remove` (a panic elsewhere does not poison it:
/// git's own files are the state).
fn registrations() -> MutexGuard<'static, ()> {
    REGISTRATIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Per-conference working folder inside the git dir: lock, logs, prompts.
pub fn run_dir(repo: &Repository, name: &str) -> PathBuf {
    repo.commondir().join("conference").join(name)
}

/// The file of the run folder that records where a conference's worktrees live.
const ROOT_RECORD: &str = "worktrees-root";

/// Where the worktree `label` (e.g. `researcher-A`, `review`, `best`) of conference `name` lives.
pub fn worktree_path(repo: &Repository, name: &str, label: &str) -> PathBuf {
    worktrees_root(repo, name).join(label)
}

/// Whether conference `name`'s worktree folder was chosen in this repository (recorded, or the
/// folder inside the git dir older conferences used): a conference that only arrived by fetch
/// has none until it runs here.
pub fn made_here(repo: &Repository, name: &str) -> bool {
    let run = run_dir(repo, name);
    run.join(ROOT_RECORD).is_file() || run.join("worktrees").is_dir()
}

/// The folder holding conference `name`'s worktrees: the recorded one; else the folder inside
/// the git dir that conferences made before the record used, when it exists; else the folder
/// `conference.worktreesPath` names; else the default next to the repository.
pub fn worktrees_root(repo: &Repository, name: &str) -> PathBuf {
    let run = run_dir(repo, name);
    if let Ok(text) = std::fs::read_to_string(run.join(ROOT_RECORD)) {
        if !text.trim().is_empty() {
            return PathBuf::from(text.trim());
        }
    }
    let old = run.join("worktrees");
    if old.exists() {
        return old;
    }
    unrecorded_root(repo, name)
}

/// Where conference `name`'s worktrees go when none is recorded: the configured folder, else the
/// default one next to the repository.
fn unrecorded_root(repo: &Repository, name: &str) -> PathBuf {
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path(WORKTREES_PATH_KEY).ok());
    match configured {
        Some(root) => root.join(name),
        None => default_root(repo).join(name),
    }
}

/// `<repo-parent>/<repo-name>.conference`: next to the repository's working tree (or next to a
/// bare repository), on the same file system, visible, and outside every `.git`.
pub fn default_root(repo: &Repository) -> PathBuf {
    let common = repo.commondir();
    let top = if common.file_name().is_some_and(|n| n == ".git") {
        common.parent().unwrap_or(common)
    } else {
        common
    };
    let top = top.canonicalize().unwrap_or_else(|_| top.to_path_buf());
    let stem = top
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".git").to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "repository".into());
    top.parent()
        .unwrap_or(&top)
        .join(format!("{stem}.conference"))
}

/// The folder of conference `name`'s worktrees, recorded (once) so that later runs find them
/// there whatever the settings say then. When the folder cannot be made (a read-only parent
/// folder), a new conference falls back to the folder inside the git dir, with a warning.
fn choose_root(repo: &Repository, name: &str) -> Result<PathBuf> {
    let run = run_dir(repo, name);
    let record = run.join(ROOT_RECORD);
    let mut root = worktrees_root(repo, name);
    if record.exists() {
        return Ok(root);
    }
    if let Err(e) = std::fs::create_dir_all(&root) {
        let fallback = run.join("worktrees");
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "warning: cannot make the worktree folder {} ({e}); using {} instead (agent CLIs may refuse to edit there: set `git config {WORKTREES_PATH_KEY} <dir>`)",
            root.display(),
            fallback.display()
        );
        root = fallback;
    }
    std::fs::create_dir_all(&run)?;
    std::fs::write(record, format!("{}\n", root.display()))?;
    Ok(root)
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
    let root = choose_root(repo, name)?;
    let path = root.join(label);
    if usable(repo, &path) {
        return Ok(path);
    }
    let _registrations = registrations();
    let top = repo.commondir().to_path_buf();
    if used_by_another_repository(repo, &path) {
        anyhow::bail!(
            "{} is a worktree of another repository (this one was copied?); `git conference \
             resume {name}` makes this repository its own",
            path.display()
        );
    }
    if path.exists() {
        if relink(repo, &path, &checkout).is_ok() && usable(repo, &path) {
            return Ok(path);
        }
        let aside = path.with_file_name(format!("{label}.unlinked-{}", crate::clock::now_unix()));
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

/// The folder is a worktree of this repository (not of a copy or of the original it was copied
/// from: both have worktrees with the same names).
fn usable(repo: &Repository, path: &Path) -> bool {
    path.join(".git").exists()
        && Repository::open(path).is_ok_and(|wt| same_dir(wt.commondir(), repo.commondir()))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Where the worktree at `path` says its registration is (its `.git` file), when it says.
fn registration_named_by(path: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(path.join(".git")).ok()?;
    Some(PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim()))
}

/// Whether the folder at `path` is a worktree of this repository, linked both ways: its `.git`
/// file names a registration under this repository's `.git/worktrees`, and that registration's
/// `gitdir` names the folder back (or the folder lost its `.git` file and a registration of
/// this repository names it). A copy of a repository has registrations naming the original's
/// folders, and those folders name the original: they are never the copy's to remove.
pub fn belongs_here(repo: &Repository, path: &Path) -> bool {
    let gitfile = path.join(".git");
    let ours = repo.commondir().join("worktrees");
    let names_back = |admin: &Path| {
        let back = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
        same_dir(Path::new(back.trim()), &gitfile)
    };
    match registration_named_by(path) {
        Some(admin) => admin.parent().is_some_and(|p| same_dir(p, &ours)) && names_back(&admin),
        None if std::fs::symlink_metadata(&gitfile).is_err() => std::fs::read_dir(&ours)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| names_back(&e.path())),
        None => false,
    }
}

/// A worktree folder that another repository still uses: its `.git` names a registration of
/// that repository, and that registration names this folder back.
fn used_by_another_repository(repo: &Repository, path: &Path) -> bool {
    let Some(admin) = registration_named_by(path) else {
        return false;
    };
    let ours = repo.commondir().join("worktrees");
    if admin.parent().is_some_and(|p| same_dir(p, &ours)) {
        return false;
    }
    let back = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
    same_dir(Path::new(back.trim()), &path.join(".git"))
}

/// Before anything runs on a repository that was moved or copied while the conference was
/// paused, its worktrees are made its own again. Moved: each worktree is linked to the
/// repository where it is now (what `git worktree repair` does, done here because `repair` of
/// a folder another repository uses re-points *that* repository's registration). Copied while
/// the original still exists: the recorded folder holds the original's worktrees, which are
/// never touched; this copy's registrations of them are dropped and its worktrees are made in
/// its own folder. Returns what was done, for the user.
pub fn make_worktrees_own(repo: &Repository, name: &str) -> Result<Option<String>> {
    let run = run_dir(repo, name);
    let record = run.join(ROOT_RECORD);
    if !record.is_file() {
        return Ok(None);
    }
    let root = worktrees_root(repo, name);
    let labels: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.join(".git").is_file())
                .collect()
        })
        .unwrap_or_default();
    let foreign = labels.iter().any(|p| used_by_another_repository(repo, p));
    let fresh = unrecorded_root(repo, name);
    let moved_away = !root.exists() && fresh.is_dir() && !same_dir(&fresh, &root);
    if !foreign && !moved_away {
        for path in labels.iter().filter(|p| !usable(repo, p)) {
            let _ = link_both_ways(repo, path);
        }
        return Ok(None);
    }
    let new_root = if same_dir(&fresh, &root) {
        run.join("worktrees")
    } else {
        fresh
    };
    // Moved together with the repository: linked below, as `ensure` finds each one.
    if foreign {
        drop_registrations_under(repo, &root);
    }
    std::fs::write(&record, format!("{}\n", new_root.display()))?;
    Ok(Some(if foreign {
        format!(
            "this repository is a copy: the worktrees in {} belong to the original and are left to \
             it; this copy's are made in {}",
            root.display(),
            new_root.display()
        )
    } else {
        format!(
            "the worktree folder moved with the repository: {} is used instead of {}",
            new_root.display(),
            root.display()
        )
    }))
}

/// Removes this repository's registrations of worktrees under `root` (its own `.git/worktrees`
/// entries only; the folders stay).
fn drop_registrations_under(repo: &Repository, root: &Path) {
    let Ok(entries) = std::fs::read_dir(repo.commondir().join("worktrees")) else {
        return;
    };
    for entry in entries.flatten() {
        let pointer = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
        if Path::new(pointer.trim()).starts_with(root) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Links the worktree folder `path` and this repository's registration of it to each other: the
/// registration whose `gitdir` names `path/.git`, else the one the folder's `.git` names by its
/// id when no other live folder uses it.
fn link_both_ways(repo: &Repository, path: &Path) -> Result<()> {
    let admin_root = repo.commondir().join("worktrees");
    let gitfile = path.join(".git");
    let by_pointer = std::fs::read_dir(&admin_root)?
        .flatten()
        .map(|e| e.path())
        .find(|admin| {
            let pointer = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
            same_dir(Path::new(pointer.trim()), &gitfile)
        });
    let by_id = || {
        let id = registration_named_by(path)?.file_name()?.to_owned();
        let admin = admin_root.join(id);
        let pointer = std::fs::read_to_string(admin.join("gitdir")).ok()?;
        let other = Path::new(pointer.trim());
        (!other.exists() || same_dir(other, &gitfile)).then_some(admin)
    };
    let admin = by_pointer
        .or_else(by_id)
        .with_context(|| format!("no registration of worktree {}", path.display()))?;
    if gitfile.is_file() || !gitfile.exists() {
        std::fs::write(&gitfile, format!("gitdir: {}\n", admin.display()))?;
    }
    std::fs::write(admin.join("gitdir"), format!("{}\n", gitfile.display()))?;
    Ok(())
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
/// first (deleted by an agent), then both directions as `git worktree repair` would (the repository
/// or the folder was moved), and when its registration is gone, a fresh one made at a scratch
/// path without checkout whose `.git` file then moves here. The worktree's index is then empty,
/// so all its files count as changes against HEAD: nothing in it is taken for committed.
fn relink(repo: &Repository, path: &Path, checkout: &Checkout) -> Result<()> {
    let top = repo.commondir().to_path_buf();
    if used_by_another_repository(repo, path) {
        anyhow::bail!("{} is a worktree of another repository", path.display());
    }
    let _ = repair_gitfile(repo, path);
    let _ = link_both_ways(repo, path);
    if usable(repo, path) {
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
    link_both_ways(repo, path)
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
    let _registrations = registrations();
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
