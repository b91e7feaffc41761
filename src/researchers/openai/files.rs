//! Which files the model sees, and how much of each: whole files under a size limit, the start
//! and an outline of larger ones (with a note to quote only what is shown), names only once the
//! request's budget is spent. Only files the researcher may change are sent.

use std::fmt::Write;

/// A file this size or smaller is sent whole.
pub const WHOLE_FILE_BYTES: usize = 32 * 1024;
/// What all files together may take in one request.
pub const CONTEXT_BYTES: usize = 160 * 1024;
/// Lines shown from the start of a larger file.
const EXCERPT_LINES: usize = 200;
/// Outline lines listed after the excerpt, at most.
const OUTLINE_LINES: usize = 80;

/// The files section of the request: `(path, content)` pairs, in the order given.
pub fn render(files: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut left = CONTEXT_BYTES;
    let mut unshown = Vec::new();
    for (path, content) in files {
        let block = if content.len() <= WHOLE_FILE_BYTES {
            fenced(path, "", content)
        } else {
            excerpt(path, content)
        };
        if block.len() > left {
            unshown.push(path.as_str());
            continue;
        }
        left -= block.len();
        out.push_str(&block);
    }
    if !unshown.is_empty() {
        let _ = writeln!(
            out,
            "Also yours to change, not shown (too large for this request): {}\n\
             Rewrite one of them only with a whole-file block if you know its content.",
            unshown.join(", ")
        );
    }
    out
}

fn fenced(path: &str, note: &str, body: &str) -> String {
    // A fence longer than any run of backticks inside, so the file cannot close it.
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut s = format!("{path}{note}\n{fence}\n{body}");
    if !body.ends_with('\n') {
        s.push('\n');
    }
    let _ = writeln!(s, "{fence}\n");
    s
}

/// The first lines of a large file and an outline of the rest (lines that start a definition).
fn excerpt(path: &str, content: &str) -> String {
    let lines: Vec<&str> = content.lines().collect();
    let head = lines[..lines.len().min(EXCERPT_LINES)].join("\n");
    let outline: Vec<String> = lines
        .iter()
        .enumerate()
        .skip(EXCERPT_LINES)
        .filter(|(_, l)| is_definition(l))
        .take(OUTLINE_LINES)
        .map(|(i, l)| format!("{:>6}: {}", i + 1, l.trim_end()))
        .collect();
    let note = format!(
        " ({} lines, {} bytes: lines 1-{} shown; quote SEARCH text only from the lines shown)",
        lines.len(),
        content.len(),
        lines.len().min(EXCERPT_LINES)
    );
    let mut s = fenced(path, &note, &head);
    if !outline.is_empty() {
        let _ = writeln!(
            s,
            "Outline of {path} after line {EXCERPT_LINES} (line: text):\n{}\n",
            outline.join("\n")
        );
    }
    s
}

/// Lock files and data: worth the least of a request's budget.
pub fn is_bulk(path: &str) -> bool {
    const ENDINGS: &[&str] = &[
        ".lock",
        "-lock.json",
        "-lock.yaml",
        ".csv",
        ".tsv",
        ".jsonl",
        ".svg",
        ".min.js",
        ".map",
        ".ipynb",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    ENDINGS.iter().any(|e| name.ends_with(e)) || name == "go.sum"
}

fn is_definition(line: &str) -> bool {
    const STARTS: &[&str] = &[
        "def ",
        "async def ",
        "class ",
        "fn ",
        "pub fn ",
        "pub(crate) fn ",
        "async fn ",
        "pub async fn ",
        "impl ",
        "struct ",
        "pub struct ",
        "enum ",
        "pub enum ",
        "function ",
        "export ",
        "func ",
        "static ",
        "#define ",
    ];
    let t = line.trim_start();
    let top_or_method = line.len() - t.len() <= 4;
    top_or_method && STARTS.iter().any(|s| t.starts_with(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_whole_large_ones_excerpted_then_names_only() {
        let small = ("a.py".to_string(), "x = 1\n".to_string());
        let body: String = (0..3000)
            .map(|i| {
                if i % 500 == 0 {
                    format!("def f{i}():\n")
                } else {
                    format!("    v{i} = {i}\n")
                }
            })
            .collect();
        let large = ("big.py".to_string(), body);
        let text = render(&[small.clone(), large.clone()]);
        assert!(text.starts_with("a.py\n```\nx = 1\n```\n"), "{text}");
        assert!(text.contains("big.py (3000 lines"), "{text}");
        assert!(text.contains("    v199 = 199\n") && !text.contains("v200 = 200"));
        assert!(text.contains("   501: def f500():"), "{text}");
        let many: Vec<(String, String)> = (0..20)
            .map(|i| (format!("f{i}.txt"), "y\n".repeat(15_000)))
            .collect();
        let text = render(&many);
        assert!(text.len() <= CONTEXT_BYTES + 1000);
        assert!(
            text.contains("not shown (too large for this request): "),
            "{}",
            &text[text.len() - 300..]
        );
    }

    #[test]
    fn lock_files_and_data_are_bulk() {
        for path in [
            "Cargo.lock",
            "web/package-lock.json",
            "data/train.csv",
            "go.sum",
        ] {
            assert!(is_bulk(path), "{path}");
        }
        for path in ["train.py", "src/lock.rs", "config.json"] {
            assert!(!is_bulk(path), "{path}");
        }
    }

    #[test]
    fn a_file_with_fences_gets_a_longer_fence() {
        let text = render(&[("README.md".into(), "```sh\nls\n```\n".into())]);
        assert!(text.starts_with("README.md\n````\n```sh"), "{text}");
    }
}
