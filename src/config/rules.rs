//! Checks across settings that only make sense together: a path the user both froze
//! (`## Evaluation` → `frozen`) and allowed (`**Allowed changes:**`) is a contradiction the
//! conference cannot resolve for them, so it is an error naming both lines.

use super::parse::{unquote, Document, Setting};
use super::sections::SectionKind;
use super::ConfigError;
use crate::config::paths::{path_tokens, PathRules};

/// Every path both frozen and allowed, as an error on the frozen line naming the allowed one.
pub fn frozen_and_allowed(doc: &Document) -> Vec<ConfigError> {
    let frozen = entries(doc.setting(SectionKind::Evaluation, "frozen"), true);
    let allowed = entries(
        doc.setting(SectionKind::SearchSpace, "Allowed changes"),
        false,
    );
    let mut errors = Vec::new();
    for (f, f_line) in &frozen {
        for (item, a_line) in &allowed {
            let Some(path) = path_tokens(item, &|_| false)
                .into_iter()
                .find(|a| overlap(f, a))
            else {
                continue;
            };
            errors.push(ConfigError {
                line: *f_line,
                message: format!(
                    "`{path}` is both frozen (line {f_line}: frozen: {f}) and allowed (line \
                     {a_line}: Allowed changes: {item})"
                ),
                hint: format!(
                    "say which: remove `{f}` from `- frozen:` (line {f_line}) if researchers may \
                     change it, or remove line {a_line} if it is the evaluation harness"
                ),
            });
        }
    }
    errors
}

/// `(text, line)` of a setting's values: the inline value and each bullet item (comma-separated
/// for `frozen`).
fn entries(setting: Option<&Setting>, split: bool) -> Vec<(String, usize)> {
    let Some(s) = setting else { return vec![] };
    std::iter::once((s.value.as_str(), s.line))
        .chain(s.items.iter().map(|i| (i.value.as_str(), i.line)))
        .flat_map(|(v, line)| {
            let parts: Vec<&str> = if split {
                v.split(',').collect()
            } else {
                vec![v]
            };
            parts
                .into_iter()
                .map(move |p| (unquote(p).to_string(), line))
        })
        .filter(|(v, _)| !v.is_empty() && !super::parse::is_placeholder(v))
        .collect()
}

fn is_glob(p: &str) -> bool {
    p.contains(['*', '?', '['])
}

/// Two patterns name a common path: equal, or one is a plain path the other matches.
fn overlap(frozen: &str, allowed: &str) -> bool {
    let plain = |p: &str| p.trim_start_matches("./").trim_end_matches('/').to_string();
    let (f, a) = (plain(frozen), plain(allowed));
    f == a
        || (!is_glob(&a) && PathRules::new(std::slice::from_ref(&f)).matches(&a))
        || (!is_glob(&f) && PathRules::new(std::slice::from_ref(&a)).matches(&f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(frozen: &str, allowed: &[&str]) -> Vec<ConfigError> {
        let mut text =
            format!("## Evaluation\n- frozen: {frozen}\n## Search Space\n**Allowed changes:**\n");
        for a in allowed {
            text.push_str(&format!("- {a}\n"));
        }
        let (doc, _) = super::super::parse::read(&text);
        frozen_and_allowed(&doc)
    }

    #[test]
    fn a_path_both_frozen_and_allowed_names_both_lines() {
        let e = errors("prepare.py, train.py", &["train.py"]);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_eq!(e[0].line, 2);
        assert!(
            e[0].message.contains("line 2") && e[0].message.contains("line 5"),
            "{e:#?}"
        );
        // A glob that covers an allowed file, and a folder that holds it.
        assert_eq!(errors("*.py", &["train.py"]).len(), 1);
        assert_eq!(errors("src/", &["`src/model.py` (the model)"]).len(), 1);
        // Disjoint rules, prose, and globs that merely could overlap are fine.
        assert!(errors("prepare.py, data/**", &["train.py", "src/**"]).is_empty());
        assert!(errors("eval.sh", &["any hyperparameter"]).is_empty());
        assert!(errors("data/**", &["src/**"]).is_empty());
    }
}
