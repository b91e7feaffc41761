//! The wall clock, below everything: the event log's timestamps, the lock's and hooks' log
//! lines, and the names of set-aside folders all read it here, so a lower module (`git`,
//! `hooks`, `lock`) never imports the engine for the time.
//!
//! Budgets never read the wall clock: a conference's running time is the sum of the durations
//! each process measured with its own monotonic clock between its events ([`running_segment`]),
//! so a night paused, a reboot or another machine's clock set ahead never counts.
//!
//! `GIT_CONFERENCE_TEST_CLOCK_OFFSET` (seconds, may be negative) moves this process's wall
//! clock: it is for the tests only, which play a machine whose clock is set ahead.

use std::sync::Mutex;
use std::time::Instant;

/// The test-only offset of the wall clock, in seconds.
fn test_offset() -> i64 {
    std::env::var("GIT_CONFERENCE_TEST_CLOCK_OFFSET")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The wall clock now, as this machine (and the test offset) says.
fn now_utc() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc() + time::Duration::seconds(test_offset())
}

/// The current time as the seed's ISO-8601 timestamp, in UTC to the second:
/// `2026-11-23T22:34:16Z` (the form every stored event has).
pub fn now_iso() -> String {
    now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
        .split('.')
        .next()
        .map(|s| {
            if s.ends_with('Z') {
                s.to_string()
            } else {
                format!("{s}Z")
            }
        })
        .unwrap_or_default()
}

/// The current time in whole seconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix() -> u64 {
    now_utc().unix_timestamp().max(0) as u64
}

/// When this process last recorded an event (or started running a conference): the start of
/// the running segment not recorded yet.
static SEGMENT_START: Mutex<Option<Instant>> = Mutex::new(None);

/// Marks the start of this process's running time (the first call wins): called when a run
/// begins, so the time a conference was paused, stopped or down never counts.
pub fn start_running() {
    let mut start = SEGMENT_START.lock().unwrap_or_else(|e| e.into_inner());
    start.get_or_insert_with(Instant::now);
}

/// Seconds this process has run since it last recorded an event (or began running), by its own
/// monotonic clock, to the millisecond; with the instant measured, to pass to
/// [`end_running_segment`] once the event that carries them is recorded.
pub fn running_segment() -> (f64, Instant) {
    let now = Instant::now();
    let start = *SEGMENT_START
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(now);
    let seconds = now.duration_since(start).as_millis() as f64 / 1000.0;
    (seconds, now)
}

/// The segment up to `at` is recorded: the next one starts there.
pub fn end_running_segment(at: Instant) {
    *SEGMENT_START.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_to_the_second() {
        let before = now_unix();
        let iso = now_iso();
        let after = now_unix();
        assert_eq!(iso.len(), 20, "{iso}");
        assert!(iso.ends_with('Z') && iso.as_bytes()[10] == b'T', "{iso}");
        let parsed =
            time::OffsetDateTime::parse(&iso, &time::format_description::well_known::Rfc3339)
                .unwrap()
                .unix_timestamp() as u64;
        assert!(
            before <= parsed && parsed <= after,
            "{before} {parsed} {after}"
        );
    }
}
