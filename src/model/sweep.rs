//! Parameter sweeps (`- **Parameter sweep:** on`): an agent's note may end with
//! `SWEEP: <path>:<name> = v1, v2, v3`, and the conference then measures its edit once per value
//! of that literal and keeps the best as the attempt. Here: the line read from a note, and what a
//! sweep recorded (each value's commit and metric, the one chosen), as the iteration event, the
//! attempt's record and its note hold it; also `builtin:tune`'s batch (`- sweep: q` under
//! `## Agent`: q points measured the same way, recorded as a sweep marked `batch`). The
//! engine's side is `engine::phases::research::sweep`.

use serde::{Deserialize, Serialize};

use super::CommitId;

/// The marker of a sweep request in an agent's note.
pub const SWEEP_MARKER: &str = "SWEEP:";

/// Values a sweep may hold: at least two (one is a plain attempt), at most eight.
pub const MIN_VALUES: usize = 2;
pub const MAX_VALUES: usize = 8;

/// What a `SWEEP:` line asked: the literal (`train.py`, `LEARNING_RATE`) and its values as
/// written.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRequest {
    pub path: String,
    pub name: String,
    pub values: Vec<String>,
}

impl SweepRequest {
    /// `train.py:LEARNING_RATE`, the key `builtin:tune` gives the literal.
    pub fn literal(&self) -> String {
        format!("{}:{}", self.path, self.name)
    }
}

/// Splits an agent's note into its text and its last `SWEEP:` line: the request, or why the
/// line cannot be read (the attempt then goes on as a plain one, with that warning).
pub fn split_sweep(note: &str) -> (String, Option<Result<SweepRequest, String>>) {
    let (text, last) = super::tree::split_marked(note, SWEEP_MARKER);
    (text, last.map(parse))
}

/// Reads `path:name = v1, v2, v3`.
fn parse(line: &str) -> Result<SweepRequest, String> {
    let line = line.trim_matches(|c: char| "`*".contains(c)).trim();
    let how = "write `SWEEP: <path>:<name> = v1, v2, v3`, such as `SWEEP: train.py:LEARNING_RATE = 1e-4, 3e-4, 1e-3`";
    let Some((literal, values)) = line.split_once('=') else {
        return Err(format!("SWEEP: `{line}` names no values ({how})"));
    };
    let Some((path, name)) = literal.trim().rsplit_once(':') else {
        return Err(format!("SWEEP: `{}` names no file ({how})", literal.trim()));
    };
    let (path, name) = (path.trim(), name.trim());
    if path.is_empty() || name.is_empty() {
        return Err(format!("SWEEP: `{line}` names no file or literal ({how})"));
    }
    let values: Vec<String> = values
        .split(',')
        .map(|v| v.trim().trim_matches('`').trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if let Some(bad) = values.iter().find(|v| !is_number(v)) {
        return Err(format!("SWEEP: value `{bad}` is not a number ({how})"));
    }
    if !(MIN_VALUES..=MAX_VALUES).contains(&values.len()) {
        return Err(format!(
            "SWEEP: {} values; a sweep takes {MIN_VALUES} to {MAX_VALUES}",
            values.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = values
        .iter()
        .find(|v| !seen.insert(v.parse::<f64>().unwrap_or(f64::NAN).to_bits()))
    {
        return Err(format!("SWEEP: value `{twice}` is given twice"));
    }
    Ok(SweepRequest {
        path: path.to_string(),
        name: name.to_string(),
        values,
    })
}

fn is_number(v: &str) -> bool {
    v.parse::<f64>().is_ok_and(f64::is_finite)
}

/// What the iteration event records of a `SWEEP:` line: the sweep that ran, or the warning
/// why it could not (`{"warning": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SweepStep {
    Ran(Sweep),
    Refused { warning: String },
}

impl SweepStep {
    /// The sweep, when one ran.
    pub fn ran(&self) -> Option<&Sweep> {
        match self {
            SweepStep::Ran(s) => Some(s),
            SweepStep::Refused { .. } => None,
        }
    }
}

/// What a sweep measured: the literal, one variant per value (in the order the line gave them),
/// and which became the attempt. A batch of `builtin:tune` (`- sweep: q` under `## Agent`) is
/// recorded the same way: `literal` then names every literal its points move, and each
/// variant's `value` is its point (`x=1.5 y=-2`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// `train.py:LEARNING_RATE`; for a batch, the keys it moves (`params.sh:x, params.sh:y`).
    pub literal: String,
    pub variants: Vec<Variant>,
    /// The variant that is the attempt (the best measured; the first when none measured).
    pub chosen: usize,
    /// A batch of the tuner's points rather than one literal's values.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch: bool,
}

/// What `builtin:tune` proposed for one iteration with `- sweep: q`: q points, each the files it
/// changes (full new content) and the point as one label. The first is what the worktree holds.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRequest {
    /// The keys of the literals any point moves, in key order.
    pub keys: Vec<String>,
    pub points: Vec<BatchPoint>,
}

/// One point of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPoint {
    /// The literals it moves from the start, as `name=value` (`x=1.5 y=-2`).
    pub label: String,
    pub files: Vec<(String, String)>,
}

/// One value of a sweep: its commit (a child of the node the attempt started from) and what
/// its evaluation gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub value: String,
    pub commit: CommitId,
    pub tree: String,
    pub metric: Option<f64>,
    /// The evaluation's status (`ok`, `crashed`, `timeout`, `pruned`, …).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_s: Option<f64>,
}

impl Sweep {
    /// The literal's name (`LEARNING_RATE`); a batch's literals (`x, y`).
    pub fn name(&self) -> String {
        let short = |key: &str| key.rsplit(':').next().unwrap_or(key).to_string();
        let names: Vec<String> = self.literal.split(", ").map(short).collect();
        names.join(", ")
    }

    /// A variant as one label: `LEARNING_RATE=3e-4`; a batch's point as it is (`x=1.5 y=-2`).
    pub fn label(&self, v: &Variant) -> String {
        match self.batch {
            true => v.value.clone(),
            false => format!("{}={}", self.name(), v.value),
        }
    }

    /// The curve, value → metric in the line's order, the chosen one marked:
    /// `1e-4 → 0.91, 3e-4 → 0.88 (chosen), 1e-3 → crashed`.
    pub fn curve(&self) -> String {
        let point = |(k, v): (usize, &Variant)| {
            let got = match v.metric {
                Some(m) if v.status == "ok" => format!("{m}"),
                Some(m) => format!("{} at {m}", v.status),
                None => v.status.clone(),
            };
            let chosen = if k == self.chosen { " (chosen)" } else { "" };
            format!("{} → {got}{chosen}", v.value)
        };
        (self.variants.iter().enumerate().map(point))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A variant as a sentence says it: `LEARNING_RATE = 3e-4`; a batch's point as it is.
    pub fn said(&self, v: &Variant) -> String {
        match self.batch {
            true => v.value.clone(),
            false => format!("{} = {}", self.name(), v.value),
        }
    }

    /// `sweep of 3 values of LEARNING_RATE: 1e-4 → 0.91, …`, for progress lines, logs and notes;
    /// `batch of 4 points of x, y: x=1.5 y=-2 → 0.91, …` for the tuner's.
    pub fn summary(&self) -> String {
        if self.batch {
            let n = self.variants.len();
            return format!("batch of {n} points of {}: {}", self.name(), self.curve());
        }
        format!(
            "sweep of {} values of {}: {}",
            self.variants.len(),
            self.name(),
            self.curve()
        )
    }

    /// Seconds all its evaluations ran (what budgets and the ledger count).
    pub fn eval_seconds(&self) -> f64 {
        self.variants.iter().filter_map(|v| v.eval_s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_line_is_read_and_left_out_of_the_note() {
        let (text, req) = split_sweep("tried lr\nSWEEP: train.py:LEARNING_RATE = 1e-4, 3e-4, 1e-3");
        assert_eq!(text, "tried lr");
        let req = req.unwrap().unwrap();
        assert_eq!(req.literal(), "train.py:LEARNING_RATE");
        assert_eq!(req.values, ["1e-4", "3e-4", "1e-3"]);
        let (_, req) = split_sweep("sweep: `src/a:b.py:x = 1, 2`");
        assert_eq!(req.unwrap().unwrap().path, "src/a:b.py");
    }

    #[test]
    fn a_bad_sweep_line_says_what_to_write() {
        for (line, says) in [
            ("SWEEP: train.py:LR", "names no values"),
            ("SWEEP: LR = 1, 2", "names no file"),
            ("SWEEP: train.py:LR = 1, fast", "`fast` is not a number"),
            ("SWEEP: train.py:LR = 1", "1 values"),
            ("SWEEP: a:b = 1,2,3,4,5,6,7,8,9", "9 values"),
            ("SWEEP: a:b = 1, 1.0", "given twice"),
        ] {
            let (_, req) = split_sweep(line);
            let err = req.unwrap().unwrap_err();
            assert!(err.contains(says), "{line}: {err}");
        }
        assert_eq!(split_sweep("no line").1, None);
    }
}
