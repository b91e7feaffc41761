use super::*;
use crate::config::keys::Key;

fn doc(text: &str) -> Document {
    parse(text).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn errors(text: &str) -> Vec<ConfigError> {
    parse(text).expect_err("should fail")
}

#[test]
fn key_names_are_normalised() {
    let d = doc("## Researchers\n- **Iterations per round:** 5\n- max_rounds: 4\nCOUNT: 3\n");
    let r = d.section(SectionKind::Researchers).expect("section");
    let keys: Vec<(&str, &str, usize)> = r
        .settings
        .iter()
        .map(|s| (s.key, s.value.as_str(), s.line))
        .collect();
    assert_eq!(
        keys,
        [
            (Key::IterationsPerRound.name(), "5", 2),
            (Key::MaxRounds.name(), "4", 3),
            ("Count", "3", 4)
        ]
    );
    assert_eq!(
        normalize("Critic / Devil's Advocate"),
        "criticdevilsadvocate"
    );
    assert_eq!(
        normalize("iterations_per-round"),
        normalize("Iterations Per Round")
    );
    assert_eq!(
        section_kind("Context and References"),
        Some(SectionKind::Context)
    );
    assert_eq!(
        section_kind("pre-flight gate"),
        Some(SectionKind::PreFlightGate)
    );
}

#[test]
fn bold_key_spellings() {
    for line in [
        "- **Count:** 3",
        "**Count:** 3",
        "* **Count**: 3",
        "- count: 3",
        "  - Count :3",
    ] {
        let d = doc(&format!("## Researchers\n{line}\n"));
        let s = d.setting(SectionKind::Researchers, "Count");
        assert_eq!(s.map(|s| s.value.as_str()), Some("3"), "{line}");
    }
}

#[test]
fn values_keep_hashes_and_lose_html_comments() {
    let d = doc("## Evaluation\n- command: ./eval.sh --tag '#1' # why <!-- note -->\n<!--\n- command: hidden\n-->\n- timeout: `5m`\n");
    let eval = d.section(SectionKind::Evaluation).expect("eval");
    assert_eq!(eval.settings[0].value, "./eval.sh --tag '#1' # why");
    assert_eq!(eval.settings[1].value, "5m");
    assert_eq!(eval.settings[1].line, 6);
}

#[test]
fn unknown_section_and_key_suggest_names() {
    let e = errors("## Goal\nx\n## Reserchers\n- count: 2\n## Constraints\n- time budgit: 2h\n");
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!(e[0].line, 3);
    assert!(
        e[0].hint.contains("did you mean `Researchers`"),
        "{:?}",
        e[0]
    );
    assert!(e[0].hint.contains("Conference Log"), "{:?}", e[0]);
    assert_eq!(e[1].line, 6);
    assert!(
        e[1].hint.contains("did you mean `Time budget`"),
        "{:?}",
        e[1]
    );
}

#[test]
fn prose_in_a_settings_section_is_an_error() {
    let e = errors("## Researchers\nWe want three.\n");
    assert_eq!(e[0].line, 2);
    assert!(e[0].hint.contains("- **Count:** 3"), "{:?}", e[0]);
}

#[test]
fn duplicates_are_errors() {
    let e = errors("## Goal\na\n## Researchers\n- count: 1\n- Count: 2\n## Goal\nb\n");
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(e[0].line == 5 && e[0].message.contains("line 4"), "{e:#?}");
    assert!(e[1].line == 6 && e[1].message.contains("line 1"), "{e:#?}");
}

#[test]
fn lists_focus_sections_and_placeholders() {
    let d = doc("\
# Conference: T
## Search Space
**Allowed changes:**
- src/**
- (anything else)

**Forbidden changes:** tests/**
- see: the harness
## Search Space Partitioning
**Strategy:** assigned
### Researcher A Focus
Loops: unroll them.
- and: this
### Researcher b
Caches.
## Shared Knowledge
(filled in by the conference)
## Success Criteria
(qualitative mode only: what good means)
## Context & References
```sh
# not a heading
```
---
");
    assert_eq!(d.title.as_ref().map(|t| t.value.as_str()), Some("T"));
    let allowed = d
        .setting(SectionKind::SearchSpace, "Allowed changes")
        .expect("allowed");
    let items: Vec<&str> = allowed.items.iter().map(|i| i.value.as_str()).collect();
    assert_eq!(items, ["src/**"]);
    let forbidden = d
        .setting(SectionKind::SearchSpace, "Forbidden changes")
        .expect("f");
    assert_eq!(forbidden.value, "tests/**");
    assert_eq!(forbidden.items[0].value, "see: the harness");
    let p = d.section(SectionKind::Partitioning).expect("partitioning");
    assert_eq!(p.subsections.len(), 2);
    assert_eq!(p.subsections[0].researcher.as_deref(), Some("A"));
    assert_eq!(p.subsections[0].text(), "Loops: unroll them.\n- and: this");
    assert_eq!(p.subsections[1].researcher.as_deref(), Some("B"));
    assert!(d
        .section(SectionKind::SharedKnowledge)
        .expect("sk")
        .lines
        .is_empty());
    assert!(d
        .section(SectionKind::SuccessCriteria)
        .expect("sc")
        .text()
        .is_empty());
    assert_eq!(
        d.section(SectionKind::Context).expect("ctx").text(),
        "```sh\n# not a heading\n```"
    );
    let e = errors("## Search Space Partitioning\n### Notes\n");
    assert!(
        e[0].line == 2 && e[0].hint.contains("### Researcher A Focus"),
        "{e:#?}"
    );
}

#[test]
fn conference_log_is_not_configuration() {
    let d = doc("## Conference Log\n| Round | Researcher |\n|---|---|\n| 1 | A |\n");
    let log = d.section(SectionKind::ConferenceLog).expect("log");
    assert!(log.lines.is_empty() && log.settings.is_empty());
}

#[test]
fn scan_tracks_offsets_and_crlf() {
    let text = "a\r\nb <!-- x\ny --> c\n";
    let lines = scan(text);
    assert_eq!(lines.len(), 3);
    assert_eq!((lines[0].raw, lines[0].start, lines[0].end), ("a", 0, 3));
    assert_eq!(lines[1].visible, "b ");
    assert_eq!(lines[2].visible, " c");
    assert_eq!(lines[2].end, text.len());
}
