//! Which evaluation runs when, and on which device.
//!
//! Trainings that share a GPU slow each other down and measure each other's noise, and on a CPU
//! the same holds for cores. Every evaluation (researchers' attempts, the baseline, peer review,
//! knowledge transfer) takes a [`Slot`] before its command starts and gives it back when it ends.
//! With `devices: 0,1` a slot is a device of its own, named to the command as
//! `CUDA_VISIBLE_DEVICES` and `CONFERENCE_DEVICE`; `max parallel evaluations: N` bounds the slots
//! without naming devices. With the ssh launcher a slot is a host (a device of a host when devices
//! are listed): one evaluation at a time on each. Waiting is first come, first served (tokio's semaphore is fair), so a
//! researcher that queues first evaluates first and none starves.
//!
//! Only evaluations take slots: agents keep working while others' evaluations run. When devices
//! are listed, agents (and setup commands) see no device (`CUDA_VISIBLE_DEVICES` empty), so a
//! training an agent starts on its own can never land on a device an evaluation holds and skew
//! what it measures.
//!
//! Who holds a slot and who waits for one lives only in this process's memory, so the scheduler
//! writes it to `<run dir>/queue.json` at every change (a snapshot replaced by rename, never a
//! record: a run killed leaves a stale one, which readers ignore when no runner holds the lock);
//! `serve` shows it as the devices queue.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::environment::Environment;
use crate::config::launcher::LauncherKind;

/// The variable CUDA reads; also honoured by PyTorch, JAX and TensorFlow.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// The device an evaluation got, for harnesses that pick a device some other way.
pub const CONFERENCE_DEVICE: &str = "CONFERENCE_DEVICE";

/// Hands out evaluation slots; unlimited when the environment sets neither devices, ssh hosts
/// nor a limit.
pub struct Scheduler {
    /// Where an evaluation can run: (ssh host, device) pairs, one evaluation at a time on each;
    /// empty when neither devices nor hosts are listed.
    places: Vec<Place>,
    /// Which places are taken (same order as `places`).
    busy: Arc<Mutex<Vec<bool>>>,
    permits: Option<Arc<Semaphore>>,
    /// Who runs and who waits, and where it is published.
    queue: Arc<Mutex<Queue>>,
    published: Option<PathBuf>,
}

/// The devices queue as `<run dir>/queue.json` holds it: the evaluations running on a slot and
/// those waiting for one, first come first.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Queue {
    pub running: Vec<Queued>,
    pub waiting: Vec<Queued>,
}

/// One evaluation in the queue: who (its log's name, e.g. `A-r2-i5.eval`), since when, and the
/// device and host it runs on.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Queued {
    pub who: String,
    pub since: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// An ssh host (launcher `ssh`), a device, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    host: Option<String>,
    device: Option<String>,
}

/// The right to run one evaluation; on a device when devices are listed, on a host with the
/// ssh launcher. Dropping it frees them.
pub struct Slot {
    place: Option<(usize, Arc<Mutex<Vec<bool>>>)>,
    /// Taken off the published queue when the slot is given back.
    leaves: Option<Leaving>,
    host: Option<String>,
    name: Option<String>,
    _permit: Option<OwnedSemaphorePermit>,
}

/// Every (host, device) pair: with the ssh launcher each host runs one evaluation at a time
/// (per device when devices are listed).
fn places(env: &Environment) -> Vec<Place> {
    let devices: Vec<Option<String>> = if env.devices.is_empty() {
        vec![None]
    } else {
        env.devices.iter().cloned().map(Some).collect()
    };
    let hosts: Vec<Option<String>> = match env.launch.kind {
        LauncherKind::Ssh => env
            .launch
            .hosts
            .iter()
            .map(|h| Some(h.target.clone()))
            .collect(),
        _ => vec![None],
    };
    let all: Vec<Place> = hosts
        .iter()
        .flat_map(|host| {
            devices.iter().map(move |device| Place {
                host: host.clone(),
                device: device.clone(),
            })
        })
        .collect();
    if all
        == [Place {
            host: None,
            device: None,
        }]
    {
        return vec![];
    }
    all
}

/// What a slot needs to take itself off the queue.
struct Leaving {
    queue: Arc<Mutex<Queue>>,
    published: Option<PathBuf>,
    who: String,
}

impl Scheduler {
    /// A scheduler whose queue is published to `<run_dir>/queue.json`, when it has one: with
    /// neither devices, hosts nor a limit on evaluations at once, nothing ever waits, and the
    /// three files an evaluation would write (waiting, running, done) are not written — on a
    /// filesystem where creating a file costs about a millisecond, they were a tenth of the
    /// bookkeeping of an iteration with an instant agent and evaluation.
    pub fn publishing(env: &Environment, run_dir: PathBuf) -> Scheduler {
        let scheduler = Scheduler::new(env);
        let queues = !scheduler.places.is_empty() || scheduler.permits.is_some();
        Scheduler {
            published: queues.then(|| run_dir.join(QUEUE_FILE)),
            ..scheduler
        }
    }

    pub fn new(env: &Environment) -> Scheduler {
        let places = places(env);
        let limit = match (places.len(), env.max_parallel_evaluations) {
            (0, limit) => limit.map(|n| n as usize),
            (n, None) => Some(n),
            (n, Some(limit)) => Some(n.min(limit as usize)),
        };
        Scheduler {
            busy: Arc::new(Mutex::new(vec![false; places.len()])),
            places,
            permits: limit.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            queue: Default::default(),
            published: None,
        }
    }

    /// Waits for a free slot (first come, first served) for the evaluation `who`, in the queue
    /// while it waits and while it runs.
    pub async fn acquire(&self, who: &str) -> Slot {
        let permit = self.permit(who).await;
        let mut slot = self.take_slot(permit);
        self.change_queue(|q| {
            remove_first(&mut q.waiting, who);
            q.running
                .push(queued(who, slot.name.clone(), slot.host.clone()));
        });
        slot.leaves = Some(Leaving {
            queue: Arc::clone(&self.queue),
            published: self.published.clone(),
            who: who.to_string(),
        });
        slot
    }

    fn change_queue(&self, change: impl FnOnce(&mut Queue)) {
        change_queue(&self.queue, self.published.as_ref(), change);
    }

    /// A permit to evaluate (None: no limit); `who` is in the queue's waiting list only while
    /// no slot is free (one file write fewer per evaluation when one is).
    async fn permit(&self, who: &str) -> Option<OwnedSemaphorePermit> {
        let permits = self.permits.as_ref()?;
        if let Ok(permit) = Arc::clone(permits).try_acquire_owned() {
            return Some(permit);
        }
        self.change_queue(|q| q.waiting.push(queued(who, None, None)));
        let permit = Arc::clone(permits).acquire_owned().await;
        Some(permit.expect("the semaphore is never closed"))
    }

    fn take_slot(&self, permit: Option<OwnedSemaphorePermit>) -> Slot {
        if self.places.is_empty() {
            return Slot {
                place: None,
                leaves: None,
                host: None,
                name: None,
                _permit: permit,
            };
        }
        // A permit guarantees a free place: there are no more permits than places.
        let mut busy = self.busy.lock().unwrap();
        let index = busy
            .iter()
            .position(|b| !b)
            .expect("a permit always leaves a place free");
        busy[index] = true;
        Slot {
            place: Some((index, Arc::clone(&self.busy))),
            leaves: None,
            host: self.places[index].host.clone(),
            name: self.places[index].device.clone(),
            _permit: permit,
        }
    }

    /// The environment of a command that is not an evaluation (an agent, a setup command): with
    /// devices listed it sees none of them.
    pub fn no_device_env(&self) -> Vec<(String, String)> {
        if self.places.iter().all(|p| p.device.is_none()) {
            return vec![];
        }
        vec![(CUDA_VISIBLE_DEVICES.into(), String::new())]
    }
}

impl Slot {
    /// The device this slot holds, if devices are listed.
    pub fn device(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The ssh host this slot holds (launcher `ssh`).
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// `env` with this slot's device variables (replacing any it had).
    pub fn apply(&self, env: &mut Vec<(String, String)>) {
        let Some(device) = self.device() else {
            return;
        };
        env.retain(|(k, _)| k != CUDA_VISIBLE_DEVICES && k != CONFERENCE_DEVICE);
        env.push((CUDA_VISIBLE_DEVICES.into(), device.to_string()));
        env.push((CONFERENCE_DEVICE.into(), device.to_string()));
    }
}

/// The file, in the run folder, that holds the devices queue.
pub const QUEUE_FILE: &str = "queue.json";

fn queued(who: &str, device: Option<String>, host: Option<String>) -> Queued {
    Queued {
        who: who.to_string(),
        since: crate::clock::now_iso(),
        device,
        host,
    }
}

/// Changes the queue and, when it is published, replaces the file (written aside, then renamed,
/// so a reader never sees half of it; a failure to write only leaves the page behind).
fn change_queue(
    queue: &Mutex<Queue>,
    published: Option<&PathBuf>,
    change: impl FnOnce(&mut Queue),
) {
    let mut queue = queue.lock().unwrap();
    change(&mut queue);
    let Some(path) = published else {
        return;
    };
    let aside = path.with_extension("json.new");
    let text = serde_json::to_vec(&*queue).expect("the queue serialises");
    if std::fs::write(&aside, text).is_ok() {
        let _ = std::fs::rename(&aside, path);
    }
}

fn remove_first(list: &mut Vec<Queued>, who: &str) {
    if let Some(at) = list.iter().position(|q| q.who == who) {
        list.remove(at);
    }
}

/// The devices queue a running conference published in `run_dir` (None when there is none).
pub fn published_queue(run_dir: &std::path::Path) -> Option<serde_json::Value> {
    let text = std::fs::read(run_dir.join(QUEUE_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(leaving) = &self.leaves {
            change_queue(&leaving.queue, leaving.published.as_ref(), |q| {
                remove_first(&mut q.running, &leaving.who)
            });
        }
        if let Some((index, busy)) = &self.place {
            busy.lock().unwrap()[*index] = false;
        }
        // The permit is released after the place is marked free (fields drop after this).
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn env(devices: &[&str], max: Option<u32>) -> Environment {
        Environment {
            devices: devices.iter().map(|d| d.to_string()).collect(),
            max_parallel_evaluations: max,
            ..Environment::default()
        }
    }

    /// The queue file is written only where something can wait, and a waiter is listed only
    /// while no slot is free.
    #[tokio::test]
    async fn the_queue_is_published_only_where_evaluations_can_wait() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(QUEUE_FILE);
        let unlimited = Scheduler::publishing(&env(&[], None), dir.path().into());
        drop(unlimited.acquire("A").await);
        assert!(!file.exists(), "nothing waits without devices or a limit");

        let one = Scheduler::publishing(&env(&["0"], None), dir.path().into());
        let first = one.acquire("A").await;
        let queue = published_queue(dir.path()).unwrap();
        assert_eq!(queue["running"][0]["who"], "A", "{queue}");
        assert_eq!(queue["waiting"].as_array().unwrap().len(), 0, "{queue}");
        let waiting = one.acquire("B");
        tokio::pin!(waiting);
        let short = std::time::Duration::from_millis(50);
        assert!(tokio::time::timeout(short, waiting.as_mut()).await.is_err());
        let queue = published_queue(dir.path()).unwrap();
        assert_eq!(queue["waiting"][0]["who"], "B", "{queue}");
        drop(first);
        let second = waiting.await;
        let queue = published_queue(dir.path()).unwrap();
        assert_eq!(queue["running"][0]["who"], "B", "{queue}");
        assert_eq!(queue["waiting"].as_array().unwrap().len(), 0, "{queue}");
        drop(second);
    }

    /// Many tasks asking at once: never two on one device, never more than the slots.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn one_evaluation_per_device() {
        let s = Arc::new(Scheduler::new(&env(&["0", "1"], None)));
        let running = Arc::new(AtomicUsize::new(0));
        let on: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (s, running, on) = (s.clone(), running.clone(), on.clone());
            tasks.push(tokio::spawn(async move {
                let mut max = 0;
                for _ in 0..5 {
                    let slot = s.acquire("test").await;
                    let d: usize = slot.device().unwrap().parse().unwrap();
                    assert_eq!(on[d].fetch_add(1, Ordering::SeqCst), 0, "device {d} shared");
                    max = max.max(running.fetch_add(1, Ordering::SeqCst) + 1);
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    on[d].fetch_sub(1, Ordering::SeqCst);
                    drop(slot);
                }
                max
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap() <= 2);
        }
    }

    /// With the ssh launcher each host runs one evaluation at a time, per device when devices
    /// are listed; agents on this machine still see no device.
    #[tokio::test]
    async fn ssh_hosts_take_one_evaluation_each_per_device() {
        use crate::config::launcher::{Host, Launch};
        let host = |t: &str| Host {
            target: t.into(),
            staging: None,
        };
        let mut e = env(&["0", "1"], None);
        e.launch = Launch {
            kind: LauncherKind::Ssh,
            hosts: vec![host("gpu1"), host("gpu2")],
            ..Launch::default()
        };
        let s = Scheduler::new(&e);
        let slots = futures_all(&s, 4).await;
        let mut places: Vec<(Option<&str>, Option<&str>)> =
            slots.iter().map(|x| (x.host(), x.device())).collect();
        places.sort();
        assert_eq!(
            places,
            [
                (Some("gpu1"), Some("0")),
                (Some("gpu1"), Some("1")),
                (Some("gpu2"), Some("0")),
                (Some("gpu2"), Some("1"))
            ]
        );
        let fifth =
            tokio::time::timeout(std::time::Duration::from_millis(50), s.acquire("test")).await;
        assert!(
            fifth.is_err(),
            "a fifth evaluation started with every host's devices busy"
        );
        assert_eq!(s.no_device_env().len(), 1);
        // Without devices: one per host.
        e.devices.clear();
        let s = Scheduler::new(&e);
        let slots = futures_all(&s, 2).await;
        assert!(slots
            .iter()
            .all(|x| x.device().is_none() && x.host().is_some()));
        let third =
            tokio::time::timeout(std::time::Duration::from_millis(50), s.acquire("test")).await;
        assert!(third.is_err());
    }

    #[tokio::test]
    async fn the_limit_and_the_devices_combine() {
        let s = Scheduler::new(&env(&["a", "b", "c"], Some(2)));
        let x = s.acquire("test").await;
        let y = s.acquire("test").await;
        assert_eq!((x.device(), y.device()), (Some("a"), Some("b")));
        let third =
            tokio::time::timeout(std::time::Duration::from_millis(50), s.acquire("test")).await;
        assert!(third.is_err(), "a third evaluation started past the limit");
        drop(x);
        let z = s.acquire("test").await;
        assert_eq!(z.device(), Some("a"));
        let mut vars = vec![(CUDA_VISIBLE_DEVICES.to_string(), String::new())];
        z.apply(&mut vars);
        assert_eq!(
            vars,
            [
                (CUDA_VISIBLE_DEVICES.to_string(), "a".to_string()),
                (CONFERENCE_DEVICE.to_string(), "a".to_string())
            ]
        );
        assert_eq!(s.no_device_env().len(), 1);
        // Nothing set: no waiting, no variables.
        let free = Scheduler::new(&Environment::default());
        let slots: Vec<Slot> = futures_all(&free, 10).await;
        assert!(slots.iter().all(|s| s.device().is_none()));
        assert!(free.no_device_env().is_empty());
    }

    async fn futures_all(s: &Scheduler, n: usize) -> Vec<Slot> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(s.acquire("test").await);
        }
        out
    }

    /// Waiters are served in the order they came.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_is_first_come_first_served() {
        let s = Arc::new(Scheduler::new(&env(&[], Some(1))));
        let first = s.acquire("test").await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..4 {
            let (s, order) = (s.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = s.acquire("test").await;
                order.lock().unwrap().push(i);
            }));
            // Each waiter is queued before the next one asks.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
    }
}
