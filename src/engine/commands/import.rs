//! `git conference import DIR`: a folder the original prompt-based autoconference left (its
//! `conference.md`, `conference_events.jsonl`, `conference_results.tsv`, `researcher_*_results.tsv`,
//! and its `conference/best` branch where the repository has one) made into a git-native
//! conference, so that `status`, `log`, `report` and `resume` work on it.
//!
//! Everything is read and checked first: a malformed line is an error naming its file and line,
//! and nothing is created. Then the event log is written as commits no ref names yet —
//! `conference.started`, each of the original's events (its payload marked `"imported": true`),
//! and `conference.imported` with the state the original's files describe — and one
//! compare-and-swap creates the event log's ref: the commit point (a kill before it leaves
//! nothing, after it `resume` makes the branches the state names).
//!
//! The state is taken, never guessed: rounds the original completed (`round.completed`, or the
//! old `round.N.completed`) are done; its attempts become the rounds' attempts records; its stop
//! event (converged, stalled, budget stop) and `conference.completed` set the phase; its best is
//! the `conference/best` branch with the last completed round's best metric. What has no place
//! (a best without its branch, a status without a verdict, an unfinished round…) is listed in
//! `conference.imported` and printed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use git2::{Oid, Repository};
use serde_json::Value;

use crate::config::Config;
use crate::engine::state::{files, Phase, State};
use crate::model::event::{Event, Imported, Started};
use crate::model::seed::{self, Row};
use crate::model::{AttemptRecord, CommitId, EventLine, FinalStatus, RunStatus, Verdict};
use crate::store::{ConferenceRefs, StateChange};

/// The files of the original's folder, read and checked.
#[derive(Debug, Default)]
pub struct Source {
    pub dir: PathBuf,
    /// `(line, event)` of `conference_events.jsonl`.
    pub events: Vec<(usize, EventLine)>,
    /// The rows of `conference_results.tsv`.
    pub rows: Vec<Row>,
    /// The rows of each `researcher_{ID}_results.tsv`, by ID.
    pub researcher_rows: Vec<(String, Vec<Row>)>,
    /// Each round's `poster_session_round_N.md` and `peer_review_round_N.md`: (round, the
    /// state tree's path for it, its bytes).
    pub round_pages: Vec<(u32, String, Vec<u8>)>,
    /// The folder's other files, which the import does not read.
    pub unread: Vec<String>,
}

pub const EVENTS_FILE: &str = "conference_events.jsonl";
pub const RESULTS_FILE: &str = "conference_results.tsv";

/// Reads the folder's event log and results tables; a malformed line is a usage error (exit 2)
/// naming the file and line.
pub fn read_source(dir: &Path) -> Result<Source> {
    let mut source = Source {
        dir: dir.to_path_buf(),
        ..Source::default()
    };
    let bad = |file: &Path, m: seed::Malformed| {
        crate::error::usage(format!(
            "{}:{}: {}; nothing was imported",
            file.display(),
            m.line,
            m.message
        ))
    };
    if let Some((path, text)) = read_optional(&dir.join(EVENTS_FILE))? {
        source.events = seed::parse_events(&text).map_err(|m| bad(&path, m))?;
    }
    if let Some((path, text)) = read_optional(&dir.join(RESULTS_FILE))? {
        source.rows =
            seed::parse_results(&text, &seed::CONFERENCE_COLUMNS).map_err(|m| bad(&path, m))?;
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    let (tables, others): (Vec<PathBuf>, Vec<PathBuf>) = paths
        .into_iter()
        .partition(|p| researcher_of_table(p).is_some());
    for path in others {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match round_page(&name) {
            Some((round, state_path)) => {
                source
                    .round_pages
                    .push((round, state_path, std::fs::read(&path)?))
            }
            None if [EVENTS_FILE, RESULTS_FILE, "conference.md"].contains(&name.as_str()) => {}
            None => source.unread.push(name),
        }
    }
    for path in tables {
        let id = researcher_of_table(&path).unwrap_or_default();
        if let Some((path, text)) = read_optional(&path)? {
            let rows =
                seed::parse_results(&text, &seed::RESEARCHER_COLUMNS).map_err(|m| bad(&path, m))?;
            source.researcher_rows.push((id, rows));
        }
    }
    Ok(source)
}

/// The round of a poster or review page (`poster_session_round_N.md`,
/// `peer_review_round_N.md`) and where the state tree keeps it.
fn round_page(name: &str) -> Option<(u32, String)> {
    let number = |prefix: &str| {
        name.strip_prefix(prefix)?
            .strip_suffix(".md")?
            .parse::<u32>()
            .ok()
    };
    if let Some(round) = number("poster_session_round_") {
        return Some((round, files::poster(round)));
    }
    number("peer_review_round_").map(|round| (round, files::review(round)))
}

/// `X` of a `researcher_X_results.tsv` path.
fn researcher_of_table(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let id = name
        .strip_prefix("researcher_")?
        .strip_suffix("_results.tsv")?;
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_uppercase())).then(|| id.to_string())
}

/// The file's text (a usage error when it is not UTF-8), None when it is not there.
fn read_optional(path: &Path) -> Result<Option<(PathBuf, String)>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        crate::error::usage(format!(
            "{}: not UTF-8 text (byte {}); nothing was imported",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok(Some((path.to_path_buf(), text)))
}

/// What the import made.
#[derive(Debug)]
pub struct Outcome {
    pub state: State,
    pub events: usize,
    pub attempts: usize,
    pub not_mapped: Vec<String>,
}

/// Everything the import writes, computed before anything is.
struct Plan {
    state: State,
    attempts: Vec<AttemptRecord>,
    not_mapped: Vec<String>,
}

/// Makes conference `name` from `source`, at baseline `base`, with `best` the original's best
/// branch when the repository has one. The caller checked that `name` is free.
pub fn import(
    repo: &Repository,
    name: &str,
    config: &Config,
    config_text: &str,
    base: Oid,
    best: Option<Oid>,
    source: &Source,
) -> Result<Outcome> {
    let started_at = source
        .events
        .first()
        .map(|(_, e)| e.timestamp.clone())
        .filter(|t| parse_time(t).is_some())
        .unwrap_or_else(crate::clock::now_iso);
    let mut initial = crate::engine::initial_state(name, config, base, &started_at);
    initial.started_unix = parse_time(&started_at).unwrap_or_else(crate::clock::now_unix);
    let mut plan = plan(initial.clone(), config, best, source);
    for branch in researcher_branches(repo)? {
        plan.not_mapped.push(format!("branch {branch}: not taken (each researcher starts the next round from the best, as in the original)"));
    }
    let tip = write_log(
        repo,
        name,
        config,
        config_text,
        base,
        &initial,
        &plan,
        source,
    )?;
    crate::failpoint::hit("import.written");
    crate::store::cas::update(
        repo,
        &ConferenceRefs::new(name).events(),
        tip,
        None,
        "git conference import",
    )?;
    Ok(Outcome {
        events: source.events.len(),
        attempts: plan.attempts.len(),
        state: plan.state,
        not_mapped: plan.not_mapped,
    })
}

/// The original's researcher branches in this repository (`conference/researcher-A`, …).
fn researcher_branches(repo: &Repository) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for r in repo.references_glob("refs/heads/conference/researcher-*")? {
        if let Some(name) = r?.name().and_then(|n| n.strip_prefix("refs/heads/")) {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// Seconds since the epoch of an RFC 3339 time.
fn parse_time(t: &str) -> Option<u64> {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp().max(0) as u64)
}

/// The state the original's files describe, its attempts, and what has no place.
fn plan(mut st: State, config: &Config, best: Option<Oid>, source: &Source) -> Plan {
    let mut not_mapped = Vec::new();
    let completed = completed_rounds(source, &mut not_mapped);
    st.round = completed.len() as u32;
    st.round_bests = completed.iter().map(|(_, m)| *m).collect();
    st.baseline_metric = baseline_metric(source, &mut not_mapped);
    st.best.metric = st.baseline_metric;
    let attempts = attempts(&mut st, source, &mut not_mapped);
    set_best(&mut st, config, best, &completed, source, &mut not_mapped);
    set_phase(&mut st, source, &mut not_mapped);
    for r in st.researchers.values_mut() {
        r.head = st.best.commit.clone();
        r.round_start = st.best.commit.clone();
        r.best_metric = st.best.metric;
        r.round_start_metric = st.best.metric;
    }
    st.events = source.events.len() as u64 + 2;
    st.last_event = crate::model::event::names::IMPORTED.into();
    st.updated_at = source
        .events
        .last()
        .map(|(_, e)| e.timestamp.clone())
        .unwrap_or_else(|| st.started_at.clone());
    let unknown: Vec<String> = source
        .events
        .iter()
        .filter(|(_, e)| !KNOWN_EVENTS.contains(&e.event.as_str()) && !seed::completes_round(e))
        .map(|(n, e)| format!("{EVENTS_FILE}:{n}: event `{}` (kept in the log as imported; it changes nothing here)", e.event))
        .collect();
    not_mapped.extend(unknown);
    for (round, path, _) in source.round_pages.iter().filter(|(r, _, _)| *r > st.round) {
        let file = path.rsplit('/').next().unwrap_or(path);
        not_mapped.push(format!(
            "{file}: round {round} did not complete in the original (not taken)"
        ));
    }
    if !source.unread.is_empty() {
        not_mapped.push(format!("files not read: {}", source.unread.join(", ")));
    }
    not_mapped.extend(source.events.iter().filter(|(_, e)| e.event == "researcher.stuck").map(|(n, e)| {
        format!(
            "{EVENTS_FILE}:{n}: researcher {} at stuck level {} (history only: stuck levels start again at 0)",
            e.payload.get("researcher").and_then(Value::as_str).unwrap_or("?"),
            e.payload.get("stuck_level").and_then(Value::as_u64).unwrap_or(0)
        )
    }));
    Plan {
        state: st,
        attempts,
        not_mapped,
    }
}

/// The seed's event names (SEED-FORMATS.md) this import reads or keeps as history.
const KNOWN_EVENTS: [&str; 13] = [
    "conference.started",
    "round.started",
    "researcher.iteration",
    "round.poster_session",
    "round.peer_review",
    "round.completed",
    "researcher.stuck",
    "conference.converged",
    "conference.completed",
    "conference.resumed",
    "conference.stalled",
    "conference.failed",
    "conference.budget_stop",
];

/// The rounds the original completed, in order, each with its best metric (numbered 1, 2, …
/// without gaps; without an event log, the rounds of the results table).
fn completed_rounds(source: &Source, not_mapped: &mut Vec<String>) -> Vec<(u32, Option<f64>)> {
    let mut done: Vec<(u32, Option<f64>)> = Vec::new();
    if source.events.is_empty() {
        let last = source
            .rows
            .iter()
            .filter_map(|r| r.round)
            .max()
            .unwrap_or(0);
        if last > 0 {
            not_mapped.push(format!("no {EVENTS_FILE}: rounds 1–{last} of {RESULTS_FILE} are taken as completed, without their best metrics"));
        }
        return (1..=last).map(|r| (r, None)).collect();
    }
    for (n, e) in source
        .events
        .iter()
        .filter(|(_, e)| seed::completes_round(e))
    {
        match seed::round_of(e) {
            Some(r) if r as usize == done.len() + 1 => {
                done.push((r, seed::number(e.payload.get("best_metric"))))
            }
            Some(r) if (r as usize) <= done.len() => {}
            _ => not_mapped.push(format!(
                "{EVENTS_FILE}:{n}: `{}` does not follow round {} (kept as history only)",
                e.event,
                done.len()
            )),
        }
    }
    done
}

/// The baseline's metric: the first `baseline` row of the results tables.
fn baseline_metric(source: &Source, not_mapped: &mut Vec<String>) -> Option<f64> {
    let all = source
        .rows
        .iter()
        .chain(source.researcher_rows.iter().flat_map(|(_, rows)| rows));
    let found = all
        .filter(|r| r.status == "baseline")
        .find_map(|r| r.metric);
    if found.is_none() {
        not_mapped.push("no `baseline` row with a metric in the results tables: the baseline's metric is unknown".into());
    }
    found
}

/// The attempts of completed rounds, counted into the researchers' state.
fn attempts(st: &mut State, source: &Source, not_mapped: &mut Vec<String>) -> Vec<AttemptRecord> {
    let mut out = Vec::new();
    for row in source.rows.iter().filter(|r| r.status != "baseline") {
        let at = format!("{RESULTS_FILE}:{}", row.line);
        let (Some(round), Some(id)) = (row.round, row.researcher.clone()) else {
            continue;
        };
        let Some(verdict) = verdict_of(&row.status) else {
            not_mapped.push(format!(
                "{at}: status `{}` has no verdict here (left out)",
                row.status
            ));
            continue;
        };
        if round > st.round {
            not_mapped.push(format!("{at}: round {round} did not complete in the original (left out; `resume` runs it again)"));
            continue;
        }
        let Some(r) = st.researchers.get_mut(&id) else {
            not_mapped.push(format!(
                "{at}: researcher `{id}` is not one of conference.md's (left out)"
            ));
            continue;
        };
        r.counts.add(verdict);
        r.attempts += 1;
        r.last_verdict = Some(verdict.to_string());
        st.total_iterations += 1;
        out.push(record(row, round, &id, verdict));
    }
    out
}

/// The verdict of a results-table status (None: none fits).
fn verdict_of(status: &str) -> Option<Verdict> {
    match status {
        "kept" => Some(Verdict::Kept),
        "reverted" => Some(Verdict::Reverted),
        "failed" => Some(Verdict::Crashed),
        _ => None,
    }
}

/// The attempt record of a row (no commit: the original kept none per attempt).
fn record(row: &Row, round: u32, researcher: &str, verdict: Verdict) -> AttemptRecord {
    let review = row
        .review
        .as_ref()
        .map(|v| format!(" [peer review: {v}]"))
        .unwrap_or_default();
    AttemptRecord {
        round,
        researcher: researcher.to_string(),
        iteration: row.iteration,
        commit: None,
        tree: String::new(),
        metric: row.metric,
        delta: row.delta,
        verdict: verdict.into(),
        description: format!("{}{review}", row.description),
        reason: (verdict == Verdict::Crashed)
            .then(|| "failed in the original conference (imported)".to_string()),
        timestamp: row.timestamp.clone(),
        sub_metrics: Default::default(),
        tokens: None,
        cost_usd: None,
        agent_s: None,
        eval_s: None,
        placement: None,
        machine: None,
        sweep: None,
    }
}

/// The best: the original's `conference/best` branch with the last completed round's best
/// metric; else the baseline, and why.
fn set_best(
    st: &mut State,
    config: &Config,
    best: Option<Oid>,
    completed: &[(u32, Option<f64>)],
    source: &Source,
    not_mapped: &mut Vec<String>,
) {
    let last = completed.last().copied();
    let claimed = last.and_then(|(_, m)| m);
    let researcher = source
        .events
        .iter()
        .rev()
        .filter(|(_, e)| seed::completes_round(e))
        .find_map(|(_, e)| e.payload.get("best_researcher").and_then(Value::as_str))
        .map(str::to_string);
    match best {
        Some(commit) => {
            st.best.commit = commit.into();
            st.best.metric = claimed.or(st.baseline_metric);
            st.best.researcher = researcher;
            st.best.round = last.map_or(0, |(r, _)| r);
        }
        None if claimed.is_some() && claimed != st.baseline_metric => not_mapped.push(format!(
            "the original's best ({} = {}) has no commit here (no `conference/best` branch): the best stays at the baseline",
            crate::engine::measure::evaluate::metric_name(config),
            claimed.unwrap_or_default()
        )),
        None => {}
    }
}

/// The phase and final status: done after `conference.completed`, synthesis after a stop event
/// alone, else between rounds.
fn set_phase(st: &mut State, source: &Source, not_mapped: &mut Vec<String>) {
    let stop = source.events.iter().rev().find_map(|(_, e)| {
        let status = match e.event.as_str() {
            "conference.converged" => FinalStatus::Converged,
            "conference.stalled" => FinalStatus::Stalled,
            "conference.budget_stop" => FinalStatus::BudgetStop,
            _ => return None,
        };
        let reason = e
            .payload
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or(status.as_str());
        Some((status, reason.to_string()))
    });
    let completed = source
        .events
        .iter()
        .any(|(_, e)| e.event == "conference.completed");
    st.status = RunStatus::Running.into();
    st.phase = Phase::Between;
    if let Some((status, reason)) = stop {
        st.final_status = Some(status.to_string());
        st.stop_reason = Some(format!("{reason} (in the original conference)"));
        st.phase = Phase::Synthesis;
    }
    if completed {
        st.phase = Phase::Done;
        st.status = RunStatus::Completed.into();
        if st.final_status.is_none() {
            not_mapped.push(
                "`conference.completed` without a stop event: why the original stopped is unknown"
                    .into(),
            );
        }
    }
}

/// Writes the event log's commits (no ref yet): started, the original's events, imported.
#[allow(clippy::too_many_arguments)]
fn write_log(
    repo: &Repository,
    name: &str,
    config: &Config,
    config_text: &str,
    base: Oid,
    initial: &State,
    plan: &Plan,
    source: &Source,
) -> Result<Oid> {
    use crate::store::events::write_commit;
    let started = Event::Started(Started {
        researchers: config.count,
        mode: serde_json::to_value(config.mode)?,
        goal: config.goal.clone(),
        config_summary: format!("imported from {}", source.dir.display()),
        base: base.into(),
    });
    let changes = [
        StateChange::Put(files::CONFIG.into(), config_text.as_bytes().to_vec()),
        StateChange::Put(files::STATE.into(), serde_json::to_vec_pretty(initial)?),
    ];
    let mut tip = write_commit(
        repo,
        None,
        &started.line(initial.started_at.clone()),
        &format!("{} (imported)", config.title),
        &changes,
    )?;
    for (n, e) in &source.events {
        let mut line = e.clone();
        if let Some(map) = line.payload.as_object_mut() {
            map.insert("imported".into(), Value::Bool(true));
        }
        tip = write_commit(
            repo,
            Some(tip),
            &line,
            &format!("imported from {EVENTS_FILE} line {n}"),
            &[],
        )?;
    }
    let imported = Event::Imported(Imported {
        from: source.dir.display().to_string(),
        events: source.events.len(),
        attempts: plan.attempts.len(),
        not_mapped: plan.not_mapped.clone(),
    });
    let mut changes = vec![StateChange::Put(
        files::STATE.into(),
        serde_json::to_vec_pretty(&plan.state)?,
    )];
    for (_, path, bytes) in source
        .round_pages
        .iter()
        .filter(|(r, _, _)| *r <= plan.state.round)
    {
        changes.push(StateChange::Put(path.clone(), bytes.clone()));
    }
    for round in 1..=plan.state.round {
        let lines: String = plan
            .attempts
            .iter()
            .filter(|a| a.round == round)
            .map(|a| serde_json::to_string(a).map(|l| l + "\n"))
            .collect::<Result<_, _>>()?;
        changes.push(StateChange::Put(
            format!("{}/attempts.jsonl", files::round_dir(round)),
            lines.into_bytes(),
        ));
    }
    let summary = format!(
        "{name}: {} events, {} attempts, {} rounds",
        source.events.len(),
        plan.attempts.len(),
        plan.state.round
    );
    write_commit(
        repo,
        Some(tip),
        &imported.line(plan.state.updated_at.clone()),
        &summary,
        &changes,
    )
}

/// Points the imported conference's best branch at `best` (the original's best, as imported).
pub fn point_best_branch(repo: &Repository, name: &str, best: &CommitId) -> Result<()> {
    let refs = ConferenceRefs::new(name);
    crate::store::cas::update(
        repo,
        &refs.best(),
        best.oid(),
        None,
        "git conference import",
    )
}
