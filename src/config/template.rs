//! The conference.md that `git conference init` writes.
//!
//! A new user learns the format from this file, so it is complete (every section of the seed's
//! template, in its order, plus Evaluation and Agent), explains itself in HTML comments that the
//! parser ignores, and always validates: tests load it back for many answer combinations.

use super::keys::Key;
use std::fmt::Write as _;

use super::{researcher_id, Direction, Strategy};

/// The answers to `init`'s pre-flight questions.
#[derive(Debug, Clone, PartialEq)]
pub struct InitAnswers {
    pub title: String,
    pub count: usize,
    pub devils_advocate: bool,
    pub unattended: bool,
    /// Pause after every N rounds (ignored when unattended).
    pub pause_every: Option<u32>,
    pub strategy: Strategy,
    pub eval_command: String,
    pub agent_command: String,
    pub metric: String,
    pub direction: Direction,
    pub target: Option<f64>,
    pub iterations_per_round: u32,
    pub max_rounds: u32,
    /// Allowed changes, one path or glob each (empty: the commented example).
    pub allowed: Vec<String>,
    /// The Evaluation `frozen` value (None: the script the evaluation command runs, if any).
    pub frozen: Option<String>,
}

impl Default for InitAnswers {
    fn default() -> Self {
        InitAnswers {
            title: "My conference".to_string(),
            count: 3,
            devils_advocate: false,
            unattended: true,
            pause_every: None,
            strategy: Strategy::Free,
            eval_command: "./eval.sh".to_string(),
            agent_command: "builtin:tune".to_string(),
            metric: "score".to_string(),
            direction: Direction::Maximize,
            target: None,
            iterations_per_round: 5,
            max_rounds: 4,
            allowed: Vec::new(),
            frozen: None,
        }
    }
}

/// Focus suggestions for assigned partitioning, cycled over the researchers.
const FOCUS: &[&str] = &[
    "Small, safe refinements of the current approach.",
    "A different algorithm or structure for the core of the problem.",
    "Parameters, constants and configuration.",
    "Data layout, caching and memory use.",
    "Simplification: remove work that does not pay for itself.",
];

const DEVILS_ADVOCATE_FOCUS: &str =
    "Devil's advocate: pursue contrarian strategies the others would dismiss.";

/// Write a complete, commented conference.md for `a`.
pub fn render(a: &InitAnswers) -> String {
    let v = Values::of(a);
    let mut s = String::new();
    write_goal_and_metric(&mut s, &v);
    write_researchers_and_gate(&mut s, a, &v);
    write_search_space(&mut s, a, &v);
    write_guard_noise_constraints(&mut s, &v);
    write_evaluation_agent_environment(&mut s, a, &v);
    write_maintained_sections(&mut s);
    s
}

/// The answers as the file writes them, several of them in more than one section.
struct Values {
    title: String,
    metric: String,
    /// At least 1.
    count: usize,
    direction: &'static str,
    /// "Raise" or "Lower", for the goal.
    better: &'static str,
    target: String,
    /// "never" or N (never when unattended).
    pause: String,
    strategy: &'static str,
    /// Researchers × iterations per round × max rounds (capped at u32::MAX).
    total: u64,
    success: String,
    eval_command: String,
    frozen: String,
}

impl Values {
    fn of(a: &InitAnswers) -> Values {
        let metric = one_line(&a.metric);
        let count = a.count.max(1);
        let (direction, better, compare) = match a.direction {
            Direction::Maximize => ("maximize", "Raise", ">="),
            Direction::Minimize => ("minimize", "Lower", "<="),
        };
        let pause = if a.unattended {
            None
        } else {
            a.pause_every.filter(|&n| n > 0)
        };
        let total = count as u64
            * u64::from(a.iterations_per_round.max(1))
            * u64::from(a.max_rounds.max(1));
        let success = match a.target {
            Some(t) => format!("{metric} {compare} {t}"),
            None => format!("the best {metric} reached within the budgets"),
        };
        let eval_command = one_line(&a.eval_command);
        let script = eval_command
            .split_whitespace()
            .next()
            .and_then(|first| first.strip_prefix("./"))
            .unwrap_or("");
        let frozen = a.frozen.as_deref().map(one_line);
        let frozen = frozen.as_deref().unwrap_or(script).to_string();
        Values {
            title: one_line(&a.title),
            count,
            direction,
            better,
            target: a.target.map_or("none".to_string(), |t| t.to_string()),
            pause: pause.map_or("never".to_string(), |n| n.to_string()),
            strategy: match a.strategy {
                Strategy::Assigned => "assigned",
                Strategy::Free => "free",
            },
            total: total.min(u64::from(u32::MAX)),
            success,
            eval_command,
            frozen,
            metric,
        }
    }
}

/// The title, how to edit the file, and Goal, Mode, Success Metric and Success Criteria.
fn write_goal_and_metric(w: &mut String, v: &Values) {
    line(w, &format!("# Conference: {}", v.title));
    comment(w, "Written by `git conference init`. Edit freely: `git conference start` validates this file and names the line of any problem. Text inside these comments is ignored. Settings are `- **Key:** value` (or plain `- key: value`); a value is the whole rest of its line.");
    section(
        w,
        "Goal",
        "What to achieve, specific and measurable. Researchers read this first. `- brief: program.md` puts a committed file (autoresearch's program.md) into every researcher's prompt, its first 8 KiB, and freezes it.",
    );
    line(w, &format!("{} {}.", v.better, v.metric));
    section(
        w,
        "Mode",
        "metric (a number to optimize) or qualitative (a judge scores candidates 0-10).",
    );
    line(w, "metric");
    section(w, "Success Metric", "Metric mode: the metric's name, the value that ends the conference when reached (or none), and which way is better.");
    setting(w, "Metric", &v.metric);
    setting(w, "Target", &v.target);
    setting(w, "Direction", v.direction);
    section(
        w,
        "Success Criteria",
        "Qualitative mode: what \"good\" looks like, in prose.",
    );
    line(w, "(qualitative mode only: what \"good\" means, in prose)");
}

/// Researchers, and the Pre-Flight Gate that repeats their values with the other answers.
fn write_researchers_and_gate(w: &mut String, a: &InitAnswers, v: &Values) {
    section(
        w,
        "Researchers",
        "Researchers are named A, B, C, ... Each works in its own git worktree. Mode: agentic never asks; human-in-the-loop pauses (exit 3) before knowledge transfer puts findings on best, when every researcher is stalled, and on a blocking question, until `git conference approve NAME` (or `answer`).",
    );
    setting(w, "Count", &v.count.to_string());
    setting(
        w,
        Key::IterationsPerRound.name(),
        &a.iterations_per_round.to_string(),
    );
    setting(w, Key::MaxRounds.name(), &a.max_rounds.to_string());
    setting(w, "Mode", "agentic");
    section(w, "Pre-Flight Gate", "The answers to the pre-flight questions. Values repeated from other sections must agree with them. `Final confirmation: pending` stops `start`.");
    setting(w, Key::ResearcherCount.name(), &v.count.to_string());
    setting(
        w,
        Key::IterationsPerRound.name(),
        &a.iterations_per_round.to_string(),
    );
    setting(w, Key::MaxRounds.name(), &a.max_rounds.to_string());
    setting(w, Key::MaxTotalIterations.name(), &v.total.to_string());
    setting(w, Key::SuccessDefinition.name(), &v.success);
    setting(
        w,
        "Critic / Devil's Advocate",
        if a.devils_advocate {
            "enabled"
        } else {
            "disabled"
        },
    );
    setting(w, "Unattended", if a.unattended { "yes" } else { "no" });
    setting(w, Key::PauseEvery.name(), &v.pause);
    setting(w, "Partitioning", v.strategy);
    setting(w, "Final confirmation", "confirmed");
}

/// Search Space (allowed and forbidden changes) and its partitioning, with each focus.
fn write_search_space(w: &mut String, a: &InitAnswers, v: &Values) {
    section(w, "Search Space", "Paths or rules, one bullet each. Candidates touching a forbidden (or frozen) path are rejected before evaluation.");
    line(w, "**Allowed changes:**");
    if a.allowed.is_empty() {
        comment(w, "e.g. - src/**");
    }
    for path in &a.allowed {
        line(w, &format!("- {}", one_line(path)));
    }
    blank(w);
    line(w, "**Forbidden changes:**");
    comment(w, "e.g. - tests/**");
    section(w, "Search Space Partitioning", "assigned: each researcher explores its own focus below; free: all explore the whole space.");
    line(w, &format!("**Strategy:** {}", v.strategy));
    if a.strategy == Strategy::Assigned {
        let count = v.count;
        for i in 0..count {
            let focus = if a.devils_advocate && count >= 2 && i == count - 1 {
                DEVILS_ADVOCATE_FOCUS
            } else {
                FOCUS[i % FOCUS.len()]
            };
            blank(w);
            line(w, &format!("### Researcher {} Focus", researcher_id(i)));
            line(w, focus);
        }
    }
}

/// Guard, Noise Handling and Constraints (the budgets).
fn write_guard_noise_constraints(w: &mut String, v: &Values) {
    section(
        w,
        "Guard",
        "Conditions every kept change must preserve, one bullet each. A command bullet (`- run: cargo test` or - `cargo test` must pass) runs in the candidate's worktree on every candidate that measured better, before it is kept; if it fails the candidate is rejected with its output. Any other bullet is prose: the agents read it, the conference cannot check it.",
    );
    section(w, "Noise Handling", "Noise runs: readings of the baseline at the start and of each finding in peer review (interleaved with the round start, compared by medians; more than 1 measures the noise every gain must beat). Min consensus delta: the smallest gain that counts (1% of the baseline, or an absolute 0.02).");
    setting(w, Key::NoiseRuns.name(), "1");
    setting(w, "Min consensus delta", "0.1%");
    section(w, "Constraints", "Budgets: whichever is reached first stops the conference. Durations: 30s, 45m, 2h, 1h30m; none for no limit. Pause every: never, or N to stop after every N rounds until `git conference resume`. Stall rounds: consecutive rounds without progress (every researcher stuck, or the best not moving) that end the conference; never for a loop that only budgets and the target stop. Token budget (2M tokens) and Cost budget ($20) count what the agents report (presets and builtin:openai report it): no agent run starts once either is reached.");
    setting(w, Key::MaxTotalIterations.name(), &v.total.to_string());
    setting(w, Key::TimeBudget.name(), "none");
    setting(w, Key::TokenBudget.name(), "none");
    setting(w, Key::CostBudget.name(), "none");
    setting(w, Key::ResearcherTimeout.name(), "none");
    setting(w, Key::PauseEvery.name(), &v.pause);
    setting(w, "Stall rounds", "2");
}

/// Evaluation, Agent and Environment: the commands and what they run in.
fn write_evaluation_agent_environment(w: &mut String, a: &InitAnswers, v: &Values) {
    section(w, "Evaluation", "command prints the metric and runs in the researcher's worktree; timeout is per experiment; repeats is runs per candidate (their mean counts); frozen lists the evaluation harness (paths or globs, comma-separated), which no candidate may change; committed files the commands name are frozen too unless Allowed changes lists them (`python3 train.py` with train.py allowed: train.py may change); frozen: none freezes nothing. metric from: name (the output must print `<metric>: <number>` or a JSON key; otherwise the run is a crash) or last number (take the last number printed when the metric is not named). Optional: holdout (a command run only in peer review), judge (qualitative mode: prints `score: <0-10>`).");
    setting(w, "Command", &v.eval_command);
    setting(w, "Timeout", "15m");
    setting(w, "Repeats", "1");
    setting(w, "Frozen", &v.frozen);
    setting(w, "Metric from", "name");
    section(w, "Agent", "command runs in the researcher's worktree with the prompt in $CONFERENCE_PROMPT_FILE; it edits files and exits (never commits). builtin:tune needs no AI service. builtin:openai asks any OpenAI-compatible chat API (hosted, vLLM, Ollama, llama.cpp, LM Studio) with `- model:`, `- base url:` (e.g. http://127.0.0.1:11434/v1) and `- api key env:` (the variable holding the key, never the key); OPENAI_MODEL, OPENAI_BASE_URL and OPENAI_API_KEY serve when those are unset. A preset (claude, codex, aider, gemini, opencode) runs that CLI headless with edits allowed in the worktree only; with a preset, optional model (opencode: provider/model), max turns (claude only) and extra args. seed makes built-in researchers deterministic. Optional: chair, reviewer, synthesizer commands for prose; retrospective: a command that writes the prose of each entry the finished conference adds to the knowledge store (it reads the entry on stdin; `git conference knowledge`).");
    setting(w, "Command", &one_line(&a.agent_command));
    setting(w, "Seed", "0");
    section(w, "Environment", "What worktrees need to run your code, and where evaluations run. Setup: a command run once in each new worktree before its first evaluation (e.g. uv sync --frozen); it must not change committed files; with a launcher other than local it runs where evaluations run (in each staged tree), not here. Shared: git-ignored paths of your working tree (data/, .venv) linked into every worktree, read-only to candidates. Devices: e.g. 0,1,2,3 gives each evaluation its own device (CUDA_VISIBLE_DEVICES and CONFERENCE_DEVICE), one evaluation per device at a time. Max parallel evaluations: a limit for CPU-bound evaluations. none for each: plain checkouts, evaluations run as soon as asked.");
    setting(w, "Setup", "none");
    setting(w, "Shared", "none");
    setting(w, "Devices", "none");
    setting(w, "Max parallel evaluations", "none");
}

/// The prose sections the user or the conference fills in, ending with the log table's header.
fn write_maintained_sections(w: &mut String) {
    section(
        w,
        "Current Approach",
        "The baseline: what exists now and how it works.",
    );
    section(
        w,
        "Shared Knowledge",
        "Maintained by the conference: validated findings are added here after each round.",
    );
    line(
        w,
        "(filled in by the conference: one line per validated finding)",
    );
    section(
        w,
        "Context & References",
        "Background for the researchers: papers, docs, URLs, code files.",
    );
    section(
        w,
        "Conference Log",
        "Maintained by the conference: one row per researcher per round.",
    );
    line(w, super::edit::LOG_HEADER);
    line(w, super::edit::LOG_SEPARATOR);
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn line(w: &mut String, text: &str) {
    w.push_str(text);
    w.push('\n');
}

fn blank(w: &mut String) {
    w.push('\n');
}

fn comment(w: &mut String, text: &str) {
    // `--` may not appear inside an HTML comment, and `-->` would end it early.
    let _ = writeln!(w, "<!-- {} -->", text.replace("--", "- -"));
}

fn section(w: &mut String, name: &str, about: &str) {
    blank(w);
    line(w, &format!("## {name}"));
    comment(w, about);
}

fn setting(w: &mut String, key: &str, value: &str) {
    let _ = writeln!(w, "- **{key}:** {value}");
    if value.is_empty() {
        // No trailing space after an empty value.
        w.truncate(w.len() - 2);
        w.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load, DevilsAdvocate, Mode};

    fn combinations() -> Vec<InitAnswers> {
        let base = InitAnswers::default();
        vec![
            base.clone(),
            InitAnswers {
                title: "Faster\ntokenizer".into(),
                count: 1,
                strategy: Strategy::Assigned,
                direction: Direction::Minimize,
                target: Some(40.0),
                metric: "median_ms".into(),
                ..base.clone()
            },
            InitAnswers {
                count: 7,
                devils_advocate: true,
                unattended: false,
                pause_every: Some(2),
                strategy: Strategy::Assigned,
                eval_command: "python eval.py --seed 1 # quick".into(),
                agent_command: r#"claude -p "$(cat "$CONFERENCE_PROMPT_FILE")""#.into(),
                target: Some(0.95),
                iterations_per_round: 1,
                max_rounds: 1,
                ..base.clone()
            },
            InitAnswers {
                count: 30,
                devils_advocate: true,
                unattended: true,
                pause_every: Some(3),
                ..base.clone()
            },
            InitAnswers {
                unattended: false,
                pause_every: None,
                target: Some(-1.5),
                ..base
            },
        ]
    }

    #[test]
    fn rendered_files_validate_with_the_answers() {
        for a in combinations() {
            let text = render(&a);
            let c = load(&text).unwrap_or_else(|e| panic!("{e:#?}\n{text}"));
            assert_eq!(
                c.title,
                a.title.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            assert_eq!(c.mode, Mode::Metric);
            assert_eq!(c.count, a.count);
            assert_eq!(c.iterations_per_round, a.iterations_per_round);
            assert_eq!(c.max_rounds, a.max_rounds);
            let m = c.metric.as_ref().expect("metric");
            assert_eq!(
                (&m.name, m.target, m.direction),
                (&a.metric, a.target, a.direction)
            );
            assert_eq!(c.strategy, a.strategy);
            let da = if a.devils_advocate {
                DevilsAdvocate::Enabled
            } else {
                DevilsAdvocate::Disabled
            };
            assert_eq!(c.devils_advocate, da);
            let pause = if a.unattended { None } else { a.pause_every };
            assert_eq!(c.pause_every, pause);
            assert_eq!(c.evaluation.command, a.eval_command);
            assert_eq!(c.agent.command, a.agent_command);
            assert_eq!(c.final_confirmation.as_deref(), Some("confirmed"));
            let total = a.count as u32 * a.iterations_per_round * a.max_rounds;
            assert_eq!(c.max_total_iterations, Some(total));
            let focus = if a.strategy == Strategy::Assigned {
                a.count
            } else {
                0
            };
            assert_eq!(c.focus.len(), focus);
            assert!(c.focus.values().all(|f| !f.is_empty()));
            assert!(c.shared_knowledge.is_empty() && c.guard.is_empty());
            // The template's comments are no prose: nothing for the prompt until the user writes.
            assert_eq!((c.current_approach.as_str(), c.context.as_str()), ("", ""));
            assert!(c
                .success_definition
                .as_deref()
                .is_some_and(|s| s.contains(&a.metric)));
        }
    }

    #[test]
    fn rendered_file_has_the_seed_sections_in_order() {
        let text = render(&InitAnswers::default());
        let headings: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("## ")).collect();
        let expected: Vec<&str> = [
            "Goal",
            "Mode",
            "Success Metric",
            "Success Criteria",
            "Researchers",
            "Pre-Flight Gate",
            "Search Space",
            "Search Space Partitioning",
            "Guard",
            "Noise Handling",
            "Constraints",
            "Evaluation",
            "Agent",
            "Environment",
            "Current Approach",
            "Shared Knowledge",
            "Context & References",
            "Conference Log",
        ]
        .to_vec();
        assert_eq!(headings, expected);
        // The settings nobody finds unless the file names them: the loop mode, written out,
        // and the retrospective's prose command, named among the Agent section's options.
        assert!(text.contains("- **Mode:** agentic\n"), "{text}");
        assert!(text.contains("human-in-the-loop pauses (exit 3)"), "{text}");
        assert!(text.contains("retrospective: a command"), "{text}");
        let c = load(&text).unwrap();
        assert_eq!(c.loop_mode, crate::config::LoopMode::Agentic);
        assert!(text.starts_with("# Conference: My conference\n<!-- "));
        assert!(text.lines().all(|l| l == l.trim_end()), "trailing spaces");
        assert!(text.contains("- **Frozen:** eval.sh\n"));
    }

    #[test]
    fn the_devils_advocate_gets_the_last_focus() {
        let a = InitAnswers {
            count: 3,
            devils_advocate: true,
            strategy: Strategy::Assigned,
            ..InitAnswers::default()
        };
        let c = load(&render(&a)).expect("valid");
        assert_eq!(c.devils_advocate_id().as_deref(), Some("C"));
        assert!(c.focus["C"].starts_with("Devil's advocate"));
    }

    #[test]
    fn edits_keep_a_rendered_file_valid() {
        let text = render(&InitAnswers::default());
        let text = crate::config::edit::append_shared_knowledge(&text, "a finding");
        let row: Vec<String> = ["1", "A", "0.5", "a finding", "kept"]
            .iter()
            .map(|c| c.to_string())
            .collect();
        let text = crate::config::edit::append_conference_log_row(&text, &row);
        let c = load(&text).expect("valid");
        assert_eq!(c.shared_knowledge, ["a finding"]);
    }
}
