//! The surrogate models: a Gaussian process within a trust region (expected improvement), a
//! quadratic or linear model's minimiser, and the box their candidates are sampled from.

use std::collections::BTreeSet;

use super::dims::{mix, Point, Rng};
use super::linalg::{dist, solve, trust_region};
use super::*;
use crate::researchers::tune::gp::{expected_improvement, probability_below, Gp};
use crate::researchers::tune::Proposal;

impl<'a> Search<'a> {
    /// A Gaussian process fitted to every measured point of this researcher's slice (targets:
    /// log of the distance to the best, so the differences near it count; crashes as bad as the
    /// worst; standardised), and the best target. Only when every active literal has bounds.
    pub(super) fn fit_model(&self) -> Option<Model> {
        let nd = self.active.len();
        if self.bounded().len() != nd {
            return None;
        }
        let mut data: Vec<usize> = (0..self.points.len())
            .filter(|&i| self.points[i].in_slice && !self.points[i].duplicate)
            .collect();
        let finite: Vec<f64> = data
            .iter()
            .map(|&i| self.points[i].y)
            .filter(|y| y.is_finite())
            .collect();
        if finite.len() < (nd + 1).max(3) {
            return None;
        }
        if data.len() > MODEL_POINTS {
            // The best ones and the most recent ones.
            let mut by_y = data.clone();
            by_y.sort_by(|&a, &b| self.points[a].y.total_cmp(&self.points[b].y));
            let mut keep: BTreeSet<usize> = by_y.into_iter().take(MODEL_POINTS / 3).collect();
            for &i in data.iter().rev() {
                if keep.len() >= MODEL_POINTS {
                    break;
                }
                keep.insert(i);
            }
            data = keep.into_iter().collect();
        }
        // Targets: log of the distance to the best (the interesting differences are near it),
        // crashes as bad as the worst, standardised.
        let mut sorted = finite.clone();
        sorted.sort_by(f64::total_cmp);
        let (lo, med) = (sorted[0], sorted[sorted.len() / 2]);
        let delta = WARP_OFFSET * (med - lo) + 1e-9 * (1.0 + lo.abs());
        let warp = |y: f64| (y - lo + delta).ln();
        let worst = warp(sorted[sorted.len() - 1]);
        let ys: Vec<f64> = data
            .iter()
            .map(|&i| {
                let y = self.points[i].y;
                if y.is_finite() {
                    warp(y)
                } else {
                    worst
                }
            })
            .collect();
        let mean = ys.iter().sum::<f64>() / ys.len() as f64;
        let sd = (ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / ys.len() as f64).sqrt();
        let sd = if sd > 1e-12 { sd } else { 1.0 };
        let ys: Vec<f64> = ys.iter().map(|y| (y - mean) / sd).collect();
        let xs: Vec<Vec<f64>> = data.iter().map(|&i| self.points[i].z.clone()).collect();
        if let Some((cx, cy, model)) = &*self.cache.borrow() {
            if *cx == xs && *cy == ys {
                return Some(model.clone());
            }
        }
        let best = ys.iter().copied().fold(f64::INFINITY, f64::min);
        let model = Model {
            gp: Gp::fit(&xs, &ys)?,
            best,
            lo,
            delta,
            mean,
            sd,
        };
        *self.cache.borrow_mut() = Some((xs, ys, model.clone()));
        Some(model)
    }

    /// The point of best expected improvement under a Gaussian-process model of everything
    /// measured, over the whole box or (`half`) within the trust region around the centre.
    /// Only when every active literal has bounds.
    pub(super) fn surrogate(&mut self, half: Option<f64>, acq: Acq) -> Option<Proposal> {
        let model = self.fit_model()?;
        let head = self.head_target(&model);
        let target = model.best;
        let mut gp = model.gp;
        let area = self.search_box(&gp, half);
        // Points other researchers are measuring right now count as measured at the model's
        // prediction (kriging believer), so this proposal goes elsewhere: the latest
        // BELIEVED_PENDING of them (the local penalisation below covers every one).
        let latest = self.pending.len().saturating_sub(BELIEVED_PENDING);
        for z in &self.pending[latest..] {
            gp = gp.believing(z)?;
        }
        // The believer alone barely moves a proposal whose predicted gain is large (the mean,
        // not the uncertainty, makes its score), so researchers proposing at the same time from
        // the same history would measure three almost equal points: the score also fades
        // towards each pending point (local penalisation), within half the box's width.
        let pending = self.pending.clone();
        let widths = area.widths.clone();
        let penalty = move |z: &[f64]| {
            pending
                .iter()
                .map(|p| {
                    let d2: f64 = z
                        .iter()
                        .zip(p)
                        .zip(&widths)
                        .map(|((a, b), w)| ((a - b) / (PENDING_RADIUS * w.min(0.5))).powi(2))
                        .sum();
                    1.0 - (-d2).exp()
                })
                .product::<f64>()
        };
        let score = |gp: &Gp, z: &[f64]| {
            let (m, s) = gp.predict(z);
            match acq {
                // The devil's advocate goes where the model knows least among plausible points.
                Acq::Explore => s * 3.0 - m,
                Acq::Improvement => expected_improvement(m, s, target) * penalty(z),
                Acq::AnyGain => probability_below(m, s, head) * penalty(z),
            }
        };
        let mut rng = Rng(mix(&[self.req.seed, 0x6A, self.points.len() as u64]));
        let span = half.unwrap_or(0.5);
        let cands = area.candidates(&mut rng, &self.surrogate_centres(half), span);
        let mut scored: Vec<(f64, Vec<f64>)> =
            cands.into_iter().map(|z| (score(&gp, &z), z)).collect();
        if scored.is_empty() {
            return None;
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(3);
        area.polish(&mut scored, |z| score(&gp, z), span);
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let design = half.is_none();
        let how = if acq == Acq::AnyGain {
            "likely gain"
        } else {
            "model"
        };
        for (_, z) in scored {
            if let Some(p) = self.build_with(&z, how, design) {
                return Some(p);
            }
        }
        None
    }

    /// The value to beat for a kept attempt, as a model target: this researcher's own best
    /// (its files), else the model's best.
    pub(super) fn head_target(&self, model: &Model) -> f64 {
        let head = self
            .points
            .iter()
            .filter(|p| p.in_slice && p.vals == self.cur)
            .map(|p| p.y)
            .fold(f64::INFINITY, f64::min);
        if head.is_finite() {
            ((head - model.lo + model.delta).ln() - model.mean) / model.sd
        } else {
            model.best
        }
    }

    /// Where the surrogate looks: the unit box, or (`half`) the trust region around the centre,
    /// wider along the dimensions the model finds smoother (TuRBO).
    pub(super) fn search_box(&self, gp: &Gp, half: Option<f64>) -> SearchBox {
        let nd = self.active.len();
        let Some(h) = half else {
            return SearchBox {
                widths: vec![1.0; nd],
                lower: vec![0.0; nd],
                upper: vec![1.0; nd],
            };
        };
        let ls = gp.length_scales();
        let geo = (ls.iter().map(|l| l.ln()).sum::<f64>() / nd as f64).exp();
        let widths: Vec<f64> = ls
            .iter()
            .map(|l| (h * l / geo).clamp(h / 4.0, 4.0 * h))
            .collect();
        SearchBox {
            lower: self
                .zc
                .iter()
                .zip(&widths)
                .map(|(c, w)| (c - w).max(0.0))
                .collect(),
            upper: self
                .zc
                .iter()
                .zip(&widths)
                .map(|(c, w)| (c + w).min(1.0))
                .collect(),
            widths,
        }
    }

    /// Where the surrogate samples densely: the centre (trust region), or the three best
    /// points of this researcher's slice (whole box).
    pub(super) fn surrogate_centres(&self, half: Option<f64>) -> Vec<Vec<f64>> {
        if half.is_some() {
            return vec![self.zc.clone()];
        }
        let mut by_y: Vec<usize> = (0..self.points.len())
            .filter(|&i| self.points[i].y.is_finite() && self.points[i].in_slice)
            .collect();
        by_y.sort_by(|&a, &b| self.points[a].y.total_cmp(&self.points[b].y));
        by_y.iter()
            .take(3)
            .map(|&i| self.points[i].z.clone())
            .collect()
    }
}

impl<'a> Search<'a> {
    /// The trust-region minimiser of a model fitted to the nearest evaluated points, as a move in z.
    pub(super) fn model_step(&self) -> Option<Vec<f64>> {
        let n = self.active.len();
        let pts = self.nearest_points();
        let kind = ModelKind::for_points(pts.len(), n)?;
        let m = pts.len().min(kind.terms(n) + n + 3);
        let pts = &pts[..m];
        let rho = pts.last()?.0.max(1e-12);
        let c = self.fit_local_model(pts, kind, rho)?;
        let g: Vec<f64> = c[1..=n].to_vec();
        let h = kind.hessian(&c, n);
        let delta = (1.5 * self.sigma / rho).max(1e-12);
        let s = trust_region(&g, &h, delta)?;
        let pred: f64 = s.iter().zip(&g).map(|(a, b)| a * b).sum::<f64>()
            + 0.5
                * (0..n)
                    .map(|i| (0..n).map(|j| s[i] * h[i][j] * s[j]).sum::<f64>())
                    .sum::<f64>();
        if pred.is_nan() || pred >= 0.0 {
            return None;
        }
        Some(s.iter().map(|x| x * rho).collect())
    }

    /// The points of this researcher's slice with a metric, each counted once.
    pub(super) fn measured(&self) -> impl Iterator<Item = &Point> {
        (self.points.iter()).filter(|p| p.y.is_finite() && p.in_slice && !p.duplicate)
    }

    /// The measured points of this researcher's slice within five steps of the centre, nearest
    /// first, with their distance.
    pub(super) fn nearest_points(&self) -> Vec<(f64, &Point)> {
        let mut pts: Vec<(f64, &Point)> = self
            .measured()
            .map(|p| (dist(&p.z, &self.zc), p))
            .filter(|(d, _)| *d <= 5.0 * self.sigma)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    }

    /// Least-squares coefficients of `kind` over `pts`, in coordinates around the centre scaled
    /// by `rho`, targets relative to the nearest point's.
    #[allow(clippy::needless_range_loop)] // matrix code reads best with indices
    pub(super) fn fit_local_model(
        &self,
        pts: &[(f64, &Point)],
        kind: ModelKind,
        rho: f64,
    ) -> Option<Vec<f64>> {
        let p = kind.terms(self.active.len());
        let y0 = pts[0].1.y;
        let mut ata = vec![vec![0.0; p]; p];
        let mut aty = vec![0.0; p];
        let ys: Vec<f64> = pts.iter().map(|(_, q)| q.y - y0).collect();
        let yscale = ys.iter().fold(0.0f64, |a, &b| a.max(b.abs())).max(1e-300);
        for ((_, q), y) in pts.iter().zip(&ys) {
            let u: Vec<f64> =
                q.z.iter()
                    .zip(&self.zc)
                    .map(|(a, b)| (a - b) / rho)
                    .collect();
            let f = kind.features(&u);
            for i in 0..p {
                aty[i] += f[i] * y / yscale;
                for j in 0..p {
                    ata[i][j] += f[i] * f[j];
                }
            }
        }
        let tr: f64 = (0..p).map(|i| ata[i][i]).sum::<f64>() / p as f64;
        for (i, row) in ata.iter_mut().enumerate() {
            row[i] += 1e-9 * tr;
        }
        solve(ata, aty)
    }
}

/// The box the surrogate searches, in z: per-dimension bounds and the half-widths that scale
/// its samples around the centres.
pub(super) struct SearchBox {
    pub(super) widths: Vec<f64>,
    pub(super) lower: Vec<f64>,
    pub(super) upper: Vec<f64>,
}

impl SearchBox {
    pub(super) fn clamp(&self, z: Vec<f64>) -> Vec<f64> {
        z.into_iter()
            .enumerate()
            .map(|(k, v)| v.clamp(self.lower[k], self.upper[k]))
            .collect()
    }

    /// Uniform samples of the box, then Gaussian samples at three scales around each centre.
    pub(super) fn candidates(
        &self,
        rng: &mut Rng,
        centres: &[Vec<f64>],
        span: f64,
    ) -> Vec<Vec<f64>> {
        let nd = self.lower.len();
        let mut cands: Vec<Vec<f64>> = (0..200 + 100 * nd)
            .map(|_| {
                (0..nd)
                    .map(|k| self.lower[k] + rng.unit() * (self.upper[k] - self.lower[k]))
                    .collect()
            })
            .collect();
        for c in centres {
            for scale in [0.02, 0.08, 0.3] {
                for _ in 0..20 {
                    cands.push(
                        self.clamp(
                            c.iter()
                                .zip(&self.widths)
                                .map(|(&v, w)| v + w.min(span) * scale * rng.normal())
                                .collect(),
                        ),
                    );
                }
            }
        }
        cands
    }

    /// Improves each scored candidate by a compass search on `score`, within the box.
    pub(super) fn polish(
        &self,
        scored: &mut [(f64, Vec<f64>)],
        score: impl Fn(&[f64]) -> f64,
        span: f64,
    ) {
        let nd = self.lower.len();
        for (val, z) in scored.iter_mut() {
            let mut step = 0.1 * span;
            while step > 4e-3 * span {
                let mut moved = false;
                for k in 0..nd {
                    for dir in [1.0, -1.0] {
                        let mut t = z.clone();
                        t[k] = (t[k] + dir * step).clamp(self.lower[k], self.upper[k]);
                        let v = score(&t);
                        if v > *val {
                            *val = v;
                            *z = t;
                            moved = true;
                        }
                    }
                }
                if !moved {
                    step /= 2.0;
                }
            }
        }
    }
}

/// The shape of the local model `model_step` fits: the richest the nearby points support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ModelKind {
    /// A plane.
    Linear,
    /// A plane plus a square term per dimension.
    Separable,
    /// A full quadratic.
    Quadratic,
}

impl ModelKind {
    /// The model `count` points support in `n` dimensions, if any.
    pub(super) fn for_points(count: usize, n: usize) -> Option<ModelKind> {
        if count > ModelKind::Quadratic.terms(n) + 1 {
            Some(ModelKind::Quadratic)
        } else if count > ModelKind::Separable.terms(n) + 1 {
            Some(ModelKind::Separable)
        } else if count > ModelKind::Linear.terms(n) && n <= 2 {
            // A plane through a few points is a fair guide in 1-2 dimensions only; in more, the
            // coordinate polls explore better until a curved model can be fitted.
            Some(ModelKind::Linear)
        } else {
            None
        }
    }

    /// Number of coefficients in `n` dimensions.
    pub(super) fn terms(self, n: usize) -> usize {
        match self {
            ModelKind::Linear => 1 + n,
            ModelKind::Separable => 1 + 2 * n,
            ModelKind::Quadratic => 1 + n + n * (n + 1) / 2,
        }
    }

    /// The model's features at `u`: 1, the coordinates, then the square or product terms.
    pub(super) fn features(self, u: &[f64]) -> Vec<f64> {
        let n = u.len();
        let mut f = vec![1.0];
        f.extend_from_slice(u);
        match self {
            ModelKind::Quadratic => {
                for i in 0..n {
                    for j in i..n {
                        f.push(u[i] * u[j]);
                    }
                }
            }
            ModelKind::Separable => f.extend(u.iter().map(|x| x * x)),
            ModelKind::Linear => {}
        }
        f
    }

    /// The Hessian the fitted coefficients `c` describe.
    #[allow(clippy::needless_range_loop)] // matrix code reads best with indices
    pub(super) fn hessian(self, c: &[f64], n: usize) -> Vec<Vec<f64>> {
        let mut h = vec![vec![0.0; n]; n];
        match self {
            ModelKind::Quadratic => {
                let mut k = 1 + n;
                for i in 0..n {
                    for j in i..n {
                        if i == j {
                            h[i][i] = 2.0 * c[k];
                        } else {
                            h[i][j] = c[k];
                            h[j][i] = c[k];
                        }
                        k += 1;
                    }
                }
            }
            ModelKind::Separable => {
                for i in 0..n {
                    h[i][i] = 2.0 * c[1 + n + i];
                }
            }
            ModelKind::Linear => {}
        }
        h
    }
}

/// What the surrogate model's proposal maximises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Acq {
    /// Expected improvement over the best measured.
    Improvement,
    /// Probability of beating this researcher's own best (a kept attempt).
    AnyGain,
    /// Uncertainty with some regard for the mean: the devil's advocate's bold exploration.
    Explore,
}

/// A fitted model and the target transformation it was fitted with.
#[derive(Clone)]
pub(super) struct Model {
    pub(super) gp: Gp,
    /// Best standardised target.
    pub(super) best: f64,
    pub(super) lo: f64,
    pub(super) delta: f64,
    pub(super) mean: f64,
    pub(super) sd: f64,
}

/// The local search state of one region.
pub(super) struct Local {
    pub(super) sigma: f64,
    pub(super) since: usize,
    pub(super) evaluated: usize,
    pub(super) last_move: Option<(Vec<f64>, Vec<f64>)>,
    pub(super) just_improved: bool,
}
