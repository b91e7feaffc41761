//! The files the original prompt-based autoconference leaves in its folder, as
//! ../shared/SEED-FORMATS.md documents them, read for `git conference import`: the results
//! tables (`conference_results.tsv`, `researcher_{ID}_results.tsv`) and the event log
//! (`conference_events.jsonl`). Pure: text in, rows and events out, or the line that is
//! malformed and why. Columns are found by their header names; fields the program does not need
//! (`delta`, `delta_pct`) are read leniently, as real logs write them in several ways.

use serde_json::Value;

use super::EventLine;

/// A line that cannot be read: its number (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    pub line: usize,
    pub message: String,
}

fn malformed(line: usize, message: String) -> Malformed {
    Malformed { line, message }
}

/// One row of a results table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Its line in the file.
    pub line: usize,
    /// None in a researcher's own table (which has no round column).
    pub round: Option<u32>,
    /// None in a researcher's own table (the file's name says whose).
    pub researcher: Option<String>,
    pub iteration: u32,
    /// None for `-` or an empty field.
    pub metric: Option<f64>,
    pub delta: Option<f64>,
    /// `baseline`, `kept`, `reverted`, `failed` (as written, lowercased).
    pub status: String,
    pub description: String,
    pub evaluator_source: String,
    /// `validated`, `challenged`, `overturned` (lowercased); None for `-` or a researcher table.
    pub review: Option<String>,
    pub timestamp: String,
}

/// The columns of `conference_results.tsv`.
pub const CONFERENCE_COLUMNS: [&str; 11] = [
    "round",
    "researcher",
    "iteration",
    "metric_value",
    "delta",
    "delta_pct",
    "status",
    "description",
    "evaluator_source",
    "peer_review_verdict",
    "timestamp",
];

/// The columns of `researcher_{ID}_results.tsv`.
pub const RESEARCHER_COLUMNS: [&str; 8] = [
    "iteration",
    "metric_value",
    "delta",
    "delta_pct",
    "status",
    "description",
    "evaluator_source",
    "timestamp",
];

/// Reads a results table whose header must hold `columns` (in any order; more are ignored).
pub fn parse_results(text: &str, columns: &[&str]) -> Result<Vec<Row>, Malformed> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((n, header)) = lines.next() else {
        return Ok(vec![]);
    };
    let names: Vec<String> = header
        .split('\t')
        .map(|h| h.trim().to_lowercase())
        .collect();
    let mut at = std::collections::BTreeMap::new();
    for c in columns {
        match names.iter().position(|h| h == c) {
            Some(i) => at.insert(*c, i),
            None => {
                return Err(malformed(
                    n + 1,
                    format!(
                        "the header has no `{c}` column (the header line names, tab-separated: {})",
                        columns.join(" ")
                    ),
                ))
            }
        };
    }
    lines.map(|(n, l)| row(n + 1, l, &names, &at)).collect()
}

/// One data line of a results table.
fn row(
    line: usize,
    text: &str,
    names: &[String],
    at: &std::collections::BTreeMap<&str, usize>,
) -> Result<Row, Malformed> {
    let fields: Vec<&str> = text.split('\t').collect();
    if fields.len() != names.len() {
        return Err(malformed(
            line,
            format!(
                "{} tab-separated fields where the header has {}",
                fields.len(),
                names.len()
            ),
        ));
    }
    let get = |c: &str| at.get(c).map(|i| fields[*i].trim());
    let whole = |c: &str| -> Result<Option<u32>, Malformed> {
        get(c)
            .map(|v| {
                v.parse()
                    .map_err(|_| malformed(line, format!("`{c}` is `{v}`, not a whole number")))
            })
            .transpose()
    };
    let metric = match get("metric_value").unwrap_or("-") {
        "-" | "" => None,
        v => Some(v.parse::<f64>().map_err(|_| {
            malformed(
                line,
                format!("`metric_value` is `{v}`, not a number (write `-` for none)"),
            )
        })?),
    };
    let lenient = |v: &str| {
        v.trim_start_matches('+')
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
    };
    Ok(Row {
        line,
        round: whole("round")?,
        researcher: get("researcher").map(str::to_string),
        iteration: whole("iteration")?.unwrap_or(0),
        metric,
        delta: get("delta").and_then(lenient),
        status: get("status").unwrap_or("").to_lowercase(),
        description: get("description").unwrap_or("").to_string(),
        evaluator_source: get("evaluator_source").unwrap_or("").to_string(),
        review: get("peer_review_verdict")
            .map(str::to_lowercase)
            .filter(|v| v != "-" && !v.is_empty()),
        timestamp: get("timestamp").unwrap_or("").to_string(),
    })
}

/// Reads the event log: one `{"event", "timestamp", "payload"}` object per line (blank lines
/// skipped; a missing payload is an empty one).
pub fn parse_events(text: &str) -> Result<Vec<(usize, EventLine)>, Malformed> {
    let mut out = Vec::new();
    for (n, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let line = n + 1;
        let value: Value = serde_json::from_str(l)
            .map_err(|e| malformed(line, format!("not a JSON object: {e}")))?;
        let text_of = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        let Some(event) = text_of("event") else {
            return Err(malformed(line, "no `\"event\": \"…\"` name".into()));
        };
        let Some(timestamp) = text_of("timestamp") else {
            return Err(malformed(
                line,
                format!("event `{event}` has no `\"timestamp\"`"),
            ));
        };
        let payload = value
            .get("payload")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        if !payload.is_object() {
            return Err(malformed(
                line,
                format!("event `{event}`: `payload` is not an object"),
            ));
        }
        out.push((
            line,
            EventLine {
                event,
                timestamp,
                payload,
            },
        ));
    }
    Ok(out)
}

/// The round an event is about: `payload.round`, or N in the old `round.N.completed`.
pub fn round_of(e: &EventLine) -> Option<u32> {
    e.payload
        .get("round")
        .and_then(Value::as_u64)
        .map(|r| r as u32)
        .or_else(|| {
            e.event
                .strip_prefix("round.")?
                .strip_suffix(".completed")?
                .parse()
                .ok()
        })
}

/// Whether an event says that its round completed (`round.completed`, old `round.N.completed`).
pub fn completes_round(e: &EventLine) -> bool {
    e.event == "round.completed"
        || e.event
            .strip_prefix("round.")
            .and_then(|r| r.strip_suffix(".completed"))
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// A number in a payload, written as a number or as a string (`"+6.0"`).
pub fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim_start_matches('+').parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_rows_by_header_name() {
        let text = "round\tresearcher\titeration\tmetric_value\tdelta\tdelta_pct\tstatus\tdescription\tevaluator_source\tpeer_review_verdict\ttimestamp\n\
                    1\tA\t0\t0.5\t-\t-\tbaseline\tbaseline\tscript:evaluate.py\t-\t2026-03-18T10:00:00Z\n\
                    1\tA\t1\t0.6\t+0.1\t+20%\tkept\twider\tscript:evaluate.py\tVALIDATED\t2026-03-18T10:05:00Z\n";
        let rows = parse_results(text, &CONFERENCE_COLUMNS).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].delta, Some(0.1));
        assert_eq!(rows[1].review.as_deref(), Some("validated"));
        assert_eq!(rows[1].line, 3);
        let bad = text.replace("\t0.6\t", "\tlots\t");
        let m = parse_results(&bad, &CONFERENCE_COLUMNS).unwrap_err();
        assert_eq!(m.line, 3);
        assert!(m.message.contains("`metric_value` is `lots`"), "{m:?}");
        let m = parse_results("round\tresearcher\n", &CONFERENCE_COLUMNS).unwrap_err();
        assert!(m.message.contains("no `iteration` column"), "{m:?}");
    }

    #[test]
    fn events_and_their_rounds() {
        let text = "{\"event\":\"round.3.completed\",\"timestamp\":\"t\",\"payload\":{}}\n\n{\"event\":\"round.completed\",\"timestamp\":\"t\",\"payload\":{\"round\":4,\"best_metric\":\"+6.5\"}}\n";
        let events = parse_events(text).unwrap();
        assert_eq!(events[1].0, 3);
        assert_eq!(round_of(&events[0].1), Some(3));
        assert!(completes_round(&events[0].1) && completes_round(&events[1].1));
        assert_eq!(number(events[1].1.payload.get("best_metric")), Some(6.5));
        let m = parse_events("{\"event\":\"x\",\"timestamp\":\"t\"}\n{oops\n").unwrap_err();
        assert_eq!(m.line, 2);
    }
}
