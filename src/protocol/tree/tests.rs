use super::*;
use crate::model::tree::Branch;

fn id(n: u8) -> CommitId {
    CommitId::try_from(format!("{n:02x}").repeat(20).as_str()).unwrap()
}

fn branch(n: u8, metric: f64, tries: u32, stale: u32) -> Branch {
    Branch {
        head: id(n),
        metric: Some(metric),
        label: format!("b{n}"),
        depth: n as u32,
        tries,
        stale,
        tried: vec![],
    }
}

fn rules(max_alive: u32) -> Rules {
    Rules {
        max_alive,
        noise: 0.01,
        direction: Some(Direction::Minimize),
    }
}

fn labels(closed: &[Closed]) -> Vec<&str> {
    closed.iter().map(|c| c.label.as_str()).collect()
}

#[test]
fn the_leader_is_the_best_alive_head_in_the_direction() {
    let b = [
        branch(1, 1.0, 0, 0),
        branch(2, 0.5, 0, 0),
        branch(3, 0.7, 0, 0),
    ];
    assert_eq!(leader(&b, &rules(3)).unwrap().label, "b2");
    let max = Rules {
        direction: Some(Direction::Maximize),
        ..rules(3)
    };
    assert_eq!(leader(&b, &max).unwrap().label, "b1");
    // A tie keeps the first opened.
    let tie = [branch(1, 0.5, 0, 0), branch(2, 0.5, 0, 0)];
    assert_eq!(leader(&tie, &rules(3)).unwrap().label, "b1");
}

#[test]
fn closings_past_n_and_stale_never_the_leader() {
    // branches, N → closed, in order
    let table: Vec<(Vec<Branch>, u32, Vec<&str>)> = vec![
        // Within N: nothing.
        (vec![branch(1, 1.0, 0, 0), branch(2, 0.9, 0, 0)], 3, vec![]),
        // Past N: the worst goes.
        (
            vec![
                branch(1, 1.0, 1, 0),
                branch(2, 0.6, 0, 0),
                branch(3, 0.9, 0, 0),
                branch(4, 0.8, 0, 0),
            ],
            3,
            vec!["b1"],
        ),
        // Equal metrics: the one tried more goes.
        (
            vec![
                branch(1, 0.9, 1, 0),
                branch(2, 0.5, 0, 0),
                branch(3, 0.9, 4, 0),
            ],
            2,
            vec!["b3"],
        ),
        // Stale and behind the leader by more than the noise.
        (
            vec![branch(1, 1.0, 3, 3), branch(2, 0.5, 0, 0)],
            3,
            vec!["b1"],
        ),
        // Stale but within the noise of the leader: stays.
        (
            vec![branch(1, 0.505, 3, 3), branch(2, 0.5, 0, 0)],
            3,
            vec![],
        ),
        // The leader is never closed, however stale.
        (vec![branch(1, 0.5, 9, 9), branch(2, 0.9, 0, 0)], 3, vec![]),
        // Stale ones first, then the cap counts what is left.
        (
            vec![
                branch(1, 1.0, 3, 3),
                branch(2, 0.5, 0, 0),
                branch(3, 0.7, 0, 0),
                branch(4, 0.8, 0, 0),
            ],
            2,
            vec!["b1", "b4"],
        ),
    ];
    for (branches, n, expected) in table {
        let closed = closings(&branches, &rules(n));
        assert_eq!(labels(&closed), expected, "{branches:?}");
    }
    let closed = closings(&[branch(1, 1.0, 3, 3), branch(2, 0.5, 0, 0)], &rules(3));
    assert!(
        closed[0].reason.contains("behind the leader b2"),
        "{}",
        closed[0].reason
    );
    let closed = closings(
        &[
            branch(1, 1.0, 0, 0),
            branch(2, 0.5, 0, 0),
            branch(3, 0.7, 0, 0),
        ],
        &rules(2),
    );
    assert_eq!(closed[0].reason, "past 2 alive: the worst of 3");
}

/// A researcher's record: attempts (this one included), kept.
fn rec(attempts: u64, kept: u64) -> Record {
    Record { attempts, kept }
}

/// The record of a researcher whose every attempt so far gained.
const GAINING: Record = Record {
    attempts: 1,
    kept: 1,
};

#[test]
fn best_first_extends_the_best_until_its_children_keep_failing() {
    // The first gain (b2) from the baseline (b1, one child so far), the first attempt made.
    let mut b = vec![branch(1, 1.0, 1, 0), branch(2, 0.6, 0, 0)];
    let pick = |b: &[Branch], from: u8, record: Record| {
        pick_best_first(b, &rules(3), &id(from), record)
            .unwrap()
            .0
            .label
    };
    let mut fails = 0;
    while pick(&b, 2, rec(1 + fails as u64, 1)) == "b2" {
        b[1].tries += 1;
        b[1].stale += 1;
        fails += 1;
        assert!(fails < 20, "the fork point never gets its turn");
    }
    assert_eq!(fails, STALE_TRIES, "the leader gets {STALE_TRIES} tries");
    // Once left, it stays left: a gain behind it (b3 from b1) does not call it back.
    let b = vec![
        branch(1, 1.0, 2, 0),
        branch(2, 0.6, 3, 3),
        branch(3, 0.9, 0, 0),
    ];
    assert_eq!(pick(&b, 1, rec(6, 2)), "b3");
    // Among the others: a fresh branch before a fork point with children, whatever its metric.
    let b = vec![
        branch(1, 1.0, 2, 1),
        branch(2, 0.6, 4, 4),
        branch(3, 0.9, 0, 0),
    ];
    assert_eq!(pick(&b, 1, GAINING), "b3");
    // A leader that gained again is extended again.
    let b = vec![branch(2, 0.6, 4, 0), branch(3, 0.9, 0, 0)];
    assert_eq!(pick(&b, 3, GAINING), "b2");
    // A lone head is extended however it fails.
    assert_eq!(pick(&[branch(2, 0.6, 9, 9)], 2, GAINING), "b2");
    // Equal scores among the others: the better metric.
    let b = vec![
        branch(1, 0.5, 3, 3),
        branch(2, 0.7, 0, 0),
        branch(3, 0.7, 0, 0),
    ];
    assert_eq!(pick(&b, 1, rec(4, 1)), "b2");
}

#[test]
fn best_first_waits_longer_for_a_leader_when_gains_are_rare() {
    // Laplace's rule: the chance of the run at p = (kept + 1) / (attempts before it + 2).
    let table = [
        // One attempt, kept: p = 2/3, three failures (1/27) are already improbable.
        (rec(4, 1), 3, 3),
        // One failure then one gain: p = 1/2, 1/2^5 < 0.05.
        (rec(5, 1), 3, 5),
        // A climber near its best: 5 gains in 20 attempts, p = 6/22, 0.727^10 < 0.05.
        (rec(23, 5), 3, 10),
        // Nothing ever gained: the cap.
        (rec(40, 0), 3, MAX_PATIENCE),
        // Nothing before the run: p = 1/2.
        (Record::default(), 0, 5),
    ];
    for (record, stale, expected) in table {
        assert_eq!(
            patience(record, stale),
            expected,
            "{record:?} stale {stale}"
        );
    }
    // The climber's leader after 3 failures in a row is extended, not left; after 10 it is.
    let mut b = vec![branch(1, 1.0, 4, 0), branch(2, 0.6, 3, 3)];
    let pick = |b: &[Branch], record| {
        pick_best_first(b, &rules(3), &id(2), record)
            .unwrap()
            .0
            .label
    };
    assert_eq!(pick(&b, rec(23, 5)), "b2");
    b[1].stale = 10;
    b[1].tries = 10;
    assert_eq!(pick(&b, rec(30, 5)), "b1");
}

#[test]
fn a_planned_step_is_what_applying_it_gives() {
    let branches = vec![branch(1, 1.0, 0, 0), branch(2, 0.8, 2, 2)];
    let opened = branch(3, 0.7, 0, 0);
    let from = branches[1].node();
    let step = plan(
        &branches,
        from.clone(),
        Some(opened.clone()),
        "kept: x".into(),
        &rules(2),
        |alive, _, opened| {
            assert_eq!(alive.len(), 2, "closed before the pick: {alive:?}");
            (opened.unwrap().node(), "continue".into(), None)
        },
    );
    assert_eq!(labels(&step.closed), ["b1"]);
    assert_eq!(step.head, id(3));
    assert_eq!(step.next.label, "b3");
    let mut applied = branches.clone();
    let best = apply(&mut applied, &step, "kept: x".into());
    assert_eq!(best, Some(0.7));
    let heads: Vec<&str> = applied.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(heads, ["b2", "b3"]);
    assert_eq!(
        (applied[0].tries, applied[0].stale),
        (3, 0),
        "a gain resets stale"
    );
    assert_eq!(applied[0].tried, ["kept: x"]);
    // A try that was not kept grows the staleness and keeps the newest lines only.
    let mut b = vec![branch(1, 1.0, 0, 0)];
    for i in 0..6 {
        let step = plan(
            &b,
            b[0].node(),
            None,
            format!("reverted: {i}"),
            &rules(3),
            |_, from, _| (from.clone(), "same".into(), None),
        );
        apply(&mut b, &step, format!("reverted: {i}"));
    }
    assert_eq!((b[0].tries, b[0].stale), (6, 6));
    assert_eq!(
        b[0].tried,
        ["reverted: 2", "reverted: 3", "reverted: 4", "reverted: 5"]
    );
}

#[test]
fn tried_lines_are_one_short_line() {
    assert_eq!(tried_line("kept", "lr 3e-4\nmore"), "kept: lr 3e-4");
    let long = "x".repeat(150);
    assert_eq!(tried_line("reverted", &long).chars().count(), 10 + 100 + 1);
}
