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
/// file extension.
pub fn path_tokens(item: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = item;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        match after.find('`') {
            Some(end) => {
                let token = after[..end].trim();
                if looks_like_path(token) {
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
}

impl Guard {
    pub fn new(frozen: &[String], forbidden_items: &[String], allowed_items: &[String]) -> Self {
        let forbidden: Vec<String> = forbidden_items
            .iter()
            .flat_map(|i| path_tokens(i))
            .collect();
        let allowed_tokens: Vec<Vec<String>> =
            allowed_items.iter().map(|i| path_tokens(i)).collect();
        let allowed = (!allowed_tokens.is_empty() && allowed_tokens.iter().all(|t| !t.is_empty()))
            .then(|| PathRules::new(&allowed_tokens.concat()));
        Guard {
            frozen: PathRules::new(frozen),
            forbidden: PathRules::new(&forbidden),
            allowed,
        }
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

    #[test]
    fn tokens_from_prose() {
        assert_eq!(
            path_tokens("benches/** and tests/** (the evaluation harness)"),
            vec!["benches/**", "tests/**"]
        );
        assert!(path_tokens("Do not change the public API.").is_empty());
        assert_eq!(
            path_tokens("Cargo.toml (features only)"),
            vec!["Cargo.toml"]
        );
        assert_eq!(path_tokens("the `eval.sh` harness"), vec!["eval.sh"]);
        assert!(path_tokens("learning rate 1.5 or so").is_empty());
    }

    #[test]
    fn rules() {
        let g = Guard::new(
            &["eval.sh".into(), "data/**".into()],
            &["benches/** (harness)".into()],
            &["src/** and Cargo.toml".into()],
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
        let prose = Guard::new(&[], &[], &["any hyperparameter".into()]);
        assert!(prose.violation(&["x.txt".into()]).is_none());
    }
}
