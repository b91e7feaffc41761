//! One atomic compare-and-swap push of several refs to a shared remote, through the user's own
//! `git` (its credential helpers, ssh config and `insteadOf` apply).
//!
//! Every ref of the push names the value the remote must still hold (`--force-with-lease=<ref>:
//! <expected>`, empty for "must not exist"), and `--atomic` makes the remote take all of them or
//! none. A remote that moved any of them answers `(stale info)`: [`Pushed::Rejected`] names those
//! refs, and the caller fetches and tries again; a push is never forced over another machine's.

use std::path::Path;

use anyhow::{bail, Result};
use git2::Oid;

/// What the remote must hold for a ref before the push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The ref must not exist: a create-only claim.
    Absent,
    /// The ref must point here.
    At(Oid),
}

/// One ref of an atomic push: `new` None deletes it.
#[derive(Debug, Clone)]
pub struct Update {
    pub name: String,
    pub new: Option<Oid>,
    pub expect: Expect,
}

/// How the remote answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    Accepted,
    /// Another machine moved these refs first; nothing of the push was taken.
    Rejected(Vec<String>),
}

/// Pushes `updates` to `remote` from the repository at `dir`, all or none.
pub fn push(dir: &Path, remote: &str, updates: &[Update]) -> Result<Pushed> {
    if updates.is_empty() {
        return Ok(Pushed::Accepted);
    }
    let mut args: Vec<String> = ["push", "--atomic", "--porcelain", "--no-verify"]
        .map(String::from)
        .to_vec();
    for u in updates {
        let expected = match u.expect {
            Expect::Absent => String::new(),
            Expect::At(oid) => oid.to_string(),
        };
        args.push(format!("--force-with-lease={}:{expected}", u.name));
    }
    args.push(remote.to_string());
    for u in updates {
        let source = u.new.map(|o| o.to_string()).unwrap_or_default();
        args.push(format!("{source}:{}", u.name));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crate::git::git_remote_output(dir, &argv)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rejected = rejected_refs(&stdout);
    if out.status.success() && rejected.is_empty() {
        return Ok(Pushed::Accepted);
    }
    if !rejected.is_empty() && rejected.iter().all(|(_, why)| lost_a_race(why)) {
        return Ok(Pushed::Rejected(
            rejected.into_iter().map(|(r, _)| r).collect(),
        ));
    }
    bail!(
        "git push to {remote} failed: {}",
        crate::git::failure_reason(&out)
    )
}

/// Whether a rejection means another machine moved the ref first: seen stale before the push
/// (`stale info`), or moved between the remote's advertisement and its update (the remote's
/// ref transaction failed, which `--atomic` reports for every ref of the push). A hook's refusal
/// or a permission error is not a lost race and fails the push.
fn lost_a_race(why: &str) -> bool {
    [
        "stale info",
        "atomic transaction failed",
        "atomic push failed",
        "failed to update ref",
        "cannot lock ref",
    ]
    .iter()
    .any(|reason| why.contains(reason))
}

/// The refs `git push --porcelain` reports as rejected (`!` lines), with the reason it gives.
fn rejected_refs(porcelain: &str) -> Vec<(String, String)> {
    porcelain
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("!\t")?;
            let (refs, why) = rest.split_once('\t').unwrap_or((rest, ""));
            let target = refs.rsplit_once(':').map_or(refs, |(_, to)| to);
            Some((target.to_string(), why.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_rejections_are_read() {
        let out = "To ../remote.git\n!\t0123:refs/conference/x/leases/A\t[rejected] (stale info)\n\
                   !\t4567:refs/conference/x/events\t[rejected] (atomic push failed)\nDone\n";
        assert_eq!(
            rejected_refs(out),
            [
                (
                    "refs/conference/x/leases/A".to_string(),
                    "[rejected] (stale info)".to_string()
                ),
                (
                    "refs/conference/x/events".to_string(),
                    "[rejected] (atomic push failed)".to_string()
                )
            ]
        );
        assert!(lost_a_race("[remote rejected] (atomic transaction failed)"));
        assert!(!lost_a_race(
            "[remote rejected] (pre-receive hook declined)"
        ));
        assert!(rejected_refs("To r\n=\trefs/a:refs/a\t[up to date]\nDone\n").is_empty());
    }
}
