//! Reading numbers in code: comments per syntax, the marker on a line, number literals with
//! their suffixes, whole numbers and lists of numbers.

use super::*;

pub(super) fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// Byte offset where the line's comment starts, by the file's comment syntax. Quotes are
/// skipped.
pub(super) fn comment_start(line: &str, syn: Syntax) -> Option<usize> {
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
pub(super) fn line_marker(line: &str, syn: Syntax) -> Option<Marker> {
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

pub(super) fn parse_spec(spec: &str) -> Marker {
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
pub(super) fn lex_number(
    code: &[u8],
    s: usize,
    syn: Syntax,
) -> Result<(usize, usize, bool), usize> {
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
pub(super) fn suffix(code: &[u8], e: usize, syn: Syntax) -> (usize, bool) {
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
pub(super) fn number_at(code: &[u8], s: usize, syn: Syntax) -> Result<(Raw, usize), usize> {
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
pub(super) fn whole_number(code: &[u8], from: usize, to: usize, syn: Syntax) -> Option<Raw> {
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
pub(super) fn list_numbers(code: &[u8], from: usize, to: usize, syn: Syntax) -> Option<Vec<Raw>> {
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
