//! Reading a model's answer into edits: aider-style SEARCH/REPLACE blocks (the file's path on the
//! line before `<<<<<<< SEARCH`, fenced or not) and whole-file rewrites (a path line, then the
//! complete content in a fenced block). Models decorate paths (`**train.py**`, `` `train.py`: ``,
//! `### File: train.py`) and wrap blocks in fences; the parser takes all of that. A block it
//! cannot read to its end is an error the model is told about, never guessed at.

/// One change the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Replace the first place `search` matches (see `matcher`) with `replace`. An empty `search`
    /// creates the file.
    Replace {
        path: String,
        search: String,
        replace: String,
    },
    /// The file's complete new content.
    Whole { path: String, content: String },
}

impl Edit {
    pub fn path(&self) -> &str {
        match self {
            Edit::Replace { path, .. } | Edit::Whole { path, .. } => path,
        }
    }
}

/// What an answer holds: its edits in order, and the one-line description it gave (`NOTE: …`).
#[derive(Debug, Default, PartialEq)]
pub struct Answer {
    pub edits: Vec<Edit>,
    pub note: Option<String>,
}

/// The edits of `answer`; Err says which block is malformed and how.
pub fn parse(answer: &str) -> Result<Answer, String> {
    let answer = without_thinking(answer);
    let lines: Vec<&str> = answer.lines().collect();
    let mut out = Answer::default();
    let mut last_path: Option<String> = None;
    // Inside a fence that wraps SEARCH/REPLACE blocks: its closing line closes it.
    let mut in_block_fence = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if out.note.is_none() {
            if let Some(note) = line.trim().strip_prefix("NOTE:") {
                out.note = Some(note.trim().to_string()).filter(|n| !n.is_empty());
            }
        }
        if is_search_start(line) {
            let path = path_before(&lines, i, true)
                .or_else(|| last_path.clone())
                .ok_or_else(|| {
                    format!(
                        "the SEARCH block at line {} of the answer names no file: write the \
                         file's path on the line before `<<<<<<< SEARCH`",
                        i + 1
                    )
                })?;
            let (edit, next) = read_block(&lines, i, &path)?;
            out.edits.push(edit);
            last_path = Some(path);
            i = next;
            continue;
        }
        if in_block_fence && is_fence_close(line, 3) {
            in_block_fence = false;
            i += 1;
            continue;
        }
        if let Some(ticks) = fence_open(line) {
            let close = (i + 1..lines.len()).find(|&j| is_fence_close(lines[j], ticks));
            let holds_blocks = lines[i + 1..close.unwrap_or(lines.len())]
                .iter()
                .any(|l| is_search_start(l));
            if holds_blocks {
                // A fence around SEARCH/REPLACE blocks: read the blocks inside.
                in_block_fence = true;
                i += 1;
                continue;
            }
            let Some(close) = close else { break };
            if let Some(path) = path_before(&lines, i, false) {
                let mut content = lines[i + 1..close].join("\n");
                content.push('\n');
                out.edits.push(Edit::Whole { path, content });
            }
            i = close + 1;
            continue;
        }
        i += 1;
    }
    Ok(out)
}

/// The answer without the reasoning some models put first (`<think>…</think>`): drafts there are
/// not edits.
fn without_thinking(answer: &str) -> &str {
    match answer.rfind("</think>") {
        Some(at) if answer.trim_start().starts_with("<think>") || !answer.contains("<think>") => {
            &answer[at + "</think>".len()..]
        }
        _ => answer,
    }
}

/// The block starting at `start` (`<<<<<<< SEARCH`) and the line after it.
fn read_block(lines: &[&str], start: usize, path: &str) -> Result<(Edit, usize), String> {
    let divider = (start + 1..lines.len())
        .find(|&j| is_divider(lines[j]))
        .filter(|&j| !lines[start + 1..j].iter().any(|l| is_search_start(l)))
        .ok_or_else(|| {
            format!("the SEARCH block for {path} has no `=======` line after its SEARCH lines")
        })?;
    let end = (divider + 1..lines.len())
        .find(|&j| is_replace_end(lines[j]))
        .filter(|&j| !lines[divider + 1..j].iter().any(|l| is_search_start(l)))
        .ok_or_else(|| {
            format!("the SEARCH block for {path} has no `>>>>>>> REPLACE` line after its new lines")
        })?;
    let text = |from: usize, to: usize| {
        let mut t = lines[from..to].join("\n");
        if to > from {
            t.push('\n');
        }
        t
    };
    let edit = Edit::Replace {
        path: path.to_string(),
        search: text(start + 1, divider),
        replace: text(divider + 1, end),
    };
    Ok((edit, end + 1))
}

fn marker_word(line: &str, c: char) -> Option<&str> {
    let t = line.trim();
    let rest = t.trim_start_matches(c);
    (t.len() - rest.len() >= 7).then(|| rest.trim())
}

fn is_search_start(line: &str) -> bool {
    marker_word(line, '<').is_some_and(|w| w.eq_ignore_ascii_case("SEARCH"))
}

fn is_divider(line: &str) -> bool {
    marker_word(line, '=') == Some("")
}

fn is_replace_end(line: &str) -> bool {
    marker_word(line, '>').is_some_and(|w| w.eq_ignore_ascii_case("REPLACE"))
}

/// A fence opener's backtick count.
fn fence_open(line: &str) -> Option<usize> {
    let t = line.trim_start();
    let ticks = t.len() - t.trim_start_matches('`').len();
    (ticks >= 3).then_some(ticks)
}

fn is_fence_close(line: &str, ticks: usize) -> bool {
    let t = line.trim();
    t.len() >= ticks && t.chars().all(|c| c == '`')
}

/// The path named on the nearest non-blank line before `at`; with `skip_fence`, a fence opener
/// right before `at` is passed over (a fenced SEARCH block).
fn path_before(lines: &[&str], at: usize, skip_fence: bool) -> Option<String> {
    let mut before = lines[..at].iter().rev().filter(|l| !l.trim().is_empty());
    let mut line = before.next()?;
    if skip_fence && fence_open(line).is_some() {
        line = before.next()?;
    }
    as_path(line, !skip_fence)
}

/// A path written on a line of its own, decorations removed. `strict` (whole-file blocks, where
/// any code block follows some line) wants a dot or slash in it, so `Example:` is not a file.
fn as_path(line: &str, strict: bool) -> Option<String> {
    let mut t = line.trim().trim_start_matches('#').trim();
    for prefix in [
        "File:",
        "file:",
        "FILE:",
        "Path:",
        "path:",
        "Filename:",
        "filename:",
    ] {
        if let Some(rest) = t.strip_prefix(prefix) {
            t = rest.trim();
        }
    }
    let t = t
        .trim_matches(|c| c == '*' || c == '`' || c == '"')
        .trim_end_matches(':')
        .trim_matches(|c| c == '*' || c == '`' || c == '"');
    let t = t.strip_prefix("./").unwrap_or(t);
    let plausible = !t.is_empty()
        && !t.contains(char::is_whitespace)
        && !t.starts_with(['<', '=', '>'])
        && !t.ends_with('.')
        && t.chars().any(|c| c.is_alphanumeric());
    let named = !strict || t.contains('.') || t.contains('/');
    (plausible && named).then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(path: &str, search: &str, replace: &str) -> Edit {
        Edit::Replace {
            path: path.into(),
            search: search.into(),
            replace: replace.into(),
        }
    }

    #[test]
    fn answers_and_their_edits() {
        let cases: &[(&str, &str, Vec<Edit>)] = &[
            (
                "plain block",
                "train.py\n<<<<<<< SEARCH\nlr = 0.5\n=======\nlr = 0.1\n>>>>>>> REPLACE\n",
                vec![replace("train.py", "lr = 0.5\n", "lr = 0.1\n")],
            ),
            (
                "fenced block with a decorated path",
                "Lower it.\n\n**src/train.py**\n```python\n<<<<<<< SEARCH\n    lr = 0.5\n=======\n    lr = 0.1\n>>>>>>> REPLACE\n```\n",
                vec![replace("src/train.py", "    lr = 0.5\n", "    lr = 0.1\n")],
            ),
            (
                "two blocks, the second reusing the path",
                "a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n<<<<<<< SEARCH\ny = 1\n=======\n>>>>>>> REPLACE\n",
                vec![replace("a.py", "x = 1\n", "x = 2\n"), replace("a.py", "y = 1\n", "")],
            ),
            (
                "empty SEARCH creates",
                "`new/util.py`:\n<<<<<<< SEARCH\n=======\ndef f():\n    pass\n>>>>>>> REPLACE",
                vec![replace("new/util.py", "", "def f():\n    pass\n")],
            ),
            (
                "whole file",
                "### File: train.py\n```python\nlr = 0.1\nepochs = 3\n```\n",
                vec![Edit::Whole {
                    path: "train.py".into(),
                    content: "lr = 0.1\nepochs = 3\n".into(),
                }],
            ),
            (
                "a code block after prose is not a file",
                "Example:\n```\nlr = 0.1\n```\nI think this helps.",
                vec![],
            ),
            ("prose only", "I would lower the learning rate.", vec![]),
            (
                "a draft in the model's reasoning is not an edit",
                "<think>\na.py\n```\ndraft\n```\n</think>\na.py\n```\nfinal\n```\n",
                vec![Edit::Whole {
                    path: "a.py".into(),
                    content: "final\n".into(),
                }],
            ),
        ];
        for (name, answer, expected) in cases {
            let got = parse(answer).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&got.edits, expected, "{name}");
        }
    }

    #[test]
    fn malformed_blocks_say_what_is_missing() {
        let cases = [
            ("a.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n", "no `=======`"),
            (
                "a.py\n<<<<<<< SEARCH\nx\n=======\ny\n",
                "no `>>>>>>> REPLACE`",
            ),
            (
                "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n",
                "names no file",
            ),
        ];
        for (answer, needle) in cases {
            let e = parse(answer).expect_err(answer);
            assert!(e.contains(needle), "{answer:?}: {e}");
        }
    }

    #[test]
    fn the_note_line_is_the_description() {
        let a = parse("NOTE: lower the learning rate\na.py\n```\nx\n```\n").unwrap();
        assert_eq!(a.note.as_deref(), Some("lower the learning rate"));
        assert_eq!(a.edits.len(), 1);
    }
}
