//! Assignments: the operator, the name on the left (the literal's key), the numbers on the
//! right, and the key a number in a call or table falls under.

use super::lex::{is_word, list_numbers, number_at, whole_number};
use super::*;

/// Where the assignment operator of a line is (`=`, `:=` or a key's `:`), outside strings and
/// brackets: (position, length, is `=`).
pub(super) fn assignment_operator(b: &[u8]) -> Option<(usize, usize, bool)> {
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
pub(super) fn lhs_name(lhs: &str, equals: bool) -> Option<String> {
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
pub(super) fn assignment(code: &str, syn: Syntax) -> Vec<(Raw, String)> {
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
pub(super) fn scan_code(code: &[u8], syn: Syntax) -> Vec<Raw> {
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
pub(super) fn key_before(prefix: &str) -> Option<String> {
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

/// Words that begin statements, not assignments (`if x: 3`, `echo a=1`).
pub(super) fn control_word(word: &str) -> bool {
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
