//! Finding the numeric literals `builtin:tune` may change, and rewriting one of them without
//! touching any other byte of the file. Implements the marker convention of `README.md`: a comment
//! on a line that says `tune` marks the literals before it (with optional `int`/`float` and
//! `[lo, hi]`); if any file has a marker, only marked literals count. Without markers only a
//! number that is the whole value of an assignment or key (`lr = 3e-4`, `lr: 0.1`, `"lr": 5`,
//! `--lr 0.1`, `#define LR 0.1`), or an element of a list that is (`betas: [0.9, 0.999]`), counts:
//! numbers inside expressions, commands, versions or strings are never touched. What a comment is
//! depends on the file type (`#` in shell and Python, `//` in C and Rust, `--` in SQL…), so
//! `q = a // 2` in Python and `#define` in C read right.
//!
//! The folder: what a literal is and the public calls here; `scan` (which literals a file has),
//! `lex` and `assign` (reading numbers and names in code), `values` (a value as written).

mod assign;
mod lex;
mod scan;
pub(crate) mod values;

use assign::scan_code;
use lex::{comment_start, line_marker};
use scan::{has_marker, lines, scan};
use std::collections::BTreeMap;
use values::{format_like, quantize};

use crate::researchers::tune::Literal;

/// Significant digits kept when a float literal is written.
pub(crate) const SIG_DIGITS: i32 = 6;

/// What a `tune` marker comment says about the literals on its line.
#[derive(Debug, Clone, Default)]
struct Marker {
    pub(super) integer: Option<bool>,
    pub(super) lower: Option<f64>,
    pub(super) upper: Option<f64>,
    /// A `[lo, hi]` that cannot be used, and why.
    pub(super) error: Option<String>,
}

/// A literal found on one line, positions relative to the line (the number with its sign,
/// without a type suffix such as `f`).
#[derive(Debug, Clone, Copy)]
struct Raw {
    pub(super) start: usize,
    pub(super) end: usize,
    /// Written with a floating-point type suffix (`0.5f`, `1f`, `2.0f64`).
    pub(super) float_suffix: bool,
}

/// How comments and number suffixes look in a file, from its extension (or its `#!` line).
#[derive(Debug, Clone, Copy, Default)]
struct Syntax {
    /// `#` starts a comment at the start of a word (shell, YAML, …) or, with `hash_anywhere`,
    /// anywhere outside a string (Python, Ruby, R, TOML).
    pub(super) hash: bool,
    pub(super) hash_anywhere: bool,
    /// `//` and `/* */` start comments (C family, Rust, Go, Java, JavaScript…).
    pub(super) slash: bool,
    /// `#` at the start of a line is a preprocessor directive (`#define NAME 1.5`).
    pub(super) preproc: bool,
    /// `--` starts a comment (SQL, Lua, Haskell).
    pub(super) dash: bool,
    /// `;` starts a comment at the start of a line (INI) or, with `semi_anywhere`, anywhere (Lisp,
    /// assembly).
    pub(super) semi: bool,
    pub(super) semi_anywhere: bool,
    /// `%` starts a comment (TeX, MATLAB, Erlang).
    pub(super) percent: bool,
    /// Numbers may carry a type suffix (`0.5f`, `10L`, `2.0f64`).
    pub(super) suffixes: bool,
    /// YAML: `- 0.5` items of a block list belong to the key above them.
    pub(super) yaml: bool,
    /// Unknown file type: the old mix of heuristics (`#` or `;` at the start of a word, `//` not
    /// after `:`, `-- `, `%` at the start of a line).
    pub(super) generic: bool,
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

/// The literals of one file as key → value (what `git::changes` compares across a commit).
pub fn literal_values(path: &str, text: &str) -> BTreeMap<String, f64> {
    find_literals(path, text)
        .into_iter()
        .map(|l| (l.key, l.value))
        .collect()
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
