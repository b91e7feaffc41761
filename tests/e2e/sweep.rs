//! Parameter sweeps (issue 41): with `- **Parameter sweep:** on`, an agent's
//! `SWEEP: <path>:<name> = v1, v2, …` line has its edit measured once per value; the best is the
//! attempt and the others its siblings — commits whose git parent is the node the attempt
//! started from, checked here with plain git (`git rev-list --parents`, `git log --graph` of the
//! attempts ref, notes) — and the variants run at once (an evaluation that waits for the others
//! proves it). A bad line is a warning and the attempt goes on; off, nothing changes; a kill at
//! the sweep's steps resumes to the same record. Fixture: `fixtures/sweep`.

use serde_json::Value;

use crate::common::crash::{self, Ending, Stop};
use crate::common::TestRepo;

const NAME: &str = "sweep";

/// The sweep fixture with `iterations` in its one round; `sweep` false removes the line.
fn fixture(iterations: u32, sweep: bool) -> TestRepo {
    let repo = TestRepo::from_fixture("sweep");
    let mut config = repo.read("conference.md").replace(
        "**Iterations per round:** 4",
        &format!("**Iterations per round:** {iterations}"),
    );
    if !sweep {
        config = config.replace("- **Parameter sweep:** on\n", "");
    }
    repo.write("conference.md", &config);
    repo.commit_all("conference.md");
    repo
}

/// The attempts' event payloads of conference `name`, in order.
pub(crate) fn attempts_of(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
        .into_iter()
        .map(|e| e["payload"].clone())
        .collect()
}

/// Each commit's parents, as `git rev-list --parents` of the attempts ref prints them.
fn parent_of(repo: &TestRepo, commit: &str) -> String {
    let out = repo.git(&[
        "rev-list",
        "--parents",
        &format!("refs/conference/{NAME}/attempts"),
    ]);
    let line = out
        .lines()
        .find(|l| l.starts_with(commit))
        .unwrap_or_else(|| panic!("{commit} is reachable from the attempts ref"));
    let parents: Vec<&str> = line.split_whitespace().skip(1).collect();
    assert_eq!(parents.len(), 1, "{line}");
    parents[0].to_string()
}

/// A sweep kept, a plain attempt of nothing, and a sweep that does not beat its node (its first
/// value's tree was measured by the first sweep: taken from the evaluation cache).
const PLAN: &str = "WIDTH=12|SWEEP: train.py:LEARNING_RATE = 0.01, 0.001, 0.0001;-|;-|SWEEP: train.py:LEARNING_RATE = 0.01, 0.002";

#[test]
fn a_sweep_measures_each_value_and_keeps_the_best_as_the_attempt() {
    let repo = fixture(3, true);
    let prompts = repo.tmp.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    let evaluated = repo.tmp.path().join("evaluated");
    let run = repo.conference_env(
        &["start", NAME, "--yes"],
        &[
            ("SWEEP_PLAN", PLAN),
            ("SWEEP_PROMPTS", prompts.to_str().unwrap()),
            ("SWEEP_EVAL_LOG", evaluated.to_str().unwrap()),
        ],
    );
    let run = run.ok();
    // The progress line says a sweep ran, and its curve.
    assert!(
        run.stderr.contains(
            "sweep of 3 values of LEARNING_RATE: 0.01 → 1.25, 0.001 → 0.25 (chosen), 0.0001 → 1.25"
        ),
        "{}",
        run.stderr
    );
    let prompt = std::fs::read_to_string(prompts.join("1.md")).unwrap();
    assert!(prompt.contains("## Parameter sweeps"), "{prompt}");
    assert!(prompt.contains("SWEEP: <path>:<name> = v1, v2, v3"));

    let all = attempts_of(&repo, NAME);
    let (first, second, third) = (&all[0], &all[1], &all[2]);
    let baseline = repo.status_json(NAME)["baseline_commit"]
        .as_str()
        .unwrap()
        .to_string();
    // The attempt is the best variant: kept, its commit the chosen one's, LR set to that value.
    let sweep = &first["sweep"];
    assert_eq!(first["status"], "kept");
    assert_eq!(sweep["literal"], "train.py:LEARNING_RATE");
    assert_eq!(sweep["chosen"], 1);
    let variants = sweep["variants"].as_array().unwrap();
    let values: Vec<&str> = variants
        .iter()
        .map(|v| v["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["0.01", "0.001", "0.0001"]);
    let metrics: Vec<f64> = variants
        .iter()
        .map(|v| v["metric"].as_f64().unwrap())
        .collect();
    assert_eq!(metrics, [1.25, 0.25, 1.25]);
    assert_eq!(first["commit"], variants[1]["commit"]);
    let chosen = first["commit"].as_str().unwrap();
    let train = repo.show(chosen, "train.py").unwrap();
    assert!(
        train.contains("LEARNING_RATE = 0.001\nWIDTH = 12"),
        "{train}"
    );
    // Every variant is a commit whose parent is the node the attempt started from, reachable
    // from the attempts ref, with a note: the siblings `swept`, the attempt with the curve.
    for (k, v) in variants.iter().enumerate() {
        let commit = v["commit"].as_str().unwrap();
        assert_eq!(parent_of(&repo, commit), baseline, "variant {k}");
        let shown = repo.show(commit, "train.py").unwrap();
        assert!(
            shown.contains(&format!("LEARNING_RATE = {}\n", values[k])),
            "{shown}"
        );
        let note = &repo.notes(commit)[0];
        if k == 1 {
            assert_eq!(note["verdict"], "kept");
            assert_eq!(note["sweep"]["chosen"], 1);
            assert!(note["sweep_curve"]
                .as_str()
                .unwrap()
                .contains("0.01 → 1.25"));
        } else {
            assert_eq!(note["verdict"], "swept");
            assert_eq!(note["sweep_of"], chosen);
            assert_eq!(note["value"], values[k]);
        }
    }
    let graph = repo.git(&[
        "log",
        "--graph",
        "--oneline",
        "--no-merges",
        &format!("refs/conference/{NAME}/attempts"),
    ]);
    assert_eq!(graph.matches("step 1: WIDTH=12").count(), 3, "{graph}");
    // The worktree went to the chosen value: the next attempt, which edits nothing, is no change.
    assert_eq!(second["status"], "no_change");
    assert!(second.get("sweep").is_none());
    // A sweep whose best does not beat the node is reverted; every value is measured once.
    assert_eq!(third["status"], "reverted");
    assert_eq!(third["sweep"]["variants"].as_array().unwrap().len(), 2);
    let lrs = std::fs::read_to_string(&evaluated).unwrap();
    let mut lrs: Vec<&str> = lrs.lines().collect();
    lrs.sort();
    // The baseline's 0.1, the sweeps' five, and the review's and transfer's re-measures.
    for lr in ["0.01", "0.0001", "0.002"] {
        assert_eq!(lrs.iter().filter(|l| **l == lr).count(), 1, "{lr}: {lrs:?}");
    }
    // One iteration per agent run; every evaluation counted; status and log say so.
    let status = repo.conference(&["status", NAME]).ok().stdout;
    assert!(status.contains("Iterations: 3"), "{status}");
    assert!(
        status.contains("Sweeps:     2 (5 evaluations); last A-r1-i3: sweep of 2 values"),
        "{status}"
    );
    let log = repo.conference(&["log", NAME]).ok().stdout;
    assert!(
        log.contains("A r1 i1 kept 0.25 — sweep of 3 values of LEARNING_RATE"),
        "{log}"
    );
    let tree = repo.conference(&["log", NAME, "--graph"]).ok().stdout;
    assert!(tree.contains("A-r1-i1 LEARNING_RATE=0.01"), "{tree}");
    let swept = tree
        .lines()
        .filter(|l| l.trim_start().starts_with("swept "));
    assert_eq!(swept.count(), 3, "{tree}");
    let eval_s = first["eval_s"].as_f64().unwrap_or(0.0);
    let each: f64 = (variants.iter())
        .map(|v| v["eval_s"].as_f64().unwrap_or(0.0))
        .sum();
    assert!(
        (eval_s - (each * 10.0).round() / 10.0).abs() < 0.11,
        "{first}"
    );
}

#[test]
fn the_variants_of_a_sweep_are_evaluated_at_once() {
    let repo = fixture(1, true);
    let barrier = repo.tmp.path().join("barrier");
    let plan = "-|SWEEP: train.py:LEARNING_RATE = 0.01, 0.001, 0.0001, 0.003";
    let at = format!("{}:4", barrier.display());
    repo.conference_env(
        &["start", NAME, "--yes"],
        &[("SWEEP_PLAN", plan), ("SWEEP_BARRIER", &at)],
    )
    .ok();
    let first = &attempts_of(&repo, NAME)[0];
    for v in first["sweep"]["variants"].as_array().unwrap() {
        assert_eq!(v["status"], "ok", "each waited for the 3 others: {v}");
    }
    assert_eq!(first["status"], "kept");
}

/// With pruning on (`early`: behind at the same step is enough), the variants race (successive
/// halving): one evaluation slot, so the first
/// value's curve is complete when the others run; each of them is behind it at its first rung
/// (the 2nd reading, warmup 2) by more than the noise, and stopped there with the value it lost
/// to (each evaluation sleeps a second after each reading, so it is still running when stopped).
/// The leader is the attempt.
#[test]
fn with_pruning_on_a_sweeps_variants_behind_the_others_are_stopped() {
    let repo = fixture(1, true);
    race_in_one_slot(&repo);
    let plan = "WIDTH=12|SWEEP: train.py:LEARNING_RATE = 0.001, 0.01, 0.0001, 0.002";
    repo.conference_env(
        &["start", NAME, "--yes"],
        &[("SWEEP_PLAN", plan), ("SWEEP_CURVE", "1")],
    )
    .ok();
    let first = &attempts_of(&repo, NAME)[0];
    assert_eq!(first["status"], "kept", "{first}");
    let sweep = &first["sweep"];
    assert_eq!(sweep["chosen"], 0);
    let variants = sweep["variants"].as_array().unwrap();
    assert_eq!(variants[0]["status"], "ok");
    assert_eq!(variants[0]["metric"], 0.25);
    for v in &variants[1..] {
        assert_eq!(v["status"], "pruned", "{v}");
        let why = v["reason"].as_str().unwrap();
        assert!(
            why.contains("successive halving in its sweep: at step 200 LEARNING_RATE = "),
            "{why}"
        );
        assert!(
            why.contains("behind LEARNING_RATE = 0.001 (2.250000 there)"),
            "{why}"
        );
        let note = &repo.notes(v["commit"].as_str().unwrap())[0];
        assert_eq!(note["status"], "pruned");
    }
}

#[test]
fn a_bad_sweep_line_is_a_warning_and_the_attempt_goes_on() {
    let steps = [
        ("SWEEP: nothere.py:LR = 1, 2", "no text file `nothere.py`"),
        (
            "SWEEP: train.py:NOPE = 1, 2",
            "no literal `NOPE` in `train.py`",
        ),
        ("SWEEP: eval.sh:X = 1, 2", "`eval.sh` may not change"),
        ("SWEEP: train.py:WIDTH = 1,2,3,4,5,6,7,8,9", "9 values"),
        (
            "SWEEP: train.py:LEARNING_RATE = 0.01, fast",
            "`fast` is not a number",
        ),
        ("SWEEP: train.py:WIDTH = 12, 12.5", "whole number"),
    ];
    let plan: Vec<String> = (steps.iter().enumerate())
        .map(|(i, (line, _))| format!("WIDTH={}|{line}", 9 + i))
        .collect();
    let repo = fixture(steps.len() as u32, true);
    let run = repo
        .conference_env(
            &["start", NAME, "--yes"],
            &[("SWEEP_PLAN", &plan.join(";"))],
        )
        .ok();
    let all = attempts_of(&repo, NAME);
    assert_eq!(all.len(), steps.len());
    for (a, (line, says)) in all.iter().zip(steps) {
        let warning = a["sweep"]["warning"].as_str().unwrap_or_default();
        assert!(warning.contains(says), "{line}: {a}");
        assert!(run.stderr.contains(says), "{}", run.stderr);
        // A plain attempt of the agent's edit, kept (each WIDTH is closer to 16), its note warned.
        assert_eq!(a["status"], "kept", "{line}");
        let note = &repo.notes(a["commit"].as_str().unwrap())[0];
        assert!(note["sweep_warning"].as_str().unwrap().contains(says));
        assert!(!a["description"].as_str().unwrap().contains("SWEEP"));
    }
}

/// Each researcher sets its own width and sweeps 8 learning rates.
const WIDTHS: &str = r#"case $CONFERENCE_RESEARCHER in A) w=9 ;; B) w=10 ;; C) w=11 ;; *) w=13 ;; esac
sed "s/^WIDTH = .*/WIDTH = $w/" train.py > train.py.new && mv train.py.new train.py
printf 'width %s\nSWEEP: train.py:LEARNING_RATE = 0.01, 0.001, 0.0001, 0.003, 0.02, 0.0003, 0.005, 0.0005\n' "$w" > "$CONFERENCE_NOTE_FILE"
"#;

/// Four researchers sweep 8 values each at once: one process registers 32 variant worktrees
/// while the researchers run in parallel (`git worktree add` fails on another add's half-made
/// registration, "failed to read worktrees/sweep-D-3/commondir", and `prune` deletes one,
/// unless the process makes them one at a time; the conference stopped with exit 1). Every
/// sweep is measured and recorded, and git lists every variant's worktree.
#[test]
fn four_researchers_sweeping_at_once_each_get_their_variants() {
    let repo = TestRepo::from_fixture("sweep");
    let config = (repo.read("conference.md"))
        .replace("**Count:** 1", "**Count:** 4")
        .replace("**Iterations per round:** 4", "**Iterations per round:** 1")
        .replace("sh ./agent.sh", "sh ./widths.sh")
        .replace("frozen: eval.sh,", "frozen: eval.sh, widths.sh,");
    repo.write("conference.md", &config);
    repo.write("widths.sh", WIDTHS);
    repo.commit_all("four researchers sweeping");
    repo.conference(&["start", NAME, "--yes"]).ok();
    let attempts = attempts_of(&repo, NAME);
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    for a in &attempts {
        let variants = a["sweep"]["variants"].as_array().unwrap();
        assert_eq!(variants.len(), 8, "{a}");
        assert!(variants.iter().all(|v| v["status"] == "ok"), "{a}");
    }
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    for id in ["A", "B", "C", "D"] {
        for k in 1..=8 {
            let label = format!("/sweep-{id}-{k}\n");
            assert!(listed.contains(&label), "{label} in {listed}");
        }
    }
    repo.git(&["fsck", "--no-progress"]);
}

#[test]
fn with_sweeps_off_a_sweep_line_changes_nothing() {
    let repo = fixture(1, false);
    let prompts = repo.tmp.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    repo.conference_env(
        &["start", NAME, "--yes"],
        &[
            (
                "SWEEP_PLAN",
                "WIDTH=12|SWEEP: train.py:LEARNING_RATE = 0.01, 0.001",
            ),
            ("SWEEP_PROMPTS", prompts.to_str().unwrap()),
        ],
    )
    .ok();
    let prompt = std::fs::read_to_string(prompts.join("1.md")).unwrap();
    assert!(!prompt.contains("SWEEP"), "{prompt}");
    let a = &attempts_of(&repo, NAME)[0];
    assert!(a.get("sweep").is_none(), "{a}");
    assert_eq!(a["metric_value"], 4.25);
    let status = repo.conference(&["status", NAME]).ok().stdout;
    assert!(!status.contains("Sweeps"), "{status}");
}

#[test]
fn sweep_settings_are_checked_with_the_line() {
    let repo = fixture(1, true);
    let config = repo
        .read("conference.md")
        .replace("**Parameter sweep:** on", "**Parameter sweep:** maybe");
    repo.write("conference.md", &config);
    repo.commit_all("bad");
    let run = repo.conference(&["start", NAME, "--yes"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("Parameter sweep"), "{}", run.stderr);
    assert!(run.stderr.contains("must be on or off"), "{}", run.stderr);
}

/// Pruning on (`early`, warmup 2) with one evaluation slot: a sweep's variants race, the later
/// ones against the finished curves of those before.
pub(crate) fn race_in_one_slot(repo: &TestRepo) {
    let config = repo
        .read("conference.md")
        .replace(
            "- timeout: 30s\n",
            "- timeout: 30s\n- prune: early\n- prune warmup: 2\n",
        )
        .replace(
            "## Agent\n",
            "## Environment\n- max parallel evaluations: 1\n\n## Agent\n",
        );
    repo.write("conference.md", &config);
    repo.commit_all("prune");
}

/// What conference `name` recorded of its attempts, all but commits and times: (iteration,
/// verdict, metric, description, each variant's value, metric and status).
fn record_of(repo: &TestRepo, name: &str) -> Vec<String> {
    attempts_of(repo, name)
        .iter()
        .map(|a| {
            format!(
                "i{} {} {} {} [{}]",
                a["iteration"],
                a["status"],
                a["metric_value"],
                a["description"],
                curve_of(a)
            )
        })
        .collect()
}

/// An attempt's sweep as its variants' value, metric and status (empty when it swept nothing).
pub(crate) fn curve_of(attempt: &Value) -> String {
    let variants = attempt["sweep"]["variants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let curve: Vec<String> = (variants.iter())
        .map(|v| format!("{}={}:{}", v["value"], v["metric"], v["status"]))
        .collect();
    curve.join(" ")
}

/// Runs a fresh `fixture` killed at each of `failpoints` (with `env`), resumes it, and checks it
/// ends with the record, the counts and the head of a run never killed: every attempt once,
/// the same variants and metrics, nothing counted twice.
pub(crate) fn kills_resume_to_the_same_record(
    name: &str,
    fixture: &dyn Fn() -> TestRepo,
    env: &[(&str, &str)],
    failpoints: &[&str],
) {
    let reference = fixture();
    reference
        .conference_env(&["start", name, "--yes"], env)
        .ok();
    let head = |r: &TestRepo| {
        r.git(&[
            "rev-parse",
            &format!("conference/{name}/researcher-A^{{tree}}"),
        ])
    };
    let totals = |r: &TestRepo| {
        let st = r.status_json(name);
        (st["total_iterations"].clone(), st["sweeps"].clone())
    };
    for failpoint in failpoints {
        let repo = fixture();
        let mut with = env.to_vec();
        with.push(("GIT_CONFERENCE_FAILPOINT", failpoint));
        let leg = crash::run(&repo, name, &["start", name, "--yes"], &with, Stop::Never);
        assert_eq!(
            leg.ending,
            Ending::Signal(9),
            "{failpoint} was reached\n{leg}"
        );
        crash::kill_strays(&repo);
        let leg = crash::run(&repo, name, &["resume", name], env, Stop::Never);
        assert_eq!(leg.ending, Ending::Code(0), "{failpoint}\n{leg}");
        assert_eq!(
            record_of(&repo, name),
            record_of(&reference, name),
            "{failpoint}"
        );
        assert_eq!(totals(&repo), totals(&reference), "{failpoint}");
        assert_eq!(head(&repo), head(&reference), "{failpoint}");
        repo.git(&["fsck", "--no-progress"]);
    }
}

/// A kill at each step of a sweep (its commits made, its evaluations done, its event written,
/// the branch and worktree moved after it) resumes to the same record.
#[test]
fn a_kill_at_a_sweeps_steps_resumes_to_the_same_record() {
    kills_resume_to_the_same_record(
        NAME,
        &|| fixture(3, true),
        &[("SWEEP_PLAN", PLAN)],
        &[
            "sweep.committed:1",
            "sweep.evaluated:1",
            "event.researcher.iteration:1",
            "iteration.recorded:1",
            "worktree.put-back:1",
            "sweep.committed:2",
            "sweep.evaluated:2",
            "event.researcher.iteration:3",
        ],
    );
}
