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

/// Whether a line of a program's output names an error: a word ending in `Error` or
/// `Exception` (`ValueError: …`, `java.lang.NullPointerException`, `error: …`), or `fatal`,
/// `panic`, `panicked`, `segmentation fault`, `aborted`. Python's `Traceback (most recent call
/// last):` header says that one follows, not which; a reading (`val_error: 0.3`) is none.
pub fn names_an_error(line: &str) -> bool {
    let line = line.trim();
    let a_reading = line.split_once([':', '=']).is_some_and(|(name, v)| {
        !name.trim().contains(char::is_whitespace) && v.trim().parse::<f64>().is_ok()
    });
    if line.starts_with("Traceback (") || a_reading {
        return false;
    }
    line.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .any(|w| {
            w.ends_with("error")
                || w.ends_with("exception")
                || matches!(
                    w.as_str(),
                    "fatal" | "panic" | "panicked" | "segmentation" | "aborted"
                )
        })
}

/// The last of `lines` that names an error (see [`names_an_error`]), trimmed.
pub fn last_error_line<'a>(lines: impl DoubleEndedIterator<Item = &'a str>) -> Option<&'a str> {
    lines.rev().map(str::trim).find(|l| names_an_error(l))
}

/// The evaluation's own error line in an attempt's reason (`evaluation exit status 1: File
/// "x.py", line 3 | ValueError: … | done` gives `ValueError: …`): its last part that names an
/// error, the words the program put before it (`evaluation exit status 1: `) left out.
pub fn error_line_of(reason: &str) -> Option<String> {
    let parts: Vec<&str> = reason
        .split(" | ")
        .map(|part| match part.split_once(": ") {
            Some((head, rest)) if head.starts_with("evaluation ") => rest,
            _ => part,
        })
        .collect();
    last_error_line(parts.into_iter()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_that_names_an_error_is_found() {
        for named in [
            "ValueError: b.txt holds 'boom', not a number",
            "RuntimeError: CUDA out of memory",
            "error: could not compile `x`",
            "thread 'main' panicked at src/main.rs:3:5",
            "Exception in thread \"main\" java.lang.NullPointerException",
            "Segmentation fault (core dumped)",
        ] {
            assert!(names_an_error(named), "{named}");
        }
        for plain in [
            "Traceback (most recent call last):",
            "  File \"eval.py\", line 3, in <module>",
            "done",
            "loss: 0.41",
            "val_error: 0.3",
        ] {
            assert!(!names_an_error(plain), "{plain}");
        }
        assert_eq!(
            error_line_of(
                "evaluation exit status 1: File \"eval.py\", line 3 | ValueError: b.txt holds \
                 'boom', not a number | done"
            )
            .as_deref(),
            Some("ValueError: b.txt holds 'boom', not a number")
        );
        assert_eq!(
            error_line_of("evaluation exit status 1: ValueError: x").as_deref(),
            Some("ValueError: x")
        );
        assert_eq!(error_line_of("evaluation exit status 3"), None);
    }
}
