//! The publisher of a run on several machines: one thread that publishes what the recorder
//! recorded (`Link::publish_from`), so that a push to the shared remote — tens of milliseconds,
//! seconds on a slow remote, two minutes of retries when it is out of reach — never holds the
//! recorder's lock every researcher records through. The recorder only asks for a publication
//! after each event; the publisher takes the log's tip under that lock (every event up to it
//! whole, its notes and attempts written), pushes without it, and takes the lock again only
//! when the remote took this machine's events replayed over other machines': the local log then
//! moves over them, with what was recorded meanwhile replayed in turn. Events still leave in
//! the order they were recorded (the log is one chain, pushed whole), and a slot this machine
//! lost still drops its unpublished events (only held slots' events are replayed).

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use crate::engine::record::recorder::Recorder;
use crate::remote::link::{Link, LocalLog};
use crate::remote::publish::Refused;

/// The running publisher; [`Publisher::finish`] (or dropping it) publishes what is left.
pub struct Publisher {
    link: Arc<Link>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Starts publishing, through `repo` (a handle of the thread's own), what `recorder` records.
    pub fn start(repo: Repository, recorder: Arc<Mutex<Recorder>>, link: Arc<Link>) -> Publisher {
        link.publisher_started();
        let log = RecordedLog {
            recorder,
            link: link.clone(),
        };
        let thread = std::thread::spawn(move || {
            while log.link.take_request() {
                publish_once(&repo, &log.link, &log);
            }
        });
        Publisher {
            link,
            thread: Some(thread),
        }
    }

    /// Publishes everything recorded so far (bounded by the publication's retries), then stops.
    pub fn finish(mut self) {
        self.stop_and_wait();
    }

    fn stop_and_wait(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.link.stop_publisher();
        let _ = thread.join();
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop_and_wait();
    }
}

/// One publication; a failure is said (the next event publishes everything since), a refusal
/// left for the run's next sync, which stops the run with it.
fn publish_once(repo: &Repository, link: &Link, log: &RecordedLog) {
    let published = link.publish_from(repo, log);
    link.publication_done();
    match published {
        Ok(_) => {}
        Err(e) => match e.downcast_ref::<Refused>() {
            Some(refused) => link.refuse(refused.0.clone()),
            None => crate::errln!(
                "git-conference: not published to {} yet: {e:#}",
                link.remote
            ),
        },
    }
}

/// The recorder's log, as the publisher reads and moves it: under the recorder's lock, briefly.
struct RecordedLog {
    recorder: Arc<Mutex<Recorder>>,
    link: Arc<Link>,
}

impl LocalLog for RecordedLog {
    fn tip(&self) -> Result<Oid> {
        self.recorder
            .lock()
            .unwrap()
            .log
            .tip()
            .context("the conference has no event to publish yet")
    }

    fn settle(&self, from: Oid, tip: Oid) -> Result<Oid> {
        let mut rec = self.recorder.lock().unwrap();
        let new = self.link.settle(&rec.repo, from, tip)?;
        if rec.log.tip() != Some(new) {
            rec.reload()?;
        }
        Ok(new)
    }
}
