//! Which paths a candidate may touch: frozen paths (the evaluation harness), forbidden changes
//! and, when every allowed item names paths, the allowed set.
//!
//! Search Space items are prose that may contain paths (`benches/** and tests/** (the evaluation
//! harness)`, `Do not change the public API.`). Tokens that look like paths or globs become
//! patterns; the prose still goes to the agent verbatim.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// A set of path patterns with gitignore-like meaning: `name` matches at any depth, `dir/` or
/// `dir/**` everything below, `a/*.rs` relative to the repository root.
#[derive(Clone)]
pub struct PathRules {
    patterns: Vec<String>,
    set: GlobSet,
}

impl PathRules {
    pub fn new(patterns: &[String]) -> Self {
        let mut builder = GlobSetBuilder::new();
        for p in patterns {
            for glob in expand(p) {
                if let Ok(g) = Glob::new(&glob) {
                    builder.add(g);
                }
            }
        }
        PathRules {
            patterns: patterns.to_vec(),
            set: builder.build().unwrap_or_else(|_| GlobSet::empty()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    pub fn matches(&self, path: &str) -> bool {
        self.set.is_match(path)
    }

    /// The first pattern matching `path`, for messages.
    pub fn matching_pattern(&self, path: &str) -> Option<&str> {
        self.patterns
            .iter()
            .find(|p| PathRules::new(std::slice::from_ref(p)).matches(path))
            .map(String::as_str)
    }
}

fn expand(pattern: &str) -> Vec<String> {
    let p = pattern.trim().trim_start_matches("./");
    let p = p.strip_prefix('/').unwrap_or(p);
    if p.is_empty() {
        return vec![];
    }
    let base = p.trim_end_matches('/');
    let mut out = vec![base.to_string(), format!("{base}/**")];
    if !base.contains('/') {
        out.push(format!("**/{base}"));
        out.push(format!("**/{base}/**"));
    }
    out
}

/// Path-like tokens in a Search Space item: backquoted text, or words containing `/`, `*` or a
/// file extension. An item that is a single bare word (`Makefile`, `vendor`) is a path when the
/// baseline has it (`exists`); in longer prose a bare word is just a word.
pub fn path_tokens(item: &str, exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = item;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        match after.find('`') {
            Some(end) => {
                let token = after[..end].trim();
                if looks_like_path(token) || (is_path_word(token) && exists(plain(token))) {
                    out.push(token.to_string());
                }
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    if !out.is_empty() {
        return out;
    }
    for word in item.split_whitespace() {
        let word = word.trim_matches(|c: char| matches!(c, ',' | ';' | '(' | ')' | '"' | '\''));
        let word = word.strip_suffix(':').unwrap_or(word);
        if looks_like_path(word) {
            out.push(word.to_string());
        }
    }
    if out.is_empty() {
        // `- Makefile`, `- vendor (third-party code)`: one word before any parenthesis.
        let head = item.split('(').next().unwrap_or("").trim();
        let head = head.trim_end_matches(['.', ',', ';', ':']);
        if !head.contains(char::is_whitespace) && is_path_word(head) && exists(plain(head)) {
            out.push(head.to_string());
        }
    }
    out
}

/// `./x/` → `x`: the form a tree lookup takes.
fn plain(word: &str) -> &str {
    word.trim_start_matches("./").trim_matches('/')
}

fn is_path_word(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
}

/// Files a command names that the baseline has: `./eval.sh`, `python3 bench/run.py --data
/// data/val.csv`. They are the evaluation harness even when `frozen` does not list them.
pub fn command_files(command: &str, exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let separators = |c: char| c.is_whitespace() || ";&|()<>=".contains(c);
    for word in command.split(separators) {
        let word = word.trim_matches(|c: char| "\"'`${}".contains(c));
        if word.starts_with('-') || !is_path_word(word) {
            continue;
        }
        let path = plain(word);
        if !path.is_empty() && exists(path) && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

fn looks_like_path(word: &str) -> bool {
    if word.is_empty() || word.contains(' ') || word.starts_with("http") {
        return false;
    }
    if !word.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(c, '/' | '*' | '.' | '_' | '-' | '?' | '[' | ']' | '{' | '}')
    }) {
        return false;
    }
    if word.contains('/') || word.contains('*') {
        return true;
    }
    // name.ext, with letters after the dot (not "API." nor "1.5")
    match word.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && !ext.is_empty()
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

/// Why a candidate may not be evaluated, if it may not.
pub struct Guard {
    pub frozen: PathRules,
    pub forbidden: PathRules,
    /// None when the allowed list is prose (then everything not forbidden is allowed).
    pub allowed: Option<PathRules>,
    /// Forbidden items that name no path: agents are told, but the diff cannot be checked.
    pub unenforced: Vec<String>,
}

impl Guard {
    /// The rules of `config`; `exists` says whether the baseline has a path (files and folders).
    /// Frozen are the `frozen` patterns plus every committed file the evaluation, hold-out and
    /// judge commands name, so a candidate can never change how it is measured.
    pub fn new(config: &crate::config::Config, exists: &dyn Fn(&str) -> bool) -> Self {
        let mut frozen = config.evaluation.frozen.clone();
        let ev = &config.evaluation;
        for command in std::iter::once(&ev.command)
            .chain(&ev.holdout)
            .chain(&ev.judge)
        {
            for file in command_files(command, exists) {
                if !frozen.contains(&file) {
                    frozen.push(file);
                }
            }
        }
        let mut forbidden = Vec::new();
        let mut unenforced = Vec::new();
        for item in &config.forbidden {
            let tokens = path_tokens(item, exists);
            if tokens.is_empty() {
                unenforced.push(item.clone());
            }
            forbidden.extend(tokens);
        }
        let allowed_tokens: Vec<Vec<String>> = config
            .allowed
            .iter()
            .map(|i| path_tokens(i, exists))
            .collect();
        let allowed = (!allowed_tokens.is_empty() && allowed_tokens.iter().all(|t| !t.is_empty()))
            .then(|| PathRules::new(&allowed_tokens.concat()));
        Guard {
            frozen: PathRules::new(&frozen),
            forbidden: PathRules::new(&forbidden),
            allowed,
            unenforced,
        }
    }

    /// Every frozen pattern, the implicit ones included (for prompts and messages).
    pub fn frozen_patterns(&self) -> &[String] {
        &self.frozen.patterns
    }

    /// The first rule the changed paths break, as a sentence.
    pub fn violation(&self, changed: &[String]) -> Option<String> {
        for path in changed {
            if let Some(p) = self.frozen.matching_pattern(path) {
                return Some(format!("changes frozen path {path} (frozen: {p})"));
            }
            if let Some(p) = self.forbidden.matching_pattern(path) {
                return Some(format!("changes forbidden path {path} (forbidden: {p})"));
            }
            if let Some(allowed) = &self.allowed {
                if !allowed.matches(path) {
                    return Some(format!("changes {path}, outside the allowed changes"));
                }
            }
        }
        None
    }

    /// Whether the built-in tuner may edit `path`.
    pub fn may_edit(&self, path: &str) -> bool {
        self.violation(&[path.to_string()]).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> bool {
        false
    }

    #[test]
    fn tokens_from_prose() {
        assert_eq!(
            path_tokens("benches/** and tests/** (the evaluation harness)", &none),
            vec!["benches/**", "tests/**"]
        );
        assert!(path_tokens("Do not change the public API.", &none).is_empty());
        assert_eq!(
            path_tokens("Cargo.toml (features only)", &none),
            vec!["Cargo.toml"]
        );
        assert_eq!(path_tokens("the `eval.sh` harness", &none), vec!["eval.sh"]);
        assert!(path_tokens("learning rate 1.5 or so", &none).is_empty());
    }

    #[test]
    fn bare_names_are_paths_when_the_baseline_has_them() {
        let exists = |p: &str| matches!(p, "Makefile" | "vendor" | "tests");
        assert_eq!(path_tokens("Makefile", &exists), vec!["Makefile"]);
        assert_eq!(path_tokens("vendor (third-party)", &exists), vec!["vendor"]);
        assert_eq!(path_tokens("`vendor`", &exists), vec!["vendor"]);
        assert!(path_tokens("Makefile", &none).is_empty());
        // In a sentence a bare word stays a word.
        assert!(path_tokens("do not weaken the tests", &exists).is_empty());
    }

    #[test]
    fn commands_name_their_harness() {
        let exists = |p: &str| matches!(p, "eval.sh" | "bench/run.py" | "data/val.csv");
        assert_eq!(command_files("./eval.sh", &exists), vec!["eval.sh"]);
        assert_eq!(
            command_files(
                "python3 bench/run.py --data=data/val.csv > out.txt",
                &exists
            ),
            vec!["bench/run.py", "data/val.csv"]
        );
        assert_eq!(
            command_files("sh -c 'sh eval.sh | tail -1'", &exists),
            vec!["eval.sh"]
        );
        assert!(command_files("make bench", &exists).is_empty());
    }

    fn config(frozen: &[&str], forbidden: &[&str], allowed: &[&str]) -> crate::config::Config {
        let text = crate::config::template::render(&Default::default());
        let mut c = crate::config::load(&text).unwrap();
        c.evaluation.command = "./eval.sh".into();
        c.evaluation.frozen = frozen.iter().map(|s| s.to_string()).collect();
        c.forbidden = forbidden.iter().map(|s| s.to_string()).collect();
        c.allowed = allowed.iter().map(|s| s.to_string()).collect();
        c
    }

    #[test]
    fn rules() {
        let exists = |p: &str| p == "eval.sh";
        let g = Guard::new(
            &config(
                &["data/**"],
                &["benches/** (harness)", "Be nice."],
                &["src/** and Cargo.toml"],
            ),
            &exists,
        );
        assert!(g.violation(&["eval.sh".into()]).unwrap().contains("frozen"));
        assert!(g
            .violation(&["data/x/y.csv".into()])
            .unwrap()
            .contains("frozen"));
        assert!(g
            .violation(&["benches/a.rs".into()])
            .unwrap()
            .contains("forbidden"));
        assert!(g
            .violation(&["README.md".into()])
            .unwrap()
            .contains("outside"));
        assert!(g
            .violation(&["src/lib.rs".into(), "Cargo.toml".into()])
            .is_none());
        assert_eq!(g.unenforced, vec!["Be nice."]);
        let prose = Guard::new(&config(&[], &[], &["any hyperparameter"]), &none);
        assert!(prose.violation(&["x.txt".into()]).is_none());
    }
}
