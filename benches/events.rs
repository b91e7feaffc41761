//! Grows a real conference's event log with synthetic events through `Conference::record`, the
//! code path every step of the engine records with (one commit per event, state.json rewritten).
//! Driven by bench/run.py, which then times `git conference status` and `resume` on it.
//!
//! Usage: events <repo> <conference-name> <count> [--one-round]
//!
//! The synthetic stream looks like a real one: rounds of 48 `researcher.iteration` events with
//! realistic payloads, each round closed by `round.completed` (resume's note replay walks back to
//! the latest `round.completed`, as it would in a real conference). With `--one-round` every
//! event is an iteration of one long round: what resume costs when the current round is long.

use std::path::Path;
use std::time::Instant;

use git_conference::engine::Conference;
use git_conference::model::event::{self as events, Event};
use git_conference::model::{CommitId, Verdict};
use git_conference::ui::Ui;

fn main() {
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let one_round = args.iter().any(|a| a == "--one-round");
    args.retain(|a| a != "--one-round");
    if args.len() != 3 {
        eprintln!("usage: events <repo> <conference-name> <count> [--one-round]");
        std::process::exit(2);
    }
    let count: u64 = args[2].parse().expect("count");
    let conf =
        Conference::open(Path::new(&args[0]), &args[1], Ui::new(true)).expect("open conference");
    let start = conf.state().events;
    let t = Instant::now();
    for i in 0..count {
        let n = start + i;
        if n % 49 == 48 && !one_round {
            let event = Event::RoundCompleted(events::RoundCompleted {
                round: (n / 49) as u32,
                best_metric: Some(1.0),
                best_researcher: None,
                best_commit: CommitId::try_from(format!("{:040x}", n)).expect("an id"),
                converged: false,
                shared_knowledge_added: vec![],
                streaks: Default::default(),
            });
            conf.record(event, &format!("synthetic round {n}"), vec![])
                .expect("record");
        } else {
            let commit = format!("{:040x}", n);
            let event = Event::Iteration(events::Iteration {
                researcher: "A".into(),
                round: (n / 49) as u32,
                iteration: (n % 49) as u32,
                metric_value: Some(1.0),
                delta: Some("+0.000000".into()),
                status: Verdict::Reverted.into(),
                commit: Some(CommitId::try_from(commit.clone()).expect("an id")),
                tree: commit,
                description: "synthetic event for the status/resume benchmark".into(),
                reason: None,
                sub_metrics: Default::default(),
                evaluated: true,
                notes: vec![],
                tokens: None,
                cost_usd: None,
                agent_s: None,
                eval_s: None,
                questions: vec![],
                placement: None,
                branch: None,
                sweep: None,
            });
            let summary = format!("A r{} i{} reverted 1", n / 49, n % 49);
            conf.record(event, &summary, vec![]).expect("record");
        }
    }
    println!(
        "{{\"appended\": {count}, \"seconds\": {:.3}, \"events\": {}}}",
        t.elapsed().as_secs_f64(),
        conf.state().events
    );
}
