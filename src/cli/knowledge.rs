//! `knowledge`: the repository-wide knowledge store that conferences' retrospectives fill and
//! new conferences' researchers are briefed from (`store::knowledge`, DESIGN.md §10). Lists,
//! shows and forgets entries; a forget is a commit on the store's ref, so `git revert` undoes it.

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::engine::commands::knowledge_store::{self as store, REF as KNOWLEDGE_REF};
use crate::model::knowledge::{short_number, Entry, Kind};

/// What earlier conferences learned: list, show or forget entries of the knowledge store.
///
/// When a conference ends, its retrospective adds patterns (validated changes knowledge transfer
/// put on best, with their measured gain) and errors (the most frequent kinds of failure) to the
/// store on `refs/conference-knowledge/store`, one `<id>.md` file per entry; `git log
/// refs/conference-knowledge/store` shows which retrospective added what. A new conference's
/// researchers are briefed with the 3 patterns and 3 errors most relevant to its goal, metric
/// and allowed changes (at most 500 tokens). `git conference push` and `fetch` carry the store.
#[derive(Args, Debug)]
pub struct KnowledgeArgs {
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(Subcommand, Debug)]
pub enum Action {
    /// One line per entry: id, kind, conference, and what it says (the default).
    List,
    /// An entry's text as stored, and the commit that added it.
    Show {
        /// The entry's id (as `list` shows it).
        id: String,
    },
    /// Remove an entry, in a commit of its own on the store's ref (`git revert` brings it back).
    Forget {
        /// The entry's id (as `list` shows it).
        id: String,
    },
}

pub fn run(args: KnowledgeArgs) -> Result<i32> {
    let repo = super::discover()?;
    match args.action.unwrap_or(Action::List) {
        Action::List => list(&repo),
        Action::Show { id } => show(&repo, &id),
        Action::Forget { id } => {
            let e = store::forget(&repo, &id)?;
            crate::outln!(
                "Forgot {id} (a {} from conference {}); `git revert {}` brings it back.",
                e.kind.word(),
                e.conference,
                short_tip(&repo)
            );
            Ok(0)
        }
    }
}

/// Each entry on a line; entries that cannot be read on stderr, with their file and line.
fn list(repo: &git2::Repository) -> Result<i32> {
    let s = store::read(repo)?;
    report_problems(&s.problems);
    if s.entries.is_empty() {
        crate::outln!(
            "The knowledge store is empty: a conference adds what it learned when it ends."
        );
        return Ok(0);
    }
    for e in &s.entries {
        crate::outln!("{}\t{}\t{}\t{}", e.id, e.kind.word(), e.conference, said(e));
    }
    Ok(0)
}

/// What an entry says, on one line.
fn said(e: &Entry) -> String {
    match e.kind {
        Kind::Pattern => format!(
            "{}{}",
            e.gain
                .map(|g| format!("gain {} {}: ", short_number(g), e.metric))
                .unwrap_or_default(),
            e.change
        ),
        Kind::Error => format!("{}× {}", e.count.unwrap_or(1), e.reason),
    }
}

/// The entry's file as stored, then where it came from.
fn show(repo: &git2::Repository, id: &str) -> Result<i32> {
    let s = store::read(repo)?;
    let path = format!("{id}.md");
    let text = s.tip.and_then(|tip| {
        let tree = repo.find_commit(tip).ok()?.tree().ok()?;
        let blob = repo.find_blob(tree.get_name(&path)?.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    });
    let Some(text) = text else {
        return Err(crate::error::usage(store::missing(&s, id)));
    };
    report_problems(
        &s.problems
            .iter()
            .filter(|p| p.starts_with(&path))
            .cloned()
            .collect::<Vec<_>>(),
    );
    crate::outln!("{}", text.trim_end());
    if let Some((commit, subject)) = origin(repo, s.tip, &path) {
        crate::outln!("\n(added by {commit} {subject}; `git log {KNOWLEDGE_REF} -- {path}`)");
    }
    Ok(0)
}

/// The newest commit that added `path` to the store: its short id and subject.
fn origin(repo: &git2::Repository, tip: Option<git2::Oid>, path: &str) -> Option<(String, String)> {
    let mut walk = repo.revwalk().ok()?;
    walk.push(tip?).ok()?;
    let has = |c: &git2::Commit| c.tree().ok().is_some_and(|t| t.get_name(path).is_some());
    for oid in walk.flatten() {
        let c = repo.find_commit(oid).ok()?;
        if has(&c) && !c.parents().any(|p| has(&p)) {
            let id = crate::model::short_oid(c.id());
            return Some((id, c.summary().unwrap_or("").to_string()));
        }
    }
    None
}

fn short_tip(repo: &git2::Repository) -> String {
    store::tip(repo)
        .ok()
        .flatten()
        .map(crate::model::short_oid)
        .unwrap_or_default()
}

/// Entries left out because they cannot be read: the file and line, and what is wrong.
fn report_problems(problems: &[String]) {
    for p in problems {
        crate::errln!("warning: {KNOWLEDGE_REF}: {p} (this entry is left out until it is fixed)");
    }
}
