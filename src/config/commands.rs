//! Everything a conference would run on this machine, read from its config: the agent's command
//! line (a preset as expanded), the evaluation, hold-out and judge, command guards, the
//! environment's setup and the prose roles' commands, and, for `builtin:openai`, where it sends
//! the code and which variable's key it sends, and the MLflow server attempts would be sent to.
//!
//! The trust gate (`crate::trust`) approves this list by hash, so it must name every way a
//! conference fetched from someone else could make this machine do something. Hooks are not in it:
//! they are local (git config or the git directory), never part of a conference's config.

use super::guard::{self, GuardItem};
use super::Config;
use crate::agents::Kind;

/// One thing the conference would run, and the setting it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub role: &'static str,
    pub line: String,
}

/// Every command `cfg` would run, in a fixed order (the order is part of the approval's hash).
pub fn list(cfg: &Config) -> Vec<Command> {
    let mut out = Vec::new();
    let mut push = |role: &'static str, line: &str| {
        if !line.trim().is_empty() {
            out.push(Command {
                role,
                line: line.to_string(),
            });
        }
    };
    push("agent", &agent_line(cfg));
    push("evaluation", &cfg.evaluation.command);
    if let Some(c) = &cfg.evaluation.holdout {
        push("hold-out", c);
    }
    if let Some(c) = &cfg.evaluation.judge {
        push("judge", c);
    }
    for item in &cfg.guard {
        if let Ok(GuardItem::Command(c)) = guard::classify(item) {
            push("guard", &c);
        }
    }
    if let Some(c) = &cfg.environment.setup {
        push("setup", c);
    }
    for (role, c) in [
        ("chair", &cfg.agent.chair),
        ("reviewer", &cfg.agent.reviewer),
        ("synthesizer", &cfg.agent.synthesizer),
        ("retrospective", &cfg.agent.retrospective),
    ] {
        if let Some(c) = c {
            push(role, c);
        }
    }
    // Not a command, but where this machine would send the attempts (diffs included).
    if let Some(m) = &cfg.environment.mlflow {
        let to = m.uri.as_deref().unwrap_or("$MLFLOW_TRACKING_URI");
        push(
            "tracker",
            &format!("MLflow (sends each attempt, its metrics and its diff to {to})"),
        );
    }
    out
}

/// The agent as it would run: a command line, or what a built-in agent does that matters.
fn agent_line(cfg: &Config) -> String {
    let a = &cfg.agent;
    match a.kind() {
        Kind::OpenAi => format!(
            "builtin:openai (sends the allowed files to {}, with the key in ${})",
            a.base_url.as_deref().unwrap_or("$OPENAI_BASE_URL"),
            a.api_key_env.as_deref().unwrap_or("OPENAI_API_KEY")
        ),
        Kind::Tune | Kind::UnknownBuiltin(_) => String::new(),
        Kind::Preset(..) | Kind::Command => cfg.agent_command(),
    }
}

/// A stable digest of `commands` (SHA-256, hex): what an approval records.
pub fn digest(commands: &[Command]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for c in commands {
        h.update(c.role.as_bytes());
        h.update([0]);
        h.update(c.line.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "# Conference: t\n## Goal\ng\n## Mode\nmetric\n## Success Metric\n- **Metric:** score\n\
             - **Target:** none\n- **Direction:** maximize\n## Researchers\n- **Count:** 1\n\
             - **Iterations per round:** 1\n- **Max rounds:** 1\n\
             ## Evaluation\n- command: python3 eval.py\n- frozen: eval.py\n\
             ## Agent\n- command: ./agent.sh\n{extra}"
        );
        crate::config::load(&text).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn every_command_a_config_runs_is_listed_with_its_role() {
        let cfg = config(
            "- reviewer: ./review.sh\n## Guard\n- run: pytest -q\n- keep it readable\n\
             ## Environment\n- setup: pip install -e .\n",
        );
        let roles: Vec<_> = list(&cfg)
            .iter()
            .map(|c| (c.role, c.line.clone()))
            .collect();
        assert_eq!(
            roles,
            vec![
                ("agent", "./agent.sh".to_string()),
                ("evaluation", "python3 eval.py".to_string()),
                ("guard", "pytest -q".to_string()),
                ("setup", "pip install -e .".to_string()),
                ("reviewer", "./review.sh".to_string()),
            ]
        );
    }

    #[test]
    fn the_digest_changes_with_any_command_and_only_then() {
        let a = digest(&list(&config("")));
        assert_eq!(a, digest(&list(&config(""))));
        assert_ne!(a, digest(&list(&config("- reviewer: ./review.sh\n"))));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn builtin_openai_names_where_it_sends_the_code() {
        let mut cfg = config("");
        cfg.agent.command = "builtin:openai".into();
        cfg.agent.base_url = Some("http://127.0.0.1:9/v1".into());
        let line = &list(&cfg)[0].line;
        assert!(line.contains("http://127.0.0.1:9/v1") && line.contains("OPENAI_API_KEY"));
        cfg.agent.command = "builtin:tune".into();
        assert_eq!(list(&cfg)[0].role, "evaluation");
    }
}
