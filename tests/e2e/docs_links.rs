//! The documentation holds together: README.md is a front page (the two set-up commands first,
//! short, a map that links every page of `docs/`), every relative link in README.md and
//! `docs/*.md` names a file that exists (and a heading that exists, for `#anchor` links into
//! Markdown, by GitHub's slug rule), and `docs/conference-md.md` names every section and key the
//! real binary accepts, as its own error messages list them.

use crate::common::TestRepo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every `docs/*.md`, as paths relative to the repository root.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    assert!(docs.len() >= 5, "docs/ has only {docs:?}");
    pages.extend(docs);
    pages
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap()
}

/// The lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => fence = None,
            (None, None) => lines.push((i + 1, line)),
            _ => {}
        }
    }
    assert!(fence.is_none(), "a code fence is never closed");
    lines
}

/// `line` without its code spans (`` `a` ``, ``` `` b `` ```), whose brackets are not links.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + run..];
        let closing = "`".repeat(run);
        match find_run(after, &closing) {
            Some(end) => rest = &after[end + run..],
            None => {
                out.push_str(&rest[start..start + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where a run of exactly `run` backticks starts in `text`.
fn find_run(text: &str, run: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(run).map(|i| i + from) {
        let end = i + run.len();
        let before = i > 0 && bytes[i - 1] == b'`';
        if !before && bytes.get(end) != Some(&b'`') {
            return Some(i);
        }
        from = end;
    }
    None
}

/// The targets of the inline links and images in `text`'s prose, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((number, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_` dropped, spaces
/// to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `text`'s headings, a repeated one numbered as GitHub numbers it (`-1`, `-2`).
fn anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = Vec::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        anchors.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    anchors
}

/// Why `target`, linked from `page`, does not resolve; None when it does.
fn broken(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        root().join(page)
    } else {
        root().join(page).parent().unwrap().join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    let anchor = anchor?;
    if file.extension().is_some_and(|x| x == "md") {
        let text = std::fs::read_to_string(&file).unwrap();
        if !anchors(&text).iter().any(|a| a == anchor) {
            return Some(format!(
                "no heading of {} has the anchor #{anchor}",
                file.display()
            ));
        }
    }
    None
}

#[test]
fn every_relative_link_resolves() {
    let mut problems = Vec::new();
    let mut count = 0;
    for page in pages() {
        for (line, target) in links(&read(&page)) {
            count += 1;
            if let Some(why) = broken(&page, &target) {
                problems.push(format!("{}:{line}: ({target}): {why}", page.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(
        count >= 30,
        "only {count} links found: is the link reader broken?"
    );
}

#[test]
fn the_link_reader_sees_links_and_skips_code() {
    let text = "[a](x.md) `[b](y.md)` `` `[c](z.md)` ``\n```\n[d](w.md)\n```\n![e](p.png#top)\n";
    let targets: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["x.md", "p.png#top"]);
    let headings = "# Where things are\n## Knowledge: the original's folders\n## A\n## A\n";
    assert_eq!(
        anchors(headings),
        [
            "where-things-are",
            "knowledge-the-originals-folders",
            "a",
            "a-1"
        ]
    );
    assert_eq!(
        slug("conference.md: every `section` & key"),
        "conferencemd-every-section--key"
    );
}

#[test]
fn the_readme_begins_with_the_two_set_up_commands() {
    let readme = read(Path::new("README.md"));
    let block: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    let commands: Vec<&str> = block
        .iter()
        .map(|l| l.split(" #").next().unwrap().trim())
        .collect();
    assert_eq!(
        commands,
        ["cargo run --release -- demo", "cargo test --locked"],
        "README.md's first code block:\n{}",
        block.join("\n")
    );
    let first_block = readme.find("```").unwrap();
    let first_heading = readme.find("\n## ").unwrap();
    assert!(
        first_block < first_heading,
        "the set-up commands come before any section"
    );
}

#[test]
fn the_readme_is_a_front_page_that_links_every_doc() {
    let readme = read(Path::new("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines: it is the front page; move a topic to docs/"
    );
    let linked: Vec<PathBuf> = links(&readme)
        .into_iter()
        .map(|(_, t)| PathBuf::from(t.split('#').next().unwrap()))
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .skip(1)
        .filter(|p| !linked.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's map does not link {missing:?}"
    );
}

/// A conference.md with an unknown section and an unknown key in every section that holds
/// settings: `start` answers with the valid names of each.
const WITH_AN_UNKNOWN_SECTION: &str =
    "# Conference: names\n\n## Zqxz Unknown\n\n## Goal\nLower it.\n\n\
## Mode\nmetric\n";

const SETTINGS_SECTIONS: &[&str] = &[
    "Success Metric",
    "Researchers",
    "Pre-Flight Gate",
    "Search Space",
    "Search Space Partitioning",
    "Noise Handling",
    "Constraints",
    "Evaluation",
    "Agent",
    "Environment",
];

#[test]
fn the_conference_md_reference_names_every_section_and_key() {
    let mut config = WITH_AN_UNKNOWN_SECTION.to_string();
    for section in SETTINGS_SECTIONS {
        config.push_str(&format!("\n## {section}\n- zqxzqxzqx: 1\n"));
    }
    let repo = TestRepo::new();
    repo.write("x.txt", "1\n");
    repo.commit_all("base");
    let run = repo.start("names", &config);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let reference = read(Path::new("docs/conference-md.md"));
    let valid = |what: &str| -> Vec<Vec<String>> {
        run.stderr
            .lines()
            .filter_map(|l| l.split_once(&format!("valid {what}: ")))
            .map(|(_, list)| list.split(", ").map(str::to_string).collect())
            .collect()
    };
    let sections = valid("sections");
    assert_eq!(sections.len(), 1, "{}", run.stderr);
    let headings = anchors(&reference);
    for section in &sections[0] {
        assert!(
            headings.contains(&slug(section)),
            "docs/conference-md.md has no `## {section}`"
        );
    }
    let keys = valid("keys here");
    assert_eq!(keys.len(), SETTINGS_SECTIONS.len(), "{}", run.stderr);
    for (section, keys) in SETTINGS_SECTIONS.iter().zip(keys) {
        let part = section_text(&reference, section);
        for key in keys {
            let row = format!("| {} ", key.to_lowercase());
            let row_with_aliases = format!("| {} (", key.to_lowercase());
            assert!(
                part.lines().any(|l| {
                    let l = l.to_lowercase();
                    l.starts_with(&row) || l.starts_with(&row_with_aliases)
                }),
                "docs/conference-md.md's `## {section}` has no row for `{key}`"
            );
        }
    }
}

/// The text of `## heading`'s section in `text`, up to the next `## `.
fn section_text<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("no `## {heading}`"));
    let body = &text[start + 1..];
    let end = body[3..].find("\n## ").map_or(body.len(), |e| e + 3);
    &body[..end]
}

/// The README's conference.md example is what a newcomer copies on the first evening: its
/// sections, pasted under the walkthrough fixture's head as written (with the fixture's agent in
/// place of `claude`, which a test machine may not have), must run.
#[test]
fn the_readmes_example_sections_run_as_written() {
    let readme = read(Path::new("README.md"));
    let start = readme
        .find("```markdown\n## Search Space\n")
        .expect("the README's example of the sections the walkthrough adds");
    let block = &readme[start + "```markdown\n".len()..];
    let example = &block[..block.find("```").unwrap()];
    let agent_line = "- command: claude\n";
    assert!(example.contains(agent_line), "{example}");
    let example = example.replace(agent_line, "- command: ./agent.sh\n");
    let fixture =
        std::fs::read_to_string(root().join("fixtures/autoresearch/conference.md")).unwrap();
    let head = &fixture[..fixture.find("## Search Space\n").unwrap()];
    let config = format!(
        "{head}## Search Space Partitioning\n**Strategy:** free\n\n## Constraints\n\
         - **Max total iterations:** 2\n\n{example}"
    );
    let repo = TestRepo::from_fixture("autoresearch");
    let run = repo.start("readme", &config);
    assert_eq!(run.code, 0, "{config}\n{}", run.stderr);
}
