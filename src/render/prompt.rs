//! The prompt a researcher agent reads from `$CONFERENCE_PROMPT_FILE` (DESIGN.md §5), written
//! from `model::briefing::PromptContext` alone: goal, metric and direction, current best, its
//! focus, the forbidden and frozen paths verbatim, shared knowledge (the newest within a byte
//! budget), the briefing on the past (peer review verdicts, its recent attempts with changes and
//! reasons, the others' failures this round, each newest first within a byte budget, the oldest
//! dropped with a line saying how many, so a long conference never grows the prompt without
//! bound), the knowledge brief from earlier conferences, the stuck-level advice, and the endgame
//! signal in the last round. `engine::agent::prompt` and `engine::agent::briefing` gather the data.

use std::fmt::Write;

use crate::model::briefing::{Assignment, Briefing, Focus, PromptContext, Reviewed, Tried};
use crate::model::talk::{GuidanceNote, OpenQuestion, GUIDANCE_IN_FORCE};
use crate::model::ReviewVerdict;

/// Bytes the shared knowledge may take in a prompt (the newest findings are kept).
pub const KNOWLEDGE_BYTES: usize = 6 * 1024;
/// Bytes each part of the briefing may take.
pub const OWN_BYTES: usize = 6 * 1024;
pub const OTHERS_BYTES: usize = 3 * 1024;
pub const REVIEWS_BYTES: usize = 3 * 1024;
/// Answered questions a prompt holds at most (the newest answers).
pub const ANSWERS_IN_PROMPT: usize = 5;
/// Characters of one piece of guidance, question or answer a prompt holds.
pub const TALK_CHARS: usize = 600;

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
    write_background(&mut s, p.assignment);
    write_focus(&mut s, p);
    write_guidance(&mut s, p.guidance);
    write_answers(&mut s, p.questions);
    write_search_space(&mut s, p);
    write_knowledge(&mut s, p);
    write_knowledge_brief(&mut s, p);
    if let Some(tree) = p.tree {
        s.push_str(&super::tree::prompt_section(tree));
    }
    if p.sweep {
        s.push_str(&super::sweep::prompt_section());
    }
    write_signals(&mut s, p);
    let _ = writeln!(
        s,
        "## How to work\nEdit files in the current directory (your git worktree) and exit. Do not \
         commit. Write a one-line description of your change to `.conference/note.md` (also \
         named by $CONFERENCE_NOTE_FILE; that folder is never part of your change). The \
         evaluation command is `{}`; the conference measures, keeps or reverts your change.",
        p.assignment.evaluation_command
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
    super::format::one_line(text, TALK_CHARS)
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
    let c = p.assignment;
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
fn write_background(s: &mut String, c: &Assignment) {
    if let Some(approach) = filled(&c.current_approach) {
        let _ = writeln!(s, "## Current approach\n{approach}\n");
    }
    if let Some(context) = filled(&c.context) {
        let _ = writeln!(s, "## Context & references\n{context}\n");
    }
}

/// The researcher's focus (its own under assigned partitioning) and the devil's advocate role.
fn write_focus(s: &mut String, p: &PromptContext) {
    match &p.assignment.focus {
        Focus::Assigned(Some(focus)) => {
            let _ = writeln!(s, "## Your focus\n{focus}\n");
        }
        Focus::Assigned(None) => {}
        Focus::Whole => {
            let _ = writeln!(
                s,
                "## Your focus\nThe whole search space (free partitioning).\n"
            );
        }
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
    let c = p.assignment;
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
    for f in &c.shared_paths {
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
    s.push_str(&briefing_sections(p.briefing));
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

/// The briefing's sections of the prompt (empty parts left out).
fn briefing_sections(b: &Briefing) -> String {
    let mut s = String::new();
    if !b.reviews.is_empty() {
        let items = b.reviews.iter().map(reviewed);
        let _ = writeln!(
            s,
            "## Peer review of earlier rounds (newest first)\n{}",
            bounded(items, REVIEWS_BYTES, "older findings")
        );
    }
    if !b.own.is_empty() {
        let items = b.own.iter().map(|t| tried(t, b.minimize, None));
        let _ = writeln!(
            s,
            "## Your recent attempts (newest first)\n{}",
            bounded(items, OWN_BYTES, "older attempts")
        );
    }
    if !b.others.is_empty() {
        let items = b
            .others
            .iter()
            .map(|t| tried(t, b.minimize, Some(&t.researcher)));
        let _ = writeln!(
            s,
            "## Other researchers' attempts this round that failed (do not repeat them)\n{}",
            bounded(items, OTHERS_BYTES, "older attempts")
        );
    }
    s
}

/// Items in order while they fit in `cap` bytes, then a line saying how many were left out.
fn bounded(items: impl Iterator<Item = String>, cap: usize, noun: &str) -> String {
    let mut out = String::new();
    let mut omitted = 0;
    for item in items {
        if omitted == 0 && out.len() + item.len() <= cap {
            out.push_str(&item);
        } else {
            omitted += 1;
        }
    }
    if omitted > 0 {
        let _ = writeln!(out, "({omitted} {noun} omitted)");
    }
    out
}

/// `0.25`, `-0.0031`, `1.2e-7`: a metric without float noise.
fn number(v: f64) -> String {
    if v != 0.0 && (v.abs() < 1e-4 || v.abs() >= 1e9) {
        return format!("{v:.3e}");
    }
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How a metric change compares, in words: `0.14 better`, `0.06 worse`, `no better`.
fn change(delta: f64, minimize: bool) -> String {
    let gain = if minimize { -delta } else { delta };
    if gain > 0.0 {
        format!("{} better", number(gain))
    } else if gain < 0.0 {
        format!("{} worse", number(-gain))
    } else {
        "no better".into()
    }
}

/// One attempt's lines; `who` names another researcher's.
fn tried(t: &Tried, minimize: bool, who: Option<&str>) -> String {
    let mut s = match who {
        Some(who) => format!("- {who} r{} i{} {}", t.round, t.iteration, t.verdict),
        None => format!("- r{} i{} {}", t.round, t.iteration, t.verdict),
    };
    if let Some(m) = t.metric {
        let _ = write!(s, ": {}", number(m));
        if let Some(d) = t.delta {
            let whose = who.map_or("your".to_string(), |w| format!("{w}'s"));
            let _ = write!(s, " ({} than {whose} best then)", change(d, minimize));
        }
    }
    if !t.description.is_empty() {
        let _ = write!(s, " — {}", t.description);
    }
    s.push('\n');
    if let Some(reason) = t.reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = writeln!(s, "  reason: {reason}");
    }
    if !t.output.is_empty() {
        let _ = writeln!(s, "  last output:");
        for line in &t.output {
            let _ = writeln!(s, "    {line}");
        }
    }
    s
}

/// One finding's lines (its gain is direction-aware already: positive is better).
fn reviewed(r: &Reviewed) -> String {
    let mut s = format!(
        "- Round {}, Researcher {}: {} — {}",
        r.round, r.researcher, r.description, r.verdict
    );
    if r.gain != 0.0 {
        let _ = write!(s, " (reproduced {})", change(r.gain, false));
    }
    if let Some(outcome) = &r.outcome {
        let _ = write!(s, ", {outcome}");
    }
    s.push('\n');
    if !r.reasoning.is_empty() && r.verdict != ReviewVerdict::Validated {
        let _ = writeln!(s, "  why: {}", r.reasoning);
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::briefing::{Brief, MetricGoal};
    use crate::model::Direction;

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

    /// A researcher's past in round 2: a crash with its output, a rejection, a keep, a
    /// reversal; another's reversal; two reviewed findings.
    pub(crate) fn briefing() -> Briefing {
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

    /// A conference in qualitative mode, researcher A's focus not written, the approach still
    /// the template's placeholder: the sections that depend on them are left out.
    fn plain_assignment() -> Assignment {
        Assignment {
            title: "Readable docs".into(),
            goal: "Make the guide easier to follow.".into(),
            iterations_per_round: 5,
            metric: None,
            criteria: Some("A newcomer installs it from the guide alone.".into()),
            current_approach: "(What does the project do today?)".into(),
            context: String::new(),
            focus: Focus::Assigned(None),
            allowed: vec![],
            forbidden: vec!["LICENSE".into()],
            shared_paths: vec![],
            guard: vec![],
            evaluation_command: "./judge.sh".into(),
        }
    }

    fn context<'a>(
        assignment: &'a Assignment,
        briefing: &'a Briefing,
        frozen: &'a [String],
    ) -> PromptContext<'a> {
        PromptContext {
            assignment,
            researcher: "A",
            round: 1,
            iteration: 1,
            best_metric: None,
            conference_best: None,
            shared_knowledge: &[],
            briefing,
            stuck_level: 0,
            respawned: false,
            endgame: false,
            devils_advocate: false,
            frozen,
            brief: None,
            guidance: &[],
            questions: &[],
            human_in_the_loop: false,
            knowledge_brief: None,
            tree: None,
            sweep: false,
        }
    }

    /// The first prompt of a conference: nothing measured, known or tried yet.
    #[test]
    fn the_first_prompt() {
        let assignment = plain_assignment();
        let past = Briefing::default();
        insta::assert_snapshot!(render(&context(&assignment, &past, &[])));
    }

    /// Three attempts into the first round without improving: its own attempts (no peer review
    /// yet) and the first stuck level, the focus of assigned partitioning.
    #[test]
    fn a_stuck_prompt_in_the_first_round() {
        let mut assignment = plain_assignment();
        assignment.focus = Focus::Assigned(Some("The install section.".into()));
        let tried = |iteration| Tried {
            researcher: "A".into(),
            round: 1,
            iteration,
            verdict: "reverted".into(),
            metric: None,
            delta: None,
            description: format!("rewording {iteration}"),
            reason: None,
            output: vec![],
        };
        let past = Briefing {
            own: (1..=3).rev().map(tried).collect(),
            ..Briefing::default()
        };
        let mut p = context(&assignment, &past, &[]);
        p.iteration = 4;
        p.stuck_level = 1;
        insta::assert_snapshot!(render(&p));
    }

    /// A later round with every section: the brief, the filled-in approach and context,
    /// guidance and answers beyond what a prompt holds, an open question (left out), frozen and
    /// shared paths, the guard, knowledge, the whole briefing, the knowledge brief, a respawn
    /// at stuck level 2, the devil's advocate, the endgame and human-in-the-loop mode.
    #[test]
    fn a_later_prompt_with_every_section() {
        let assignment = Assignment {
            title: "Faster training".into(),
            goal: "Lower the validation loss.".into(),
            iterations_per_round: 5,
            metric: Some(MetricGoal {
                name: "val_loss".into(),
                direction: Direction::Minimize,
                target: Some(0.3),
            }),
            criteria: None,
            current_approach: "AdamW, lr 3e-4, cosine schedule.".into(),
            context: "See notes/ablation.md.".into(),
            focus: Focus::Whole,
            allowed: vec!["train.py".into(), "model.py".into()],
            forbidden: vec!["data/".into()],
            shared_paths: vec!["datasets".into()],
            guard: vec!["memory under 40 GB".into()],
            evaluation_command: "./eval.sh".into(),
        };
        let past = briefing();
        let frozen = ["eval.sh".to_string(), "program.md".to_string()];
        let brief = Brief {
            path: "program.md".into(),
            text: "Try the learning rate first.".into(),
        };
        let guidance: Vec<GuidanceNote> = (1..=GUIDANCE_IN_FORCE + 2)
            .map(|i| GuidanceNote {
                text: format!("hint {i}"),
                round: 1 + i as u32 / 4,
                at: "2026-11-27T00:00:00Z".into(),
            })
            .collect();
        let question = |i: usize, answer: Option<&str>| OpenQuestion {
            id: format!("Q{i}"),
            researcher: "B".into(),
            round: 1,
            iteration: i as u32,
            text: format!("question {i}?"),
            blocking: false,
            answer: answer.map(String::from),
        };
        let mut questions: Vec<OpenQuestion> = (1..=ANSWERS_IN_PROMPT + 1)
            .map(|i| question(i, Some("yes")))
            .collect();
        questions.push(question(ANSWERS_IN_PROMPT + 2, None));
        let knowledge =
            vec!["Round 1, Researcher A: lower lr (+0.050000, validated, on best)".into()];
        let mut p = context(&assignment, &past, &frozen);
        p.round = 2;
        p.iteration = 4;
        p.best_metric = Some(0.45);
        p.conference_best = Some(0.44);
        p.shared_knowledge = &knowledge;
        p.stuck_level = 2;
        p.respawned = true;
        p.endgame = true;
        p.devils_advocate = true;
        p.brief = Some(&brief);
        p.guidance = &guidance;
        p.questions = &questions;
        p.human_in_the_loop = true;
        p.knowledge_brief = Some("- warmup helped on a similar model\n");
        insta::assert_snapshot!(render(&p));
    }

    #[test]
    fn long_histories_are_bounded_newest_first() {
        let mut b = briefing();
        b.own = (1..=400)
            .rev()
            .map(|i| attempt(1 + i / 10, i % 10, "reverted", Some(0.6)))
            .collect();
        let text = briefing_sections(&b);
        let own = text.split("## Your recent attempts").nth(1).unwrap();
        let own = own.split("\n## ").next().unwrap();
        assert!(own.len() <= OWN_BYTES + 100, "{}", own.len());
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
    fn changes_are_said_as_better_or_worse() {
        assert_eq!(change(-0.05, true), "0.05 better");
        assert_eq!(change(-0.05, false), "0.05 worse");
        assert_eq!(change(0.25, false), "0.25 better");
        assert_eq!(change(0.0, true), "no better");
        assert_eq!(number(0.1 + 0.2), "0.3");
        assert_eq!(number(2.5e-7), "2.500e-7");
    }
}
