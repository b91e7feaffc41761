//! Reading conference.md into a [`Document`]: sections, settings and text, each with its line.
//!
//! This is the markdown half of configuration. It knows the seed template's layout (which sections
//! exist, which keys each holds, bold or plain spelling) but not what the values mean; that is
//! `validate`'s job. Keeping every line number here is what lets each error point at the line to fix.
//! An unknown section or key is reported with the valid names, never skipped.

use super::sections::{
    elsewhere, find_key, normalize, section_kind, spec, Body, KeySpec, SectionKind, SectionSpec,
    SECTIONS,
};
use super::{ConfigError, Located};

/// A parsed conference.md, before its values are checked.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// From `# Conference: <Title>` (or a plain `# <Title>`).
    pub title: Option<Located<String>>,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone)]
pub struct Section {
    pub kind: SectionKind,
    /// The heading as written.
    pub heading: String,
    pub line: usize,
    pub settings: Vec<Setting>,
    /// Text sections: the prose lines (blank lines kept as ""). Bullet sections: one item per line.
    pub lines: Vec<Located<String>>,
    /// `### ...` sub-sections (Search Space Partitioning's focus sections).
    pub subsections: Vec<Subsection>,
}

#[derive(Debug, Clone)]
pub struct Setting {
    /// The key's template spelling (`KeySpec::name`).
    pub key: &'static str,
    /// The key as written in the file.
    pub written: String,
    /// The whole rest of the line, trimmed (one pair of enclosing backticks removed).
    pub value: String,
    pub line: usize,
    /// For list keys: the bullet items that follow.
    pub items: Vec<Located<String>>,
}

impl Setting {
    /// This value cannot be used: the error names its line, the line as written and `what`, with
    /// the key's example (a key of section `kind`) as the fix.
    pub fn unusable(&self, kind: SectionKind, what: String) -> ConfigError {
        ConfigError {
            line: self.line,
            message: format!("`{}: {}` — {what}", self.written, self.value),
            hint: super::sections::key_spec(kind, self.key)
                .example
                .to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Subsection {
    pub heading: String,
    /// `Researcher B Focus` → `B`.
    pub researcher: Option<String>,
    pub line: usize,
    pub lines: Vec<Located<String>>,
}

impl Document {
    pub fn section(&self, kind: SectionKind) -> Option<&Section> {
        self.sections.iter().find(|s| s.kind == kind)
    }
    /// The setting `key` (template spelling) of section `kind`, if written.
    pub fn setting(&self, kind: SectionKind, key: &str) -> Option<&Setting> {
        self.section(kind)?.setting(key)
    }
}

impl Section {
    pub fn setting(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.key == key)
    }
    /// The prose lines joined and trimmed.
    pub fn text(&self) -> String {
        join_text(&self.lines)
    }
}

impl Subsection {
    pub fn text(&self) -> String {
        join_text(&self.lines)
    }
}

fn join_text(lines: &[Located<String>]) -> String {
    lines
        .iter()
        .map(|l| l.value.as_str())
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// One physical line of the file, with HTML comments removed.
#[derive(Debug)]
pub(crate) struct RawLine<'a> {
    /// 1-based.
    pub number: usize,
    /// Byte offset of the line's start in the text.
    pub start: usize,
    /// Byte offset just past the line's terminator.
    pub end: usize,
    /// The line without its terminator.
    pub raw: &'a str,
    /// `raw` without `<!-- ... -->` parts (verbatim inside code fences).
    pub visible: String,
    /// Inside a ``` fence (fence lines included).
    pub in_fence: bool,
}

impl RawLine<'_> {
    /// The line had content, all of it commentary.
    pub fn comment_only(&self) -> bool {
        self.visible.trim().is_empty() && !self.raw.trim().is_empty()
    }
    /// `(level, text)` for an ATX heading outside code fences.
    pub fn heading(&self) -> Option<(usize, &str)> {
        if self.in_fence {
            return None;
        }
        heading(&self.visible)
    }
}

fn heading(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    let rest = &trimmed[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    let text = match text.trim_end_matches('#') {
        t if t.len() < text.len() && (t.is_empty() || t.ends_with(' ')) => t.trim_end(),
        _ => text,
    };
    Some((level, text))
}

/// Split `text` into lines, tracking HTML comments across lines and code fences.
pub(crate) fn scan(text: &str) -> Vec<RawLine<'_>> {
    let mut out = Vec::new();
    let mut in_comment = false;
    let mut in_fence = false;
    let mut start = 0;
    for (index, piece) in text.split_inclusive('\n').enumerate() {
        let raw = piece
            .strip_suffix('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .unwrap_or(piece);
        let end = start + piece.len();
        let fence_line = !in_comment && {
            let t = raw.trim_start();
            t.starts_with("```") || t.starts_with("~~~")
        };
        let visible = if in_fence || fence_line {
            raw.to_string()
        } else {
            strip_comments(raw, &mut in_comment)
        };
        out.push(RawLine {
            number: index + 1,
            start,
            end,
            raw,
            visible,
            in_fence: in_fence || fence_line,
        });
        if fence_line {
            in_fence = !in_fence;
        }
        start = end;
    }
    out
}

fn strip_comments(line: &str, in_comment: &mut bool) -> String {
    let mut visible = String::new();
    let mut rest = line;
    loop {
        if *in_comment {
            match rest.find("-->") {
                Some(i) => {
                    rest = &rest[i + 3..];
                    *in_comment = false;
                }
                None => return visible,
            }
        } else {
            match rest.find("<!--") {
                Some(i) => {
                    visible.push_str(&rest[..i]);
                    rest = &rest[i + 4..];
                    *in_comment = true;
                }
                None => {
                    visible.push_str(rest);
                    return visible;
                }
            }
        }
    }
}

/// A template placeholder such as `(filled in by the conference ...)` or the original template's
/// unfilled `{Describe the baseline.}`: a line wholly in parentheses or braces.
pub(crate) fn is_placeholder(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 2
        && ((t.starts_with('(') && t.ends_with(')')) || (t.starts_with('{') && t.ends_with('}')))
}

/// `---`, `***`, `___`: a horizontal rule.
fn is_rule(line: &str) -> bool {
    let t: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|c| t.chars().all(|x| x.to_string() == *c))
}

/// The text after a bullet marker (`- `, `* `, `+ `), if the line is a bullet.
fn bullet(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t
        .strip_prefix('-')
        .or_else(|| t.strip_prefix('*'))
        .or_else(|| t.strip_prefix('+'))?;
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then(|| rest.trim())
}

/// A `key: value` line, bold (`- **Key:** value`, `**Key**: value`) or plain (`- key: value`).
struct RawSetting<'a> {
    key: &'a str,
    value: &'a str,
    bold: bool,
}

fn split_setting(line: &str) -> Option<RawSetting<'_>> {
    let body = bullet(line).unwrap_or_else(|| line.trim());
    if let Some(rest) = body.strip_prefix("**") {
        let close = rest.find("**")?;
        let inner = rest[..close].trim();
        let after = &rest[close + 2..];
        let (key, value) = if let Some(k) = inner.strip_suffix(':') {
            (k.trim(), after)
        } else {
            (inner, after.trim_start().strip_prefix(':')?)
        };
        return Some(RawSetting {
            key,
            value: value.trim(),
            bold: true,
        });
    }
    let colon = body.find(':')?;
    let key = body[..colon].trim();
    let plausible = key.len() <= 40
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || " _-/'".contains(c));
    plausible.then(|| RawSetting {
        key,
        value: body[colon + 1..].trim(),
        bold: false,
    })
}

/// A plain `key: value` bullet rather than a path: a key of words (no `/` or `.`, which paths
/// have) and a value after the colon.
fn looks_like_setting(raw: &RawSetting) -> bool {
    !raw.value.is_empty() && !raw.key.contains(['/', '.'])
}

/// Remove one pair of enclosing backticks: `` `./eval.sh` `` → `./eval.sh`.
pub(crate) fn unquote(value: &str) -> &str {
    let v = value.trim();
    match v.strip_prefix('`').and_then(|x| x.strip_suffix('`')) {
        Some(inner) if !inner.contains('`') => inner.trim(),
        _ => v,
    }
}

/// Parse conference.md; any error found while reading fails the parse.
pub fn parse(text: &str) -> Result<Document, Vec<ConfigError>> {
    let (doc, errors) = read(text);
    if errors.is_empty() {
        Ok(doc)
    } else {
        Err(errors)
    }
}

/// Read conference.md as far as possible, returning the document and every problem found.
pub fn read(text: &str) -> (Document, Vec<ConfigError>) {
    let mut reader = Reader::default();
    for line in scan(text) {
        reader.line(&line);
    }
    (reader.doc, reader.errors)
}

#[derive(Default)]
struct Reader {
    doc: Document,
    errors: Vec<ConfigError>,
    /// Inside an unknown section: its lines are skipped (the heading is already reported).
    skipping: bool,
    /// Index of the open list setting in the current section, receiving bullet items.
    open_list: Option<usize>,
}

impl Reader {
    fn error(&mut self, line: usize, message: String, hint: String) {
        self.errors.push(ConfigError {
            line,
            message,
            hint,
        });
    }

    fn line(&mut self, line: &RawLine) {
        if line.comment_only() {
            return;
        }
        if let Some((level, text)) = line.heading() {
            return self.heading(line.number, level, text, &line.visible);
        }
        if self.skipping {
            return;
        }
        let Some(section) = self.doc.sections.last() else {
            // Text before the first section (an introduction) is not configuration.
            return;
        };
        let content = line.visible.trim_end();
        if line.in_fence {
            if section.kind != SectionKind::ConferenceLog {
                self.text_line(line.number, content);
            }
            return;
        }
        if is_placeholder(bullet(content).unwrap_or(content)) || is_rule(content) {
            return;
        }
        let spec = spec(section.kind);
        match spec.body {
            Body::Ignored => {}
            Body::Bullets => {
                if !content.trim().is_empty() {
                    let item = bullet(content).unwrap_or_else(|| content.trim());
                    self.push_line(line.number, item.to_string());
                }
            }
            Body::Text => {
                match split_setting(content).and_then(|s| Some((find_key(spec, s.key)?, s))) {
                    Some((key, raw)) => self.setting(line.number, key, &raw),
                    None => self.text_line(line.number, content),
                }
            }
            Body::Settings => self.settings_line(line.number, spec, content),
        }
    }

    fn heading(&mut self, number: usize, level: usize, text: &str, visible: &str) {
        self.open_list = None;
        match level {
            1 => self.title(number, text),
            2 => {
                self.skipping = false;
                match section_kind(text) {
                    Some(kind) => {
                        if let Some(first) = self.doc.section(kind) {
                            let message = format!(
                                "section `## {text}` appears twice (first at line {})",
                                first.line
                            );
                            self.error(number, message, "merge the two sections into one".into());
                            self.skipping = true;
                            return;
                        }
                        self.doc.sections.push(Section {
                            kind,
                            heading: text.to_string(),
                            line: number,
                            settings: Vec::new(),
                            lines: Vec::new(),
                            subsections: Vec::new(),
                        });
                    }
                    None => {
                        let names: Vec<&str> = SECTIONS.iter().map(|s| s.name).collect();
                        let message = format!("unknown section `## {text}`");
                        let hint = suggest(text, &names, "sections");
                        self.error(number, message, hint);
                        self.skipping = true;
                    }
                }
            }
            _ => self.subheading(number, text, visible),
        }
    }

    fn title(&mut self, number: usize, text: &str) {
        let title = match text.split_once(':') {
            Some((prefix, rest)) if normalize(prefix) == "conference" => rest.trim(),
            _ => text,
        };
        if let Some(first) = &self.doc.title {
            let message = format!("a second title line (the first is at line {})", first.line);
            let hint = "keep one `# Conference: <Title>` line; use `## ` for sections".into();
            self.error(number, message, hint);
        } else {
            self.doc.title = Some(Located {
                value: title.to_string(),
                line: number,
            });
        }
    }

    fn subheading(&mut self, number: usize, text: &str, visible: &str) {
        if self.skipping {
            return;
        }
        let Some(section) = self.doc.sections.last() else {
            return;
        };
        match spec(section.kind).body {
            Body::Ignored => {}
            Body::Text => self.push_line(number, visible.trim_end().to_string()),
            _ if section.kind == SectionKind::Partitioning => {
                let researcher = focus_id(text);
                if researcher.is_none() {
                    let message = format!("`### {text}` is not a researcher focus section");
                    let hint = "### Researcher A Focus".to_string();
                    self.error(number, message, hint);
                }
                if let Some(section) = self.doc.sections.last_mut() {
                    section.subsections.push(Subsection {
                        heading: text.to_string(),
                        researcher,
                        line: number,
                        lines: Vec::new(),
                    });
                }
            }
            _ => {
                let message = format!(
                    "sub-heading `### {text}` is not allowed in `## {}`",
                    section.heading
                );
                let hint =
                    "write settings as `- **Key:** value` lines; commentary goes in <!-- -->"
                        .to_string();
                self.error(number, message, hint);
            }
        }
    }

    fn settings_line(&mut self, number: usize, spec: &'static SectionSpec, content: &str) {
        if content.trim().is_empty() {
            return;
        }
        let in_focus = self
            .doc
            .sections
            .last()
            .is_some_and(|s| !s.subsections.is_empty());
        let raw = split_setting(content);
        let known = raw.as_ref().and_then(|r| find_key(spec, r.key));
        // Under a list key, bullets are items unless they name one of this section's keys, or
        // are a `key: value` setting under a list of paths (`- prune: on` below `- frozen:` is
        // an unknown key, not a path; Search Space items may be prose such as `- Model: …`).
        if let (Some(list), Some(item), None) = (self.open_list, bullet(content), known) {
            let setting = raw.as_ref().is_some_and(|r| {
                r.bold || (spec.kind != SectionKind::SearchSpace && looks_like_setting(r))
            });
            if !setting {
                if let Some(setting) = self
                    .doc
                    .sections
                    .last_mut()
                    .and_then(|s| s.settings.get_mut(list))
                {
                    setting.items.push(Located {
                        value: unquote(item).to_string(),
                        line: number,
                    });
                }
                return;
            }
        }
        if in_focus && known.is_none() {
            self.text_line(number, content);
            return;
        }
        match (raw, known) {
            (Some(raw), Some(key)) => self.setting(number, key, &raw),
            (Some(raw), None) => {
                let names: Vec<&str> = spec.keys.iter().map(|k| k.name).collect();
                let message = format!("unknown key `{}` in `## {}`", raw.key, spec.name);
                let hint = match elsewhere(raw.key) {
                    // A key of another section, written under the wrong heading.
                    Some((section, key)) => {
                        format!("move it under `## {}`: {}", section.name, key.example)
                    }
                    None => suggest(raw.key, &names, "keys here"),
                };
                self.error(number, message, hint);
            }
            (None, _) => {
                let message = format!(
                    "`{}` is not a setting (`## {}` holds `key: value` lines)",
                    content.trim(),
                    spec.name
                );
                let example = spec.keys.first().map_or("", |k| k.example);
                let hint = format!("{example}   — put commentary in <!-- -->");
                self.error(number, message, hint);
            }
        }
    }

    fn setting(&mut self, number: usize, key: &'static KeySpec, raw: &RawSetting) {
        let Some(section) = self.doc.sections.last_mut() else {
            return;
        };
        if let Some(first) = section.setting(key.name) {
            let message = format!(
                "`{}` is set twice in `## {}` (first at line {})",
                key.name, section.heading, first.line
            );
            let hint = format!("keep one line: {}", key.example);
            self.error(number, message, hint);
            return;
        }
        section.settings.push(Setting {
            key: key.name,
            written: raw.key.to_string(),
            value: unquote(raw.value).to_string(),
            line: number,
            items: Vec::new(),
        });
        self.open_list = key.list.then(|| section.settings.len() - 1);
    }

    fn text_line(&mut self, number: usize, content: &str) {
        let Some(section) = self.doc.sections.last() else {
            return;
        };
        if spec(section.kind).body == Body::Settings && section.subsections.is_empty() {
            return self.settings_line(number, spec(section.kind), content);
        }
        self.push_line(number, content.to_string());
    }

    fn push_line(&mut self, number: usize, value: String) {
        let Some(section) = self.doc.sections.last_mut() else {
            return;
        };
        let line = Located {
            value,
            line: number,
        };
        match section.subsections.last_mut() {
            Some(sub) if spec(section.kind).body != Body::Text => sub.lines.push(line),
            _ => section.lines.push(line),
        }
    }
}

/// `Researcher B Focus` (also `Researcher B`, `Researcher B Focus: caching`) → `B`.
fn focus_id(heading: &str) -> Option<String> {
    let mut words = heading.split_whitespace();
    if normalize(words.next()?) != "researcher" {
        return None;
    }
    let id = words
        .next()?
        .trim_end_matches([':', '-', '—'])
        .to_ascii_uppercase();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_uppercase())).then_some(id)
}

/// A hint listing the valid names, with the closest one first when it is close.
pub(crate) fn suggest(written: &str, names: &[&str], what: &str) -> String {
    let n = normalize(written);
    let closest = names
        .iter()
        .map(|name| (distance(&n, &normalize(name)), *name))
        .min();
    let list = names.join(", ");
    match closest {
        Some((d, name)) if d <= 3.max(n.len() / 3) => {
            format!("did you mean `{name}`? valid {what}: {list}")
        }
        _ => format!("valid {what}: {list}"),
    }
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(current + 1);
            prev = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests;
