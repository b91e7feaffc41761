//! The prompt a researcher agent reads from `$CONFERENCE_PROMPT_FILE` (DESIGN.md §5): goal, metric
//! and direction, current best, its focus, the forbidden and frozen paths verbatim, shared
//! knowledge, its own recent attempts and their verdicts, the stuck-level advice, and the endgame
//! signal in the last round.

use std::fmt::Write;

use crate::config::{Config, Strategy};

pub struct PromptContext<'a> {
    pub config: &'a Config,
    pub researcher: &'a str,
    pub round: u32,
    pub iteration: u32,
    pub best_metric: Option<f64>,
    pub conference_best: Option<f64>,
    pub shared_knowledge: &'a [String],
    /// (iteration label, verdict, metric, description), most recent last.
    pub recent: &'a [(String, String, Option<f64>, String)],
    pub stuck_level: u8,
    /// Stopped at stuck level 3 last round and starts again now.
    pub respawned: bool,
    pub endgame: bool,
    pub devils_advocate: bool,
    /// Every frozen pattern, the files the evaluation commands name included.
    pub frozen: &'a [String],
}

/// A section's text unless it is empty or still the template's placeholder.
fn filled(text: &str) -> Option<&str> {
    let t = text.trim();
    let placeholder = t.starts_with('(') && t.ends_with(')');
    (!t.is_empty() && !placeholder).then_some(t)
}

pub fn render(p: &PromptContext) -> String {
    let c = p.config;
    let mut s = String::new();
    let _ = writeln!(s, "# Conference: {}\n", c.title);
    let _ = writeln!(
        s,
        "You are Researcher {} in round {}, iteration {} of {}.\n",
        p.researcher, p.round, p.iteration, c.iterations_per_round
    );
    let _ = writeln!(s, "## Goal\n{}\n", c.goal);
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
    if let Some(approach) = filled(&c.current_approach) {
        let _ = writeln!(s, "## Current approach\n{approach}\n");
    }
    if let Some(context) = filled(&c.context) {
        let _ = writeln!(s, "## Context & references\n{context}\n");
    }
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
    s.push('\n');
    if !c.guard.is_empty() {
        let _ = writeln!(s, "## Guard");
        for g in &c.guard {
            let _ = writeln!(s, "- {g}");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## Shared knowledge (validated findings)");
    if p.shared_knowledge.is_empty() {
        let _ = writeln!(s, "(none yet)");
    }
    for k in p.shared_knowledge {
        let _ = writeln!(s, "- {k}");
    }
    s.push('\n');
    if !p.recent.is_empty() {
        let _ = writeln!(s, "## Your recent attempts");
        for (label, verdict, metric, desc) in p.recent {
            let _ = writeln!(s, "- {label}: {verdict} ({}) {desc}", fmt(*metric));
        }
        s.push('\n');
    }
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
    let _ = writeln!(
        s,
        "## How to work\nEdit files in the current directory (your git worktree) and exit. Do not \
         commit. Write a one-line description of your change to `.conference/note.md` (also \
         named by $CONFERENCE_NOTE_FILE; that folder is never part of your change). The \
         evaluation command is `{}`; the conference measures, keeps or reverts your change.",
        c.evaluation.command
    );
    s
}
