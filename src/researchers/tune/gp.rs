//! A small Gaussian-process model for the global phase of `builtin:tune`: with a few tens of
//! evaluations and a handful of bounded parameters, a GP fitted to everything measured so far
//! (Matérn 5/2 kernel, one length scale per parameter chosen by marginal likelihood) tells where
//! the next evaluation is expected to improve most (expected improvement). Everything here is
//! deterministic: no randomness, fixed search grids.

/// A fitted model over points in the unit cube (standardised targets).
#[derive(Clone)]
pub(crate) struct Gp {
    x: Vec<Vec<f64>>,
    /// Lower Cholesky factor of K + noise·I.
    chol: Vec<Vec<f64>>,
    /// (K + noise·I)⁻¹ y
    alpha: Vec<f64>,
    y: Vec<f64>,
    ls: Vec<f64>,
    noise: f64,
}

fn matern52(a: &[f64], b: &[f64], ls: &[f64]) -> f64 {
    let r2: f64 = a
        .iter()
        .zip(b)
        .zip(ls)
        .map(|((p, q), l)| ((p - q) / l).powi(2))
        .sum();
    let r = (5.0 * r2).sqrt();
    (1.0 + r + r * r / 3.0) * (-r).exp()
}

/// Cholesky factor of a symmetric positive definite matrix, or None.
#[allow(clippy::needless_range_loop)] // matrix code reads best with indices
fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i][j];
            for k in 0..j {
                s -= l[i][k] * l[j][k];
            }
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solves L v = b for lower-triangular L.
fn forward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut v = vec![0.0; b.len()];
    for i in 0..b.len() {
        let s: f64 = (0..i).map(|k| l[i][k] * v[k]).sum();
        v[i] = (b[i] - s) / l[i][i];
    }
    v
}

/// Solves Lᵀ x = v.
fn backward(l: &[Vec<f64>], v: &[f64]) -> Vec<f64> {
    let n = v.len();
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * x[k]).sum();
        x[i] = (v[i] - s) / l[i][i];
    }
    x
}

impl Gp {
    fn build(x: &[Vec<f64>], y: &[f64], ls: &[f64], noise: f64) -> Option<(Gp, f64)> {
        let n = x.len();
        let k: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| matern52(&x[i], &x[j], ls) + if i == j { noise } else { 0.0 })
                    .collect()
            })
            .collect();
        let chol = cholesky(&k)?;
        let v = forward(&chol, y);
        let alpha = backward(&chol, &v);
        let logdet: f64 = chol.iter().enumerate().map(|(i, r)| r[i].ln()).sum();
        let lml = -0.5 * v.iter().map(|a| a * a).sum::<f64>() - logdet;
        Some((
            Gp {
                x: x.to_vec(),
                chol,
                alpha,
                y: y.to_vec(),
                ls: ls.to_vec(),
                noise,
            },
            lml,
        ))
    }

    /// Fits length scales and noise by marginal likelihood over fixed grids: an isotropic scale
    /// first, then each dimension's scale in turn. `y` must be standardised.
    pub(crate) fn fit(x: &[Vec<f64>], y: &[f64]) -> Option<Gp> {
        let d = x.first()?.len();
        let mut best: Option<(Gp, f64)> = None;
        let consider = |cand: Option<(Gp, f64)>, best: &mut Option<(Gp, f64)>| {
            if let Some((g, l)) = cand {
                if l.is_finite() && best.as_ref().is_none_or(|(_, b)| l > *b + 1e-9) {
                    *best = Some((g, l));
                }
            }
        };
        let root = (d as f64).sqrt();
        for noise in [1e-6, 1e-3, 1e-2, 0.1] {
            for l in [0.05, 0.1, 0.2, 0.4, 0.8, 1.6] {
                consider(Gp::build(x, y, &vec![l * root; d], noise), &mut best);
            }
        }
        for _ in 0..2 {
            for j in 0..d {
                for f in [0.25, 0.5, 2.0, 4.0] {
                    let (ls, noise) = {
                        let g = &best.as_ref()?.0;
                        let mut ls = g.ls.clone();
                        ls[j] = (ls[j] * f).clamp(0.01, 20.0);
                        (ls, g.noise)
                    };
                    consider(Gp::build(x, y, &ls, noise), &mut best);
                }
            }
        }
        best.map(|(g, _)| g)
    }

    /// The fitted length scale of each dimension.
    pub(crate) fn length_scales(&self) -> &[f64] {
        &self.ls
    }

    /// Posterior mean and standard deviation at `z`.
    pub(crate) fn predict(&self, z: &[f64]) -> (f64, f64) {
        let k: Vec<f64> = self.x.iter().map(|p| matern52(p, z, &self.ls)).collect();
        let mean: f64 = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward(&self.chol, &k);
        let var = (1.0 - v.iter().map(|a| a * a).sum::<f64>()).max(1e-12);
        (mean, var.sqrt())
    }

    /// The model with one more observation at `z` equal to its own prediction ("kriging
    /// believer"): what another researcher is probably measuring there stops looking attractive.
    pub(crate) fn believing(&self, z: &[f64]) -> Option<Gp> {
        let mut x = self.x.clone();
        let mut y = self.y.clone();
        y.push(self.predict(z).0);
        x.push(z.to_vec());
        Gp::build(&x, &y, &self.ls, self.noise).map(|(g, _)| g)
    }
}

/// Expected improvement below `best` of a normal prediction (minimisation).
pub(crate) fn expected_improvement(mean: f64, sd: f64, best: f64) -> f64 {
    if sd <= 0.0 {
        return (best - mean).max(0.0);
    }
    let u = (best - mean) / sd;
    sd * (u * norm_cdf(u) + norm_pdf(u))
}

/// Probability that a normal prediction is below `target`.
pub(crate) fn probability_below(mean: f64, sd: f64, target: f64) -> f64 {
    if sd <= 0.0 {
        return if mean < target { 1.0 } else { 0.0 };
    }
    norm_cdf((target - mean) / sd)
}

fn norm_pdf(u: f64) -> f64 {
    (-0.5 * u * u).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Standard normal CDF (Abramowitz–Stegun 7.1.26 erf approximation, |error| < 1.5e-7).
fn norm_cdf(u: f64) -> f64 {
    let x = u.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if u >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}
