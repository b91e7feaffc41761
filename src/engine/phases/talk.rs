//! Talking to a conference (DESIGN.md §9, §10): `steer`, `answer`, `stop` and `approve`, one
//! function each, which the command line and the page (`serve`) both call.
//!
//! The event log has one writer at a time: the process holding the conference's run lock
//! (`crate::lock`). So these functions never append to it while a runner holds the lock. Each
//! writes its request as a create-only ref under `refs/conference-inbox/<name>/<id>` (a commit
//! whose message is the request's JSON: git keeps it, `git fsck` is clean, `push` never sends
//! it) and then:
//! - when no process holds the lock, takes it and records the request itself;
//! - when a runner holds it, waits a moment for the runner, which takes requests at every
//!   recording point and on a short poll ([`take_requests`]), records each as its event and
//!   only then deletes the ref.
//!
//! A request is recorded once: its id is in the event and in the state (`State::requests`), and
//! a request whose id is recorded already is only deleted. So a process killed at any instant
//! loses nothing (the ref waits for the next runner, or the next of these commands) and records
//! nothing twice (killed between the event and the delete, the ref is deleted next time).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use git2::Repository;
use serde::{Deserialize, Serialize};

use crate::config::LoopMode;
use crate::engine::state::{files, Phase, State};
use crate::engine::{Conference, RunOutcome};
use crate::error::usage;
use crate::model::event::{self as events, Event};
use crate::model::talk::{WaitKind, Waiting};
use crate::model::Finding;
use crate::store::{ConferenceRefs, EventLog};

/// How long a command waits for a running conference to record its request before it says the
/// request is queued (a runner takes requests every [`POLL`]).
pub const RUNNER_WAIT: Duration = Duration::from_secs(10);
/// How often a runner looks for requests besides its recording points.
pub const POLL: Duration = Duration::from_millis(200);

/// What a person asks of the conference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Steer { text: String },
    Answer { question: String, text: String },
    Stop,
    Approve { dropped: Vec<String> },
}

/// A request as its inbox ref carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Unique, and ordered as the requests were made (nanoseconds, process, counter).
    pub id: String,
    /// The requesting command's clock.
    pub requested_at: String,
    #[serde(flatten)]
    pub action: Action,
}

/// Where a request stands when its command returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// No runner held the conference: this process recorded it.
    Recorded,
    /// The running conference (process `pid`) recorded it.
    RecordedByRunner { pid: String },
    /// It waits in the inbox; `why` says until when.
    Queued { why: String },
    /// `stop` of a conference that no process runs: nothing to do.
    NotRunning,
}

impl Delivery {
    /// What the command tells the person.
    pub fn describe(&self, what: &str, name: &str) -> String {
        match self {
            Delivery::Recorded => format!("{what}: recorded in the event log of `{name}`"),
            Delivery::RecordedByRunner { pid } => {
                format!("{what}: recorded by the running conference `{name}` (process {pid})")
            }
            Delivery::Queued { why } => format!("{what}: queued ({why})"),
            Delivery::NotRunning => {
                format!("conference `{name}` is not running: nothing to stop")
            }
        }
    }
}

/// `git conference steer NAME TEXT`: guidance every researcher's next prompt carries.
pub fn steer(repo_dir: &Path, name: &str, text: &str) -> Result<Delivery> {
    let text = text.trim();
    if text.is_empty() {
        return Err(usage(
            "the guidance is empty: write it, e.g. `git conference steer NAME \"try a cosine schedule\"`",
        ));
    }
    read_state(repo_dir, name)?;
    deliver(
        repo_dir,
        name,
        Action::Steer {
            text: text.to_string(),
        },
    )
}

/// `git conference answer NAME Qn TEXT`: the answer to an agent's question, in the prompts
/// from the next iteration on.
pub fn answer(repo_dir: &Path, name: &str, question: &str, text: &str) -> Result<Delivery> {
    let st = read_state(repo_dir, name)?;
    let id = question.trim().to_uppercase();
    if !st.questions.iter().any(|q| q.id == id) {
        let open: Vec<&str> = (st.questions.iter())
            .filter(|q| q.is_open())
            .map(|q| q.id.as_str())
            .collect();
        return Err(usage(format!(
            "conference `{name}` has no question `{question}`; {}",
            if open.is_empty() {
                "it has no open question".to_string()
            } else {
                format!(
                    "open questions: {} (see `git conference status {name}`)",
                    open.join(", ")
                )
            }
        )));
    }
    if text.trim().is_empty() {
        return Err(usage(format!(
            "the answer is empty: write it, e.g. `git conference answer {name} {id} \"yes, go ahead\"`"
        )));
    }
    let action = Action::Answer {
        question: id,
        text: text.trim().to_string(),
    };
    deliver(repo_dir, name, action)
}

/// `git conference stop NAME`: the running conference stops after the attempts it runs, and
/// records it; `resume` goes on.
pub fn stop(repo_dir: &Path, name: &str) -> Result<Delivery> {
    let st = read_state(repo_dir, name)?;
    if st.runs_on_several_machines() {
        return Err(usage(format!(
            "`{name}` runs on several machines: stop each machine's run with Ctrl-C (it gives its \
             researchers back) and continue with `git conference join <remote> {name}`"
        )));
    }
    let repo = Repository::open(repo_dir)?;
    if crate::lock::runner(&crate::git::worktree::run_dir(&repo, name)).is_none() {
        return Ok(Delivery::NotRunning);
    }
    deliver(repo_dir, name, Action::Stop)
}

/// `git conference approve NAME [--drop A]...`: in human-in-the-loop mode, the round's
/// candidates for best go on it, less the researchers dropped.
pub fn approve(repo_dir: &Path, name: &str, drop: &[String]) -> Result<Delivery> {
    let conf = open_view(repo_dir, name)?;
    let st = conf.state();
    if conf.config.loop_mode != LoopMode::HumanInTheLoop {
        return Err(usage(format!(
            "conference `{name}` is agentic: it never waits for an approval (`- mode: human-in-the-loop` under `## Researchers` makes it pause before knowledge transfer)"
        )));
    }
    if st.phase != Phase::Transfer || !st.transfer_done.is_empty() {
        return Err(usage(format!(
            "conference `{name}` is not waiting for an approval ({}, round {}): `approve` decides \
             which validated findings knowledge transfer puts on best, in human-in-the-loop mode",
            st.phase.label(),
            st.round
        )));
    }
    let candidates: Vec<String> = candidates(&conf, &st)?
        .into_iter()
        .map(|f| f.researcher)
        .collect();
    let mut dropped = Vec::new();
    for d in drop {
        let id = d.trim().to_uppercase();
        if !candidates.contains(&id) {
            return Err(usage(format!(
                "`--drop {d}`: researcher {d} has no candidate for best in round {}; the candidates are: {}",
                st.round,
                if candidates.is_empty() { "none".to_string() } else { candidates.join(", ") }
            )));
        }
        dropped.push(id);
    }
    deliver(repo_dir, name, Action::Approve { dropped })
}

/// The conference `name` opened to read, or exit 2 when there is none.
fn open_view(repo_dir: &Path, name: &str) -> Result<Conference> {
    let repo = Repository::open(repo_dir)?;
    if repo
        .find_reference(&ConferenceRefs::new(name).events())
        .is_err()
    {
        return Err(usage(format!(
            "no conference named `{name}` in this repository (see `git conference list`)"
        )));
    }
    Conference::view(repo_dir, name)
}

fn read_state(repo_dir: &Path, name: &str) -> Result<State> {
    Ok(open_view(repo_dir, name)?.state())
}

/// Writes the request, then records it here when no runner holds the conference, or waits
/// (bounded) for the runner to record it.
fn deliver(repo_dir: &Path, name: &str, action: Action) -> Result<Delivery> {
    let repo = Repository::open(repo_dir)?;
    let refs = ConferenceRefs::new(name);
    let request = Request {
        id: new_request_id(),
        requested_at: crate::engine::now_iso(),
        action,
    };
    write_request(&repo, &refs, &request)?;
    let run_dir = crate::git::worktree::run_dir(&repo, name);
    let deadline = Instant::now() + RUNNER_WAIT;
    loop {
        if let Ok(lock) = crate::lock::RunLock::acquire(&run_dir, name) {
            let delivery = record_here(&repo, name);
            drop(lock);
            return delivery;
        }
        if recorded(&repo, &refs, &request.id)? {
            let pid = crate::lock::runner(&run_dir).unwrap_or_else(|| "?".into());
            return Ok(Delivery::RecordedByRunner { pid });
        }
        if Instant::now() >= deadline {
            let pid = crate::lock::runner(&run_dir).unwrap_or_else(|| "?".into());
            return Ok(Delivery::Queued {
                why: format!(
                    "the running conference (process {pid}) records it at its next step; \
                     `git conference status {name}` shows it then"
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Holding the run lock: records every waiting request. A conference on several machines is
/// left to its runners (a local event would fork the shared log): the request waits for this
/// clone's next `join`.
fn record_here(repo: &Repository, name: &str) -> Result<Delivery> {
    crate::engine::record::recovery::clear_stale_ref_locks(repo.commondir(), name);
    let conf = Conference::open(repo.path(), name, crate::ui::Ui::new(true))?;
    let st = conf.state();
    if st.runs_on_several_machines() {
        return Ok(Delivery::Queued {
            why: format!(
                "`{name}` runs on several machines: recorded when this clone takes part again (`git conference join <remote> {name}`)"
            ),
        });
    }
    take_requests(&conf)?;
    let flushed = conf.flush_notes();
    conf.finish_hooks();
    flushed?;
    Ok(Delivery::Recorded)
}

/// A request id: ordered as requests are made, unique across processes.
fn new_request_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{nanos:020}-{}-{n}", std::process::id())
}

/// The request as a commit (empty tree, the JSON as its message) under a create-only ref.
fn write_request(repo: &Repository, refs: &ConferenceRefs, request: &Request) -> Result<()> {
    let tree = repo.treebuilder(None)?.write()?;
    let tree = repo.find_tree(tree)?;
    let sig = crate::store::signature(repo);
    let kind = match &request.action {
        Action::Steer { .. } => "steer",
        Action::Answer { .. } => "answer",
        Action::Stop => "stop",
        Action::Approve { .. } => "approve",
    };
    let message = format!(
        "git conference {kind}\n\n{}\n",
        serde_json::to_string(request)?
    );
    let commit = repo.commit(None, &sig, &sig, &message, &tree, &[])?;
    let refname = format!("{}{}", refs.inbox(), request.id);
    repo.reference(&refname, commit, false, "git conference request")
        .with_context(|| format!("cannot write the request {refname}"))?;
    Ok(())
}

/// Whether request `id` is recorded: in the state at the event log's tip.
fn recorded(repo: &Repository, refs: &ConferenceRefs, id: &str) -> Result<bool> {
    let log = EventLog::open(repo, refs.clone())?;
    let Some(bytes) = log.read(repo, files::STATE)? else {
        return Ok(false);
    };
    let st: State = serde_json::from_slice(&bytes)?;
    Ok(st.requests.iter().any(|r| r == id))
}

/// The requests waiting in the inbox, oldest first: (ref, the request, or why it is unreadable).
fn waiting_requests(
    repo: &Repository,
    refs: &ConferenceRefs,
) -> Result<Vec<(String, Result<Request, String>)>> {
    let mut found = Vec::new();
    for r in repo.references_glob(&format!("{}*", refs.inbox()))? {
        let r = r?;
        let Some(refname) = r.name().map(str::to_string) else {
            continue;
        };
        let request = r.peel_to_commit().map_err(|e| e.to_string()).and_then(|c| {
            let message = c.message().unwrap_or("").to_string();
            let json = message.split_once("\n\n").map_or("", |(_, j)| j.trim());
            serde_json::from_str::<Request>(json).map_err(|e| e.to_string())
        });
        found.push((refname, request));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// Records every request waiting in the inbox as its event (each once), then deletes its ref.
/// Only the process holding the run lock calls it: a runner (on a poll and at its steps) or a
/// command that took the lock. On several machines, the machine that holds the chair records
/// them. Returns how many were recorded.
pub fn take_requests(conf: &Conference) -> Result<usize> {
    if !conf.runs_here(events::CHAIR) {
        return Ok(0);
    }
    let repo = conf.open_repo()?;
    let mut count = 0;
    for (refname, request) in waiting_requests(&repo, &conf.refs)? {
        match request {
            Ok(request) if !conf.state().requests.contains(&request.id) => {
                match event_of(conf, &request) {
                    Ok((event, summary)) => {
                        conf.record(event, &summary, vec![])?;
                        count += 1;
                    }
                    Err(why) => {
                        crate::errln!("git-conference: request {} not recorded: {why}", request.id)
                    }
                }
            }
            Ok(_) => {}
            Err(why) => {
                crate::errln!("git-conference: {refname} is not a request ({why}); removed")
            }
        }
        if let Ok(mut r) = repo.find_reference(&refname) {
            r.delete()
                .with_context(|| format!("cannot delete the request {refname}"))?;
        }
    }
    Ok(count)
}

/// The event a request records, with its log line's summary; Err: why it cannot be recorded
/// any more (the conference moved on since it was checked).
fn event_of(conf: &Conference, request: &Request) -> std::result::Result<(Event, String), String> {
    let st = conf.state();
    let id = request.id.clone();
    let line = |t: &str| crate::render::format::one_line(t, 80);
    Ok(match &request.action {
        Action::Steer { text } => (
            Event::Guidance(events::Guidance {
                text: text.clone(),
                round: st.round,
                requested_at: request.requested_at.clone(),
                request: id,
            }),
            line(text),
        ),
        Action::Answer { question, text } => {
            if !st.questions.iter().any(|q| &q.id == question) {
                return Err(format!("no question {question}"));
            }
            let summary = format!("{question}: {}", line(text));
            let event = Event::Answered(events::Answered {
                question: question.clone(),
                text: text.clone(),
                request: id,
            });
            (event, summary)
        }
        Action::Stop => {
            if st.phase == Phase::Done {
                return Err("the conference is complete".into());
            }
            let event = Event::StopRequested(events::StopRequested {
                round: st.round,
                requested_at: request.requested_at.clone(),
                request: id,
            });
            (event, "stop after the running attempts".into())
        }
        Action::Approve { dropped } => approval(conf, &st, dropped, id)?,
    })
}

/// `transfer.approved` for the round waiting for it.
fn approval(
    conf: &Conference,
    st: &State,
    dropped: &[String],
    request: String,
) -> std::result::Result<(Event, String), String> {
    if st.phase != Phase::Transfer || !st.transfer_done.is_empty() {
        return Err("the conference is not waiting for an approval".into());
    }
    let approved: Vec<String> = candidates(conf, st)
        .map_err(|e| format!("{e:#}"))?
        .into_iter()
        .map(|f| f.researcher)
        .filter(|r| !dropped.contains(r))
        .collect();
    let summary = format!(
        "round {}: approved {}{}",
        st.round,
        if approved.is_empty() {
            "none".to_string()
        } else {
            approved.join(", ")
        },
        if dropped.is_empty() {
            String::new()
        } else {
            format!("; dropped {}", dropped.join(", "))
        }
    );
    let event = Event::Approved(events::Approved {
        round: st.round,
        approved,
        dropped: dropped.to_vec(),
        request,
    });
    Ok((event, summary))
}

/// The round's validated findings, in the order knowledge transfer would pick them.
pub fn candidates(conf: &Conference, st: &State) -> Result<Vec<Finding>> {
    let findings = crate::engine::record::ledger::findings(conf, st.round)?;
    Ok(crate::protocol::pick::transfer_order(&findings))
}

/// What the conference must pause for before its next step, if anything: a stop asked for, and
/// in human-in-the-loop mode a blocking question, the candidates for best, a stall.
pub fn pause_needed(conf: &Conference, st: &State) -> Result<Option<Waiting>> {
    let name = &conf.name;
    let wait = |kind, detail: String| {
        Some(Waiting {
            kind,
            detail,
            round: st.round,
        })
    };
    if st.stop_requested && st.phase != Phase::Done {
        let detail = format!(
            "stopped by `git conference stop`; continue with `git conference resume {name}`"
        );
        return Ok(wait(WaitKind::Stop, detail));
    }
    if conf.config.loop_mode != LoopMode::HumanInTheLoop || st.phase == Phase::Done {
        return Ok(None);
    }
    if let Some(q) = crate::protocol::talk::blocking_question(st) {
        let detail = format!(
            "waits for the answer to {} (researcher {}, round {}): \"{}\" — answer with `git conference answer {name} {} \"…\"`, then `git conference resume {name}`",
            q.id, q.researcher, q.round, crate::render::format::one_line(&q.text, 200), q.id
        );
        return Ok(wait(WaitKind::Answer, detail));
    }
    if st.phase == Phase::Transfer && st.transfer_done.is_empty() && !approved(st) {
        let found = candidates(conf, st)?;
        if !found.is_empty() {
            return Ok(wait(
                WaitKind::Approval,
                approval_question(name, st, &found),
            ));
        }
    }
    let round_over = st.phase == Phase::Between && st.round > 0 && st.final_status.is_none();
    if round_over
        && st.stall_paused_round != st.round
        && crate::engine::stop::rules::every_researcher_stalled(st)
    {
        let detail = format!(
            "every researcher is stalled after round {}: steer them (`git conference steer {name} \"…\"`), then `git conference resume {name}`",
            st.round
        );
        return Ok(wait(WaitKind::Stalled, detail));
    }
    Ok(None)
}

fn approved(st: &State) -> bool {
    st.approvals.iter().any(|a| a.round == st.round)
}

/// The candidates for best with their review verdicts, and the command that decides.
fn approval_question(name: &str, st: &State, found: &[Finding]) -> String {
    let listed: Vec<String> = found
        .iter()
        .map(|f| {
            format!(
                "{} ({}, gain {}: {})",
                f.researcher,
                f.verdict,
                crate::render::format::fmt(Some(f.gain_reproduced)),
                crate::render::format::one_line(&f.description, 60)
            )
        })
        .collect();
    format!(
        "waits for approval of round {}'s candidates for best: {} — approve with `git conference approve {name}` (leave one out with `--drop {}`), then `git conference resume {name}`",
        st.round,
        listed.join("; "),
        found[0].researcher
    )
}

/// Records the pause that waits for `waiting` (an event) and ends the run there (exit 3).
pub fn pause_for(conf: &Conference, waiting: Waiting) -> Result<RunOutcome> {
    let st = conf.state();
    let summary = format!(
        "paused: {}",
        crate::render::format::one_line(&waiting.detail, 100)
    );
    let detail = waiting.detail.clone();
    conf.record(
        Event::Paused(events::Paused {
            round: st.round,
            pause_every: None,
            waits_for: Some(waiting),
        }),
        &summary,
        vec![],
    )?;
    Ok(RunOutcome::Waiting(detail))
}
