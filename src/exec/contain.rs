//! Ending everything an agent or evaluation started, not only its process group.
//!
//! A command runs in its own process group, and the group is killed when the command ends. A
//! child that calls `setsid` (or double-forks into a daemon) leaves that group and would outlive
//! the run, rewriting the worktree during the next attempt. Three things catch it, all without
//! privileges (a cgroup would need a delegated hierarchy, which containers rarely give):
//!
//! - **A mark in the environment.** Every run gets `CONFERENCE_RUN_MARK=<runner pid>.<seq>@<run
//!   folder>`; every process it starts inherits it, through `setsid`, double forks and
//!   re-parenting to init. After the run, [`sweep`] kills every process carrying the mark (read
//!   from `/proc/<pid>/environ`, which the same user can read, of the processes started since
//!   the run's first one) and every descendant of one (a child that cleared its environment is
//!   still found through its parent).
//! - **A child subreaper.** The runner adopts orphans ([`crate::os::set_child_subreaper`]), so a daemon whose
//!   parent exited becomes our child, and everything killed is reaped by us: in a container
//!   whose first process reaps nothing, killed daemons would otherwise stay as zombies.
//! - **The next runner.** A runner killed with SIGKILL cannot sweep; the next one kills every
//!   process whose mark names the same run folder and another runner ([`sweep_left_behind`]).
//!
//! A sweep after every run must not cost what reading every process of the machine costs
//! (`/proc/<pid>/stat` is about 15 µs a process here, and a machine runs hundreds): it reads only
//! the processes whose pids were handed out since the run's leader started ([`Origin`]), which
//! are the only ones that can carry its mark, and reads them all when the pid counter may have
//! gone round its range meanwhile.
//!
//! What escapes: a process that clears its environment (`env -i`) and then leaves its parent's
//! tree by a double fork. Adopted orphans are not killed on sight: git's own `gc --auto` detaches
//! the same way from the runner's git commands, and must be left to finish.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable every agent and evaluation process carries.
pub const MARK_VAR: &str = "CONFERENCE_RUN_MARK";

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh mark for one run.
pub fn new_mark(run_dir: Option<&Path>) -> String {
    let seq = SEQ.fetch_add(1, Ordering::SeqCst);
    let folder = run_dir.map(|d| d.display().to_string()).unwrap_or_default();
    format!("{}.{seq}@{folder}", std::process::id())
}

/// One process as /proc shows it.
#[derive(Debug, Clone)]
struct Proc {
    ppid: i32,
    pgid: i32,
    zombie: bool,
    mark: Option<String>,
}

/// The fields of `/proc/<pid>/stat` after the command's name (which may hold spaces): the
/// state first, then the parent, the group, … (`man 5 proc`).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    Some(fields.map(str::to_string).collect())
}

/// When process `pid` started, in clock ticks since boot (`starttime`, field 22 of its stat): it
/// tells a process from a later one that got the same id.
pub fn start_ticks(pid: i32) -> Option<u64> {
    stat_fields(pid)?.get(STARTTIME_AFTER_NAME)?.parse().ok()
}

/// `starttime`'s place among [`stat_fields`] (field 22; the name is field 2, the state 3).
const STARTTIME_AFTER_NAME: usize = 22 - 3;

/// Where one run's processes are to be found: read as its leader starts ([`Census::now`] just
/// before, [`Origin::of`] just after).
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    leader: i32,
    /// The leader's start in ticks since boot: a process started earlier cannot carry the mark.
    ticks: Option<u64>,
    before: Option<Census>,
}

/// The machine's process counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Census {
    /// Processes and threads created since boot (`processes` in `/proc/stat`).
    forks: u64,
    /// Processes and threads alive, and the last pid handed out (`/proc/loadavg`).
    tasks: u64,
    last_pid: i32,
}

impl Census {
    pub fn now() -> Option<Census> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
        Census::parse(&stat, &loadavg)
    }

    fn parse(stat: &str, loadavg: &str) -> Option<Census> {
        let forks = stat
            .lines()
            .find_map(|l| l.strip_prefix("processes "))?
            .trim()
            .parse()
            .ok()?;
        // "0.90 1.16 1.34 2/245 2937": running/alive, then the last pid.
        let mut fields = loadavg.split_whitespace().skip(3);
        let tasks = fields.next()?.split_once('/')?.1.parse().ok()?;
        let last_pid = fields.next()?.parse().ok()?;
        Some(Census {
            forks,
            tasks,
            last_pid,
        })
    }
}

/// The pids handed out from `first` to `last`, in the cyclic order Linux hands them out in
/// (below `pid_max`, then from the low ones again).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PidWindow {
    first: i32,
    last: i32,
    pid_max: i32,
}

impl PidWindow {
    fn contains(&self, pid: i32) -> bool {
        if self.first <= self.last {
            (self.first..=self.last).contains(&pid)
        } else {
            pid >= self.first || pid <= self.last
        }
    }

    fn pids(&self) -> impl Iterator<Item = i32> {
        let (upper, wrapped) = if self.first <= self.last {
            (self.last, None)
        } else {
            (self.pid_max - 1, Some(1..=self.last))
        };
        (self.first..=upper).chain(wrapped.into_iter().flatten())
    }

    fn len(&self) -> usize {
        let len = if self.first <= self.last {
            self.last - self.first + 1
        } else {
            self.pid_max - self.first + self.last
        };
        len as usize
    }
}

/// Windows up to this many pids are read pid by pid; larger ones through a listing of `/proc`
/// (which lists every process of the machine, a thousand on a big one, kernel threads included).
const PROBE_MAX: usize = 4096;

impl Origin {
    /// The run whose leader is `leader`, with the census taken just before it was started.
    pub fn of(leader: i32, before: Option<Census>) -> Origin {
        Origin {
            leader,
            ticks: start_ticks(leader),
            before,
        }
    }

    /// When the leader started, in ticks since boot (None: it has already gone).
    pub fn start_ticks(&self) -> Option<u64> {
        self.ticks
    }

    /// The pids the run's processes can have now, or None when it cannot be told.
    fn window(&self) -> Option<PidWindow> {
        let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").ok()?;
        window_between(
            self.leader,
            self.before?,
            Census::now()?,
            pid_max.trim().parse().ok()?,
        )
    }
}

/// Every pid handed out after `leader`'s (which came after `before`) and up to `now` lies
/// between them in cyclic order unless the counter went round its whole range since. Each step of
/// the counter either hands out a pid (a fork counted in `now`) or skips one in use, held by a
/// task alive at `before` or forked since: it cannot have gone round while the two together stay
/// under the range (kept to a quarter of it, for ids held as a group's or session's after their
/// task ended).
fn window_between(leader: i32, before: Census, now: Census, pid_max: i64) -> Option<PidWindow> {
    let forks = now.forks.checked_sub(before.forks)?;
    let steps = 2 * forks + before.tasks;
    (leader > 0 && (steps as i64) < pid_max / 4).then_some(PidWindow {
        first: leader,
        last: now.last_pid,
        pid_max: pid_max.try_into().ok()?,
    })
}

/// One process; its mark read only when it started at or after `since` (ticks since boot): a
/// process started before a run began cannot carry its mark, and reading a process's
/// environment is the costly part of a sweep (a machine runs hundreds of processes).
fn read_proc(pid: i32, since: Option<u64>) -> Option<Proc> {
    let f = stat_fields(pid)?;
    let state = f.first()?;
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<i32>().ok());
    let (ppid, pgid) = (num(1)?, num(2)?);
    let started: Option<u64> = f.get(STARTTIME_AFTER_NAME).and_then(|s| s.parse().ok());
    let may_carry_mark = match (since, started) {
        (Some(since), Some(started)) => started >= since,
        _ => true,
    };
    let environ = if may_carry_mark {
        std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default()
    } else {
        Vec::new()
    };
    let prefix = format!("{MARK_VAR}=");
    let mark = environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned());
    Some(Proc {
        ppid,
        pgid,
        zombie: state == "Z",
        mark,
    })
}

/// The processes of the machine (only those whose pids lie in `window`, when given). A small
/// window is read pid by pid, which also finds threads (`/proc` lists only processes, but each
/// thread's id opens too): a thread reads as its process (the same parent, group and mark), and
/// killing it kills that process.
fn all_procs(since: Option<u64>, window: Option<PidWindow>) -> BTreeMap<i32, Proc> {
    let me = std::process::id() as i32;
    let pids: Box<dyn Iterator<Item = i32>> = match window {
        Some(w) if w.len() <= PROBE_MAX => Box::new(w.pids()),
        _ => Box::new(
            std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(move |pid| window.is_none_or(|w| w.contains(*pid))),
        ),
    };
    pids.filter(|pid| *pid != me)
        .filter_map(|pid| Some((pid, read_proc(pid, since)?)))
        .collect()
}

/// Pids whose own mark matches `hit`, with all their descendants.
fn marked_trees(procs: &BTreeMap<i32, Proc>, hit: impl Fn(&str) -> bool) -> BTreeSet<i32> {
    let mut found: BTreeSet<i32> = procs
        .iter()
        .filter(|(_, p)| p.mark.as_deref().is_some_and(&hit))
        .map(|(pid, _)| *pid)
        .collect();
    loop {
        let more: Vec<i32> = procs
            .iter()
            .filter(|(pid, p)| !found.contains(pid) && found.contains(&p.ppid))
            .map(|(pid, _)| *pid)
            .collect();
        if more.is_empty() {
            return found;
        }
        found.extend(more);
    }
}

/// Kills every process the run marked `mark` (group `pgid`, already ended; started from
/// `origin`, when known) left behind, and reaps the ones adopted by this process. Returns how
/// many were killed.
pub fn sweep(mark: &str, pgid: i32, origin: Option<&Origin>) -> usize {
    let procs = all_procs(
        origin.and_then(|o| o.ticks),
        origin.and_then(Origin::window),
    );
    let me = std::process::id() as i32;
    let mut doomed = marked_trees(&procs, |m| m == mark);
    // Adopted orphans still in the ended group (killed with it: reaped here).
    doomed.extend(
        procs
            .iter()
            .filter(|(_, p)| pgid > 1 && p.ppid == me && p.pgid == pgid)
            .map(|(pid, _)| *pid),
    );
    kill_and_reap(&procs, &doomed, me)
}

/// Kills the processes of runs by another runner of the same run folder (`runner_dir`): a
/// runner killed with SIGKILL could not sweep them. Returns how many were killed.
pub fn sweep_left_behind(run_dir: &Path) -> usize {
    let folder = format!("@{}", run_dir.display());
    let mine = format!("{}.", std::process::id());
    let procs = all_procs(None, None);
    let doomed = marked_trees(&procs, |m| m.ends_with(&folder) && !m.starts_with(&mine));
    kill_and_reap(&procs, &doomed, std::process::id() as i32)
}

/// Kills everything the runs of runner `runner` (a pid) from the run folder `run_dir` left
/// alive: every process carrying one of its marks, with its descendants, and every other
/// process of those processes' groups (a leader's children that stayed in its group). For the
/// runner's watchdog, once that runner has died; a later runner of the same folder has other
/// marks and is left alone. Returns how many processes and groups were killed.
pub fn kill_runs_of(run_dir: &Path, runner: i32) -> usize {
    let folder = format!("@{}", run_dir.display());
    let prefix = format!("{runner}.");
    let ours = |m: &str| m.starts_with(&prefix) && m.ends_with(&folder);
    let me = std::process::id() as i32;
    let procs = all_procs(None, None);
    let groups: BTreeSet<i32> = procs
        .values()
        .filter(|p| p.mark.as_deref().is_some_and(ours))
        .map(|p| p.pgid)
        .filter(|g| *g > 1 && *g != me)
        .collect();
    let mut killed = groups.iter().filter(|g| crate::os::kill_group(**g)).count();
    killed += kill_and_reap(&procs, &marked_trees(&procs, ours), me);
    killed
}

/// Whether the process group `pgid`, recorded in the run folder `run_dir` as one a killed
/// runner left, was started from this run folder: one of its processes carries a mark naming
/// it, or naming a folder that no longer exists (the repository was moved since). The record
/// alone proves nothing: a copy of the repository (`cp -r`) copies the records of the
/// original's running groups, which the copy must never kill.
pub fn group_started_from(pgid: i32, run_dir: &Path) -> bool {
    let ours = run_dir
        .canonicalize()
        .unwrap_or_else(|_| run_dir.to_path_buf());
    all_procs(None, None)
        .values()
        .filter(|p| p.pgid == pgid)
        .filter_map(|p| {
            p.mark
                .as_deref()?
                .split_once('@')
                .map(|(_, f)| Path::new(f).to_path_buf())
        })
        .any(|folder| match folder.canonicalize() {
            Ok(folder) => folder == ours,
            Err(_) => !folder.exists(),
        })
}

fn kill_and_reap(procs: &BTreeMap<i32, Proc>, doomed: &BTreeSet<i32>, me: i32) -> usize {
    let mut killed = 0;
    for pid in doomed {
        let p = &procs[pid];
        // A process found above; ESRCH when it is already gone.
        if !p.zombie && crate::os::kill_process(*pid) {
            killed += 1;
        }
    }
    for pid in doomed.iter().filter(|pid| procs[pid].ppid == me) {
        reap(*pid);
    }
    killed
}

/// Waits (briefly) for an adopted child that was just killed, so it leaves no zombie.
fn reap(pid: i32) {
    for _ in 0..200 {
        // A child of ours that nobody else waits for (an adopted orphan).
        if crate::os::try_reap(pid) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ppid: i32, mark: Option<&str>) -> Proc {
        Proc {
            ppid,
            pgid: 1,
            zombie: false,
            mark: mark.map(str::to_string),
        }
    }

    /// A marked process and everything below it (a child with a cleared environment too), never
    /// a process of another run or an unrelated one.
    #[test]
    fn marked_trees_take_descendants_only() {
        let procs: BTreeMap<i32, Proc> = [
            (10, p(1, Some("a"))),
            (11, p(10, None)),
            (12, p(11, None)),
            (20, p(1, Some("b"))),
            (21, p(20, None)),
            (30, p(1, None)),
        ]
        .into_iter()
        .collect();
        let got = marked_trees(&procs, |m| m == "a");
        assert_eq!(got.into_iter().collect::<Vec<_>>(), [10, 11, 12]);
    }

    /// Process `pid`'s mark once it has exec'd (until then its environment is this process's),
    /// waiting up to a second.
    fn mark_once_execd(pid: i32) -> Option<String> {
        for _ in 0..100 {
            if let Some(mark) = read_proc(pid, None).and_then(|p| p.mark) {
                return Some(mark);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    #[test]
    fn the_mark_is_read_from_environ() {
        let child = std::process::Command::new("sleep")
            .arg("5")
            .env(MARK_VAR, "7.1@/x")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let read = mark_once_execd(pid);
        // A sweep since the process started reads its mark; one of a run that began after it
        // does not (it cannot belong to that run), nor reads its environment.
        let started = start_ticks(pid).expect("a running process has a start time");
        let since_it = read_proc(pid, Some(started)).and_then(|p| p.mark);
        let after_it = read_proc(pid, Some(started + 1)).map(|p| p.mark);
        let mine = start_ticks(std::process::id() as i32).unwrap();
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(read.as_deref(), Some("7.1@/x"));
        assert_eq!(since_it.as_deref(), Some("7.1@/x"));
        assert_eq!(after_it, Some(None), "its stat is read, not its mark");
        assert!(
            mine <= started,
            "the test started before its child: {mine} > {started}"
        );
    }

    #[test]
    fn the_census_reads_forks_tasks_and_the_last_pid() {
        let stat = "cpu  1 2 3\nintr 5 0\nctxt 99\nbtime 1\nprocesses 123456\nprocs_running 2\n";
        let got = Census::parse(stat, "0.90 1.16 1.34 2/245 2937\n");
        assert_eq!(
            got,
            Some(Census {
                forks: 123456,
                tasks: 245,
                last_pid: 2937
            })
        );
        assert_eq!(Census::parse("cpu 1\n", "0.90 1.16 1.34 2/245 2937"), None);
        assert!(Census::now().is_some(), "Linux has both files");
    }

    /// Pids after the leader's, cyclically; none when the counter could have gone round.
    #[test]
    fn the_window_runs_from_the_leader_to_the_last_pid() {
        let at = |forks, last_pid| Census {
            forks,
            tasks: 200,
            last_pid,
        };
        let w = window_between(5000, at(1000, 4999), at(1010, 5009), 32768).unwrap();
        assert!(w.contains(5000) && w.contains(5009));
        assert!(!w.contains(4999) && !w.contains(5010) && !w.contains(300));
        assert_eq!(
            w.pids().collect::<Vec<_>>(),
            (5000..=5009).collect::<Vec<_>>()
        );
        assert_eq!(w.len(), 10);
        // The counter wrapped past pid_max to the low pids.
        let w = window_between(32700, at(1000, 32699), at(1100, 400), 32768).unwrap();
        assert!(w.contains(32700) && w.contains(32767) && w.contains(301) && w.contains(400));
        assert!(!w.contains(401) && !w.contains(32699) && !w.contains(16000));
        assert_eq!(w.len(), 68 + 400);
        assert!(w.pids().all(|p| w.contains(p)) && w.pids().any(|p| p == 32767));
        // Enough forks to go round a small range: every process is read.
        assert_eq!(
            window_between(5000, at(1000, 4999), at(1000 + 8000, 5009), 32768),
            None
        );
        assert!(window_between(5000, at(1000, 4999), at(1000 + 8000, 5009), 4194304).is_some());
        // Counters that went backwards (another boot's numbers) are not trusted.
        assert_eq!(
            window_between(5000, at(1000, 4999), at(10, 5009), 32768),
            None
        );
    }

    /// A process started after a run's leader (here: after a census and a first child) lies
    /// in the run's window, and a sweep with that origin kills it by its mark.
    #[test]
    fn a_sweep_with_an_origin_kills_a_marked_process_started_after_the_leader() {
        let before = Census::now();
        let mut leader = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let origin = Origin::of(leader.id() as i32, before);
        let mark = format!("{}.test-window@/nowhere", std::process::id());
        let mut marked = std::process::Command::new("sleep")
            .arg("30")
            .env(MARK_VAR, &mark)
            .spawn()
            .unwrap();
        assert_eq!(mark_once_execd(marked.id() as i32).as_deref(), Some(&*mark));
        let window = origin.window().expect("a quiet machine gives a window");
        assert!(window.contains(marked.id() as i32), "{window:?}");
        assert!(!window.contains(std::process::id() as i32));
        let pid = marked.id() as i32;
        // Only the window's processes are read: the marked one, not the machine's first.
        let read = all_procs(origin.ticks, Some(window));
        assert!(read.contains_key(&pid) && read.keys().all(|p| window.contains(*p)));
        assert!(!read.contains_key(&1) && all_procs(None, None).contains_key(&1));
        let killed = sweep(&mark, 0, Some(&origin));
        leader.kill().unwrap();
        leader.wait().unwrap();
        assert_eq!(killed, 1);
        // Killed and reaped by the sweep (a child of this process): gone from /proc.
        assert!(read_proc(pid, None).is_none());
        assert!(marked.try_wait().is_err(), "already reaped");
    }
}
