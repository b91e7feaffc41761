//! Finding the numeric literals `builtin:tune` may change, and rewriting one of them without
//! touching any other byte of the file. Implements the marker convention of `README.md`: a comment
//! on a line that says `tune` marks the literals before it (with optional `int`/`float` and
//! `[lo, hi]`); if any file has a marker, only marked literals count. Without markers only a
//! number that is the whole value of an assignment or key (`lr = 3e-4`, `lr: 0.1`, `"lr": 5`,
//! `--lr 0.1`, `#define LR 0.1`), or an element of a list that is (`betas: [0.9, 0.999]`), counts:
//! numbers inside expressions, commands, versions or strings are never touched. What a comment is
//! depends on the file type (`#` in shell and Python, `//` in C and Rust, `--` in SQL…), so
//! `q = a // 2` in Python and `#define` in C read right.

use std::collections::{BTreeMap, BTreeSet};

use super::Literal;

/// Significant digits kept when a float literal is written.
pub(crate) const SIG_DIGITS: i32 = 6;

/// What a `tune` marker comment says about the literals on its line.
#[derive(Debug, Clone, Default)]
struct Marker {
    integer: Option<bool>,
    lower: Option<f64>,
    upper: Option<f64>,
    /// A `[lo, hi]` that cannot be used, and why.
    error: Option<String>,
}

/// A literal found on one line, positions relative to the line (the number with its sign,
/// without a type suffix such as `f`).
#[derive(Debug, Clone, Copy)]
struct Raw {
    start: usize,
    end: usize,
    /// Written with a floating-point type suffix (`0.5f`, `1f`, `2.0f64`).
    float_suffix: bool,
}

/// How comments and number suffixes look in a file, from its extension (or its `#!` line).
#[derive(Debug, Clone, Copy, Default)]
struct Syntax {
    /// `#` starts a comment at the start of a word (shell, YAML, …) or, with `hash_anywhere`,
    /// anywhere outside a string (Python, Ruby, R, TOML).
    hash: bool,
    hash_anywhere: bool,
    /// `//` and `/* */` start comments (C family, Rust, Go, Java, JavaScript…).
    slash: bool,
    /// `#` at the start of a line is a preprocessor directive (`#define NAME 1.5`).
    preproc: bool,
    /// `--` starts a comment (SQL, Lua, Haskell).
    dash: bool,
    /// `;` starts a comment at the start of a line (INI) or, with `semi_anywhere`, anywhere (Lisp,
    /// assembly).
    semi: bool,
    semi_anywhere: bool,
    /// `%` starts a comment (TeX, MATLAB, Erlang).
    percent: bool,
    /// Numbers may carry a type suffix (`0.5f`, `10L`, `2.0f64`).
    suffixes: bool,
    /// YAML: `- 0.5` items of a block list belong to the key above them.
    yaml: bool,
    /// Unknown file type: the old mix of heuristics (`#` or `;` at the start of a word, `//` not
    /// after `:`, `-- `, `%` at the start of a line).
    generic: bool,
}

fn syntax(path: &str, text: &str) -> Syntax {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let mut s = Syntax::default();
    match ext {
        "py" | "pyi" | "pyw" | "rb" | "r" | "toml" | "pl" | "pm" | "jl" | "nim" | "cr" | "ex"
        | "exs" | "coffee" => {
            s.hash = true;
            s.hash_anywhere = true;
        }
        "sh" | "bash" | "zsh" | "ksh" | "fish" | "yaml" | "yml" | "cfg" | "conf" | "env"
        | "properties" | "mk" | "make" | "cmake" | "tf" | "tfvars" | "nix" | "dockerfile" => {
            s.hash = true;
            s.yaml = matches!(ext, "yaml" | "yml");
        }
        "ini" => {
            s.hash = true;
            s.semi = true;
        }
        "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "cu" | "cuh" | "mm" => {
            s.slash = true;
            s.preproc = true;
            s.suffixes = true;
        }
        "java" | "kt" | "kts" | "scala" | "cs" | "swift" | "dart" | "groovy" | "gradle" | "rs"
        | "zig" | "glsl" | "hlsl" | "frag" | "vert" => {
            s.slash = true;
            s.suffixes = true;
        }
        "go" | "js" | "mjs" | "cjs" | "ts" | "tsx" | "jsx" | "jsonc" | "json5" | "proto"
        | "sol" | "v" => s.slash = true,
        "php" => {
            s.slash = true;
            s.hash = true;
        }
        "sql" | "lua" | "hs" | "elm" | "ada" | "adb" | "ads" | "vhd" | "vhdl" => s.dash = true,
        "lisp" | "el" | "clj" | "cljs" | "scm" | "asm" | "s" => {
            s.semi = true;
            s.semi_anywhere = true;
        }
        "tex" | "m" | "erl" => s.percent = true,
        "json" => {}
        _ if matches!(lower.as_str(), "makefile" | "dockerfile" | "gnumakefile") => s.hash = true,
        _ if text.starts_with("#!") => s.hash = true,
        _ => s.generic = true,
    }
    s
}

/// Literals of one file. A file with a marker comment yields only marked literals.
pub fn find_literals(path: &str, text: &str) -> Vec<Literal> {
    let marked = has_marker(path, text);
    scan(path, text, marked).0
}

/// Literals across files, sorted by path then position. If any file has a marker, only marked
/// literals count, in every file.
pub fn find_all(files: &[(String, String)]) -> Vec<Literal> {
    let marked = files.iter().any(|(p, t)| has_marker(p, t));
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    sorted
        .into_iter()
        .flat_map(|(p, t)| scan(p, t, marked).0)
        .collect()
}

/// What the user must fix before the tuner can run, one `path:line: …` sentence each: markers
/// whose bounds cannot be used, literals that start outside their bounds.
pub fn problems(files: &[(String, String)]) -> Vec<String> {
    let marked = files.iter().any(|(p, t)| has_marker(p, t));
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    sorted
        .into_iter()
        .flat_map(|(p, t)| scan(p, t, marked).1)
        .collect()
}

/// Lines (`path:line`) whose `tune` marker has no number before it on its line.
pub fn empty_markers(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        if text.as_bytes().contains(&0) {
            continue;
        }
        let syn = syntax(path, text);
        for (n, (_, line)) in lines(text).enumerate() {
            if line_marker(line, syn).is_some() {
                let code_end = comment_start(line, syn).unwrap_or(line.len());
                if scan_code(&line.as_bytes()[..code_end], syn).is_empty() {
                    out.push(format!("{path}:{}", n + 1));
                }
            }
        }
    }
    out
}

/// The tunable parameters of `files`: key → value.
pub fn extract_params(files: &[(String, String)]) -> BTreeMap<String, f64> {
    find_all(files)
        .into_iter()
        .map(|l| (l.key, l.value))
        .collect()
}

/// `text` with `lit` replaced by `new_value` (clamped to its bounds, rounded to an integer or to
/// six significant digits) written in the literal's style. No other byte changes.
pub fn rewrite(text: &str, lit: &Literal, new_value: f64) -> String {
    let new = format_like(&lit.text, quantize(lit, new_value), lit.integer);
    let mut out = String::with_capacity(text.len() + new.len());
    out.push_str(&text[..lit.start]);
    out.push_str(&new);
    out.push_str(&text[lit.end..]);
    out
}

/// Clamp to the written bounds and round to the literal's representable precision.
pub(crate) fn quantize(lit: &Literal, v: f64) -> f64 {
    let mut v = v;
    if let Some(lo) = lit.lower {
        v = v.max(lo);
    }
    if let Some(hi) = lit.upper {
        v = v.min(hi);
    }
    let v = if lit.integer {
        v.round()
    } else {
        round_sig(v, SIG_DIGITS)
    };
    if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// The identity of a value for "already evaluated?" comparisons.
pub(crate) fn canon(lit: &Literal, v: f64) -> String {
    let q = quantize(lit, v);
    if lit.integer {
        format!("{}", q as i64)
    } else {
        format!("{:.*e}", (SIG_DIGITS - 1) as usize, q)
    }
}

/// Smallest change the literal's written form expresses (one unit of its last written digit).
pub(crate) fn written_resolution(lit: &Literal) -> f64 {
    if lit.integer {
        return 1.0;
    }
    let body = lit.text.trim_start_matches(['+', '-']).replace('_', "");
    let (mant, exp) = split_exp(&body);
    let decimals = mant.split('.').nth(1).map_or(0, str::len) as i32;
    let e: i32 = exp.and_then(|e| e[1..].parse().ok()).unwrap_or(0);
    10f64.powi(e - decimals)
}

pub(crate) fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let e = v.abs().log10().floor() as i32;
    let p = digits - 1 - e;
    if p >= 0 {
        let s = 10f64.powi(p);
        (v * s).round() / s
    } else {
        let s = 10f64.powi(-p);
        (v / s).round() * s
    }
}

fn split_exp(body: &str) -> (&str, Option<&str>) {
    match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i..])),
        None => (body, None),
    }
}

/// Fewest decimals (at least `at_least`) that write `v` exactly to six significant digits.
fn min_decimals(v: f64, at_least: usize) -> usize {
    let target = round_sig(v, SIG_DIGITS);
    for k in at_least..=17 {
        let s = format!("{v:.k$}");
        let back: f64 = s.parse().unwrap_or(f64::NAN);
        if (back - target).abs() <= 1e-9 * target.abs().max(1e-300) {
            return k;
        }
    }
    17
}

/// Digits of an integer part grouped by threes with `_` (`1000000` → `1_000_000`).
fn group(digits: &str) -> String {
    let (sign, d) = match digits.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", digits),
    };
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// `v` written in the style of `orig`, as tidily as the value allows: an integer stays an
/// integer; a decimal uses the fewest decimals that write the value (at least one, so a float
/// stays a float); scientific notation stays scientific with the same exponent letter, exponent
/// sign and zero padding; a leading `+`, a bare leading `.` and `_` digit grouping are kept.
/// The digits written do not ratchet up: `3e-4` can become `1.25e-3` and later `1e-2`.
pub(crate) fn format_like(orig: &str, v: f64, integer: bool) -> String {
    let plus = orig.starts_with('+');
    let body = orig.trim_start_matches(['+', '-']);
    let grouped = body.contains('_');
    let body = body.replace('_', "");
    let (mant, exp) = split_exp(&body);
    let has_dot = mant.contains('.');
    let leading_dot = mant.starts_with('.');
    let v = if v == 0.0 { 0.0 } else { v };
    let mut s = if let Some(exp) = exp {
        let echar = &exp[..1];
        let rest = &exp[1..];
        let exp_plus = rest.starts_with('+');
        let width = rest.trim_start_matches(['+', '-']).len();
        let q = round_sig(v, SIG_DIGITS);
        let (mut m, mut e10) = if q == 0.0 {
            (0.0, 0)
        } else {
            let e10 = q.abs().log10().floor() as i32;
            (q / 10f64.powi(e10), e10)
        };
        m = round_sig(m, SIG_DIGITS);
        if m.abs() >= 10.0 {
            m /= 10.0;
            e10 += 1;
        }
        let k = min_decimals(m, 0);
        let ms = format!("{m:.k$}");
        let sign = if e10 < 0 {
            "-"
        } else if exp_plus {
            "+"
        } else {
            ""
        };
        format!("{ms}{echar}{sign}{:0width$}", e10.abs())
    } else if integer && !has_dot {
        format!("{}", v.round() as i64)
    } else {
        let q = if integer {
            v.round()
        } else {
            round_sig(v, SIG_DIGITS)
        };
        let k = min_decimals(q, 0);
        let mut s = format!("{q:.k$}");
        if k == 0 && has_dot {
            // `5.` stays `5.`, `2.0` stays `2.0`: still a float.
            s.push_str(if mant.ends_with('.') { "." } else { ".0" });
        }
        s
    };
    if grouped {
        let (int, rest) = match s.find(['.', 'e', 'E']) {
            Some(i) => s.split_at(i),
            None => (s.as_str(), ""),
        };
        s = format!("{}{rest}", group(int));
    }
    if leading_dot {
        if let Some(rest) = s.strip_prefix("0.") {
            s = format!(".{rest}");
        } else if let Some(rest) = s.strip_prefix("-0.") {
            s = format!("-.{rest}");
        }
    }
    if plus && !s.starts_with('-') {
        format!("+{s}")
    } else {
        s
    }
}

/// Files whose numbers are prose or data, never parameters, unless the user marks them.
fn prose_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [
        ".md", ".txt", ".rst", ".lock", ".csv", ".tsv", ".log", ".svg", ".html", ".sum",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext))
}

/// Names whose values are identifiers or settings of the run, not things to optimise.
fn denied_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "version", "date", "year", "port", "seed", "timeout", "verbose", "debug", "thread",
        "worker", "jobs", "pid", "uid", "gid", "python", "node", "ruby", "java", "golang", "image",
        "release", "revision", "api", "schema",
    ]
    .iter()
    .any(|d| lower.contains(d))
        || matches!(lower.as_str(), "ver" | "tag" | "rev" | "build" | "go")
}

/// Words that begin statements, not assignments (`if x: 3`, `echo a=1`).
fn control_word(word: &str) -> bool {
    matches!(
        word,
        "if" | "elif"
            | "else"
            | "for"
            | "while"
            | "until"
            | "return"
            | "echo"
            | "print"
            | "printf"
            | "assert"
            | "case"
            | "when"
            | "do"
            | "then"
            | "yield"
            | "await"
            | "not"
            | "and"
            | "or"
            | "in"
            | "lambda"
            | "with"
            | "def"
            | "fn"
            | "func"
            | "function"
            | "class"
            | "struct"
            | "enum"
            | "match"
            | "switch"
            | "goto"
            | "throw"
            | "raise"
    )
}

fn has_marker(path: &str, text: &str) -> bool {
    if text.as_bytes().contains(&0) {
        return false;
    }
    let syn = syntax(path, text);
    text.split('\n').any(|l| line_marker(l, syn).is_some())
}

/// Lines with their byte offsets, without the line terminator.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut off = 0;
    text.split('\n').map(move |l| {
        let start = off;
        off += l.len() + 1;
        (start, l.strip_suffix('\r').unwrap_or(l))
    })
}

/// A literal found in a file, before keys are given.
struct Found {
    start: usize,
    end: usize,
    line: usize,
    name: Option<String>,
    marker: Option<Marker>,
    float_suffix: bool,
}

/// Literals of one file (with `marked`, only those on marked lines) and the problems of its
/// markers.
fn scan(path: &str, text: &str, marked: bool) -> (Vec<Literal>, Vec<String>) {
    if text.as_bytes().contains(&0) || (!marked && prose_file(path)) {
        return (Vec::new(), Vec::new());
    }
    let syn = syntax(path, text);
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut yaml_list = YamlList::default();
    for (n, (off, line)) in lines(text).enumerate() {
        let marker = line_marker(line, syn);
        let code_end = comment_start(line, syn).unwrap_or(line.len());
        let code = &line[..code_end];
        let mut values = assignment(code, syn);
        if syn.yaml {
            yaml_list.read(code, syn, &mut values);
        }
        let at = |raw: Raw, name: Option<String>, marker: Option<Marker>| Found {
            start: off + raw.start,
            end: off + raw.end,
            line: n + 1,
            name,
            marker,
            float_suffix: raw.float_suffix,
        };
        if let Some(m) = &marker {
            if let Some(e) = &m.error {
                problems.push(format!("{path}:{}: {e}", n + 1));
            }
            for raw in scan_code(code.as_bytes(), syn) {
                let name = values
                    .iter()
                    .find(|(r, _)| r.start == raw.start)
                    .map(|(_, k)| k.clone())
                    .or_else(|| key_before(&line[..raw.start]));
                found.push(at(raw, name, Some(m.clone())));
            }
        } else if !marked {
            for (raw, name) in values {
                let base = name.split('[').next().unwrap_or(&name);
                if denied_name(base.rsplit('.').next().unwrap_or(base)) {
                    continue;
                }
                found.push(at(raw, Some(name), None));
            }
        }
    }
    let lits = literals(path, text, found, &mut problems);
    (lits, problems)
}

/// A YAML block list under a key (`key:` then `- 1` lines), followed line by line.
#[derive(Default)]
struct YamlList {
    /// The key, the indent of its line and the next item's index.
    open: Option<(String, usize, usize)>,
}

impl YamlList {
    /// Follows one line's `code`: an item of the open list that has no value of its own yet
    /// adds its whole number to `values`, named `key[index]`.
    fn read(&mut self, code: &str, syn: Syntax, values: &mut Vec<(Raw, String)>) {
        let indent = code.len() - code.trim_start().len();
        let t = code.trim();
        if let Some(item) = t.strip_prefix("- ").or((t == "-").then_some("")) {
            if let Some((key, key_indent, index)) = &mut self.open {
                if indent >= *key_indent && values.is_empty() {
                    let from = code.len() - item.len();
                    if let Some(raw) = whole_number(code.as_bytes(), from, code.len(), syn) {
                        values.push((raw, format!("{key}[{index}]")));
                    }
                    *index += 1;
                }
            }
        } else if let Some(key) = t
            .strip_suffix(':')
            .filter(|k| !k.contains(['#', ' ']) || k.starts_with('"'))
        {
            self.open = Some((key.trim_matches(['"', '\'']).to_string(), indent, 0));
        } else if !t.is_empty() {
            self.open = None;
        }
    }
}

/// The literals `found` in `text` that parse as finite numbers, with their keys (`path:name`
/// for the first use of a name, else `path#ordinal`); a value outside its marker's bounds adds
/// a problem.
fn literals(path: &str, text: &str, found: Vec<Found>, problems: &mut Vec<String>) -> Vec<Literal> {
    let mut seen = BTreeSet::new();
    let mut lits = Vec::new();
    for (ordinal, f) in found.into_iter().enumerate() {
        let text_lit = &text[f.start..f.end];
        let Ok(value) = text_lit
            .trim_start_matches('+')
            .replace('_', "")
            .parse::<f64>()
        else {
            continue;
        };
        if !value.is_finite() {
            continue;
        }
        let key = match f.name {
            Some(n) if seen.insert(n.clone()) => format!("{path}:{n}"),
            _ => format!("{path}#{ordinal}"),
        };
        let m = f.marker.unwrap_or_default();
        let written_int = !text_lit.contains(['.', 'e', 'E']) && !f.float_suffix;
        let lit = Literal {
            path: path.to_string(),
            key,
            line: f.line,
            start: f.start,
            end: f.end,
            text: text_lit.to_string(),
            value,
            integer: m.integer.unwrap_or(written_int),
            lower: m.lower,
            upper: m.upper,
        };
        if let (Some(lo), Some(hi)) = (lit.lower, lit.upper) {
            if value < lo || value > hi {
                problems.push(format!(
                    "{path}:{}: `{text_lit}` is outside its bounds [{}, {}]: move the value \
                     inside them or widen the bounds",
                    f.line,
                    trim_float(lo),
                    trim_float(hi)
                ));
            }
        }
        lits.push(lit);
    }
    lits
}

fn trim_float(v: f64) -> String {
    format!("{v}")
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// Byte offset where the line's comment starts, by the file's comment syntax. Quotes are
/// skipped.
fn comment_start(line: &str, syn: Syntax) -> Option<usize> {
    let b = line.as_bytes();
    let first = b.iter().position(|c| !c.is_ascii_whitespace());
    if syn.generic {
        if let Some(f) = first {
            if matches!(b[f], b';' | b'%') {
                return Some(f);
            }
        }
    }
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let after_space = i == 0 || b[i - 1].is_ascii_whitespace() || b[i - 1] == b';';
        let next = b.get(i + 1).copied();
        let found = match c {
            b'"' => {
                quote = Some(c);
                false
            }
            b'\'' if i == 0 || !b[i - 1].is_ascii_alphanumeric() => {
                quote = Some(c);
                false
            }
            b'#' if syn.generic || syn.hash => {
                (syn.hash_anywhere || after_space) && !(syn.preproc && Some(i) == first)
            }
            b'/' if syn.slash => matches!(next, Some(b'/' | b'*')),
            b'/' if syn.generic => {
                matches!(next, Some(b'/' | b'*')) && (i == 0 || b[i - 1] != b':')
            }
            b'-' if syn.dash => next == Some(b'-'),
            b'-' if syn.generic => {
                after_space
                    && next == Some(b'-')
                    && matches!(b.get(i + 2), None | Some(b' ' | b'\t'))
            }
            b';' if syn.semi => syn.semi_anywhere || Some(i) == first,
            b'%' if syn.percent => i == 0 || b[i - 1] != b'\\',
            _ => false,
        };
        if found {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The marker on a line, if its comment says `tune` (first word of the comment, or anywhere in it
/// followed by `:` or the end).
fn line_marker(line: &str, syn: Syntax) -> Option<Marker> {
    let cs = comment_start(line, syn)?;
    let comment = &line[cs..];
    let lower = comment.to_ascii_lowercase();
    let lb = lower.as_bytes();
    let body_start = lb
        .iter()
        .position(|c| {
            !matches!(c, b'#' | b'/' | b'*' | b'-' | b';' | b'%' | b'!') && !c.is_ascii_whitespace()
        })
        .unwrap_or(lb.len());
    let mut from = 0;
    while let Some(p) = lower[from..].find("tune").map(|p| p + from) {
        from = p + 4;
        let before_ok = p == 0 || !(is_word(lb[p - 1]) || lb[p - 1] == b'-');
        let next = lb.get(p + 4).copied();
        let after_ok = !next.is_some_and(|c| is_word(c) || c == b'-');
        if !before_ok || !after_ok {
            continue;
        }
        let rest = lower[p + 4..].trim_start();
        let leading = p == body_start;
        let colon = rest.starts_with(':') || rest.starts_with("*/") || rest.is_empty();
        if leading || colon {
            return Some(parse_spec(rest.trim_start_matches(':')));
        }
    }
    None
}

fn parse_spec(spec: &str) -> Marker {
    let mut m = Marker::default();
    let bracket = spec.find('[');
    let before = bracket.map_or(spec, |b| &spec[..b]);
    for w in before.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        match w {
            "int" | "integer" => m.integer = Some(true),
            "float" | "real" => m.integer = Some(false),
            _ => {}
        }
    }
    let Some(b) = bracket else {
        return m;
    };
    let Some(close) = spec[b..].find(']') else {
        m.error = Some(format!(
            "the bounds `{}` have no closing `]`: write `tune: [lo, hi]`, e.g. `tune: [0, 1]`",
            spec[b..].trim_end()
        ));
        return m;
    };
    let written = &spec[b..=b + close];
    let parts: Vec<&str> = spec[b + 1..b + close].split(',').map(str::trim).collect();
    let nums: Vec<Option<f64>> = parts
        .iter()
        .map(|p| {
            p.replace('_', "")
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
        })
        .collect();
    match nums.as_slice() {
        [Some(lo), Some(hi)] if lo < hi => {
            m.lower = Some(*lo);
            m.upper = Some(*hi);
        }
        [Some(lo), Some(hi)] if lo > hi => {
            m.error = Some(format!(
                "the bounds `{written}` have the lower bound above the upper one: write \
                 `[{}, {}]`",
                parts[1], parts[0]
            ));
        }
        [Some(_), Some(_)] => {
            m.error = Some(format!(
                "the bounds `{written}` leave no room to tune: write a range such as `[lo, hi]` \
                 with lo < hi, or remove the marker"
            ));
        }
        _ => {
            m.error = Some(format!(
                "cannot read the bounds `{written}`: write two numbers, `tune: [lo, hi]` (e.g. \
                 `tune: [1e-5, 1e-2]`)"
            ));
        }
    }
    m
}

/// The number (sign, digits with `_` separators, decimals, exponent) starting at `s`, a digit
/// or `.`: its end, and its end with a type suffix and whether that suffix makes it a float.
/// `Err(where to go on)` when it is part of something else (an identifier, a version, a date).
fn lex_number(code: &[u8], s: usize, syn: Syntax) -> Result<(usize, usize, bool), usize> {
    let n = code.len();
    let digits = |mut i: usize| {
        let from = i;
        while i < n
            && (code[i].is_ascii_digit()
                || (code[i] == b'_'
                    && i > from
                    && code[i - 1].is_ascii_digit()
                    && code.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        i
    };
    let mut e = digits(s);
    let mut any = e > s;
    if e < n && code[e] == b'.' {
        let d = digits(e + 1);
        any |= d > e + 1;
        e = d;
    }
    if !any {
        return Err(e);
    }
    if e < n && matches!(code[e], b'e' | b'E') {
        let mut j = e + 1;
        if j < n && matches!(code[j], b'+' | b'-') {
            j += 1;
        }
        let d = digits(j);
        if d > j {
            e = d;
        }
    }
    let skip_run = |from: usize, extra: &[u8]| {
        let mut k = from;
        while k < n && (is_word(code[k]) || code[k] == b'.' || extra.contains(&code[k])) {
            k += 1;
        }
        k
    };
    let (full, float_suffix) = suffix(code, e, syn);
    if full < n && is_word(code[full]) {
        return Err(skip_run(full, &[]));
    }
    let digit_at = |k: usize| k < n && code[k].is_ascii_digit();
    if full < n && code[full] == b'.' && digit_at(full + 1) {
        return Err(skip_run(full, &[]));
    }
    if full < n && matches!(code[full], b'-' | b':' | b'/') && digit_at(full + 1) {
        return Err(skip_run(full, b"-:/"));
    }
    if s > 0 && matches!(code[s - 1], b'.' | b'#' | b'$' | b'\\' | b'@') {
        return Err(full);
    }
    Ok((e, full, float_suffix))
}

/// A type suffix at `e` (`f`, `F`, `L`, `u`, `f64`, `_i32`…) where the language has them: the end
/// including it, and whether it makes the number a float.
fn suffix(code: &[u8], e: usize, syn: Syntax) -> (usize, bool) {
    if !syn.suffixes {
        return (e, false);
    }
    let rest = &code[e..];
    let word_end = |k: usize| rest.get(k).is_none_or(|c| !is_word(*c));
    // Rust: 2.0f64, 10_u32, 5i64
    let r = rest.strip_prefix(b"_").unwrap_or(rest);
    let skip = rest.len() - r.len();
    for t in [
        "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64",
        "u128", "usize",
    ] {
        if r.starts_with(t.as_bytes()) && word_end(skip + t.len()) {
            return (e + skip + t.len(), t.starts_with('f'));
        }
    }
    // C family, Java, C#, Kotlin: 0.5f, 1.0d, 10L, 10UL
    let mut k = 0;
    let mut float = false;
    while k < rest.len()
        && k < 3
        && matches!(
            rest[k],
            b'f' | b'F' | b'd' | b'D' | b'l' | b'L' | b'u' | b'U' | b'm' | b'M'
        )
    {
        float |= matches!(rest[k], b'f' | b'F' | b'd' | b'D' | b'm' | b'M');
        k += 1;
    }
    if k > 0 && word_end(k) {
        (e + k, float)
    } else {
        (e, false)
    }
}

/// The number starting at `s` (a digit or `.`) with a unary sign before it, or `Err(where to
/// continue)` when it is part of something that is not a parameter (version, date, hex,
/// identifier).
fn number_at(code: &[u8], s: usize, syn: Syntax) -> Result<(Raw, usize), usize> {
    let (e, full, float_suffix) = lex_number(code, s, syn)?;
    let mut start = s;
    if s > 0 && matches!(code[s - 1], b'-' | b'+') {
        let p = s - 1;
        let q = code[..p].iter().rposition(|c| !c.is_ascii_whitespace());
        let unary = match q {
            None => true,
            Some(q) => matches!(
                code[q],
                b'=' | b'('
                    | b','
                    | b'['
                    | b'{'
                    | b':'
                    | b'<'
                    | b'>'
                    | b'*'
                    | b'/'
                    | b'%'
                    | b'^'
                    | b'&'
                    | b'|'
                    | b'!'
                    | b'?'
                    | b';'
                    | b'+'
                    | b'-'
            ),
        };
        // `--5` is a flag-like token, not a signed number.
        let flag = q == Some(p.wrapping_sub(1)) && p > 0 && code[p - 1] == b'-';
        if unary && !flag {
            start = p;
        }
    }
    Ok((
        Raw {
            start,
            end: e,
            float_suffix,
        },
        full,
    ))
}

/// The number that is exactly `code[from..to]` (whitespace around it, or quotes around it,
/// allowed).
fn whole_number(code: &[u8], from: usize, to: usize, syn: Syntax) -> Option<Raw> {
    let mut a = from;
    let mut b = to;
    while a < b && code[a].is_ascii_whitespace() {
        a += 1;
    }
    while b > a && code[b - 1].is_ascii_whitespace() {
        b -= 1;
    }
    if b >= a + 2 && matches!(code[a], b'"' | b'\'') && code[b - 1] == code[a] {
        a += 1;
        b -= 1;
    }
    let body = &code[..b];
    let mut s = a;
    if s < b && matches!(code[s], b'-' | b'+') {
        s += 1;
    }
    if s >= b || !(code[s].is_ascii_digit() || code[s] == b'.') {
        return None;
    }
    let (e, full, float_suffix) = lex_number(body, s, syn).ok()?;
    (full == b).then_some(Raw {
        start: a,
        end: e,
        float_suffix,
    })
}

/// The numbers of a list that is exactly `code[from..to]`: `[64, 128]`, `(0.9, 0.999)`, `{1, 2}`.
fn list_numbers(code: &[u8], from: usize, to: usize, syn: Syntax) -> Option<Vec<Raw>> {
    let t = std::str::from_utf8(&code[from..to]).ok()?;
    let lead = t.len() - t.trim_start().len();
    let t = t.trim();
    let close = match t.as_bytes().first()? {
        b'[' => b']',
        b'(' => b')',
        b'{' => b'}',
        _ => return None,
    };
    if t.len() < 2 || *t.as_bytes().last()? != close {
        return None;
    }
    let inner_from = from + lead + 1;
    let inner_to = from + lead + t.len() - 1;
    let mut out = Vec::new();
    let mut start = inner_from;
    for k in inner_from..=inner_to {
        if k == inner_to || code[k] == b',' {
            let piece = &code[start..k];
            if piece.iter().all(u8::is_ascii_whitespace) {
                // A trailing comma (`[1, 2,]`), nothing else may be empty.
                if k != inner_to || out.is_empty() {
                    return None;
                }
            } else {
                out.push(whole_number(code, start, k, syn)?);
            }
            start = k + 1;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Where the assignment operator of a line is (`=`, `:=` or a key's `:`), outside strings and
/// brackets: (position, length, is `=`).
fn assignment_operator(b: &[u8]) -> Option<(usize, usize, bool)> {
    let mut quote: Option<u8> = None;
    let mut depth = 0i32;
    let mut colon = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' | b'`' => quote = Some(c),
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'=' if depth == 0 => {
                let prev = i.checked_sub(1).map(|p| b[p]);
                let next = b.get(i + 1).copied();
                if matches!(next, Some(b'=' | b'>' | b'~')) {
                    return None;
                }
                return match prev {
                    Some(b':') => Some((i - 1, 2, true)),
                    Some(
                        b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|'
                        | b'^' | b'~',
                    ) => None,
                    _ => Some((i, 1, true)),
                };
            }
            b':' if depth == 0 && colon.is_none() => {
                if b.get(i + 1) == Some(&b':') {
                    i += 2;
                    continue;
                }
                let next_space = b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace());
                let after_quote = i > 0 && matches!(b[i - 1], b'"' | b'\'');
                if next_space || after_quote {
                    colon = Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    colon.map(|i| (i, 1, false))
}

/// The name an assignment's left side assigns to, if it is one: words (declarations, `export`,
/// a YAML `- `), then the name (possibly quoted or dotted), then a `: type` after an `=`.
fn lhs_name(lhs: &str, equals: bool) -> Option<String> {
    let t = lhs.trim();
    let t = t.strip_prefix("- ").unwrap_or(t).trim_start();
    if t.is_empty()
        || !t.bytes().all(|c| {
            is_word(c)
                || matches!(
                    c,
                    b'.' | b'-'
                        | b' '
                        | b'\t'
                        | b'"'
                        | b'\''
                        | b'$'
                        | b'@'
                        | b':'
                        | b'<'
                        | b'>'
                        | b'&'
                        | b'*'
                )
        })
    {
        return None;
    }
    if t.split_whitespace().next().is_some_and(control_word) {
        return None;
    }
    let name_part = if equals {
        // `x: float = 1.0` / `const K: f64 = 0.25` name x / K.
        match t.find(':') {
            Some(c) if !t[c..].starts_with("::") => t[..c].trim_end(),
            _ => t,
        }
    } else {
        t
    };
    if name_part.contains(':') || name_part.contains(['<', '>']) && !equals {
        return None;
    }
    let last = name_part.split_whitespace().last()?;
    let name = last
        .trim_matches(['"', '\''])
        .trim_start_matches(['$', '@', '&', '*']);
    let ok = name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && name.bytes().all(|c| is_word(c) || matches!(c, b'.' | b'-'));
    ok.then(|| name.to_string())
}

/// The values of an assignment-like line, each with its name (`name`, or `name[i]` for list
/// elements): `name = 1.5`, `name: 1.5`, `"name": 1.5,`, `let x: f64 = 1.5;`, `#define NAME 1.5`,
/// `--name 1.5`, `--name=1.5`, `name = [1, 2]`. Empty when the value is anything else.
fn assignment(code: &str, syn: Syntax) -> Vec<(Raw, String)> {
    let b = code.as_bytes();
    let t = code.trim_start();
    if syn.preproc {
        if let Some(rest) = t.strip_prefix("#define") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(value), None) = (words.next(), words.next(), words.next()) else {
                return Vec::new();
            };
            let value_start = value.as_ptr() as usize - code.as_ptr() as usize;
            let ok_name = name
                .bytes()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                && name.bytes().all(is_word);
            return match (ok_name, whole_number(b, value_start, code.len(), syn)) {
                (true, Some(raw)) => vec![(raw, name.to_string())],
                _ => Vec::new(),
            };
        }
        if t.starts_with('#') {
            return Vec::new();
        }
    }
    // Command-line flags: `--name 1.5` and `--name=1.5`, anywhere on the line.
    let mut flags = Vec::new();
    let tokens: Vec<(usize, &str)> = code
        .split_ascii_whitespace()
        .map(|w| (w.as_ptr() as usize - code.as_ptr() as usize, w))
        .collect();
    for (k, &(at, tok)) in tokens.iter().enumerate() {
        let Some(flag) = tok.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, _)) => (n, Some(at + 2 + n.len() + 1)),
            None => (flag, None),
        };
        if !name.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
            || !name.bytes().all(|c| is_word(c) || c == b'-')
        {
            continue;
        }
        let span = match (value, tokens.get(k + 1)) {
            (Some(v), _) => Some((v, at + tok.len())),
            (None, Some(&(next, w))) => Some((next, next + w.len())),
            _ => None,
        };
        if let Some((from, to)) = span {
            if let Some(raw) = whole_number(b, from, to, syn) {
                flags.push((raw, name.to_string()));
            }
        }
    }
    if !flags.is_empty() {
        return flags;
    }
    let Some((op, len, equals)) = assignment_operator(b) else {
        return Vec::new();
    };
    let Some(name) = lhs_name(&code[..op], equals) else {
        return Vec::new();
    };
    let mut end = code.trim_end().len();
    if end > op + len && matches!(b[end - 1], b';' | b',') {
        end -= 1;
    }
    if let Some(raw) = whole_number(b, op + len, end, syn) {
        return vec![(raw, name)];
    }
    list_numbers(b, op + len, end, syn)
        .map(|raws| {
            raws.into_iter()
                .enumerate()
                .map(|(i, r)| (r, format!("{name}[{i}]")))
                .collect()
        })
        .unwrap_or_default()
}

/// Numeric literals in a marked line's code (comment already cut off): every number that is not
/// part of an identifier, version, date or longer string.
fn scan_code(code: &[u8], syn: Syntax) -> Vec<Raw> {
    let mut out = Vec::new();
    let n = code.len();
    let mut i = 0;
    while i < n {
        let c = code[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            if c == b'\'' && i > 0 && code[i - 1].is_ascii_alphanumeric() {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < n && code[j] != c {
                j += if code[j] == b'\\' { 2 } else { 1 };
            }
            let close = j.min(n);
            // A string that is exactly one number (`x="1.5"`) counts; numbers inside text do not.
            if let Some(raw) = whole_number(code, i, (close + 1).min(n), syn) {
                out.push(raw);
            }
            i = close + 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < n && is_word(code[i]) {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && i + 1 < n && code[i + 1].is_ascii_digit()) {
            match number_at(code, i, syn) {
                Ok((raw, full)) => {
                    i = full;
                    out.push(raw);
                }
                Err(skip) => i = skip.max(i + 1),
            }
            continue;
        }
        i += 1;
    }
    out
}

/// The name a literal is assigned to, from the text before it on its line: `x=`, `lr = `,
/// `"x": `, `let x: f64 = `, `--lr `.
fn key_before(prefix: &str) -> Option<String> {
    let b = prefix.as_bytes();
    let trim = |mut p: usize| {
        while p > 0 && b[p - 1].is_ascii_whitespace() {
            p -= 1;
        }
        p
    };
    if let Some(rest) = prefix.trim_start().strip_prefix("#define") {
        let name = rest.trim();
        if !name.is_empty() && name.bytes().all(is_word) {
            return Some(name.to_string());
        }
    }
    let mut p = trim(b.len());
    if p > 0 && matches!(b[p - 1], b'"' | b'\'') {
        // The opening quote of a quoted literal.
        p = trim(p - 1);
    }
    if p == 0 {
        return None;
    }
    let ident_end = |p: usize| {
        let end = p;
        let mut s = p;
        while s > 0 && (is_word(b[s - 1]) || matches!(b[s - 1], b'.' | b'-')) {
            s -= 1;
        }
        // Names start with a letter or `_` (a leading `-`/`.` belongs to something else).
        while s < end && !(b[s].is_ascii_alphabetic() || b[s] == b'_') {
            s += 1;
        }
        (s < end).then(|| (s, prefix[s..end].to_string()))
    };
    let last = b[p - 1];
    let equals = last == b'=';
    if equals {
        if p >= 2
            && matches!(
                b[p - 2],
                b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%' | b'|' | b'&' | b'^'
            )
        {
            return None;
        }
        p -= 1;
        if p > 0 && b[p - 1] == b':' {
            p -= 1;
        }
    } else if last == b':' {
        p -= 1;
    } else {
        // `--name value` / `-name value`
        let tok_start = b[..p]
            .iter()
            .rposition(|c| c.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        let tok = &prefix[tok_start..p];
        let name = tok.trim_start_matches('-');
        if tok.starts_with('-')
            && name.len() < tok.len()
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.bytes().all(|c| is_word(c) || c == b'-' || c == b'.')
        {
            return Some(name.to_string());
        }
        return None;
    }
    p = trim(p);
    if p > 0 && matches!(b[p - 1], b'"' | b'\'') {
        p -= 1;
    }
    let (s, name) = ident_end(p)?;
    if equals {
        // `x: float = 1.0` names x, not its type.
        let q = trim(s);
        if q > 0 && b[q - 1] == b':' {
            let q2 = trim(q - 1);
            if let Some((_, outer)) = ident_end(q2) {
                return Some(outer);
            }
        }
    }
    Some(name)
}
