//! Human durations in conference.md (`30s`, `5m`, `1h30m`, `1.5h`, `45 min`, `2 hours`).
//!
//! Users write budgets and timeouts the way they speak; this module reads those spellings and writes
//! the short canonical form back (`1h30m`), so `format_duration` output always parses again.

use std::time::Duration;

/// The longest duration any setting may name (a year; timeouts and budgets are hours).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86400);

/// Parse a duration: one or more `<number><unit>` parts (`1h30m`, `1 hour 30 minutes`), or a bare
/// number meaning seconds (`90`). Units: ms, s/sec/second(s), m/min/minute(s), h/hr/hour(s),
/// d/day(s). Fractions are allowed (`1.5h`). Returns `None` for anything else.
pub fn parse_duration(s: &str) -> Option<Duration> {
    if s.trim().is_empty() {
        return None;
    }
    seconds(seconds_written(s)?)
}

/// None past [`MAX_DURATION`] too: `99999999999999999h` overflows a `Duration`
/// (and every clock); `bounds` reports such a value with the maximum.
fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0 && secs <= MAX_DURATION.as_secs_f64())
        .then(|| Duration::from_secs_f64(secs))
}

/// The seconds a duration as written amounts to, however large (None: not a duration).
pub fn seconds_written(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return Some(secs);
    }
    let mut rest = s;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let factor = unit_seconds(&rest[..unit_len].to_ascii_lowercase())?;
        total += number * factor;
        rest = rest[unit_len..].trim_start_matches([' ', ',']);
    }
    Some(total)
}

fn unit_seconds(unit: &str) -> Option<f64> {
    Some(match unit {
        "ms" | "msec" | "millis" | "millisecond" | "milliseconds" => 0.001,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return None,
    })
}

/// The short form: `1h30m`, `5m`, `30s`, `0s`; sub-second durations as milliseconds (`1500ms`).
pub fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let total = d.as_secs();
    if total == 0 {
        return "0s".to_string();
    }
    let (hours, minutes, secs) = (total / 3600, total / 60 % 60, total % 60);
    let mut out = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (secs, "s")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Option<Duration> {
        Some(Duration::from_secs(n))
    }

    #[test]
    fn parses_the_spellings_users_write() {
        assert_eq!(parse_duration("30s"), secs(30));
        assert_eq!(parse_duration("5m"), secs(300));
        assert_eq!(parse_duration("2h"), secs(7200));
        assert_eq!(parse_duration("1h30m"), secs(5400));
        assert_eq!(parse_duration("1h 30m"), secs(5400));
        assert_eq!(parse_duration("90"), secs(90));
        assert_eq!(parse_duration("1.5h"), secs(5400));
        assert_eq!(parse_duration("45 min"), secs(2700));
        assert_eq!(parse_duration("2 hours"), secs(7200));
        assert_eq!(parse_duration("1 hour, 30 minutes"), secs(5400));
        assert_eq!(parse_duration("1d"), secs(86400));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 10 S "), secs(10));
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for bad in ["", "abc", "5x", "h", "-5m", "5m extra", "1..5h", "none"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_short_and_round_trips() {
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_secs(3661)), "1h1m1s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        for d in [0, 1, 59, 60, 61, 3600, 5400, 86400, 90061] {
            let d = Duration::from_secs(d);
            assert_eq!(parse_duration(&format_duration(d)), Some(d));
        }
    }
}
