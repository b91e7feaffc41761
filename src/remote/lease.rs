//! Leases on a shared remote: which machine runs a slot (a researcher, or `chair` for the round's
//! shared phases) of a conference that runs on several machines.
//!
//! A lease is a ref, `refs/conference/<name>/leases/<slot>`, pointing at a small parentless commit
//! that names the holder and its heartbeat count. Every move is one compare-and-swap push
//! ([`super::push`]):
//! - **claim**: create-only (the ref must not exist); of two machines racing, the remote takes
//!   exactly one;
//! - **renew**: from the value this machine pushed last to a new heartbeat; rejected means another
//!   machine took the lease over, and this one stops that slot;
//! - **take over**: from a value seen unchanged for longer than the lease (timed by the taker's own
//!   monotonic clock, never by comparing wall clocks of two machines), to this machine's;
//! - **release**: delete, from the value pushed last.
//!
//! Heartbeat commits have no parent, so a lease's history does not grow with its renewals.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use git2::{Oid, Repository};

use super::push::{push, Expect, Pushed, Update};
use crate::store::refs::ConferenceRefs;

/// A lease this machine holds.
#[derive(Debug, Clone)]
pub struct Held {
    pub refname: String,
    pub machine: String,
    /// The value this machine pushed last: what the remote must still hold for a renewal.
    pub value: Oid,
    pub beat: u64,
}

/// Where leases are kept and by whom they are taken: one conference on one remote, from the
/// repository at `dir`.
pub struct Leases<'a> {
    pub repo: &'a Repository,
    pub dir: &'a Path,
    pub remote: &'a str,
    pub refs: ConferenceRefs,
    pub machine: &'a str,
}

impl Leases<'_> {
    /// Claims `slot` if no machine holds it. None: another machine has it.
    pub fn claim(&self, slot: &str) -> Result<Option<Held>> {
        self.swap(slot, Expect::Absent, 0)
    }

    /// Renews `held`. False: another machine took it over (or released it); stop the slot.
    pub fn renew(&self, held: &mut Held) -> Result<bool> {
        let slot = slot_of(&held.refname);
        match self.swap(slot, Expect::At(held.value), held.beat + 1)? {
            Some(renewed) => {
                *held = renewed;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Takes `slot` over from the holder whose lease value `stale` the caller saw unchanged for
    /// longer than the lease. None: it moved meanwhile (renewed, or taken by another machine).
    pub fn take_over(&self, slot: &str, stale: Oid) -> Result<Option<Held>> {
        self.swap(slot, Expect::At(stale), 0)
    }

    /// Gives `held` back, so another machine may claim it at once; this clone's copy of the
    /// lease goes too (status reads the copies).
    pub fn release(&self, held: Held) -> Result<bool> {
        let update = Update {
            name: held.refname.clone(),
            new: None,
            expect: Expect::At(held.value),
        };
        let released = push(self.dir, self.remote, &[update])? == Pushed::Accepted;
        if released {
            if let Ok(mut copy) = self.repo.find_reference(&held.refname) {
                if copy.target() == Some(held.value) {
                    let _ = copy.delete();
                }
            }
        }
        Ok(released)
    }

    /// Every lease on the remote now: (slot, value). Reads ref values only (no objects).
    pub fn observe(&self) -> Result<Vec<(String, Oid)>> {
        let pattern = self.refs.lease("*");
        let out = crate::git::git_remote(self.dir, &["ls-remote", self.remote, &pattern])?;
        Ok(crate::git::listed_refs(&out)
            .into_iter()
            .map(|(name, id)| (slot_of(name).to_string(), id))
            .collect())
    }

    fn swap(&self, slot: &str, expect: Expect, beat: u64) -> Result<Option<Held>> {
        let refname = self.refs.lease(slot);
        let value = heartbeat(self.repo, slot, self.machine, beat)?;
        let update = Update {
            name: refname.clone(),
            new: Some(value),
            expect,
        };
        Ok(match push(self.dir, self.remote, &[update])? {
            Pushed::Accepted => Some(Held {
                refname,
                machine: self.machine.to_string(),
                value,
                beat,
            }),
            Pushed::Rejected(_) => None,
        })
    }
}

fn slot_of(refname: &str) -> &str {
    refname.rsplit('/').next().unwrap_or(refname)
}

/// Trailers of a heartbeat commit.
const HOLDER: &str = "Conference-Lease-Holder:";
const BEAT: &str = "Conference-Lease-Beat:";

/// A parentless commit naming `machine` as the holder of `slot` at heartbeat `beat`.
pub fn heartbeat(repo: &Repository, slot: &str, machine: &str, beat: u64) -> Result<Oid> {
    let tree = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    let sig = crate::store::signature(repo);
    let message = format!("lease {slot}\n\n{HOLDER} {machine}\n{BEAT} {beat}\n");
    Ok(repo.commit(None, &sig, &sig, &message, &tree, &[])?)
}

/// The holder a heartbeat commit names (None when it is not one, or not here).
pub fn holder(repo: &Repository, value: Oid) -> Option<String> {
    let commit = repo.find_commit(value).ok()?;
    let message = commit.message()?;
    message
        .lines()
        .find_map(|l| l.strip_prefix(HOLDER))
        .map(|h| h.trim().to_string())
}

/// A lease as this clone last saw it.
pub struct Seen {
    pub slot: String,
    pub holder: String,
    /// Seconds since its heartbeat was written, by the holder's clock against this one's.
    pub age_seconds: i64,
}

/// The leases of a conference in this clone's refs (`refs/conference/<name>/leases/*`: what the
/// last fetch or the last step of a machine taking part saw on the remote).
pub fn seen(repo: &Repository, refs: &ConferenceRefs) -> Vec<Seen> {
    let Ok(found) = repo.references_glob(&refs.lease("*")) else {
        return vec![];
    };
    let now = crate::clock::now_unix() as i64;
    found
        .flatten()
        .filter_map(|r| {
            let value = r.target()?;
            let written = repo.find_commit(value).ok()?.committer().when().seconds();
            let holder = holder(repo, value)?;
            if !super::valid_machine_name(&holder) {
                return None;
            }
            Some(Seen {
                slot: slot_of(r.name()?).to_string(),
                holder,
                age_seconds: (now - written).max(0),
            })
        })
        .collect()
}

/// Tells when a lease held by another machine has expired: its value has not changed for longer
/// than the lease plus a grace period, as this machine's own monotonic clock measures it.
#[derive(Debug, Default)]
pub struct Expiry {
    seen: Option<(Oid, Instant)>,
}

impl Expiry {
    /// Records the value seen now; returns it when it has stayed the same for longer than
    /// `lease + grace` (the value to take over from).
    pub fn check(&mut self, value: Oid, lease: Duration, grace: Duration) -> Option<Oid> {
        let now = Instant::now();
        match self.seen {
            Some((seen, since)) if seen == value => {
                (now.duration_since(since) > lease + grace).then_some(value)
            }
            _ => {
                self.seen = Some((value, now));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing::git;

    /// A bare remote and `n` clones of it, each with a commit.
    fn machines(n: usize) -> (tempfile::TempDir, Vec<std::path::PathBuf>) {
        let tmp = tempfile::tempdir().unwrap();
        let remote = tmp.path().join("remote.git");
        git(
            tmp.path(),
            &["init", "-q", "--bare", remote.to_str().unwrap()],
        );
        let clones = (0..n)
            .map(|i| {
                let dir = tmp.path().join(format!("machine-{i}"));
                git(
                    tmp.path(),
                    &[
                        "clone",
                        "-q",
                        remote.to_str().unwrap(),
                        dir.to_str().unwrap(),
                    ],
                );
                git(
                    &dir,
                    &[
                        "-c",
                        "user.name=t",
                        "-c",
                        "user.email=t@t",
                        "commit",
                        "-q",
                        "--allow-empty",
                        "-m",
                        "x",
                    ],
                );
                dir
            })
            .collect();
        (tmp, clones)
    }

    fn leases<'a>(repo: &'a Repository, dir: &'a Path, machine: &'a str) -> Leases<'a> {
        Leases {
            repo,
            dir,
            remote: "origin",
            refs: ConferenceRefs::new("c"),
            machine,
        }
    }

    /// Claim, renew, a stale take-over refused, a take-over from the current value, and the
    /// old holder's renewal then refused.
    #[test]
    fn a_lease_is_claimed_renewed_and_taken_over_by_compare_and_swap() {
        let (_tmp, dirs) = machines(2);
        let (ra, rb) = (
            Repository::open(&dirs[0]).unwrap(),
            Repository::open(&dirs[1]).unwrap(),
        );
        let (a, b) = (
            leases(&ra, &dirs[0], "box-a"),
            leases(&rb, &dirs[1], "box-b"),
        );
        let mut held = a.claim("A").unwrap().expect("a free slot is claimed");
        assert!(
            b.claim("A").unwrap().is_none(),
            "a held slot is not claimed again"
        );
        let first = held.value;
        assert!(a.renew(&mut held).unwrap());
        assert_eq!(held.beat, 1);
        assert!(
            b.take_over("A", first).unwrap().is_none(),
            "a stale value is refused"
        );
        let seen = b.observe().unwrap();
        assert_eq!(seen, [("A".to_string(), held.value)]);
        let taken = b.take_over("A", held.value).unwrap().expect("taken over");
        assert!(
            !a.renew(&mut held).unwrap(),
            "the old holder learns it lost the slot"
        );
        git(
            &dirs[0],
            &[
                "fetch",
                "-q",
                "origin",
                "+refs/conference/*:refs/conference/*",
            ],
        );
        assert_eq!(holder(&ra, taken.value).as_deref(), Some("box-b"));
        assert!(b.release(taken).unwrap());
        assert!(a.claim("A").unwrap().is_some(), "a released slot is free");
    }

    /// Two machines claiming the same slot at the same instant: the remote takes exactly one,
    /// every time.
    #[test]
    fn of_two_machines_racing_for_a_slot_exactly_one_wins() {
        let (_tmp, dirs) = machines(2);
        let races = 50;
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = dirs
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                let (dir, barrier) = (dir.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let repo = Repository::open(&dir).unwrap();
                    let machine = format!("box-{i}");
                    let leases = leases(&repo, &dir, &machine);
                    (0..races)
                        .map(|race| {
                            barrier.wait();
                            // An error must not leave the other racer at the barrier.
                            leases
                                .claim(&format!("s{race}"))
                                .map(|held| held.is_some())
                                .map_err(|e| format!("race {race}: {e:#}"))
                        })
                        .collect::<Vec<Result<bool, String>>>()
                })
            })
            .collect();
        let wins: Vec<Vec<bool>> = racers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap()
                    .into_iter()
                    .collect::<Result<_, _>>()
                    .unwrap()
            })
            .collect();
        for (race, (a, b)) in wins[0].iter().zip(&wins[1]).enumerate() {
            assert!(a ^ b, "race {race}: {a} and {b}");
        }
        assert_eq!(wins[0].len(), races);
    }

    #[test]
    fn a_lease_expires_only_after_its_value_stayed_the_same_long_enough() {
        let mut expiry = Expiry::default();
        let (v1, v2) = (
            Oid::from_str(&"1".repeat(40)).unwrap(),
            Oid::from_str(&"2".repeat(40)).unwrap(),
        );
        let lease = Duration::from_millis(30);
        assert_eq!(expiry.check(v1, lease, Duration::ZERO), None);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(
            expiry.check(v2, lease, Duration::ZERO),
            None,
            "a renewal restarts the clock"
        );
        assert_eq!(expiry.check(v2, lease, Duration::ZERO), None);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(expiry.check(v2, lease, Duration::ZERO), Some(v2));
    }
}
