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
    /// Where each frozen pattern came from, in `frozen`'s order (`Frozen`, or `named by the
    /// evaluation command`): said in rejections and in the rules `start` prints.
    pub frozen_sources: Vec<String>,
    pub forbidden: PathRules,
    /// None when the allowed list is prose (then everything not forbidden is allowed).
    pub allowed: Option<PathRules>,
    /// Forbidden items that name no path: agents are told, but the diff cannot be checked.
    pub unenforced: Vec<String>,
    /// Files the evaluation commands name that an Allowed changes item allows: not frozen (the
    /// user's word wins), listed by `start`.
    pub released: Vec<String>,
}

/// Where an explicitly frozen pattern comes from.
pub const FROZEN_BY_USER: &str = "Frozen";

/// Where the frozen Goal brief (`- brief: program.md`) comes from.
pub const FROZEN_AS_BRIEF: &str = "the Goal's brief";

/// Which frozen paths are inferred: the committed files each evaluation command names, with the
/// command that names them. The user's word wins: a file an Allowed changes item names is not
/// frozen by inference, and `frozen: none` turns inference off. Pure, so the table of cases is
/// unit-tested (see `tests::frozen_inference_table`).
pub fn inferred_frozen(
    config: &crate::config::Config,
    allowed: &PathRules,
    exists: &dyn Fn(&str) -> bool,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut frozen: Vec<(String, String)> = Vec::new();
    let mut released = Vec::new();
    if config.evaluation.frozen_none {
        return (frozen, released);
    }
    let ev = &config.evaluation;
    let named = [
        (Some(&ev.command), "evaluation"),
        (ev.holdout.as_ref(), "holdout"),
        (ev.judge.as_ref(), "judge"),
    ];
    for (command, which) in named {
        let Some(command) = command else { continue };
        for file in command_files(command, exists) {
            let explicit = PathRules::new(&ev.frozen).matches(&file);
            if explicit || frozen.iter().any(|(f, _)| *f == file) || released.contains(&file) {
                continue;
            }
            if allowed.matches(&file) {
                released.push(file);
            } else {
                frozen.push((file, format!("named by the {which} command")));
            }
        }
    }
    (frozen, released)
}

impl Guard {
    /// The rules of `config`; `exists` says whether the baseline has a path (files and folders).
    /// Frozen are the `frozen` patterns plus every committed file the evaluation, hold-out and
    /// judge commands name (unless Allowed changes names it), so a candidate can never change how
    /// it is measured without the user saying so.
    pub fn new(config: &crate::config::Config, exists: &dyn Fn(&str) -> bool) -> Self {
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
        let named_allowed = PathRules::new(&allowed_tokens.concat());
        let allowed = (!allowed_tokens.is_empty() && allowed_tokens.iter().all(|t| !t.is_empty()))
            .then(|| named_allowed.clone());
        let mut frozen = config.evaluation.frozen.clone();
        let mut frozen_sources = vec![FROZEN_BY_USER.to_string(); frozen.len()];
        let (inferred, released) = inferred_frozen(config, &named_allowed, exists);
        for (file, source) in inferred {
            frozen.push(file);
            frozen_sources.push(source);
        }
        // The Goal's brief is part of every prompt: an agent rewriting it would brief the others.
        if let Some(brief) = config.brief.as_ref().filter(|b| !frozen.contains(b)) {
            frozen.push(brief.clone());
            frozen_sources.push(FROZEN_AS_BRIEF.to_string());
        }
        Guard {
            frozen: PathRules::new(&frozen),
            frozen_sources,
            forbidden: PathRules::new(&forbidden),
            allowed,
            unenforced,
            released,
        }
    }

    /// Every frozen pattern, the implicit ones included (for prompts and messages).
    pub fn frozen_patterns(&self) -> &[String] {
        &self.frozen.patterns
    }

    /// Why `pattern` is frozen: `Frozen: data/**` for the user's list, `named by the evaluation
    /// command` for an inferred file.
    fn frozen_because(&self, pattern: &str) -> String {
        let index = self.frozen.patterns.iter().position(|p| p == pattern);
        match index.and_then(|i| self.frozen_sources.get(i)) {
            Some(source) if source == FROZEN_BY_USER => format!("{FROZEN_BY_USER}: {pattern}"),
            Some(source) => source.clone(),
            None => format!("frozen: {pattern}"),
        }
    }

    /// The effective path rules, one line each, with where each came from (printed by `start`).
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let frozen: Vec<String> = self
            .frozen
            .patterns
            .iter()
            .zip(&self.frozen_sources)
            .map(|(p, s)| format!("{p} ({s})"))
            .collect();
        lines.push(format!(
            "frozen: {}",
            if frozen.is_empty() {
                "none".to_string()
            } else {
                frozen.join(", ")
            }
        ));
        match &self.allowed {
            Some(a) => lines.push(format!("allowed: {}", a.patterns.join(", "))),
            None => lines.push("allowed: anything not frozen or forbidden".to_string()),
        }
        for file in &self.released {
            lines.push(format!(
                "not frozen: {file} (named by an evaluation command, but Allowed changes allows it)"
            ));
        }
        if !self.forbidden.is_empty() {
            lines.push(format!("forbidden: {}", self.forbidden.patterns.join(", ")));
        }
        lines
    }

    /// The first rule the changed paths break, as a sentence.
    pub fn violation(&self, changed: &[String]) -> Option<String> {
        for path in changed {
            if let Some(p) = self.frozen.matching_pattern(path) {
                return Some(format!(
                    "changes frozen path {path} ({})",
                    self.frozen_because(p)
                ));
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

    /// Which files are frozen, and why, for the layouts people write.
    #[test]
    fn frozen_inference_table() {
        let exists = |p: &str| {
            matches!(
                p,
                "eval.sh" | "train.py" | "prepare.py" | "src/bench.py" | "holdout.sh"
            )
        };
        // (command, frozen, allowed, holdout) → (frozen with provenance, released)
        type Row<'a> = (&'a str, &'a [&'a str], &'a [&'a str], Option<&'a str>);
        let table: &[(Row, &[&str], &[&str])] = &[
            // The autoresearch layout: the user's word wins.
            (
                ("python3 train.py", &["prepare.py"], &["train.py"], None),
                &["prepare.py (Frozen)"],
                &["train.py"],
            ),
            // A harness script is frozen by inference.
            (
                ("./eval.sh", &[], &["train.py"], None),
                &["eval.sh (named by the evaluation command)"],
                &[],
            ),
            // Explicit and inferred: listed once, as the user wrote it.
            (
                ("./eval.sh", &["eval.sh"], &[], None),
                &["eval.sh (Frozen)"],
                &[],
            ),
            // Prose allows nothing by name: inference stands.
            (
                ("python3 train.py", &[], &["any hyperparameter"], None),
                &["train.py (named by the evaluation command)"],
                &[],
            ),
            // A glob the user allowed releases a file under it.
            (
                ("python3 src/bench.py", &[], &["src/**"], None),
                &[],
                &["src/bench.py"],
            ),
            // The hold-out command's files are frozen too, with their own provenance.
            (
                ("./eval.sh", &[], &[], Some("./holdout.sh")),
                &[
                    "eval.sh (named by the evaluation command)",
                    "holdout.sh (named by the holdout command)",
                ],
                &[],
            ),
        ];
        for ((command, frozen, allowed, holdout), want_frozen, want_released) in table {
            let mut c = config(frozen, &[], allowed);
            c.evaluation.command = command.to_string();
            c.evaluation.holdout = holdout.map(str::to_string);
            let g = Guard::new(&c, &exists);
            let got: Vec<String> = g
                .frozen_patterns()
                .iter()
                .zip(&g.frozen_sources)
                .map(|(p, s)| format!("{p} ({s})"))
                .collect();
            assert_eq!(
                got, *want_frozen,
                "{command} frozen {frozen:?} allowed {allowed:?}"
            );
            assert_eq!(g.released, *want_released, "{command}");
        }
        // `frozen: none` turns inference off.
        let mut c = config(&[], &[], &[]);
        c.evaluation.frozen_none = true;
        let g = Guard::new(&c, &exists);
        assert!(g.frozen_patterns().is_empty());
        assert_eq!(g.describe()[0], "frozen: none");
        // Rejections say where the rule came from.
        let mut c = config(&["prepare.py"], &[], &["train.py"]);
        c.evaluation.command = "python3 train.py && ./eval.sh".into();
        let g = Guard::new(&c, &exists);
        assert_eq!(
            g.violation(&["eval.sh".into()]).unwrap(),
            "changes frozen path eval.sh (named by the evaluation command)"
        );
        assert_eq!(
            g.violation(&["prepare.py".into()]).unwrap(),
            "changes frozen path prepare.py (Frozen: prepare.py)"
        );
        assert!(g.violation(&["train.py".into()]).is_none());
        assert_eq!(
            g.describe()[..2],
            [
                "frozen: prepare.py (Frozen), eval.sh (named by the evaluation command)",
                "allowed: train.py"
            ]
        );
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
