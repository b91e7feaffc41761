//! `log`: the event log, as text, the seed's JSON lines, or the seed's conference_results.tsv;
//! `--follow` watches it live; `--graph` draws the attempt tree instead (`--format json`: its
//! nodes with their parents).

use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};
use git2::Repository;

use crate::engine::record::tables::conference_results_tsv;
use crate::engine::Conference;
use crate::model::event::names;
use crate::model::EventLine;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Jsonl,
    Tsv,
    /// With `--graph`: the attempt tree's nodes, each with its parent's commit.
    Json,
}

/// Show the event log (text, the seed's JSON lines, or the results table as TSV).
#[derive(Args, Debug)]
pub struct LogArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Keep watching and print new events as they are recorded (until the conference completes).
    #[arg(long, short)]
    pub follow: bool,
    /// Draw the attempt tree: every attempt under the node it started from, with its verdict
    /// and metric, the path from the baseline to best marked `*` (`--format json`: the nodes).
    #[arg(long)]
    pub graph: bool,
}

fn print_event(event: &EventLine, summary: &str, format: Format) {
    match format {
        Format::Jsonl => crate::outln!("{}", serde_json::to_string(event).unwrap_or_default()),
        _ => crate::outln!(
            "{}  {:<22} {}{}",
            event.timestamp,
            event.event,
            summary,
            reason_suffix(event)
        ),
    }
}

/// An attempt's reason, from its payload, when its verdict carries one (also for logs written
/// before the summary said it).
fn reason_suffix(event: &EventLine) -> String {
    let p = &event.payload;
    if event.event != names::ITERATION {
        return String::new();
    }
    let verdict = crate::model::Word::read(p.get("status").and_then(|v| v.as_str()).unwrap_or(""));
    if !crate::model::reasons::shows_reason(&verdict) {
        return String::new();
    }
    let reason = p.get("reason").and_then(|v| v.as_str());
    let why = crate::model::reasons::reason_text(&verdict, reason);
    format!(" — {}", crate::render::format::one_line(&why, 200))
}

pub fn run(args: LogArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name(&repo, args.name)?;
    if args.graph {
        return graph(&repo, &name, args.format, args.follow);
    }
    if args.format == Format::Json {
        return Err(crate::error::usage(
            "`--format json` goes with `--graph` (the attempt tree); the event log as JSON lines is `--format jsonl`",
        ));
    }
    if args.format == Format::Tsv {
        return tsv(&repo, &name);
    }
    let (events, mut seen) = crate::engine::commands::log::read_all(&repo, &name)?;
    for e in &events {
        print_event(&e.event, &e.summary, args.format);
    }
    if !args.follow {
        return Ok(0);
    }
    let mut done = events.iter().any(|e| e.event.event == names::COMPLETED);
    while !done {
        std::thread::sleep(Duration::from_millis(500));
        let (fresh, tip) = crate::engine::commands::log::recorded_since(&repo, &name, seen)?;
        if tip == seen {
            continue;
        }
        for e in fresh.iter().rev() {
            print_event(&e.event, &e.summary, args.format);
            done |= e.event.event == names::COMPLETED;
        }
        seen = tip;
    }
    Ok(0)
}

fn tsv(repo: &Repository, name: &str) -> Result<i32> {
    let conf = Conference::view(repo.path(), name)?;
    print!("{}", conference_results_tsv(&conf, &conf.state())?);
    Ok(0)
}

/// `log --graph`: the attempt tree, drawn or as JSON.
fn graph(repo: &Repository, name: &str, format: Format, follow: bool) -> Result<i32> {
    if follow || matches!(format, Format::Jsonl | Format::Tsv) {
        return Err(crate::error::usage(
            "`--graph` draws the tree as it stands: with `--format text` (the default) or `--format json`, without `--follow`",
        ));
    }
    let conf = Conference::view(repo.path(), name)?;
    let nodes = crate::engine::record::lineage::nodes(&conf)?;
    if format == Format::Json {
        let out = serde_json::json!({
            "conference": name,
            "branching": conf.config().branching.as_str(),
            "best": conf.state().best.commit,
            "nodes": nodes,
        });
        crate::outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    crate::outln!(
        "Attempt tree of `{name}` (branching {}): each attempt under the node it started from; * marks the path from the baseline to best.",
        conf.config().branching.as_str()
    );
    print!("{}", crate::render::tree::graph(&nodes, false));
    Ok(0)
}
