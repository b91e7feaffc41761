//! A literal's values as written: rounded to what its spelling can hold, compared in canonical
//! form, and formatted like the original (digits, exponent, separators, integer or float).

use super::*;
use crate::researchers::tune::Literal;

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

pub(super) fn split_exp(body: &str) -> (&str, Option<&str>) {
    match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i..])),
        None => (body, None),
    }
}

/// Fewest decimals (at least `at_least`) that write `v` exactly to six significant digits.
pub(super) fn min_decimals(v: f64, at_least: usize) -> usize {
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
pub(super) fn group(digits: &str) -> String {
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
