//! Finding the tunable literals of a file: which files and names are left alone (prose,
//! control words, denied names), the markers that select literals, and YAML lists.

use std::collections::BTreeSet;

use super::assign::{assignment, key_before, scan_code};
use super::lex::{comment_start, line_marker, whole_number};
use super::*;
use crate::researchers::tune::Literal;

/// Files whose numbers are prose or data, never parameters, unless the user marks them.
pub(super) fn prose_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [
        ".md", ".txt", ".rst", ".lock", ".csv", ".tsv", ".log", ".svg", ".html", ".sum",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext))
}

/// Names whose values are identifiers or settings of the run, not things to optimise.
pub(super) fn denied_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "version", "date", "year", "port", "seed", "timeout", "verbose", "debug", "thread",
        "worker", "jobs", "pid", "uid", "gid", "python", "node", "ruby", "java", "golang", "image",
        "release", "revision", "api", "schema",
    ]
    .iter()
    .any(|d| lower.contains(d))
        || matches!(lower.as_str(), "ver" | "tag" | "rev" | "build" | "go")
}

pub(super) fn has_marker(path: &str, text: &str) -> bool {
    if text.as_bytes().contains(&0) {
        return false;
    }
    let syn = syntax(path, text);
    text.split('\n').any(|l| line_marker(l, syn).is_some())
}

/// Lines with their byte offsets, without the line terminator.
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut off = 0;
    text.split('\n').map(move |l| {
        let start = off;
        off += l.len() + 1;
        (start, l.strip_suffix('\r').unwrap_or(l))
    })
}

/// A literal found in a file, before keys are given.
pub(super) struct Found {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) line: usize,
    pub(super) name: Option<String>,
    pub(super) marker: Option<Marker>,
    pub(super) float_suffix: bool,
}

/// Literals of one file (with `marked`, only those on marked lines) and the problems of its
/// markers.
pub(super) fn scan(path: &str, text: &str, marked: bool) -> (Vec<Literal>, Vec<String>) {
    if text.as_bytes().contains(&0) || (!marked && prose_file(path)) {
        return (Vec::new(), Vec::new());
    }
    let syn = syntax(path, text);
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut yaml_list = YamlList::default();
    for (n, (off, line)) in lines(text).enumerate() {
        let marker = line_marker(line, syn);
        let code_end = comment_start(line, syn).unwrap_or(line.len());
        let code = &line[..code_end];
        let mut values = assignment(code, syn);
        if syn.yaml {
            yaml_list.read(code, syn, &mut values);
        }
        let at = |raw: Raw, name: Option<String>, marker: Option<Marker>| Found {
            start: off + raw.start,
            end: off + raw.end,
            line: n + 1,
            name,
            marker,
            float_suffix: raw.float_suffix,
        };
        if let Some(m) = &marker {
            if let Some(e) = &m.error {
                problems.push(format!("{path}:{}: {e}", n + 1));
            }
            for raw in scan_code(code.as_bytes(), syn) {
                let name = values
                    .iter()
                    .find(|(r, _)| r.start == raw.start)
                    .map(|(_, k)| k.clone())
                    .or_else(|| key_before(&line[..raw.start]));
                found.push(at(raw, name, Some(m.clone())));
            }
        } else if !marked {
            for (raw, name) in values {
                let base = name.split('[').next().unwrap_or(&name);
                if denied_name(base.rsplit('.').next().unwrap_or(base)) {
                    continue;
                }
                found.push(at(raw, Some(name), None));
            }
        }
    }
    let lits = literals(path, text, found, &mut problems);
    (lits, problems)
}

/// A YAML block list under a key (`key:` then `- 1` lines), followed line by line.
#[derive(Default)]
pub(super) struct YamlList {
    /// The key, the indent of its line and the next item's index.
    pub(super) open: Option<(String, usize, usize)>,
}

impl YamlList {
    /// Follows one line's `code`: an item of the open list that has no value of its own yet
    /// adds its whole number to `values`, named `key[index]`.
    pub(super) fn read(&mut self, code: &str, syn: Syntax, values: &mut Vec<(Raw, String)>) {
        let indent = code.len() - code.trim_start().len();
        let t = code.trim();
        if let Some(item) = t.strip_prefix("- ").or((t == "-").then_some("")) {
            if let Some((key, key_indent, index)) = &mut self.open {
                if indent >= *key_indent && values.is_empty() {
                    let from = code.len() - item.len();
                    if let Some(raw) = whole_number(code.as_bytes(), from, code.len(), syn) {
                        values.push((raw, format!("{key}[{index}]")));
                    }
                    *index += 1;
                }
            }
        } else if let Some(key) = t
            .strip_suffix(':')
            .filter(|k| !k.contains(['#', ' ']) || k.starts_with('"'))
        {
            self.open = Some((key.trim_matches(['"', '\'']).to_string(), indent, 0));
        } else if !t.is_empty() {
            self.open = None;
        }
    }
}

/// The literals `found` in `text` that parse as finite numbers, with their keys (`path:name`
/// for the first use of a name, else `path#ordinal`); a value outside its marker's bounds adds
/// a problem.
pub(super) fn literals(
    path: &str,
    text: &str,
    found: Vec<Found>,
    problems: &mut Vec<String>,
) -> Vec<Literal> {
    let mut seen = BTreeSet::new();
    let mut lits = Vec::new();
    for (ordinal, f) in found.into_iter().enumerate() {
        let text_lit = &text[f.start..f.end];
        let Ok(value) = text_lit
            .trim_start_matches('+')
            .replace('_', "")
            .parse::<f64>()
        else {
            continue;
        };
        if !value.is_finite() {
            continue;
        }
        let key = match f.name {
            Some(n) if seen.insert(n.clone()) => format!("{path}:{n}"),
            _ => format!("{path}#{ordinal}"),
        };
        let m = f.marker.unwrap_or_default();
        let written_int = !text_lit.contains(['.', 'e', 'E']) && !f.float_suffix;
        let lit = Literal {
            path: path.to_string(),
            key,
            line: f.line,
            start: f.start,
            end: f.end,
            text: text_lit.to_string(),
            value,
            integer: m.integer.unwrap_or(written_int),
            lower: m.lower,
            upper: m.upper,
        };
        if let (Some(lo), Some(hi)) = (lit.lower, lit.upper) {
            if value < lo || value > hi {
                problems.push(format!(
                    "{path}:{}: `{text_lit}` is outside its bounds [{}, {}]: move the value \
                     inside them or widen the bounds",
                    f.line,
                    trim_float(lo),
                    trim_float(hi)
                ));
            }
        }
        lits.push(lit);
    }
    lits
}

pub(super) fn trim_float(v: f64) -> String {
    format!("{v}")
}
