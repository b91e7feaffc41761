//! Finding a SEARCH text in a file, tolerantly: models copy code with its trailing spaces lost
//! or its indentation shifted. Tried in order, first place wins: the exact text; then line by
//! line ignoring trailing whitespace; then ignoring indentation, the replacement re-indented by
//! the difference. When nothing matches, the reason names the file line closest to the SEARCH
//! text, so the re-ask can show the model what it got wrong.

/// How a SEARCH text was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Exact,
    TrailingWhitespace,
    Indentation,
}

/// `content` with the first match of `search` replaced by `replace`, and how it matched; Err
/// says why nothing matched.
pub fn replace(content: &str, search: &str, replace: &str) -> Result<(String, Tier), String> {
    if search.trim().is_empty() {
        return Err(
            "the SEARCH section is empty (only a new file may be created that way): \
                    quote the lines to change"
                .into(),
        );
    }
    if let Some(at) = content.find(search) {
        let mut out = String::with_capacity(content.len() + replace.len());
        out.push_str(&content[..at]);
        out.push_str(replace);
        out.push_str(&content[at + search.len()..]);
        return Ok((out, Tier::Exact));
    }
    let file: Vec<&str> = content.split_inclusive('\n').collect();
    let wanted: Vec<&str> = trim_blank_ends(search.lines().collect());
    let same_end = |a: &str, b: &str| a.trim_end() == b.trim_end();
    if let Some(at) = find_lines(&file, &wanted, same_end) {
        let new = replace.lines().map(str::to_string).collect();
        return Ok((
            splice(&file, at, wanted.len(), new),
            Tier::TrailingWhitespace,
        ));
    }
    let same_trimmed = |a: &str, b: &str| a.trim() == b.trim();
    if let Some(at) = find_lines(&file, &wanted, same_trimmed) {
        let first = wanted
            .iter()
            .position(|l| !l.trim().is_empty())
            .unwrap_or(0);
        let from = indent(wanted[first]);
        let to = indent(file[at + first]);
        let new = replace.lines().map(|l| reindent(l, from, to)).collect();
        return Ok((splice(&file, at, wanted.len(), new), Tier::Indentation));
    }
    Err(not_found(&file, &wanted))
}

fn trim_blank_ends(mut lines: Vec<&str>) -> Vec<&str> {
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let lead = lines.iter().take_while(|l| l.trim().is_empty()).count();
    lines.split_off(lead)
}

/// The first line of `file` where every line of `wanted` follows, compared with `same`.
fn find_lines(file: &[&str], wanted: &[&str], same: impl Fn(&str, &str) -> bool) -> Option<usize> {
    if wanted.is_empty() || wanted.len() > file.len() {
        return None;
    }
    (0..=file.len() - wanted.len()).find(|&at| {
        wanted
            .iter()
            .zip(&file[at..])
            .all(|(w, f)| same(w, f.trim_end_matches(['\n', '\r'])))
    })
}

/// `file` with `count` lines at `at` replaced by `new` (the last replaced line's newline kept).
fn splice(file: &[&str], at: usize, count: usize, new: Vec<String>) -> String {
    let mut out: String = file[..at].concat();
    let ends_with_newline = file[at + count - 1].ends_with('\n');
    let n = new.len();
    for (i, line) in new.into_iter().enumerate() {
        out.push_str(&line);
        if i + 1 < n || ends_with_newline {
            out.push('\n');
        }
    }
    out.push_str(&file[at + count..].concat());
    out
}

fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// `line` moved from indentation `from` to `to`.
fn reindent(line: &str, from: &str, to: &str) -> String {
    if line.trim().is_empty() {
        return String::new();
    }
    if let Some(rest) = line.strip_prefix(from) {
        return format!("{to}{rest}");
    }
    // Less indented than the SEARCH text's first line: keep the difference.
    let short = from.len().saturating_sub(indent(line).len());
    let keep = to.len().saturating_sub(short);
    format!("{}{}", &to[..keep], line.trim_start())
}

fn not_found(file: &[&str], wanted: &[&str]) -> String {
    let Some(first) = wanted.iter().find(|l| !l.trim().is_empty()) else {
        return "the SEARCH section is empty".into();
    };
    let closest = file
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let ratio = similar::TextDiff::from_chars(first.trim(), l.trim()).ratio();
            (ratio, i, l.trim_end())
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((ratio, i, line)) if ratio >= 0.5 => format!(
            "the SEARCH lines are not in the file (its line `{}` is closest to line {}: `{}`)",
            first.trim(),
            i + 1,
            line.trim()
        ),
        _ => format!(
            "the SEARCH lines are not in the file (nothing like `{}` in it)",
            first.trim()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// name, SEARCH, REPLACE, the file after (and how it matched) or a part of the reason.
    type Case<'a> = (&'a str, &'a str, &'a str, Result<(&'a str, Tier), &'a str>);

    #[test]
    fn tolerant_matching() {
        let file = "def f(x):\n    if x:\n        return 1   \n    return 0\n";
        let cases: &[Case] = &[
            (
                "exact",
                "    return 0\n",
                "    return 2\n",
                Ok((
                    "def f(x):\n    if x:\n        return 1   \n    return 2\n",
                    Tier::Exact,
                )),
            ),
            (
                "trailing whitespace lost",
                "    if x:\n        return 1\n",
                "    if x:\n        return 3\n",
                Ok((
                    "def f(x):\n    if x:\n        return 3\n    return 0\n",
                    Tier::TrailingWhitespace,
                )),
            ),
            (
                "indentation shifted: replacement re-indented",
                "if x:\n    return 1\n",
                "if x and x > 0:\n    return 1\nelse:\n  pass\n",
                Ok((
                    "def f(x):\n    if x and x > 0:\n        return 1\n    else:\n      pass\n    return 0\n",
                    Tier::Indentation,
                )),
            ),
            (
                "blank lines around the SEARCH text",
                "\n    return 0   \n\n",
                "    return 5\n",
                Ok((
                    "def f(x):\n    if x:\n        return 1   \n    return 5\n",
                    Tier::TrailingWhitespace,
                )),
            ),
            (
                "first of two places",
                "x",
                "y",
                Ok((
                    "def f(y):\n    if x:\n        return 1   \n    return 0\n",
                    Tier::Exact,
                )),
            ),
            (
                "not there: the closest line is named",
                "    return 9\n",
                "",
                Err("closest to line 4: `return 0`"),
            ),
            (
                "nothing alike",
                "import numpy as np\n",
                "",
                Err("nothing like `import numpy as np`"),
            ),
            ("empty", "", "x\n", Err("SEARCH section is empty")),
        ];
        for (name, search, new, expected) in cases {
            let got = replace(file, search, new);
            match (expected, got) {
                (Ok((text, tier)), Ok((got_text, got_tier))) => {
                    assert_eq!((got_text.as_str(), got_tier), (*text, *tier), "{name}")
                }
                (Err(needle), Err(e)) => assert!(e.contains(needle), "{name}: {e}"),
                (expected, got) => panic!("{name}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn a_file_without_a_final_newline() {
        let (text, tier) = replace("a = 1\nb = 2", "b = 2\n", "b = 3\n").unwrap();
        assert_eq!(
            (text.as_str(), tier),
            ("a = 1\nb = 3", Tier::TrailingWhitespace)
        );
    }
}
