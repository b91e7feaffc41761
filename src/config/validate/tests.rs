use super::values::{
    devils_advocate, direction, optional_duration, pause_every, target, tolerance,
};
use super::*;
use crate::config::{
    load, Agent, DevilsAdvocate, Direction, Evaluation, MetricSpec, Mode, Tolerance,
};

const EXAMPLE: &str = include_str!("../../../tests/data/config/example.md");

fn errors(text: &str) -> Vec<ConfigError> {
    load(text).expect_err("should not validate")
}

/// The error on `line` whose message contains `needle`.
fn has_error(errors: &[ConfigError], line: usize, needle: &str) -> bool {
    errors
        .iter()
        .any(|e| e.line == line && e.message.contains(needle))
}

fn assert_error(text: &str, line: usize, needle: &str) -> ConfigError {
    let errors = errors(text);
    errors
        .iter()
        .find(|e| e.line == line && e.message.contains(needle))
        .cloned()
        .unwrap_or_else(|| panic!("no error at line {line} with {needle:?} in {errors:#?}"))
}

/// A small valid file in plain keys, the base of the error tests.
const PLAIN: &str = "\
# Conference: Plain
## Goal
Make it fast.
## Mode
- mode: metric
## Success Metric
- metric: ms
- target: none
- direction: lower is better
## Researchers
- count: 2
- iterations_per_round: 3
- max rounds: 2
## Evaluation
- command: ./eval.sh # the shell's comment, kept
## Agent
- command: builtin:tune
";

#[test]
fn the_example_round_trips_every_field() {
    let c = load(EXAMPLE).expect("example validates");
    let s = |v: &str| v.to_string();
    let expected = Config {
        title: s("Faster tokenizer"),
        goal: s("Cut the tokenizer benchmark's median time without changing its output."),
        brief: None,
        mode: Mode::Metric,
        metric: Some(MetricSpec {
            name: s("median_ms"),
            target: Some(40.0),
            direction: Direction::Minimize,
        }),
        criteria: None,
        count: 3,
        iterations_per_round: 5,
        max_rounds: 4,
        devils_advocate: DevilsAdvocate::Enabled,
        final_confirmation: Some(s("confirmed")),
        allowed: vec![s("src/tokenizer/**"), s("Cargo.toml (features only)")],
        forbidden: vec![
            s("benches/** and tests/** (the evaluation harness)"),
            s("Do not change the public API."),
        ],
        strategy: Strategy::Assigned,
        focus: [
            ("A", "Allocation: fewer copies, reuse buffers."),
            ("B", "Algorithm: the matching loop."),
            ("C", "Data layout and caching."),
        ]
        .into_iter()
        .map(|(k, v)| (s(k), s(v)))
        .collect(),
        guard: vec![s("cargo test --release must pass")],
        noise_runs: 3,
        min_consensus_delta: Some(Tolerance::Percent(1.0)),
        max_total_iterations: Some(60),
        time_budget: Some(Duration::from_secs(6 * 3600)),
        token_budget: None,
        cost_budget: None,
        cost_budget_per_researcher: false,
        researcher_timeout: Some(Duration::from_secs(45 * 60)),
        pause_every: None,
        stall_rounds: Some(2),
        lease: None,
        evaluation: Evaluation {
            command: s("./bench.sh"),
            timeout: Duration::from_secs(300),
            repeats: 1,
            frozen: vec![s("bench.sh"), s("benches/**")],
            frozen_none: false,
            last_number: false,
            prune: false,
            prune_early: false,
            prune_warmup: 2,
            hardware_same: false,
            holdout: None,
            judge: None,
        },
        agent: Agent {
            command: s(
                r#"claude -p "$(cat "$CONFERENCE_PROMPT_FILE")" --permission-mode acceptEdits"#,
            ),
            timeout: DEFAULT_AGENT_TIMEOUT,
            seed: 0,
            sweep: None,
            max_turns: None,
            extra_args: None,
            chair: None,
            reviewer: None,
            synthesizer: None,
            retrospective: None,
            model: None,
            base_url: None,
            api_key_env: None,
        },
        success_definition: Some(s("median_ms <= 40 with identical output")),
        current_approach: s("A straightforward byte-by-byte scanner with a HashMap vocabulary."),
        shared_knowledge: vec![],
        context: s("- benches/README.md explains the benchmark."),
        environment: Default::default(),
        loop_mode: Default::default(),
        branching: Default::default(),
        max_alive_branches: crate::model::tree::DEFAULT_MAX_ALIVE,
        parameter_sweep: false,
    };
    assert_eq!(c, expected);
    assert_eq!(c.devils_advocate_id().as_deref(), Some("C"));
}

#[test]
fn plain_keys_and_defaults() {
    let c = load(PLAIN).expect("plain form validates");
    assert_eq!(c.title, "Plain");
    assert_eq!(c.count, 2);
    assert_eq!(c.iterations_per_round, 3);
    assert_eq!(c.max_rounds, 2);
    let m = c.metric.expect("metric");
    assert_eq!(
        (m.name.as_str(), m.target, m.direction),
        ("ms", None, Direction::Minimize)
    );
    assert_eq!(
        c.evaluation.command,
        "./eval.sh # the shell's comment, kept"
    );
    assert_eq!(c.evaluation.timeout, DEFAULT_EVAL_TIMEOUT);
    assert_eq!(c.evaluation.repeats, 1);
    assert_eq!(c.agent.command, "builtin:tune");
    assert_eq!(c.strategy, Strategy::Free);
    assert_eq!(c.devils_advocate, DevilsAdvocate::Disabled);
    assert_eq!(c.noise_runs, 1);
    assert_eq!(c.min_consensus_delta, None);
    assert_eq!(c.pause_every, None);
    assert_eq!(c.final_confirmation, None);
}

#[test]
fn mixed_form_and_spellings() {
    let text = "\
# Conference: Mixed

## Goal
Be *better*.

Second paragraph.
## Mode
<!-- metric or qualitative -->
`metric` (numeric optimization)
## Success Metric
- **Metric:** accuracy on test set
- **Target:** > 95%
**Direction:** higher is better
## Researchers
Count: 4
- **Iterations-Per-Round:** 2
- MAX_ROUNDS: 3
## Pre-Flight Gate
- **Researcher count:** 4
- **Critic / Devil's Advocate:** ask user before run
- **Unattended:** no
- **Pause every:** 2 rounds
- **Final confirmation:** pending
## Search Space
- **Allowed changes:** {What researchers CAN modify}
- **Forbidden changes:**
  - data/**
  - note: keep the API
## Search Space Partitioning
- strategy: free
## Noise Handling
- noise_runs: 2
- min consensus delta: 0.02
## Constraints
- **Time budget:** 1.5h
- **Token budget:** 2M tokens
- **Researcher timeout:** 45 min
## Evaluation
- command: `python eval.py --split dev`
- timeout: 90
- repeats: 3
- frozen:
  - eval.py
  - data/**, fixtures/*.json
- holdout: python eval.py --split test
## Agent
- **Command:** ./agent.sh
- **Seed:** 42
- chair: ./prose.sh chair
## Guard
- tests pass
* no new dependencies
## Shared Knowledge
- buffers help
## Conference Log
| Round | Researcher | Best Metric | Key Finding | Status |
|---|---|---|---|---|
| 1 | A | 0.9 | x | kept |
";
    let c = load(text).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.goal, "Be *better*.\n\nSecond paragraph.");
    assert_eq!(c.metric.as_ref().map(|m| m.target), Some(Some(95.0)));
    assert_eq!(
        c.metric.as_ref().map(|m| m.direction),
        Some(Direction::Maximize)
    );
    assert_eq!(
        c.metric.map(|m| m.name).as_deref(),
        Some("accuracy on test set")
    );
    assert_eq!((c.count, c.iterations_per_round, c.max_rounds), (4, 2, 3));
    assert_eq!(c.devils_advocate, DevilsAdvocate::Ask);
    assert_eq!(c.pause_every, Some(2));
    assert_eq!(c.final_confirmation.as_deref(), Some("pending"));
    assert!(
        c.allowed.is_empty(),
        "unfilled placeholder: {:?}",
        c.allowed
    );
    assert_eq!(c.forbidden, vec!["data/**", "note: keep the API"]);
    assert_eq!(c.noise_runs, 2);
    assert_eq!(c.min_consensus_delta, Some(Tolerance::Absolute(0.02)));
    assert_eq!(c.time_budget, Some(Duration::from_secs(5400)));
    assert_eq!(c.token_budget, Some(2_000_000));
    assert_eq!(c.researcher_timeout, Some(Duration::from_secs(2700)));
    assert_eq!(c.max_total_iterations, None);
    assert_eq!(c.evaluation.command, "python eval.py --split dev");
    assert_eq!(c.evaluation.timeout, Duration::from_secs(90));
    assert_eq!(c.evaluation.repeats, 3);
    assert_eq!(
        c.evaluation.frozen,
        vec!["eval.py", "data/**", "fixtures/*.json"]
    );
    assert_eq!(
        c.evaluation.holdout.as_deref(),
        Some("python eval.py --split test")
    );
    assert_eq!(c.agent.seed, 42);
    assert_eq!(c.agent.chair.as_deref(), Some("./prose.sh chair"));
    assert_eq!(c.guard, vec!["tests pass", "no new dependencies"]);
    assert_eq!(c.shared_knowledge, vec!["buffers help"]);
}

#[test]
fn qualitative_mode_needs_criteria_and_judge() {
    let text = PLAIN.replace("- mode: metric", "qualitative");
    let e = errors(&text);
    assert!(has_error(&e, 0, "Success Criteria"), "{e:#?}");
    assert!(has_error(&e, 0, "`judge`"), "{e:#?}");
    let ok = format!("{text}## Success Criteria\nClear and correct.\n")
        .replace("## Agent", "- judge: ./judge.sh\n## Agent");
    let c = load(&ok).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.mode, Mode::Qualitative);
    assert_eq!(c.metric, None);
    assert_eq!(c.criteria.as_deref(), Some("Clear and correct."));
    assert_eq!(c.evaluation.judge.as_deref(), Some("./judge.sh"));
}

#[test]
fn each_bad_value_is_reported_on_its_line() {
    let cases = [
        (
            "- mode: metric",
            "- mode: numbers",
            5,
            "must be metric or qualitative",
        ),
        ("- target: none", "- target: fast", 8, "must be a number"),
        (
            "- direction: lower is better",
            "- direction: sideways",
            9,
            "maximize or minimize",
        ),
        ("- count: 2", "- count: 0", 11, "≥ 1"),
        (
            "- iterations_per_round: 3",
            "- iterations_per_round: many",
            12,
            "≥ 1",
        ),
        ("- max rounds: 2", "- max rounds: -1", 13, "≥ 1"),
        ("- command: builtin:tune", "- command:", 17, "empty"),
        (
            "- command: builtin:tune",
            "- command: builtin:tun",
            17,
            "`builtin:tun` is not built in; the built-in researchers are builtin:tune or \
                 builtin:openai",
        ),
    ];
    for (from, to, line, needle) in cases {
        let e = assert_error(&PLAIN.replace(from, to), line, needle);
        assert!(!e.hint.is_empty(), "{e:?}");
    }
}

#[test]
fn budgets_must_be_positive() {
    let text = format!(
            "{PLAIN}## Constraints\n- max total iterations: 0\n- time budget: 0s\n- researcher timeout: soon\n- pause every: 0\n## Noise Handling\n- noise runs: 0\n- min consensus delta: -1%\n"
        );
    let e = errors(&text);
    for line in 19..=22 {
        assert!(e.iter().any(|e| e.line == line), "line {line}: {e:#?}");
    }
    for line in 24..=25 {
        assert!(e.iter().any(|e| e.line == line), "line {line}: {e:#?}");
    }
    let e = assert_error(
        &PLAIN.replace("./eval.sh #", "./eval.sh\n- timeout: 0s #"),
        16,
        "timeout",
    );
    assert_eq!(e.hint, "- timeout: 5m");
}

#[test]
fn stall_rounds_is_never_or_a_count_and_defaults_to_two() {
    assert_eq!(load(PLAIN).unwrap().stall_rounds, Some(2));
    for (value, want) in [("never", None), ("3", Some(3)), ("1 round", Some(1))] {
        let text = format!("{PLAIN}## Constraints\n- stall rounds: {value}\n");
        assert_eq!(load(&text).unwrap().stall_rounds, want, "{value}");
    }
    let text = format!("{PLAIN}## Constraints\n- **Stall rounds:** 0\n");
    let e = assert_error(&text, 19, "never or a number of rounds");
    assert!(e.hint.contains("Stall rounds"), "{e:?}");
}

#[test]
fn missing_required_fields_name_themselves() {
    let e = errors("## Goal\n\n## Researchers\n- count: 1\n");
    assert!(has_error(&e, 0, "title"), "{e:#?}");
    assert!(has_error(&e, 1, "goal"), "{e:#?}");
    assert!(has_error(&e, 0, "## Mode"), "{e:#?}");
    assert!(has_error(&e, 0, "`Iterations per round`"), "{e:#?}");
    assert!(has_error(&e, 0, "`Max rounds`"), "{e:#?}");
    let eval = e
        .iter()
        .find(|e| e.message.contains("## Evaluation"))
        .expect("eval");
    assert!(eval.hint.contains("- command: ./eval.sh"), "{eval:?}");
    assert!(has_error(&e, 0, "## Agent"), "{e:#?}");
    // Errors come sorted, missing fields (line 0) last.
    assert_eq!(e.first().map(|e| e.line), Some(1));
    let e = errors(
        &PLAIN
            .replace("- metric: ms\n", "")
            .replace("- direction: lower is better\n", ""),
    );
    assert!(has_error(&e, 0, "`Metric`"), "{e:#?}");
    assert!(has_error(&e, 0, "`Direction`"), "{e:#?}");
    assert_eq!(e.len(), 2, "{e:#?}");
}

#[test]
fn pre_flight_gate_must_agree() {
    let text =
        format!("{PLAIN}## Pre-Flight Gate\n- **Researcher count:** 3\n- **Max rounds:** 2\n");
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].line, 19);
    assert!(
        e[0].message.contains("line 19") && e[0].message.contains("line 11"),
        "{e:?}"
    );
    // A value only in the gate is used.
    let c = load(&format!(
        "{}## Pre-Flight Gate\n- researcher count: 3\n- partitioning: free\n",
        PLAIN.replace("- count: 2\n", "")
    ))
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.count, 3);
}

#[test]
fn assigned_strategy_needs_a_focus_per_researcher() {
    let text = format!(
            "{PLAIN}## Search Space Partitioning\n**Strategy:** assigned\n### Researcher A Focus\nLoops.\n### Researcher C Focus\nToo many.\n"
        );
    let e = errors(&text);
    assert!(has_error(&e, 22, "count is 2"), "{e:#?}");
    let b = e
        .iter()
        .find(|e| e.message.contains("researcher B"))
        .expect("B missing");
    assert_eq!(b.line, 0);
    assert!(b.hint.contains("### Researcher B Focus"), "{b:?}");
    assert_eq!(e.len(), 2, "{e:#?}");
}

#[test]
fn final_confirmation_pending_is_kept_not_rejected() {
    let text = format!("{PLAIN}## Pre-Flight Gate\n- **Final confirmation:** pending\n");
    let c = load(&text).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.final_confirmation.as_deref(), Some("pending"));
}

#[test]
fn all_errors_are_collected() {
    let text = PLAIN
        .replace("- count: 2", "- count: zero")
        .replace("- max rounds: 2", "- max rounds: 2\n- bogus: 1")
        .replace("## Agent", "## Agnet");
    let e = errors(&text);
    assert!(has_error(&e, 11, "≥ 1"), "{e:#?}");
    assert!(has_error(&e, 14, "unknown key `bogus`"), "{e:#?}");
    assert!(has_error(&e, 17, "unknown section"), "{e:#?}");
    assert!(has_error(&e, 0, "## Agent"), "{e:#?}");
}

#[test]
fn the_original_skills_unfilled_template_names_what_to_fill_in() {
    let e = errors(include_str!(
        "../../../tests/data/config/original-template.md"
    ));
    let lines: Vec<usize> = e.iter().map(|e| e.line).collect();
    assert_eq!(lines, [3, 6, 28, 0, 0], "{e:#?}");
    assert!(e[1].message.contains("`## Mode` is empty"), "{e:#?}");
    assert!(e[3].message.contains("## Evaluation") && e[4].message.contains("## Agent"));
}

#[test]
fn value_parsers() {
    assert_eq!(target("< 50ms"), Some(Some(50.0)));
    assert_eq!(target("> 8/10"), Some(Some(8.0)));
    assert_eq!(target("-0.5"), Some(Some(-0.5)));
    assert_eq!(target("None"), Some(None));
    assert_eq!(target(""), None);
    assert_eq!(tolerance("1%"), Some(Some(Tolerance::Percent(1.0))));
    assert_eq!(tolerance("0.5 %"), Some(Some(Tolerance::Percent(0.5))));
    assert_eq!(tolerance("abc"), None);
    assert_eq!(direction("Min"), Some(Direction::Minimize));
    assert_eq!(direction("MAXIMISE"), Some(Direction::Maximize));
    assert_eq!(devils_advocate("yes"), Some(DevilsAdvocate::Enabled));
    assert_eq!(devils_advocate("false"), Some(DevilsAdvocate::Disabled));
    assert_eq!(
        devils_advocate("Ask user before run"),
        Some(DevilsAdvocate::Ask)
    );
    assert_eq!(devils_advocate("maybe"), None);
    assert_eq!(pause_every("never"), Some(None));
    assert_eq!(pause_every("3"), Some(Some(3)));
    assert_eq!(pause_every("0"), None);
    assert_eq!(optional_duration("none"), Some(None));
    assert_eq!(optional_duration("0m"), None);
}

fn openai(lines: &str) -> String {
    PLAIN.replace(
        "- command: builtin:tune",
        &format!("- command: builtin:openai\n{lines}"),
    )
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn http_agent_keys() {
    let text = openai(
        "- model: qwen2.5-coder\n- base url: http://127.0.0.1:11434/v1\n- api key env: MY_KEY",
    );
    let c = load(&text).expect("validates");
    assert_eq!(c.agent.model.as_deref(), Some("qwen2.5-coder"));
    assert_eq!(
        c.agent.base_url.as_deref(),
        Some("http://127.0.0.1:11434/v1")
    );
    assert_eq!(c.agent.api_key_env.as_deref(), Some("MY_KEY"));
    let bare = load(&openai("")).expect("validates without keys (environment variables)");
    assert_eq!(bare.agent.model, None);
}

#[test]
fn http_agent_keys_are_checked_with_their_line() {
    for bad in ["localhost:8000", "http://", "http:// x/v1"] {
        let text = openai(&format!("- base url: {bad}"));
        assert_error(&text, line_of(&text, "base url"), "http:// or https://");
    }
    let text = openai("- api key env: sk-proj-abcdef0123456789");
    let e = assert_error(&text, line_of(&text, "api key env"), "looks like a key");
    assert!(e.hint.contains("api key env: OPENAI_API_KEY"), "{e:?}");
    let text = openai("- api key env: my key");
    assert_error(&text, line_of(&text, "api key env"), "environment variable");
    let text = PLAIN.replace(
        "- command: builtin:tune",
        "- command: builtin:tune\n- base url: http://x/v1",
    );
    assert_error(
        &text,
        line_of(&text, "base url"),
        "only by `- command: builtin:openai`",
    );
}

#[test]
fn a_note_after_a_hash_is_shown_where_it_goes() {
    let noted = EXAMPLE.replacen("- timeout: 5m", "- timeout: 5m   # per experiment", 1);
    let e = errors(&noted);
    let said = e
        .iter()
        .find(|e| e.line == 67)
        .unwrap_or_else(|| panic!("{e:#?}"));
    assert!(said.message.contains("# per experiment"), "{said:#?}");
    assert!(said.message.contains("`<!-- … -->`"), "{said:#?}");
    let plain = errors(&EXAMPLE.replacen("- timeout: 5m", "- timeout: soon", 1));
    assert!(
        !plain.iter().any(|e| e.message.contains("<!--")),
        "{plain:#?}"
    );
}
