//! Reading the metric from what an evaluation printed.
//!
//! Accepted: a `name: value` or `name=value` line (the key may be quoted, as inside a
//! pretty-printed JSON object), and a JSON object with the metric's key (on one line or spanning
//! several). The last number printed is read only when the user opted in (`- metric from: last
//! number` in `## Evaluation`): an output that does not name the metric is otherwise `Missing`,
//! never guessed from whatever number came last. The key matches case-insensitively; a key
//! with the exact case wins. Colours (ANSI escapes) are ignored, and a unit right after the number
//! (`41.2ms`, `12 s`, `95%`) is not part of it. Every other `key: number` line (or numeric JSON
//! field) is kept as a sub-metric.
//!
//! A wrong number is worse than none: when the output names the metric but in a form that cannot
//! be read (`score: n/a`, `score 1,234`, `final score -> 3`), the reading is `Unreadable` (the run
//! is a crash, with the line in the reason) instead of falling back to the last number printed.
//! NaN and infinities are never a metric either. Nor is a metric printed twice with different
//! values (`score: 3`, later `score: 100`): which one the evaluation meant cannot be known, so
//! the run is a crash naming both (the same value printed twice is one reading). Progress lines
//! in another form (`score@step=200: 1.41`) are not the metric's line and do not count.
//!
//! Intermediate readings (a learning curve) are read by [`reading_at_step`], line by line while
//! the evaluation runs: `name@step=N: value` (or `=`), and a one-line JSON object with an
//! integer `step` and the metric's key. They are never the metric: [`parse`] skips both forms.
//!
//! What an evaluation printed is not always text: [`text_of`] writes a byte that is not UTF-8
//! as `\xNN`, and [`escape_controls`] a control character as `\xNN`, so a line quoted in a
//! reason (stored in events and notes, shown by `log`, `status` and the reports) never carries
//! raw bytes to a terminal.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    Value(f64),
    /// Printed, but NaN or infinite.
    NotFinite(String),
    /// The metric's name is in the output, but no number can be read for it: the line.
    Unreadable(String),
    /// Printed twice with different values: the first two that differ.
    Conflicting(f64, f64),
    Missing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub reading: Reading,
    pub sub_metrics: BTreeMap<String, f64>,
}

/// A value printed for the metric's key: read, or the line it could not be read from.
type Found = Result<(f64, String), String>;

/// The values printed under one spelling of the metric's key.
#[derive(Default)]
struct Slot {
    /// The value read (or, while none could be, the line that named it).
    found: Option<Found>,
    /// The first value printed that differs from the one read before it.
    conflict: Option<(f64, f64)>,
}

impl Slot {
    /// A readable value replaces an unreadable line; a second readable value that differs is a
    /// conflict; an unreadable line never replaces a value.
    fn add(&mut self, found: Found) {
        match (&self.found, &found) {
            (Some(Ok((before, _))), Ok((now, _))) => {
                let same = before == now || (before.is_nan() && now.is_nan());
                if !same && self.conflict.is_none() {
                    self.conflict = Some((*before, *now));
                }
            }
            (Some(Ok(_)), Err(_)) => {}
            _ => self.found = Some(found),
        }
    }

    fn reading(self) -> Option<Reading> {
        if let Some((a, b)) = self.conflict {
            return Some(Reading::Conflicting(a, b));
        }
        Some(match self.found? {
            Ok((v, _)) if v.is_finite() => Reading::Value(v),
            Ok((_, line)) => Reading::NotFinite(line),
            Err(line) => Reading::Unreadable(line),
        })
    }
}

/// What the lines say about the metric so far.
#[derive(Default)]
struct Findings {
    /// The values under the exact key, and under the key in another case.
    exact: Slot,
    folded: Slot,
    /// A line that names the metric in no readable form.
    mention: Option<String>,
    last_number: Option<String>,
    sub_metrics: BTreeMap<String, f64>,
}

impl Findings {
    /// A value under `key`: the metric's (see [`Slot::add`]), or a sub-metric.
    fn keyed(&mut self, name: &str, key: &str, value: Result<f64, ()>, line: &str) {
        let slot = if key == name {
            &mut self.exact
        } else if key.eq_ignore_ascii_case(name) {
            &mut self.folded
        } else {
            match value {
                Ok(v) if v.is_finite() => {
                    self.sub_metrics.insert(key.to_string(), v);
                }
                _ => {}
            }
            return;
        };
        let line = escape_controls(line.trim());
        slot.add(value.map(|v| (v, line.clone())).map_err(|()| line));
    }
}

/// Parses `output` for the metric called `name`; an output that does not name it is `Missing`.
pub fn parse(output: &str, name: &str) -> Measurement {
    parse_with(output, name, false)
}

/// [`parse`], reading the last number printed when the output does not name the metric and
/// `last_number` is set (the `metric from: last number` opt-in).
pub fn parse_with(output: &str, name: &str, last_number: bool) -> Measurement {
    // Progress bars redraw a line with '\r': each redraw is a line of its own.
    let text = strip_ansi(output).replace('\r', "\n");
    let mut f = Findings::default();
    let mut offset = 0;
    let mut skip_to = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if start < skip_to {
            continue;
        }
        let trimmed = line.trim();
        if step_line(trimmed, name).is_some() {
            continue;
        }
        if trimmed.starts_with('{') {
            let at = start + (line.len() - line.trim_start().len());
            if let Some((map, end)) = json_object_at(&text, at) {
                if step_object(&map, name).is_none() {
                    json_fields(&map, name, &mut f);
                }
                skip_to = at + end;
                continue;
            }
        }
        let keyed = key_value(trimmed);
        if let Some((key, value)) = keyed {
            f.keyed(name, key, read_value(value), trimmed);
        }
        let names_metric = keyed.is_some_and(|(k, _)| k.eq_ignore_ascii_case(name));
        if !names_metric && f.mention.is_none() && mentions(trimmed, name) {
            f.mention = Some(trimmed.to_string());
        }
        for token in trimmed.split(|c: char| {
            c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '[' | ']' | '=' | ':')
        }) {
            if parse_number(token).is_some() {
                f.last_number = Some(token.to_string());
            }
        }
    }
    let reading = match f.exact.reading().or_else(|| f.folded.reading()) {
        Some(reading) => reading,
        None => match (f.mention, f.last_number) {
            (Some(line), _) => Reading::Unreadable(escape_controls(&line)),
            (None, Some(text)) if last_number => match parse_number(&text) {
                Some(v) if v.is_finite() => Reading::Value(v),
                Some(_) => Reading::NotFinite(escape_controls(&text)),
                None => Reading::Missing,
            },
            (None, _) => Reading::Missing,
        },
    };
    Measurement {
        reading,
        sub_metrics: f.sub_metrics,
    }
}

/// The intermediate reading one printed line holds: `name@step=N: value` (`=` for `:` too; the
/// name in any case), or a one-line JSON object with an integer `step` ≥ 0 and a number under
/// the metric's key. None for any other line, and for a reading that is not a finite number.
pub fn reading_at_step(line: &str, name: &str) -> Option<(u64, f64)> {
    let line = strip_ansi(line);
    let line = line.trim();
    let (step, value) = match step_line(line, name) {
        Some(found) => found,
        None if line.starts_with('{') => match serde_json::from_str::<Value>(line).ok()? {
            Value::Object(map) => step_object(&map, name)?,
            _ => return None,
        },
        None => return None,
    };
    value.is_finite().then_some((step, value))
}

/// `name@step=N: value` or `name@step=N=value` (a leading `- ` allowed): the step and value.
fn step_line(line: &str, name: &str) -> Option<(u64, f64)> {
    let line = line.strip_prefix("- ").unwrap_or(line);
    let (key, rest) = line.split_once("@step=")?;
    if !key.trim().eq_ignore_ascii_case(name) {
        return None;
    }
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let step = rest[..digits].parse::<u64>().ok()?;
    let value = rest[digits..].trim_start();
    let value = value.strip_prefix([':', '='])?;
    Some((step, read_value(value).ok()?))
}

/// A JSON object with an integer `step` ≥ 0 and a number under the metric's key (any case):
/// the step and value.
fn step_object(map: &serde_json::Map<String, Value>, name: &str) -> Option<(u64, f64)> {
    let step = map.get("step")?.as_u64()?;
    let value = map.get(name).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })?;
    let value = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => read_value(s).ok()?,
        _ => return None,
    };
    Some((step, value))
}

/// `bytes` as text: UTF-8 as it is, every byte that is not part of a UTF-8 character as `\xNN`.
pub fn text_of(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `line` with each control character (a terminal would act on it) written as `\xNN` (or
/// `\u{NN}` above ASCII); a tab stays.
pub fn escape_controls(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '\t' => out.push(c),
            c if c.is_control() && c.is_ascii() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The JSON object that starts at byte `at` of `text` (it may span lines), and its length.
fn json_object_at(text: &str, at: usize) -> Option<(serde_json::Map<String, Value>, usize)> {
    let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
    match stream.next()? {
        Ok(Value::Object(map)) => Some((map, stream.byte_offset())),
        _ => None,
    }
}

/// The top-level fields of a JSON object; a key deeper down that names the metric is a mention.
fn json_fields(map: &serde_json::Map<String, Value>, name: &str, f: &mut Findings) {
    for (key, value) in map {
        let read = match value {
            Value::Number(n) => n.as_f64().ok_or(()),
            Value::String(s) => read_value(s),
            _ => Err(()),
        };
        let line = format!("\"{key}\": {value}");
        if key.eq_ignore_ascii_case(name) || read.is_ok() {
            f.keyed(name, key, read, &line);
        } else if f.mention.is_none() && nested_key(value, name) {
            f.mention = Some(line);
        }
    }
}

fn nested_key(value: &Value, name: &str) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case(name) || nested_key(v, name)),
        Value::Array(items) => items.iter().any(|v| nested_key(v, name)),
        _ => false,
    }
}

/// `key: value` or `key=value` where key is a plain identifier, possibly quoted.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let line = line.strip_prefix("- ").unwrap_or(line);
    let idx = line.find([':', '='])?;
    let key = line[..idx].trim();
    let key = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(key);
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@'))
    {
        return None;
    }
    let value = line[idx + 1..].trim();
    Some((key, value))
}

/// The number a value starts with, a unit after it allowed (`41.2ms`, `12 s`, `95%`), a trailing
/// `,` or `;` (JSON, lists) ignored. Err when it does not start with a number, or when the number
/// is written in a form that could mean two things (`1,234`).
fn read_value(value: &str) -> Result<f64, ()> {
    let value = value.trim().trim_matches('"');
    let token = value.split_whitespace().next().ok_or(())?;
    let token = token.trim_end_matches([',', ';']);
    if let Some(v) = parse_number(token) {
        return Ok(v);
    }
    let (number, unit) = split_unit(token).ok_or(())?;
    if !unit.is_empty() && !is_unit(unit) {
        return Err(());
    }
    match number.parse::<f64>() {
        Ok(v) => Ok(v),
        Err(_) => thousands(number).ok_or(()),
    }
}

/// Splits `41.2ms` into `41.2` and `ms` (digits, signs, `.`, `,` and an exponent, then the rest).
fn split_unit(token: &str) -> Option<(&str, &str)> {
    let bytes = token.as_bytes();
    let mut end = 0;
    while end < bytes.len() {
        let c = bytes[end];
        let exponent = matches!(c, b'e' | b'E')
            && end > 0
            && bytes[end - 1].is_ascii_digit()
            && bytes
                .get(end + 1)
                .is_some_and(|n| n.is_ascii_digit() || matches!(n, b'-' | b'+'));
        let sign_after_exponent =
            matches!(c, b'-' | b'+') && end > 0 && matches!(bytes[end - 1], b'e' | b'E');
        if c.is_ascii_digit()
            || matches!(c, b'.' | b',')
            || (end == 0 && matches!(c, b'-' | b'+'))
            || exponent
            || sign_after_exponent
        {
            end += 1;
        } else {
            break;
        }
    }
    let number = token[..end].trim_end_matches(',');
    number
        .bytes()
        .any(|b| b.is_ascii_digit())
        .then_some((number, &token[number.len()..]))
}

/// A unit: letters (`ms`, `MB`, `µs`), `%`, and `/` between them (`it/s`, `tok/s`).
fn is_unit(unit: &str) -> bool {
    unit.chars()
        .all(|c| c.is_alphabetic() || matches!(c, '%' | '/'))
        && unit
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '%')
}

/// `1,234,567` or `1,234.5` (comma thousands, unambiguous); None for `1,234` or `0,5`, which
/// could be a thousands separator or a decimal comma.
fn thousands(number: &str) -> Option<f64> {
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (number, None),
    };
    let digits = int.trim_start_matches(['-', '+']);
    let groups: Vec<&str> = digits.split(',').collect();
    let well_formed = groups.len() >= 2
        && (1..=3).contains(&groups[0].len())
        && groups[1..].iter().all(|g| g.len() == 3)
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit()));
    if !well_formed || (frac.is_none() && groups.len() < 3) {
        return None;
    }
    number.replace(',', "").parse().ok()
}

/// Whether `line` has `name` as a word (any case).
fn mentions(line: &str, name: &str) -> bool {
    let lower = line.to_lowercase();
    let name = name.to_lowercase();
    if name.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    lower.match_indices(&name).any(|(i, _)| {
        !word(lower[..i].chars().next_back()) && !word(lower[i + name.len()..].chars().next())
    })
}

/// Removes ANSI escape sequences (colours, cursor moves, OSC titles).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters, then one final byte in @..~.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim().trim_end_matches(['%', ',']);
    if s.is_empty() {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    if matches!(lower.as_str(), "nan" | "-nan" | "+nan") {
        return Some(f64::NAN);
    }
    if matches!(
        lower.as_str(),
        "inf" | "+inf" | "-inf" | "infinity" | "-infinity"
    ) {
        return Some(if lower.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    let first = s.chars().next()?;
    if !(first.is_ascii_digit() || matches!(first, '-' | '+' | '.')) {
        return None;
    }
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(out: &str, name: &str) -> Reading {
        parse(out, name).reading
    }

    #[test]
    fn forms() {
        assert_eq!(value("loss: 0.25\n", "loss"), Reading::Value(0.25));
        assert_eq!(value("loss=0.5\n", "loss"), Reading::Value(0.5));
        assert_eq!(
            value("{\"loss\": 1.5, \"acc\": 0.9}\n", "loss"),
            Reading::Value(1.5)
        );
        // The last number printed is the metric only when the user opted in.
        assert_eq!(
            value("epoch 3 done\nfinal 42.0\n", "loss"),
            Reading::Missing
        );
        assert_eq!(
            parse_with("epoch 3 done\nfinal 42.0\n", "loss", true).reading,
            Reading::Value(42.0)
        );
        assert_eq!(
            parse_with("loss: 1\n7\n", "loss", true).reading,
            Reading::Value(1.0),
            "a named metric wins over the opt-in"
        );
        assert_eq!(value("nothing here\n", "loss"), Reading::Missing);
        assert!(matches!(
            value("loss: nan\n", "loss"),
            Reading::NotFinite(_)
        ));
        assert!(matches!(
            value("loss: inf\n", "loss"),
            Reading::NotFinite(_)
        ));
        assert_eq!(
            value("loss: 2\nloss: 1e-3\n", "loss"),
            Reading::Conflicting(2.0, 0.001)
        );
        assert_eq!(value("loss: -2.5e+2\n", "loss"), Reading::Value(-250.0));
    }

    #[test]
    fn sub_metrics_are_kept() {
        let m = parse("acc: 0.9\nloss: 0.1\nwall_s=12\n", "loss");
        assert_eq!(m.reading, Reading::Value(0.1));
        assert_eq!(m.sub_metrics.get("acc"), Some(&0.9));
        assert_eq!(m.sub_metrics.get("wall_s"), Some(&12.0));
        assert!(!m.sub_metrics.contains_key("loss"));
    }

    /// A pretty-printed JSON object is read whole, not as its last number.
    #[test]
    fn multi_line_json() {
        let out = "training...\n{\n  \"score\": 0.2,\n  \"acc\": 0.9\n}\n";
        let m = parse(out, "score");
        assert_eq!(m.reading, Reading::Value(0.2));
        assert_eq!(m.sub_metrics.get("acc"), Some(&0.9));
        // Indented, with nested objects and more output after it.
        let out =
            "  {\"acc\": 0.9,\n   \"meta\": {\"n\": 3},\n   \"Score\": \"0.7\"}\ndone in 12.5 s\n";
        assert_eq!(value(out, "score"), Reading::Value(0.7));
        // The whole output one object whose metric is nested: not guessed.
        let out = "{\n  \"results\": {\"score\": 0.2},\n  \"elapsed\": 9\n}\n";
        assert!(matches!(value(out, "score"), Reading::Unreadable(_)));
        // A JSON null for the metric.
        assert!(matches!(
            value("{\"score\": null, \"n\": 4}", "score"),
            Reading::Unreadable(_)
        ));
    }

    /// The key in another case is read; the exact case wins over it.
    #[test]
    fn key_case() {
        assert_eq!(
            value("Score: 3\nelapsed 12.5 s\n", "score"),
            Reading::Value(3.0)
        );
        assert_eq!(value("SCORE=4\n", "score"), Reading::Value(4.0));
        assert_eq!(
            value("score: 1\nScore: 2\n", "score"),
            Reading::Value(1.0),
            "the exact case wins even when printed first"
        );
        assert_eq!(value("\"score\": 5,\n", "score"), Reading::Value(5.0));
    }

    #[test]
    fn colours_are_ignored() {
        assert_eq!(
            value("\u{1b}[32mscore: 0.5\u{1b}[0m\n", "score"),
            Reading::Value(0.5)
        );
        assert_eq!(
            value("\u{1b}[1;31mscore\u{1b}[0m=\u{1b}[33m7\u{1b}[0m\n", "score"),
            Reading::Value(7.0)
        );
        assert_eq!(
            value("\u{1b}]0;title\u{7}score: 2\n", "score"),
            Reading::Value(2.0)
        );
        // A progress bar redrawn with '\r' before the result.
        assert_eq!(
            value("50% 3/6\r100% 6/6\rscore: 0.25\n", "score"),
            Reading::Value(0.25)
        );
    }

    #[test]
    fn a_unit_after_the_number() {
        assert_eq!(value("score: 41.2ms\n", "score"), Reading::Value(41.2));
        assert_eq!(value("score: 41.2 ms\n", "score"), Reading::Value(41.2));
        assert_eq!(value("score=12s\n", "score"), Reading::Value(12.0));
        assert_eq!(value("score: 95%\n", "score"), Reading::Value(95.0));
        assert_eq!(value("score: 3.5it/s\n", "score"), Reading::Value(3.5));
        assert_eq!(value("score: 2e3µs\n", "score"), Reading::Value(2000.0));
        // Not a unit: hexadecimal, a version, a date.
        for bad in ["score: 0x1F", "score: 1.2.3", "score: 2024-01-02"] {
            assert!(
                matches!(value(bad, "score"), Reading::Unreadable(_)),
                "{bad}"
            );
        }
        let m = parse("wall: 12.5s\nscore: 1\n", "score");
        assert_eq!(m.sub_metrics.get("wall"), Some(&12.5));
    }

    /// Thousands separators are read only where they cannot be a decimal comma.
    #[test]
    fn thousands_separators() {
        assert_eq!(
            value("score: 1,234,567\n", "score"),
            Reading::Value(1234567.0)
        );
        assert_eq!(value("score: 1,234.5\n", "score"), Reading::Value(1234.5));
        for ambiguous in ["score: 1,234", "score: 0,5", "score: 12,34,567"] {
            assert_eq!(
                value(ambiguous, "score"),
                Reading::Unreadable(ambiguous.to_string()),
                "{ambiguous}"
            );
        }
    }

    /// Two different values for the metric are no reading; the same value twice is one.
    #[test]
    fn a_metric_printed_twice() {
        assert_eq!(
            value("score: 3\nscore: 100\n", "score"),
            Reading::Conflicting(3.0, 100.0)
        );
        assert_eq!(value("score: 3\nscore=3.0\n", "score"), Reading::Value(3.0));
        // A line and a JSON object, or two objects.
        assert_eq!(
            value("score: 3\n{\n  \"score\": 4\n}\n", "score"),
            Reading::Conflicting(3.0, 4.0)
        );
        assert_eq!(
            value("{\"score\": 2}\n{\"score\": 2, \"n\": 1}\n", "score"),
            Reading::Value(2.0)
        );
        // Under the key in another case, when the exact key is not printed.
        assert_eq!(
            value("Score: 1\nSCORE: 2\n", "score"),
            Reading::Conflicting(1.0, 2.0)
        );
        assert_eq!(value("score: 1\nScore: 2\n", "score"), Reading::Value(1.0));
        // Progress lines in another form are not the metric's line.
        let out = "score@step=100: 1.9\nscore@step=200: 1.41\nscore: 1.3\n";
        assert_eq!(value(out, "score"), Reading::Value(1.3));
        // With the opt-in too: a named metric is read as named.
        assert_eq!(
            parse_with("score: 1\nscore: 2\n7\n", "score", true).reading,
            Reading::Conflicting(1.0, 2.0)
        );
        assert_eq!(
            value("score: nan\nscore: nan\n", "score"),
            Reading::NotFinite("score: nan".into())
        );
    }

    /// Intermediate readings: the accepted forms, read line by line, and never the metric.
    #[test]
    fn readings_at_a_step() {
        let cases: &[(&str, Option<(u64, f64)>)] = &[
            ("score@step=200: 1.412", Some((200, 1.412))),
            ("score@step=200=1.412", Some((200, 1.412))),
            ("  Score@step=5 : 3 ms", Some((5, 3.0))),
            ("- score@step=7: 2", Some((7, 2.0))),
            ("\u{1b}[32mscore@step=1: 4\u{1b}[0m", Some((1, 4.0))),
            (
                "{\"step\": 300, \"score\": 1.2, \"lr\": 0.1}",
                Some((300, 1.2)),
            ),
            ("{\"step\": 3, \"Score\": \"0.5\"}", Some((3, 0.5))),
            // Not a reading: another metric, no step, a step that is not a whole number, no
            // value, a value that is not a finite number, the metric's own line.
            ("loss@step=200: 1.4", None),
            ("score@step=: 1.4", None),
            ("score@step=2.5: 1.4", None),
            ("score@step=200", None),
            ("score@step=200: n/a", None),
            ("score@step=200: nan", None),
            ("{\"step\": -1, \"score\": 1}", None),
            ("{\"step\": 1.5, \"score\": 1}", None),
            ("{\"step\": 1, \"loss\": 1}", None),
            ("{\"score\": 1}", None),
            ("score: 1.3", None),
        ];
        for &(line, want) in cases {
            assert_eq!(reading_at_step(line, "score"), want, "{line}");
        }
        // The final reading stays the metric; JSON readings at a step are not conflicting values.
        let out = "{\"step\": 1, \"score\": 3}\n{\"step\": 2, \"score\": 2}\nscore: 1.5\n";
        assert_eq!(value(out, "score"), Reading::Value(1.5));
        // Readings alone are no metric, and no mention of one either.
        assert_eq!(value("score@step=1: 3\n", "score"), Reading::Missing);
        assert_eq!(
            parse_with("score@step=1: 3\n", "score", true).reading,
            Reading::Missing
        );
    }

    /// Bytes that are not text and control characters are escaped in what a reading quotes.
    #[test]
    fn bytes_that_are_not_text_are_escaped() {
        let out = text_of(b"score: 3\xff\x07\n");
        assert_eq!(out, "score: 3\\xff\x07\n");
        assert_eq!(
            value(&out, "score"),
            Reading::Unreadable("score: 3\\xff\\x07".into())
        );
        assert_eq!(text_of("é ok".as_bytes()), "é ok");
        assert_eq!(escape_controls("a\u{0}b\tc\u{85}"), "a\\x00b\tc\\u{85}");
        assert_eq!(
            parse_with("x\u{1}y 5e999\n", "score", true).reading,
            Reading::NotFinite("5e999".into())
        );
    }

    /// A metric named in a form that cannot be read is no metric, never the last number.
    #[test]
    fn a_named_but_unreadable_metric_is_not_guessed() {
        for out in [
            "score: n/a\nelapsed 12.5\n",
            "final score -> 3\nelapsed 12.5\n",
            "Final Score: 3\nelapsed 12.5\n",
            "val-score: 0.3\n",
        ] {
            assert!(
                matches!(value(out, "score"), Reading::Unreadable(_)),
                "{out:?} gave {:?}",
                value(out, "score")
            );
        }
        // A readable value elsewhere wins over an unreadable one.
        assert_eq!(
            value("score: pending\nscore: 0.4\nscore: done\n", "score"),
            Reading::Value(0.4)
        );
        // Other words containing the name are not mentions.
        assert_eq!(
            parse_with("scoreboard updated\nval_score 3\n9\n", "score", true).reading,
            Reading::Value(9.0)
        );
    }

    /// The versions line is not a metric nor a sub-metric.
    #[test]
    fn the_versions_line_is_no_sub_metric() {
        let m = parse("versions: torch 2.5.1, cuda 12.4\nscore: 3\n", "score");
        assert_eq!(m.reading, Reading::Value(3.0));
        assert!(m.sub_metrics.is_empty(), "{:?}", m.sub_metrics);
    }
}
