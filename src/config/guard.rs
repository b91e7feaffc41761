//! `## Guard` bullets: commands the conference runs, or prose it passes on.
//!
//! The seed writes guards as prose (`- cargo test --release must pass`), which no program can
//! tell apart from a sentence. So a bullet is a command only when it says so: `` - `pytest -q` ``
//! (a backticked command at the start; words after it are commentary) or `- run: pytest -q`.
//! A command guard runs in the candidate's worktree on every candidate that improved, before it
//! is kept; a failing one rejects the candidate. Prose bullets go to the agents, and `start`
//! says they cannot be checked.

use super::parse::read;
use super::sections::SectionKind;
use super::ConfigError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardItem {
    /// A command that must exit 0.
    Command(String),
    /// A condition in words: told to the agents, not checked.
    Prose(String),
}

/// What a Guard bullet is; `Err` for a command bullet with no command.
pub fn classify(item: &str) -> Result<GuardItem, &'static str> {
    let t = item.trim();
    let lower = t.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("run:") {
        let command = t[t.len() - rest.len()..].trim();
        let command = super::parse::unquote(command);
        return if command.is_empty() {
            Err("`run:` needs a command")
        } else {
            Ok(GuardItem::Command(command.to_string()))
        };
    }
    if let Some(rest) = t.strip_prefix('`') {
        if let Some(end) = rest.find('`') {
            let command = rest[..end].trim();
            return if command.is_empty() {
                Err("the backticks hold no command")
            } else {
                Ok(GuardItem::Command(command.to_string()))
            };
        }
    }
    Ok(GuardItem::Prose(t.to_string()))
}

/// The commands among `guard` (Config::guard's bullets), in order.
pub fn commands(guard: &[String]) -> Vec<String> {
    guard
        .iter()
        .filter_map(|g| match classify(g) {
            Ok(GuardItem::Command(c)) => Some(c),
            _ => None,
        })
        .collect()
}

/// The prose bullets among `guard`.
pub fn prose(guard: &[String]) -> Vec<String> {
    guard
        .iter()
        .filter_map(|g| match classify(g) {
            Ok(GuardItem::Prose(p)) => Some(p),
            _ => None,
        })
        .collect()
}

/// `(command, line)` of every command guard in conference.md `text` (for preflight messages).
pub fn command_lines(text: &str) -> Vec<(String, usize)> {
    let (doc, _) = read(text);
    doc.section(SectionKind::Guard)
        .map(|s| {
            s.lines
                .iter()
                .filter_map(|l| match classify(&l.value) {
                    Ok(GuardItem::Command(c)) => Some((c, l.line)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A command bullet without a command, by line.
pub fn errors(doc: &super::parse::Document) -> Vec<ConfigError> {
    let Some(section) = doc.section(SectionKind::Guard) else {
        return vec![];
    };
    section
        .lines
        .iter()
        .filter_map(|l| {
            let why = classify(&l.value).err()?;
            Some(ConfigError {
                line: l.line,
                message: format!("guard `{}`: {why}", l.value.trim()),
                hint: "- run: pytest -q   (or - `pytest -q` must pass; a bullet without a command \
                       is prose for the agents)"
                    .into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_marked_prose_is_not() {
        let c = |s: &str| GuardItem::Command(s.into());
        assert_eq!(classify("run: pytest -q"), Ok(c("pytest -q")));
        assert_eq!(classify("Run: `make test`"), Ok(c("make test")));
        assert_eq!(
            classify("`cargo test --release` must pass"),
            Ok(c("cargo test --release"))
        );
        assert_eq!(
            classify("cargo test --release must pass"),
            Ok(GuardItem::Prose("cargo test --release must pass".into()))
        );
        assert_eq!(
            classify("keep the `tokenize` output identical"),
            Ok(GuardItem::Prose(
                "keep the `tokenize` output identical".into()
            ))
        );
        assert!(classify("run:").is_err());
        assert!(classify("`` must pass").is_err());
        let guard = vec!["run: a".to_string(), "be nice".to_string()];
        assert_eq!(commands(&guard), vec!["a"]);
        assert_eq!(prose(&guard), vec!["be nice"]);
    }

    #[test]
    fn an_empty_command_is_an_error_with_its_line() {
        let (doc, _) = read("## Goal\nx\n## Guard\n- run: true\n- run:\n- prose\n");
        let e = errors(&doc);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].line, 5);
        assert_eq!(
            command_lines("## Guard\n- prose\n- `true` ok\n"),
            vec![("true".to_string(), 3)]
        );
    }
}
