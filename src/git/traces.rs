//! Traces an agent can leave in the user's repository outside its worktree: branches
//! (`git checkout -b x`, `git branch -f main HEAD~`), tags, and stash entries (`git stash` in a
//! worktree writes the shared `refs/stash`). Preventing them needs a sandbox; noticing them is
//! cheap. Whose change it was is read from the ref's reflog, where an agent's git commands write
//! the researcher's name (see [`agent_env`]): the agent's are put back and the user is told, the
//! user's own work while agents run is left alone.
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

/// The name an agent's git commands write as committer, into the reflog of every ref they move:
/// how a ref change is told to be researcher `id`'s agent's, and not the user's (who may work in
/// the repository while agents run). Snapshot commits carry the same name as their author.
pub fn agent_name(id: &str) -> String {
    format!("Researcher {id} (git-conference)")
}

/// What researcher `id`'s agent runs with: its git commands commit and log ref moves as
/// [`agent_name`], and log every ref they move (tags too, which git logs only when told).
pub fn agent_env(id: &str) -> Vec<(String, String)> {
    [
        ("GIT_COMMITTER_NAME", agent_name(id).as_str()),
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "core.logAllRefUpdates"),
        ("GIT_CONFIG_VALUE_0", "always"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// What changed in the user's refs since `before` (read when an agent started), judged by who
/// made it: a ref an agent created or moved (its reflog's newest entry names that agent, see
/// [`agent_env`]) is put back and named with the researcher; one the user made is theirs and
/// left alone, unreported; a deleted one (its reflog went with it) is named, since nobody can
/// tell whose it was, with the command that restores it. Returns the warning lines.
pub fn undo_agents_changes(before: &Refs, common_dir: &Path) -> Vec<String> {
    before
        .new_changes(&read(common_dir))
        .iter()
        .filter_map(|c| match &c.new {
            None => Some(format!(
                "warning: while an agent ran, {} in your repository (by an agent, or by you?); \
                 if it was not you, undo it: {}",
                c.describe(),
                c.undo()
            )),
            Some(new) => {
                let (id, old) = agents_entries(common_dir, &c.name, new)?;
                let done = match put_back(common_dir, &c.name, new, &old) {
                    Ok(done) => done,
                    Err(e) => format!("it could not be put back ({e:#}): {}", c.undo()),
                };
                Some(format!(
                    "warning: researcher {id}'s agent: {} in your repository (agents must not \
                     touch refs outside their worktree); {done}",
                    c.describe()
                ))
            }
        })
        .collect()
}

/// The researcher whose agent wrote the newest entries of ref `name`'s reflog, the newest
/// setting it to `new`, and the value the ref had before the first of them (all zeros: it did
/// not exist): where it goes back to, whatever the user did before or after the agent.
fn agents_entries(common_dir: &Path, name: &str, new: &str) -> Option<(String, String)> {
    let log = std::fs::read_to_string(common_dir.join("logs").join(name)).ok()?;
    let mut found: Option<(String, String)> = None;
    for (i, line) in log.lines().rev().enumerate() {
        let Some((old, logged_new, id)) = parse_entry(line) else {
            break;
        };
        match &found {
            None if i == 0 && logged_new == new => found = Some((id, old)),
            Some((agent, _)) if *agent == id => found = Some((id, old)),
            _ => break,
        }
    }
    found
}

/// (old value, new value, researcher) of a reflog line an agent wrote (see [`agent_env`]).
fn parse_entry(line: &str) -> Option<(String, String, String)> {
    // `update-ref` without `-m` logs no message, and no tab before it.
    let header = line
        .split_once('\t')
        .map_or(line, |(header, _message)| header);
    let mut fields = header.splitn(3, ' ');
    let (old, new, who) = (fields.next()?, fields.next()?, fields.next()?);
    let id = who
        .strip_prefix("Researcher ")?
        .split_once(" (git-conference) <")?
        .0;
    let id_ok = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric());
    id_ok.then(|| (old.to_string(), new.to_string(), id.to_string()))
}

/// Puts ref `name` back from `new` (where the agent left it) to `old` (all zeros: deletes it),
/// if no one moved it since; a stash entry is dropped as `git stash drop` drops it. Says what
/// was done.
fn put_back(common_dir: &Path, name: &str, new: &str, old: &str) -> anyhow::Result<String> {
    if name == "refs/stash" {
        let drop = [
            "reflog",
            "delete",
            "--updateref",
            "--rewrite",
            "refs/stash@{0}",
        ];
        super::git(common_dir, &drop)?;
        return Ok("dropped".into());
    }
    if old.chars().all(|c| c == '0') {
        super::git(common_dir, &["update-ref", "-d", name, new])?;
        return Ok("removed".into());
    }
    super::git(common_dir, &["update-ref", name, old, new])?;
    Ok(format!("put back at {}", &old[..old.len().min(10)]))
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
