//! Sweeps on several machines (issue 41): two machines (clones with process trees of their own
//! against one `git daemon` remote) each run a researcher whose attempts are sweeps — an agent's
//! `SWEEP:` line with `- **Parameter sweep:** on`, or builtin:tune's batches (`- sweep: 4`).
//! Each sweep's variants (the chosen attempt, its `swept` siblings whose parent is the node it
//! started from, their notes) reach the other machine and a fresh clone (`git clone` +
//! `git conference fetch`); `status` and `log --graph` say the same there; peer review and
//! knowledge transfer take the chosen variant; a machine killed while its variants are
//! evaluated and restarted with `join` ends with the record the other machine sees.
//! Fixture: `fixtures/sweep` (train.py's LEARNING_RATE and WIDTH; the loss is 0 at 0.001 and 16).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::*;

/// A's plan: a sweep of the learning rate (0.001 is best); B's: a sweep of the width (16).
const A_PLAN: &str = "-|SWEEP: train.py:LEARNING_RATE = 0.01, 0.001, 0.0001";
const B_PLAN: &str = "-|SWEEP: train.py:WIDTH = 12, 16, 20";

/// The sweep fixture with 2 researchers, `iterations` in its one round, an 8 s lease, and
/// `agent` as its `## Agent` lines. train.py's two settings are two lines apart, so that one
/// researcher's edit of each merges with the other's.
fn sweep_cluster(iterations: u32, agent: &str) -> Cluster {
    let fixture = TestRepo::from_fixture("sweep");
    let config = (fixture.read("conference.md"))
        .replace("**Count:** 1", "**Count:** 2")
        .replace(
            "**Iterations per round:** 4",
            &format!("**Iterations per round:** {iterations}"),
        )
        .replace(
            "## Evaluation\n",
            "## Constraints\n- **Lease:** 8s\n\n## Evaluation\n",
        )
        .replace("- command: sh ./agent.sh\n", agent);
    let train = "LEARNING_RATE = 0.1\n# the model\n# its training\nWIDTH = 8\n";
    cluster_of("sweep", &[("conference.md", &config), ("train.py", train)])
}

/// The agent's sweeps (`SWEEP:` lines) on.
fn agent_sweeps(iterations: u32) -> Cluster {
    sweep_cluster(iterations, "- command: sh ./agent.sh\n")
}

impl Cluster {
    /// `git conference <args>` in `dir`, its output.
    fn says(&self, dir: &Path, args: &[&str]) -> String {
        self.repo.conference_in(dir, args).ok().stdout
    }
}

/// The attempts (`researcher.iteration` payloads) the clone in `dir` reads.
fn attempts_in(c: &Cluster, dir: &Path) -> Vec<Value> {
    let log = c.says(dir, &["log", NAME, "--format", "jsonl"]);
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "researcher.iteration")
        .map(|e| e["payload"].clone())
        .collect()
}

/// The notes of `commit` the clone in `dir` reads.
fn notes_in(c: &Cluster, dir: &Path, commit: &str) -> Vec<Value> {
    let run = c
        .repo
        .run_in(dir, "git", &["notes", "--ref=conference", "show", commit]);
    assert_eq!(
        run.code,
        0,
        "a note of {commit} in {}: {}",
        dir.display(),
        run.stderr
    );
    run.stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Checks in the clone in `dir` every sweep of `attempts`: each variant a commit there whose
/// parent is the node the attempt started from (the parent of the chosen one), the chosen one
/// the attempt (its note has the attempt's verdict and the sweep), the others `swept` siblings
/// naming it; returns each researcher's chosen commit.
fn sweeps_arrived(c: &Cluster, dir: &Path, attempts: &[Value]) -> Vec<(String, String)> {
    let git = |args: &[&str]| c.repo.git_in(dir, args).trim().to_string();
    let mut chosen = vec![];
    for a in attempts.iter().filter(|a| a.get("sweep").is_some()) {
        let sweep = &a["sweep"];
        let variants = sweep["variants"].as_array().unwrap();
        assert!(variants.len() >= 3, "{a}");
        let best = a["commit"].as_str().unwrap();
        let k = sweep["chosen"].as_u64().unwrap() as usize;
        assert_eq!(variants[k]["commit"], best, "{a}");
        let node = git(&["rev-parse", &format!("{best}^")]);
        for (i, v) in variants.iter().enumerate() {
            let commit = v["commit"].as_str().unwrap();
            assert_eq!(git(&["rev-parse", &format!("{commit}^")]), node, "{v}");
            let note = &notes_in(c, dir, commit)[0];
            if i == k {
                assert_eq!(note["verdict"], a["status"], "{note}");
                assert_eq!(note["sweep"]["chosen"], k, "{note}");
            } else {
                assert_eq!(note["verdict"], "swept", "{note}");
                assert_eq!(note["sweep_of"], best, "{note}");
            }
        }
        chosen.push((
            a["researcher"].as_str().unwrap().to_string(),
            best.to_string(),
        ));
    }
    chosen
}

/// The `swept` lines of `log --graph` in `dir`.
fn swept_lines(c: &Cluster, dir: &Path) -> usize {
    let tree = c.says(dir, &["log", NAME, "--graph"]);
    tree.lines()
        .filter(|l| l.trim_start().starts_with("swept "))
        .count()
}

/// The `Sweeps:` line of `status` in `dir`.
fn sweeps_line(c: &Cluster, dir: &Path) -> String {
    let status = c.says(dir, &["status", NAME]);
    let line = status.lines().find(|l| l.starts_with("Sweeps:"));
    line.unwrap_or_else(|| panic!("{status}")).to_string()
}

/// Checks that machine 1, machine 2 (both fetched) and a fresh clone read the same attempts,
/// the `sweeps` sweeps' variants with their notes, the same `log --graph` (`swept` lines) and
/// `Sweeps:` line, that peer review re-measured and transfer merged chosen variants only (one
/// finding of each researcher whose sweep was kept), and that every repository is whole
/// (`git fsck`). Returns the attempts.
fn every_clone_has_the_sweeps(c: &Cluster, sweeps: usize, swept: usize) -> Vec<Value> {
    for m in 0..2 {
        c.says(&c.machines[m], &["fetch", &c.url, "--name", NAME]);
    }
    let fresh = c.fresh_clone();
    let dirs = [c.machines[0].clone(), c.machines[1].clone(), fresh];
    let attempts = attempts_in(c, &dirs[2]);
    let graph = c.says(&dirs[2], &["log", NAME, "--graph"]);
    let chosen = sweeps_arrived(c, &dirs[2], &attempts);
    assert_eq!(chosen.len(), sweeps, "{attempts:?}");
    for dir in &dirs {
        assert_eq!(attempts_in(c, dir), attempts, "{}", dir.display());
        assert_eq!(sweeps_arrived(c, dir, &attempts), chosen);
        assert_eq!(swept_lines(c, dir), swept, "{}", dir.display());
        assert_eq!(c.says(dir, &["log", NAME, "--graph"]), graph);
        assert_eq!(sweeps_line(c, dir), sweeps_line(c, &dirs[2]));
        c.repo.git_in(dir, &["fsck", "--no-progress"]);
    }
    c.repo.git_in(&c.remote, &["fsck", "--no-progress"]);
    let kept: BTreeSet<&str> = (attempts.iter())
        .filter(|a| a["status"] == "kept" && a.get("sweep").is_some())
        .map(|a| a["researcher"].as_str().unwrap())
        .collect();
    the_chosen_are_reviewed_and_transferred(c, &dirs[2], &chosen, kept.len());
    attempts
}

/// Peer review re-measured, and transfer picked, `findings` findings, each a researcher's
/// chosen variant (never a swept sibling).
fn the_chosen_are_reviewed_and_transferred(
    c: &Cluster,
    dir: &Path,
    chosen: &[(String, String)],
    findings: usize,
) {
    let log = c.says(dir, &["log", NAME, "--format", "jsonl"]);
    let events: Vec<Value> = (log.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let review = events.iter().find(|e| e["event"] == "round.peer_review");
    let reviewed = review.unwrap()["payload"]["findings"].as_array().unwrap();
    let picks: Vec<&Value> = (events.iter())
        .filter(|e| e["event"] == "transfer.pick")
        .map(|e| &e["payload"])
        .collect();
    assert_eq!(reviewed.len(), findings, "{reviewed:?}");
    assert_eq!(picks.len(), findings, "{picks:?}");
    let is_chosen = |researcher: &Value, commit: &Value| {
        (chosen.iter()).any(|(r, best)| researcher == r.as_str() && commit == best.as_str())
    };
    for f in reviewed {
        assert!(is_chosen(&f["researcher"], &f["commit"]), "{f}");
    }
    for p in picks {
        assert!(is_chosen(&p["researcher"], &p["finding"]), "{p}");
    }
}

#[test]
fn two_machines_sweeps_arrive_everywhere_and_review_and_transfer_take_the_chosen() {
    let c = agent_sweeps(1);
    let m1 = c.start_env(&[("SWEEP_PLAN", A_PLAN)]);
    let m2 = c.join_env(1, "B", &[("SWEEP_PLAN", B_PLAN)]);
    c.finishes(0, m1);
    c.finishes(1, m2);
    let attempts = every_clone_has_the_sweeps(&c, 2, 4);
    let metrics: Vec<(String, Value)> = (attempts.iter())
        .map(|a| (a["researcher"].to_string(), a["metric_value"].clone()))
        .collect();
    assert!(
        metrics.contains(&("\"A\"".into(), 1.0.into())),
        "{metrics:?}"
    );
    assert!(
        metrics.contains(&("\"B\"".into(), 4.0.into())),
        "{metrics:?}"
    );
    // Transfer merged both chosen values: the best is 0.001 and 16 (the swept ones are worse).
    let best = format!("refs/heads/conference/{NAME}/best:train.py");
    let train = c.repo.git_in(&c.remote, &["show", &best]);
    assert!(train.contains("LEARNING_RATE = 0.001\n"), "{train}");
    assert!(train.contains("WIDTH = 16\n"), "{train}");
}

#[test]
fn two_machines_tuner_batches_arrive_everywhere_and_review_and_transfer_take_the_chosen() {
    let c = sweep_cluster(2, "- command: builtin:tune\n- seed: 3\n- sweep: 4\n");
    let m1 = c.start();
    let m2 = c.join(1, "B");
    c.finishes(0, m1);
    c.finishes(1, m2);
    // Two batches of 4 points for each researcher: 3 swept siblings each.
    let attempts = every_clone_has_the_sweeps(&c, 4, 12);
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    for a in &attempts {
        assert_eq!(a["sweep"]["batch"], true, "{a}");
        assert_eq!(a["sweep"]["variants"].as_array().unwrap().len(), 4, "{a}");
    }
}

/// Machine 2's variants wait at a barrier none of them can pass (4 of 3), and the machine is
/// killed (`kill -9` of its process group, its runner among them) once all 3 are running;
/// restarted with `join` (no barrier), it measures them again and both machines end with the
/// record of a run never killed.
#[test]
fn a_machine_killed_while_its_variants_are_evaluated_rejoins_to_the_same_record() {
    let c = agent_sweeps(1);
    let barrier = c.repo.tmp.path().join("barrier");
    let at = format!("{}:4", barrier.display());
    let m1 = c.start_env(&[("SWEEP_PLAN", A_PLAN)]);
    let mut m2 = c.join_env(1, "B", &[("SWEEP_PLAN", B_PLAN), ("SWEEP_BARRIER", &at)]);
    c.wait_for("B's 3 variants running", || {
        std::fs::read_dir(&barrier).map_or(0, |d| d.count()) == 3
    });
    c.kill_machine(1, &mut m2);
    let published = c.repo.git_in(
        &c.remote,
        &[
            "log",
            "--format=%s",
            &format!("refs/conference/{NAME}/events"),
        ],
    );
    assert!(
        !published.contains("B r1 i1"),
        "killed mid-sweep: {published}"
    );
    let m2 = c.spawn_join_env(1, "B", &[("SWEEP_PLAN", B_PLAN)]);
    c.finishes(0, m1);
    c.finishes(1, m2);
    let attempts = every_clone_has_the_sweeps(&c, 2, 4);
    let reference = agent_sweeps(1);
    let r1 = reference.start_env(&[("SWEEP_PLAN", A_PLAN)]);
    let r2 = reference.join_env(1, "B", &[("SWEEP_PLAN", B_PLAN)]);
    reference.finishes(0, r1);
    reference.finishes(1, r2);
    let fresh = reference.fresh_clone();
    assert_eq!(record(&attempts), record(&attempts_in(&reference, &fresh)));
}

/// What the attempts say, all but commits, times and machines, by researcher: (iteration,
/// verdict, metric, each variant's value, metric and status).
fn record(attempts: &[Value]) -> Vec<String> {
    let mut all: Vec<String> = (attempts.iter())
        .map(|a| {
            format!(
                "{} r{} i{} {} {} [{}]",
                a["researcher"],
                a["round"],
                a["iteration"],
                a["status"],
                a["metric_value"],
                crate::sweep::curve_of(a)
            )
        })
        .collect();
    all.sort();
    all
}

/// The subjects of the remote's events (`git log --format=%s` of the events ref).
fn published(c: &Cluster) -> String {
    let events = format!("refs/conference/{NAME}/events");
    c.repo.git_in(&c.remote, &["log", "--format=%s", &events])
}

/// Machine 1 starts a conference of builtin:tune's batches (2 of 4 points per researcher), and
/// machine 2 joins it as B once A's two batches are on the remote, with `env`; returns both.
///
/// builtin:tune proposes from what its machine has read, and another machine's events arrive
/// only between this machine's steps or when its own publication is replayed over them: had B
/// joined at once, its second batch would know A's first only if it had arrived in time, in
/// the run never killed as in the one restarted. Joining after A's batches makes B's history
/// one thing in every run: its first batch from the baseline and round start, its second with
/// A's first batch and its own.
fn tuner_batches(env: &[(&str, &str)]) -> (Cluster, Child, Child) {
    let c = sweep_cluster(2, "- command: builtin:tune\n- seed: 3\n- sweep: 4\n");
    let m1 = c.start();
    c.wait_for("A's 2 batches on the remote", || {
        published(&c).contains("A r1 i2")
    });
    let m2 = c.join_env(1, "B", env);
    (c, m1, m2)
}

/// Machine 2's batches wait at a barrier their 4 points cannot pass (5 of 4), and the machine
/// is killed (`kill -9` of its process group) once all 4 points of a batch are running: in its
/// first batch (nothing of B published yet), then, restarted with `join` and its first batch
/// let through, in its second (the first on the remote, the second not). Restarted each time,
/// it sets aside what the kill left in B's worktree (the batch's first point, written there) as
/// an interrupted attempt, as one machine does, published under its name; it proposes the same
/// 4 points again (the barrier's files name them), and both machines and a fresh clone end with
/// the record of a run never killed besides those: each attempt, variant and note with its
/// values, metrics and statuses, `log --graph` and the `Sweeps:` line (commits by their trees:
/// a commit made again differs by its time).
#[test]
fn a_machine_killed_while_its_tuner_batch_is_evaluated_rejoins_to_the_same_record() {
    let barrier = tempfile::tempdir().unwrap();
    let at = format!("{}:5", barrier.path().display());
    let env = [("SWEEP_BARRIER", at.as_str())];
    let (c, m1, mut m2) = tuner_batches(&env);
    // The points of B's batch `i` that reached the barrier, as `<i>-<point>`.
    let running = |i: u64| -> Vec<String> {
        let files = std::fs::read_dir(barrier.path()).unwrap();
        let mut names: Vec<String> = (files.map(|f| f.unwrap().file_name()))
            .map(|n| n.to_string_lossy().to_string())
            .filter(|n| n.starts_with(&format!("{i}-")) && !n.ends_with("-through"))
            .collect();
        names.sort();
        names
    };
    for i in [1, 2] {
        if i == 2 {
            c.wait_for("B's first batch on the remote", || {
                published(&c).contains("B r1 i1")
            });
        }
        c.wait_for(&format!("B's batch {i} running"), || running(i).len() == 4);
        c.kill_machine(1, &mut m2);
        let before = published(&c);
        assert!(!before.contains(&format!("B r1 i{i}")), "killed: {before}");
        // Restarted, its batch goes through the barrier as its points start.
        std::fs::write(barrier.path().join(format!("{i}-through")), "").unwrap();
        m2 = c.spawn_join_env(1, "B", &env);
    }
    c.finishes(0, m1);
    c.finishes(1, m2);
    let attempts = every_clone_has_the_sweeps(&c, 4, 12);
    let fresh = c.fresh_clone();
    let set_aside = set_aside_in(&c, &fresh);
    for dir in &c.machines[..2] {
        assert_eq!(set_aside_in(&c, dir), set_aside, "{}", dir.display());
    }
    let mut left = vec![];
    for a in attempts.iter().filter(|a| a["researcher"] == "B") {
        let i = a["iteration"].as_u64().unwrap();
        let variants = a["sweep"]["variants"].as_array().unwrap();
        let mut again: Vec<String> = (variants.iter())
            .map(|v| format!("{i}-{}", v["value"].as_str().unwrap()))
            .collect();
        again.sort();
        assert_eq!(
            again,
            running(i),
            "the killed batch's points, proposed again"
        );
        left.push(format!("B i{i} {} m2", variants[0]["tree"]));
    }
    assert_eq!(set_aside, left);
    let (reference, r1, r2) = tuner_batches(&[]);
    reference.finishes(0, r1);
    reference.finishes(1, r2);
    let reference_fresh = reference.fresh_clone();
    assert_eq!(
        set_aside_in(&reference, &reference_fresh),
        Vec::<String>::new()
    );
    assert_eq!(
        the_record(&c, &fresh),
        the_record(&reference, &reference_fresh)
    );
}

/// The interrupted attempts the clone in `dir` reads (set aside by a restarted machine):
/// researcher, iteration, tree and the machine that recorded each.
fn set_aside_in(c: &Cluster, dir: &Path) -> Vec<String> {
    let log = c.says(dir, &["log", NAME, "--format", "jsonl"]);
    (log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()))
    .filter(|e| e["event"] == "attempt.interrupted")
    .map(|e| {
        let p = &e["payload"];
        let i = &p["notes"][0]["iteration"];
        let who = p["researcher"].as_str().unwrap();
        format!(
            "{who} i{i} {} {}",
            p["tree"],
            p["machine"].as_str().unwrap()
        )
    })
    .collect()
}

/// What the clone in `dir` reads of the conference, all but times and interrupted attempts,
/// its commits named by their trees: each attempt's payload (its sweep's variants, their
/// notes), the note of each variant, `log --graph` and the `Sweeps:` line.
fn the_record(c: &Cluster, dir: &Path) -> String {
    let mut record = vec![];
    for mut a in attempts_in(c, dir) {
        for v in a["sweep"]["variants"].as_array().unwrap() {
            let commit = v["commit"].as_str().unwrap();
            record.push(Value::Array(notes_in(c, dir, commit)));
        }
        record.push(a.take());
    }
    record.iter_mut().for_each(without_times);
    let mut text: String = (record.iter()).map(|v| format!("{v}\n")).collect();
    let graph = c.says(dir, &["log", NAME, "--graph"]);
    for line in graph.lines() {
        if !line.trim_start().starts_with("interrupted ") {
            text += &format!("{line}\n");
        }
    }
    text += &sweeps_line(c, dir);
    by_trees(c, dir, &text)
}

/// `value` without its durations (the keys that end in `_s`).
fn without_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !k.ends_with("_s"));
            map.values_mut().for_each(without_times);
        }
        Value::Array(all) => all.iter_mut().for_each(without_times),
        _ => {}
    }
}

/// `text` with each commit id of `dir` (whole, or the 10 characters `log --graph` prints)
/// replaced by its tree's: trees are content, the same in two runs that wrote the same files.
fn by_trees(c: &Cluster, dir: &Path, text: &str) -> String {
    let all = c.repo.git_in(dir, &["log", "--all", "--format=%H %T"]);
    let tree_of = |id: &str| {
        (all.lines().filter_map(|l| l.split_once(' ')))
            .find(|(commit, _)| [10, 40].contains(&id.len()) && commit.starts_with(id))
            .map_or(id.to_string(), |(_, tree)| format!("tree:{}", &tree[..10]))
    };
    let (mut out, mut hex) = (String::new(), String::new());
    for ch in text.chars().chain(['\n']) {
        if ch.is_ascii_digit() || ('a'..='f').contains(&ch) {
            hex.push(ch);
            continue;
        }
        out += &tree_of(&hex);
        out.push(ch);
        hex.clear();
    }
    out
}
