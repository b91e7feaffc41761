//! Traces an agent can leave in the user's repository outside its worktree: branches
//! (`git checkout -b x`), tags, and stash entries (`git stash` in a worktree writes the shared
//! `refs/stash`). Preventing them needs a sandbox; noticing them is cheap, so the user is told.
//!
//! Only the refs files of those namespaces are read (`packed-refs`, re-read only when it
//! changed, and the loose refs under `refs/heads` and `refs/tags` and `refs/stash`), never an
//! object, so a check costs the same on a large repository. Every conference's own branches
//! (`refs/heads/conference/…`) are left out: other conferences move theirs all the time. A
//! repository on the reftable backend is not checked.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The refs outside the conferences' namespaces: name → value (an id, or `ref: …`). The packed
/// ones are shared with the cache, so that two reads of an unchanged `packed-refs` compare by
/// pointer, and only the (few) loose refs are compared one by one.
#[derive(Debug, Clone, Default)]
pub struct Refs {
    packed: Arc<BTreeMap<String, String>>,
    loose: BTreeMap<String, String>,
    /// False when they cannot be read this way (reftable): nothing is reported then.
    readable: bool,
}

const NAMESPACES: [&str; 3] = ["refs/heads/", "refs/tags/", "refs/stash"];
const CONFERENCE_BRANCHES: &str = "refs/heads/conference/";

/// `packed-refs` parsed, with the (length, mtime, inode) it was parsed at.
type PackedCache = Option<(PathBuf, Stamp, Arc<BTreeMap<String, String>>)>;
type Stamp = (u64, std::time::SystemTime, u64);
static PACKED: Mutex<PackedCache> = Mutex::new(None);
/// Changes already reported (ref, new value): researchers run in parallel, and a change made
/// while two agents ran is reported once.
static REPORTED: Mutex<Option<HashSet<Reported>>> = Mutex::new(None);
/// A ref and the value it was reported at.
type Reported = (String, Option<String>);

fn watched(name: &str) -> bool {
    NAMESPACES
        .iter()
        .any(|ns| name.starts_with(ns) || name == *ns)
        && !name.starts_with(CONFERENCE_BRANCHES)
}

/// Reads the refs outside the conferences' namespaces of the repository whose common git dir
/// is `common_dir`.
pub fn read(common_dir: &Path) -> Refs {
    if common_dir.join("reftable").is_dir() {
        return Refs::default();
    }
    let mut loose_refs = BTreeMap::new();
    for top in ["refs/heads", "refs/tags"] {
        loose(common_dir, Path::new(top), &mut loose_refs);
    }
    if let Ok(value) = std::fs::read_to_string(common_dir.join("refs/stash")) {
        loose_refs.insert("refs/stash".into(), value.trim().to_string());
    }
    Refs {
        packed: packed(common_dir),
        loose: loose_refs,
        readable: true,
    }
}

fn packed(common_dir: &Path) -> Arc<BTreeMap<String, String>> {
    let path = common_dir.join("packed-refs");
    let Ok(meta) = std::fs::metadata(&path) else {
        return Arc::default();
    };
    use std::os::unix::fs::MetadataExt;
    let stamp = (
        meta.len(),
        meta.modified().unwrap_or(std::time::UNIX_EPOCH),
        meta.ino(),
    );
    let mut cache = PACKED.lock().unwrap();
    if let Some((p, s, refs)) = cache.as_ref() {
        if *p == path && *s == stamp {
            return Arc::clone(refs);
        }
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let refs: Arc<BTreeMap<String, String>> = Arc::new(
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, name)| watched(name))
            .map(|(id, name)| (name.to_string(), id.to_string()))
            .collect(),
    );
    *cache = Some((path, stamp, Arc::clone(&refs)));
    refs
}

/// Loose refs under `rel` (a folder of `common_dir`), over the packed ones.
fn loose(common_dir: &Path, rel: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(common_dir.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = rel.join(entry.file_name());
        let name_text = name.to_string_lossy();
        if name_text.ends_with(".lock") {
            continue;
        }
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_dir {
            if format!("{name_text}/") != CONFERENCE_BRANCHES {
                loose(common_dir, &name, out);
            }
        } else if watched(&name_text) {
            if let Ok(value) = std::fs::read_to_string(entry.path()) {
                out.insert(name_text.into_owned(), value.trim().to_string());
            }
        }
    }
}

/// One ref that changed: its name, and its value before and after (None: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefChange {
    pub name: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

impl RefChange {
    /// What happened, in a few words: `refs/heads/x was created at 1a2b3c4d5e`.
    pub fn describe(&self) -> String {
        let short = |v: &Option<String>| {
            v.as_deref()
                .map(|v| v.chars().take(10).collect::<String>())
                .unwrap_or_default()
        };
        match (&self.old, &self.new) {
            (None, _) => format!("{} was created at {}", self.name, short(&self.new)),
            (_, None) => format!("{} was deleted (it was {})", self.name, short(&self.old)),
            _ => format!(
                "{} moved from {} to {}",
                self.name,
                short(&self.old),
                short(&self.new)
            ),
        }
    }

    /// The command that puts it back.
    pub fn undo(&self) -> String {
        let short_name = self
            .name
            .strip_prefix("refs/heads/")
            .or_else(|| self.name.strip_prefix("refs/tags/"))
            .unwrap_or(&self.name);
        let tag = self.name.starts_with("refs/tags/");
        match (&self.old, self.name.as_str()) {
            (_, "refs/stash") => "`git stash list`, then `git stash drop` the entry".into(),
            (None, _) if tag => format!("`git tag -d {short_name}`"),
            (None, _) => format!("`git branch -D {short_name}`"),
            (Some(old), _) if tag => format!("`git tag -f {short_name} {old}`"),
            (Some(old), _) => format!("`git update-ref {} {old}`", self.name),
        }
    }
}

impl Refs {
    /// A ref's value: the loose file wins over packed-refs, as in git.
    fn get(&self, name: &str) -> Option<&String> {
        self.loose.get(name).or_else(|| self.packed.get(name))
    }

    fn all_names(&self) -> impl Iterator<Item = &String> {
        self.packed.keys().chain(self.loose.keys())
    }

    /// What changed from `self` to `now` and was not reported yet (each change once per run of
    /// the program, whichever researcher's check sees it first).
    pub fn new_changes(&self, now: &Refs) -> Vec<RefChange> {
        if !self.readable || !now.readable {
            return Vec::new();
        }
        // Unchanged packed refs: only names that are loose on either side can differ.
        let mut names: Vec<&String> = if Arc::ptr_eq(&self.packed, &now.packed) {
            self.loose.keys().chain(now.loose.keys()).collect()
        } else {
            self.all_names().chain(now.all_names()).collect()
        };
        names.sort();
        names.dedup();
        let mut reported = REPORTED.lock().unwrap();
        let reported = reported.get_or_insert_with(HashSet::new);
        names
            .into_iter()
            .filter_map(|name| {
                let (old, new) = (self.get(name), now.get(name));
                (old != new).then(|| RefChange {
                    name: name.clone(),
                    old: old.cloned(),
                    new: new.cloned(),
                })
            })
            .filter(|c| reported.insert((c.name.clone(), c.new.clone())))
            .collect()
    }
}

/// Warning lines for what changed in the user's refs since `before`, while researcher `id`'s
/// agent ran (the caller's window; with parallel researchers, any of them may have done it).
///
/// A branch checked out in one of the user's own worktrees (the main one, or a linked one that
/// is no conference's) moved because the user worked there (a commit, a pull, `checkout -b`):
/// an agent cannot move a branch another worktree has checked out through git's porcelain, and
/// an "undo" would drop the user's commits. Those are left out.
pub fn warnings_since(before: &Refs, common_dir: &Path, id: &str) -> Vec<String> {
    let users = branches_in_users_worktrees(common_dir);
    before
        .new_changes(&read(common_dir))
        .iter()
        .filter(|c| !users.contains(&c.name))
        .map(|c| {
            format!(
                "warning: while researcher {id}'s agent ran, {} in your repository (agents must \
                 not touch refs outside their worktree); if it was not you, undo it: {}",
                c.describe(),
                c.undo()
            )
        })
        .collect()
}

/// The branches the user's own worktrees have checked out: the main worktree's, and those of
/// linked worktrees outside every conference's worktree folder.
fn branches_in_users_worktrees(common_dir: &Path) -> HashSet<String> {
    let conference_roots = super::worktree::all_worktree_roots(common_dir);
    let mut heads = vec![common_dir.join("HEAD")];
    for admin in std::fs::read_dir(common_dir.join("worktrees"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let gitfile = std::fs::read_to_string(admin.path().join("gitdir")).unwrap_or_default();
        let path = Path::new(gitfile.trim());
        if !conference_roots.iter().any(|root| path.starts_with(root)) {
            heads.push(admin.path().join("HEAD"));
        }
    }
    heads
        .iter()
        .filter_map(|head| std::fs::read_to_string(head).ok())
        .filter_map(|text| Some(text.trim().strip_prefix("ref:")?.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@e"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    /// Branches, tags and stash entries are noticed, loose or packed; conference branches and
    /// other namespaces are not; a change is reported once.
    #[test]
    fn changes_outside_the_conference_namespaces_are_reported_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a"), "a").unwrap();
        git(dir, &["add", "a"]);
        git(dir, &["commit", "-q", "-m", "a"]);
        git(dir, &["tag", "v1"]);
        git(dir, &["pack-refs", "--all"]);
        let common = dir.join(".git");
        let before = read(&common);
        assert!(before.get("refs/heads/main").is_some() && before.get("refs/tags/v1").is_some());

        git(dir, &["branch", "conference/x/researcher-A"]);
        git(dir, &["update-ref", "refs/conference/x/events", "HEAD"]);
        git(dir, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
        assert!(before.new_changes(&read(&common)).is_empty());

        git(dir, &["branch", "agentbranch"]);
        git(dir, &["tag", "-d", "v1"]);
        std::fs::write(dir.join("a"), "changed").unwrap();
        git(dir, &["stash", "-q"]);
        let changes = before.new_changes(&read(&common));
        let names: Vec<&str> = changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["refs/heads/agentbranch", "refs/stash", "refs/tags/v1"]
        );
        assert_eq!(changes[0].undo(), "`git branch -D agentbranch`");
        assert!(changes[2]
            .describe()
            .starts_with("refs/tags/v1 was deleted"));
        assert!(changes[2].undo().starts_with("`git tag -f v1 "));
        // Seen again (another researcher's window): not reported twice.
        assert!(before.new_changes(&read(&common)).is_empty());
    }
}
