//! Which change mattered: how much of the metric's spread across attempts each factor explains.
//!
//! The estimator is a first-order (main-effect) variance decomposition, the one-factor part of
//! fANOVA without the forest: the attempts are grouped by the factor's value (each distinct value
//! its own group, or up to [`MAX_BINS`] groups of equal size by rank when there are more), and the
//! factor's importance is ω² (omega squared), the share of the metric's variance the group means
//! explain, corrected for what that many groups would explain by chance:
//! `(SS_between − (k−1)·MS_within) / (SS_total + MS_within)`, floored at 0. A factor that does
//! nothing scores about 0 however many values it took; one that decides the metric scores near 1.
//!
//! Its limits (stated in docs/trackers.md): it sees each factor alone, so interactions are not
//! counted and two factors always changed together share the credit; it describes these attempts
//! (where the search went), not the whole space; below [`MIN_POINTS`] attempts or with one value
//! it says nothing.

use std::collections::BTreeMap;

/// The most groups one factor's values are cut into.
pub const MAX_BINS: usize = 8;
/// Attempts a factor needs (with its value known) before it is scored.
pub const MIN_POINTS: usize = 6;

/// One factor's score.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Factor {
    pub name: String,
    /// ω², in [0, 1].
    pub importance: f64,
    /// Attempts it was scored on, and the distinct values it took there.
    pub points: usize,
    pub values: usize,
}

/// One attempt: its factors' values and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub values: BTreeMap<String, f64>,
    pub outcome: f64,
}

/// A conference's importance tables and the points the page draws.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Importance {
    /// Literals against the metric they measured at.
    pub literals: Vec<Factor>,
    /// Files (touched or not) against the gain over the attempt's parent.
    pub files: Vec<Factor>,
    /// The attempts read (the newest, up to a bound), and how many the conference has.
    pub attempts_read: usize,
    pub attempts_total: usize,
    /// For the parallel-coordinates view: the top literals' names, and one row per attempt
    /// (their values, in that order, None where unknown) with its metric and verdict.
    pub axes: Vec<String>,
    pub rows: Vec<ParallelRow>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParallelRow {
    pub values: Vec<Option<f64>>,
    pub metric: f64,
    pub verdict: String,
    pub researcher: String,
}

/// ω² of `ys` grouped by `xs`; None when there are too few points or one value only.
pub fn omega_squared(xs: &[f64], ys: &[f64]) -> Option<f64> {
    let n = xs.len().min(ys.len());
    if n < MIN_POINTS {
        return None;
    }
    let groups = groups_of(&xs[..n]);
    let k = groups.iter().max().map_or(0, |g| g + 1);
    if k < 2 || n <= k {
        return None;
    }
    let grand = ys[..n].iter().sum::<f64>() / n as f64;
    let (mut sum, mut count) = (vec![0.0; k], vec![0usize; k]);
    for (g, y) in groups.iter().zip(ys) {
        sum[*g] += y;
        count[*g] += 1;
    }
    let ss_total: f64 = ys[..n].iter().map(|y| (y - grand).powi(2)).sum();
    if ss_total <= 0.0 {
        return Some(0.0);
    }
    let ss_between: f64 = (0..k)
        .filter(|&g| count[g] > 0)
        .map(|g| count[g] as f64 * (sum[g] / count[g] as f64 - grand).powi(2))
        .sum();
    let ms_within = (ss_total - ss_between).max(0.0) / (n - k) as f64;
    let omega = (ss_between - (k - 1) as f64 * ms_within) / (ss_total + ms_within);
    Some(omega.clamp(0.0, 1.0))
}

/// Each value's group: its rank among the distinct values when there are at most [`MAX_BINS`]
/// of them, else its bin of equal size by rank.
fn groups_of(xs: &[f64]) -> Vec<usize> {
    let mut distinct: Vec<f64> = xs.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() <= MAX_BINS {
        return xs
            .iter()
            .map(|x| distinct.partition_point(|d| d < x))
            .collect();
    }
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut out = vec![0; xs.len()];
    let mut bin = 0;
    for (rank, &i) in order.iter().enumerate() {
        // Equal values stay in one bin.
        let next = rank * MAX_BINS / xs.len();
        if next > bin && (rank == 0 || xs[order[rank - 1]] != xs[i]) {
            bin = next;
        }
        out[i] = bin;
    }
    out
}

/// Every factor the points name, scored, most important first (factors that cannot be scored
/// are left out).
pub fn rank(points: &[Point]) -> Vec<Factor> {
    let mut names: Vec<&String> = points.iter().flat_map(|p| p.values.keys()).collect();
    names.sort();
    names.dedup();
    let mut out: Vec<Factor> = names
        .into_iter()
        .filter_map(|name| {
            let (xs, ys): (Vec<f64>, Vec<f64>) = points
                .iter()
                .filter(|p| p.outcome.is_finite())
                .filter_map(|p| p.values.get(name).map(|x| (*x, p.outcome)))
                .unzip();
            let importance = omega_squared(&xs, &ys)?;
            let mut distinct = xs.clone();
            distinct.sort_by(f64::total_cmp);
            distinct.dedup();
            Some(Factor {
                name: name.clone(),
                importance,
                points: xs.len(),
                values: distinct.len(),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.importance
            .total_cmp(&a.importance)
            .then(a.name.cmp(&b.name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream in [0, 1).
    fn uniform(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn the_literal_that_drives_the_metric_outranks_the_one_that_does_nothing() {
        let mut seed = 7;
        let points: Vec<Point> = (0..60)
            .map(|_| {
                let lr = uniform(&mut seed);
                let unused = (uniform(&mut seed) * 10.0).round();
                let noise = (uniform(&mut seed) - 0.5) * 0.05;
                Point {
                    values: [("lr".to_string(), lr), ("unused".to_string(), unused)].into(),
                    outcome: (lr - 0.3).powi(2) * 10.0 + noise,
                }
            })
            .collect();
        let ranked = rank(&points);
        assert_eq!(ranked[0].name, "lr", "{ranked:?}");
        let (lr, unused) = (ranked[0].importance, ranked[1].importance);
        assert!(lr > 0.5, "{ranked:?}");
        assert!(lr >= 5.0 * unused, "{ranked:?}");
    }

    #[test]
    fn too_few_points_or_one_value_say_nothing() {
        assert_eq!(omega_squared(&[1.0, 2.0], &[1.0, 2.0]), None);
        assert_eq!(
            omega_squared(
                &[1.0; 10],
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
            ),
            None
        );
        let xs = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let ys = [1.0, 1.1, 0.9, 5.0, 5.1, 4.9];
        assert!(omega_squared(&xs, &ys).unwrap() > 0.9);
    }
}
