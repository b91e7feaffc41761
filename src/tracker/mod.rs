//! Experiment trackers: the conference sent to MLflow (DESIGN.md §13) as it runs, and exported
//! afterwards. [`runs`] is the one translation of the event log into runs, [`mlflow`] the REST
//! client, and [`Sink`] the thread that sends what the recorder records, off the research path.
//!
//! The sink is never in the loop's way: the recorder hands it each event line (a channel send),
//! and its own thread batches, sends and, when the tracker is down or slow, waits with the one
//! backoff policy (`store::cas::Backoff`, with jitter) and tries again, after one warning line.
//! Nothing the research does waits for it and no attempt fails for it. When it starts it first
//! catches up with the event log as it stands (what a killed runner left unsent); sending is
//! idempotent (see [`runs`]), so events seen twice are sent once. At the end [`Sink::finish`]
//! waits a bounded time, then says how many events are still to send and that
//! `git conference export mlflow NAME` sends them.

pub mod mlflow;
pub mod runs;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::model::EventLine;
use crate::store::cas::Backoff;
use mlflow::Failure;
use runs::Runs;

/// How long the end of a run waits for what is still to send.
pub const FLUSH: Duration = Duration::from_secs(5);
/// Waits between tries while the tracker is down: 1 s doubling up to 30 s, with jitter.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The event log as it stands, read by the sink's own thread when it starts.
pub type History = Box<dyn FnOnce() -> anyhow::Result<Vec<EventLine>> + Send>;
/// How the sink says something (a warning line that keeps the progress display intact).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

enum Msg {
    Line(EventLine),
    Finish(Instant),
}

pub struct Sink {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    /// Events handed over and not sent yet.
    pending: Arc<AtomicUsize>,
    done: Receiver<()>,
    conference: String,
}

impl Sink {
    /// Starts the sending thread: it connects, catches up with `history`, then sends what
    /// [`Sink::send`] hands it.
    pub fn start(runs: Runs, history: History, say: Say) -> Sink {
        let (tx, rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let conference = runs.settings().conference.clone();
        let worker = Worker {
            runs,
            rx,
            pending: pending.clone(),
            backlog: VecDeque::new(),
            history: Some(history),
            say,
            down_since: None,
            refused: 0,
            deadline: None,
        };
        let thread = std::thread::Builder::new()
            .name("mlflow-sink".into())
            .spawn(move || {
                worker.run();
                let _ = done_tx.send(());
            })
            .expect("cannot start the tracker's thread");
        Sink {
            tx,
            thread: Some(thread),
            pending,
            done,
            conference,
        }
    }

    /// Hands `line` to the sending thread (never waits).
    pub fn send(&self, line: &EventLine) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(Msg::Line(line.clone())).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Waits up to `flush` for what is still to send; the line to print when some is left.
    pub fn finish(&mut self, flush: Duration) -> Option<String> {
        let deadline = Instant::now() + flush;
        let _ = self.tx.send(Msg::Finish(deadline));
        // A call in flight at the deadline may take its own time out: a little more, no more.
        let finished = self
            .done
            .recv_timeout(flush + Duration::from_secs(2))
            .is_ok();
        if finished {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        let left = self.pending.load(Ordering::SeqCst);
        (left > 0).then(|| {
            format!(
                "MLflow: {left} event{} of `{c}` not sent yet; `git conference export mlflow {c}` sends them",
                if left == 1 { "" } else { "s" },
                c = self.conference
            )
        })
    }
}

struct Worker {
    runs: Runs,
    rx: Receiver<Msg>,
    pending: Arc<AtomicUsize>,
    backlog: VecDeque<EventLine>,
    history: Option<History>,
    say: Say,
    /// While the tracker is down: since when, and the next wait.
    down_since: Option<Backoff>,
    /// Events the server refused (each said once, up to a few).
    refused: usize,
    /// When the end's bounded flush is over (None: not ending).
    deadline: Option<Instant>,
}

impl Worker {
    fn run(mut self) {
        loop {
            let idle = self.backlog.is_empty() && self.runs.connected();
            let wait = if idle && self.deadline.is_none() {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            };
            if !self.take_messages(wait) {
                return;
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
            match self.send_backlog() {
                Ok(()) if self.deadline.is_some() => return,
                Ok(()) => {}
                Err(why) => self.wait_after(&why),
            }
        }
    }

    /// Moves what arrives within `wait` (and everything already there) into the backlog.
    /// False: the sink is gone and nothing is left to send.
    fn take_messages(&mut self, wait: Duration) -> bool {
        let first = match self.rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                return !self.backlog.is_empty();
            }
        };
        let rest: Vec<Msg> = std::iter::from_fn(|| self.rx.try_recv().ok()).collect();
        for msg in first.into_iter().chain(rest) {
            match msg {
                Msg::Line(line) => self.backlog.push_back(line),
                Msg::Finish(d) => self.deadline = Some(d),
            }
        }
        true
    }

    /// Connects (and catches up with the log) if not yet, then sends the backlog in order.
    fn send_backlog(&mut self) -> Result<(), Failure> {
        if !self.runs.connected() {
            self.runs.connect()?;
            if let Some(history) = self.history.take() {
                match history() {
                    Ok(lines) => {
                        self.pending.fetch_add(lines.len(), Ordering::SeqCst);
                        for line in lines.into_iter().rev() {
                            self.backlog.push_front(line);
                        }
                    }
                    Err(e) => (self.say)(&format!(
                        "git-conference: MLflow: cannot read the event log to catch up ({e:#}); `git conference export mlflow {}` sends what was missed",
                        self.runs.settings().conference
                    )),
                }
            }
        }
        while let Some(line) = self.backlog.front() {
            match self.runs.send(line) {
                Ok(()) => {}
                Err(Failure::Refused { code, message }) => {
                    self.refused += 1;
                    if self.refused <= 5 {
                        (self.say)(&format!(
                            "git-conference: MLflow refused {} ({code}: {message}); it is left out",
                            line.event
                        ));
                    }
                }
                Err(down) => return Err(down),
            }
            self.backlog.pop_front();
            self.pending.fetch_sub(1, Ordering::SeqCst);
            if let Some(_was_down) = self.down_since.take() {
                (self.say)(&format!(
                    "git-conference: MLflow at {} answers again: sending what waited",
                    self.runs.uri()
                ));
            }
        }
        Ok(())
    }

    /// After a failed send: one warning when the tracker goes down, then a wait (shorter when
    /// the end's deadline is nearer), during which new events still arrive.
    fn wait_after(&mut self, why: &Failure) {
        let backoff = self.down_since.get_or_insert_with(|| {
            (self.say)(&format!(
                "git-conference: MLflow at {} cannot be reached ({why}): the research goes on, and what it records is sent when it is back",
                self.runs.uri()
            ));
            Backoff::new(RETRY_FIRST, RETRY_MAX, None)
        });
        let until = Instant::now() + backoff.next_delay().unwrap_or(RETRY_MAX);
        // Events and the end's deadline still arrive meanwhile.
        loop {
            let end = self.deadline.map_or(until, |d| d.min(until));
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.take_messages(left.min(Duration::from_millis(200))) {
                return;
            }
        }
    }
}
