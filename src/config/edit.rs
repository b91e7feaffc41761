//! Rewriting the conference's stored conference.md as rounds complete.
//!
//! The seed has the chair append validated findings to Shared Knowledge and a row per round to the
//! Conference Log. These functions make exactly that insertion and keep every other byte (comments,
//! spacing, line endings) as the user wrote it, so a diff of the stored file shows only the new lines.

use super::parse::{is_placeholder, scan, RawLine};
use super::sections::{section_kind, SectionKind};

/// The Conference Log table's header and separator rows.
pub const LOG_HEADER: &str = "| Round | Researcher | Best Metric | Key Finding | Status |";
pub const LOG_SEPARATOR: &str = "|---|---|---|---|---|";

/// Add `- line` to Shared Knowledge: in place of its `(filled in ...)` placeholder if there is one,
/// else after the section's last line. A missing section is created before Context & References or
/// Conference Log, or at the end.
pub fn append_shared_knowledge(text: &str, line: &str) -> String {
    let nl = newline(text);
    let single = one_line(line);
    let item = if single.starts_with("- ") {
        single
    } else {
        format!("- {single}")
    };
    let lines = scan(text);
    let Some((heading, end)) = find_section(&lines, SectionKind::SharedKnowledge) else {
        let block = format!("## Shared Knowledge{nl}{item}{nl}");
        return insert_section(
            text,
            &lines,
            block,
            &[SectionKind::Context, SectionKind::ConferenceLog],
        );
    };
    let body = &lines[heading + 1..end];
    if let Some(placeholder) = body
        .iter()
        .find(|l| !l.in_fence && is_placeholder(&l.visible))
    {
        let content_end = placeholder.start + placeholder.raw.len();
        return splice(text, placeholder.start, content_end, &item);
    }
    insert_after_last(text, &lines, heading, end, &format!("{item}{nl}"))
}

/// Add a row to the Conference Log table (`| Round | Researcher | Best Metric | Key Finding |
/// Status |`), creating the table, or the section, when missing. `|` in a cell is escaped.
pub fn append_conference_log_row(text: &str, cells: &[String]) -> String {
    let nl = newline(text);
    let row = format!(
        "| {} |",
        cells
            .iter()
            .map(|c| one_line(c).replace('|', "\\|"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let lines = scan(text);
    let Some((heading, end)) = find_section(&lines, SectionKind::ConferenceLog) else {
        let block = format!("## Conference Log{nl}{LOG_HEADER}{nl}{LOG_SEPARATOR}{nl}{row}{nl}");
        return insert_section(text, &lines, block, &[]);
    };
    let is_table = |l: &RawLine| !l.in_fence && l.visible.trim_start().starts_with('|');
    let Some(first) = (heading + 1..end).find(|&i| is_table(&lines[i])) else {
        let table = format!("{LOG_HEADER}{nl}{LOG_SEPARATOR}{nl}{row}{nl}");
        return insert_after_last(text, &lines, heading, end, &table);
    };
    let last = (first..end)
        .take_while(|&i| is_table(&lines[i]))
        .last()
        .unwrap_or(first);
    let has_separator = last > first && is_separator(&lines[first + 1].visible);
    let block = if has_separator {
        format!("{row}{nl}")
    } else {
        format!("{LOG_SEPARATOR}{nl}{row}{nl}")
    };
    let at = if has_separator { last } else { first };
    insert_line_after(text, &lines[at], &block)
}

/// `into` with its sections of `kinds` taken from `from` (whole sections, heading included):
/// when the user's edited conference.md replaces the stored copy between rounds, the parts the
/// conference maintains (Shared Knowledge, Conference Log) stay as the conference wrote them.
pub fn carry_sections(from: &str, into: &str, kinds: &[SectionKind]) -> String {
    let mut out = into.to_string();
    for &kind in kinds {
        let source = scan(from);
        let Some((heading, end)) = find_section(&source, kind) else {
            continue;
        };
        let start = source[heading].start;
        let stop = source.get(end).map_or(from.len(), |l| l.start);
        let block = &from[start..stop];
        let lines = scan(&out);
        out = match find_section(&lines, kind) {
            Some((h, e)) => {
                let stop = lines.get(e).map_or(out.len(), |l| l.start);
                splice(&out, lines[h].start, stop, block)
            }
            None => {
                let before: &[SectionKind] = match kind {
                    SectionKind::SharedKnowledge => {
                        &[SectionKind::Context, SectionKind::ConferenceLog]
                    }
                    _ => &[],
                };
                insert_section(
                    &out,
                    &lines,
                    block.trim_end().to_string() + newline(&out),
                    before,
                )
            }
        };
    }
    out
}

fn is_separator(line: &str) -> bool {
    let t = line.trim();
    t.contains('-') && t.chars().all(|c| "|-: ".contains(c))
}

/// `\r\n` when the file uses it, else `\n`.
fn newline(text: &str) -> &'static str {
    if text.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// Newlines become spaces: each entry stays one line of the file.
fn one_line(s: &str) -> String {
    s.split(['\r', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `(heading index, end index)` of the `## ` section of `kind`.
fn find_section(lines: &[RawLine], kind: SectionKind) -> Option<(usize, usize)> {
    let is_section = |l: &RawLine| l.heading().is_some_and(|(level, _)| level <= 2);
    let heading = lines.iter().position(|l| {
        l.heading()
            .is_some_and(|(level, t)| level == 2 && section_kind(t) == Some(kind))
    })?;
    let end = (heading + 1..lines.len())
        .find(|&i| is_section(&lines[i]))
        .unwrap_or(lines.len());
    Some((heading, end))
}

fn splice(text: &str, from: usize, to: usize, with: &str) -> String {
    let mut out = String::with_capacity(text.len() + with.len() + 2);
    out.push_str(&text[..from]);
    out.push_str(with);
    out.push_str(&text[to..]);
    out
}

/// Insert `block` (which ends with a newline) on the line after `line`.
fn insert_line_after(text: &str, line: &RawLine, block: &str) -> String {
    if line.end == line.start + line.raw.len() {
        // The last line of a file without a final newline.
        let nl = newline(text);
        let block = block.strip_suffix(nl).unwrap_or(block);
        return splice(text, line.end, line.end, &format!("{nl}{block}"));
    }
    splice(text, line.end, line.end, block)
}

/// Insert `block` after the last non-blank line of the section `heading..end`.
fn insert_after_last(
    text: &str,
    lines: &[RawLine],
    heading: usize,
    end: usize,
    block: &str,
) -> String {
    let last = (heading + 1..end)
        .rev()
        .find(|&i| !lines[i].raw.trim().is_empty() && !is_rule(lines[i].raw))
        .unwrap_or(heading);
    insert_line_after(text, &lines[last], block)
}

fn is_rule(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 3 && t.chars().all(|c| c == '-')
}

/// Insert a new section `block` before the first of `before` present, else at the end.
fn insert_section(text: &str, lines: &[RawLine], block: String, before: &[SectionKind]) -> String {
    let nl = newline(text);
    let target = lines.iter().find(|l| {
        l.heading().is_some_and(|(level, t)| {
            level == 2 && section_kind(t).is_some_and(|k| before.contains(&k))
        })
    });
    if let Some(line) = target {
        return splice(text, line.start, line.start, &format!("{block}{nl}"));
    }
    let mut out = text.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(nl);
    }
    if lines.last().is_some_and(|l| !l.raw.trim().is_empty()) {
        out.push_str(nl);
    }
    out.push_str(&block);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../tests/data/config/example.md");

    /// `after` is `before` with exactly `inserted` added at one place (and, if given, `removed` gone).
    fn only_inserted(before: &str, after: &str, inserted: &str, removed: &str) {
        let prefix = before
            .bytes()
            .zip(after.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let suffix = before[prefix..]
            .bytes()
            .rev()
            .zip(after[prefix..].bytes().rev())
            .take_while(|(a, b)| a == b)
            .count();
        assert_eq!(
            &after[prefix..after.len() - suffix],
            inserted,
            "after:\n{after}"
        );
        assert_eq!(
            &before[prefix..before.len() - suffix],
            removed,
            "before:\n{before}"
        );
    }

    #[test]
    fn shared_knowledge_replaces_the_placeholder_then_appends() {
        let once = append_shared_knowledge(EXAMPLE, "Reusing the buffer saves 12%");
        assert!(once.contains("## Shared Knowledge\n- Reusing the buffer saves 12%\n\n## Context"));
        only_inserted(
            EXAMPLE,
            &once,
            "- Reusing the buffer saves 12%",
            "(filled in by the conference: one line per validated finding)",
        );
        let twice = append_shared_knowledge(&once, "- Second\nfinding");
        only_inserted(&once, &twice, "- Second finding\n", "");
        assert!(twice.contains("- Reusing the buffer saves 12%\n- Second finding\n\n## Context"));
        let c = crate::config::load(&twice).expect("still valid");
        assert_eq!(
            c.shared_knowledge,
            ["Reusing the buffer saves 12%", "Second finding"]
        );
    }

    #[test]
    fn shared_knowledge_section_is_created_where_it_belongs() {
        let text = "# Conference: T\n\n## Goal\nx\n\n## Context & References\ny\n";
        let out = append_shared_knowledge(text, "found");
        assert_eq!(
            out,
            "# Conference: T\n\n## Goal\nx\n\n## Shared Knowledge\n- found\n\n## Context & References\ny\n"
        );
        let out = append_shared_knowledge("## Goal\nx", "found");
        assert_eq!(out, "## Goal\nx\n\n## Shared Knowledge\n- found\n");
        let crlf = "## Shared Knowledge\r\n<!-- auto -->\r\n\r\n## Conference Log\r\n";
        let out = append_shared_knowledge(crlf, "found");
        assert_eq!(
            out,
            "## Shared Knowledge\r\n<!-- auto -->\r\n- found\r\n\r\n## Conference Log\r\n"
        );
    }

    #[test]
    fn log_rows_append_to_the_table() {
        let cells = |r: &str| -> Vec<String> {
            [r, "A", "41.5", "reuse | buffers", "kept"]
                .iter()
                .map(|c| c.to_string())
                .collect()
        };
        let once = append_conference_log_row(EXAMPLE, &cells("1"));
        only_inserted(
            EXAMPLE,
            &once,
            "| 1 | A | 41.5 | reuse \\| buffers | kept |\n",
            "",
        );
        let twice = append_conference_log_row(&once, &cells("2"));
        assert!(twice.ends_with("|---|---|---|---|---|\n| 1 | A | 41.5 | reuse \\| buffers | kept |\n| 2 | A | 41.5 | reuse \\| buffers | kept |\n"));
        crate::config::load(&twice).expect("still valid");
    }

    #[test]
    fn log_table_and_section_are_created_when_missing() {
        let row = vec![
            "1".to_string(),
            "B".into(),
            "3".into(),
            "x".into(),
            "kept".into(),
        ];
        let out = append_conference_log_row("## Goal\nx\n", &row);
        assert_eq!(
            out,
            format!("## Goal\nx\n\n## Conference Log\n{LOG_HEADER}\n{LOG_SEPARATOR}\n| 1 | B | 3 | x | kept |\n")
        );
        let out =
            append_conference_log_row("## Conference Log\n<!-- auto -->\n\n## Goal\nx\n", &row);
        assert_eq!(
            out,
            format!("## Conference Log\n<!-- auto -->\n{LOG_HEADER}\n{LOG_SEPARATOR}\n| 1 | B | 3 | x | kept |\n\n## Goal\nx\n")
        );
        let out = append_conference_log_row("## Conference Log\n| Round | Researcher |", &row);
        assert_eq!(
            out,
            format!("## Conference Log\n| Round | Researcher |\n{LOG_SEPARATOR}\n| 1 | B | 3 | x | kept |")
        );
    }
}
