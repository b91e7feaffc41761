//! What an attempt changed, read from its commit against its parent: the files it touched, the
//! numeric literals it changed (`train.py:lr` 0.001 → 0.003), and its patch when small. The tracker
//! sends these as an attempt's params and artifact; the report's importance table reads the
//! literals' values at each attempt. Which literals a file has is the `builtin:tune` vocabulary
//! (`researchers::tune::literal_values`, a layer above this one), so the caller hands that reader
//! to the [`LiteralCache`].

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use git2::{Oid, Repository};

/// The largest file whose literals are read (bigger ones are data, not settings).
const MAX_SCANNED_FILE: usize = 512 * 1024;

/// One literal an attempt changed (None: it was not there on that side).
#[derive(Debug, Clone, PartialEq)]
pub struct LiteralChange {
    pub key: String,
    /// The file it is in.
    pub path: String,
    pub old: Option<f64>,
    pub new: Option<f64>,
}

/// An attempt's change against its parent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub parent: Option<Oid>,
    /// Paths added, modified, deleted or renamed (both names), sorted.
    pub files: Vec<String>,
    pub literals: Vec<LiteralChange>,
    /// `git diff` of the change, when it is at most the limit asked for.
    pub patch: Option<String>,
}

/// A file's literals (key → value) from its path and text.
pub type LiteralReader = fn(path: &str, text: &str) -> BTreeMap<String, f64>;

/// Reads files' literals once per blob: attempts share most of their files.
pub struct LiteralCache {
    read: LiteralReader,
    by_blob: HashMap<Oid, BTreeMap<String, f64>>,
}

impl LiteralCache {
    pub fn new(read: LiteralReader) -> Self {
        LiteralCache {
            read,
            by_blob: HashMap::new(),
        }
    }

    /// The literals (key → value) of blob `id` at `path`; none for a binary or large file.
    pub fn of_blob(&mut self, repo: &Repository, path: &str, id: Oid) -> &BTreeMap<String, f64> {
        let read = self.read;
        self.by_blob.entry(id).or_insert_with(|| {
            let Ok(blob) = repo.find_blob(id) else {
                return BTreeMap::new();
            };
            if blob.is_binary() || blob.size() > MAX_SCANNED_FILE {
                return BTreeMap::new();
            }
            let text = String::from_utf8_lossy(blob.content());
            read(path, &text)
        })
    }

    /// The literals of `path` in `tree` (none when it is not there).
    pub fn of_path(
        &mut self,
        repo: &Repository,
        tree: &git2::Tree,
        path: &str,
    ) -> BTreeMap<String, f64> {
        match tree.get_path(std::path::Path::new(path)) {
            Ok(entry) if entry.kind() == Some(git2::ObjectType::Blob) => {
                self.of_blob(repo, path, entry.id()).clone()
            }
            _ => BTreeMap::new(),
        }
    }

    /// How many blobs it holds (a reader over many attempts may start afresh past a bound).
    pub fn len(&self) -> usize {
        self.by_blob.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_blob.is_empty()
    }
}

/// The change `commit` made against its first parent; its patch only when at most `patch_limit`
/// bytes (0: never).
pub fn change_of(
    repo: &Repository,
    commit: Oid,
    patch_limit: usize,
    cache: &mut LiteralCache,
) -> Result<Change> {
    let c = repo.find_commit(commit)?;
    let new_tree = c.tree()?;
    let parent = c.parent(0).ok();
    let old_tree = parent.as_ref().map(|p| p.tree()).transpose()?;
    let mut diff = repo.diff_tree_to_tree(old_tree.as_ref(), Some(&new_tree), None)?;
    diff.find_similar(None)?;
    let mut change = Change {
        parent: parent.as_ref().map(|p| p.id()),
        ..Change::default()
    };
    let mut literals = BTreeMap::new();
    for delta in diff.deltas() {
        let old = delta.old_file();
        let new = delta.new_file();
        let old_path = old.path().map(|p| p.to_string_lossy().into_owned());
        let new_path = new.path().map(|p| p.to_string_lossy().into_owned());
        for p in [&old_path, &new_path].into_iter().flatten() {
            if !change.files.contains(p) {
                change.files.push(p.clone());
            }
        }
        let side = |cache: &mut LiteralCache, path: &Option<String>, id: Oid| match path {
            Some(p) if !id.is_zero() => cache.of_blob(repo, p, id).clone(),
            _ => BTreeMap::new(),
        };
        let before = side(cache, &old_path, old.id());
        let after = side(cache, &new_path, new.id());
        for (key, value) in &after {
            if before.get(key) != Some(value) {
                let path = new_path.clone().unwrap_or_default();
                literals.insert(key.clone(), (path, before.get(key).copied(), Some(*value)));
            }
        }
        for (key, value) in &before {
            if !after.contains_key(key) {
                let path = old_path.clone().unwrap_or_default();
                literals.insert(key.clone(), (path, Some(*value), None));
            }
        }
    }
    change.files.sort();
    change.literals = literals
        .into_iter()
        .map(|(key, (path, old, new))| LiteralChange {
            key,
            path,
            old,
            new,
        })
        .collect();
    if patch_limit > 0 {
        change.patch = patch_text(&diff, patch_limit);
    }
    Ok(change)
}

/// The diff as `git diff` prints it, or None past `limit` bytes.
fn patch_text(diff: &git2::Diff, limit: usize) -> Option<String> {
    let mut out = Vec::new();
    let mut over = false;
    let _ = diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if out.len() > limit {
            over = true;
            return false;
        }
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        true
    });
    (!over && out.len() <= limit).then(|| String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_files_and_patch_of_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let commit = |files: &[(&str, &str)], parent: Option<Oid>| {
            let mut tb = repo.treebuilder(None).unwrap();
            for (name, text) in files {
                let blob = repo.blob(text.as_bytes()).unwrap();
                tb.insert(name, blob, 0o100644).unwrap();
            }
            let tree = repo.find_tree(tb.write().unwrap()).unwrap();
            let parents: Vec<git2::Commit> = parent
                .iter()
                .map(|p| repo.find_commit(*p).unwrap())
                .collect();
            let refs: Vec<&git2::Commit> = parents.iter().collect();
            repo.commit(None, &sig, &sig, "m", &tree, &refs).unwrap()
        };
        let base = commit(
            &[("train.py", "lr = 0.001\nsteps = 100\n"), ("a.txt", "x")],
            None,
        );
        let next = commit(
            &[("train.py", "lr = 0.003\nsteps = 100\n"), ("a.txt", "y")],
            Some(base),
        );
        let c = change_of(
            &repo,
            next,
            10_000,
            &mut LiteralCache::new(crate::researchers::tune::literal_values),
        )
        .unwrap();
        assert_eq!(c.parent, Some(base));
        assert_eq!(c.files, ["a.txt", "train.py"]);
        assert_eq!(
            c.literals,
            [LiteralChange {
                key: "train.py:lr".into(),
                path: "train.py".into(),
                old: Some(0.001),
                new: Some(0.003)
            }]
        );
        let patch = c.patch.unwrap();
        assert!(patch.contains("-lr = 0.001\n+lr = 0.003\n"), "{patch}");
        let c = change_of(
            &repo,
            next,
            10,
            &mut LiteralCache::new(crate::researchers::tune::literal_values),
        )
        .unwrap();
        assert_eq!(c.patch, None);
    }
}
