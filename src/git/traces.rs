//! Traces an agent can leave in the user's repository outside its worktree: branches
//! (`git checkout -b x`, `git branch -f main HEAD~`), tags, stash entries (`git stash` in a
//! worktree writes the shared `refs/stash`), and any other ref (`git update-ref refs/x/y`, a
//! notes ref of its own). Preventing them needs a sandbox; noticing them is cheap. Whose change
//! it was is read from the ref's reflog, where an agent's git commands write the researcher's name
//! (see [`agent_env`]): the agent's are put back and the user is told, the user's own work while
//! agents run is left alone.
//!
//! Only the refs files are read (`packed-refs`, re-read only when it changed, and the loose refs
//! under `refs/`), never an object, so a check costs the same on a large repository. The
//! conferences' own refs (`refs/conference…`, `refs/heads/conference/…`, their notes) are left
//! out: other conferences move theirs all the time, and this one guards its own elsewhere. A
//! repository on the reftable backend is not checked.
//!
//! Researchers run in parallel, so one agent's change can fall in another's window too. Every
//! change a check settles (reported, put back) goes into a ledger; a later check applies the
//! entries made since its window opened to what it read then, so the same change is neither
//! reported twice nor, once put back, taken for a new one — while the same branch created again
//! later is a new change, reported again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The refs outside the conferences' namespaces: name → value (an id, or `ref: …`). The packed
/// ones are shared with the cache, so that two reads of an unchanged `packed-refs` compare by
/// pointer, and only the (few) loose refs are compared one by one.
#[derive(Debug, Clone, Default)]
pub struct Refs {
    packed: Arc<BTreeMap<String, String>>,
    loose: BTreeMap<String, String>,
    /// Values the ledger settled since these were read (None: the ref is gone).
    settled: BTreeMap<String, Option<String>>,
    /// The ledger's length when these were read: its later entries apply to them.
    ledger_len: usize,
    /// False when they cannot be read this way (reftable): nothing is reported then.
    readable: bool,
}

/// The conferences' own refs, left out of the check: these prefixes, and their notes ref.
const CONFERENCE_OWNED: [&str; 4] = [
    "refs/conference/",
    "refs/conference-",
    "refs/heads/conference/",
    crate::store::refs::MACHINE_NOTES_PREFIX,
];
/// Deleted refs under these are not reported: `git fetch --prune` deletes them as routine.
const DELETED_QUIETLY: [&str; 1] = ["refs/remotes/"];

/// `packed-refs` parsed, with the (length, mtime, inode) it was parsed at.
type PackedCache = Option<(PathBuf, Stamp, Arc<BTreeMap<String, String>>)>;
type Stamp = (u64, std::time::SystemTime, u64);
static PACKED: Mutex<PackedCache> = Mutex::new(None);
/// Every change a check settled this run, in order (see the module's doc).
static LEDGER: Mutex<Vec<Settled>> = Mutex::new(Vec::new());

/// A change a check settled: ref `name` went from `old` to `new`, and was left at `now`.
#[derive(Debug, Clone)]
struct Settled {
    name: String,
    old: Option<String>,
    new: Option<String>,
    now: Option<String>,
}

fn watched(name: &str) -> bool {
    name.starts_with("refs/")
        && name != crate::store::NOTES_REF
        && !CONFERENCE_OWNED.iter().any(|p| name.starts_with(p))
}

/// Reads the refs outside the conferences' namespaces of the repository whose common git dir
/// is `common_dir`.
pub fn read(common_dir: &Path) -> Refs {
    let ledger_len = LEDGER.lock().unwrap().len();
    read_at(common_dir, ledger_len)
}

/// [`read`], as of the ledger's entry `ledger_len`.
fn read_at(common_dir: &Path, ledger_len: usize) -> Refs {
    if common_dir.join("reftable").is_dir() {
        return Refs::default();
    }
    let mut loose_refs = BTreeMap::new();
    loose(common_dir, Path::new("refs"), &mut loose_refs);
    Refs {
        packed: packed(common_dir),
        loose: loose_refs,
        settled: BTreeMap::new(),
        ledger_len,
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
            if watched(&format!("{name_text}/")) {
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

    /// This change, left at `now`.
    fn settled(&self, now: Option<String>) -> Settled {
        Settled {
            name: self.name.clone(),
            old: self.old.clone(),
            new: self.new.clone(),
            now,
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
        let branch = self.name.starts_with("refs/heads/");
        match (&self.old, self.name.as_str()) {
            (_, "refs/stash") => "`git stash list`, then `git stash drop` the entry".into(),
            (None, _) if tag => format!("`git tag -d {short_name}`"),
            (None, _) if branch => format!("`git branch -D {short_name}`"),
            (None, _) => format!("`git update-ref -d {}`", self.name),
            (Some(old), _) if tag => format!("`git tag -f {short_name} {old}`"),
            (Some(old), _) => format!("`git update-ref {} {old}`", self.name),
        }
    }
}

impl Refs {
    /// A ref's value: what the ledger settled, else the loose file over packed-refs, as in git.
    fn get(&self, name: &str) -> Option<&String> {
        match self.settled.get(name) {
            Some(value) => value.as_ref(),
            None => self.loose.get(name).or_else(|| self.packed.get(name)),
        }
    }

    fn all_names(&self) -> impl Iterator<Item = &String> {
        self.packed
            .keys()
            .chain(self.loose.keys())
            .chain(self.settled.keys())
    }

    /// These refs as the checks that ran since they were read left them: each change settled
    /// meanwhile that these saw on either side is taken as settled.
    fn with_settled(&self, ledger: &[Settled]) -> Refs {
        let mut refs = self.clone();
        for entry in ledger.iter().skip(self.ledger_len) {
            let seen = refs.get(&entry.name).cloned();
            if seen == entry.old || seen == entry.new {
                refs.settled.insert(entry.name.clone(), entry.now.clone());
            }
        }
        refs
    }

    /// What changed from `self` to `now`, after the changes other checks settled meanwhile.
    fn changes(&self, now: &Refs, ledger: &[Settled]) -> Vec<RefChange> {
        if !self.readable || !now.readable {
            return Vec::new();
        }
        let before = self.with_settled(ledger);
        // Unchanged packed refs: only names that are loose or settled can differ.
        let mut names: Vec<&String> = if Arc::ptr_eq(&before.packed, &now.packed) {
            before
                .loose
                .keys()
                .chain(before.settled.keys())
                .chain(now.loose.keys())
                .collect()
        } else {
            before.all_names().chain(now.all_names()).collect()
        };
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| {
                let (old, new) = (before.get(name), now.get(name));
                (old != new).then(|| RefChange {
                    name: name.clone(),
                    old: old.cloned(),
                    new: new.cloned(),
                })
            })
            .collect()
    }
}

/// The name an agent's git commands write as committer, into the reflog of every ref they move:
/// how a ref change is told to be researcher `id`'s agent's, and not the user's (who may work in
/// the repository while agents run). Snapshot commits carry the same name as their author.
pub fn agent_name(id: &str) -> String {
    crate::store::researcher_name(id)
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
/// tell whose it was, with the command that restores it. Each change once, whichever
/// researcher's check sees it first (see the module's doc). Returns the warning lines.
pub fn undo_agents_changes(before: &Refs, common_dir: &Path) -> Vec<String> {
    // One check at a time: two that saw the same change must not both act on it.
    let mut ledger = LEDGER.lock().unwrap();
    let changes = before.changes(&read_at(common_dir, ledger.len()), &ledger);
    let mut warnings = Vec::new();
    for c in changes {
        let Some(new) = &c.new else {
            if !DELETED_QUIETLY.iter().any(|p| c.name.starts_with(p)) {
                warnings.push(format!(
                    "warning: while an agent ran, {} in your repository (by an agent, or by \
                     you?); if it was not you, undo it: {}",
                    c.describe(),
                    c.undo()
                ));
            }
            ledger.push(c.settled(None));
            continue;
        };
        let Some((id, old)) = agents_entries(common_dir, &c.name, new) else {
            continue;
        };
        let (done, now) = match put_back(common_dir, &c.name, new, &old) {
            Ok(done) => (done, (!is_zero(&old)).then(|| old.clone())),
            Err(e) => (
                format!("it could not be put back ({e:#}): {}", c.undo()),
                c.new.clone(),
            ),
        };
        warnings.push(format!(
            "warning: researcher {id}'s agent: {} in your repository (agents must not touch \
             refs outside their worktree); {done}",
            c.describe()
        ));
        ledger.push(c.settled(now));
    }
    warnings
}

fn is_zero(id: &str) -> bool {
    id.chars().all(|c| c == '0')
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
    if is_zero(old) {
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

    /// A repository on `main` with one commit.
    fn repo_with_a_commit() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a"), "a").unwrap();
        git(dir, &["add", "a"]);
        git(dir, &["commit", "-q", "-m", "a"]);
        tmp
    }

    /// Branches, tags, stash entries and other refs are noticed, loose or packed; the
    /// conferences' own refs are not.
    #[test]
    fn changes_outside_the_conference_namespaces_are_noticed() {
        let tmp = repo_with_a_commit();
        let dir = tmp.path();
        git(dir, &["tag", "v1"]);
        git(dir, &["pack-refs", "--all"]);
        let common = dir.join(".git");
        let before = read_at(&common, 0);
        assert!(before.get("refs/heads/main").is_some() && before.get("refs/tags/v1").is_some());

        git(dir, &["branch", "conference/x/researcher-A"]);
        git(dir, &["update-ref", "refs/conference/x/events", "HEAD"]);
        git(
            dir,
            &["update-ref", "refs/conference-knowledge/store", "HEAD"],
        );
        git(dir, &["update-ref", "refs/notes/conference", "HEAD"]);
        assert!(before.changes(&read_at(&common, 0), &[]).is_empty());

        git(dir, &["branch", "agentbranch"]);
        git(dir, &["tag", "-d", "v1"]);
        git(dir, &["update-ref", "refs/agent/made", "HEAD"]);
        std::fs::write(dir.join("a"), "changed").unwrap();
        git(dir, &["stash", "-q"]);
        let changes = before.changes(&read_at(&common, 0), &[]);
        let names: Vec<&str> = changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "refs/agent/made",
                "refs/heads/agentbranch",
                "refs/stash",
                "refs/tags/v1"
            ]
        );
        assert_eq!(changes[0].undo(), "`git update-ref -d refs/agent/made`");
        assert_eq!(changes[1].undo(), "`git branch -D agentbranch`");
        assert!(changes[3]
            .describe()
            .starts_with("refs/tags/v1 was deleted"));
        assert!(changes[3].undo().starts_with("`git tag -f v1 "));
    }

    /// A change another check settled meanwhile is not seen again, whether this window opened
    /// before the change or after it; the same ref created again afterwards is a new change.
    #[test]
    fn a_settled_change_is_seen_once_and_a_repeat_is_new() {
        let tmp = repo_with_a_commit();
        let dir = tmp.path();
        let common = dir.join(".git");
        let early = read_at(&common, 0);
        git(dir, &["branch", "x"]);
        let late = read_at(&common, 0);
        let change = early.changes(&read_at(&common, 0), &[]).remove(0);
        // The first check removed it.
        git(dir, &["branch", "-D", "x"]);
        let ledger = [change.settled(None)];
        let now = read_at(&common, 1);
        assert!(early.changes(&now, &ledger).is_empty());
        assert!(late.changes(&now, &ledger).is_empty());
        // Made again: both windows see it, as a creation.
        git(dir, &["branch", "x"]);
        let now = read_at(&common, 1);
        for window in [&early, &late] {
            let again = window.changes(&now, &ledger);
            assert_eq!(again.len(), 1);
            assert!(again[0].describe().starts_with("refs/heads/x was created"));
        }
    }
}
