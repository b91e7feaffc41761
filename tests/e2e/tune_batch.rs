//! builtin:tune's batch (issue 41, `- sweep: 4` under `## Agent`): each iteration the tuner
//! proposes 4 distinct points, measured at once (an evaluation that waits until all 4 run
//! proves it) as a sweep whose variants are the points — several literals may move in each —
//! the best the attempt, the others `swept` siblings whose parent is the node the attempt started
//! from. The next batch is proposed knowing every point of the last (its description says how
//! many it knew), a kill mid-batch resumes to the same record, and bad values are refused with
//! the line. Fixture: `fixtures/sweep` (train.py's LEARNING_RATE and WIDTH) with the tuner.

use serde_json::Value;

use crate::common::TestRepo;

const NAME: &str = "batch";

/// The sweep fixture run by builtin:tune in batches of `batch` (None: the line left out), with
/// `iterations` in its one round.
fn fixture(iterations: u32, batch: Option<&str>) -> TestRepo {
    let repo = TestRepo::from_fixture("sweep");
    let agent = match batch {
        Some(q) => format!("- command: builtin:tune\n- seed: 3\n- sweep: {q}"),
        None => "- command: builtin:tune\n- seed: 3".to_string(),
    };
    let config = (repo.read("conference.md"))
        .replace(
            "**Iterations per round:** 4",
            &format!("**Iterations per round:** {iterations}"),
        )
        .replace("- **Parameter sweep:** on\n", "")
        .replace("- command: sh ./agent.sh", &agent);
    repo.write("conference.md", &config);
    repo.commit_all("conference.md");
    repo
}

/// The attempts' event payloads, in order.
fn attempts(repo: &TestRepo) -> Vec<Value> {
    crate::sweep::attempts_of(repo, NAME)
}

/// The one parent of `commit`, as git prints it.
fn parent(repo: &TestRepo, commit: &str) -> String {
    repo.git(&["rev-parse", &format!("{commit}^")])
        .trim()
        .to_string()
}

#[test]
fn a_batch_of_points_is_measured_at_once_and_the_best_is_the_attempt() {
    let repo = fixture(2, Some("4"));
    let barrier = repo.tmp.path().join("barrier");
    let at = format!("{}:4", barrier.display());
    let run = repo.conference_env(&["start", NAME, "--yes"], &[("SWEEP_BARRIER", &at)]);
    let run = run.ok();
    assert!(
        run.stderr.contains("batch of 4 points of "),
        "{}",
        run.stderr
    );
    let all = attempts(&repo);
    assert_eq!(all.len(), 2, "two iterations, one batch each");
    let mut node = repo.status_json(NAME)["baseline_commit"]
        .as_str()
        .unwrap()
        .to_string();
    let mut trees = std::collections::BTreeSet::new();
    for a in &all {
        let sweep = &a["sweep"];
        assert_eq!(sweep["batch"], true, "{a}");
        let variants = sweep["variants"].as_array().unwrap();
        assert_eq!(variants.len(), 4);
        let chosen = sweep["chosen"].as_u64().unwrap() as usize;
        let mut best = f64::INFINITY;
        for (k, v) in variants.iter().enumerate() {
            // Each waited until all 4 ran at once.
            assert_eq!(v["status"], "ok", "{v}");
            assert!(trees.insert(v["tree"].to_string()), "distinct points: {v}");
            let commit = v["commit"].as_str().unwrap();
            assert_eq!(
                parent(&repo, commit),
                node,
                "variant {k} starts from the node"
            );
            let message = repo.git(&["log", "-1", "--format=%B", commit]);
            let label = v["value"].as_str().unwrap();
            assert!(
                message.contains(&format!("Batch point {} of 4: {label}", k + 1)),
                "{message}"
            );
            // Its label names what it moved, as train.py now reads.
            let train = repo.show(commit, "train.py").unwrap();
            for part in label.split(' ') {
                let (name, value) = part.split_once('=').unwrap();
                assert!(train.contains(&format!("{name} = {value}\n")), "{train}");
            }
            best = best.min(v["metric"].as_f64().unwrap());
            if k != chosen {
                let note = &repo.notes(commit)[0];
                assert_eq!(note["verdict"], "swept", "{note}");
                assert_eq!(note["sweep_of"], a["commit"]);
            }
        }
        assert_eq!(variants[chosen]["metric"].as_f64(), Some(best));
        assert_eq!(a["commit"], variants[chosen]["commit"]);
        assert!(
            (a["description"].as_str().unwrap()).starts_with(&format!(
                "tune {}: best of a batch of 4 points",
                variants[chosen]["value"].as_str().unwrap()
            )),
            "{a}"
        );
        if a["status"] == "kept" {
            node = a["commit"].as_str().unwrap().to_string();
        }
    }
    // One iteration and four evaluations each, in every count.
    let st = repo.status_json(NAME);
    assert_eq!(st["total_iterations"], 2, "{st}");
    assert_eq!(st["sweeps"]["evaluations"], 8, "{st}");
    let graph = repo.conference(&["log", NAME, "--graph"]).ok().stdout;
    let swept = graph
        .lines()
        .filter(|l| l.trim_start().starts_with("swept"));
    assert_eq!(
        swept.count(),
        6,
        "the 3 others of each batch beside it: {graph}"
    );
}

/// The tuner learns from every point a batch measured, not only the attempt: its next batch is
/// proposed knowing the baseline, the round start and the 4 points of the first (6), where
/// one point per iteration knows 3.
#[test]
fn the_next_batch_is_proposed_knowing_every_point_of_the_last() {
    let repo = fixture(3, Some("4"));
    repo.conference(&["start", NAME, "--yes"]).ok();
    let said: Vec<String> = (attempts(&repo).iter())
        .map(|a| a["description"].as_str().unwrap().to_string())
        .collect();
    for (k, knew) in [2, 6, 10].iter().enumerate() {
        assert!(
            said[k].ends_with(&format!("batch of 4 points from {knew} measured")),
            "iteration {}: {}",
            k + 1,
            said[k]
        );
    }
    // Without the line: one point per iteration, as before.
    let repo = fixture(2, None);
    repo.conference(&["start", NAME, "--yes"]).ok();
    for a in attempts(&repo) {
        assert!(a.get("sweep").is_none_or(Value::is_null), "{a}");
        let said = a["description"].as_str().unwrap();
        assert!(said.starts_with("tune ") && !said.contains("batch"), "{a}");
    }
}

/// A kill at each step of a batch (its commits made, its evaluations done, its event written)
/// resumes to the same record: the same points proposed again, every attempt once, the same
/// head, nothing counted twice.
#[test]
fn a_kill_mid_batch_resumes_to_the_same_record() {
    crate::sweep::kills_resume_to_the_same_record(
        NAME,
        &|| fixture(2, Some("3")),
        &[],
        &[
            "sweep.committed:1",
            "sweep.evaluated:1",
            "event.researcher.iteration:1",
            "sweep.evaluated:2",
        ],
    );
}

#[test]
fn bad_batch_settings_are_refused_with_the_line() {
    for (value, says) in [
        ("1", "a batch is 2 to 8 points per iteration"),
        ("9", "a batch is 2 to 8 points per iteration"),
        ("many", "a batch is 2 to 8 points per iteration"),
    ] {
        let repo = fixture(1, Some(value));
        let run = repo.conference(&["start", NAME, "--yes"]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(says), "{value}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("sweep: {value}")),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.contains("- sweep: 4"),
            "says what to write: {}",
            run.stderr
        );
    }
    // Only the tuner proposes batches: an agent asks for its own sweep.
    let repo = fixture(1, Some("4"));
    let config =
        (repo.read("conference.md")).replace("- command: builtin:tune", "- command: sh ./agent.sh");
    repo.write("conference.md", &config);
    repo.commit_all("agent");
    let run = repo.conference(&["start", NAME, "--yes"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("only builtin:tune proposes a batch"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("**Parameter sweep:** on"),
        "{}",
        run.stderr
    );
}

/// With pruning on, a batch's points race (successive halving): one evaluation slot, so the
/// first point's curve is complete when the others run; those behind it at a rung by more than
/// the noise are stopped there, the reason naming the points (not one literal's values). The
/// attempt is a point that finished.
#[test]
fn with_pruning_on_a_batchs_points_behind_the_others_are_stopped() {
    let repo = fixture(3, Some("4"));
    crate::sweep::race_in_one_slot(&repo);
    (repo.conference_env(&["start", NAME, "--yes"], &[("SWEEP_CURVE", "0.3")])).ok();
    // A point behind the best's curve is stopped by the usual rule; one ahead of the best but
    // behind another point of its batch, by the race among them.
    let mut raced = 0;
    for a in attempts(&repo) {
        let sweep = &a["sweep"];
        let variants = sweep["variants"].as_array().unwrap();
        let chosen = sweep["chosen"].as_u64().unwrap() as usize;
        let finished = variants.iter().any(|v| v["status"] == "ok");
        assert!(
            !finished || variants[chosen]["status"] == "ok",
            "a point that finished is the attempt: {a}"
        );
        for v in variants.iter().filter(|v| v["status"] == "pruned") {
            let why = v["reason"].as_str().unwrap();
            let label = v["value"].as_str().unwrap();
            let halving = format!("successive halving in its sweep: at step 200 {label} read");
            raced += usize::from(why.starts_with(&halving));
            assert!(
                why.starts_with(&halving) || why.starts_with("at step"),
                "{why}"
            );
            assert!(!why.contains(" = "), "names the point as its label: {why}");
        }
    }
    assert!(raced >= 1, "{:?}", attempts(&repo));
}
