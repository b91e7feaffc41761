//! Finding the numeric literals `builtin:tune` may change, and rewriting one of them without
//! touching any other byte of the file. Implements the marker convention of `README.md`: a comment
//! on a line that says `tune` marks the literals before it (with optional `int`/`float` and
//! `[lo, hi]`); if any file has a marker, only marked literals count. Without markers, assignment-like
//! lines are scanned with heuristics that skip versions, dates, hex colours, identifiers, indexes.

use std::collections::{BTreeMap, BTreeSet};

use super::Literal;

/// Significant digits kept when a float literal is refined beyond its written decimals.
pub(crate) const SIG_DIGITS: i32 = 6;

/// What a `tune` marker comment says about the literals on its line.
#[derive(Debug, Clone, Copy, Default)]
struct Marker {
    integer: Option<bool>,
    lower: Option<f64>,
    upper: Option<f64>,
}

/// A literal found on one line, positions relative to the line.
struct Raw {
    start: usize,
    end: usize,
}

/// Literals of one file. A file with a marker comment yields only marked literals.
pub fn find_literals(path: &str, text: &str) -> Vec<Literal> {
    let marked = has_marker(text);
    scan(path, text, marked)
}

/// Literals across files, sorted by path then position. If any file has a marker, only marked
/// literals count, in every file.
pub fn find_all(files: &[(String, String)]) -> Vec<Literal> {
    let marked = files.iter().any(|(_, t)| has_marker(t));
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    sorted
        .into_iter()
        .flat_map(|(p, t)| scan(p, t, marked))
        .collect()
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
    let body = lit.text.trim_start_matches(['+', '-']);
    let (mant, exp) = split_exp(body);
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

/// `v` written in the style of `orig`: an integer stays an integer, a float keeps at least its
/// decimals (adding some when refined), scientific notation stays scientific with the same exponent
/// letter, explicit signs and zero padding; a leading `+` or a bare leading `.` are kept.
pub(crate) fn format_like(orig: &str, v: f64, integer: bool) -> String {
    let plus = orig.starts_with('+');
    let body = orig.trim_start_matches(['+', '-']);
    let (mant, exp) = split_exp(body);
    let has_dot = mant.contains('.');
    let decimals = mant.split('.').nth(1).map_or(0, str::len);
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
        let k = min_decimals(m, decimals);
        let mut ms = format!("{m:.k$}");
        if k == 0 && has_dot {
            ms.push('.');
        }
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
        let k = min_decimals(q, decimals);
        let mut s = format!("{q:.k$}");
        if k == 0 && has_dot {
            s.push('.');
        }
        s
    };
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
        "worker", "jobs", "pid", "uid", "gid",
    ]
    .iter()
    .any(|d| lower.contains(d))
}

fn has_marker(text: &str) -> bool {
    !text.as_bytes().contains(&0) && text.split('\n').any(|l| line_marker(l).is_some())
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

fn scan(path: &str, text: &str, marked: bool) -> Vec<Literal> {
    if text.as_bytes().contains(&0) || (!marked && prose_file(path)) {
        return Vec::new();
    }
    struct Found {
        start: usize,
        end: usize,
        name: Option<String>,
        marker: Option<Marker>,
    }
    let mut found = Vec::new();
    for (off, line) in lines(text) {
        let marker = line_marker(line);
        if marked && marker.is_none() {
            continue;
        }
        let code_end = comment_start(line).unwrap_or(line.len());
        let code = &line.as_bytes()[..code_end];
        let assignment = has_lone_equals(code);
        for raw in scan_code(code) {
            let name = key_before(&line[..raw.start]);
            if marker.is_none() {
                let indexed = raw.start >= 2
                    && code[raw.start - 1] == b'['
                    && (is_word(code[raw.start - 2]) || matches!(code[raw.start - 2], b']' | b')'));
                let named_ok = name.as_deref().is_none_or(|n| !denied_name(n));
                if indexed || !named_ok || !(assignment || name.is_some()) {
                    continue;
                }
            }
            found.push(Found {
                start: off + raw.start,
                end: off + raw.end,
                name,
                marker,
            });
        }
    }
    let mut seen = BTreeSet::new();
    found
        .into_iter()
        .enumerate()
        .filter_map(|(ordinal, f)| {
            let text_lit = &text[f.start..f.end];
            let value: f64 = text_lit.trim_start_matches('+').parse().ok()?;
            if !value.is_finite() {
                return None;
            }
            let key = match f.name {
                Some(n) if seen.insert(n.clone()) => format!("{path}:{n}"),
                _ => format!("{path}#{ordinal}"),
            };
            let m = f.marker.unwrap_or_default();
            let written_int = !text_lit.contains(['.', 'e', 'E']);
            Some(Literal {
                path: path.to_string(),
                key,
                start: f.start,
                end: f.end,
                text: text_lit.to_string(),
                value,
                integer: m.integer.unwrap_or(written_int),
                lower: m.lower,
                upper: m.upper,
            })
        })
        .collect()
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// Byte offset where a comment starts: `#` or `;` after whitespace or at the start, `//` or `/*`
/// not after `:` (URLs), `-- ` after whitespace; `;`/`%` only at the start of a line. Quotes are
/// skipped.
fn comment_start(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    let first = b.iter().position(|c| !c.is_ascii_whitespace());
    if let Some(f) = first {
        if matches!(b[f], b';' | b'%') {
            return Some(f);
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
        match c {
            b'"' => quote = Some(c),
            b'\'' if i == 0 || !b[i - 1].is_ascii_alphanumeric() => quote = Some(c),
            b'#' if after_space => return Some(i),
            b'/' if matches!(b.get(i + 1), Some(b'/' | b'*')) && (i == 0 || b[i - 1] != b':') => {
                return Some(i)
            }
            b'-' if after_space
                && b.get(i + 1) == Some(&b'-')
                && matches!(b.get(i + 2), None | Some(b' ' | b'\t')) =>
            {
                return Some(i)
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The marker on a line, if its comment says `tune` (first word of the comment, or anywhere in it
/// followed by `:` or the end).
fn line_marker(line: &str) -> Option<Marker> {
    let cs = comment_start(line)?;
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
    if let Some(b) = bracket {
        if let Some(close) = spec[b..].find(']') {
            let inner = &spec[b + 1..b + close];
            let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
            if parts.len() == 2 {
                if let (Ok(lo), Ok(hi)) = (parts[0].parse::<f64>(), parts[1].parse::<f64>()) {
                    if lo.is_finite() && hi.is_finite() && lo <= hi {
                        m.lower = Some(lo);
                        m.upper = Some(hi);
                    }
                }
            }
        }
    }
    m
}

/// Whether the code has an `=` that is an assignment (not `==`, `!=`, `<=`, `>=`).
fn has_lone_equals(code: &[u8]) -> bool {
    (0..code.len()).any(|i| {
        code[i] == b'='
            && !(i > 0 && matches!(code[i - 1], b'=' | b'!' | b'<' | b'>'))
            && code.get(i + 1) != Some(&b'=')
    })
}

/// Numeric literals in a line's code (comment already cut off).
fn scan_code(code: &[u8]) -> Vec<Raw> {
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
            let inner = &code[i + 1..close];
            let s = usize::from(matches!(inner.first(), Some(b'-' | b'+')));
            if inner.len() > s && (inner[s].is_ascii_digit() || inner[s] == b'.') {
                if let Ok(raw) = number_at(inner, s) {
                    if raw.end == inner.len() && raw.start == 0 {
                        out.push(Raw {
                            start: i + 1,
                            end: close,
                        });
                    }
                }
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
            match number_at(code, i) {
                Ok(raw) => {
                    i = raw.end;
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

/// The number starting at `s` (a digit or `.`), with a unary sign before it, or `Err(where to
/// continue)` when it is part of something that is not a parameter (version, date, hex, identifier).
fn number_at(code: &[u8], s: usize) -> Result<Raw, usize> {
    let n = code.len();
    let digits = |mut i: usize| {
        while i < n && code[i].is_ascii_digit() {
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
    if e < n && is_word(code[e]) {
        return Err(skip_run(e, &[]));
    }
    let digit_at = |k: usize| k < n && code[k].is_ascii_digit();
    if e < n && code[e] == b'.' && digit_at(e + 1) {
        return Err(skip_run(e, &[]));
    }
    if e < n && matches!(code[e], b'-' | b':' | b'/') && digit_at(e + 1) {
        return Err(skip_run(e, b"-:/"));
    }
    if s > 0 && matches!(code[s - 1], b'.' | b'#' | b'$' | b'\\' | b'@') {
        return Err(e);
    }
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
    Ok(Raw { start, end: e })
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
