//! `builtin:tune` through the real binary: it refuses to start with nothing to tune or with
//! unusable markers, and in a 3-researcher conference no tree is measured twice and the same
//! seed gives the same conference.

use crate::common;

use common::TestRepo;

const CONFERENCE: &str = "# Conference: Tune
## Goal
Minimise f.
## Mode
metric
## Success Metric
- **Metric:** f
- **Target:** -10
- **Direction:** minimize
## Researchers
- **Count:** 3
- **Iterations per round:** 6
- **Max rounds:** 2
## Search Space
**Allowed changes:**
- params.sh
## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh
## Agent
- command: builtin:tune
- seed: SEED
";

/// The 2-D fixture starting at `params`, with the conference above.
fn repo(params: &str, seed: u64) -> TestRepo {
    let repo = TestRepo::from_fixture("tune-2d");
    repo.write("params.sh", params);
    repo.write(
        "conference.md",
        &CONFERENCE.replace("SEED", &seed.to_string()),
    );
    repo.commit_all("start");
    repo
}

#[test]
fn nothing_to_tune_is_an_error_before_the_baseline() {
    // No literal at all; a marker alone on its line (which hides the unmarked values).
    for params in ["x=$(cat x.txt)\ny=\"$x\"\n", "# tune\nx=-1.0\ny=1.0\n"] {
        let repo = repo(params, 1);
        let run = repo.conference(&["start", "--yes"]);
        assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("found no number to tune"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("searched params.sh"), "{}", run.stderr);
        assert!(
            run.stderr.contains("# tune: [1e-5, 1e-2]"),
            "{}",
            run.stderr
        );
        // Nothing was recorded: no baseline measured, no conference refs.
        let refs = repo.git(&["for-each-ref", "refs/conference"]);
        assert!(refs.trim().is_empty(), "{refs}");
    }
    // A marker alone on its line is named.
    let repo = repo("# tune\nx=-1.0\ny=1.0\n", 1);
    let run = repo.conference(&["start", "--yes"]);
    assert!(run.stderr.contains("params.sh:1"), "{}", run.stderr);
}

#[test]
fn unusable_bounds_name_the_line_and_the_fix() {
    let repo = repo("x=-1.0  # tune: [-5, 5]\ny=1.0  # tune: [5, 1]\n", 1);
    let run = repo.conference(&["start", "--yes"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("params.sh:2:"), "{}", run.stderr);
    assert!(run.stderr.contains("write `[1, 5]`"), "{}", run.stderr);
    let repo = repo_with_start_outside();
    let run = repo.conference(&["start", "--yes"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("params.sh:1:") && run.stderr.contains("outside its bounds"),
        "{}",
        run.stderr
    );
}

fn repo_with_start_outside() -> TestRepo {
    repo("x=7.5  # tune: [-5, 5]\ny=1.0  # tune: [-5, 5]\n", 1)
}

/// One research attempt: (round, iteration, researcher, tree, description).
type Attempt = (u64, u64, String, String, String);

/// Research attempts of a finished conference, read from its events with git.
fn attempts(repo: &TestRepo) -> Vec<Attempt> {
    repo.events("tune")
        .into_iter()
        .filter(|e| e["event"] == "researcher.iteration")
        .map(|e| {
            let p = &e["payload"];
            (
                p["round"].as_u64().unwrap(),
                p["iteration"].as_u64().unwrap(),
                p["researcher"].as_str().unwrap().to_string(),
                p["tree"].as_str().unwrap().to_string(),
                p["description"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn no_tree_twice_and_the_seed_decides_the_run() {
    // A start outside the global minimum's basin.
    let params = "x=3.0  # tune: [-5, 5]\ny=-3.0  # tune: [-5, 5]\n";
    let runs: Vec<Vec<Attempt>> = [7, 7, 8]
        .iter()
        .map(|&seed| {
            let repo = repo(params, seed);
            repo.conference(&["start", "--yes"]).ok();
            let mut a = attempts(&repo);
            a.sort();
            a
        })
        .collect();
    for run in &runs {
        assert!(run.len() >= 12, "{run:#?}");
        let trees: std::collections::BTreeSet<&str> = run.iter().map(|a| a.3.as_str()).collect();
        assert_eq!(
            trees.len(),
            run.len(),
            "a tree was measured twice: {run:#?}"
        );
    }
    assert_eq!(
        runs[0], runs[1],
        "the same seed must give the same conference"
    );
    assert_ne!(runs[0], runs[2], "another seed explores elsewhere");
}
