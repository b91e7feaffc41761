//! The prompt a researcher agent reads from `$CONFERENCE_PROMPT_FILE` (DESIGN.md §5): goal, metric
//! and direction, current best, its focus, the forbidden and frozen paths verbatim, shared
//! knowledge (the newest within a byte budget), the briefing on the past (`super::briefing`: peer
//! review verdicts, its recent attempts with changes and reasons, the others' failures this
//! round), the knowledge brief from earlier conferences (`super::knowledge`), the stuck-level
//! advice, and the endgame signal in the last round.

use std::fmt::Write;

use super::briefing::{self, Briefing};
use crate::config::{Config, Strategy, BRIEF_BYTES};
use crate::model::talk::{GuidanceNote, OpenQuestion, GUIDANCE_IN_FORCE};

/// Bytes the shared knowledge may take in a prompt (the newest findings are kept).
pub const KNOWLEDGE_BYTES: usize = 6 * 1024;

pub struct PromptContext<'a> {
    pub config: &'a Config,
    pub researcher: &'a str,
    pub round: u32,
    pub iteration: u32,
    pub best_metric: Option<f64>,
    pub conference_best: Option<f64>,
    pub shared_knowledge: &'a [String],
    /// The past: reviews, its own attempts, the others' failures this round.
    pub briefing: &'a Briefing,
    pub stuck_level: u8,
    /// Stopped at stuck level 3 last round and starts again now.
    pub respawned: bool,
    pub endgame: bool,
    pub devils_advocate: bool,
    /// Every frozen pattern, the files the evaluation commands name included.
    pub frozen: &'a [String],
    /// The Goal's brief (`- brief: program.md`), already within its budget.
    pub brief: Option<&'a Brief>,
    /// Guidance people gave (`git conference steer`), oldest first.
    pub guidance: &'a [GuidanceNote],
    /// Every question asked so far (the answered ones go to the prompt).
    pub questions: &'a [OpenQuestion],
    /// Human-in-the-loop mode: a blocking question pauses the conference.
    pub human_in_the_loop: bool,
    /// What earlier conferences on this repository learned (`knowledge.briefed`), within
    /// `model::knowledge::BRIEF_TOKENS`.
    pub knowledge_brief: Option<&'a str>,
}

/// Answered questions a prompt holds at most (the newest answers).
pub const ANSWERS_IN_PROMPT: usize = 5;
/// Characters of one piece of guidance, question or answer a prompt holds.
pub const TALK_CHARS: usize = 600;

/// The Goal's brief as a prompt shows it: the file's path and its text, cut to
/// [`BRIEF_BYTES`] at a line, with a line saying how much was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Brief {
    pub path: String,
    pub text: String,
}

impl Brief {
    /// The brief `path` as committed at `commit` (the baseline: the brief is frozen, so every
    /// worktree has the same); None when the file is not there or is not text.
    pub fn read(repo: &git2::Repository, commit: &str, path: &str) -> Option<Brief> {
        let commit = repo.find_commit(git2::Oid::from_str(commit).ok()?).ok()?;
        let entry = commit
            .tree()
            .ok()?
            .get_path(std::path::Path::new(path))
            .ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        let text = std::str::from_utf8(blob.content()).ok()?;
        Some(Brief::within_budget(path, text))
    }

    /// `text` cut to [`BRIEF_BYTES`] at the end of a line (at a character when one line is
    /// longer), with the line that says what was left out.
    pub fn within_budget(path: &str, text: &str) -> Brief {
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
}

/// A section's text unless it is empty or still the template's placeholder.
fn filled(text: &str) -> Option<&str> {
    let t = text.trim();
    let placeholder = t.starts_with('(') && t.ends_with(')');
    (!t.is_empty() && !placeholder).then_some(t)
}

/// The newest findings that fit in `KNOWLEDGE_BYTES`, oldest first, after a line saying how
/// many earlier ones were left out.
fn newest_knowledge(knowledge: &[String]) -> String {
    let lines: Vec<String> = knowledge.iter().rev().map(|k| format!("- {k}\n")).collect();
    let mut kept = Vec::new();
    let mut size = 0;
    for line in &lines {
        if size + line.len() > KNOWLEDGE_BYTES {
            break;
        }
        size += line.len();
        kept.push(line.as_str());
    }
    let omitted = lines.len() - kept.len();
    let mut s = String::new();
    if omitted > 0 {
        let _ = writeln!(s, "({omitted} earlier findings omitted)");
    }
    kept.iter().rev().for_each(|l| s.push_str(l));
    s
}

/// The whole prompt: the task, its background and focus, the search space, what is known,
/// the advice that applies, and how to work.
pub fn render(p: &PromptContext) -> String {
    let mut s = String::new();
    write_task(&mut s, p);
    write_background(&mut s, p.config);
    write_focus(&mut s, p);
    write_guidance(&mut s, p.guidance);
    write_answers(&mut s, p.questions);
    write_search_space(&mut s, p);
    write_knowledge(&mut s, p);
    write_knowledge_brief(&mut s, p);
    write_signals(&mut s, p);
    let _ = writeln!(
        s,
        "## How to work\nEdit files in the current directory (your git worktree) and exit. Do not \
         commit. Write a one-line description of your change to `.conference/note.md` (also \
         named by $CONFERENCE_NOTE_FILE; that folder is never part of your change). The \
         evaluation command is `{}`; the conference measures, keeps or reverts your change.",
        p.config.evaluation.command
    );
    let _ = writeln!(
        s,
        "\nTo ask the humans running the conference a question, end your note with a line \
         `QUESTION: …` (one question per line). Answers reach your prompt in a later iteration; {}",
        if p.human_in_the_loop {
            "the conference does not wait for them, unless you write `QUESTION (blocking): …`, \
             which pauses it until a human answers."
        } else {
            "the conference does not wait for them: go on with your best judgement."
        }
    );
    s
}

/// `text` within [`TALK_CHARS`], on one line.
fn said(text: &str) -> String {
    crate::render::format::one_line(text, TALK_CHARS)
}

/// The guidance in force, newest first, at most [`GUIDANCE_IN_FORCE`] pieces, each cut to
/// [`TALK_CHARS`].
fn write_guidance(s: &mut String, guidance: &[GuidanceNote]) {
    if guidance.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Guidance from the humans (newest first; follow it)");
    for g in guidance.iter().rev().take(GUIDANCE_IN_FORCE) {
        let _ = writeln!(s, "- (round {}) {}", g.round, said(&g.text));
    }
    if guidance.len() > GUIDANCE_IN_FORCE {
        let _ = writeln!(
            s,
            "({} earlier pieces of guidance omitted)",
            guidance.len() - GUIDANCE_IN_FORCE
        );
    }
    s.push('\n');
}

/// The agents' questions the humans answered, newest first, at most [`ANSWERS_IN_PROMPT`].
fn write_answers(s: &mut String, questions: &[OpenQuestion]) {
    let answered: Vec<&OpenQuestion> = questions.iter().filter(|q| !q.is_open()).collect();
    if answered.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Answers to the researchers' questions (newest first)");
    for q in answered.iter().rev().take(ANSWERS_IN_PROMPT) {
        let _ = writeln!(
            s,
            "- {} (researcher {}, round {}): {}\n  Answer: {}",
            q.id,
            q.researcher,
            q.round,
            said(&q.text),
            said(q.answer.as_deref().unwrap_or(""))
        );
    }
    if answered.len() > ANSWERS_IN_PROMPT {
        let _ = writeln!(
            s,
            "({} earlier answers omitted)",
            answered.len() - ANSWERS_IN_PROMPT
        );
    }
    s.push('\n');
}

/// Who the researcher is, the goal, the metric (or criteria) and the current best.
fn write_task(s: &mut String, p: &PromptContext) {
    let c = p.config;
    let _ = writeln!(s, "# Conference: {}\n", c.title);
    let _ = writeln!(
        s,
        "You are Researcher {} in round {}, iteration {} of {}.\n",
        p.researcher, p.round, p.iteration, c.iterations_per_round
    );
    let _ = writeln!(s, "## Goal\n{}\n", c.goal);
    if let Some(brief) = p.brief {
        let _ = writeln!(
            s,
            "## Brief (the user's {}, frozen)\n{}\n",
            brief.path, brief.text
        );
    }
    if let Some(m) = &c.metric {
        let _ = writeln!(
            s,
            "## Metric\n{} ({:?}){}\n",
            m.name,
            m.direction,
            m.target
                .map(|t| format!(", target {t}"))
                .unwrap_or_default()
        );
    } else if let Some(criteria) = &c.criteria {
        let _ = writeln!(s, "## Success criteria\n{criteria}\n");
    }
    let fmt = |v: Option<f64>| {
        v.map(|v| format!("{v}"))
            .unwrap_or_else(|| "not measured".into())
    };
    let _ = writeln!(
        s,
        "## Current best\nYour kept snapshot: {}. Conference best: {}.\n",
        fmt(p.best_metric),
        fmt(p.conference_best)
    );
}

/// The user's current approach and context, when filled in.
fn write_background(s: &mut String, c: &Config) {
    if let Some(approach) = filled(&c.current_approach) {
        let _ = writeln!(s, "## Current approach\n{approach}\n");
    }
    if let Some(context) = filled(&c.context) {
        let _ = writeln!(s, "## Context & references\n{context}\n");
    }
}

/// The researcher's focus (its own under assigned partitioning) and the devil's advocate role.
fn write_focus(s: &mut String, p: &PromptContext) {
    let c = p.config;
    if c.strategy == Strategy::Assigned {
        if let Some(focus) = c.focus.get(p.researcher) {
            let _ = writeln!(s, "## Your focus\n{focus}\n");
        }
    } else {
        let _ = writeln!(
            s,
            "## Your focus\nThe whole search space (free partitioning).\n"
        );
    }
    if p.devils_advocate {
        let _ = writeln!(
            s,
            "## Role: Devil's Advocate\nTry the opposite of the consensus in Shared Knowledge: \
             pursue a contrarian strategy the others are not trying, and say in your note what \
             consensus you are challenging.\n"
        );
    }
}

/// Allowed changes, the forbidden, frozen and shared paths verbatim, and the guard.
fn write_search_space(s: &mut String, p: &PromptContext) {
    let c = p.config;
    if !c.allowed.is_empty() {
        let _ = writeln!(s, "## Allowed changes");
        for a in &c.allowed {
            let _ = writeln!(s, "- {a}");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "## Forbidden changes (a change touching these is rejected unevaluated)"
    );
    for f in &c.forbidden {
        let _ = writeln!(s, "- {f}");
    }
    for f in p.frozen {
        let _ = writeln!(s, "- frozen: {f}");
    }
    for f in c.environment.shared_paths() {
        let _ = writeln!(
            s,
            "- shared, read-only (linked from the user's working tree; never write into it): {f}"
        );
    }
    s.push('\n');
    if !c.guard.is_empty() {
        let _ = writeln!(s, "## Guard");
        for g in &c.guard {
            let _ = writeln!(s, "- {g}");
        }
        s.push('\n');
    }
}

/// The shared knowledge (newest first within its budget) and the briefing on the past.
fn write_knowledge(s: &mut String, p: &PromptContext) {
    let _ = writeln!(s, "## Shared knowledge (validated findings)");
    if p.shared_knowledge.is_empty() {
        let _ = writeln!(s, "(none yet)");
    }
    s.push_str(&newest_knowledge(p.shared_knowledge));
    s.push('\n');
    s.push_str(&briefing::render(p.briefing));
}

/// The knowledge brief from earlier conferences, when the store held something relevant.
fn write_knowledge_brief(s: &mut String, p: &PromptContext) {
    if let Some(text) = p.knowledge_brief {
        let _ = writeln!(
            s,
            "## Knowledge from earlier conferences
{}
",
            text.trim_end()
        );
    }
}

/// Respawn, stuck-level and endgame advice, when they apply.
fn write_signals(s: &mut String, p: &PromptContext) {
    if p.respawned {
        let _ = writeln!(
            s,
            "## Respawned\nLast round you made seven attempts in a row without improving and were \
             stopped. You start again from the conference best: take a fundamentally different \
             strategy from the one in your recent attempts.\n"
        );
    }
    match p.stuck_level {
        1 => {
            let _ = writeln!(
                s,
                "## Stuck (level 1)\nThree attempts in a row did not improve: switch strategy.\n"
            );
        }
        2 => {
            let _ = writeln!(s, "## Stuck (level 2)\nFive attempts in a row did not improve: make a deep pivot to a fundamentally different approach.\n");
        }
        _ => {}
    }
    if p.endgame {
        let _ = writeln!(
            s,
            "## ENDGAME\nThis is the last round. Consolidate: prefer safe, high-confidence improvements \
             that combine well with the shared knowledge.\n"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::briefing::{Reviewed, Tried};

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

    fn attempt(round: u32, iteration: u32, verdict: &str, metric: Option<f64>) -> Tried {
        Tried {
            researcher: "A".into(),
            round,
            iteration,
            verdict: verdict.into(),
            metric,
            delta: metric.map(|m| m - 0.5),
            description: format!("idea {iteration}"),
            reason: None,
            output: vec![],
        }
    }

    fn briefing() -> Briefing {
        let mut crashed = attempt(2, 3, "crashed", None);
        crashed.reason = Some("evaluation exit status 1: ValueError: width must be even".into());
        crashed.output = vec![
            "Traceback (most recent call last):".into(),
            "ValueError: width must be even".into(),
        ];
        let mut rejected = attempt(2, 2, "rejected", None);
        rejected.reason = Some("changes frozen path eval.sh (frozen: eval.sh)".into());
        let mut other = attempt(2, 1, "reverted", Some(0.52));
        other.researcher = "B".into();
        Briefing {
            own: vec![
                crashed,
                rejected,
                attempt(2, 1, "kept", Some(0.45)),
                attempt(1, 5, "reverted", Some(0.5)),
            ],
            others: vec![other],
            reviews: vec![
                Reviewed {
                    round: 1,
                    researcher: "B".into(),
                    description: "cosine schedule".into(),
                    verdict: "challenged".into(),
                    gain: 0.001,
                    reasoning: "gain 0.001 within the noise (0.004)".into(),
                    outcome: None,
                },
                Reviewed {
                    round: 1,
                    researcher: "A".into(),
                    description: "lower lr".into(),
                    verdict: "validated".into(),
                    gain: 0.05,
                    reasoning: "reproduced".into(),
                    outcome: Some("on best".into()),
                },
            ],
            minimize: true,
        }
    }

    #[test]
    fn a_rendered_prompt() {
        let config = crate::config::load(CONFIG).expect("valid");
        let knowledge =
            vec!["Round 1, Researcher A: lower lr (+0.050000, validated, on best)".to_string()];
        let frozen = vec!["eval.sh".to_string()];
        let briefing = briefing();
        let prompt = render(&PromptContext {
            config: &config,
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
    fn long_histories_are_bounded_newest_first() {
        let mut b = briefing();
        b.own = (1..=400)
            .rev()
            .map(|i| attempt(1 + i / 10, i % 10, "reverted", Some(0.6)))
            .collect();
        let text = briefing::render(&b);
        let own = text.split("## Your recent attempts").nth(1).unwrap();
        let own = own.split("\n## ").next().unwrap();
        assert!(own.len() <= briefing::OWN_BYTES + 100, "{}", own.len());
        assert!(own.contains("- r41 i0 reverted: 0.6 (0.1 worse than your best then)"));
        let shown = own.matches("\n- r").count();
        assert!(
            own.contains(&format!("({} older attempts omitted)", 400 - shown)),
            "{own}"
        );
        let knowledge: Vec<String> = (0..500).map(|i| format!("finding number {i}")).collect();
        let text = newest_knowledge(&knowledge);
        assert!(text.len() <= KNOWLEDGE_BYTES + 100);
        assert!(text.starts_with("(") && text.contains("earlier findings omitted)\n"));
        assert!(
            text.ends_with("- finding number 499\n"),
            "the newest is kept"
        );
    }

    #[test]
    fn a_long_brief_is_cut_at_a_line_and_says_so() {
        let short = Brief::within_budget("program.md", "Be bold.\n");
        assert_eq!(short.text, "Be bold.");
        let long: String = (0..2000).map(|i| format!("rule {i}: é\n")).collect();
        let brief = Brief::within_budget("program.md", &long);
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

    #[test]
    fn changes_are_said_as_better_or_worse() {
        assert_eq!(briefing::change(-0.05, true), "0.05 better");
        assert_eq!(briefing::change(-0.05, false), "0.05 worse");
        assert_eq!(briefing::change(0.25, false), "0.25 better");
        assert_eq!(briefing::change(0.0, true), "no better");
        assert_eq!(briefing::number(0.1 + 0.2), "0.3");
        assert_eq!(briefing::number(2.5e-7), "2.500e-7");
    }
}
