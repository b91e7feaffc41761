//! Reading the metric from what an evaluation printed.
//!
//! Accepted, in order of preference: a `name: value` or `name=value` line, a JSON object with the
//! metric's key, and otherwise the last number printed. Every other `key: number` line (or numeric
//! JSON field) is kept as a sub-metric. NaN and infinities are never a metric: the run is a crash.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    Value(f64),
    /// Printed, but NaN or infinite.
    NotFinite(String),
    Missing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub reading: Reading,
    pub sub_metrics: BTreeMap<String, f64>,
}

/// Parses `output` for the metric called `name`.
pub fn parse(output: &str, name: &str) -> Measurement {
    let mut named: Option<String> = None;
    let mut sub_metrics = BTreeMap::new();
    let mut last_number: Option<String> = None;
    for line in output.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('{') {
            if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(trimmed) {
                for (key, value) in map {
                    let text = match &value {
                        serde_json::Value::Number(n) => n.to_string(),
                        serde_json::Value::String(s) if parse_number(s).is_some() => s.clone(),
                        _ => continue,
                    };
                    if key == name {
                        named = Some(text);
                    } else if let Some(v) = parse_number(&text).filter(|v| v.is_finite()) {
                        sub_metrics.insert(key, v);
                    }
                }
                continue;
            }
        }
        if let Some((key, value)) = key_value(trimmed) {
            if key == name {
                named = Some(value.to_string());
            } else if let Some(v) = parse_number(value).filter(|v| v.is_finite()) {
                sub_metrics.insert(key.to_string(), v);
            }
        }
        for token in trimmed.split(|c: char| {
            c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '[' | ']' | '=' | ':')
        }) {
            if parse_number(token).is_some() {
                last_number = Some(token.to_string());
            }
        }
    }
    let reading = match named.or(last_number) {
        Some(text) => match parse_number(&text) {
            Some(v) if v.is_finite() => Reading::Value(v),
            Some(_) => Reading::NotFinite(text),
            None => Reading::Missing,
        },
        None => Reading::Missing,
    };
    Measurement {
        reading,
        sub_metrics,
    }
}

/// `key: value` or `key=value` where key is a plain identifier.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let line = line.strip_prefix("- ").unwrap_or(line);
    let idx = line.find([':', '='])?;
    let key = line[..idx].trim();
    let value = line[idx + 1..].trim();
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@'))
    {
        return None;
    }
    let value = value.split_whitespace().next()?;
    Some((key, value.trim_end_matches([',', ';', '%'])))
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
        assert_eq!(
            value("epoch 3 done\nfinal 42.0\n", "loss"),
            Reading::Value(42.0)
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
            Reading::Value(0.001)
        );
    }

    #[test]
    fn sub_metrics_are_kept() {
        let m = parse("acc: 0.9\nloss: 0.1\nwall_s=12\n", "loss");
        assert_eq!(m.reading, Reading::Value(0.1));
        assert_eq!(m.sub_metrics.get("acc"), Some(&0.9));
        assert_eq!(m.sub_metrics.get("wall_s"), Some(&12.0));
        assert!(!m.sub_metrics.contains_key("loss"));
    }
}
