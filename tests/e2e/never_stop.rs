//! End-to-end tests of a long conference (issue #27, "a never-stop week"): one long round stores
//! its records in fixed-size chunks (in group folders), so that each iteration adds a small blob instead of a new copy
//! of the whole round (checked with `git rev-list --objects` and `git cat-file`).

use crate::common;

use common::{ConfigBuilder, TestRepo};

#[test]
fn one_long_round_stores_its_records_in_chunks_of_at_most_64_lines() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Long", "./agents/improve.sh")
        .iterations(90)
        .rounds(1)
        .build();
    repo.start("long", &config).ok();
    let iterations = repo.events_named("long", "researcher.iteration").len();
    assert_eq!(iterations, 90);
    let tip = "refs/conference/long/events";
    let listing = repo.git(&[
        "ls-tree",
        "--name-only",
        &format!("{tip}:round-1/attempts.jsonl.d/000000"),
    ]);
    let chunks: Vec<&str> = listing.lines().collect();
    assert_eq!(chunks, ["000000.jsonl", "000001.jsonl"], "{listing}");
    let lines = |spec: &str| repo.git(&["cat-file", "-p", spec]).lines().count();
    let first = lines(&format!(
        "{tip}:round-1/attempts.jsonl.d/000000/000000.jsonl"
    ));
    let second = lines(&format!(
        "{tip}:round-1/attempts.jsonl.d/000000/000001.jsonl"
    ));
    assert_eq!((first, second), (64, iterations - 64));
    // Every version of the records ever stored holds at most one chunk: bytes grow linearly.
    let objects = repo.git(&["rev-list", "--objects", tip]);
    let versions: Vec<&str> = objects
        .lines()
        .filter(|l| l.contains("attempts.jsonl"))
        .filter_map(|l| l.split_once(' ').map(|(id, _)| id))
        .filter(|id| repo.git(&["cat-file", "-t", id]).trim() == "blob")
        .collect();
    assert!(versions.len() >= iterations, "{objects}");
    for id in versions {
        assert!(
            lines(id) <= 64,
            "a records blob of {} lines: {id}",
            lines(id)
        );
    }
    // The last attempt is the best: 90 improvements in a row, each kept.
    let last =
        repo.events_named("long", "researcher.iteration")[89]["payload"]["metric_value"].clone();
    assert_eq!(repo.status_json("long")["best"]["metric"], last);
}
