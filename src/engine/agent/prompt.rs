//! The prompt's data gathered from a running conference (DESIGN.md §5): what conference.md asks
//! of the researcher (`assignment`) and the Goal's brief as committed (`read_brief`, cut to its
//! budget); `engine::agent::briefing` gathers the past. `render::prompt` writes the text from them.

use crate::config::{Config, Strategy, BRIEF_BYTES};
use crate::model::briefing::{Assignment, Brief, Focus, MetricGoal};

/// What conference.md asks of researcher `researcher`, as its prompt shows it.
pub fn assignment(config: &Config, researcher: &str) -> Assignment {
    Assignment {
        title: config.title.clone(),
        goal: config.goal.clone(),
        iterations_per_round: config.iterations_per_round,
        metric: config.metric.as_ref().map(|m| MetricGoal {
            name: m.name.clone(),
            direction: m.direction,
            target: m.target,
        }),
        criteria: config.criteria.clone(),
        current_approach: config.current_approach.clone(),
        context: config.context.clone(),
        focus: match config.strategy {
            Strategy::Assigned => Focus::Assigned(config.focus.get(researcher).cloned()),
            Strategy::Free => Focus::Whole,
        },
        allowed: config.allowed.clone(),
        forbidden: config.forbidden.clone(),
        shared_paths: config
            .environment
            .shared_paths()
            .map(String::from)
            .collect(),
        guard: config.guard.clone(),
        evaluation_command: config.evaluation.command.clone(),
    }
}

/// The brief `path` as committed at `commit` (the baseline: the brief is frozen, so every
/// worktree has the same), within its budget; None when the file is not there or is not text.
pub fn read_brief(
    repo: &git2::Repository,
    commit: &crate::model::CommitId,
    path: &str,
) -> Option<Brief> {
    let commit = repo.find_commit(commit.oid()).ok()?;
    let entry = commit
        .tree()
        .ok()?
        .get_path(std::path::Path::new(path))
        .ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    let text = std::str::from_utf8(blob.content()).ok()?;
    Some(brief_within_budget(path, text))
}

/// `text` cut to [`BRIEF_BYTES`] at the end of a line (at a character when one line is
/// longer), with the line that says what was left out.
pub fn brief_within_budget(path: &str, text: &str) -> Brief {
    if text.len() <= BRIEF_BYTES {
        return Brief {
            path: path.to_string(),
            text: text.trim_end().to_string(),
        };
    }
    let mut cut = BRIEF_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').map_or(cut, |n| n + 1);
    Brief {
        path: path.to_string(),
        text: format!(
            "{}\n({path} is cut here: {} of its {} bytes are shown; the prompt holds at most {BRIEF_BYTES})",
            text[..cut].trim_end(),
            cut,
            text.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::briefing::PromptContext;
    use crate::render::prompt::{render, tests::briefing};

    const CONFIG: &str = "\
# Conference: Faster training
## Goal
Lower the validation loss.
## Mode
metric
## Success Metric
- **Metric:** val_loss
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 2
- **Iterations per round:** 5
- **Max rounds:** 3
## Search Space
**Allowed changes:**
- train.py
## Evaluation
- command: ./eval.sh
- frozen: eval.sh
## Agent
- command: builtin:openai
";

    #[test]
    fn a_rendered_prompt() {
        let config = crate::config::load(CONFIG).expect("valid");
        let knowledge =
            vec!["Round 1, Researcher A: lower lr (+0.050000, validated, on best)".to_string()];
        let frozen = vec!["eval.sh".to_string()];
        let briefing = briefing();
        let assignment = assignment(&config, "A");
        let prompt = render(&PromptContext {
            assignment: &assignment,
            researcher: "A",
            round: 2,
            iteration: 4,
            best_metric: Some(0.45),
            conference_best: Some(0.45),
            shared_knowledge: &knowledge,
            briefing: &briefing,
            stuck_level: 0,
            respawned: false,
            endgame: false,
            devils_advocate: false,
            frozen: &frozen,
            brief: None,
            guidance: &[],
            questions: &[],
            human_in_the_loop: false,
            knowledge_brief: None,
            tree: None,
            sweep: false,
        });
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/prompt/rendered.md");
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &prompt).unwrap();
        }
        let expected = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            prompt, expected,
            "the prompt differs from {path} (UPDATE_SNAPSHOTS=1 rewrites it)"
        );
    }

    #[test]
    fn a_long_brief_is_cut_at_a_line_and_says_so() {
        let short = brief_within_budget("program.md", "Be bold.\n");
        assert_eq!(short.text, "Be bold.");
        let long: String = (0..2000).map(|i| format!("rule {i}: é\n")).collect();
        let brief = brief_within_budget("program.md", &long);
        let (kept, said) = brief.text.rsplit_once('\n').unwrap();
        assert!(kept.len() <= BRIEF_BYTES, "{}", kept.len());
        assert!(
            kept.ends_with('é') && long.starts_with(kept),
            "cut at a line"
        );
        assert_eq!(
            said,
            format!(
                "(program.md is cut here: {} of its {} bytes are shown; the prompt holds at most {BRIEF_BYTES})",
                kept.len() + 1,
                long.len()
            )
        );
    }
}
