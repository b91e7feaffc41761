//! `push` and `fetch` as the engine runs them: share every ref and note of a conference through the user's own `git`
//! (credential helpers, ssh config and insteadOf apply). Fetched notes are merged with
//! `cat_sort_uniq`, so verdicts recorded on two machines both survive.
//!
//! `fetch` never rewinds a conference: it fetches into a namespace of its own, then takes a
//! conference's refs only when the remote's event log continues the local one, with the
//! conference's run lock held (not while it runs here).
//!
//! Both carry the repository's knowledge store (`refs/conference-knowledge/store`): the remote's is
//! fetched and merged into the local one first, so neither side loses an entry.

use anyhow::{Context, Result};
use std::path::Path;

use git2::{Oid, Repository};

use crate::git::{git, git_remote, worktree};
use crate::lock::RunLock;
use crate::remote::ONLY_THE_REFSPECS;
use crate::store::refs::MACHINE_NOTES_PREFIX;
use crate::store::{ConferenceRefs, NOTES_REF};

pub fn push(repo: &Repository, name: &str, remote: &str, force: bool) -> Result<()> {
    let refs = ConferenceRefs::new(name);
    // All refs or none: a refused ref (the remote's copy would rewind) moves nothing, so the
    // remote never holds branches of one history and an event log of another.
    let mut cmd = vec![
        "push".to_string(),
        "--atomic".to_string(),
        remote.to_string(),
    ];
    cmd.extend(refs.push_refspecs(force));
    if let Some(line) = super::knowledge_exchange::to_push(repo, remote, force)? {
        cmd.push(line);
    }
    if repo.find_reference(NOTES_REF).is_ok() {
        let plus = if force { "+" } else { "" };
        cmd.push(format!("{plus}{NOTES_REF}:{NOTES_REF}"));
    }
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    // From the user's directory, so that a remote given as a relative path means what it says.
    if let Err(e) = git_remote(Path::new("."), &argv) {
        let text = format!("{e:#}");
        if text.contains("[rejected]")
            || text.contains("non-fast-forward")
            || text.contains("fetch first")
        {
            anyhow::bail!(
                "{text}\nhint: the remote has events or notes of `{name}` that this repository lacks; \
                 run `git conference fetch {remote}` (it merges notes and takes the newer event log), \
                 then push again; `git conference push {remote} --force` overwrites the remote's copy",
            );
        }
        return Err(e);
    }
    println!("Pushed conference `{name}` to {remote}.");
    Ok(())
}

use crate::store::refs::{remote_key, remote_tracking_namespace as tracking_namespace};

pub fn fetch(repo: &Repository, remote: &str, name: Option<&str>) -> Result<()> {
    let dir = repo.commondir().to_path_buf();
    let ns = tracking_namespace(remote);
    let pattern = match name {
        Some(name) => format!("{name}/*"),
        None => "*".into(),
    };
    let remote_notes = format!("refs/notes/conference-remotes/{}", remote_key(remote));
    // Notes each machine of a conference on several machines published, merged below too.
    let machines_notes = format!("{remote_notes}-machines/");
    // One fetch at a time; what a killed one (or the `git fetch` it ran) left locked on the
    // refs only a fetch writes is then stale, and cleared.
    let _fetching = RunLock::acquire_for(
        &dir.join("conference").join(".fetch"),
        "`git conference fetch`",
    )?;
    crate::engine::record::recovery::clear_stale_locks_of(
        &dir,
        &[&ns, &remote_notes, &machines_notes, NOTES_MERGE_SCRATCH],
    );
    crate::engine::record::recovery::clear_shared_locks(&dir);
    // What the last fetch left there is replaced by what the remote has now.
    for name in ref_names(repo, &format!("{ns}/*"))? {
        repo.find_reference(&name)?.delete()?;
    }
    for name in ref_names(repo, &format!("{machines_notes}*"))? {
        repo.find_reference(&name)?.delete()?;
    }
    let specs = [
        format!("+refs/conference/{pattern}:{ns}/conference/{pattern}"),
        format!("+refs/heads/conference/{pattern}:{ns}/heads/conference/{pattern}"),
        format!("+{MACHINE_NOTES_PREFIX}{pattern}:{machines_notes}{pattern}"),
        format!("+{NOTES_REF}:{remote_notes}"),
    ];
    // Only into the refs named (`--refmap=`): the user's remote-tracking branches stay theirs.
    let mut argv = vec!["fetch", "--quiet", ONLY_THE_REFSPECS, remote];
    argv.extend(specs.iter().map(String::as_str));
    // From the user's directory, so that a remote given as a relative path means what it says.
    let here = Path::new(".");
    if let Err(e) = git_remote(here, &argv) {
        if !format!("{e:#}").contains("couldn't find remote ref") {
            return Err(e);
        }
        // The remote has no notes of its own: fetch the rest alone.
        let mut argv = vec!["fetch", "--quiet", ONLY_THE_REFSPECS, remote];
        argv.extend(specs[..3].iter().map(String::as_str));
        git_remote(here, &argv)?;
        let _ = git(&dir, &["update-ref", "-d", &remote_notes]);
    }
    let fetched: Vec<String> = ref_names(repo, &format!("{ns}/conference/*/events"))?
        .iter()
        .filter_map(|r| {
            r.strip_prefix(&format!("{ns}/conference/"))?
                .strip_suffix("/events")
                .map(str::to_string)
        })
        .collect();
    if let Some(name) = name {
        if !fetched.iter().any(|f| f == name) {
            anyhow::bail!("{remote} has no conference named `{name}`");
        }
    }
    if fetched.is_empty() {
        println!("{remote} has no conferences (share one with `git conference push`).");
    }
    // No runner may write a conference's refs while they are updated.
    let mut locks = Vec::new();
    for name in &fetched {
        let run_dir = worktree::run_dir(repo, name);
        locks.push(RunLock::acquire(&run_dir, name).map_err(|e| {
            anyhow::anyhow!("{e:#}; fetch again once it has stopped (nothing was changed)")
        })?);
        // Its refs' lock files are a killed run's or a killed fetch's now.
        crate::engine::record::recovery::clear_stale_ref_locks(&dir, name);
    }
    let mut refused = Vec::new();
    for name in &fetched {
        match take(repo, &ns, remote, name)? {
            Taken::Refused(why) => {
                eprintln!("{why}");
                refused.push(name.clone());
            }
            Taken::Said(line) => println!("{line}"),
        }
    }
    merge_repository_wide(repo, remote, &remote_notes, &machines_notes)?;
    drop(locks);
    if !refused.is_empty() {
        anyhow::bail!(
            "not updated from {remote}: {} (their event logs diverged; see above)",
            refused.join(", ")
        );
    }
    Ok(())
}

enum Taken {
    /// One line for stdout: what happened to the conference.
    Said(String),
    /// Not taken: why, and what to do.
    Refused(String),
}

fn ref_names(repo: &Repository, glob: &str) -> Result<Vec<String>> {
    Ok(repo
        .references_glob(glob)?
        .filter_map(|r| r.ok().and_then(|r| r.name().map(str::to_string)))
        .collect())
}

fn target(repo: &Repository, name: &str) -> Option<Oid> {
    repo.find_reference(name).ok().and_then(|r| r.target())
}

/// Whether `old` is `new` or one of its ancestors (moving from `old` to `new` loses nothing).
fn fast_forward(repo: &Repository, old: Oid, new: Oid) -> bool {
    old == new || repo.graph_descendant_of(new, old).unwrap_or(false)
}

/// Takes conference `name`'s fetched refs from the tracking namespace when the remote's event log
/// continues the local one (or there is none here). An event log only grows: one that is behind
/// the local log is not taken (the local one is kept), and one that diverged is refused.
fn take(repo: &Repository, ns: &str, remote: &str, name: &str) -> Result<Taken> {
    let refs = ConferenceRefs::new(name);
    let local_ref = refs.events();
    let remote_ref = format!("{ns}/conference/{name}/events");
    let theirs = target(repo, &remote_ref).context("fetched event log vanished")?;
    let ours = target(repo, &local_ref);
    let new_events = match ours {
        Some(ours) if ours == theirs => 0,
        Some(ours) if fast_forward(repo, theirs, ours) => {
            let (ahead, _) = repo.graph_ahead_behind(ours, theirs)?;
            return Ok(Taken::Said(format!(
                "{name}: the event log here is {ahead} event(s) ahead of {remote}'s; kept it (share it with `git conference push {remote} --name {name}`)"
            )));
        }
        Some(ours) if !fast_forward(repo, ours, theirs) => {
            let (here, there) = repo.graph_ahead_behind(ours, theirs)?;
            return Ok(Taken::Refused(format!(
                "{name}: the event log here and {remote}'s have diverged ({here} event(s) only here, {there} only on {remote}); \
                 refusing to update `{name}`, nothing of it was changed. {remote}'s log stays at {remote_ref} \
                 (compare with `git log --oneline {local_ref}...{remote_ref}`). A conference follows one log: \
                 keep this one and resume here, or keep a copy of it (`git update-ref refs/conference-saved/{name}/events {local_ref}`) \
                 and take {remote}'s with `git update-ref {local_ref} {remote_ref}`, then fetch again."
            )));
        }
        Some(ours) => repo.graph_ahead_behind(theirs, ours)?.0,
        None => {
            let mut walk = repo.revwalk()?;
            walk.push(theirs)?;
            walk.simplify_first_parent()?;
            walk.count()
        }
    };
    // Everything else of the conference first, the event log last: a kill in between leaves a
    // log that the next fetch takes again.
    let mut kept = Vec::new();
    let prefix = format!("{ns}/conference/{name}/");
    for fetched in ref_names(repo, &format!("{prefix}*"))? {
        let local = format!("refs/conference/{name}/{}", &fetched[prefix.len()..]);
        if local == local_ref {
            continue;
        }
        let new = target(repo, &fetched).context("fetched ref vanished")?;
        match target(repo, &local) {
            Some(old) if fast_forward(repo, new, old) => {}
            Some(old) if fast_forward(repo, old, new) => update(repo, &local, new, Some(old))?,
            // Attempts kept reachable on both sides: a commit with both chains as parents.
            Some(old) => {
                let sig = crate::store::signature(repo);
                let tree = repo.find_tree(repo.treebuilder(None)?.write()?)?;
                let parents = [repo.find_commit(old)?, repo.find_commit(new)?];
                let merged = repo.commit(
                    None,
                    &sig,
                    &sig,
                    &format!("attempts: keep those from {remote} too"),
                    &tree,
                    &[&parents[0], &parents[1]],
                )?;
                update(repo, &local, merged, Some(old))?;
            }
            None => update(repo, &local, new, None)?,
        }
    }
    let branches = take_branches(repo, ns, remote, &refs, (ours, theirs), &mut kept)?;
    update(repo, &local_ref, theirs, ours)?;
    let mut line = match ours {
        None => format!(
            "{name}: fetched from {remote} ({new_events} events); it runs nothing here until you approve its commands with `git conference trust {name}`"
        ),
        Some(_) if new_events == 0 => format!("{name}: up to date with {remote}"),
        Some(_) => format!("{name}: {new_events} new event(s) from {remote}"),
    };
    line.push_str(&branches);
    if !kept.is_empty() {
        line.push_str(&format!(
            "; kept the local {} (not an ancestor of {remote}'s; `git conference resume {name}` says how to go on)",
            kept.join(", ")
        ));
    }
    Ok(Taken::Said(line))
}

/// Moves the conference's branches where the fetched event log (at `theirs`) says, never where
/// the remote's branches point (anyone with push access can move those); a local branch that
/// is not an ancestor, and not where the local event log (at `ours`) put it, is kept (named in
/// `kept`): with branching on, a researcher's branch moves to another branch of the tree.
/// Returns what the fetch line adds: the branches whose remote copy points elsewhere, and
/// those whose commit the remote lacks.
fn take_branches(
    repo: &Repository,
    ns: &str,
    remote: &str,
    refs: &ConferenceRefs,
    (ours, theirs): (Option<Oid>, Oid),
    kept: &mut Vec<String>,
) -> Result<String> {
    let (mut from_log, mut missing) = (Vec::new(), Vec::new());
    let placed_here = match ours {
        Some(ours) => branches_of_log(repo, refs, ours).unwrap_or_default(),
        None => Vec::new(),
    };
    for (local, new) in branches_of_log(repo, refs, theirs)? {
        let short = local.trim_start_matches("refs/heads/").to_string();
        let fetched = format!("{ns}/heads/{short}");
        if target(repo, &fetched).is_some_and(|there| there != new) {
            from_log.push(short.clone());
        }
        if repo.find_commit(new).is_err() {
            missing.push(short);
            continue;
        }
        match target(repo, &local) {
            None => update(repo, &local, new, None)?,
            Some(old) if fast_forward(repo, old, new) => update(repo, &local, new, Some(old))?,
            // Where the local log put it: the fetched log moves it on.
            Some(old) if placed_here.contains(&(local.clone(), old)) => {
                update(repo, &local, new, Some(old))?
            }
            // The remote's branch is behind (a kill before it moved) or moved by hand here.
            Some(old) if fast_forward(repo, new, old) => {}
            Some(old) => kept.push(format!(
                "{short} (here {}, on {remote} {})",
                &crate::model::short_oid(old),
                &crate::model::short_oid(new)
            )),
        }
    }
    let mut said = String::new();
    if !from_log.is_empty() {
        said.push_str(&format!(
            "; {} where its event log says ({remote}'s branch points elsewhere)",
            from_log.join(", ")
        ));
    }
    if !missing.is_empty() {
        said.push_str(&format!(
            "; not taken: {} (the commit its event log names is not on {remote})",
            missing.join(", ")
        ));
    }
    Ok(said)
}

/// The conference branches the state at event commit `tip` places: (full ref name, commit).
fn branches_of_log(
    repo: &Repository,
    refs: &ConferenceRefs,
    tip: Oid,
) -> Result<Vec<(String, Oid)>> {
    let tree = repo.find_commit(tip)?.tree_id();
    let bytes = crate::store::events::read_path(repo, tree, crate::model::state::files::STATE)?
        .context("the fetched event log has no state.json")?;
    let state = crate::engine::record::stored::parse(&bytes, &refs.name).map_err(|why| {
        anyhow::anyhow!("the fetched state of `{}` is not valid: {why}", refs.name)
    })?;
    let mut out = Vec::new();
    for (id, r) in &state.researchers {
        out.push((refs.researcher(id), r.head.oid()));
    }
    out.push((refs.best(), state.best.commit.oid()));
    Ok(out)
}

/// Merges what every conference of the repository shares (the knowledge store, the notes and
/// each machine's notes) from what `fetch` received of `remote`.
fn merge_repository_wide(
    repo: &Repository,
    remote: &str,
    remote_notes: &str,
    machines_notes: &str,
) -> Result<()> {
    if let Some(line) = super::knowledge_exchange::take(repo, remote)? {
        println!("{line}");
    }
    let dir = repo.commondir().to_path_buf();
    merge_notes(repo, &dir, remote_notes)?;
    for machine_notes in ref_names(repo, &format!("{machines_notes}*"))? {
        merge_notes(repo, &dir, &machine_notes)?;
    }
    Ok(())
}

/// Points `name` at `new` if it is still at `old` (None: it must not exist yet).
fn update(repo: &Repository, name: &str, new: Oid, old: Option<Oid>) -> Result<()> {
    if old == Some(new) {
        return Ok(());
    }
    crate::store::events::cas_update(repo, name, new, old, "git conference fetch")
        .with_context(|| format!("{name} changed while fetching; fetch again"))
}

/// Merges the fetched notes into the local ones with `cat_sort_uniq` (a line recorded on either
/// machine survives). The merge runs on a scratch notes ref, and the result replaces the local
/// notes only if no runner wrote a note meanwhile (else it is merged again).
/// Where `fetch` merges the fetched notes with the local ones before the notes ref moves.
const NOTES_MERGE_SCRATCH: &str = "refs/notes/conference-fetch-merge";

fn merge_notes(repo: &Repository, dir: &Path, remote_notes: &str) -> Result<()> {
    let Some(theirs) = target(repo, remote_notes) else {
        return Ok(());
    };
    let scratch = NOTES_MERGE_SCRATCH;
    for _ in 0..10 {
        let ours = target(repo, NOTES_REF);
        let merged = match ours {
            None => theirs,
            Some(ours) if fast_forward(repo, theirs, ours) => return Ok(()),
            Some(ours) => {
                git(dir, &["update-ref", scratch, &ours.to_string()])?;
                let merged = git(
                    dir,
                    &[
                        "notes",
                        "--ref",
                        scratch,
                        "merge",
                        "-q",
                        "-s",
                        "cat_sort_uniq",
                        remote_notes,
                    ],
                )
                .and_then(|_| target(repo, scratch).context("notes merge left no result"));
                let _ = git(dir, &["update-ref", "-d", scratch]);
                merged?
            }
        };
        if crate::store::events::cas_update(repo, NOTES_REF, merged, ours, "git conference fetch")
            .is_ok()
        {
            return Ok(());
        }
    }
    anyhow::bail!(
        "could not merge the fetched notes into {NOTES_REF}: it kept changing; fetch again"
    )
}
