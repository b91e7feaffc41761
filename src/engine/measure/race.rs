//! Successive halving across a sweep's variants (`prune: on` with `Parameter sweep: on`): the
//! variants of one sweep are the same idea at different values, so they race each other. Each
//! running variant's readings go into one shared [`Race`]; at each rung a variant behind the best
//! of the others at the same step by more than the noise margin is stopped (the rule:
//! `protocol::prune::race`), recorded as `pruned` with the value it lost to. A variant that runs
//! after the others (fewer evaluation slots than values) races their finished curves.

use std::sync::{Arc, Mutex};

use crate::model::Pruned;
use crate::protocol::prune::{self, Point};

/// The readings of a sweep's variants so far, and who stopped whom.
#[derive(Debug, Default)]
pub struct Race {
    /// Each variant's current run's readings.
    curves: Vec<Vec<Point>>,
    /// Each variant as the reasons name it (`LEARNING_RATE = 0.001`; a batch's `x=1.5 y=-2`).
    labels: Vec<String>,
}

/// One variant's seat in a race.
#[derive(Debug, Clone)]
pub struct Seat {
    race: Arc<Mutex<Race>>,
    seat: usize,
}

/// A race among the variants of one sweep or batch, named by these labels: one seat each, in order.
pub fn seats(labels: &[String]) -> Vec<Seat> {
    let race = Arc::new(Mutex::new(Race {
        curves: vec![Vec::new(); labels.len()],
        labels: labels.to_vec(),
    }));
    (0..labels.len())
        .map(|seat| Seat {
            race: race.clone(),
            seat,
        })
        .collect()
}

impl Seat {
    /// Records the seat's curve so far (a new run's, when it starts over) and decides: the
    /// reason when it is behind the leader at a rung.
    pub fn reading(&self, curve: &[Point], rule: &prune::Rule) -> Option<(Pruned, String)> {
        let mut race = self.race.lock().unwrap();
        race.curves[self.seat] = curve.to_vec();
        let others: Vec<usize> = (0..race.curves.len()).filter(|k| *k != self.seat).collect();
        let curves: Vec<&[Point]> = others.iter().map(|k| &race.curves[*k][..]).collect();
        let (leader, pruned) = prune::race(curve, &curves, rule)?;
        let leader = &race.labels[others[leader]];
        let fmt = |v: f64| crate::render::format::fmt(Some(v));
        let why = format!(
            "successive halving in its sweep: at step {} {} read {}, behind {leader} \
             ({} there) by more than the noise margin {}{}",
            pruned.step,
            race.labels[self.seat],
            pruned.value,
            fmt(pruned.reference),
            fmt(rule.effective_margin()),
            match rule.early {
                true => "",
                false => ", and could not get there even extrapolated optimistically",
            },
        );
        Some((pruned, why))
    }
}
