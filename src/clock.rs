//! The wall clock, below everything: the event log's timestamps, the lock's and hooks' log
//! lines, and the names of set-aside folders all read it here, so a lower module (`git`,
//! `hooks`, `lock`) never imports the engine for the time.

/// The current time as the seed's ISO-8601 timestamp, in UTC to the second:
/// `2026-11-23T22:34:16Z` (the form every stored event has).
pub fn now_iso() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339)
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
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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
