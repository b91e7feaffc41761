//! How metrics, gains and changes are written in every page and line users read.

use crate::model::Direction;

/// A metric with six decimals; `-` when there is none.
pub fn fmt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into())
}

/// A duration users read: `12.3s` under a minute, `4m 12s`, `2h 05m`.
pub fn seconds_text(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let whole = s.round() as u64;
    let (h, m, sec) = (whole / 3600, whole / 60 % 60, whole % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else {
        format!("{m}m {sec:02}s")
    }
}

/// A change of the metric with its direction spelled out (gain positive = better):
/// `1.128311 → 1.150005 (gain -0.021694, worse)` under minimize.
pub fn change_text(dir: Direction, from: f64, to: f64) -> String {
    format!("{from:.6} → {to:.6} ({})", gain_text(dir.gain(to, from)))
}

/// A gain (positive = better whatever the direction) with its meaning.
pub fn gain_text(gain: f64) -> String {
    let word = if gain > 0.0 {
        "better"
    } else if gain < 0.0 {
        "worse"
    } else {
        "unchanged"
    };
    format!("gain {gain:+.6}, {word}")
}

/// A change as a percentage of `base` (nothing when the base is zero).
pub fn pct(delta: f64, base: f64) -> String {
    if base.abs() > f64::EPSILON {
        format!(" ({:+.2}%)", 100.0 * delta / base.abs())
    } else {
        String::new()
    }
}

/// One line, at most `max` characters (an ellipsis marks a cut).
pub fn one_line(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    format!(
        "{}…",
        line.chars().take(max.saturating_sub(1)).collect::<String>()
    )
}

/// `950`, `12.3k`, `1.20M`.
pub fn count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

/// `$0.0034`, `$3.21`.
pub fn usd(x: f64) -> String {
    if x < 0.1 {
        format!("${x:.4}")
    } else {
        format!("${x:.2}")
    }
}
