//! Applying a model's edits to the researcher's worktree: in memory first, written only when the
//! whole answer applied, so a half-applied answer never becomes an attempt. Every path is checked
//! before anything is applied: one the researcher may not change (frozen, forbidden, outside the
//! allowed changes or the worktree, or reached through a symbolic link) refuses the whole answer.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use super::edits::Edit;
use super::matcher;
use crate::config::paths::Guard;

/// An edit that did not apply: its file, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: Option<String>,
    pub why: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{path}: {}", self.why),
            None => f.write_str(&self.why),
        }
    }
}

/// The worktree's files as the edits so far leave them.
pub struct Workspace<'a> {
    root: &'a Path,
    guard: &'a Guard,
    /// Current content of every file read or edited (None: absent).
    files: BTreeMap<String, Option<String>>,
    original: BTreeMap<String, Option<String>>,
}

impl<'a> Workspace<'a> {
    pub fn new(root: &'a Path, guard: &'a Guard) -> Self {
        Workspace {
            root,
            guard,
            files: BTreeMap::new(),
            original: BTreeMap::new(),
        }
    }

    /// Why the researcher may not make `edits`, naming the first path at fault.
    pub fn refusal(&self, edits: &[Edit]) -> Option<String> {
        edits.iter().find_map(|e| {
            let path = e.path();
            if let Some(why) = outside(path) {
                return Some(format!("the model's answer edits {path}, {why}"));
            }
            if let Some(why) = self.guard.violation(&[path.to_string()]) {
                return Some(format!("the model's answer {why}"));
            }
            through_symlink(self.root, path).then(|| {
                format!("the model's answer edits {path}, reached through a symbolic link")
            })
        })
    }

    /// Applies `edits` in order, in memory; one problem per edit that did not apply.
    pub fn apply(&mut self, edits: &[Edit]) -> Vec<Problem> {
        let mut problems = Vec::new();
        for edit in edits {
            if let Err(why) = self.apply_one(edit) {
                problems.push(Problem {
                    path: Some(edit.path().to_string()),
                    why,
                });
            }
        }
        problems
    }

    fn apply_one(&mut self, edit: &Edit) -> Result<(), String> {
        let path = edit.path().to_string();
        let current = self.read(&path)?;
        let new = match (edit, current) {
            (Edit::Whole { content, .. }, _) => content.clone(),
            (
                Edit::Replace {
                    search, replace, ..
                },
                None,
            ) if search.trim().is_empty() => replace.clone(),
            (Edit::Replace { .. }, None) => {
                return Err("no such file (to create one, leave its SEARCH section empty)".into())
            }
            (
                Edit::Replace {
                    search, replace, ..
                },
                Some(text),
            ) => matcher::replace(&text, search, replace)?.0,
        };
        self.files.insert(path, Some(new));
        Ok(())
    }

    /// A file's current content (None: absent); read from the worktree the first time.
    pub fn read(&mut self, path: &str) -> Result<Option<String>, String> {
        if let Some(c) = self.files.get(path) {
            return Ok(c.clone());
        }
        let content = match std::fs::read(self.root.join(path)) {
            Ok(bytes) => {
                Some(String::from_utf8(bytes).map_err(|_| "not a text file (UTF-8)".to_string())?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read it: {e}")),
        };
        self.files.insert(path.to_string(), content.clone());
        self.original.insert(path.to_string(), content.clone());
        Ok(content)
    }

    /// Writes every file the edits changed; their paths.
    pub fn write(&self) -> std::io::Result<Vec<String>> {
        let mut written = Vec::new();
        for (path, content) in &self.files {
            let Some(content) = content else { continue };
            if self.original.get(path) == Some(&Some(content.clone())) {
                continue;
            }
            let full = self.root.join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(full, content)?;
            written.push(path.clone());
        }
        Ok(written)
    }
}

/// Why a path the model wrote is not inside the worktree, if it is not.
fn outside(path: &str) -> Option<&'static str> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() {
        return Some("which is not a path inside the worktree");
    }
    if p.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Some("which leaves the worktree (`..`)");
    }
    if p.components()
        .next()
        .is_some_and(|c| c.as_os_str() == ".git")
    {
        return Some("inside .git");
    }
    None
}

/// Whether `path` or a folder on the way to it is a symbolic link (a write could leave the tree).
fn through_symlink(root: &Path, path: &str) -> bool {
    let mut at = root.to_path_buf();
    Path::new(path).components().any(|c| {
        at.push(c);
        at.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard of a small conference whose evaluation harness (frozen) is `eval.sh`.
    fn guard() -> Guard {
        let text = "# Conference: T\n## Goal\nG\n## Mode\nmetric\n## Success Metric\n\
            - metric: s\n- target: none\n- direction: minimize\n## Researchers\n- count: 1\n\
            - iterations per round: 1\n- max rounds: 1\n## Evaluation\n- command: ./eval.sh\n\
            ## Agent\n- command: builtin:openai\n";
        let config = crate::config::load(text).expect("valid");
        Guard::new(&config, &|p| p == "eval.sh")
    }

    fn whole(path: &str, content: &str) -> Edit {
        Edit::Whole {
            path: path.into(),
            content: content.into(),
        }
    }

    #[test]
    fn paths_outside_the_rules_refuse_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard();
        let ws = Workspace::new(dir.path(), &g);
        let cases = [
            ("eval.sh", Some("changes frozen path eval.sh")),
            ("../x.py", Some("leaves the worktree")),
            ("/etc/passwd", Some("not a path inside")),
            (".git/config", Some("inside .git")),
            ("src/a.py", None),
        ];
        for (path, expected) in cases {
            let got = ws.refusal(&[whole("ok.py", ""), whole(path, "x")]);
            match expected {
                Some(needle) => assert!(
                    got.as_deref().unwrap_or("").contains(needle),
                    "{path}: {got:?}"
                ),
                None => assert_eq!(got, None, "{path}"),
            }
        }
        std::os::unix::fs::symlink("/tmp", dir.path().join("link")).unwrap();
        let got = ws.refusal(&[whole("link/x.py", "x")]);
        assert!(got.unwrap().contains("symbolic link"));
    }

    #[test]
    fn edits_apply_in_memory_and_only_changes_are_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 1\ny = 2\n").unwrap();
        std::fs::write(dir.path().join("b.py"), "z = 3\n").unwrap();
        let g = guard();
        let mut ws = Workspace::new(dir.path(), &g);
        let problems = ws.apply(&[
            Edit::Replace {
                path: "a.py".into(),
                search: "y = 2\n".into(),
                replace: "y = 5\n".into(),
            },
            Edit::Replace {
                path: "b.py".into(),
                search: "w = 0\n".into(),
                replace: "w = 1\n".into(),
            },
            whole("new/c.py", "c = 1\n"),
            whole("b.py", "z = 3\n"),
        ]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path.as_deref(), Some("b.py"));
        assert!(problems[0]
            .to_string()
            .starts_with("b.py: the SEARCH lines are not in the file"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.py")).unwrap(),
            "x = 1\ny = 2\n"
        );
        let written = ws.write().unwrap();
        assert_eq!(written, vec!["a.py", "new/c.py"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.py")).unwrap(),
            "x = 1\ny = 5\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new/c.py")).unwrap(),
            "c = 1\n"
        );
    }
}
