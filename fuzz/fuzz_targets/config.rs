//! conference.md parser + validator on arbitrary bytes: it must never panic, and every error
//! names a line of the file (or 0 for a missing key/section).
//!
//! Run: `cargo +nightly fuzz run config fuzz/seeds -- -max_total_time=600` (from the repository
//! root; the seeds are the fixtures' and tests' conference.md files).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = git_conference::config::load(text) {
        let lines = text.split('\n').count();
        for e in &errors {
            assert!(e.line <= lines, "line {} of {lines}: {e}", e.line);
        }
    }
});
