//! What an agent may break in git outside its files, noticed after each run and repaired.
//!
//! An agent runs with the user's rights in a worktree of the user's repository: it can delete
//! the worktree, overwrite its `.git` link, move the conference's event log with `git
//! update-ref`, or set `core.hooksPath` in the repository's config. None of that may end the
//! conference or be used by it afterwards. Each is checked after the agent's run, put back, and
//! named in the attempt's reason (the attempt is rejected); the conference goes on.
//!
//! - **The worktree** ([`worktree_damage`]): gone (folder or registration) means it is made
//!   again from the researcher's branch; a `.git` that no longer links to its registration is
//!   written again.
//! - **The repository's config** ([`ConfigGuard`]): the local `config` file is taken before the
//!   first agent runs; after each agent, the keys it changed are put back one by one
//!   ([`merge_back`]): keys the file had get their values back, keys added where git or the
//!   conference would act on them (`core.*`, `alias.*`, `filter.*`, …) go, and anything else
//!   added meanwhile (a remote the user adds during the run) stays. Conference runs themselves
//!   never write the local config while agents run. While agents run, a copy waits in the run
//!   folder (`config.before-agents`): a runner killed meanwhile cannot check, so the next one
//!   ([`recover_config`], from `reconcile`) merges it back the same way, keeping the changed
//!   file next to it (`config.changed-by-agent`).
//! - **The best branch**: only the review and the transfer move it, never while researchers run,
//!   so it must be where the state says; it is put back otherwise.
//! - **The event log ref**: the recorder knows the tip it wrote last and is the only writer
//!   while the run lock is held. [`events_ref_in_place`] puts the ref back before each append (so
//!   another researcher's record never fails on it) and after each agent run; a move it undid is
//!   charged to the next agent to finish.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use git2::{Oid, Repository};

use crate::engine::Conference;
use crate::model::CommitId;

/// Moves of the event log ref undone since the last agent finished.
static UNDONE_MOVES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The local config as it was before agents ran: (path, bytes; None when there was none).
static CONFIG: Mutex<Option<(PathBuf, Option<Vec<u8>>)>> = Mutex::new(None);
/// Agents running now, and the run folder's copy of the kept config while there are any.
static RUNNING: Mutex<(usize, Option<PathBuf>)> = Mutex::new((0, None));
/// The kept config's copy in the run folder, present while agents run.
const BEFORE_AGENTS: &str = "config.before-agents";
const CHANGED_BY_AGENT: &str = "config.changed-by-agent";

/// How an agent left its worktree.
#[derive(Debug, PartialEq, Eq)]
pub enum WorktreeDamage {
    /// The folder or its registration is gone: make the worktree again.
    Lost(String),
    /// The `.git` link was overwritten; it has been written again.
    Relinked(String),
}

/// Checks the worktree at `path` whose registration `wt` was opened on; rewrites a broken
/// `.git` link. None: intact.
pub fn worktree_damage(wt: &Repository, path: &Path) -> Option<WorktreeDamage> {
    let admin = wt.path().to_path_buf();
    if !path.is_dir() || !admin.join("HEAD").exists() {
        return Some(WorktreeDamage::Lost(
            "removed its worktree (the folder or its git registration): made again from the \
             researcher's branch"
                .into(),
        ));
    }
    let gitfile = path.join(".git");
    let text = std::fs::read_to_string(&gitfile).unwrap_or_default();
    let linked = text
        .trim()
        .strip_prefix("gitdir:")
        .map(|d| same_dir(Path::new(d.trim()), &admin))
        .unwrap_or(false);
    if linked {
        return None;
    }
    let relinked = remove(&gitfile).is_ok()
        && std::fs::write(&gitfile, format!("gitdir: {}\n", admin.display())).is_ok();
    Some(if relinked {
        WorktreeDamage::Relinked(
            "overwrote its worktree's .git link to the repository: written again".into(),
        )
    } else {
        WorktreeDamage::Lost(
            "broke its worktree's .git link beyond repair: made again from the researcher's \
             branch"
                .into(),
        )
    })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    }
}

/// The repository's local config, kept as it was before agents ran.
pub struct ConfigGuard;

impl ConfigGuard {
    /// Takes the local config of `repo` as the one to keep (once per run; later calls keep the
    /// first), before an agent runs; a copy waits in `run_dir` until no agent runs.
    pub fn take(repo: &Repository, run_dir: &Path) {
        let mut kept = CONFIG.lock().unwrap();
        if kept.is_none() {
            let path = repo.commondir().join("config");
            *kept = Some((path.clone(), std::fs::read(&path).ok()));
        }
        let mut running = RUNNING.lock().unwrap();
        if running.0 == 0 {
            if let Some((_, Some(bytes))) = kept.as_ref() {
                let copy = run_dir.join(BEFORE_AGENTS);
                if write_atomic(&copy, bytes).is_ok() {
                    running.1 = Some(copy);
                }
            }
        }
        running.0 += 1;
    }

    /// After an agent ran: writes the kept config back when it differs; says what changed.
    pub fn restore() -> Option<String> {
        let why = Self::put_back();
        let mut running = RUNNING.lock().unwrap();
        running.0 = running.0.saturating_sub(1);
        if running.0 == 0 {
            if let Some(copy) = running.1.take() {
                let _ = std::fs::remove_file(copy);
            }
        }
        why
    }

    fn put_back() -> Option<String> {
        let kept = CONFIG.lock().unwrap();
        let (path, before) = kept.as_ref()?;
        let now = std::fs::read(path).ok();
        if now == *before {
            return None;
        }
        let Some(before) = before else {
            // There was no local config: the agent made one.
            return Some(match std::fs::remove_file(path) {
                Ok(()) => "made a git config for the repository: removed".into(),
                Err(e) => {
                    format!("made a git config for the repository, which could not be removed: {e}")
                }
            });
        };
        // Key by key, not the whole file: a remote the user added meanwhile stays.
        let copy = path.with_extension("conference-kept");
        let merged = write_atomic(&copy, before)
            .map_err(|e| e.to_string())
            .and_then(|_| {
                merge_back(path, &copy, Merge::AfterAgent).map_err(|e| e.message().to_string())
            });
        let _ = std::fs::remove_file(&copy);
        match merged {
            Ok(changes) => {
                let charged: Vec<String> =
                    changes.into_iter().filter(|c| !is_identity(c)).collect();
                (!charged.is_empty()).then(|| {
                    format!(
                        "changed the repository's git config ({}): put back",
                        summary(charged)
                    )
                })
            }
            Err(e) => Some(format!(
                "changed the repository's git config, and it could not be put back: {e}"
            )),
        }
    }
}

/// Whether a change (see [`merge_back`]) is to `user.name`/`user.email`: aider, for one, writes
/// a placeholder identity into the repository's config when git has none. That runs nothing
/// and tells the conference nothing, so it is put back without charging the attempt.
fn is_identity(change: &str) -> bool {
    let key = change.strip_prefix("removed ").unwrap_or(change);
    key.starts_with("user.name") || key.starts_with("user.email")
}

/// The first few changes, for a reason.
fn summary(mut changes: Vec<String>) -> String {
    let more = changes.len().saturating_sub(3);
    changes.truncate(3);
    let mut text = changes.join("; ");
    if more > 0 {
        text.push_str(&format!("; {more} more"));
    }
    text
}

/// A runner killed while an agent ran left the config it kept in `run_dir`. The config may have
/// changed twice since: by the agent, and by the user while the conference was stopped (a remote
/// added, `trust`). So it is not written back whole: every key the copy had is put back as it was
/// (except the identity and approvals), and keys added since are removed only where git or the
/// conference would act on them (`core.*`, `alias.*`, `filter.*`, `include.*`, …). The changed
/// file is kept as `config.changed-by-agent`. Says what it did.
pub fn recover_config(repo: &Repository, run_dir: &Path) -> Option<String> {
    let copy = run_dir.join(BEFORE_AGENTS);
    let before = std::fs::read(&copy).ok()?;
    let path = repo.commondir().join("config");
    let now = std::fs::read(&path).ok();
    let said = if now.as_deref() == Some(&before[..]) {
        None
    } else {
        let aside = run_dir.join(CHANGED_BY_AGENT);
        let saved = now.map_or(Ok(()), |bytes| std::fs::write(&aside, bytes));
        let merged = saved.map_err(|e| e.to_string()).and_then(|_| {
            merge_back(&path, &copy, Merge::AfterKilledRun).map_err(|e| e.message().to_string())
        });
        match merged {
            Ok(keys) if keys.is_empty() => None,
            Ok(keys) => Some(format!(
                "the repository's git config changed while an agent ran and the runner was killed \
                 ({}): put back as it was before the agent (the changed file is {})",
                keys.join("; "),
                aside.display()
            )),
            Err(e) => Some(format!(
                "the repository's git config changed while an agent ran and the runner was killed; \
                 it could not be put back: {e}"
            )),
        }
    };
    let _ = std::fs::remove_file(&copy);
    said
}

/// Config sections through which git or the conference runs something or sends data elsewhere.
fn acts_on(key: &str) -> bool {
    let section = key.split('.').next().unwrap_or("").to_ascii_lowercase();
    let acting = [
        "core",
        "include",
        "includeif",
        "filter",
        "diff",
        "merge",
        "alias",
        "credential",
        "url",
        "http",
        "gpg",
        "sequence",
        "pager",
        "protocol",
        "conference",
    ];
    acting.contains(&section.as_str()) && !user_owned(key, Merge::AfterKilledRun)
}

/// Keys the user sets between runs that no agent change could make dangerous: after a killed
/// run they stay as they are. Right after an agent ran, only approvals do (an identity written
/// then is the agent's).
fn user_owned(key: &str, when: Merge) -> bool {
    let k = key.to_ascii_lowercase();
    let approval = k.starts_with("conference.") && k.ends_with(".trusted");
    approval || (when == Merge::AfterKilledRun && k.starts_with("user."))
}

fn entries(config: &git2::Config) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    if let Ok(mut it) = config.entries(None) {
        while let Some(Ok(e)) = it.next() {
            if let (Some(name), Some(value)) = (e.name(), e.value()) {
                out.entry(name.to_string())
                    .or_default()
                    .push(value.to_string());
            }
        }
    }
    out
}

/// When [`merge_back`] runs: right after an agent, or on resume after a runner killed while
/// agents ran (the user may have changed the config meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Merge {
    AfterAgent,
    AfterKilledRun,
}

/// Puts back into the config file at `path` what the copy at `before` had: every key it had
/// (except the user's own, see [`user_owned`]), and removes keys added since where git or the
/// conference would act on them (or the identity, right after an agent). Keys added elsewhere
/// (a remote) stay. Returns the changes it undid, as the agent made them: `core.hookspath =
/// /tmp/h`, `core.filemode = false (was true)`, `removed core.filemode (was true)`.
fn merge_back(path: &Path, before: &Path, when: Merge) -> Result<Vec<String>, git2::Error> {
    let was = entries(&git2::Config::open(before)?);
    let mut config = git2::Config::open(path)?;
    let is = entries(&config);
    let mut changed = Vec::new();
    for (key, values) in &was {
        if is.get(key) == Some(values) || user_owned(key, when) {
            continue;
        }
        let _ = config.remove_multivar(key, ".*");
        for v in values {
            config.set_multivar(key, "^\\b$never", v)?;
        }
        changed.push(match is.get(key) {
            Some(now) => format!("{key} = {} (was {})", now.join(", "), values.join(", ")),
            None => format!("removed {key} (was {})", values.join(", ")),
        });
    }
    let added = |k: &&String| {
        !was.contains_key(*k)
            && (acts_on(k)
                || (when == Merge::AfterAgent && !user_owned(k, when) && k.starts_with("user.")))
    };
    for key in is.keys().filter(added) {
        config.remove_multivar(key, ".*")?;
        changed.push(format!("{key} = {}", is[key].join(", ")));
    }
    drop(config);
    if !changed.is_empty() {
        drop_emptied_sections(path, before);
    }
    Ok(changed)
}

/// Removes the section headers left with nothing under them (git keeps `[alias]` when its last
/// key goes), except those that were empty in `before` too.
fn drop_emptied_sections(path: &Path, before: &Path) {
    let (Ok(text), Ok(was)) = (
        std::fs::read_to_string(path),
        std::fs::read_to_string(before),
    ) else {
        return;
    };
    let is_header = |l: &str| l.trim_start().starts_with('[');
    let lines: Vec<&str> = text.lines().collect();
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, line)| {
            let empty = is_header(line)
                && lines[i + 1..]
                    .iter()
                    .take_while(|l| !is_header(l))
                    .all(|l| l.trim().is_empty());
            !empty || was.lines().any(|w| w.trim() == line.trim())
        })
        .map(|(_, line)| *line)
        .collect();
    if kept.len() != lines.len() {
        let _ = write_atomic(path, format!("{}\n", kept.join("\n")).as_bytes());
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("conference-restore");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Puts the event log ref `name` back at `tip` (the last event this run wrote) when something
/// else moved or deleted it; the move is kept to be named in the next agent's attempt.
pub fn events_ref_in_place(repo: &Repository, name: &str, tip: Option<Oid>) {
    let Some(tip) = tip else { return };
    let current = repo.refname_to_id(name).ok();
    if current == Some(tip) {
        return;
    }
    let put_back = repo
        .reference(
            name,
            tip,
            true,
            "git conference: undo a move of the event log",
        )
        .is_ok();
    let moved = match current {
        Some(id) => format!("moved {name} to {id}"),
        None => format!("deleted {name}"),
    };
    let what = if put_back {
        format!("{moved}: put back")
    } else {
        format!("{moved}, and it could not be put back")
    };
    UNDONE_MOVES.lock().unwrap().push(what);
}

/// Puts the best branch back at `expected` (the state's best: only the review and transfer
/// move it, never while researchers run); says what moved.
fn best_in_place(repo: &Repository, name: &str, expected: &CommitId) -> Option<String> {
    let expected = expected.oid();
    let current = repo.refname_to_id(name).ok();
    if current == Some(expected) {
        return None;
    }
    let moved = match current {
        Some(id) => format!("moved {name} to {id}"),
        None => format!("deleted {name}"),
    };
    Some(
        match repo.reference(
            name,
            expected,
            true,
            "git conference: undo a move of the best branch",
        ) {
            Ok(_) => format!("{moved}: put back"),
            Err(e) => format!("{moved}, and it could not be put back: {e}"),
        },
    )
}

/// After an agent ran: the event log ref and the local config checked and put back. Returns
/// why the attempt is rejected (None: nothing was touched).
pub fn repair_after_agent(conf: &Conference) -> Option<String> {
    let (best, notes) = {
        let rec = conf.recorder.lock().unwrap();
        events_ref_in_place(&rec.repo, &conf.refs.events(), rec.log.tip());
        let best = best_in_place(&rec.repo, &conf.refs.best(), &rec.state.best.commit);
        (best, crate::store::notes::put_back_if_lost(&rec.repo))
    };
    let mut reasons: Vec<String> = std::mem::take(&mut *UNDONE_MOVES.lock().unwrap());
    reasons.extend(best);
    // Undone by the notes writer on its own (deleted while it wrote), or here.
    reasons.extend(crate::store::notes::take_undone());
    reasons.extend(notes);
    reasons.extend(ConfigGuard::restore());
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Writes `before` and `now` as config files and merges back; returns the changes undone
    /// and the config's entries afterwards.
    fn merge(before: &str, now: &str, when: Merge) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
        let dir = tempfile::tempdir().unwrap();
        let (kept, path) = (dir.path().join("before"), dir.path().join("config"));
        std::fs::write(&kept, before).unwrap();
        std::fs::write(&path, now).unwrap();
        let changed = merge_back(&path, &kept, when).unwrap();
        (changed, entries(&git2::Config::open(&path).unwrap()))
    }

    const BEFORE: &str = "[core]\n\tbare = false\n\tfilemode = true\n";
    const AFTER: &str = "[core]\n\tbare = false\n\thooksPath = /tmp/h\n[remote \"origin\"]\n\turl = \
                         ../r.git\n[conference \"x\"]\n\ttrusted = abc\n[user]\n\tname = Your Name\n";

    /// Right after an agent: its keys go, as the agent set them in the reason; the user's
    /// remote and approval stay; the identity it wrote goes too.
    #[test]
    fn an_agents_config_changes_are_undone_key_by_key() {
        let (changed, now) = merge(BEFORE, AFTER, Merge::AfterAgent);
        assert_eq!(
            changed,
            [
                "removed core.filemode (was true)",
                "core.hookspath = /tmp/h",
                "user.name = Your Name"
            ]
        );
        assert_eq!(now["remote.origin.url"], ["../r.git"]);
        assert_eq!(now["conference.x.trusted"], ["abc"]);
        assert_eq!(now["core.filemode"], ["true"]);
        assert!(!now.contains_key("core.hookspath") && !now.contains_key("user.name"));
        let (changed, _) = merge(BEFORE, &BEFORE.replace("true", "false"), Merge::AfterAgent);
        assert_eq!(changed, ["core.filemode = false (was true)"]);
        assert_eq!(
            merge(BEFORE, BEFORE, Merge::AfterAgent).0,
            Vec::<String>::new()
        );
    }

    /// After a killed run, the identity is the user's (set while the conference was stopped).
    #[test]
    fn a_killed_runs_config_is_merged_back_not_overwritten() {
        let (changed, now) = merge(BEFORE, AFTER, Merge::AfterKilledRun);
        assert_eq!(
            changed,
            [
                "removed core.filemode (was true)",
                "core.hookspath = /tmp/h"
            ]
        );
        assert_eq!(now["user.name"], ["Your Name"]);
        assert_eq!(now["remote.origin.url"], ["../r.git"]);
    }

    /// aider writes a placeholder identity when git has none: put back, not charged.
    #[test]
    fn only_an_identity_change_is_not_charged() {
        assert!(is_identity("user.name = Your Name"));
        assert!(is_identity("removed user.email (was a@b)"));
        assert!(!is_identity("core.hookspath = /tmp/h"));
    }

    /// A worktree whose `.git` was overwritten is linked again; one whose folder is gone is lost.
    #[test]
    fn worktree_links_are_checked_and_rewritten() {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join("main");
        let repo = Repository::init(&main).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .unwrap();
        let path = tmp.path().join("wt");
        repo.worktree("wt", &path, None).unwrap();
        let wt = Repository::open(&path).unwrap();
        assert_eq!(worktree_damage(&wt, &path), None);
        std::fs::write(path.join(".git"), "garbage").unwrap();
        assert!(matches!(
            worktree_damage(&wt, &path),
            Some(WorktreeDamage::Relinked(_))
        ));
        assert_eq!(worktree_damage(&wt, &path), None);
        assert!(Repository::open(&path).is_ok());
        std::fs::remove_dir_all(&path).unwrap();
        assert!(matches!(
            worktree_damage(&wt, &path),
            Some(WorktreeDamage::Lost(_))
        ));
    }
}
