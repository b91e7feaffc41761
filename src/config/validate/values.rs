//! Values as conference.md writes them: `none`, token counts, dollar amounts, yes/no,
//! directions, targets, tolerances, durations; each None when it cannot be read.

use std::time::Duration;

use crate::config::duration::parse_duration;
use crate::config::{DevilsAdvocate, Direction, Strategy, Tolerance};

pub(super) fn is_none(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "none" | "no" | "-" | "n/a" | "unlimited" | "never"
    )
}

/// `2M tokens`, `500k`, `2,000,000`, `2000000` → the number; `none` → no budget.
pub(super) fn token_count(value: &str) -> Option<Option<u64>> {
    // The original skill's unfilled template: `{optional — omit or set a cap}`.
    let v = value.trim();
    if v.starts_with('{') && v.ends_with('}') && v.contains("optional") {
        return Some(None);
    }
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim().to_ascii_lowercase();
    let v = v
        .trim_end_matches("tokens")
        .trim_end_matches("token")
        .trim();
    let v = v.replace([',', '_'], "");
    let (number, scale) = match v.chars().last()? {
        'k' => (&v[..v.len() - 1], 1e3),
        'm' => (&v[..v.len() - 1], 1e6),
        'b' | 'g' => (&v[..v.len() - 1], 1e9),
        _ => (v.as_str(), 1.0),
    };
    let n: f64 = number.trim().parse().ok()?;
    (n.is_finite() && n > 0.0).then(|| Some((n * scale).round() as u64))
}

/// `$20`, `20 USD`, `20$`, `12.50 dollars` → the amount; `none` → no budget.
pub(super) fn usd_amount(value: &str) -> Option<Option<f64>> {
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim().to_ascii_lowercase();
    let v = v.trim_start_matches("us").trim();
    let v = v.trim_start_matches('$').trim_end_matches('$').trim();
    let v = ["usd", "dollars", "dollar"]
        .iter()
        .fold(v, |v, unit| v.trim_end_matches(unit).trim());
    let n: f64 = v.replace(',', "").parse().ok()?;
    (n.is_finite() && n > 0.0).then_some(Some(n))
}

/// `Cost budget`: an amount for the whole conference, or with `per researcher` (`each`) for
/// each researcher's share.
pub(super) fn cost_amount(value: &str) -> Option<Option<(f64, bool)>> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    let each = ["per researcher", "/researcher", "each"]
        .iter()
        .find_map(|tail| lower.strip_suffix(tail).map(|rest| rest.len()));
    match each {
        Some(len) => usd_amount(&v[..len]).map(|a| a.map(|usd| (usd, true))),
        None => usd_amount(v).map(|a| a.map(|usd| (usd, false))),
    }
}

pub(super) fn is_env_name(value: &str) -> bool {
    let v = value.trim();
    !v.is_empty()
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `metric from`: `name` (default) → false; `last number` → true.
pub(super) fn metric_from(value: &str) -> Option<bool> {
    match crate::config::sections::normalize(value).as_str() {
        "name" | "named" | "key" => Some(false),
        "lastnumber" | "last" => Some(true),
        _ => None,
    }
}

/// `prune`: on / off (the words `yes_no` takes), or early → (pruning, without the catch-up check).
pub(super) fn prune_setting(value: &str) -> Option<(bool, bool)> {
    match value.trim().to_ascii_lowercase().as_str() {
        "early" => Some((true, true)),
        v => yes_no(v).map(|on| (on, false)),
    }
}

pub(super) fn positive(value: &str) -> Option<u32> {
    value.trim().parse::<u32>().ok().filter(|&n| n >= 1)
}

pub(super) fn yes_no(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" | "on" | "enabled" => Some(true),
        "no" | "n" | "false" | "off" | "disabled" => Some(false),
        _ => None,
    }
}

pub(super) fn devils_advocate(value: &str) -> Option<DevilsAdvocate> {
    let v = value.trim().to_ascii_lowercase();
    if v.starts_with("ask") {
        return Some(DevilsAdvocate::Ask);
    }
    match v.as_str() {
        "enabled" | "enable" => Some(DevilsAdvocate::Enabled),
        "disabled" | "disable" | "none" => Some(DevilsAdvocate::Disabled),
        _ => yes_no(&v).map(|on| {
            if on {
                DevilsAdvocate::Enabled
            } else {
                DevilsAdvocate::Disabled
            }
        }),
    }
}

pub(super) fn strategy(value: &str) -> Option<Strategy> {
    match crate::config::sections::normalize(value).as_str() {
        "assigned" => Some(Strategy::Assigned),
        "free" => Some(Strategy::Free),
        _ => None,
    }
}

pub(super) fn direction(value: &str) -> Option<Direction> {
    match crate::config::sections::normalize(value).as_str() {
        "maximize" | "maximise" | "max" | "higher" | "higherisbetter" | "increase" => {
            Some(Direction::Maximize)
        }
        "minimize" | "minimise" | "min" | "lower" | "lowerisbetter" | "decrease" => {
            Some(Direction::Minimize)
        }
        _ => None,
    }
}

/// `40`, `< 50ms`, `> 95%`, `> 8/10` → the number; `none` → no target.
pub(super) fn target(value: &str) -> Option<Option<f64>> {
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim_start_matches(|c: char| "<>=≤≥~ ".contains(c));
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || ".eE+-".contains(c)))
        .unwrap_or(v.len());
    let number: f64 = v[..end].parse().ok()?;
    number.is_finite().then_some(Some(number))
}

/// `1%` → percent of the baseline; `0.02` → absolute; `none` → the default.
pub(super) fn tolerance(value: &str) -> Option<Option<Tolerance>> {
    if is_none(value) {
        return (!value.trim().is_empty()).then_some(None);
    }
    let v = value.trim();
    let (number, percent) = match v.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (v, false),
    };
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    Some(Some(if percent {
        Tolerance::Percent(n)
    } else {
        Tolerance::Absolute(n)
    }))
}

pub(super) fn positive_duration(value: &str) -> Option<Duration> {
    parse_duration(value).filter(|d| !d.is_zero())
}

pub(super) fn optional_duration(value: &str) -> Option<Option<Duration>> {
    if is_none(value) && !value.trim().is_empty() {
        return Some(None);
    }
    positive_duration(value).map(Some)
}

/// `never` → no pause; `2` (or `2 rounds`) → every 2 rounds.
pub(super) fn pause_every(value: &str) -> Option<Option<u32>> {
    if is_none(value) && !value.trim().is_empty() {
        return Some(None);
    }
    let v = value.trim().to_ascii_lowercase();
    let v = v
        .trim_end_matches("rounds")
        .trim_end_matches("round")
        .trim();
    positive(v).map(Some)
}
