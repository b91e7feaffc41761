//! Three-way merge of trees, for knowledge transfer and the review's conflict record.
//!
//! git's merge calls changes to adjacent lines a conflict. In a conference that loses real
//! findings: two researchers tuning `lr = …` and `batch = …` on neighbouring lines would never
//! combine. Here two changes conflict only when they touch the same lines of the base (or insert
//! different text at the same place); the combination is measured before it may stay on best, so
//! a merge that is textually clean but semantically wrong is caught by the evaluation, not by
//! the merge. A file that still conflicts keeps "ours" — in knowledge transfer that is best,
//! which holds the earlier pick with the larger gain (the seed's conflict rule).

use std::path::Path;

use anyhow::Result;
use git2::{Index, IndexEntry, MergeOptions, Oid, Repository};
use similar::{capture_diff_slices, Algorithm, DiffOp};

/// The merged tree, and the files whose changes conflicted (they keep `ours`).
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub tree: Oid,
    pub conflicted: Vec<String>,
}

/// Merges the change `base → theirs` into `ours` (all three are trees).
pub fn merge_trees(repo: &Repository, base: Oid, ours: Oid, theirs: Oid) -> Result<Merged> {
    let (base, ours, theirs) = (
        repo.find_tree(base)?,
        repo.find_tree(ours)?,
        repo.find_tree(theirs)?,
    );
    let mut index = repo.merge_trees(&base, &ours, &theirs, Some(&MergeOptions::new()))?;
    let mut conflicted = Vec::new();
    if index.has_conflicts() {
        let entries: Vec<_> = index.conflicts()?.collect::<Result<_, _>>()?;
        for c in entries {
            let path = [&c.our, &c.their, &c.ancestor]
                .into_iter()
                .flatten()
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .next()
                .unwrap_or_default();
            index.conflict_remove(Path::new(&path))?;
            let merged = match (&c.ancestor, &c.our, &c.their) {
                (ancestor, Some(our), Some(their)) => {
                    merge_blobs(repo, ancestor.as_ref(), our, their)?
                }
                _ => None,
            };
            match merged {
                Some(entry) => index.add(&entry)?,
                None => {
                    keep(&mut index, c.our)?;
                    conflicted.push(path);
                }
            }
        }
    }
    let tree = index.write_tree_to(repo)?;
    Ok(Merged { tree, conflicted })
}

/// Stage-0 entry for `entry` (a resolved conflict).
fn stage0(mut entry: IndexEntry) -> IndexEntry {
    entry.flags &= !0x3000;
    entry
}

fn keep(index: &mut Index, ours: Option<IndexEntry>) -> Result<()> {
    if let Some(entry) = ours {
        index.add(&stage0(entry))?;
    }
    Ok(())
}

/// Line merge of two versions of one file; None when they conflict or are not text.
fn merge_blobs(
    repo: &Repository,
    ancestor: Option<&IndexEntry>,
    our: &IndexEntry,
    their: &IndexEntry,
) -> Result<Option<IndexEntry>> {
    let read = |id: Oid| -> Result<Option<String>> {
        let blob = repo.find_blob(id)?;
        Ok(std::str::from_utf8(blob.content())
            .ok()
            .filter(|s| !s.contains('\0'))
            .map(str::to_string))
    };
    let base = match ancestor {
        Some(a) => read(a.id)?,
        None => Some(String::new()),
    };
    let (Some(base), Some(o), Some(t)) = (base, read(our.id)?, read(their.id)?) else {
        return Ok(None);
    };
    let Some(text) = merge_text(&base, &o, &t) else {
        return Ok(None);
    };
    // Mode: whichever side changed it (ours when both did).
    let mode = match ancestor {
        Some(a) if our.mode == a.mode => their.mode,
        _ => our.mode,
    };
    Ok(Some(IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: text.len() as u32,
        id: repo.blob(text.as_bytes())?,
        flags: (our.path.len().min(0xfff)) as u16,
        flags_extended: 0,
        path: our.path.clone(),
    }))
}

/// A change to the base: replace lines `start..end` with `lines`.
#[derive(Debug, Clone, PartialEq)]
struct Hunk<'a> {
    start: usize,
    end: usize,
    lines: Vec<&'a str>,
}

fn hunks<'a>(base: &[&'a str], new: &[&'a str]) -> Vec<Hunk<'a>> {
    let mut out: Vec<Hunk> = Vec::new();
    let mut open: Option<(usize, usize, usize, usize)> = None; // old start/end, new start/end
    for op in capture_diff_slices(Algorithm::Myers, base, new) {
        let (old, new_range) = (op.old_range(), op.new_range());
        match op {
            DiffOp::Equal { .. } => {
                if let Some((os, oe, ns, ne)) = open.take() {
                    out.push(Hunk {
                        start: os,
                        end: oe,
                        lines: new[ns..ne].to_vec(),
                    });
                }
            }
            _ => {
                open = Some(match open {
                    Some((os, _, ns, _)) => (os, old.end, ns, new_range.end),
                    None => (old.start, old.end, new_range.start, new_range.end),
                });
            }
        }
    }
    if let Some((os, oe, ns, ne)) = open {
        out.push(Hunk {
            start: os,
            end: oe,
            lines: new[ns..ne].to_vec(),
        });
    }
    out
}

/// Whether two hunks of different sides touch the same base lines (or insert at one place).
fn clash(a: &Hunk, b: &Hunk) -> bool {
    if a == b {
        return false;
    }
    let a_insert = a.start == a.end;
    let b_insert = b.start == b.end;
    match (a_insert, b_insert) {
        (true, true) => a.start == b.start,
        (true, false) => b.start < a.start && a.start < b.end,
        (false, true) => a.start < b.start && b.start < a.end,
        (false, false) => a.start < b.end && b.start < a.end,
    }
}

/// Three-way line merge; None when the two sides change the same lines differently.
pub fn merge_text(base: &str, ours: &str, theirs: &str) -> Option<String> {
    let b: Vec<&str> = base.split_inclusive('\n').collect();
    let o: Vec<&str> = ours.split_inclusive('\n').collect();
    let t: Vec<&str> = theirs.split_inclusive('\n').collect();
    let ho = hunks(&b, &o);
    let ht = hunks(&b, &t);
    if ho.iter().any(|x| ht.iter().any(|y| clash(x, y))) {
        return None;
    }
    let mut all: Vec<Hunk> = ho;
    for h in ht {
        if !all.contains(&h) {
            all.push(h);
        }
    }
    // Insertions before a replacement that starts at the same line.
    all.sort_by_key(|h| (h.start, h.end != h.start));
    let mut out = String::with_capacity(ours.len().max(theirs.len()));
    let mut at = 0;
    for h in &all {
        for line in &b[at..h.start.max(at)] {
            out.push_str(line);
        }
        for line in &h.lines {
            out.push_str(line);
        }
        at = at.max(h.end);
    }
    for line in &b[at.min(b.len())..] {
        out.push_str(line);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_lines_merge() {
        let base = "a=1\nb=2\nc=3\n";
        let ours = "a=10\nb=2\nc=3\n";
        let theirs = "a=1\nb=20\nc=3\n";
        assert_eq!(merge_text(base, ours, theirs).unwrap(), "a=10\nb=20\nc=3\n");
    }

    #[test]
    fn same_line_conflicts_and_identical_changes_do_not() {
        let base = "a=1\nb=2\n";
        assert!(merge_text(base, "a=5\nb=2\n", "a=6\nb=2\n").is_none());
        assert_eq!(
            merge_text(base, "a=5\nb=2\n", "a=5\nb=2\n").unwrap(),
            "a=5\nb=2\n"
        );
    }

    #[test]
    fn insertions_deletions_and_missing_newline() {
        let base = "1\n2\n3\n4\n5";
        let ours = "0\n1\n2\n3\n4\n5";
        let theirs = "1\n2\n4\n5\n6";
        assert_eq!(merge_text(base, ours, theirs).unwrap(), "0\n1\n2\n4\n5\n6");
        // Two different insertions at one place conflict.
        assert!(merge_text("x\n", "x\na\n", "x\nb\n").is_none());
        // An insertion inside a replaced range conflicts.
        assert!(merge_text("1\n2\n3\n", "1\n9\n", "1\n2\nnew\n3\n").is_none());
    }
}
