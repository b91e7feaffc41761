//! The loop of a conference that runs on several machines (`start --remote`, `join`): the same
//! steps as on one machine (`driver::step`), each taken by the machine that holds its slot.
//!
//! Every pass, the machine takes what other machines published (`Conference::sync_shared`),
//! claims what it may run (free slots it wants, its own leases a killed run left, leases expired
//! elsewhere), then runs its researchers during the research phase, and the chair's phases
//! (baseline, round start, poster, review, transfer, synthesis) when it holds the chair; else
//! it waits for the next pass. A thread renews its leases meanwhile, so a long agent run or
//! review does not let them expire. Every machine leaves when the conference is done, giving
//! its leases back.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::engine::run::driver;
use crate::engine::state::Phase;
use crate::engine::{Conference, RunOutcome};
use crate::exec::process;
use crate::model::event::CHAIR;
use crate::model::{FinalStatus, RunStatus};
use crate::remote::link::Link;
use crate::remote::publish::Refused;

/// How long a machine with nothing to run waits before looking at the remote again.
const POLL: Duration = Duration::from_millis(300);

/// How often a remote out of reach is said (it is retried every pass).
const SAY_UNREACHABLE_EVERY: Duration = Duration::from_secs(30);

pub async fn drive(conf: Arc<Conference>) -> Result<RunOutcome> {
    let link = conf
        .link()
        .expect("a conference on several machines has a link");
    let heartbeat = Heartbeat::start(&conf, link.clone())?;
    let outcome = run(&conf, &link).await;
    // Everything recorded goes out before the leases are given back: a lease given back with
    // events unpublished would let another machine take the slot and drop them.
    conf.finish_publishing();
    heartbeat.stop();
    if let Ok(repo) = conf.open_repo() {
        link.release_all(&repo);
    }
    outcome
}

/// Gives this clone's knowledge store (with what the retrospective of a conference that ended
/// here added) to the shared remote as the machine leaves; a failure is a warning only.
pub fn give_knowledge(conf: &Conference, remote: &str) {
    let given = conf
        .open_repo()
        .and_then(|repo| crate::engine::commands::knowledge_exchange::give(&repo, remote));
    match given {
        Ok(Some(line)) => conf.ui.info(&line),
        Ok(None) => {}
        Err(e) => conf.ui.warn(&format!(
            "warning: the knowledge store was not given to {remote}: {e:#}; `git conference push {remote}` gives it"
        )),
    }
}

async fn run(conf: &Arc<Conference>, link: &Link) -> Result<RunOutcome> {
    let mut unreachable_said: Option<Instant> = None;
    let mut waiting_said = String::new();
    loop {
        if process::cancelled() {
            return Ok(RunOutcome::Interrupted);
        }
        let synced = conf.sync_shared();
        if let Some(outcome) = ended(conf, link) {
            return Ok(outcome);
        }
        if let Err(e) = synced.and_then(|_| claim(conf, link)) {
            if e.is::<Refused>() {
                return Err(e);
            }
            if unreachable_said.is_none_or(|at| at.elapsed() >= SAY_UNREACHABLE_EVERY) {
                conf.ui.warn(&format!("warning: {e:#}; trying again"));
                unreachable_said = Some(Instant::now());
            }
            tokio::time::sleep(POLL).await;
            continue;
        }
        let st = conf.state();
        let mine_to_run = st
            .researchers
            .iter()
            .any(|(id, r)| r.round_finished.is_none() && link.holds(id));
        let runs_a_step = match st.phase {
            Phase::Research => mine_to_run,
            _ => link.holds(CHAIR),
        };
        if !runs_a_step {
            let waiting = waiting_for(conf, link, &st);
            if waiting != waiting_said {
                conf.ui.info(&waiting);
                waiting_said = waiting;
            }
            tokio::time::sleep(POLL).await;
            continue;
        }
        waiting_said.clear();
        if let Some(outcome) = driver::step(conf).await? {
            return Ok(outcome);
        }
    }
}

/// How the run ends when the recorded state says it is over for this machine: the conference
/// is done, or the chair paused it.
fn ended(conf: &Conference, link: &Link) -> Option<RunOutcome> {
    let st = conf.state();
    if st.phase == Phase::Done {
        let status = st
            .final_status
            .unwrap_or_else(|| FinalStatus::Converged.into());
        return Some(RunOutcome::Completed(status));
    }
    (st.status == RunStatus::Paused.as_str() && !link.holds(CHAIR)).then_some(RunOutcome::Paused)
}

/// Claims what this machine may run, and says what it took and what it lost.
fn claim(conf: &Conference, link: &Link) -> Result<()> {
    let repo = conf.open_repo()?;
    let st = conf.state();
    let researchers: Vec<String> = st.researchers.keys().cloned().collect();
    // A researcher some machine ran and no machine holds now was given back (or its machine
    // left): any machine takes it after the lease.
    let released: BTreeSet<String> = st
        .machines
        .values()
        .flat_map(|m| m.researchers.iter().cloned())
        .collect();
    for (slot, from) in link.claim(&repo, &researchers, &released)? {
        let what = slot_named(&slot);
        match from {
            Some(machine) => conf.ui.info(&format!(
                "{}: took over {what} from {machine}, silent for longer than its lease",
                link.machine
            )),
            None => conf.ui.info(&format!("{}: runs {what}", link.machine)),
        }
    }
    for slot in link.take_lost() {
        conf.ui.warn(&format!(
            "warning: {}: another machine took over {slot} (this one was silent for longer than its lease of {}s); stopped it here",
            link.machine,
            link.lease().as_secs()
        ));
    }
    Ok(())
}

/// A slot as the lines that say who runs it name it.
pub(super) fn slot_named(slot: &str) -> String {
    match slot {
        CHAIR => "the chair (baseline, round starts, poster, review, transfer)".to_string(),
        id => format!("researcher {id}"),
    }
}

/// What this machine waits for, as one line: the researchers still running this round (and
/// the machine running each), or the chair's phase; a slot no machine holds says who must join.
fn waiting_for(conf: &Conference, link: &Link, st: &crate::model::state::State) -> String {
    let holders = conf
        .open_repo()
        .map(|repo| link.holders(&repo))
        .unwrap_or_default();
    let one = |slot: &str, what: String| {
        match holders.get(slot) {
        Some(machine) => format!("{what} ({machine} runs it)"),
        None if slot == CHAIR => format!("{what}: no machine holds it"),
        None => format!(
            "{what}: no machine holds it; run `git conference join {} {} --researchers {slot}` (a machine that ran it before takes it after the lease of {}s)",
            link.remote,
            conf.name,
            link.lease().as_secs()
        ),
    }
    };
    let waits: Vec<String> = match st.phase {
        Phase::Research => st
            .researchers
            .iter()
            .filter(|(id, r)| r.round_finished.is_none() && !link.holds(id))
            .map(|(id, _)| one(id, format!("researcher {id}")))
            .collect(),
        phase => vec![one(CHAIR, format!("the chair ({})", phase.label()))],
    };
    if waits.is_empty() {
        return format!("{}: waiting for the next round", link.machine);
    }
    format!("{}: waiting for {}", link.machine, waits.join("; "))
}

/// The thread that renews this machine's leases while its researchers and phases run.
struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Heartbeat {
    fn start(conf: &Conference, link: Arc<Link>) -> Result<Heartbeat> {
        let repo = conf.open_repo()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let tick = (link.lease() / 6).max(Duration::from_millis(100));
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                if let Err(e) = link.heartbeat(&repo) {
                    crate::errln!("git-conference: lease not renewed yet: {e:#}");
                }
            }
        });
        Ok(Heartbeat { stop, thread })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}
