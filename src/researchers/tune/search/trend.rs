//! The trend: a separable quadratic fitted to every measured point, and its minimiser.
//!
//! Rugged landscapes (a local minimum near every point, on a broad trend) hide the trend from a
//! local search, which refines the basin it started in; a quadratic over every point averages
//! the ripples out and points at the bottom of the trend. On the rugged fixtures (shifted,
//! rotated Rastrigin and Levy, 60 evaluations) measuring that point every third proposal
//! lowered the median gap by a third to a half, for one and for three researchers, and left
//! the smooth fixtures as they were (BENCHMARKS.md, "The trend's minimum").

use super::dims::Point;
use super::linalg::{dist, solve};
use super::*;
use crate::researchers::tune::Proposal;

/// One proposal in this many (counted by points measured) is the trend's minimum.
const TREND_EVERY: usize = 3;
/// Least distance (z) from every measured point for the trend's minimum to be worth measuring:
/// closer, the model knows it already.
const TREND_NEW: f64 = 0.05;
/// Ridge on the linear and quadratic terms, relative to the mean of the normal matrix's
/// diagonal: with fewer points than terms the fit stays defined and shrinks towards flat.
const TREND_RIDGE: f64 = 1e-3;

impl<'a> Search<'a> {
    /// Whether this proposal tries the trend's minimum first: every `TREND_EVERY`-th point
    /// measured (the researchers of one iteration take turns), before the endgame.
    pub(super) fn trend_turn(&self) -> bool {
        // Researchers refining regions of their own take the turn in rotation, iteration by
        // iteration (else one of them would measure the trend at every iteration and never
        // refine its region); sharing one region, the one whose turn it is by points measured.
        let sharing = self.sharing();
        let turn = match sharing > 1 && self.regions_kept(sharing) > 1 {
            true => self.distinct_points() / sharing + self.req.researcher,
            false => self.distinct_points() + self.req.researcher,
        };
        !self.endgame() && turn.is_multiple_of(TREND_EVERY)
    }

    /// The minimiser, within the bounds, of a separable quadratic fitted (ridge least squares)
    /// to every measured point of this researcher's slice, values above the upper fence
    /// (q75 + 1.5 IQR) clipped. Along a literal where the fit is not a bowl, the best point's
    /// value. None without bounds on every active literal, with too few points, or when the
    /// minimiser lies near a measured point.
    pub(super) fn trend(&mut self) -> Option<Proposal> {
        let n = self.active.len();
        if self.bounded().len() != n {
            return None;
        }
        let pts: Vec<&Point> = self.measured().collect();
        if pts.len() < n + 3 {
            return None;
        }
        let c = fit_separable_quadratic(&pts)?;
        let best = pts.iter().min_by(|a, b| a.y.total_cmp(&b.y))?;
        let z: Vec<f64> = (0..n)
            .map(|k| {
                let (lin, quad) = (c[1 + k], c[1 + n + k]);
                match quad > 1e-12 {
                    true => (0.5 - lin / (2.0 * quad)).clamp(0.0, 1.0),
                    false => best.z[k],
                }
            })
            .collect();
        let nearest = (self.points.iter())
            .map(|p| dist(&p.z, &z))
            .fold(f64::INFINITY, f64::min);
        if nearest < TREND_NEW {
            return None;
        }
        self.build(&z, "trend minimum")
    }
}

/// Coefficients of y ≈ a + Σ b_k (z_k − ½) + Σ c_k (z_k − ½)² over `pts` (a, then the b's, then
/// the c's), each y clipped at the upper fence so that a few disastrous points do not bend the
/// fit.
fn fit_separable_quadratic(pts: &[&Point]) -> Option<Vec<f64>> {
    let n = pts.first()?.z.len();
    let mut sorted: Vec<f64> = pts.iter().map(|p| p.y).collect();
    sorted.sort_by(f64::total_cmp);
    let q = |f: f64| sorted[((sorted.len() - 1) as f64 * f).round() as usize];
    let fence = q(0.75) + 1.5 * (q(0.75) - q(0.25));
    let m = 1 + 2 * n;
    let features = |z: &[f64]| {
        let mut f = vec![1.0];
        f.extend(z.iter().map(|v| v - 0.5));
        f.extend(z.iter().map(|v| (v - 0.5).powi(2)));
        f
    };
    let mut a = vec![vec![0.0; m]; m];
    let mut b = vec![0.0; m];
    for p in pts {
        let f = features(&p.z);
        let y = p.y.min(fence);
        for i in 0..m {
            b[i] += f[i] * y;
            for j in 0..m {
                a[i][j] += f[i] * f[j];
            }
        }
    }
    let ridge = TREND_RIDGE * (0..m).map(|i| a[i][i]).sum::<f64>() / m as f64;
    for (i, row) in a.iter_mut().enumerate().skip(1) {
        row[i] += ridge;
    }
    solve(a, b)
}

#[cfg(test)]
mod tests {
    use super::super::{ModelCache, Search};
    use crate::researchers::tune::{Request, Trial};
    use std::collections::BTreeMap;

    const CENTRE: [f64; 3] = [1.5, -2.0, 0.7];

    /// Rastrigin's function around `CENTRE`: a bowl with a local minimum near every point of
    /// the integer grid, ripples of amplitude 10 along each literal.
    fn rastrigin(x: &[f64]) -> f64 {
        let tau = std::f64::consts::TAU;
        (x.iter().zip(CENTRE))
            .map(|(v, c)| (v - c).powi(2) + 10.0 * (1.0 - (tau * (v - c)).cos()))
            .sum()
    }

    fn distance_to_centre(x: &[f64]) -> f64 {
        (x.iter().zip(CENTRE))
            .map(|(v, c)| (v - c).powi(2))
            .sum::<f64>()
            .sqrt()
    }

    /// `n` points spread over the box [-5, 5]³ (two decimals, as a person writes them).
    fn scattered(n: usize) -> Vec<Vec<f64>> {
        let mut state = 7u64;
        let mut unit = || {
            state = (state.wrapping_mul(6364136223846793005)).wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| {
                (0..3)
                    .map(|_| ((-5.0 + 10.0 * unit()) * 100.0).round() / 100.0)
                    .collect()
            })
            .collect()
    }

    /// Which of three researchers sharing the 3 literals takes the trend's turn once `points`
    /// were measured, with a conference budget of `total` attempts.
    fn whose_turn(points: &[Vec<f64>], total: u64) -> Vec<usize> {
        let (files, history) = measured(points);
        (0..3)
            .filter(|&researcher| {
                let req = Request {
                    researcher,
                    researchers: 3,
                    budget_total: Some(total),
                    ..request(&files, &history)
                };
                let cache = ModelCache::default();
                Search::new(&req, &cache).unwrap().trend_turn()
            })
            .collect()
    }

    #[test]
    fn researchers_with_regions_of_their_own_take_the_trend_in_rotation() {
        let points = scattered(36);
        // 200 attempts afford a region per researcher: the turn moves on each iteration.
        let turns: Vec<Vec<usize>> = [30, 33, 36]
            .iter()
            .map(|&n| whose_turn(&points[..n], 200))
            .collect();
        assert_eq!(turns, [vec![2], vec![1], vec![0]]);
        // 30 attempts afford one region, refined by all three: the turn goes by points
        // measured, the same researcher each iteration.
        let turns: Vec<Vec<usize>> = [30, 33, 36]
            .iter()
            .map(|&n| whose_turn(&points[..n], 30))
            .collect();
        assert_eq!(turns, [vec![0], vec![0], vec![0]]);
    }

    type Files = Vec<(String, String)>;

    /// The 3-literal train.py, and `points` measured on `rastrigin`.
    fn measured(points: &[Vec<f64>]) -> (Files, Vec<Trial>) {
        let text =
            "X1 = 4.2  # tune: [-5, 5]\nX2 = 3.1  # tune: [-5, 5]\nX3 = -4.4  # tune: [-5, 5]\n";
        let files = vec![("train.py".to_string(), text.to_string())];
        let history: Vec<Trial> = (points.iter())
            .map(|x| Trial {
                params: (x.iter().enumerate()).map(|(i, v)| (key(i), *v)).collect(),
                metric: Some(rastrigin(x)),
            })
            .collect();
        (files, history)
    }

    fn key(i: usize) -> String {
        format!("train.py:X{}", i + 1)
    }

    /// A lone researcher's request, 60 attempts in all.
    fn request<'a>(files: &'a Files, history: &'a [Trial]) -> Request<'a> {
        Request {
            budget_total: Some(60),
            ..crate::researchers::tune::tests::req(files, history, 1, 0)
        }
    }

    /// What `trend` proposes once `points` were measured.
    fn trend_after(points: &[Vec<f64>]) -> Option<Vec<f64>> {
        let (files, history) = measured(points);
        let req = request(&files, &history);
        let cache = ModelCache::default();
        let proposal = Search::new(&req, &cache)?.trend()?;
        let params: &BTreeMap<String, f64> = &proposal.params;
        Some((0..3).map(|i| params[&key(i)]).collect())
    }

    #[test]
    fn the_trend_points_past_the_best_basin_towards_the_bottom_of_the_bowl() {
        // Scattered at random (a search's points gather where it found good ones, which helps
        // the fit), the ripples need about 50 points in 3 dimensions to average out: with 24,
        // the trend's minimum (5.0, -3.4, 0.3) was farther than the best point measured.
        for n in [50, 60, 80, 100] {
            let points = scattered(n);
            let best = (points.iter())
                .min_by(|a, b| rastrigin(a).total_cmp(&rastrigin(b)))
                .unwrap();
            let x = trend_after(&points).expect("a proposal");
            assert!(!points.contains(&x), "{x:?} was measured");
            assert!(
                distance_to_centre(&x) < distance_to_centre(best),
                "{n} points: {x:?} is no nearer {CENTRE:?} than the best measured, {best:?}"
            );
        }
        // Too few points to fit 7 terms with 3 to spare: no proposal.
        assert_eq!(trend_after(&scattered(5)), None);
    }
}
