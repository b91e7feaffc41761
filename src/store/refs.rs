//! Every ref name git-conference reads or writes, in one place (DESIGN.md §3).
//!
//! Nothing else in the crate formats a `refs/...` string: a reader who wants to know where a
//! conference keeps something looks here.

/// Notes on snapshot commits: one JSON object per line, shared by all conferences of a repository.
pub const NOTES_REF: &str = "refs/notes/conference";

/// The repository-wide knowledge store (DESIGN.md §10): one commit per retrospective, its tree
/// one `<id>.md` file per entry. Outside `refs/conference/`, which holds conferences (a
/// conference may be named `knowledge`), and pushed and fetched with every conference. Two
/// levels below `refs/`: a remote's `git receive-pack` refuses a one-level ref ("funny refname").
pub const KNOWLEDGE_REF: &str = "refs/conference-knowledge/store";

/// Where each machine of a conference on several machines publishes its notes, by conference.
pub const MACHINE_NOTES_PREFIX: &str = "refs/notes/conference-machines/";

/// Where clones taking part in conferences on several machines keep each shared remote's refs
/// (see [`ConferenceRefs::shared_remote_view`]).
pub const SHARED_REMOTE_VIEWS: &str = "refs/conference-shared/";

/// The ref names of one conference.
#[derive(Debug, Clone)]
pub struct ConferenceRefs {
    pub name: String,
}

impl ConferenceRefs {
    pub fn new(name: &str) -> Self {
        ConferenceRefs {
            name: name.to_string(),
        }
    }

    /// Event log: one commit per event; each commit's tree is the conference state after it.
    pub fn events(&self) -> String {
        format!("refs/conference/{}/events", self.name)
    }

    /// Every attempt (kept or not) is a parent of a commit on this chain, so gc and push keep it.
    pub fn attempts(&self) -> String {
        format!("refs/conference/{}/attempts", self.name)
    }

    /// A researcher's branch: kept snapshots only.
    pub fn researcher(&self, id: &str) -> String {
        format!("refs/heads/{}", self.researcher_branch(id))
    }

    /// The short branch name (what `git log` and `git worktree list` show).
    pub fn researcher_branch(&self, id: &str) -> String {
        format!("conference/{}/researcher-{}", self.name, id)
    }

    /// The best branch: validated findings, cherry-picked.
    pub fn best(&self) -> String {
        format!("refs/heads/{}", self.best_branch())
    }

    pub fn best_branch(&self) -> String {
        format!("conference/{}/best", self.name)
    }

    /// Who runs a slot (a researcher's ID, or `chair` for the round's shared phases) when the
    /// conference runs on several machines: a lease commit naming the machine and its heartbeat.
    pub fn lease(&self, slot: &str) -> String {
        format!("refs/conference/{}/leases/{slot}", self.name)
    }

    /// On a shared remote: the chain keeping reachable every attempt one machine made (each
    /// machine writes only its own, so machines never contend on it).
    pub fn machine_attempts(&self, machine: &str) -> String {
        format!("refs/conference/{}/machines/{machine}/attempts", self.name)
    }

    /// On a shared remote: the notes one machine wrote; readers merge every machine's with
    /// `cat_sort_uniq`.
    pub fn machine_notes(&self, machine: &str) -> String {
        format!("{MACHINE_NOTES_PREFIX}{}/{machine}", self.name)
    }

    /// On several machines: where this clone keeps the shared remote's event log as it last
    /// saw it (`<view>/events`) and the remote's conference branches (`<view>/heads/<branch>`).
    /// Not under `refs/remotes/`, where a user's `git fetch --prune` or `git remote prune`
    /// would delete them mid-run, nor under `refs/conference/`, which `push` publishes: git's
    /// own commands never prune `refs/conference-shared/`. `remote_key` is the remote's name,
    /// or a ref-safe form of its URL.
    pub fn shared_remote_view(&self, remote_key: &str) -> String {
        format!("{SHARED_REMOTE_VIEWS}{remote_key}/{}", self.name)
    }

    /// Whether `full` is under one of this conference's shared remote views, whatever the
    /// remote (`clean --all` deletes them). A remote key holds no `/`.
    pub fn is_in_shared_remote_view(&self, full: &str) -> bool {
        full.strip_prefix(SHARED_REMOTE_VIEWS)
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(_, rest)| rest.strip_prefix(self.name.as_str()))
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Refspecs that push the whole conference. The event log and attempts are chains, and best
    /// only moves forward, so without `force` a push that would rewind the remote's copy of
    /// them is refused (all refs or none: the push is atomic). A researcher branch points at its
    /// best head, which with branching on may move to another branch of the tree: it is always
    /// pushed, since the event log pushed with it says where it belongs.
    pub fn push_refspecs(&self, force: bool) -> Vec<String> {
        let plus = if force { "+" } else { "" };
        vec![
            format!(
                "{plus}refs/conference/{0}/*:refs/conference/{0}/*",
                self.name
            ),
            format!(
                "{plus}refs/heads/conference/{0}/best:refs/heads/conference/{0}/best",
                self.name
            ),
            format!(
                "+refs/heads/conference/{0}/researcher-*:refs/heads/conference/{0}/researcher-*",
                self.name
            ),
        ]
    }

    /// The folder of requests (`steer`, `answer`, `stop`, `approve`) waiting for the runner
    /// (`engine::phases::talk`): outside `refs/conference/<name>/`, so `push` never publishes one.
    pub fn inbox(&self) -> String {
        format!("refs/conference-inbox/{}/", self.name)
    }

    /// Every ref glob owned by this conference (for `clean --all`).
    pub fn owned_prefixes(&self) -> Vec<String> {
        vec![
            format!("refs/conference/{}/", self.name),
            format!("refs/heads/conference/{}/", self.name),
            self.inbox(),
        ]
    }
}

/// Existing refs that would stop git from creating this conference's refs: a ref named like
/// one of their parent folders (a branch named `conference`, or `conference/<name>`). Checked
/// before a conference is created, so that a refused start leaves nothing behind.
pub fn blocking_refs(repo: &git2::Repository, name: &str) -> Vec<String> {
    [
        "refs/conference".to_string(),
        format!("refs/conference/{name}"),
        "refs/heads/conference".to_string(),
        format!("refs/heads/conference/{name}"),
    ]
    .into_iter()
    .filter(|r| repo.find_reference(r).is_ok())
    .collect()
}

/// Conference names found under `refs/conference/*/events`.
pub fn conference_name_from_events_ref(refname: &str) -> Option<&str> {
    refname
        .strip_prefix("refs/conference/")?
        .strip_suffix("/events")
}

/// The glob that lists every conference's event log.
pub const EVENTS_GLOB: &str = "refs/conference/*/events";

/// Names of the conferences in the repository (those with an event log), sorted.
pub fn conference_names(repo: &git2::Repository) -> Result<Vec<String>, git2::Error> {
    let mut names = Vec::new();
    for r in repo.references_glob(EVENTS_GLOB)? {
        let r = r?;
        if let Some(name) = r.name().and_then(conference_name_from_events_ref) {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// A name is usable in ref names and paths: lowercase letters, digits, `-`, `_`, `.` (not leading).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Folders git-conference keeps next to the conferences' own under `<git-common-dir>/conference/`
/// (event hooks): no conference may be named like one, or its run folder would be that folder
/// (and `clean --all` would delete it).
pub const RESERVED_NAMES: &[&str] = &["hooks"];

/// Whether `name` is one of [`RESERVED_NAMES`] (in any case: file systems may fold it).
pub fn is_reserved_name(name: &str) -> bool {
    RESERVED_NAMES.iter().any(|r| r.eq_ignore_ascii_case(name))
}

/// A slug of a title: "Faster tokenizer" -> "faster-tokenizer".
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    let out: String = out.chars().take(48).collect();
    out.trim_end_matches('-').to_string()
}

/// Where `fetch` puts what it receives before it decides what to take, per remote: the
/// remote's conference refs under `<ns>/conference/…` and `<ns>/heads/conference/…`. They stay
/// after the fetch, so that a log that was not taken can be looked at.
pub fn remote_tracking_namespace(remote: &str) -> String {
    format!("refs/conference-remotes/{}", remote_key(remote))
}

/// A ref name component for `remote`: a remote's name as it is; a path or URL (which may hold
/// `/`, `:` or `..`) as `url-<slug>-<hash>`, the same for the same text.
pub fn remote_key(remote: &str) -> String {
    let plain = !remote.is_empty()
        && !remote.starts_with(['.', '-'])
        && !remote.ends_with(".lock")
        && remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !remote.contains("..");
    if plain {
        return remote.to_string();
    }
    let hash = git2::Oid::hash_object(git2::ObjectType::Blob, remote.as_bytes())
        .map(|o| o.to_string()[..12].to_string())
        .unwrap_or_default();
    let slug = slug(remote);
    let slug: String = slug
        .chars()
        .rev()
        .take(24)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("url-{}-{hash}", slug.trim_start_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let r = ConferenceRefs::new("tok");
        assert_eq!(r.events(), "refs/conference/tok/events");
        assert_eq!(r.researcher("B"), "refs/heads/conference/tok/researcher-B");
        assert_eq!(r.best(), "refs/heads/conference/tok/best");
        assert_eq!(conference_name_from_events_ref(&r.events()), Some("tok"));
        assert_eq!(slug("Faster tokenizer!  v2"), "faster-tokenizer-v2");
        assert!(is_valid_name("faster-tokenizer"));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name(""));
    }
}
