//! The Agent and Constraints settings of conference.md: parsed, checked per line against what the
//! chosen agent preset (`crate::agents::preset`) can honour.

use crate::config::{load, template, ConfigError};

/// The `init` template with its agent command and budgets replaced, and `extra` lines
/// added to `## Agent`.
pub(crate) fn conference(command: &str, tokens: &str, cost: &str, extra: &[&str]) -> String {
    let text = template::render(&Default::default());
    let mut agent = format!("- **Command:** {command}");
    for line in extra {
        agent.push('\n');
        agent.push_str(line);
    }
    text.replace("- **Command:** builtin:tune", &agent)
        .replace(
            "- **Token budget:** none",
            &format!("- **Token budget:** {tokens}"),
        )
        .replace(
            "- **Cost budget:** none",
            &format!("- **Cost budget:** {cost}"),
        )
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

fn errors(text: &str) -> Vec<ConfigError> {
    load(text).err().unwrap_or_default()
}

#[test]
fn presets_take_their_options() {
    let text = conference(
        "claude",
        "2M tokens",
        "$20",
        &[
            "- model: claude-sonnet-4-5",
            "- max turns: 30",
            "- extra args: --verbose",
        ],
    );
    let c = load(&text).unwrap();
    assert_eq!(c.token_budget, Some(2_000_000));
    assert_eq!(c.cost_budget, Some(20.0));
    assert_eq!(c.agent.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(c.agent.max_turns, Some(30));
    assert_eq!(
        c.agent_command(),
        "claude -p --permission-mode acceptEdits --output-format json --model claude-sonnet-4-5 \
         --max-turns 30 --max-budget-usd \"$CONFERENCE_MAX_BUDGET_USD\" --verbose < \"$CONFERENCE_PROMPT_FILE\""
    );
    for (written, tokens) in [
        ("500k", 500_000),
        ("2000000", 2_000_000),
        ("1,500,000 tokens", 1_500_000),
    ] {
        let c = load(&conference("codex", written, "none", &[])).unwrap();
        assert_eq!(c.token_budget, Some(tokens), "{written}");
    }
    for (written, usd) in [("20 USD", 20.0), ("$12.50", 12.5), ("7 dollars", 7.0)] {
        let c = load(&conference("aider", "none", written, &[])).unwrap();
        assert_eq!(c.cost_budget, Some(usd), "{written}");
    }
    // An explicit command line stays as written.
    let c = load(&conference("./agent.sh --fast", "none", "none", &[])).unwrap();
    assert_eq!(c.agent_command(), "./agent.sh --fast");
}

#[test]
fn what_a_preset_cannot_honour_is_an_error_on_its_line() {
    let text = conference("codex", "none", "none", &["- max turns: 5"]);
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].line, line_of(&text, "- max turns"));
    assert!(e[0].message.contains("Codex has no turn limit"), "{e:#?}");

    let text = conference(
        "./agent.sh",
        "none",
        "none",
        &["- model: gpt-5", "- extra args: -v"],
    );
    let e = errors(&text);
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!(e[0].line, line_of(&text, "- model: gpt-5"));
    assert_eq!(e[1].line, line_of(&text, "- extra args: -v"));

    let text = conference("opencode", "none", "none", &["- model: claude-sonnet-4-5"]);
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].line, line_of(&text, "- model: claude-sonnet-4-5"));
    assert!(e[0].message.contains("provider/model"), "{e:#?}");
    assert!(e[0].hint.contains("anthropic/claude-sonnet-4-5"), "{e:#?}");
    assert!(errors(&conference(
        "opencode",
        "none",
        "none",
        &["- model: anthropic/claude-sonnet-4-5"]
    ))
    .is_empty());

    let text = conference("claude", "none", "none", &["- extra args: --x; rm -rf ~"]);
    let e = errors(&text);
    assert!(e[0].message.contains("shell operator"), "{e:#?}");
}

#[test]
fn budgets_that_are_not_amounts_are_errors_on_their_line() {
    let text = conference("claude", "lots", "twenty", &[]);
    let e = errors(&text);
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!(e[0].line, line_of(&text, "- **Token budget:**"));
    assert!(e[0].message.contains("number of tokens") && e[0].hint.contains("2M tokens"));
    assert_eq!(e[1].line, line_of(&text, "- **Cost budget:**"));
    assert!(e[1].message.contains("US dollars") && e[1].hint.contains("$20"));
    assert!(!errors(&conference("claude", "-5", "0", &[])).is_empty());
}
