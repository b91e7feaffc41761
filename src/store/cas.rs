//! Compare-and-swap of a ref, the one way every ref git-conference owns moves.
//!
//! A ref moves only from the value its writer read: a crash before the swap leaves the old
//! value, a crash after it has recorded the step, and a second writer that moved it meanwhile
//! makes the swap fail instead of being overwritten. Refs several writers share (the notes, the
//! attempts chain: every conference of a repository, every researcher) retry through
//! [`with_backoff`], reading the new value each time; the event log has one writer and does not.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};

/// Moves `name` to `new` only if it still points at `expected` (None: must not exist yet).
/// Ok(false): another writer moved it first.
pub fn try_update(
    repo: &Repository,
    name: &str,
    new: Oid,
    expected: Option<Oid>,
    log_message: &str,
) -> Result<bool> {
    // Every ref a conference moves keeps a reflog: the way back if git loses its objects.
    super::recovery::keep_log(repo, name);
    // A ref libgit2 does not see may be one `git pack-refs` is moving: git itself says.
    if expected.is_none() && absent_says_git(repo, name)?.is_some() {
        return Ok(false);
    }
    // What the ref will name survives a `git gc --prune=now` that runs meanwhile.
    let visited = super::protect::new_objects(repo, new, expected)
        .with_context(|| format!("{name} was not moved"))?;
    let mut locked = Backoff::new(LOCKED_FIRST_WAIT, LOCKED_MAX_WAIT, Some(LOCKED_CAP));
    loop {
        let result = match expected {
            Some(old) => repo.reference_matching(name, new, true, old, log_message),
            None => repo.reference(name, new, false, log_message),
        };
        return match result {
            Ok(_) => after_a_running_gc(repo, name, new, expected, &visited).map(|()| true),
            // Held for an instant by another git command (`git gc` packs refs, and removes the
            // folders it emptied): wait for it.
            Err(e) if transient(&e) => match locked.next_delay() {
                Some(wait) => {
                    std::thread::sleep(wait);
                    continue;
                }
                // Still held after the cap: the swap counts as lost.
                None if e.code() == git2::ErrorCode::Locked => Ok(false),
                None => Err(e).with_context(|| format!("cannot update {name}")),
            },
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::Modified | git2::ErrorCode::Exists | git2::ErrorCode::Locked
                ) =>
            {
                Ok(false)
            }
            // Deleted since it was read (by an agent, `git update-ref -d`): moved first, as
            // far as this swap goes; the caller reads it again.
            Err(e) if e.code() == git2::ErrorCode::NotFound && expected.is_some() => Ok(false),
            Err(e) => Err(e).with_context(|| format!("cannot update {name}")),
        };
    }
}

/// After `name` moved from `expected` to `new`: a `git gc` running meanwhile (its `gc.pid`
/// exists while it runs) may have read the refs before the move and, with `--prune=now`, delete
/// the new objects after it. Once it has ended, they are checked; when some are gone the ref goes
/// back to `expected` (reachable all along, so whole) and the caller learns why.
fn after_a_running_gc(
    repo: &Repository,
    name: &str,
    new: Oid,
    expected: Option<Oid>,
    visited: &super::protect::Visited,
) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while a_gc_prunes_now(repo) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let Err(gone) = super::protect::still_there(repo, visited) else {
        return Ok(());
    };
    let message = "git conference: put back (a git gc deleted what it named)";
    let put_back = match expected {
        Some(old) => repo
            .reference_matching(name, old, true, new, message)
            .map(drop),
        None => repo.find_reference(name).and_then(|mut r| r.delete()),
    };
    if put_back.is_ok() {
        forget_the_move(repo, name, new);
    }
    Err(gone.context(format!("{name} was put back where it was")))
}

/// Whether a `git gc` that prunes every unreachable object (`--prune=now`, or `gc.pruneExpire`
/// set to `now`) runs now: its `gc.pid` names it while it runs. A `git gc --auto` that git
/// starts in the background prunes only objects older than two weeks, which the dating ahead
/// keeps safe: no need to wait for it.
fn a_gc_prunes_now(repo: &Repository) -> bool {
    let Ok(pid_file) = std::fs::read_to_string(repo.commondir().join("gc.pid")) else {
        return false;
    };
    let now_words = |w: &str| matches!(w, "now" | "all");
    let configured = repo
        .config()
        .and_then(|c| c.get_string("gc.pruneExpire"))
        .is_ok_and(|v| now_words(v.trim()));
    let pid = pid_file.split_whitespace().next().unwrap_or_default();
    if !std::path::Path::new("/proc/self").exists() {
        // Nothing says which gc it is, nor whether it still runs: it is waited for.
        return true;
    }
    let Ok(args) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        // Left by a gc that was killed.
        return false;
    };
    let args: Vec<&[u8]> = args.split(|b| *b == 0).collect();
    let asked = args
        .iter()
        .enumerate()
        .any(|(i, a)| match a.strip_prefix(b"--prune=") {
            Some(v) => now_words(&String::from_utf8_lossy(v)),
            None => {
                *a == b"--prune"
                    && args
                        .get(i + 1)
                        .is_some_and(|v| now_words(&String::from_utf8_lossy(v)))
            }
        });
    asked || configured
}

/// Drops the two newest entries of `name`'s reflog when they are a move to `new` and its undoing:
/// `new` is gone, and `git fsck` reports an entry naming a missing object.
fn forget_the_move(repo: &Repository, name: &str, new: Oid) {
    let Ok(mut log) = repo.reflog(name) else {
        return;
    };
    let undone = log.get(0).is_some_and(|e| e.id_old() == new);
    let moved = log.get(1).is_some_and(|e| e.id_new() == new);
    if undone && moved {
        let _ = log.remove(0, true);
        let _ = log.remove(0, true);
        let _ = log.write();
    }
}

/// The commit ref `name` points at (None: there is no such ref). When libgit2 finds none, git
/// itself is asked: while `git pack-refs` (run by `git gc`) moves refs into `packed-refs`,
/// libgit2 can miss a ref that exists, and a writer that took it for absent would start it
/// again and cut off everything it named.
pub fn read(repo: &Repository, name: &str) -> Result<Option<Oid>> {
    match repo.find_reference(name) {
        Ok(r) => Ok(Some(r.peel_to_commit()?.id())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => absent_says_git(repo, name),
        Err(e) => Err(e.into()),
    }
}

/// Where git's own `rev-parse` finds ref `name` (None: nowhere).
fn absent_says_git(repo: &Repository, name: &str) -> Result<Option<Oid>> {
    let out = crate::exec::command("git", crate::exec::GitEnv::Clear)
        .arg("--git-dir")
        .arg(repo.commondir())
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{name}^{{commit}}"))
        .output()
        .context("cannot run git rev-parse")?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(if out.status.success() {
        Some(crate::model::printed_id(&text)?)
    } else {
        None
    })
}

/// A failure another git command causes for an instant: the ref's lock file taken, or its
/// folder removed between its creation and the lock's (`git pack-refs --prune`).
fn transient(e: &git2::Error) -> bool {
    e.code() == git2::ErrorCode::Locked
        || e.class() == git2::ErrorClass::Os && e.message().contains("No such file or directory")
}

/// A ref locked by another git command is tried again, waiting 5 ms and longer up to 20 ms
/// (with [`Backoff`]'s jitter), for 2 s before the swap counts as lost (was: 200 tries 10 ms
/// apart, the same 2 s).
const LOCKED_FIRST_WAIT: Duration = Duration::from_millis(5);
const LOCKED_MAX_WAIT: Duration = Duration::from_millis(20);
const LOCKED_CAP: Duration = Duration::from_secs(2);

/// [`try_update`] for a ref with one writer: a lost race is an error naming the likely cause.
pub fn update(
    repo: &Repository,
    name: &str,
    new: Oid,
    expected: Option<Oid>,
    log_message: &str,
) -> Result<()> {
    if try_update(repo, name, new, expected, log_message)? {
        return Ok(());
    }
    bail!(
        "{name} was changed by someone else (expected {}); is another git-conference running?",
        expected
            .map(|o| o.to_string())
            .unwrap_or_else(|| "no ref".into())
    )
}

/// How many times a shared ref's writer tries before giving up.
pub const SHARED_TRIES: u64 = 20;

/// Runs `attempt` (read the ref, build on it, [`try_update`]) until it returns Some, waiting a
/// little longer after each lost race ([`Backoff`]); gives up after `tries`.
pub fn with_backoff<T>(
    name: &str,
    tries: u64,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let mut backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(200), None);
    for n in 0..tries {
        if n > 0 {
            std::thread::sleep(backoff.next_delay().unwrap_or_default());
        }
        if let Some(done) = attempt()? {
            return Ok(done);
        }
    }
    bail!("could not update {name}: it kept changing under us")
}

/// The one backoff policy of every retry loop, local refs and the shared remote alike: each wait
/// doubles from `first` up to `max`, with up to half of it added at random (writers that lost
/// the same race do not all come back at the same instant), until the time cap (from the first
/// wait) has passed.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    max: Duration,
    deadline: Option<Instant>,
}

impl Backoff {
    /// Waits from `first` up to `max`; `cap` None: no time cap.
    pub fn new(first: Duration, max: Duration, cap: Option<Duration>) -> Backoff {
        Backoff {
            next: first,
            max,
            deadline: cap.map(|cap| Instant::now() + cap),
        }
    }

    /// How long to wait before the next try; None once the time cap has passed.
    pub fn next_delay(&mut self) -> Option<Duration> {
        let now = Instant::now();
        if self.deadline.is_some_and(|end| now >= end) {
            return None;
        }
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jitter = base.mul_f64(random_fraction() / 2.0);
        let delay = (base + jitter).min(self.max);
        Some(match self.deadline {
            Some(end) => delay.min(end - now),
            None => delay,
        })
    }
}

/// A number in [0, 1), different in every call and every process (std's hash keys are seeded at
/// random per map).
fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    hasher.write_u128(now.unwrap_or_default().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_its_max_and_stops_at_its_cap() {
        let first = Duration::from_millis(100);
        let mut backoff = Backoff::new(first, Duration::from_millis(350), None);
        let delays: Vec<Duration> = (0..5).map(|_| backoff.next_delay().unwrap()).collect();
        assert!(
            delays[0] >= first && delays[0] <= first * 3 / 2,
            "{delays:?}"
        );
        assert!(
            delays[1] >= first * 2 && delays[1] <= first * 3,
            "{delays:?}"
        );
        assert!(delays[2..].iter().all(|d| *d <= Duration::from_millis(350)));
        let jittered = (0..20)
            .map(|_| Backoff::new(first, first * 4, None).next_delay().unwrap())
            .collect::<std::collections::BTreeSet<_>>();
        assert!(jittered.len() > 1, "jitter varies: {jittered:?}");
        let mut capped = Backoff::new(first, first, Some(Duration::from_millis(150)));
        assert!(capped.next_delay().is_some());
        std::thread::sleep(Duration::from_millis(160));
        assert_eq!(capped.next_delay(), None, "the time cap ends the retries");
    }

    /// A ref deleted after its writer read it is a swap lost, not an error (the writer reads it
    /// again): an agent that deletes `refs/notes/conference` must not stop the run.
    #[test]
    fn a_ref_deleted_under_its_writer_is_a_lost_swap() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init(tmp.path()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let a = repo.commit(None, &sig, &sig, "a", &tree, &[]).unwrap();
        let b = repo.commit(None, &sig, &sig, "b", &tree, &[]).unwrap();
        let name = "refs/notes/x";
        assert!(try_update(&repo, name, a, None, "t").unwrap());
        repo.find_reference(name).unwrap().delete().unwrap();
        assert!(!try_update(&repo, name, b, Some(a), "t").unwrap());
        assert!(try_update(&repo, name, b, None, "t").unwrap());
    }
}
