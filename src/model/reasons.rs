//! How an attempt's reason is worded: which verdicts show one, and the words for a verdict
//! recorded without one. The state (`last_reason`), the progress line and the reports share it.

use super::{Verdict, Word};

/// Verdicts that carry a reason worth showing (a kept or reverted attempt speaks for itself).
pub fn shows_reason(verdict: &Word<Verdict>) -> bool {
    !matches!(verdict.known(), Some(Verdict::Kept | Verdict::Reverted))
}

/// An attempt's reason in words, with a default for verdicts recorded without one.
pub fn reason_text(verdict: &Word<Verdict>, reason: Option<&str>) -> String {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => r.to_string(),
        None => match verdict.known() {
            Some(Verdict::NoChange) => "the agent changed nothing".into(),
            Some(Verdict::Timeout) => "timed out".into(),
            Some(Verdict::Crashed) => "crashed".into(),
            _ => verdict.to_string(),
        },
    }
}
