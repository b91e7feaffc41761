//! `serve` on a conference of 10,000 attempts.

use std::time::{Duration, Instant};

use super::grow::grow;
use super::Served;
use crate::common::TestRepo;

#[test]
fn serve_answers_at_ten_thousand_attempts() {
    let repo = TestRepo::complement_conference("big");
    let at = Instant::now();
    grow(&repo.dir, "big", 100, 100, false);
    println!("grown to 10,004 attempts in {:?}", at.elapsed());
    let served = Served::start(&repo, &["big"]);
    let st = repo.status_json("big");
    assert_eq!(st["total_iterations"], 10_004);

    let timed = |path: &str| {
        let at = Instant::now();
        let (code, body) = served.get(path);
        assert_eq!(code, 200, "{path}: {body}");
        (body, at.elapsed())
    };
    let (page, took) = timed("/c/big");
    println!(
        "the page at 10,004 attempts: {} bytes in {took:?}",
        page.len()
    );
    assert!(page.contains("synthetic attempt 50 of round 101"));
    // An unoptimised build on a shared machine: the release figures are in BENCHMARKS.md.
    assert!(took < Duration::from_secs(5), "the page took {took:?}");
    let (all, _) = timed("/api/big/attempts");
    let all: serde_json::Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 10_004);
    let (fresh, took) = timed("/api/big/attempts?since=10000");
    let fresh: serde_json::Value = serde_json::from_str(&fresh).unwrap();
    assert_eq!(fresh.as_array().unwrap().len(), 4);
    assert_eq!(fresh[0]["n"], 10_000);
    assert!(
        took < Duration::from_secs(5),
        "an update's attempts took {took:?}"
    );
    let commit = fresh[3]["commit"].as_str().unwrap().to_string();
    assert!(timed(&format!("/api/big/diff/{commit}"))
        .0
        .starts_with("diff --git"));
    let (status, _) = timed("/api/big/status");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&status).unwrap(),
        st
    );
}
