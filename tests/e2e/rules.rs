//! End-to-end tests of the conference's rules (issue 12): frozen paths inferred but overruled by
//! the user's Allowed changes, the effective rules printed at start, the metric never guessed,
//! guard commands enforced, settings changed between rounds by `resume`, a stopped conference
//! continued, a failed baseline moved to a fix, names that cannot be the tool's own folders.
//! The real binary runs as `git conference …` through the real `git`; results are read with git.

use crate::common;

use common::{line_of, ConfigBuilder, TestRepo};
use serde_json::Value;

fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

fn rev(repo: &TestRepo, r: &str) -> String {
    repo.git(&["rev-parse", "--verify", r]).trim().to_string()
}

/// The autoresearch layout: `python3 train.py` evaluates the train.py the researcher edits,
/// prepare.py is frozen. The improving edit to train.py is kept and reaches best; the edit to
/// prepare.py is rejected unevaluated with the reason; `start` printed the rules it enforced.
#[test]
fn autoresearch_layout_keeps_train_py_edits_and_rejects_harness_edits() {
    let repo = TestRepo::from_fixture("autoresearch");
    let run = repo.conference(&["start"]).ok();
    assert!(
        run.stderr.contains("rules: frozen: prepare.py (Frozen)\n"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("rules: allowed: train.py\n"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "not frozen: train.py (named by an evaluation command, but Allowed changes allows it)"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("rules: guard: `python3 -c \"import train\"` must pass"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("note: the guard `Keep the training under five minutes.` is prose"),
        "{}",
        run.stderr
    );
    let its = iterations(&repo, "autoresearch");
    let verdicts: Vec<(&str, Option<&str>)> = its
        .iter()
        .map(|e| {
            (
                e["payload"]["status"].as_str().unwrap(),
                e["payload"]["reason"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("kept", None),
            (
                "rejected",
                Some("changes frozen path prepare.py (Frozen: prepare.py)")
            ),
            ("reverted", None)
        ]
    );
    assert_eq!(its[0]["payload"]["metric_value"].as_f64(), Some(1.0));
    // The rejected attempt was never evaluated, and its note says why.
    assert!(its[1]["payload"]["metric_value"].is_null());
    let rejected = its[1]["payload"]["commit"].as_str().unwrap();
    let note = repo.notes(rejected);
    assert_eq!(note[0]["verdict"], "rejected");
    assert_eq!(
        note[0]["reason"],
        "changes frozen path prepare.py (Frozen: prepare.py)"
    );
    // The kept edit is on best; prepare.py there is the user's.
    let best = repo
        .show("conference/autoresearch/best", "train.py")
        .unwrap();
    assert!(best.contains("LEARNING_RATE = 0.5"), "{best}");
    assert_eq!(
        repo.show("conference/autoresearch/best", "prepare.py"),
        repo.show("HEAD", "prepare.py")
    );
    // The prompt (the last one written) never lists train.py as frozen.
    let prompt = std::fs::read_to_string(
        repo.worktree("autoresearch", "researcher-A")
            .join(".conference/prompt.md"),
    )
    .unwrap();
    assert!(
        prompt.contains("## Allowed changes\n- train.py"),
        "{prompt}"
    );
    assert!(prompt.contains("- frozen: prepare.py"), "{prompt}");
    assert!(!prompt.contains("frozen: train.py"), "{prompt}");
}

/// A path both frozen and allowed is an error naming both lines; `frozen: none` is valid and
/// freezes nothing, not even the file the evaluation command names.
#[test]
fn frozen_and_allowed_is_an_error_and_frozen_none_is_valid() {
    let repo = TestRepo::from_fixture("autoresearch");
    let text = repo
        .read("conference.md")
        .replace("- frozen: prepare.py", "- frozen: prepare.py, train.py");
    let run = repo.start("both", &text);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let frozen_line = line_of(&text, "- frozen:");
    let allowed_line = line_of(&text, "- train.py");
    assert!(
        run.stderr.contains(&format!("conference.md:{frozen_line}: `train.py` is both frozen (line {frozen_line}: frozen: train.py) and allowed (line {allowed_line}: Allowed changes: train.py)")),
        "{}",
        run.stderr
    );
    assert_ne!(
        repo.git_run(&["rev-parse", "--verify", "refs/conference/both/events"])
            .code,
        0,
        "nothing is recorded"
    );

    // `frozen: none`, and an agent that edits prepare.py: nothing is frozen, but prepare.py is
    // outside the allowed changes.
    let text = repo
        .show("HEAD", "conference.md")
        .unwrap()
        .replace("- frozen: prepare.py", "- frozen: none");
    let run = repo
        .start("none", &text.replace("Autoresearch", "None"))
        .ok();
    assert!(
        run.stderr.contains("rules: frozen: none\n"),
        "{}",
        run.stderr
    );
    let its = iterations(&repo, "none");
    assert_eq!(
        its[1]["payload"]["reason"],
        "changes prepare.py, outside the allowed changes"
    );
    // `none` next to a path is a mistake, with its line.
    let bad = text.replace("- frozen: none", "- frozen: none, prepare.py");
    let run = repo.start("bad", &bad.replace("Autoresearch", "Bad"));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("conference.md:{}:", line_of(&bad, "- frozen:")))
            && run.stderr.contains("`none` cannot be listed with paths"),
        "{}",
        run.stderr
    );
}

/// A harness file the evaluation command names is frozen by inference, and the rejection says
/// where the rule came from. (With Allowed changes empty an unattended run is refused instead:
/// `newcomer::start_refuses_a_night_on_a_train_py_frozen_by_inference`; a run that pauses gets
/// the warning.)
#[test]
fn a_file_the_evaluation_names_is_frozen_with_its_provenance() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Inferred", "./agents/seq.sh frozen")
        .iterations(1)
        .frozen("agents/**")
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    let run = repo.start("inferred", &config);
    assert_eq!(run.code, 3, "paused after its round: {}", run.stderr);
    assert!(
        run.stderr.contains(
            "rules: frozen: agents/** (Frozen), eval.sh (named by the evaluation command)"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "warning: Allowed changes is empty, so researchers may change every file but the frozen ones, and eval.sh is frozen because the evaluation command names it"
        ),
        "{}",
        run.stderr
    );
    let its = iterations(&repo, "inferred");
    assert_eq!(its[0]["payload"]["status"], "rejected");
    assert_eq!(
        its[0]["payload"]["reason"],
        "changes frozen path eval.sh (named by the evaluation command)"
    );
}

/// `init --allowed train.py --frozen prepare.py` writes the autoresearch search space, so the
/// first `start` edits train.py and guards the harness, with no warning to read.
#[test]
fn init_flags_write_the_search_space_the_first_start_enforces() {
    let repo = TestRepo::from_fixture("autoresearch");
    repo.conference(&[
        "init",
        "--yes",
        "--config",
        "mine.md",
        "--count",
        "1",
        "--eval",
        "python3 train.py",
        "--metric",
        "val_bpb",
        "--direction",
        "minimize",
        "--agent",
        "builtin:tune",
        "--allowed",
        "train.py",
        "--frozen",
        "prepare.py",
        "--iterations-per-round",
        "2",
        "--max-rounds",
        "1",
    ])
    .ok();
    let text = std::fs::read_to_string(repo.dir.join("mine.md")).unwrap();
    assert!(
        text.contains("**Allowed changes:**\n- train.py\n"),
        "{text}"
    );
    assert!(text.contains("- **Frozen:** prepare.py\n"), "{text}");
    repo.commit_all("conference.md from init");
    let run = repo
        .conference(&["start", "--config", "mine.md", "--yes"])
        .ok();
    assert!(
        run.stderr.contains("rules: frozen: prepare.py (Frozen)")
            && run.stderr.contains("rules: allowed: train.py")
            && !run.stderr.contains("warning: Allowed changes is empty"),
        "{}",
        run.stderr
    );
}

/// An output that does not name the metric is a crash with the reason and the output's last
/// lines, never its last number; `metric from: last number` opts in to reading it.
#[test]
fn the_metric_is_never_guessed_unless_opted_in() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\necho 'epoch 1 done'\necho \"$(cat value.txt)\"\n",
    );
    repo.commit_all("an evaluation that prints a bare number");
    let config = ConfigBuilder::new("Bare", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    let run = repo.start("bare", &config);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "metric score not in the output; last lines: epoch 1 done | 10 (print `score: <number>`, or add `- metric from: last number`"
        ),
        "{}",
        run.stderr
    );
    assert!(repo.events_named("bare", "baseline.measured").is_empty());

    let opted = config.replace("Bare", "Opted").replace(
        "- frozen: eval.sh, agents/**",
        "- frozen: eval.sh, agents/**\n- metric from: last number",
    );
    repo.start("opted", &opted).ok();
    let baseline = repo.events_named("opted", "baseline.measured");
    assert_eq!(baseline[0]["payload"]["metric_value"].as_f64(), Some(10.0));
    assert_eq!(
        iterations(&repo, "opted")[0]["payload"]["metric_value"].as_f64(),
        Some(9.0)
    );

    let wrong = opted
        .replace("Opted", "Wrong")
        .replace("last number", "the biggest");
    let run = repo.start("wrong", &wrong);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{}:",
            line_of(&wrong, "metric from")
        )) && run
            .stderr
            .contains("- metric from: name   (or: last number)"),
        "{}",
        run.stderr
    );
}

/// A guard command runs on a candidate that measured better, before it is kept: one that breaks
/// it is rejected with the command and its output. A guard whose program does not exist stops
/// `start` with its line; an empty `run:` is an error with its line.
#[test]
fn guard_commands_are_enforced() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "check.sh",
        "#!/bin/sh\nv=$(cat value.txt)\nif [ \"$v\" -lt 9 ]; then echo \"value $v is below 9\"; exit 1; fi\n",
    );
    repo.commit_all("a guard script");
    let mut config = ConfigBuilder::new("Guarded", "./agents/seq.sh improve improve")
        .iterations(2)
        .frozen("eval.sh, agents/**, check.sh")
        .build();
    config = config.replace(
        "## Noise Handling",
        "## Guard\n- run: ./check.sh\n- Be careful.\n\n## Noise Handling",
    );
    let run = repo.start("guarded", &config).ok();
    assert!(
        run.stderr.contains(
            "note: the guard `Be careful.` is prose: agents are told, but it cannot be checked"
        ),
        "{}",
        run.stderr
    );
    let its = iterations(&repo, "guarded");
    assert_eq!(its[0]["payload"]["status"], "kept");
    assert_eq!(its[1]["payload"]["status"], "rejected");
    assert_eq!(
        its[1]["payload"]["reason"],
        "guard `./check.sh` failed (exit status 1): value 8 is below 9"
    );
    // Measured (it was better), but never kept: the branch holds 9.
    assert_eq!(its[1]["payload"]["metric_value"].as_f64(), Some(8.0));
    assert_eq!(
        repo.show("conference/guarded/researcher-A", "value.txt")
            .unwrap()
            .trim(),
        "9"
    );

    let missing = config
        .replace("Guarded", "Missing")
        .replace("- run: ./check.sh", "- `no-such-checker --all` must pass");
    let run = repo.start("missing", &missing);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{}: the guard command runs `no-such-checker`, which is not found on PATH",
            line_of(&missing, "no-such-checker")
        )),
        "{}",
        run.stderr
    );
    let empty = config
        .replace("Guarded", "Empty")
        .replace("- run: ./check.sh", "- run:");
    let run = repo.start("empty", &empty);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{}: guard `run:`",
            line_of(&empty, "- run:")
        )),
        "{}",
        run.stderr
    );
}

/// A conference stopped by its budget says how to continue; `resume` after raising the budget in
/// conference.md applies it (`conference.config_changed`, with the diff, the stored copy updated
/// in the same commit), continues (`conference.continued`) and runs the new round; the first
/// stop stays in the log.
#[test]
fn a_budget_stop_continues_with_a_raised_budget() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Budget", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.start("budget", &config).ok();
    assert_eq!(repo.status_json("budget")["final_status"], "budget_stop");

    // Nothing edited: complete, with the way to continue.
    let run = repo.conference(&["resume", "budget"]).ok();
    assert!(run.stdout.contains("already complete"), "{}", run.stdout);
    assert!(
        run.stdout.contains("raise its budgets in conference.md"),
        "{}",
        run.stdout
    );

    // `start` points to resume, which now continues with the raised budget.
    let raised = config.replace("- **Max rounds:** 1", "- **Max rounds:** 2");
    repo.write("conference.md", &raised);
    let again = repo.conference(&["start", "budget"]);
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("git conference resume budget"),
        "{}",
        again.stderr
    );
    let run = repo.conference(&["resume", "budget"]).ok();
    assert!(
        run.stderr
            .contains("- Max rounds (Researchers): 1 → 2   (line "),
        "{}",
        run.stderr
    );
    let names: Vec<String> = repo
        .events("budget")
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    let pos = |n: &str| {
        names
            .iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("no {n} in {names:?}"))
    };
    let last = |n: &str| names.iter().rposition(|x| x == n).unwrap();
    assert!(pos("conference.budget_stop") < pos("conference.config_changed"));
    assert!(pos("conference.config_changed") < pos("conference.continued"));
    assert!(pos("conference.continued") < last("round.started"));
    assert_eq!(
        repo.events_named("budget", "conference.budget_stop").len(),
        2
    );
    assert_eq!(repo.events_named("budget", "conference.completed").len(), 2);
    let changed = &repo.events_named("budget", "conference.config_changed")[0]["payload"];
    assert_eq!(changed["changes"][0]["key"], "Max rounds");
    assert_eq!(changed["changes"][0]["old"], "1");
    assert_eq!(changed["changes"][0]["new"], "2");
    assert!(
        changed["diff"]
            .as_str()
            .unwrap()
            .contains("-- **Max rounds:** 1\n+- **Max rounds:** 2"),
        "{changed}"
    );
    // The config_changed commit itself holds the new stored copy.
    let commit = repo
        .git(&[
            "log",
            "--format=%H",
            "--grep=^conference.config_changed:",
            "refs/conference/budget/events",
        ])
        .trim()
        .to_string();
    let stored = repo.show(&commit, "conference.md").unwrap();
    assert!(stored.contains("- **Max rounds:** 2"), "{stored}");
    // What the conference maintains (Shared Knowledge) stays as it wrote it, though the user's
    // file has no such section.
    let before = repo.show(&format!("{commit}~1"), "conference.md").unwrap();
    let knowledge = |t: &str| {
        t.split("## Shared Knowledge")
            .nth(1)
            .map(|rest| rest.split("\n## ").next().unwrap().to_string())
    };
    assert!(!config.contains("## Shared Knowledge"));
    assert!(knowledge(&before).is_some(), "{before}");
    assert_eq!(knowledge(&stored), knowledge(&before));
    let st = repo.status_json("budget");
    assert_eq!(st["round"], 2);
    assert_eq!(st["final_status"], "budget_stop");
    let rounds: Vec<u64> = repo
        .events_named("budget", "round.completed")
        .iter()
        .map(|e| e["payload"]["round"].as_u64().unwrap())
        .collect();
    assert_eq!(rounds, [1, 2], "no round ran twice");

    // A budget not raised enough: refused, with what stops it.
    let run = repo.conference(&["resume", "budget", "--continue"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("max_rounds (2) reached"),
        "{}",
        run.stderr
    );
}

/// What may not change is refused with exit 2 and the line, and nothing is recorded; what may
/// change (the agent, a timeout, the guard) is applied at the next step, printed and recorded.
#[test]
fn resume_applies_changeable_settings_and_refuses_the_metric() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Edit", "./agents/seq.sh worsen")
        .iterations(1)
        .rounds(3)
        .frozen("eval.sh, agents/**")
        .constraint("- **Pause every:** 1")
        .build();
    let run = repo.start("edit", &config);
    assert_eq!(run.code, 3, "paused: {}", run.stderr);
    let events_before = repo.events("edit").len();

    let metric = config.replace("- **Metric:** score", "- **Metric:** loss");
    repo.write("conference.md", &metric);
    let run = repo.conference(&["resume", "edit"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{}: `Metric` in ## Success Metric cannot change after start",
            line_of(&metric, "**Metric:**")
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Nothing was changed or run."),
        "{}",
        run.stderr
    );
    assert_eq!(repo.events("edit").len(), events_before);
    // The evaluation command cannot change once the baseline is measured.
    let eval = config.replace("- command: ./eval.sh", "- command: sh eval.sh");
    repo.write("conference.md", &eval);
    let run = repo.conference(&["resume", "edit"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("once the baseline is measured"),
        "{}",
        run.stderr
    );

    // The agent changes: round 2 runs the new one.
    let agent = config.replace("./agents/seq.sh worsen", "./agents/seq.sh improve");
    repo.write("conference.md", &agent);
    let run = repo.conference(&["resume", "edit"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("- command (Agent): ./agents/seq.sh worsen → ./agents/seq.sh improve"),
        "{}",
        run.stderr
    );
    let its = iterations(&repo, "edit");
    let by_round: Vec<(u64, &str)> = its
        .iter()
        .map(|e| {
            (
                e["payload"]["round"].as_u64().unwrap(),
                e["payload"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(by_round, [(1, "reverted"), (2, "kept")]);
    assert_eq!(
        repo.events_named("edit", "conference.config_changed").len(),
        1
    );
    // Resuming again with the same file changes nothing (round 3 runs, the last).
    let run = repo.conference(&["resume", "edit"]).ok();
    assert!(!run.stderr.contains("Settings changed"), "{}", run.stderr);
    assert_eq!(
        repo.events_named("edit", "conference.config_changed").len(),
        1
    );
    // A conference.md of another conference is left alone, with a note.
    repo.write(
        "conference.md",
        &agent.replace("# Conference: Edit", "# Conference: Other"),
    );
    let run = repo.conference(&["resume", "edit"]).ok();
    assert!(
        run.stderr.contains("is titled `Other`, not `Edit`"),
        "{}",
        run.stderr
    );
    assert_eq!(
        repo.events_named("edit", "conference.config_changed").len(),
        1
    );
}

/// The failed-baseline advice works: an evaluation that fails on the baseline stops `start`
/// with both ways out; committing the fix and `resume --base HEAD` measures the fixed commit
/// (`conference.rebased`); a timeout raised in conference.md is applied by a plain `resume`.
#[test]
fn a_failed_baseline_is_measured_again_after_a_fix() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\necho 'data/train.bin is missing' >&2\nexit 1\n",
    );
    repo.commit_all("a broken harness");
    let broken = rev(&repo, "HEAD");
    let config = ConfigBuilder::new("Fix", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    let run = repo.start("fix", &config);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("`git conference resume fix --base HEAD`"),
        "{}",
        run.stderr
    );
    repo.git(&["checkout", "-q", &format!("{broken}~1"), "--", "eval.sh"]);
    repo.commit_all("fix the harness");
    let fixed = rev(&repo, "HEAD");
    // Starting it again, as a user who fixed the harness might, names the way that works here
    // (a plain resume would measure the broken baseline again).
    let again = repo.conference(&["start", "fix"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("once the harness is fixed and committed, continue it from your fix with `git conference resume fix --base HEAD`"),
        "{}",
        again.stderr
    );
    repo.conference(&["resume", "fix", "--base", "HEAD"]).ok();
    let rebased = repo.events_named("fix", "conference.rebased");
    assert_eq!(rebased[0]["payload"]["from"], broken.as_str());
    assert_eq!(rebased[0]["payload"]["to"], fixed.as_str());
    let baseline = repo.events_named("fix", "baseline.measured");
    assert_eq!(baseline[0]["payload"]["commit"], fixed.as_str());
    assert_eq!(iterations(&repo, "fix")[0]["payload"]["status"], "kept");
    let researcher = rev(&repo, "conference/fix/researcher-A");
    assert_eq!(rev(&repo, &format!("{researcher}~1")), fixed);
    // Once measured, the baseline cannot move.
    let run = repo.conference(&["resume", "fix", "--base", "HEAD~1"]);
    assert_eq!(run.code, 2, "{}", run.stderr);

    // A baseline that times out: a longer timeout in conference.md, then a plain resume.
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\nsleep 2\necho \"score: $(cat value.txt)\"\n",
    );
    repo.commit_all("a slow harness");
    let slow = ConfigBuilder::new("Slow", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build()
        .replace("- timeout: 30s\n- frozen", "- timeout: 1s\n- frozen");
    let run = repo.start("slow", &slow);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);
    repo.write(
        "conference.md",
        &slow.replace("- timeout: 1s\n- frozen", "- timeout: 20s\n- frozen"),
    );
    let run = repo.conference(&["resume", "slow"]).ok();
    assert!(
        run.stderr.contains("- timeout (Evaluation): 1s → 20s"),
        "{}",
        run.stderr
    );
    assert_eq!(
        repo.events_named("slow", "baseline.measured")[0]["payload"]["metric_value"].as_f64(),
        Some(10.0)
    );
}

/// A conference cannot be named like the tool's own folder: refused when given, mapped when the
/// title gives it; `clean --all hooks` never deletes installed hooks. `start` warns that
/// uncommitted changes are not part of the baseline.
#[test]
fn names_cannot_be_the_hooks_folder_and_uncommitted_changes_are_named() {
    let repo = TestRepo::from_fixture("loop");
    let hook = repo.git_dir().join("conference/hooks/round.completed");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    let config = ConfigBuilder::new("Hooks", "./agents/seq.sh improve")
        .iterations(1)
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    let run = repo.conference(&["start", "hooks"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`hooks` cannot be a conference name"),
        "{}",
        run.stderr
    );

    repo.write("value.txt", "12\n");
    let run = repo.conference(&["start"]).ok();
    assert!(
        run.stderr
            .contains("this conference is named `hooks-conference`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("warning: uncommitted changes to value.txt are not part of the baseline"),
        "{}",
        run.stderr
    );
    assert_eq!(
        repo.events_named("hooks-conference", "baseline.measured")[0]["payload"]["metric_value"]
            .as_f64(),
        Some(10.0),
        "the committed value, not the working tree's"
    );
    let run = repo.conference(&["clean", "--all", "hooks"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    repo.conference(&["clean", "--all", "hooks-conference"])
        .ok();
    assert!(hook.exists(), "the installed hook is still there");
}

/// On a terminal `init` asks for the evaluation command, the metric, its direction (suggesting
/// minimize for a loss-like name) and the agent, and writes the answers; with flags it asks
/// nothing.
#[test]
fn init_on_a_terminal_asks_for_the_measurement_and_the_agent() {
    let repo = TestRepo::from_fixture("autoresearch");
    std::fs::remove_file(repo.dir.join("conference.md")).unwrap();
    // count 1 (no devil's advocate or strategy question), unattended, then the new questions:
    // evaluation, metric, direction (Enter: the suggested default), agent, Allowed changes and
    // Frozen (Enter: the train.py the evaluation names is allowed, nothing more is frozen).
    let out = repo.conference_on_a_terminal(
        &["init", "Autoresearch"],
        b"1\nyes\npython3 train.py\nval_bpb\n\nclaude\n\n\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Is a lower or a higher val_bpb better? (minimize/maximize) [minimize]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a preset (claude, codex, aider, gemini, opencode)"),
        "{stderr}"
    );
    let text = repo.read("conference.md");
    for setting in [
        "- **Command:** python3 train.py",
        "- **Metric:** val_bpb",
        "- **Direction:** minimize",
        "- **Command:** claude",
        "**Allowed changes:**\n- train.py\n",
    ] {
        assert!(text.contains(setting), "{setting} missing:\n{text}");
    }
    // Without a terminal, flags as before: nothing is asked.
    let run = repo.conference(&[
        "init",
        "--force",
        "--yes",
        "--eval",
        "python3 train.py",
        "--metric",
        "val_bpb",
        "--direction",
        "minimize",
        "--agent",
        "./agent.sh",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("Metric name"), "{}", run.stderr);
    assert!(repo
        .read("conference.md")
        .contains("- **Command:** ./agent.sh"));
}

/// Knowledge transfer runs the guard on a combination no researcher measured: two findings that
/// each pass it, but not together, do not both reach best.
#[test]
fn a_combination_that_breaks_the_guard_stays_off_best() {
    let repo = TestRepo::from_fixture("complement");
    let config = ConfigBuilder::new("Combined", "./agent.sh")
        .count(2)
        .iterations(1)
        .frozen("eval.sh, agent.sh")
        .build()
        .replace(
            "## Noise Handling",
            "## Guard\n- run: test \"$(cat a.txt)\" -eq 10 || test \"$(cat b.txt)\" -eq 10\n\n## Noise Handling",
        );
    repo.start("combined", &config).ok();
    let kept: Vec<Value> = iterations(&repo, "combined")
        .into_iter()
        .filter(|e| e["payload"]["status"] == "kept")
        .collect();
    assert_eq!(kept.len(), 2, "each finding alone passes the guard");
    let picks: Vec<(String, String)> = repo
        .events_named("combined", "transfer.pick")
        .iter()
        .map(|e| {
            (
                e["payload"]["result"].as_str().unwrap().to_string(),
                e["payload"]["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(picks[0].0, "merged", "{picks:?}");
    assert_eq!(picks[1].0, "dropped", "{picks:?}");
    assert!(
        picks[1].1.starts_with("combined best: guard `test \"$(cat a.txt)\" -eq 10 || test \"$(cat b.txt)\" -eq 10` failed (exit status 1)"),
        "{picks:?}"
    );
    let best = "conference/combined/best";
    let (a, b) = (
        repo.show(best, "a.txt").unwrap(),
        repo.show(best, "b.txt").unwrap(),
    );
    assert!(
        a.trim() == "10" || b.trim() == "10",
        "best carries one finding only: a={a} b={b}"
    );
}

/// `Cost budget: $0.05 per researcher`: the researcher whose agent has spent its share takes no
/// more iterations and its round ends saying so, while the other goes on; the spend is what the
/// agent's output says (Claude Code's JSON report, which a script may print as well).
#[test]
fn a_cost_budget_per_researcher_stops_only_the_researcher_past_its_share() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "agents/paid.sh",
        "#!/bin/sh\n./agents/improve.sh\n\
         case \"$CONFERENCE_RESEARCHER\" in A) c=0.04;; *) c=0.01;; esac\n\
         echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"lower\",\"total_cost_usd\":'$c',\"usage\":{\"input_tokens\":1000,\"output_tokens\":100}}'\n",
    );
    repo.commit_all("an agent that reports what it cost");
    let mut config = ConfigBuilder::new("Shares", "./agents/paid.sh")
        .iterations(4)
        .frozen("eval.sh, agents/**")
        .constraint("- **Cost budget:** $0.05 per researcher");
    config.count = 2;
    let run = repo.start("shares", &config.build());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let its = iterations(&repo, "shares");
    let of = |id: &str| {
        its.iter()
            .filter(|e| e["payload"]["researcher"] == id)
            .count()
    };
    // A spent $0.04, then $0.08 (past its $0.05): no third run. B's $0.04 leaves it under.
    assert_eq!((of("A"), of("B")), (2, 4), "{its:#?}");
    let finished = repo.events_named("shares", "researcher.finished");
    let why = |id: &str| {
        finished
            .iter()
            .find(|e| e["payload"]["researcher"] == id)
            .map(|e| e["payload"].to_string())
            .unwrap_or_default()
    };
    assert!(
        why("A").contains("cost budget: researcher A spent $0.0800 of its $0.0500 share"),
        "{finished:#?}"
    );
    assert!(why("B").contains("completed"), "{finished:#?}");
    // Not every researcher is past its share: the conference did not stop for the budget.
    let st = repo.status_json("shares");
    assert_ne!(st["stop_reason"], "cost_budget", "{st}");
}
