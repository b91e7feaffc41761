//! What the page and the JSON endpoints show, read through the conference's read-only view
//! (`Conference::view`) and the engine's own readers of the state tree: the same data, and the
//! same code, as `status`, `log` and the report, never a second parsing of the refs.

use anyhow::Result;
use git2::{Oid, Repository};
use serde_json::{json, Value};

use crate::engine::state::State;
use crate::engine::Conference;
use crate::model::tree::{self, LineageNode};
use crate::model::{AttemptRecord, CommitId};

/// The most of a diff the page gets (a larger one is cut, and says so).
const MAX_DIFF: usize = 2 * 1024 * 1024;

/// What `status --format json` prints: the state, the runner's pid, the status shown and whether
/// this clone trusts the commands.
pub fn status_json(repo: &Repository, name: &str, conf: &Conference) -> Result<Value> {
    let st = conf.state();
    let runner = crate::lock::runner(conf.run_dir());
    let shown = crate::lock::shown_status(&st.status, runner.as_deref());
    let mut value = serde_json::to_value(&st)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("runner_pid".into(), json!(runner));
        map.insert("shown_status".into(), json!(shown));
        map.insert(
            "trusted".into(),
            json!(crate::trust::is_trusted(repo, name, conf.config())),
        );
    }
    Ok(value)
}

/// The conferences of the repository, each with where it stands (the index page).
pub fn conferences_json(repo: &Repository, names: &[String]) -> Value {
    let rows: Vec<Value> = names
        .iter()
        .map(|name| match Conference::view(repo.path(), name) {
            Ok(conf) => {
                let st = conf.state();
                json!({
                    "name": name, "title": conf.config().title, "status": st.status,
                    "phase": st.phase.label(), "round": st.round, "best": st.best.metric,
                    "iterations": st.total_iterations, "events": st.events,
                    "updated_at": st.updated_at,
                })
            }
            Err(e) => json!({ "name": name, "error": format!("{e:#}") }),
        })
        .collect();
    Value::Array(rows)
}

/// What the page shows beside the state: the config's title, metric and direction, the status
/// lines on budgets, running time and the end, the devices, the hardware classes of the
/// readings, and the leases seen.
pub fn summary_json(repo: &Repository, conf: &Conference, attempts: &[AttemptRecord]) -> Value {
    let st = conf.state();
    let cfg = conf.config();
    let running = crate::lock::runner(conf.run_dir()).is_some();
    let live = if running && st.machines.is_empty() {
        seconds_since(&st.updated_at)
    } else {
        0.0
    };
    let leases: Vec<Value> = match st.phase {
        crate::model::state::Phase::Done => Vec::new(),
        _ => crate::remote::lease::seen(repo, conf.refs())
            .into_iter()
            .map(|l| json!({"slot": l.slot, "holder": l.holder, "heartbeat_age_s": l.age_seconds}))
            .collect(),
    };
    let metric = cfg.metric.as_ref();
    json!({
        "name": conf.name(),
        "title": cfg.title,
        "goal": cfg.goal,
        "metric": crate::engine::measure::evaluate::metric_name(cfg),
        "minimize": metric.is_some_and(|m| m.direction == crate::config::Direction::Minimize),
        "target": metric.and_then(|m| m.target),
        "max_rounds": cfg.max_rounds,
        "budget_lines": crate::engine::stop::budget::status_lines(cfg, &st),
        "cost": crate::render::cost::rows(&st),
        "running_lines": crate::engine::stop::budget::running_lines(cfg, &st, st.running_seconds() + live),
        "running_seconds": st.running_seconds() + live,
        "devices": cfg.environment.devices,
        "hardware": crate::render::status::hardware(attempts),
        "max_parallel_evaluations": cfg.environment.max_parallel_evaluations,
        "queue": queue_json(conf),
        "leases": leases,
        "guidance_in_force": crate::model::talk::GUIDANCE_IN_FORCE,
        "now": crate::clock::now_iso(),
    })
}

/// The devices queue of a running conference (the evaluations on a slot and those waiting for
/// one, as its scheduler last wrote them); null when no runner holds the conference, whose
/// last queue file is then stale.
pub fn queue_json(conf: &Conference) -> Value {
    match crate::lock::runner(conf.run_dir()) {
        Some(_) => {
            crate::engine::measure::schedule::published_queue(conf.run_dir()).unwrap_or(Value::Null)
        }
        None => Value::Null,
    }
}

/// Seconds since an RFC 3339 time (0 when it does not parse).
fn seconds_since(at: &str) -> f64 {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .map(|t| crate::clock::now_unix().saturating_sub(t.unix_timestamp().max(0) as u64))
        .unwrap_or(0) as f64
}

/// Which change mattered (`/api/<name>/importance`): the importance tables and the points of
/// the parallel-coordinates view, from the attempts `all`.
pub fn importance_json(conf: &Conference, all: &[AttemptRecord]) -> Result<Value> {
    let imp = crate::engine::measure::importance::of_conference(conf, &conf.state(), all)?;
    Ok(serde_json::to_value(imp)?)
}

/// Every attempt of the conference, in the order recorded.
pub fn attempts(conf: &Conference, st: &State) -> Result<Vec<AttemptRecord>> {
    crate::engine::record::ledger::all_attempts(conf, st)
}

/// The attempts from the `since`-th on (0 = all), each its record with its index `n` first, as
/// JSON text (written straight from the records: at 10,000 attempts a `Value` tree of them, or
/// serde's flattening, costs more than reading them).
pub fn attempts_text(all: &[AttemptRecord], since: usize) -> String {
    let mut out = String::with_capacity(all.len().saturating_sub(since) * 360 + 2);
    out.push('[');
    for (n, attempt) in all.iter().enumerate().skip(since) {
        let record = serde_json::to_string(attempt).unwrap_or_else(|_| "{}".into());
        if n > since {
            out.push(',');
        }
        out.push_str(&format!("{{\"n\":{n}"));
        // The record is an object with fields: `{"round":…}` goes on after the index.
        if record.len() > 2 {
            out.push(',');
        }
        out.push_str(&record[1..]);
    }
    out.push(']');
    out
}

/// The fields of each attempt the page shows, in [`attempt_columns_text`]'s order.
const PAGE_FIELDS: [&str; 14] = [
    "n",
    "round",
    "researcher",
    "iteration",
    "commit",
    "metric",
    "delta",
    "verdict",
    "description",
    "reason",
    "tokens",
    "cost_usd",
    "agent_s",
    "eval_s",
];

/// What the page embeds of the attempts: for each field it shows (`n` the index), the list of
/// its values in the attempts' order, as JSON text. At 10,000 attempts, objects with every key
/// written out ([`attempts_text`], what the API sends) were two and a half times the text for
/// the browser to receive and read before its first paint.
pub fn attempt_columns_text(all: &[AttemptRecord]) -> String {
    let mut columns: Vec<String> = vec![String::with_capacity(all.len() * 8); PAGE_FIELDS.len()];
    for (n, a) in all.iter().enumerate() {
        let commit = a.commit.as_ref().map(|c| c.to_string()).unwrap_or_default();
        let values = [
            json_text(&n),
            json_text(&a.round),
            json_text(&a.researcher),
            json_text(&a.iteration),
            json_text(&commit),
            json_text(&a.metric),
            json_text(&a.delta),
            json_text(&a.verdict),
            json_text(&a.description),
            json_text(&a.reason),
            json_text(&a.tokens),
            json_text(&a.cost_usd),
            json_text(&a.agent_s),
            json_text(&a.eval_s),
        ];
        for (column, value) in columns.iter_mut().zip(values) {
            if n > 0 {
                column.push(',');
            }
            column.push_str(&value);
        }
    }
    let fields: Vec<String> = PAGE_FIELDS
        .iter()
        .zip(&columns)
        .map(|(name, column)| format!("\"{name}\":[{column}]"))
        .collect();
    format!("{{{}}}", fields.join(","))
}

fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// Each round's peer review (the findings and their verdicts) and knowledge transfer (each
/// pick and what became of it), with the best after the round.
pub fn rounds_json(conf: &Conference, st: &State) -> Value {
    let rounds: Vec<Value> = (1..=st.round)
        .map(|round| {
            json!({
                "round": round,
                "findings": crate::engine::record::ledger::read_findings(conf, round),
                "picks": crate::engine::record::ledger::read_picks(conf, round),
                "best": st.round_bests.get(round as usize - 1).copied().flatten(),
            })
        })
        .collect();
    Value::Array(rounds)
}

/// The attempt tree (`/api/<name>/tree`): folded to the alive branches and the path to best
/// (each shown node with how many nodes hang `folded` from it), or `whole`; each node as `log
/// --graph --format json` lists it. At 10,000 attempts the page gets the folded tree after its
/// first paint, and the whole one only when asked.
pub fn tree_json(conf: &Conference, nodes: &[LineageNode], whole: bool) -> Value {
    let (shown, folded) = tree::collapsed(nodes);
    let list: Vec<Value> = nodes
        .iter()
        .enumerate()
        .filter(|&(i, _)| whole || shown[i])
        .map(|(i, n)| {
            let mut node = serde_json::to_value(n).unwrap_or_default();
            if !whole && folded[i] > 0 {
                node["folded"] = json!(folded[i]);
            }
            node
        })
        .collect();
    json!({
        "branching": conf.config().branching.as_str(),
        "best": conf.state().best.commit,
        "whole": whole,
        "total": nodes.len(),
        "nodes": list,
    })
}

/// A node's ancestry (`/api/<name>/ancestry/<commit>`): each node from the baseline down to
/// it, with its `delta`, the change of the metric from the step before that has one; None when
/// the commit is no node of the tree.
pub fn ancestry_json(nodes: &[LineageNode], hex: &str) -> Option<Value> {
    let id = CommitId::try_from(hex.to_ascii_lowercase()).ok()?;
    let path = tree::ancestry(nodes, id.as_str())?;
    let mut before = None;
    let steps: Vec<Value> = path
        .iter()
        .map(|n| {
            let mut step = serde_json::to_value(n).unwrap_or_default();
            step["delta"] = json!(n.metric.zip(before).map(|(m, b)| m - b));
            before = n.metric.or(before);
            step
        })
        .collect();
    Some(json!({ "commit": id, "steps": steps }))
}

/// The commit named in a URL, when it is one of this conference's attempts, its baseline or its
/// best: nothing else of the repository is served.
pub fn conference_commit(all: &[AttemptRecord], st: &State, hex: &str) -> Option<Oid> {
    let id = CommitId::try_from(hex.to_ascii_lowercase()).ok()?;
    let known = all.iter().any(|a| a.commit.as_ref() == Some(&id))
        || st.baseline_commit == id
        || st.best.commit == id;
    known.then(|| id.oid())
}

/// The change an attempt tried: its commit's diff against its parent, as a patch.
pub fn diff_text(repo: &Repository, commit: Oid) -> Result<String> {
    let commit = repo.find_commit(commit)?;
    let parent_tree = match commit.parent(0) {
        Ok(p) => Some(p.tree()?),
        Err(_) => None,
    };
    let diff = repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&commit.tree()?), None)?;
    let mut out = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        out.len() < MAX_DIFF
    })
    .ok();
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if out.len() >= MAX_DIFF {
        text.push_str("\n[diff cut at 2 MiB: see `git show` for the rest]\n");
    }
    Ok(text)
}

/// The conference note on a commit (`refs/notes/conference`), one JSON object per line.
pub fn note_text(repo: &Repository, commit: Oid) -> Result<Option<String>> {
    crate::store::notes::read_note(repo, commit)
}

/// JSON text for inside a `<script>` element: every `<`, `>` and `&` escaped, and the two line
/// separators JavaScript reads as line ends, so no string an agent wrote (`</script>`) can end
/// the element or start markup. (Outside strings JSON has none of these characters.)
pub fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_inside_the_page_cannot_end_its_script_element() {
        let v = json!({"d": "</script><img src=x onerror=alert(1)> & \u{2028}"});
        let s = script_json(&v.to_string());
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'));
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }

    /// The page's columns hold, for each attempt, what the API's objects hold for each field
    /// the page shows: a kept attempt with tokens and times, one without a commit or metric.
    #[test]
    fn the_pages_columns_hold_what_the_apis_objects_do() {
        let line = |iteration: u32, rest: &str| {
            format!(
                r#"{{"round":2,"researcher":"B","iteration":{iteration},"tree":"t","description":"x \"y\" </script>","timestamp":"t","sub_metrics":{{}},{rest}}}"#
            )
        };
        let records: Vec<AttemptRecord> = [
            line(1, &format!(r#""commit":"{}","metric":0.5,"delta":-0.25,"verdict":"kept","reason":null,"tokens":{{"input":10,"output":3}},"cost_usd":0.02,"agent_s":1.5,"eval_s":2.0"#, "a".repeat(40))),
            line(2, r#""commit":"","metric":null,"delta":null,"verdict":"crashed","reason":"exit 1""#),
        ]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        let objects: Vec<Value> = serde_json::from_str(&attempts_text(&records, 0)).unwrap();
        let columns: Value = serde_json::from_str(&attempt_columns_text(&records)).unwrap();
        let fields: Vec<&String> = columns.as_object().unwrap().keys().collect();
        assert_eq!(fields.len(), PAGE_FIELDS.len());
        for (n, object) in objects.iter().enumerate() {
            for field in PAGE_FIELDS {
                let column = &columns[field][n];
                assert_eq!(
                    column,
                    object.get(field).unwrap_or(&Value::Null),
                    "{field} of {n}"
                );
            }
        }
    }
}
