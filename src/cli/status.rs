//! `status`: where a conference stands, read from the state tree at the event log's tip (one
//! blob, however long the log is).

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::engine::state::State;
use crate::engine::Conference;
use crate::render::format::fmt;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Show where a conference stands: round, phase, best metric and commit, per-researcher counts,
/// stop reason.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// Prints where the conference stands, as text or as JSON.
pub fn run(args: StatusArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name(&repo, args.name)?;
    let conf = Conference::view(repo.path(), &name)?;
    let st = conf.state();
    let runner = crate::lock::runner(conf.run_dir());
    let shown = crate::lock::shown_status(&st.status, runner.as_deref());
    if args.format == Format::Json {
        print_json(&repo, &name, &conf)?;
        return Ok(0);
    }
    for line in crate::render::talk::status_top(&st, &name) {
        crate::outln!("{line}");
    }
    print_summary(&name, &conf, &st, &shown);
    for line in crate::render::talk::status_guidance(&st) {
        crate::outln!("{line}");
    }
    if let Some(brief) = &st.knowledge_brief {
        crate::outln!(
            "Knowledge:  briefed {} (`git conference knowledge show ID`)",
            brief.entries.join(", ")
        );
    }
    print_running(&conf, &st, runner.is_some());
    for line in crate::render::status::researchers(&st) {
        crate::outln!("{line}");
    }
    let minimize = conf.direction() == Some(crate::config::Direction::Minimize);
    for line in crate::render::tree::status_lines(&st, &name, minimize) {
        crate::outln!("{line}");
    }
    print_machines(&repo, &conf, &st);
    print_voided(&st);
    for line in crate::render::status::last_reasons(&st) {
        crate::outln!("{line}");
    }
    print_commands(&repo, &name, conf.config());
    Ok(0)
}

/// The state as JSON, with the runner's pid, the status shown and whether this clone trusts
/// the commands (the same value `serve` answers `/api/<name>/status` with).
fn print_json(repo: &git2::Repository, name: &str, conf: &Conference) -> Result<()> {
    let value = crate::serve::views::status_json(repo, name, conf)?;
    crate::outln!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

/// Title, status, stop reason, warning, round, baseline, best, iterations, budgets, events.
fn print_summary(name: &str, conf: &Conference, st: &State, shown: &str) {
    let metric = crate::engine::measure::evaluate::metric_name(conf.config());
    crate::outln!("Conference: {} ({})", conf.config().title, name);
    crate::outln!(
        "Status:     {}{}",
        shown,
        st.final_status
            .as_ref()
            .map(|s| format!(" — {s}"))
            .unwrap_or_default()
    );
    if let Some(reason) = &st.stop_reason {
        crate::outln!("Stopped:    {reason}");
    }
    if let Some(warning) = &st.noisy_evaluation {
        crate::outln!("Warning:    {warning}");
    }
    crate::outln!(
        "Round:      {} of at most {} · {}",
        st.round,
        conf.config().max_rounds,
        st.phase.label()
    );
    crate::outln!(
        "Baseline:   {metric} {} at {}",
        fmt(st.baseline_metric),
        crate::model::short_id(&st.baseline_commit)
    );
    crate::outln!(
        "Best:       {metric} {} at {} ({}){}",
        fmt(st.best.metric),
        crate::model::short_id(&st.best.commit),
        conf.refs().best_branch(),
        st.best
            .researcher
            .as_ref()
            .map(|r| format!(", last from researcher {r}"))
            .unwrap_or_default()
    );
    crate::outln!(
        "Iterations: {}{}",
        st.total_iterations,
        conf.config()
            .max_total_iterations
            .map(|m| format!(" of {m}"))
            .unwrap_or_default()
    );
    if let Some(s) = &st.sweeps {
        crate::outln!(
            "Sweeps:     {} ({} evaluations); last {}",
            s.sweeps,
            s.evaluations,
            s.last
        );
    }
    for line in crate::engine::stop::budget::status_lines(conf.config(), st) {
        crate::outln!("{line}");
    }
    for line in crate::render::cost::status_lines(st) {
        crate::outln!("{line}");
    }
    crate::outln!(
        "Events:     {} (last: {} at {})",
        st.events,
        st.last_event,
        st.updated_at
    );
}

/// The running time, what is left of each budget and when the run would end. While this
/// machine runs the conference (one machine), the time since its last event counts too.
fn print_running(conf: &Conference, st: &State, running_here: bool) {
    let live = if running_here && st.machines.is_empty() {
        time::OffsetDateTime::parse(
            &st.updated_at,
            &time::format_description::well_known::Rfc3339,
        )
        .map(|t| crate::clock::now_unix().saturating_sub(t.unix_timestamp().max(0) as u64))
        .unwrap_or(0) as f64
    } else {
        0.0
    };
    for line in
        crate::engine::stop::budget::running_lines(conf.config(), st, st.running_seconds() + live)
    {
        crate::outln!("{line}");
    }
    for line in crate::render::status::attempt_time(st) {
        crate::outln!("{line}");
    }
    let attempts = crate::engine::record::ledger::all_attempts(conf, st).unwrap_or_default();
    if let Some(line) = crate::render::status::hardware(&attempts) {
        crate::outln!("{line}");
    }
}

/// On several machines: one row per machine — the researchers it ran, its iterations and
/// chair events, its spend, its last event — and the leases as this clone last saw them
/// (`refs/conference/<name>/leases/*`, brought by `fetch` or by taking part).
fn print_machines(repo: &git2::Repository, conf: &Conference, st: &State) {
    // A completed conference holds no lease: every machine gave its own back as it left, and
    // copies seen before that are out of date.
    let leases = match st.phase {
        crate::model::state::Phase::Done => Vec::new(),
        _ => crate::remote::lease::seen(repo, conf.refs()),
    };
    if st.machines.is_empty() && leases.is_empty() {
        return;
    }
    crate::outln!();
    crate::outln!(
        "{:<20} {:<12} {:>10} {:>6} {:>10}  {:<21} lease",
        "machine",
        "researchers",
        "iterations",
        "chair",
        "spend",
        "last event"
    );
    let mut names: std::collections::BTreeSet<&String> = st.machines.keys().collect();
    names.extend(leases.iter().map(|l| &l.holder));
    for name in names {
        let record = st.machines.get(name).cloned().unwrap_or_default();
        let held: Vec<String> = leases
            .iter()
            .filter(|l| &l.holder == name)
            .map(|l| format!("{} (heartbeat {}s ago)", l.slot, l.age_seconds))
            .collect();
        crate::outln!(
            "{:<20} {:<12} {:>10} {:>6} {:>10}  {:<21} {}",
            name,
            record
                .researchers
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(","),
            record.iterations,
            record.chair_events,
            format!("${:.2}", record.spend.cost_usd),
            if record.last_event.is_empty() {
                "-"
            } else {
                &record.last_event
            },
            if held.is_empty() {
                "none".to_string()
            } else {
                held.join(", ")
            }
        );
    }
}

/// On several machines: the events participants published that were refused and voided.
fn print_voided(st: &State) {
    let lines = crate::render::report::voided_lines(st);
    if lines.is_empty() {
        return;
    }
    crate::outln!();
    crate::outln!("Refused participants' events:");
    for line in lines {
        crate::outln!("- {line}");
    }
}

/// The commands the conference runs, and whether this clone approved them (`crate::trust`).
fn print_commands(repo: &git2::Repository, name: &str, cfg: &crate::config::Config) {
    let trusted = crate::trust::is_trusted(repo, name, cfg);
    crate::outln!();
    crate::outln!(
        "Commands ({}):",
        if trusted {
            "trusted by this clone".to_string()
        } else {
            format!("NOT trusted by this clone: `git conference trust {name}` to approve")
        }
    );
    for line in crate::trust::describe(cfg).lines() {
        crate::outln!("{line}");
    }
}
