//! The tree of ideas (issue 41): with `- **Branching:**` on, every attempt is a commit whose git
//! parent is the node it started from, checked here with plain git (`git rev-list --parents`,
//! `git log --graph` of the attempts ref); the researcher's branch points at its best alive head;
//! `BRANCH: fork`, `BRANCH: <id>` and an unknown id under `agent-decided`; losers closed past N
//! and when stale; best-first going back to a fork point when the first gain is a dead end;
//! `log --graph` and its JSON; the settings' errors; builtin:tune best-first; and a kill at the
//! tree's new steps resuming to the same tree. Fixture: `fixtures/tree` (the first gain, `x`,
//! is a dead end; the way on starts with the smaller `y`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::crash::{self, Ending, Stop};
use crate::common::TestRepo;

pub(crate) const NAME: &str = "tree";

/// The tree fixture with its conference.md set to `mode`, `iterations` in one round, N alive.
pub(crate) fn fixture(mode: &str, iterations: u32, max_alive: u32) -> TestRepo {
    let repo = TestRepo::from_fixture("tree");
    let config = repo
        .read("conference.md")
        .replace(
            "**Branching:** agent-decided",
            &format!("**Branching:** {mode}"),
        )
        .replace(
            "**Iterations per round:** 8",
            &format!("**Iterations per round:** {iterations}"),
        )
        .replace(
            "**Max alive branches:** 3",
            &format!("**Max alive branches:** {max_alive}"),
        );
    repo.write("conference.md", &config);
    repo.commit_all("conference.md");
    repo
}

/// Runs the conference to its end with the agent's plan (`x:fork y z:A-r1-i2`).
pub(crate) fn run(repo: &TestRepo, plan: &str) -> crate::common::Run {
    repo.conference_env(&["start", NAME, "--yes"], &[("TREE_PLAN", plan)])
        .ok()
}

/// The attempts' events by attempt id (`A-r1-i3`), in order.
fn attempts(repo: &TestRepo) -> Vec<(String, Value)> {
    repo.events_named(NAME, "researcher.iteration")
        .into_iter()
        .map(|e| {
            let p = &e["payload"];
            let id = format!(
                "{}-r{}-i{}",
                p["researcher"].as_str().unwrap(),
                p["round"],
                p["iteration"]
            );
            (id, p.clone())
        })
        .collect()
}

/// Each commit's parents, as `git rev-list --parents` of the attempts ref prints them.
fn parents(repo: &TestRepo) -> BTreeMap<String, Vec<String>> {
    let out = repo.git(&[
        "rev-list",
        "--parents",
        &format!("refs/conference/{NAME}/attempts"),
    ]);
    out.lines()
        .map(|l| {
            let mut ids = l.split_whitespace().map(str::to_string);
            let commit = ids.next().unwrap();
            (commit, ids.collect())
        })
        .collect()
}

/// Every attempt's git parent is the node its event says it started from, and the attempts ref
/// keeps it reachable.
fn check_parents(repo: &TestRepo) {
    let parents = parents(repo);
    for (id, p) in attempts(repo) {
        let Some(commit) = p["commit"].as_str() else {
            continue;
        };
        let from = p["branch"]["from"]["commit"].as_str().unwrap();
        assert_eq!(parents[commit], [from], "{id}: its parent is its node");
    }
}

#[test]
fn agent_decided_forks_goes_to_an_id_and_warns_on_an_unknown_one() {
    let repo = fixture("agent-decided", 6, 3);
    let prompts = repo.tmp.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    let plan = "x:fork y z:A-r1-i2 y:A-r9-i9 y z";
    repo.conference_env(
        &["start", NAME, "--yes"],
        &[
            ("TREE_PLAN", plan),
            ("TREE_PROMPTS", prompts.to_str().unwrap()),
        ],
    )
    .ok();
    let a = attempts(&repo);
    let from = |i: usize| {
        a[i].1["branch"]["from"]["label"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let next = |i: usize| {
        a[i].1["branch"]["next"]["label"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // i1 x (kept) says fork: i2 starts from the same node, the baseline.
    assert_eq!((from(0), next(0)), ("baseline".into(), "baseline".into()));
    assert_eq!(
        a[1].1["status"], "kept",
        "y from the baseline opens a second branch"
    );
    // i3 z (reverted) names A-r1-i2: i4 starts there; i4 names no attempt: a warning, and the
    // next one goes on from i4 (kept).
    assert_eq!((from(2), next(2)), ("A-r1-i2".into(), "A-r1-i2".into()));
    assert_eq!(from(3), "A-r1-i2");
    let warning = a[3].1["branch"]["warning"].as_str().unwrap();
    assert!(
        warning.contains("A-r9-i9") && warning.contains("no attempt"),
        "{warning}"
    );
    assert_eq!(next(3), "A-r1-i4");
    let commit = a[3].1["commit"].as_str().unwrap();
    let note = &repo.notes(commit)[0];
    assert!(
        note["branch_warning"].as_str().unwrap().contains("A-r9-i9"),
        "{note}"
    );
    check_parents(&repo);
    // Plain git draws the tree: x and y are both children of the baseline.
    let graph = repo.git(&[
        "log",
        "--graph",
        "--oneline",
        "--no-merges",
        &format!("refs/conference/{NAME}/attempts"),
    ]);
    let base = repo.git(&["rev-parse", "main"]);
    let children = parents(&repo)
        .values()
        .filter(|p| p.len() == 1 && p[0] == base.trim())
        .count();
    assert!(children >= 2, "two branches from the baseline:\n{graph}");
    assert!(graph.contains("|/"), "a fork drawn by git:\n{graph}");
    // The prompt lists the alive branches and says how to choose.
    let prompt = std::fs::read_to_string(prompts.join("A-4.md")).unwrap();
    assert!(
        prompt.contains("This attempt starts from A-r1-i2"),
        "{prompt}"
    );
    assert!(prompt.contains("- A-r1-i1 (commit"), "{prompt}");
    assert!(prompt.contains("`BRANCH: fork`"), "{prompt}");
    // The researcher's branch points at its best alive head: y y y (0.55) beat x (0.6).
    let head = repo.git(&["rev-parse", &format!("conference/{NAME}/researcher-A")]);
    assert_eq!(a[4].1["metric_value"], 0.55);
    assert_eq!(head.trim(), a[4].1["commit"].as_str().unwrap());
}

#[test]
fn losers_are_closed_past_n_and_when_stale_and_status_lists_the_branches() {
    let repo = fixture("agent-decided", 7, 2);
    // x, then y from the baseline; three z's from x (stale); then y's line overtakes.
    run(&repo, "x:fork y:A-r1-i1 z z z:A-r1-i2 y y");
    let a = attempts(&repo);
    let closed: Vec<(String, String)> = a
        .iter()
        .flat_map(|(_, p)| {
            p["branch"]["closed"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| {
            (
                c["label"].as_str().unwrap().into(),
                c["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        closed
            .iter()
            .any(|(l, r)| l == "baseline" && r.starts_with("past 2 alive")),
        "{closed:?}"
    );
    assert!(
        closed
            .iter()
            .any(|(l, r)| l == "A-r1-i1" && r.contains("behind the leader")),
        "{closed:?}"
    );
    let st = repo.status_json(NAME);
    let alive: Vec<&str> = st["researchers"]["A"]["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["label"].as_str().unwrap())
        .collect();
    assert!(alive.len() <= 2 && !alive.contains(&"A-r1-i1"), "{alive:?}");
    let text = repo.conference(&["status", NAME]).ok().stdout;
    assert!(text.contains("Branches (* best head"), "{text}");
    assert!(text.contains("A *"), "{text}");
    check_parents(&repo);
}

#[test]
fn best_first_leaves_a_dead_end_for_the_fork_point_and_reaches_the_best_region() {
    let repo = fixture("best-first", 12, 3);
    run(
        &repo,
        &["x"; 1]
            .into_iter()
            .chain(["y"; 11])
            .collect::<Vec<_>>()
            .join(" "),
    );
    let a = attempts(&repo);
    // After the dead end failed three times, the conference went back to the baseline.
    let back = a
        .iter()
        .position(|(_, p)| p["branch"]["from"]["label"] == "baseline" && p["iteration"] != 1)
        .expect("an attempt from the baseline after the first");
    assert_eq!(back, 4, "after the leader's three failures");
    let why = a[back - 1].1["branch"]["why"].as_str().unwrap();
    assert!(why.starts_with("best-first: baseline"), "{why}");
    let best = repo.status_json(NAME)["best"]["metric"].as_f64().unwrap();
    assert!(best <= 0.45, "the best region: {best}");
    check_parents(&repo);
    // The final report gives the path from the baseline to best, one line per step.
    let report = repo
        .show(&format!("refs/conference/{NAME}/events"), "final_report.md")
        .unwrap();
    let path = report
        .split("## Path from the baseline to best")
        .nth(1)
        .unwrap();
    assert!(
        path.contains("1. baseline") && path.contains("A-r1-i5"),
        "{path}"
    );
    assert!(
        !path.contains("A-r1-i1 "),
        "the dead end is not on the path: {path}"
    );
}

#[test]
fn log_graph_draws_the_tree_and_its_json_gives_each_nodes_parent() {
    let repo = fixture("agent-decided", 4, 3);
    run(&repo, "x:fork y z y");
    let text = repo.conference(&["log", NAME, "--graph"]).ok().stdout;
    assert!(text.contains("├─ A-r1-i1"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("* kept") && l.contains("A-r1-i1")),
        "{text}"
    );
    let json: Value = serde_json::from_str(
        &repo
            .conference(&["log", NAME, "--graph", "--format", "json"])
            .ok()
            .stdout,
    )
    .unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    for n in nodes.iter().filter(|n| n["verdict"] != "baseline") {
        let commit = n["commit"].as_str().unwrap();
        let parent = repo.git(&["rev-parse", &format!("{commit}^")]);
        assert_eq!(n["parent"].as_str().unwrap(), parent.trim(), "{n}");
    }
    let best_path: Vec<&str> = nodes
        .iter()
        .filter(|n| n["on_best_path"] == true)
        .map(|n| n["label"].as_str().unwrap())
        .collect();
    // x (0.6) is best; y's line (0.75) is not on its path.
    assert_eq!(best_path, ["baseline", "A-r1-i1", "best r1 (A)"]);
    let refused = repo.conference(&["log", NAME, "--format", "json"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--graph"), "{}", refused.stderr);
}

#[test]
fn branching_settings_are_checked_with_the_line_and_what_to_write() {
    let repo = TestRepo::from_fixture("tree");
    let base = repo.read("conference.md");
    let cases = [
        (
            "**Branching:** agent-decided",
            "**Branching:** greedy",
            "must be off, agent-decided or best-first",
        ),
        (
            "**Branching:** agent-decided",
            "**Branchin:** best-first",
            "Branchin",
        ),
        (
            "**Max alive branches:** 3",
            "**Max alive branches:** 1",
            "from 2 to 64",
        ),
        (
            "**Max alive branches:** 3",
            "**Max alive branches:** many",
            "from 2 to 64",
        ),
        (
            "**Branching:** agent-decided",
            "**Branching:** off",
            "branching is off",
        ),
    ];
    for (from, to, says) in cases {
        repo.write("conference.md", &base.replace(from, to));
        let run = repo.conference(&["start", NAME, "--yes"]);
        assert_eq!(run.code, 2, "{to}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{to}: {}", run.stderr);
        assert!(
            run.stderr.contains("conference.md:"),
            "{to} names the line: {}",
            run.stderr
        );
    }
    // In another section, the key is not one of that section's.
    let misplaced = base
        .replace("- **Branching:** agent-decided\n", "")
        .replace("- timeout: 30s", "- timeout: 30s\n- Branching: best-first");
    repo.write("conference.md", &misplaced);
    let run = repo.conference(&["start", NAME, "--yes"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("Branching"), "{}", run.stderr);
}

/// One builtin:tune researcher on tune-2d with best-first, one round of 8 attempts.
const TUNE_2D: &str = "# Conference: Tune tree
## Goal
Minimise f.
## Mode
metric
## Success Metric
- **Metric:** f
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 1
- **Iterations per round:** 8
- **Max rounds:** 1
- **Branching:** best-first
## Search Space
**Allowed changes:**
- params.sh
## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh
## Agent
- command: builtin:tune
";

#[test]
fn builtin_tune_runs_best_first_and_every_attempt_hangs_off_its_node() {
    let repo = TestRepo::from_fixture("tune-2d");
    repo.write("conference.md", TUNE_2D);
    repo.commit_all("conference.md");
    let run = repo.conference(&["start", NAME, "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let a = attempts(&repo);
    assert_eq!(a.len(), 8);
    for (id, p) in &a {
        let why = p["branch"]["why"].as_str().unwrap();
        assert!(why.starts_with("best-first"), "{id}: {why}");
    }
    check_parents(&repo);
}

/// builtin:tune with best-first, while the conference extends its best (the leader), chooses
/// the region it refines as it does without a tree: from a start in the far corner of tune-2d,
/// 24 attempts are the same points as with branching off. (Kept to the leader's region, it
/// proposed other points from the 21st attempt on, and in 7 seeds of 20 ended in the other
/// basin: BENCHMARKS.md, issue 41.)
#[test]
fn builtin_tune_from_its_best_proposes_what_it_proposes_without_a_tree() {
    let metrics = |branching: &str| {
        let repo = TestRepo::from_fixture("tune-2d");
        let params = repo
            .read("params.sh")
            .replace("x=-1.0", "x=-4.708")
            .replace("y=1.0", "y=4.7932");
        repo.write("params.sh", &params);
        repo.write(
            "conference.md",
            &TUNE_2D
                .replace(
                    "- **Iterations per round:** 8",
                    "- **Iterations per round:** 24",
                )
                .replace("- **Branching:** best-first\n", branching),
        );
        repo.commit_all("conference.md");
        let run = repo.conference(&["start", NAME, "--yes"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        attempts(&repo)
            .into_iter()
            .map(|(id, p)| {
                (
                    id,
                    p["metric_value"].to_string(),
                    p["branch"]["why"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let tree = metrics("- **Branching:** best-first\n");
    let off = metrics("");
    assert_eq!(tree.len(), 24);
    // Up to its first excursion (the leader failing more often than its record explains).
    let leader: Vec<_> = (tree.into_iter())
        .take_while(|(_, _, why)| (why.as_str().unwrap()).starts_with("best-first: the leader"))
        .map(|(id, m, _)| (id, m))
        .collect();
    assert!(leader.len() >= 8, "{leader:?}");
    let off: Vec<_> = (off.into_iter())
        .take(leader.len())
        .map(|(id, m, _)| (id, m))
        .collect();
    assert_eq!(leader, off);
}

/// The tree a conference reached: each attempt's (id, node it started from, verdict, metric).
fn tree_of(repo: &TestRepo) -> Vec<(String, String, String, String)> {
    attempts(repo)
        .into_iter()
        .map(|(id, p)| {
            (
                id,
                p["branch"]["from"]["label"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                p["status"].as_str().unwrap().to_string(),
                p["metric_value"].to_string(),
            )
        })
        .collect()
}

/// How the conference is killed: at each failpoint in turn (the first during `start`, each next
/// one during the `resume` after it), or SIGKILL this long after the engine started.
enum Kill<'a> {
    At(&'a [&'a str]),
    After(u64),
}

/// Runs `make()`'s conference with `env`, kills it as `kill` says, resumes it to its end, and
/// checks that it reached the same tree as `reference`: every attempt from the same node with the
/// same verdict and metric, the same alive branches (all but their commits, whose dates differ),
/// the same best, every attempt's parent its node, and a clean `git fsck`.
fn kill_and_resume(
    reference: &TestRepo,
    make: &dyn Fn() -> TestRepo,
    env: &[(&str, &str)],
    kill: Kill<'_>,
) {
    let alive = |r: &TestRepo| {
        let mut branches = r.status_json(NAME)["researchers"]["A"]["branches"].clone();
        for b in branches.as_array_mut().unwrap() {
            b.as_object_mut().unwrap().remove("head");
        }
        branches
    };
    let head = |r: &TestRepo| {
        r.git(&[
            "rev-parse",
            &format!("conference/{NAME}/researcher-A^{{tree}}"),
        ])
    };
    let repo = make();
    let start = ["start", NAME, "--yes"];
    let label = match kill {
        Kill::At(failpoints) => {
            for (i, failpoint) in failpoints.iter().enumerate() {
                let args: &[&str] = if i == 0 { &start } else { &["resume", NAME] };
                let mut with = env.to_vec();
                with.push(("GIT_CONFERENCE_FAILPOINT", failpoint));
                let leg = crash::run(&repo, NAME, args, &with, Stop::Never);
                assert_eq!(
                    leg.ending,
                    Ending::Signal(9),
                    "{failpoint} was reached\n{leg}"
                );
                crash::kill_strays(&repo);
            }
            failpoints.join(" then ")
        }
        Kill::After(ms) => {
            // Where this lands depends on the machine's speed; whatever the instant, or none
            // (the run completed first), the resumed conference must be the same.
            let stop = Stop::AfterEngine(std::time::Duration::from_millis(ms), libc::SIGKILL);
            crash::run(&repo, NAME, &start, env, stop);
            format!("SIGKILL after {ms} ms")
        }
    };
    crash::kill_strays(&repo);
    let leg = crash::run(&repo, NAME, &["resume", NAME], env, Stop::Never);
    assert_eq!(leg.ending, Ending::Code(0), "{label}\n{leg}");
    assert_eq!(tree_of(&repo), tree_of(reference), "{label}");
    assert_eq!(alive(&repo), alive(reference), "{label}");
    check_parents(&repo);
    assert_eq!(head(&repo), head(reference), "{label}");
    repo.git(&["fsck", "--no-progress"]);
}

#[test]
fn a_kill_at_the_trees_steps_resumes_to_the_same_tree() {
    let plan = "x:fork y z:A-r1-i2 y y:baseline z y";
    let reference = fixture("agent-decided", 7, 3);
    run(&reference, plan);
    let env = [("TREE_PLAN", plan)];
    for failpoint in [
        "tree.next:1",
        "iteration.recorded:2",
        "branch.moved:1",
        "event.researcher.iteration:3",
        "tree.next:5",
        "note.written:2",
    ] {
        let make = || fixture("agent-decided", 7, 3);
        kill_and_resume(&reference, &make, &env, Kill::At(&[failpoint]));
    }
    // Killed once the next node is recorded but before the worktree went there: the resume
    // moves it (`tree.moved`), and is killed there too.
    for legs in [
        &["tree.next:3", "tree.moved:1"],
        &["tree.next:5", "tree.moved:1"],
    ] {
        let make = || fixture("agent-decided", 7, 3);
        kill_and_resume(&reference, &make, &env, Kill::At(legs));
    }
}

/// Best-first over two rounds: the second round's start opens a branch from the conference's
/// best, and the conference, not the agent, picks each node. Killed at every kind of step of an
/// attempt and of a round's end, and after a few delays, it resumes to the same tree.
#[test]
fn a_kill_anywhere_in_a_best_first_conference_resumes_to_the_same_tree() {
    let make = || {
        let repo = fixture("best-first", 5, 2);
        let config = repo
            .read("conference.md")
            .replace("**Max rounds:** 1", "**Max rounds:** 2");
        repo.write("conference.md", &config);
        repo.commit_all("two rounds");
        repo
    };
    let env = [
        ("TREE_PLAN", "x y z y z y y x y z"),
        ("TREE_PER_ROUND", "5"),
    ];
    let reference = make();
    reference
        .conference_env(&["start", NAME, "--yes"], &env)
        .ok();
    for failpoint in [
        "agent.finished:2",
        "snapshot.committed:3",
        "snapshot.reachable:3",
        "eval.finished:4",
        "note.before-ref:2",
        "note.written:3",
        "event.round.poster_session:1",
        "event.round.completed:1",
        "event.round.started:2",
        "iteration.recorded:7",
        "tree.next:8",
        "event.researcher.iteration:9",
        "report.built:1",
    ] {
        kill_and_resume(&reference, &make, &env, Kill::At(&[failpoint]));
    }
    // A-r1-i4 is the leader's third failure in a row, after the one attempt before it had
    // gained (best-first's patience: 3): the next attempt starts from another node, which the
    // resume moves the worktree to. (Round 2's leader is extended to the end: five failures
    // are what one gain in five attempts explains.)
    kill_and_resume(
        &reference,
        &make,
        &env,
        Kill::At(&["tree.next:4", "tree.moved:1"]),
    );
    for ms in [300, 900, 2000] {
        kill_and_resume(&reference, &make, &env, Kill::After(ms));
    }
}

/// The agent's own folder (`$CONFERENCE_AGENT_DIR`, where an agent such as aider keeps its chat
/// history) survives every attempt with branching on, kept or not, as it does off.
#[test]
fn the_agents_folder_survives_kept_attempts_with_branching_on() {
    for mode in ["best-first", "off"] {
        let repo = if mode == "off" {
            let repo = TestRepo::from_fixture("tree");
            let config = repo
                .read("conference.md")
                .replace("- **Branching:** agent-decided\n", "")
                .replace("- **Max alive branches:** 3\n", "");
            repo.write("conference.md", &config);
            repo
        } else {
            fixture(mode, 5, 3)
        };
        repo.write(
            "remember.sh",
            "echo \"$CONFERENCE_ITERATION\" >> \"$CONFERENCE_AGENT_DIR/history\"\nexec sh ./agent.sh\n",
        );
        let config = repo
            .read("conference.md")
            .replace("- command: sh ./agent.sh", "- command: sh ./remember.sh")
            .replace(
                "- frozen: eval.sh, agent.sh",
                "- frozen: eval.sh, agent.sh, remember.sh",
            );
        repo.write("conference.md", &config);
        repo.commit_all("an agent that remembers");
        // x is kept (0.6), then y, z, y, x from it are not.
        run(&repo, "x y z y x");
        let history = repo
            .worktree(NAME, "researcher-A")
            .join(".conference/history");
        let history = std::fs::read_to_string(&history)
            .unwrap_or_else(|e| panic!("{mode}: {}: {e}", history.display()));
        let seen: Vec<&str> = history.lines().collect();
        let kept = attempts(&repo)
            .iter()
            .filter(|(_, p)| p["status"] == "kept")
            .count();
        assert!(kept >= 1, "{mode}: an attempt was kept");
        assert_eq!(seen.len(), attempts(&repo).len(), "{mode}: {history}");
    }
}
