//! The search space: a literal as a dimension (its scale, bounds and the unit cube `z` the
//! search works in), an evaluated point seen through it, and the seeded random numbers.

use crate::researchers::tune::literals::values::{quantize, written_resolution};
use crate::researchers::tune::Literal;

/// splitmix64: small, seedable, good enough for search decisions.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub(super) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(super) fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

pub(super) fn mix(parts: &[u64]) -> u64 {
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    for p in parts {
        r.0 ^= p.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        r.next_u64();
    }
    r.next_u64()
}

/// How a parameter maps to the search's normalised coordinate `z`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scale {
    /// v = off + z·span
    Lin { off: f64, span: f64 },
    /// v = sign·exp(off + z·span)
    Log { sign: f64, off: f64, span: f64 },
}

pub(super) struct Dim {
    pub(super) lit: Literal,
    pub(super) scale: Scale,
    pub(super) zlo: f64,
    pub(super) zhi: f64,
    pub(super) vlo: f64,
    pub(super) vhi: f64,
}

impl Dim {
    pub(super) fn new(lit: &Literal) -> Dim {
        let v = lit.value;
        let inf = f64::INFINITY;
        let (scale, zlo, zhi, vlo, vhi) = match (lit.lower, lit.upper) {
            (Some(lo), Some(hi)) if lo > 0.0 && hi / lo >= 20.0 => (
                Scale::Log {
                    sign: 1.0,
                    off: lo.ln(),
                    span: (hi / lo).ln(),
                },
                0.0,
                1.0,
                lo,
                hi,
            ),
            (Some(lo), Some(hi)) => (
                Scale::Lin {
                    off: lo,
                    span: if hi > lo { hi - lo } else { 1.0 },
                },
                0.0,
                if hi > lo { 1.0 } else { 0.0 },
                lo,
                hi,
            ),
            // Without written bounds the sign is kept; magnitudes move multiplicatively
            // (one unit of z = two decades).
            _ if v != 0.0 => {
                let sign = v.signum();
                let min = if lit.integer { 1.0 } else { f64::MIN_POSITIVE };
                let (vlo, vhi) = if sign > 0.0 { (min, inf) } else { (-inf, -min) };
                (
                    Scale::Log {
                        sign,
                        off: 0.0,
                        span: 2.0 * std::f64::consts::LN_10,
                    },
                    -inf,
                    inf,
                    vlo,
                    vhi,
                )
            }
            _ => (
                Scale::Lin {
                    off: 0.0,
                    span: if lit.integer { 10.0 } else { 1.0 },
                },
                0.0,
                inf,
                0.0,
                inf,
            ),
        };
        Dim {
            lit: lit.clone(),
            scale,
            zlo,
            zhi,
            vlo,
            vhi,
        }
    }

    /// Both bounds written: the design phase can cover the range.
    pub(super) fn bounded(&self) -> bool {
        self.zlo.is_finite() && self.zhi.is_finite() && self.zhi > self.zlo
    }

    /// The direction back into the range (+1 or −1) when `z` sits on one of its bounds.
    pub(super) fn inward_at(&self, z: f64) -> Option<f64> {
        if self.zhi <= self.zlo {
            None
        } else if (z - self.zhi).abs() < 1e-9 {
            Some(-1.0)
        } else if (z - self.zlo).abs() < 1e-9 {
            Some(1.0)
        } else {
            None
        }
    }

    pub(super) fn z_of(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Lin { off, span } => (v - off) / span,
            Scale::Log { sign, off, span } => ((sign * v).max(f64::MIN_POSITIVE).ln() - off) / span,
        }
    }

    pub(super) fn value_at(&self, z: f64) -> f64 {
        let z = z.clamp(self.zlo, self.zhi);
        let v = match self.scale {
            Scale::Lin { off, span } => off + z * span,
            Scale::Log { sign, off, span } => sign * (off + z * span).exp(),
        };
        v.clamp(self.vlo, self.vhi)
    }

    /// Round `v` to a resolution that matches the size of the move (about a tenth of it, never
    /// coarser than what the literal already writes), then to what the literal can represent.
    pub(super) fn snap(&self, v: f64, step: f64) -> f64 {
        let mut res = written_resolution(&self.lit);
        if step > 0.0 && step.is_finite() {
            res = res.min(10f64.powf(step.log10().floor() - 1.0));
        }
        self.snap_to(v, res)
    }

    /// Round `v` to about a thousandth of the range (design points: the same point whatever the
    /// current value, so a researcher recognises its design points in the history).
    pub(super) fn snap_design(&self, v: f64) -> f64 {
        let res = match self.scale {
            Scale::Lin { span, .. } => 10f64.powf((span * 1e-3).log10().floor()),
            Scale::Log { .. } => 10f64.powf(v.abs().max(1e-300).log10().floor() - 2.0),
        };
        self.snap_to(v, res)
    }

    pub(super) fn snap_to(&self, v: f64, res: f64) -> f64 {
        if self.lit.integer {
            return quantize(&self.lit, v.round().clamp(self.vlo, self.vhi));
        }
        let mut r = (v / res).round() * res;
        if !r.is_finite() {
            r = v;
        }
        let r = quantize(&self.lit, r.clamp(self.vlo, self.vhi));
        if r < self.vlo || r > self.vhi {
            quantize(&self.lit, v.clamp(self.vlo, self.vhi))
        } else {
            r
        }
    }

    pub(super) fn quantum(&self) -> f64 {
        if self.lit.integer {
            1.0
        } else {
            written_resolution(&self.lit).min(self.lit.value.abs().max(1e-300) * 1e-5)
        }
    }
}

/// An evaluated point, seen through the current literals.
pub(super) struct Point {
    /// Every literal's value.
    pub(super) vals: Vec<f64>,
    /// Normalised coordinates of the active literals.
    pub(super) z: Vec<f64>,
    /// Metric turned into "lower is better"; +∞ for a crash.
    pub(super) y: f64,
    /// The parameters this researcher does not tune, written out.
    pub(super) rest: String,
    /// Non-tuned parameters equal the current ones (so the point lies in this researcher's slice).
    pub(super) in_slice: bool,
    /// Same point evaluated earlier in the history.
    pub(super) duplicate: bool,
}
