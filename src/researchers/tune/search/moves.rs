//! The local moves around a region's best, in order of preference: an extrapolation, a step
//! along a neglected literal, the model's step, a coordinate poll, a random step; and the
//! devil's advocate's bold and exploring jumps.

use super::dims::{mix, Point};
use super::linalg::{cap, dist, norm};
use super::model::Acq;
use super::*;
use crate::researchers::tune::Proposal;

impl<'a> Search<'a> {
    /// The proposal move `m` makes, unless it yields no new point.
    pub(super) fn try_move(&mut self, m: Move) -> Option<Proposal> {
        match m {
            Move::Extrapolate(f) => self.extrapolate(f),
            Move::Neglected => self.neglected(),
            Move::Surrogate => {
                let half = (TRUST_WIDTH * self.sigma).min(0.5);
                let acq = if self.role == Role::DevilsAdvocate {
                    Acq::Explore
                } else {
                    Acq::Improvement
                };
                self.surrogate(Some(half), acq)
            }
            Move::AnyGain => self.surrogate(None, Acq::AnyGain),
            Move::Descent => self.descent(),
            Move::Model => {
                let s = self.model_step()?;
                for f in [1.0, 0.5, 0.25] {
                    let z: Vec<f64> = self.zc.iter().zip(&s).map(|(a, b)| a + f * b).collect();
                    if let Some(p) = self.build(&z, "model step") {
                        return Some(p);
                    }
                }
                None
            }
            Move::Poll => self.poll(),
            Move::Gauss => self.gauss(),
            Move::Random => {
                for _ in 0..200 {
                    let z = self.random_z();
                    if let Some(p) = self.build(&z, "random point") {
                        return Some(p);
                    }
                }
                None
            }
            Move::Bold => self.bold(),
            Move::Explore => self.explore(),
            Move::Trend => self.trend(),
        }
    }

    /// The last improving move again from the centre, `f` times as long (capped at two steps).
    pub(super) fn extrapolate(&mut self, f: f64) -> Option<Proposal> {
        let (from, to) = self.last_move.clone()?;
        let d: Vec<f64> = to.iter().zip(&from).map(|(a, b)| (a - b) * f).collect();
        let d = cap(&d, 2.0 * self.sigma);
        let z: Vec<f64> = self.zc.iter().zip(&d).map(|(a, b)| a + b).collect();
        self.build(&z, "extrapolate")
    }

    /// A step of the region's size along the first literal that each of the latest 2n attempts
    /// (n literals) left at the centre's value: inward when the centre sits on a bound, else in
    /// a direction that alternates. A lone researcher's models, fitted to points that share a
    /// value, keep proposing it: the 6-D fixture's worst runs held `d` at its bound for most of
    /// their attempts while the other five literals moved, and ended in the chain's other
    /// basin. Once stepped, the literal has moved within the latest 2n, so at most one such
    /// step per 2n attempts and literal. A lone researcher's only: with three, a similar step
    /// (off a bound) made the real benchmark worse (BENCHMARKS.md, 28 Nov).
    pub(super) fn neglected(&mut self) -> Option<Proposal> {
        let n = self.active.len();
        let latest: Vec<&Point> = (self.points.iter().rev())
            .filter(|p| p.in_slice && !p.duplicate)
            .take(2 * n)
            .collect();
        if latest.len() < 2 * n {
            return None;
        }
        let still: Vec<usize> = (0..n)
            .filter(|&k| {
                let i = self.active[k];
                latest.iter().all(|p| p.vals[i] == self.base[i])
            })
            .collect();
        let alternate = if self.distinct_points().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        let step = self.sigma.max(SIGMA_STALLED);
        for k in still {
            let first = self.dims[self.active[k]]
                .inward_at(self.zc[k])
                .unwrap_or(alternate);
            for dir in [first, -first] {
                let mut z = self.zc.clone();
                z[k] += dir * step;
                if let Some(p) = self.build(&z, "neglected") {
                    return Some(p);
                }
            }
        }
        None
    }

    /// A short step down the GP model's slope at the centre (shorter ones if that is taken).
    pub(super) fn descent(&mut self) -> Option<Proposal> {
        let n = self.active.len();
        let gp = self.fit_model()?.gp;
        let h = 1e-4;
        let g: Vec<f64> = (0..n)
            .map(|k| {
                let mut a = self.zc.clone();
                let mut b = self.zc.clone();
                a[k] += h;
                b[k] -= h;
                (gp.predict(&a).0 - gp.predict(&b).0) / (2.0 * h)
            })
            .collect();
        let gn = norm(&g);
        if gn <= 0.0 || !gn.is_finite() {
            return None;
        }
        for f in [0.3, 0.1, 0.03] {
            let z: Vec<f64> = self
                .zc
                .iter()
                .zip(&g)
                .map(|(c, gi)| c - f * self.sigma * gi / gn)
                .collect();
            if let Some(p) = self.build(&z, "descent") {
                return Some(p);
            }
        }
        None
    }

    /// A coordinate poll: one step along one axis, cycling through axes and directions.
    pub(super) fn poll(&mut self) -> Option<Proposal> {
        let n = self.active.len();
        let rot = (mix(&[self.req.seed, self.req.researcher as u64, 0x90]) % n as u64) as usize;
        let flip = mix(&[self.req.seed, self.req.researcher as u64, 0xF1]) & 1 == 1;
        for j in 0..2 * n {
            let t = self.evaluated + j;
            let d = (t / 2 + rot) % n;
            let plus = t.is_multiple_of(2) ^ flip;
            let mut z = self.zc.clone();
            z[d] += if plus { self.sigma } else { -self.sigma };
            if let Some(p) = self.build(&z, "step") {
                return Some(p);
            }
        }
        None
    }

    /// A random Gaussian step from the centre, growing until one is new.
    pub(super) fn gauss(&mut self) -> Option<Proposal> {
        let n = self.active.len();
        let mut scale = self.sigma;
        for _ in 0..40 {
            let z: Vec<f64> = self
                .zc
                .iter()
                .map(|&c| c + scale * self.rng.normal() / (n as f64).sqrt())
                .collect();
            if let Some(p) = self.build(&z, "random step") {
                return Some(p);
            }
            scale = (scale * 1.3).min(1.0);
        }
        None
    }

    /// The devil's advocate's long jump: a random direction, leaning against the last move
    /// that worked.
    pub(super) fn bold(&mut self) -> Option<Proposal> {
        let n = self.active.len();
        let len = (3.0 * self.sigma).max(0.3);
        let mut dir: Vec<f64> = (0..n).map(|_| 0.7 * self.rng.normal()).collect();
        if let Some((from, to)) = &self.last_move {
            // Contrarian: against the direction that last worked.
            let d: Vec<f64> = to.iter().zip(from).map(|(a, b)| b - a).collect();
            let norm = norm(&d);
            if norm > 0.0 {
                for (x, di) in dir.iter_mut().zip(&d) {
                    *x += di / norm;
                }
            }
        }
        let norm = norm(&dir).max(1e-12);
        let z: Vec<f64> = self
            .zc
            .iter()
            .zip(&dir)
            .map(|(c, d)| c + len * d / norm)
            .collect();
        self.build(&z, "bold jump")
    }

    /// The random point, of 32, farthest from every measured point and the centre.
    pub(super) fn explore(&mut self) -> Option<Proposal> {
        let mut best: Option<(f64, Vec<f64>)> = None;
        for _ in 0..32 {
            let z = self.random_z();
            let dmin = self
                .points
                .iter()
                .map(|p| dist(&p.z, &z))
                .fold(dist(&self.zc, &z), f64::min);
            if best.as_ref().is_none_or(|(b, _)| dmin > *b) {
                best = Some((dmin, z));
            }
        }
        self.build(&best?.1, "explore")
    }

    pub(super) fn random_z(&mut self) -> Vec<f64> {
        let zc = self.zc.clone();
        self.active
            .iter()
            .zip(zc)
            .map(|(&i, c)| {
                let d = &self.dims[i];
                if d.zlo.is_finite() && d.zhi.is_finite() {
                    d.zlo + self.rng.unit() * (d.zhi - d.zlo)
                } else {
                    c + self.rng.unit() - 0.5
                }
            })
            .collect()
    }
}
