//! Peer review against a seeded noisy evaluation (`fixtures/seeded-noise`), over many seeds,
//! through the real binary: a reproducible gain is validated and reaches best although one review
//! reading per seed is wild, and a one-time lucky reading never reaches best. The counts are
//! printed (`cargo test --test e2e noise:: -- --nocapture`) for the record.

use crate::common;

use common::{ConfigBuilder, TestRepo};
use serde_json::Value;

/// Seeds per setting: `NOISE_SEEDS`, else a few (each seed is a whole conference).
fn seeds() -> u64 {
    std::env::var("NOISE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// What one seed's conference did.
#[derive(Debug, Default)]
struct Outcome {
    a_verdict: String,
    b_verdict: String,
    a_on_best: bool,
    lucky_on_best: bool,
    /// The seed's wild reading fell on A's finding or the round start (not on B's).
    wild_hits_a_or_start: bool,
    /// The seed's wild reading is B's first review reading, in the lucky direction: with one
    /// reading per tree the review is then as lucky as the researcher, and nothing can tell.
    twice_lucky: bool,
    noisy_warning: bool,
}

fn run_seed(seed: u64, noise_runs: u32) -> Outcome {
    let repo = TestRepo::from_fixture("seeded-noise");
    std::fs::write(repo.git_dir().join("noise-seed"), seed.to_string()).unwrap();
    let name = "noise";
    let config = ConfigBuilder::new("Noise", "./agent.sh")
        .count(2)
        .iterations(1)
        .rounds(1)
        .noise_runs(noise_runs)
        .frozen("eval.sh, noise.py")
        .build();
    repo.start(name, &config).ok();
    let review = repo.events_named(name, "round.peer_review");
    let verdict = |id: &str| -> String {
        review
            .first()
            .and_then(|e| e["payload"]["findings"].as_array())
            .and_then(|fs| fs.iter().find(|f| f["researcher"] == id))
            .map(|f| f["verdict"].as_str().unwrap_or("-").to_string())
            .unwrap_or_else(|| "not reviewed".into())
    };
    let best = format!("conference/{name}/best");
    let st: Value = repo.status_json(name);
    // The fixture's wild reading: run, tree and sign from Python's Random(seed), as noise.py
    // draws them.
    let wild = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import random; w = random.Random({seed}); print(w.randrange(5), w.randrange(3), w.choice((-4.0, 4.0)))"
            ),
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let wild: Vec<&str> = wild.split_whitespace().collect();
    assert_eq!(wild.len(), 3, "python3 drew {wild:?}");
    Outcome {
        a_verdict: verdict("A"),
        b_verdict: verdict("B"),
        a_on_best: repo.show(&best, "value.txt").map(|v| v.trim().to_string()) == Some("9".into()),
        lucky_on_best: repo.show(&best, "lucky.txt").is_some(),
        wild_hits_a_or_start: wild[1] != "2",
        twice_lucky: wild[0] == "0" && wild[1] == "2" && wild[2] == "-4.0",
        noisy_warning: st["noisy_evaluation"].is_string(),
    }
}

/// Runs `seeds` conferences, two at a time.
fn run_seeds(seeds: u64, noise_runs: u32) -> Vec<Outcome> {
    let mut out: Vec<(u64, Outcome)> = Vec::new();
    let seeds: Vec<u64> = (0..seeds).collect();
    for pair in seeds.chunks(2) {
        let handles: Vec<_> = pair
            .iter()
            .map(|&s| std::thread::spawn(move || (s, run_seed(s, noise_runs))))
            .collect();
        out.extend(handles.into_iter().map(|h| h.join().unwrap()));
    }
    out.sort_by_key(|(s, _)| *s);
    out.into_iter().map(|(_, o)| o).collect()
}

fn count(outcomes: &[Outcome], f: impl Fn(&Outcome) -> bool) -> usize {
    outcomes.iter().filter(|o| f(o)).count()
}

#[test]
fn over_seeds_a_reproducible_gain_is_validated_and_a_lucky_reading_never_reaches_best() {
    let with_noise_runs = run_seeds(seeds(), 5);
    let n = with_noise_runs.len();
    let a_validated = count(&with_noise_runs, |o| o.a_verdict == "validated");
    let a_validated_despite_wild = count(&with_noise_runs, |o| {
        o.a_verdict == "validated" && o.wild_hits_a_or_start
    });
    let wild_on_a_or_start = count(&with_noise_runs, |o| o.wild_hits_a_or_start);
    let a_on_best = count(&with_noise_runs, |o| o.a_on_best);
    let lucky_validated = count(&with_noise_runs, |o| o.b_verdict == "validated");
    let lucky_on_best = count(&with_noise_runs, |o| o.lucky_on_best);
    println!("noise runs 5, {n} seeds (one wild review reading per seed):");
    println!("  reproducible gain validated: {a_validated}/{n} (with the wild reading on it or on the round start: {a_validated_despite_wild}/{wild_on_a_or_start})");
    println!("  reproducible gain on best:   {a_on_best}/{n}");
    println!("  lucky reading validated:     {lucky_validated}/{n}");
    println!("  lucky reading on best:       {lucky_on_best}/{n}");

    let one_run = run_seeds(seeds(), 1);
    let m = one_run.len();
    let lucky_on_best_1 = count(&one_run, |o| o.lucky_on_best);
    let twice_lucky = count(&one_run, |o| o.twice_lucky);
    let reviewed = count(&one_run, |o| o.b_verdict != "not reviewed");
    let warned = count(&one_run, |o| o.noisy_warning);
    let a_on_best_1 = count(&one_run, |o| o.a_on_best);
    println!("noise runs 1, {m} seeds:");
    println!("  lucky finding reviewed:      {reviewed}/{m} (the others: a wild baseline reading hid it)");
    println!("  noisy evaluation reported:   {warned}/{reviewed}");
    println!("  lucky reading on best:       {lucky_on_best_1}/{m} (review's one reading as lucky: {twice_lucky}/{m})");
    println!("  reproducible gain on best:   {a_on_best_1}/{m}");

    assert!(
        seeds() < 5 || wild_on_a_or_start > 0,
        "the fixture put no wild reading on A or the start"
    );
    // The noise is estimated from ~15 readings (a robust spread), itself noisy: now and then it
    // comes out high and a real gain is challenged, the safe side (seed 2: estimated 0.36 for
    // a true 0.2, while its round-start readings drew low). One miss in ten is allowed, one in
    // small runs; a lucky reading on best is never allowed.
    let misses = (n / 10).max(1);
    assert!(a_validated + misses >= n, "{with_noise_runs:#?}");
    assert!(a_on_best + misses >= n, "{with_noise_runs:#?}");
    assert_eq!(lucky_on_best, 0, "{with_noise_runs:#?}");
    assert_eq!(lucky_validated, 0, "{with_noise_runs:#?}");
    // One reading per tree: a reviewed lucky reading disagrees with the review's by about 3, so
    // the evaluation is reported noisy every time; the luck reaches best only when the review's
    // single reading is as lucky (then nothing can tell, and the warning says to add runs).
    assert_eq!(warned, reviewed, "{one_run:#?}");
    assert!(lucky_on_best_1 <= twice_lucky, "{one_run:#?}");
}
