//! The repository-wide knowledge store's entries (DESIGN.md §10, seed 003's learning layer):
//! what one conference learned, kept so that the next one knows it. An entry is a *pattern* (a
//! validated change that knowledge transfer put on best, with its measured gain) or an *error*
//! (a kind of failure, with how often it happened and an example).
//!
//! An entry is plain text a person reads and edits: `key: value` lines, then a blank line, then
//! free prose (a retrospective command's commentary, or a person's notes). Its id is its file's
//! name without `.md`. Parsing never guesses: an unknown key, a value that is not a number where
//! one is needed, or a missing key is an error with its line.
//!
//! The brief a new conference's researchers read is chosen here too: the top 3 patterns and top
//! 3 errors by keyword overlap with the new conference's goal, metric and allowed files
//! ([`score`]), within [`BRIEF_TOKENS`] tokens as [`tokens`] counts them.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::CommitId;

/// The most tokens the brief may take in a prompt (seed 003's cap).
pub const BRIEF_TOKENS: usize = 500;

/// Entries of each kind a brief holds at most.
pub const BRIEF_TOP: usize = 3;

/// The longest one entry's line in a brief may be, in characters (so that one long description
/// cannot crowd out the others).
const BRIEF_LINE_CHARS: usize = 320;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pattern,
    Error,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Pattern => "pattern",
            Kind::Error => "error",
        }
    }
}

/// One entry of the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: String,
    pub kind: Kind,
    /// The conference it came from.
    pub conference: String,
    pub round: Option<u32>,
    pub researcher: Option<String>,
    pub metric: String,
    /// `minimize`, `maximize`, or empty (a qualitative conference).
    pub direction: String,
    /// The first line of the conference's goal.
    pub goal: String,
    pub files: Vec<String>,
    /// Pattern: the change's description. Error: what was tried (an example's description).
    pub change: String,
    /// Pattern: the gain review measured (positive is better, in either direction).
    pub gain: Option<f64>,
    /// Error: the kind of failure (`rejected: changes frozen path eval.sh`).
    pub reason: String,
    /// Error: the evaluation's own error line, when it printed one (`ValueError: b.txt holds
    /// 'boom', not a number`): why, where `reason` says what.
    pub error: String,
    /// Error: how many attempts failed so.
    pub count: Option<u32>,
    /// Error: one of them, with its round, researcher and full reason.
    pub example: String,
    /// Pattern: the commit on best (or the finding's snapshot); none for an error.
    pub commit: Option<CommitId>,
    /// Free text after the header (a retrospective's prose, a person's notes).
    pub prose: String,
}

impl Entry {
    pub fn new(id: &str, kind: Kind, conference: &str) -> Entry {
        Entry {
            id: id.to_string(),
            kind,
            conference: conference.to_string(),
            round: None,
            researcher: None,
            metric: String::new(),
            direction: String::new(),
            goal: String::new(),
            files: vec![],
            change: String::new(),
            gain: None,
            reason: String::new(),
            error: String::new(),
            count: None,
            example: String::new(),
            commit: None,
            prose: String::new(),
        }
    }
}

/// Whether two entries say the same: the same finding (its commit, else its change) or the
/// same kind of failure, of the same conference. A retrospective does not add what the store
/// already says.
pub fn same_knowledge(a: &Entry, b: &Entry) -> bool {
    a.kind == b.kind
        && a.conference == b.conference
        && match a.kind {
            Kind::Pattern if a.commit.is_some() || b.commit.is_some() => a.commit == b.commit,
            Kind::Pattern => a.change == b.change,
            Kind::Error => a.reason == b.reason,
        }
}

/// Whether an id can name a file in the store: what a conference name allows.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 120
        && !id.starts_with(['.', '-'])
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Keys an entry's header may hold, in the order they are written.
const KEYS: [&str; 15] = [
    "kind",
    "conference",
    "round",
    "researcher",
    "metric",
    "direction",
    "goal",
    "files",
    "change",
    "gain",
    "reason",
    "error",
    "count",
    "example",
    "commit",
];

/// One line breaks nothing: a value is kept on its line.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The entry as its file holds it.
pub fn render(e: &Entry) -> String {
    let mut s = String::new();
    let title = match e.kind {
        Kind::Pattern => &e.change,
        Kind::Error => &e.reason,
    };
    let _ = writeln!(s, "# {} {}: {}", e.kind.word(), e.id, flat(title));
    let mut put = |key: &str, value: String| {
        if !value.is_empty() {
            let _ = writeln!(s, "{key}: {}", flat(&value));
        }
    };
    put("kind", e.kind.word().into());
    put("conference", e.conference.clone());
    put("round", e.round.map(|r| r.to_string()).unwrap_or_default());
    put("researcher", e.researcher.clone().unwrap_or_default());
    put("metric", e.metric.clone());
    put("direction", e.direction.clone());
    put("goal", e.goal.clone());
    put("files", e.files.join(", "));
    put("change", e.change.clone());
    put("gain", e.gain.map(|g| g.to_string()).unwrap_or_default());
    put("reason", e.reason.clone());
    put("error", e.error.clone());
    put("count", e.count.map(|c| c.to_string()).unwrap_or_default());
    put("example", e.example.clone());
    put("commit", e.commit.as_deref().unwrap_or_default().into());
    if !e.prose.trim().is_empty() {
        let _ = write!(s, "\n{}\n", e.prose.trim());
    }
    s
}

/// What is wrong with an entry's text, and on which line (1-based).
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    pub line: usize,
    pub message: String,
}

fn malformed(line: usize, message: String) -> Malformed {
    Malformed { line, message }
}

/// Reads the entry `id` from its file's text.
pub fn parse(id: &str, text: &str) -> Result<Entry, Malformed> {
    let mut e = Entry::new(id, Kind::Pattern, "");
    let mut seen = BTreeSet::new();
    let mut lines = text.lines().enumerate();
    for (n, line) in lines.by_ref() {
        let t = line.trim();
        if t.is_empty() {
            break;
        }
        if t.starts_with('#') {
            continue;
        }
        let Some((key, value)) = t.split_once(':') else {
            return Err(malformed(
                n + 1,
                format!(
                    "`{t}` is not a `key: value` line (keys: {}; a blank line starts free text)",
                    KEYS.join(", ")
                ),
            ));
        };
        let key = key.trim().to_lowercase();
        if !seen.insert(key.clone()) {
            return Err(malformed(n + 1, format!("`{key}` is given twice")));
        }
        set(&mut e, &key, value.trim()).map_err(|m| malformed(n + 1, m))?;
    }
    e.prose = lines.map(|(_, l)| l).collect::<Vec<_>>().join("\n");
    e.prose = e.prose.trim().to_string();
    for key in required(e.kind) {
        if !seen.contains(*key) {
            return Err(malformed(
                1,
                format!("`{key}:` is missing (write e.g. `{key}: …` in the header)"),
            ));
        }
    }
    Ok(e)
}

/// The keys an entry of `kind` must have.
fn required(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Pattern => &["kind", "conference", "change"],
        Kind::Error => &["kind", "conference", "reason"],
    }
}

/// Sets one header key; Err: what is wrong with it.
fn set(e: &mut Entry, key: &str, v: &str) -> Result<(), String> {
    let number = |what: &str| format!("`{key}: {v}` is not {what}");
    match key {
        "kind" => {
            e.kind = match v {
                "pattern" => Kind::Pattern,
                "error" => Kind::Error,
                _ => return Err(format!("`kind: {v}` must be `pattern` or `error`")),
            }
        }
        "conference" => e.conference = v.to_string(),
        "round" => e.round = Some(v.parse().map_err(|_| number("a round number"))?),
        "researcher" => e.researcher = Some(v.to_string()),
        "metric" => e.metric = v.to_string(),
        "direction" => e.direction = v.to_string(),
        "goal" => e.goal = v.to_string(),
        "files" => {
            e.files = v
                .split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect()
        }
        "change" => e.change = v.to_string(),
        "gain" => {
            let g: f64 = v.parse().map_err(|_| number("a number"))?;
            e.gain = Some(g).filter(|g| g.is_finite());
        }
        "reason" => e.reason = v.to_string(),
        "error" => e.error = v.to_string(),
        "count" => e.count = Some(v.parse().map_err(|_| number("a count"))?),
        "example" => e.example = v.to_string(),
        "commit" if v.is_empty() => e.commit = None,
        "commit" => {
            let id = CommitId::try_from(v).map_err(|_| {
                format!("`commit: {v}` is not a full commit id (write it whole, as `git rev-parse` prints it, or leave the line out)")
            })?;
            e.commit = Some(id);
        }
        _ => {
            return Err(format!(
                "unknown key `{key}` (keys: {}; a blank line starts free text)",
                KEYS.join(", ")
            ))
        }
    }
    Ok(())
}

/// Words too common to say anything about relevance.
const STOPWORDS: [&str; 40] = [
    "the", "and", "for", "with", "that", "this", "from", "into", "its", "are", "was", "were",
    "not", "but", "all", "any", "can", "has", "have", "had", "out", "our", "your", "their", "them",
    "then", "than", "which", "when", "what", "who", "how", "make", "more", "less", "only", "each",
    "per", "via", "use",
];

/// The keywords of a text: lowercase words of three or more letters or digits that are not
/// [`STOPWORDS`]. A path-like token (holding `/` or `.`) counts whole, by its file name, and by
/// the words of its folders and its file name's stem, never by its extension (`src/train.py`
/// gives `src/train.py`, `train.py`, `src`, `train`): two projects sharing `.txt` files are
/// not related for that.
pub fn keywords(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let words = |part: &str, out: &mut BTreeSet<String>| {
        for word in part.split(|c: char| !c.is_alphanumeric()) {
            if word.chars().count() >= 3 && !STOPWORDS.contains(&word) {
                out.insert(word.to_string());
            }
        }
    };
    for token in text.split(|c: char| c.is_whitespace() || ",;()[]{}`'\"".contains(c)) {
        let token = token
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        if !token.contains(['/', '.']) {
            words(&token, &mut out);
            continue;
        }
        out.insert(token.clone());
        let (folders, name) = token.rsplit_once('/').unwrap_or(("", &token));
        out.insert(name.to_string());
        words(folders, &mut out);
        words(
            name.rsplit_once('.').map_or(name, |(stem, _)| stem),
            &mut out,
        );
    }
    out
}

/// What a new conference looks for in the store.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    /// The new conference itself: its own entries are never briefed to it.
    pub conference: String,
    /// Keywords of its goal, metric name and allowed changes.
    pub keywords: BTreeSet<String>,
    pub metric: String,
    /// Its allowed changes, as written (file names and patterns).
    pub files: Vec<String>,
}

impl Wanted {
    pub fn new(conference: &str, goal: &str, metric: &str, allowed: &[String]) -> Wanted {
        let mut keywords = keywords(goal);
        keywords.extend(keywords_of_all(std::iter::once(metric)));
        keywords.extend(keywords_of_all(allowed.iter().map(String::as_str)));
        Wanted {
            conference: conference.to_string(),
            keywords,
            metric: metric.to_string(),
            files: allowed.to_vec(),
        }
    }
}

fn keywords_of_all<'a>(texts: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    texts.flat_map(keywords).collect()
}

/// An entry's relevance to what is wanted: the number of keywords the entry (its goal, metric,
/// files, change and reason) shares with the new conference's goal, metric and
/// allowed changes, plus 2 when the metric is the same name and 2 for each of the entry's files
/// that the new conference's allowed changes name. 0: not relevant (never briefed).
pub fn score(e: &Entry, wanted: &Wanted) -> u32 {
    let text = [
        e.goal.as_str(),
        &e.metric,
        &e.files.join(" "),
        &e.change,
        &e.reason,
    ]
    .join(" ");
    let shared = keywords(&text).intersection(&wanted.keywords).count() as u32;
    if shared == 0 {
        return 0;
    }
    let same_metric = !e.metric.is_empty() && e.metric.eq_ignore_ascii_case(&wanted.metric);
    let files = e
        .files
        .iter()
        .filter(|f| wanted.files.iter().any(|a| names_file(a, f)))
        .count() as u32;
    shared + 2 * u32::from(same_metric) + 2 * files
}

/// Whether an allowed-changes line names `file` (the file itself, or a word of the line).
fn names_file(allowed: &str, file: &str) -> bool {
    allowed.trim() == file
        || allowed
            .split(|c: char| c.is_whitespace() || ",;()`".contains(c))
            .any(|w| w == file)
}

/// A gain as people read it: at most 6 decimals, no trailing zeros (`0.3`, not
/// `0.30000000000000004`); tiny values in scientific notation.
pub fn short_number(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-4 {
        return format!("{v:.3e}");
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A conservative count of the tokens a text takes: one per four characters, rounded up (an
/// English tokenizer averages about four characters a token; code and numbers take more
/// tokens per character, prose fewer).
pub fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The brief a conference's researchers read, and which entries it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Brief {
    pub ids: Vec<String>,
    pub text: String,
}

/// The top [`BRIEF_TOP`] patterns and errors by [`score`] (ties: the larger gain or count,
/// then the id), without `wanted.conference`'s own, within [`BRIEF_TOKENS`]: when the lines do
/// not fit, the lowest-ranked go first (the third error, the third pattern, the second error…).
/// None when nothing is relevant.
pub fn brief(entries: &[Entry], wanted: &Wanted) -> Option<Brief> {
    let patterns = top(entries, wanted, Kind::Pattern);
    let errors = top(entries, wanted, Kind::Error);
    // Priority order: P1, E1, P2, E2, P3, E3.
    let mut ranked: Vec<&Entry> = Vec::new();
    for i in 0..BRIEF_TOP {
        ranked.extend(patterns.get(i).copied());
        ranked.extend(errors.get(i).copied());
    }
    while !ranked.is_empty() {
        let text = brief_text(&ranked);
        if tokens(&text) <= BRIEF_TOKENS {
            return Some(Brief {
                ids: ranked.iter().map(|e| e.id.clone()).collect(),
                text,
            });
        }
        ranked.pop();
    }
    None
}

/// The relevant entries of `kind`, best first, at most [`BRIEF_TOP`].
fn top<'a>(entries: &'a [Entry], wanted: &Wanted, kind: Kind) -> Vec<&'a Entry> {
    let mut scored: Vec<(u32, &Entry)> = entries
        .iter()
        .filter(|e| e.kind == kind && e.conference != wanted.conference)
        .map(|e| (score(e, wanted), e))
        .filter(|(s, _)| *s > 0)
        .collect();
    let weight = |e: &Entry| e.gain.unwrap_or(0.0).max(e.count.unwrap_or(0) as f64);
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.cmp(sa)
            .then(weight(b).total_cmp(&weight(a)))
            .then(a.id.cmp(&b.id))
    });
    scored.into_iter().take(BRIEF_TOP).map(|(_, e)| e).collect()
}

/// The brief's text: patterns, then errors, one line each.
fn brief_text(ranked: &[&Entry]) -> String {
    let mut s = String::from(
        "These come from earlier conferences on this repository (`git conference knowledge show ID`).\n",
    );
    for (kind, heading) in [
        (Kind::Pattern, "Worked before (validated, on best):"),
        (Kind::Error, "Failed before (avoid):"),
    ] {
        let lines: Vec<String> = ranked
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| brief_line(e))
            .collect();
        if !lines.is_empty() {
            let _ = writeln!(s, "{heading}");
            lines.iter().for_each(|l| {
                let _ = writeln!(s, "{l}");
            });
        }
    }
    s
}

/// One entry in a brief: `- [id] what (where, how much)`, cut to [`BRIEF_LINE_CHARS`].
fn brief_line(e: &Entry) -> String {
    let files = if e.files.is_empty() {
        String::new()
    } else {
        format!("; files {}", e.files.join(", "))
    };
    let line = match e.kind {
        Kind::Pattern => format!(
            "- [{}] {} (conference {}{}, {} {}{}{files})",
            e.id,
            flat(&e.change),
            e.conference,
            e.round.map(|r| format!(" round {r}")).unwrap_or_default(),
            e.metric,
            e.direction,
            e.gain
                .map(|g| format!(", gain {}", short_number(g)))
                .unwrap_or_default(),
        ),
        Kind::Error => format!(
            "- [{}] {}{} ({} attempt(s) in conference {}{files}){}",
            e.id,
            flat(&e.reason),
            if e.error.is_empty() {
                String::new()
            } else {
                format!(" — {}", flat(&e.error))
            },
            e.count.unwrap_or(1),
            e.conference,
            if e.change.is_empty() {
                String::new()
            } else {
                format!("; tried: {}", flat(&e.change))
            }
        ),
    };
    if line.chars().count() <= BRIEF_LINE_CHARS {
        return line;
    }
    let cut: String = line.chars().take(BRIEF_LINE_CHARS - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(id: &str, conference: &str, change: &str, files: &[&str]) -> Entry {
        let mut e = Entry::new(id, Kind::Pattern, conference);
        e.change = change.into();
        e.metric = "val_loss".into();
        e.direction = "minimize".into();
        e.goal = "Lower the validation loss of the model.".into();
        e.files = files.iter().map(|f| f.to_string()).collect();
        e.gain = Some(0.05);
        e.round = Some(2);
        e
    }

    #[test]
    fn an_entry_reads_back_as_written() {
        let mut e = pattern(
            "tok-p2-A",
            "tok",
            "lower lr\nto 1e-4",
            &["train.py", "cfg/a.toml"],
        );
        e.prose = "It held on the hold-out set.\n\nSecond paragraph.".into();
        let text = render(&e);
        assert!(
            text.starts_with("# pattern tok-p2-A: lower lr to 1e-4\nkind: pattern\n"),
            "{text}"
        );
        let back = parse("tok-p2-A", &text).unwrap();
        assert_eq!(back.change, "lower lr to 1e-4");
        assert_eq!(back.files, e.files);
        assert_eq!(back.prose, e.prose);
        assert_eq!(back.gain, Some(0.05));
        let mut err = Entry::new("tok-e1", Kind::Error, "tok");
        err.reason = "rejected: changes frozen path eval.sh".into();
        err.count = Some(4);
        err.error = "ValueError: b.txt holds 'boom', not a number".into();
        assert_eq!(parse("tok-e1", &render(&err)).unwrap(), err);
    }

    #[test]
    fn malformed_entries_name_their_line() {
        let text = "kind: pattern\nconference: tok\nchange: x\ngain: lots\n";
        let m = parse("x", text).unwrap_err();
        assert_eq!(m.line, 4);
        assert!(m.message.contains("`gain: lots` is not a number"), "{m:?}");
        let m = parse("x", "kind: pattern\nconference: tok\nflavour: mint\n").unwrap_err();
        assert_eq!(
            (m.line, m.message.contains("unknown key `flavour`")),
            (3, true)
        );
        let m = parse("x", "kind: error\nconference: tok\n").unwrap_err();
        assert!(m.message.contains("`reason:` is missing"), "{m:?}");
        let m = parse("x", "just words\n").unwrap_err();
        assert_eq!(m.line, 1);
        let m = parse(
            "x",
            "kind: pattern\nconference: tok\ncommit: 8b8fd98\nchange: x\n",
        );
        let m = m.unwrap_err();
        assert_eq!(m.line, 3);
        assert!(
            m.message
                .contains("`commit: 8b8fd98` is not a full commit id"),
            "{m:?}"
        );
    }

    #[test]
    fn a_commit_reads_back_as_written_and_an_empty_one_is_none() {
        let full = "8b8fd983711f6567b497af6f78ba433bf5ead884";
        let text = format!("kind: pattern\nconference: tok\nchange: x\ncommit: {full}\n");
        let e = parse("x", &text).unwrap();
        assert_eq!(e.commit.as_deref(), Some(full));
        assert_eq!(parse("x", &render(&e)).unwrap(), e);
        let e = parse("x", "kind: pattern\nconference: tok\nchange: x\ncommit:\n").unwrap();
        assert_eq!(e.commit, None);
        assert!(!render(&e).contains("commit"));
    }

    #[test]
    fn relevance_is_keyword_overlap_with_metric_and_file_bonuses() {
        let e = pattern(
            "a",
            "old",
            "warmup schedule for the optimizer",
            &["train.py"],
        );
        let same = Wanted::new(
            "new",
            "Lower the validation loss.",
            "val_loss",
            &["train.py".into()],
        );
        let other = Wanted::new(
            "new",
            "Speed up the JSON parser.",
            "throughput",
            &["parser.c".into()],
        );
        // shared keywords: lower, validation, loss, val, train.py, train; + 2 (metric) + 2 (file)
        assert!(score(&e, &same) >= 8, "{}", score(&e, &same));
        assert_eq!(score(&e, &other), 0);
        assert!(brief(std::slice::from_ref(&e), &other).is_none());
        let own = Wanted {
            conference: "old".into(),
            ..same.clone()
        };
        assert!(
            brief(std::slice::from_ref(&e), &own).is_none(),
            "its own entries are not briefed"
        );
        let b = brief(&[e], &same).unwrap();
        assert_eq!(b.ids, vec!["a".to_string()]);
        assert!(b.text.contains("- [a] warmup schedule for the optimizer (conference old round 2, val_loss minimize, gain 0.05; files train.py)"), "{}", b.text);
    }

    #[test]
    fn a_thousand_entries_keep_the_brief_within_its_cap() {
        let long = "a very long description of a change to the learning rate schedule ".repeat(20);
        let mut entries: Vec<Entry> = (0..500)
            .map(|i| {
                pattern(
                    &format!("p{i:04}"),
                    "old",
                    &format!("{i} {long}"),
                    &["train.py"],
                )
            })
            .collect();
        entries.extend((0..500).map(|i| {
            let mut e = Entry::new(&format!("e{i:04}"), Kind::Error, "old");
            e.reason = format!("crashed: validation loss diverged {long}");
            e.metric = "val_loss".into();
            e.count = Some(i);
            e
        }));
        let wanted = Wanted::new(
            "new",
            "Lower the validation loss.",
            "val_loss",
            &["train.py".into()],
        );
        let b = brief(&entries, &wanted).unwrap();
        assert!(
            tokens(&b.text) <= BRIEF_TOKENS,
            "{} tokens",
            tokens(&b.text)
        );
        assert!(
            b.ids.len() >= 2 && b.ids.len() <= 2 * BRIEF_TOP,
            "{:?}",
            b.ids
        );
        assert_eq!(b.ids[1], "e0499", "the error seen most often ranks first");
        assert_eq!(short_number(0.1 + 0.2), "0.3");
        assert_eq!(short_number(1.0), "1");
        assert_eq!(short_number(-2.5e-7), "-2.500e-7");
        assert_eq!(tokens("abcd"), 1);
        assert_eq!(tokens("abcde"), 2);
    }
}
