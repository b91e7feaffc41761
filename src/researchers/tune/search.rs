//! The optimiser behind `builtin:tune`, for a few (2–8) parameters and tens of evaluations. Every
//! call rebuilds its whole state from the evaluated history, so a killed conference resumes with
//! the same proposals and every researcher learns from every point the conference has measured.
//!
//! When the literals have written bounds, a share of the budget (a fifth; three tenths when the
//! budget affords local searches in several regions) goes to a seeded low-discrepancy design over
//! the bounds, so the result does not hinge on where the user's start happens to be, and the seed
//! changes every run. Under `free` partitioning researcher A refines the best point meanwhile and
//! the others share the design; a lone researcher with many literals alternates the two.
//!
//! Then local searches: the good points are grouped into regions (local optima); researchers
//! refine different promising regions (a lone researcher visits them in turn), a region that a
//! few local moves did not make the best, or whose search stalled, gives way to the next (a
//! restart), and the last quarter of the budget refines the best. Around a region's best the
//! search proposes, in order of preference: an extrapolation of a move that just succeeded, (for
//! a lone researcher) a step along a literal the latest attempts all left alone, the point of
//! best expected improvement under a Gaussian-process model within a trust region, the
//! minimiser of a quadratic (or linear) model, a coordinate poll, a random step. The step size
//! follows a success rule replayed over the region's points. The devil's advocate jumps boldly
//! and contrarily or where the model knows least. A researcher that has kept nothing in its
//! round and is a few attempts into a streak proposes, in the round's last attempts, the point
//! most likely to beat its own best (so the round does not end stalled); earlier it searches on,
//! since turning careful after any three failures held a lone researcher in its first basin.
//!
//! Researchers that share literals see the same history at the same iteration (the engine runs
//! them in lock-step), so each one works out what the researchers before it propose and avoids
//! those points: the model counts them as measured, and a proposal's score fades near them (else
//! three researchers refining one region measured three almost equal points). Candidates already evaluated (or listed in `Request::avoid`) are never returned.

use std::collections::{BTreeMap, BTreeSet};

use super::gp::{expected_improvement, probability_below, Gp};
use super::literals::{
    canon, extract_params, find_all, format_like, quantize, rewrite, round_sig, written_resolution,
};
use super::{Literal, Proposal, Request};

/// How the researcher behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Normal,
    /// Bold, contrarian jumps across the range instead of careful local refinement.
    DevilsAdvocate,
}

/// splitmix64: small, seedable, good enough for search decisions.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

fn mix(parts: &[u64]) -> u64 {
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    for p in parts {
        r.0 ^= p.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        r.next_u64();
    }
    r.next_u64()
}

/// How a parameter maps to the search's normalised coordinate `z`.
#[derive(Debug, Clone, Copy)]
enum Scale {
    /// v = off + z·span
    Lin { off: f64, span: f64 },
    /// v = sign·exp(off + z·span)
    Log { sign: f64, off: f64, span: f64 },
}

struct Dim {
    lit: Literal,
    scale: Scale,
    zlo: f64,
    zhi: f64,
    vlo: f64,
    vhi: f64,
}

impl Dim {
    fn new(lit: &Literal) -> Dim {
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
    fn bounded(&self) -> bool {
        self.zlo.is_finite() && self.zhi.is_finite() && self.zhi > self.zlo
    }

    /// The direction back into the range (+1 or −1) when `z` sits on one of its bounds.
    fn inward_at(&self, z: f64) -> Option<f64> {
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

    fn z_of(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Lin { off, span } => (v - off) / span,
            Scale::Log { sign, off, span } => ((sign * v).max(f64::MIN_POSITIVE).ln() - off) / span,
        }
    }

    fn value_at(&self, z: f64) -> f64 {
        let z = z.clamp(self.zlo, self.zhi);
        let v = match self.scale {
            Scale::Lin { off, span } => off + z * span,
            Scale::Log { sign, off, span } => sign * (off + z * span).exp(),
        };
        v.clamp(self.vlo, self.vhi)
    }

    /// Round `v` to a resolution that matches the size of the move (about a tenth of it, never
    /// coarser than what the literal already writes), then to what the literal can represent.
    fn snap(&self, v: f64, step: f64) -> f64 {
        let mut res = written_resolution(&self.lit);
        if step > 0.0 && step.is_finite() {
            res = res.min(10f64.powf(step.log10().floor() - 1.0));
        }
        self.snap_to(v, res)
    }

    /// Round `v` to about a thousandth of the range (design points: the same point whatever the
    /// current value, so a researcher recognises its design points in the history).
    fn snap_design(&self, v: f64) -> f64 {
        let res = match self.scale {
            Scale::Lin { span, .. } => 10f64.powf((span * 1e-3).log10().floor()),
            Scale::Log { .. } => 10f64.powf(v.abs().max(1e-300).log10().floor() - 2.0),
        };
        self.snap_to(v, res)
    }

    fn snap_to(&self, v: f64, res: f64) -> f64 {
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

    fn quantum(&self) -> f64 {
        if self.lit.integer {
            1.0
        } else {
            written_resolution(&self.lit).min(self.lit.value.abs().max(1e-300) * 1e-5)
        }
    }
}

/// An evaluated point, seen through the current literals.
struct Point {
    /// Every literal's value.
    vals: Vec<f64>,
    /// Normalised coordinates of the active literals.
    z: Vec<f64>,
    /// Metric turned into "lower is better"; +∞ for a crash.
    y: f64,
    /// The parameters this researcher does not tune, written out.
    rest: String,
    /// Non-tuned parameters equal the current ones (so the point lies in this researcher's slice).
    in_slice: bool,
    /// Same point evaluated earlier in the history.
    duplicate: bool,
}

/// Distance in z under which two good points belong to the same region (local optimum).
const REGION: f64 = 0.1;
/// Share of the budget spent on the space-filling design; more with few literals (when the
/// budget affords local searches in several regions).
const DESIGN_SHARE: f64 = 0.2;
const DESIGN_SHARE_FEW: f64 = 0.3;
const SIGMA0: f64 = 0.06;
/// Share of each researcher's budget kept for local refinement at the end.
const LOCAL_SHARE: f64 = 0.25;
/// The model's targets are log(y − best + offset·(median − best)): differences near the best
/// count, the huge values far from it do not dominate.
const WARP_OFFSET: f64 = 0.2;
/// Half-width of the model's trust region, in step sizes.
const TRUST_WIDTH: f64 = 1.5;
/// Evaluations a local search in one region costs, per dimension (+1): how many regions the
/// budget affords.
const LOCAL_COST: f64 = 6.0;
/// Radius, in half-widths of the surrogate's search box, around a point being measured by
/// another researcher within which a proposal's score fades.
const PENDING_RADIUS: f64 = 0.5;
/// Most points the surrogate model is fitted to.
const MODEL_POINTS: usize = 150;
const SIGMA_MAX: f64 = 0.3;
const SIGMA_MIN: f64 = 1e-9;
/// A region whose step size fell below this after enough failed moves has stalled.
const SIGMA_STALLED: f64 = 0.01;
/// Attempts in a row without improvement after which a researcher may turn cautious.
const STREAK_LIMIT: u32 = 3;
/// The last attempts of a round in which a researcher that has kept nothing turns cautious.
const CAUTIOUS_TAIL: u64 = 3;

struct Search<'a> {
    req: &'a Request<'a>,
    role: Role,
    lits: Vec<Literal>,
    dims: Vec<Dim>,
    active: Vec<usize>,
    cur: Vec<f64>,
    seen: BTreeSet<String>,
    points: Vec<Point>,
    /// Centre of the local search: every literal's value, and the active ones in z.
    base: Vec<f64>,
    zc: Vec<f64>,
    sigma: f64,
    /// Moves since the centre was found.
    since: usize,
    /// Distinct points evaluated in the region (drives the cycle of coordinate polls).
    evaluated: usize,
    /// Last improving move in the region (z of the previous best, z of the new best).
    last_move: Option<(Vec<f64>, Vec<f64>)>,
    just_improved: bool,
    /// Centres of the regions being refined (z).
    regions: Vec<Vec<f64>>,
    /// Points being measured by others (`Request::avoid`), in z.
    pending: Vec<Vec<f64>>,
    cache: &'a ModelCache,
    rng: Rng,
}

/// The last model fitted, by the data it was fitted to: the researchers worked out before this
/// one usually fit the same data.
type ModelCache = std::cell::RefCell<Option<(Vec<Vec<f64>>, Vec<f64>, Model)>>;

pub(crate) fn propose(req: &Request) -> Option<Proposal> {
    let cache = ModelCache::default();
    if req.assigned || req.researchers <= 1 {
        return propose_one(req, &cache);
    }
    // The researchers before this one propose from the same history at the same time: their
    // points are pending, not to be proposed again.
    let mut pending = req.avoid.to_vec();
    for j in 0..req.researcher % req.researchers {
        let other = Request {
            researcher: j,
            avoid: &pending,
            ..req.clone()
        };
        if let Some(p) = propose_one(&other, &cache) {
            pending.push(p.params);
        }
    }
    propose_one(
        &Request {
            avoid: &pending,
            ..req.clone()
        },
        &cache,
    )
}

fn propose_one(req: &Request, cache: &ModelCache) -> Option<Proposal> {
    let mut s = Search::new(req, cache)?;
    if let Some(p) = s.design_phase() {
        return Some(p);
    }
    let restart = s.focus();
    if restart {
        if let Some(p) = s.design_point_beyond_share() {
            return Some(p);
        }
    }
    let order: Vec<Move> = match s.role {
        Role::Normal => {
            let mut v = Vec::new();
            if s.just_improved {
                v.push(Move::Extrapolate(1.5));
            }
            if s.cautious() {
                v.extend([Move::AnyGain, Move::Descent]);
            }
            if s.sharing() == 1 {
                v.push(Move::Neglected);
            }
            v.push(Move::Surrogate);
            if s.since % 3 != 2 || req.budget_left.is_some_and(|b| b <= 2) {
                v.push(Move::Model);
            }
            v.extend([Move::Poll, Move::Model, Move::Gauss, Move::Random]);
            v
        }
        Role::DevilsAdvocate => {
            let mut v = Vec::new();
            if s.just_improved {
                v.push(Move::Extrapolate(1.5));
            }
            if s.since % 2 == 0 {
                v.extend([Move::Bold, Move::Explore]);
            } else {
                v.extend([Move::Explore, Move::Bold]);
            }
            v.extend([Move::Model, Move::Poll, Move::Gauss, Move::Random]);
            v
        }
    };
    for m in order {
        if let Some(p) = s.try_move(m) {
            return Some(p);
        }
    }
    s.design_point_beyond_share()
}

#[derive(Debug, Clone, Copy)]
enum Move {
    Extrapolate(f64),
    /// A step along a literal that the latest attempts all left where the centre has it.
    Neglected,
    /// Expected improvement under the GP within the trust region.
    Surrogate,
    /// A short step down the model's slope.
    Descent,
    /// The point of the box most likely to beat this researcher's best at all.
    AnyGain,
    Model,
    Poll,
    Gauss,
    Random,
    Bold,
    Explore,
}

impl<'a> Search<'a> {
    fn new(req: &'a Request<'a>, cache: &'a ModelCache) -> Option<Search<'a>> {
        let lits = find_all(req.files);
        if lits.is_empty() {
            return None;
        }
        let dims: Vec<Dim> = lits.iter().map(Dim::new).collect();
        let active = active_literals(req, &lits, &dims);
        if active.is_empty() {
            return None;
        }
        let cur: Vec<f64> = lits.iter().map(|l| l.value).collect();
        let view = View {
            lits: &lits,
            dims: &dims,
            active: &active,
            cur: &cur,
        };
        let mut seen = BTreeSet::new();
        let points = view.points(req, &mut seen);
        seen.insert(point_key(&lits, &cur));
        let pending = view.pending(req.avoid, &mut seen);
        let zc = view.z(&cur);
        let rng = Rng(mix(&[
            req.seed,
            req.researcher as u64,
            req.history.len() as u64,
        ]));
        Some(Search {
            req,
            role: if req.advocate == Some(req.researcher) {
                Role::DevilsAdvocate
            } else {
                Role::Normal
            },
            lits,
            dims,
            active,
            base: cur.clone(),
            cur,
            seen,
            points,
            zc,
            sigma: SIGMA0,
            since: 0,
            evaluated: 0,
            last_move: None,
            just_improved: false,
            regions: Vec::new(),
            pending,
            cache,
            rng,
        })
    }

    /// Active literals with both bounds written (positions in `active`).
    fn bounded(&self) -> Vec<usize> {
        (0..self.active.len())
            .filter(|&k| self.dims[self.active[k]].bounded())
            .collect()
    }

    /// Points measured, each counted once: what a lone researcher's alternations turn on.
    fn distinct_points(&self) -> usize {
        self.points.iter().filter(|p| !p.duplicate).count()
    }

    /// Researchers that share this researcher's literals (1 under `assigned`).
    fn sharing(&self) -> usize {
        if self.req.assigned {
            1
        } else {
            self.req.researchers.max(1)
        }
    }

    /// Evaluations the search may plan with: the conference's budget for the literals this
    /// researcher tunes, else a default that grows with the dimension.
    fn budget(&self) -> f64 {
        let n = self.active.len() as f64;
        match self.req.budget_total {
            Some(t) if self.req.assigned => t as f64 / self.req.researchers.max(1) as f64,
            Some(t) => t as f64,
            None => 20.0 * n + 20.0,
        }
    }

    /// Size of the space-filling design for the bounded literals (0 when none is bounded).
    fn design_size(&self) -> usize {
        let nb = self.bounded().len();
        if nb == 0 {
            return 0;
        }
        // Exploring pays more when the budget affords refining several of the regions found.
        let share = if self.regions_affordable() >= 2 {
            DESIGN_SHARE_FEW
        } else {
            DESIGN_SHARE
        };
        let size = (self.budget() * share).round() as usize;
        size.clamp(2.min(nb + 1), 10 * nb + 10)
    }

    /// Point `i` of the design (z of the active literals): a Kronecker sequence with the
    /// generalised golden ratio (low discrepancy in every prefix and every stride), shifted by the
    /// seed. Unbounded literals stay at the centre.
    fn design_z(&self, i: usize) -> Vec<f64> {
        let bounded = self.bounded();
        let nb = bounded.len();
        let mut phi = 2.0f64;
        for _ in 0..50 {
            phi = (1.0 + phi).powf(1.0 / (nb as f64 + 1.0));
        }
        let stream = if self.req.assigned {
            self.req.researcher as u64
        } else {
            0
        };
        let mut z = self.zc.clone();
        for (j, &k) in bounded.iter().enumerate() {
            let alpha = (1.0 / phi.powi(j as i32 + 1)).fract();
            let shift = Rng(mix(&[self.req.seed, stream, j as u64, 0xD5])).unit();
            let u = (shift + (i as f64 + 1.0) * alpha).fract();
            let d = &self.dims[self.active[k]];
            z[k] = d.zlo + u * (d.zhi - d.zlo);
        }
        z
    }

    /// This researcher's place among the researchers that explore, and their number (none under
    /// `assigned` partitioning): under `free` partitioning researcher A keeps refining the best point found (so the conference
    /// keeps improving while the others explore) and the others share the design, researcher B
    /// taking points 0, R−1, 2(R−1)… of one conference-wide sequence.
    fn explorer(&self) -> Option<(usize, usize)> {
        if self.req.assigned && self.req.researchers > 1 {
            // Each researcher refines its own literals from the combined best.
            return None;
        }
        let r = self.sharing();
        match r {
            1 => Some((0, 1)),
            _ if self.req.researcher.is_multiple_of(r) => None,
            _ => Some((self.req.researcher % r - 1, r - 1)),
        }
    }

    /// The number of design points that are this researcher's, and the index of its k-th.
    fn design_share(&self) -> Option<(usize, impl Fn(usize) -> usize)> {
        let (place, explorers) = self.explorer()?;
        let size = self.design_size();
        let share = (0..size).filter(|i| i % explorers == place).count();
        Some((share, move |k| place + k * explorers))
    }

    /// Whether this researcher should refine for any gain instead of searching: it has had
    /// enough attempts in a row without improving, kept nothing in this round, and the round
    /// is near its end. The conference stops when every researcher ends `Stall rounds` rounds
    /// stuck (5 or more in a row) with nothing kept, so such a researcher tries to keep
    /// something; earlier in a round (or after a kept attempt) it searches on, since careful
    /// refinement after a few failures is what kept a lone researcher in its first basin.
    /// Without the round's progress it is cautious after the failures alone.
    fn cautious(&self) -> bool {
        let Some(&streak) = self.req.streaks.get(self.req.researcher) else {
            return false;
        };
        streak >= STREAK_LIMIT
            && self.req.round_progress.is_none_or(|(made, allowed)| {
                streak as u64 >= made && allowed.saturating_sub(made) <= CAUTIOUS_TAIL
            })
    }

    /// Whether design point `z` (as written after rounding) has been evaluated.
    fn evaluated_near(&self, z: &[f64]) -> bool {
        let written: Vec<(usize, String)> = self
            .bounded()
            .into_iter()
            .map(|k| {
                let d = &self.dims[self.active[k]];
                (k, canon(&d.lit, d.snap_design(d.value_at(z[k]))))
            })
            .collect();
        self.points.iter().any(|p| {
            p.in_slice
                && written.iter().all(|(k, w)| {
                    let i = self.active[*k];
                    canon(&self.lits[i], p.vals[i]) == *w
                })
        })
    }

    /// The next design point of this researcher's share that has not been evaluated yet.
    fn design_phase(&mut self) -> Option<Proposal> {
        if self.cautious() {
            return None;
        }
        // A lone researcher that can afford only one local search (many literals for the
        // budget) alternates: a design point, then a step refining the best.
        let t = self.distinct_points();
        if self.sharing() == 1 && self.regions_affordable() < 2 && t % 2 == 1 {
            return None;
        }
        let (share, index) = self.design_share()?;
        (0..share).find_map(|k| self.design_proposal(index(k)))
    }

    /// A design point past this researcher's share: a restart when every region has stalled.
    fn design_point_beyond_share(&mut self) -> Option<Proposal> {
        if self.design_size() == 0 {
            return None;
        }
        let (share, index) = self.design_share()?;
        (share..share + 64).find_map(|k| self.design_proposal(index(k)))
    }

    fn design_proposal(&mut self, i: usize) -> Option<Proposal> {
        let z = self.design_z(i);
        if self.evaluated_near(&z) {
            return None;
        }
        self.build_with(&z, "explore", true)
    }

    /// The last part of this researcher's budget goes to local refinement around the best.
    fn endgame(&self) -> bool {
        let per_researcher = self.budget() / self.sharing() as f64;
        self.req
            .budget_left
            .is_some_and(|b| (b as f64) <= (per_researcher * LOCAL_SHARE).max(2.0))
    }

    /// A Gaussian process fitted to every measured point of this researcher's slice (targets:
    /// log of the distance to the best, so the differences near it count; crashes as bad as the
    /// worst; standardised), and the best target. Only when every active literal has bounds.
    fn fit_model(&self) -> Option<Model> {
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
    fn surrogate(&mut self, half: Option<f64>, acq: Acq) -> Option<Proposal> {
        let model = self.fit_model()?;
        let head = self.head_target(&model);
        let target = model.best;
        let mut gp = model.gp;
        let area = self.search_box(&gp, half);
        // Points other researchers are measuring right now count as measured at the model's
        // prediction (kriging believer), so this proposal goes elsewhere.
        for z in self.pending.clone() {
            gp = gp.believing(&z)?;
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
    fn head_target(&self, model: &Model) -> f64 {
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
    fn search_box(&self, gp: &Gp, half: Option<f64>) -> SearchBox {
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
    fn surrogate_centres(&self, half: Option<f64>) -> Vec<Vec<f64>> {
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

    /// How many regions the budget can afford a local search in (about `LOCAL_COST`
    /// evaluations per dimension each).
    fn regions_affordable(&self) -> usize {
        let nd = self.active.len() as f64;
        (self.budget() / (LOCAL_COST * (nd + 1.0))).round() as usize
    }

    /// Chooses the centre of the local search and replays its region's history for the step
    /// size. Returns true when the chosen region has stalled and budget remains (restart).
    fn focus(&mut self) -> bool {
        // Regions: the best point, then the best point farther than REGION from those taken…
        let mut order: Vec<usize> = (0..self.points.len())
            .filter(|&i| {
                let p = &self.points[i];
                p.y.is_finite() && p.in_slice && !p.duplicate
            })
            .collect();
        order.sort_by(|&a, &b| {
            self.points[a]
                .y
                .total_cmp(&self.points[b].y)
                .then(a.cmp(&b))
        });
        let mut reps: Vec<usize> = Vec::new();
        for &i in &order {
            if reps
                .iter()
                .all(|&c| dist(&self.points[c].z, &self.points[i].z) > REGION)
            {
                reps.push(i);
            }
        }
        if reps.is_empty() {
            return false;
        }
        let states: Vec<Local> = reps.iter().map(|&c| self.replay(c)).collect();
        let nd = self.active.len();
        let stalled =
            |l: &Local| l.sigma <= SIGMA_STALLED && l.since >= 2 * nd + 4 || l.sigma <= 1e-6;
        let researchers = self.sharing();
        let endgame = self.endgame();
        // Regions worth refining: not stalled, and (but for the best) not yet probed — a region
        // that a few local moves did not make the best has shown its depth.
        let probe = 2 * nd + 3;
        let promising: Vec<usize> = (0..reps.len())
            .filter(|&k| !stalled(&states[k]) && (k == 0 || states[k].evaluated < probe))
            .collect();
        let mut restart = false;
        // As many regions as the budget can afford a local search in (about 6 evaluations per
        // dimension each), at most one per researcher or three.
        let k_max = self.regions_affordable().clamp(1, researchers.max(3));
        let promising: Vec<usize> = promising.into_iter().take(k_max).collect();
        self.regions = promising
            .iter()
            .map(|&k| self.points[reps[k]].z.clone())
            .collect();
        let lone_and_cautious = self.cautious() && researchers == 1;
        let pick = if endgame || self.role == Role::DevilsAdvocate || lone_and_cautious {
            0
        } else if researchers > 1 && !promising.is_empty() {
            promising[self.req.researcher % researchers % promising.len()]
        } else if !promising.is_empty() {
            // One researcher visits the promising regions in turn.
            let t = self.distinct_points();
            promising[t % promising.len()]
        } else {
            restart = true;
            0
        };
        let c = reps[pick];
        let l = states.into_iter().nth(pick).expect("region");
        self.base = self.points[c].vals.clone();
        // Literals outside this researcher's slice stay as they are in its files.
        for (i, v) in self.base.iter_mut().enumerate() {
            if !self.active.contains(&i) {
                *v = self.cur[i];
            }
        }
        self.zc = self.points[c].z.clone();
        self.sigma = l.sigma;
        self.since = l.since;
        self.evaluated = l.evaluated;
        self.last_move = l.last_move;
        self.just_improved = l.just_improved;
        restart
    }

    /// The local search state of the region around point `c`, replayed from its points in
    /// history order: success-based step control (grow after a successful move of about the step
    /// size, shrink after a failed local move), remembering the last improvement. Points where
    /// parameters this researcher does not tune changed (restarts from a combined best under
    /// `assigned`) move the reference without touching the step size.
    fn replay(&self, c: usize) -> Local {
        let base = [1.0, 1.5, 0.67][self.req.researcher % 3];
        let mut sigma: f64 = SIGMA0 * base;
        if self.role == Role::DevilsAdvocate {
            sigma *= 2.0;
        }
        let centre = &self.points[c].z;
        let region: Vec<usize> = (0..self.points.len())
            .filter(|&i| {
                let p = &self.points[i];
                !p.duplicate && dist(&p.z, centre) <= REGION
            })
            .collect();
        let mut best: Option<usize> = None;
        let mut last_move = None;
        let mut last_success_at = None;
        for &i in &region {
            let p = &self.points[i];
            let Some(b) = best else {
                if p.y.is_finite() {
                    best = Some(i);
                }
                continue;
            };
            let local = p.rest == self.points[b].rest;
            let len = dist(&p.z, &self.points[b].z);
            if p.y < self.points[b].y {
                if local {
                    sigma = sigma.max(1.6 * len).min(SIGMA_MAX);
                    last_move = Some((self.points[b].z.clone(), p.z.clone()));
                    last_success_at = Some(i);
                }
                best = Some(i);
            } else if local && len < 2.0 * sigma {
                sigma = (sigma * 0.7).max(SIGMA_MIN);
            }
        }
        let since = region.iter().filter(|&&i| i > c).count();
        let just_improved = last_success_at.is_some()
            && last_success_at == region.last().copied()
            && region.last() == Some(&c);
        Local {
            sigma,
            since,
            evaluated: region.len(),
            last_move,
            just_improved,
        }
    }

    /// The proposal move `m` makes, unless it yields no new point.
    fn try_move(&mut self, m: Move) -> Option<Proposal> {
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
        }
    }

    /// The last improving move again from the centre, `f` times as long (capped at two steps).
    fn extrapolate(&mut self, f: f64) -> Option<Proposal> {
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
    fn neglected(&mut self) -> Option<Proposal> {
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
    fn descent(&mut self) -> Option<Proposal> {
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
    fn poll(&mut self) -> Option<Proposal> {
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
    fn gauss(&mut self) -> Option<Proposal> {
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
    fn bold(&mut self) -> Option<Proposal> {
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
    fn explore(&mut self) -> Option<Proposal> {
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

    fn random_z(&mut self) -> Vec<f64> {
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

    /// The trust-region minimiser of a model fitted to the nearest evaluated points, as a move in z.
    fn model_step(&self) -> Option<Vec<f64>> {
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

    /// The measured points of this researcher's slice within five steps of the centre, nearest
    /// first, with their distance.
    fn nearest_points(&self) -> Vec<(f64, &Point)> {
        let mut pts: Vec<(f64, &Point)> = self
            .points
            .iter()
            .filter(|p| p.y.is_finite() && p.in_slice && !p.duplicate)
            .map(|p| (dist(&p.z, &self.zc), p))
            .filter(|(d, _)| *d <= 5.0 * self.sigma)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    }

    /// Least-squares coefficients of `kind` over `pts`, in coordinates around the centre scaled
    /// by `rho`, targets relative to the nearest point's.
    #[allow(clippy::needless_range_loop)] // matrix code reads best with indices
    fn fit_local_model(
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

    /// The proposal for active coordinates `z` around the centre, unless it is a point already
    /// evaluated.
    fn build(&mut self, z: &[f64], how: &str) -> Option<Proposal> {
        self.build_with(z, how, false)
    }

    /// `design`: round to the design's resolution instead of one matching the step.
    fn build_with(&mut self, z: &[f64], how: &str, design: bool) -> Option<Proposal> {
        let vals = self.values_at(z, design);
        let changed: Vec<usize> = (0..self.lits.len())
            .filter(|&i| canon(&self.lits[i], vals[i]) != canon(&self.lits[i], self.cur[i]))
            .collect();
        if changed.is_empty() {
            return None;
        }
        let key = point_key(&self.lits, &vals);
        if self.seen.contains(&key) {
            return None;
        }
        let files = self.rewritten(&changed, &vals);
        let merged: Vec<(String, String)> = self
            .req
            .files
            .iter()
            .map(|(p, t)| {
                (
                    p.clone(),
                    files.get(p).cloned().unwrap_or_else(|| t.clone()),
                )
            })
            .collect();
        let params = extract_params(&merged);
        // The rewrite must leave the set of literals intact, or the history would stop matching.
        if params.len() != self.lits.len() || self.lits.iter().any(|l| !params.contains_key(&l.key))
        {
            self.seen.insert(key);
            return None;
        }
        let written: Vec<f64> = self.lits.iter().map(|l| params[&l.key]).collect();
        if !self.seen.insert(point_key(&self.lits, &written)) {
            return None;
        }
        self.seen.insert(key);
        Some(Proposal {
            files: files.into_iter().collect(),
            description: self.describe(&changed, &vals, &params, how),
            params,
        })
    }

    /// Every literal's value at active coordinates `z`: the centre's, with each moved literal
    /// rounded; a move too small to show takes the smallest visible step instead.
    fn values_at(&self, z: &[f64], design: bool) -> Vec<f64> {
        let mut vals = self.base.clone();
        let mut moved = Vec::new();
        for (k, &i) in self.active.iter().enumerate() {
            if !z[k].is_finite() || (z[k] - self.zc[k]).abs() < 1e-12 {
                continue;
            }
            let d = &self.dims[i];
            let raw = d.value_at(z[k]);
            vals[i] = if design {
                d.snap_design(raw)
            } else {
                d.snap(raw, (raw - self.base[i]).abs())
            };
            moved.push((k, i));
        }
        let same = |vals: &[f64], other: &[f64]| {
            self.lits
                .iter()
                .enumerate()
                .all(|(i, l)| canon(l, vals[i]) == canon(l, other[i]))
        };
        if same(&vals, &self.base) {
            // The move is below the literals' resolution: take the smallest visible step.
            for (k, i) in moved {
                let d = &self.dims[i];
                let dir = if z[k] > self.zc[k] { 1.0 } else { -1.0 };
                vals[i] = d.snap(
                    (self.base[i] + dir * d.quantum()).clamp(d.vlo, d.vhi),
                    d.quantum(),
                );
            }
        }
        vals
    }

    /// The new text of each file the `changed` literals are in, rewritten with `vals`, by path.
    fn rewritten(&self, changed: &[usize], vals: &[f64]) -> BTreeMap<String, String> {
        // Rewrite each touched file, literals from the end so byte offsets stay valid.
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        let mut order = changed.to_vec();
        order.sort_by(|&a, &b| {
            (&self.lits[a].path, self.lits[b].start).cmp(&(&self.lits[b].path, self.lits[a].start))
        });
        for &i in &order {
            let lit = &self.lits[i];
            let text = files.entry(lit.path.clone()).or_insert_with(|| {
                self.req
                    .files
                    .iter()
                    .find(|(p, _)| *p == lit.path)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_default()
            });
            *text = rewrite(text, lit, vals[i]);
        }
        files
    }

    /// The proposal's one line: `tune key: before -> after, … (how [step])`.
    fn describe(
        &self,
        changed: &[usize],
        vals: &[f64],
        params: &BTreeMap<String, f64>,
        how: &str,
    ) -> String {
        let parts: Vec<String> = changed
            .iter()
            .map(|&i| {
                let l = &self.lits[i];
                let after = format_like(&l.text, quantize(l, vals[i]), l.integer);
                format!("{}: {} -> {}", short_key(&l.key), l.text, after)
            })
            .collect();
        let detail = if changed.len() == 1 && how != "explore" {
            let i = changed[0];
            let step = (params[&self.lits[i].key] - self.base[i]).abs();
            format!("{how} {}", trim_num(step))
        } else {
            how.to_string()
        };
        format!("tune {} ({detail})", parts.join(", "))
    }
}

/// The literals this researcher tunes (indices into `lits`, in order): all of them, or under
/// `assigned` partitioning its round-robin share by key order; never one that cannot move.
fn active_literals(req: &Request, lits: &[Literal], dims: &[Dim]) -> Vec<usize> {
    let n = dims.len();
    // Literals are already in key order per file; partition by sorted key order.
    let mut by_key: Vec<usize> = (0..n).collect();
    by_key.sort_by(|&a, &b| lits[a].key.cmp(&lits[b].key));
    let r = req.researchers.max(1);
    let active: Vec<usize> = if req.assigned && r > 1 {
        let mut a: Vec<usize> = if n >= r {
            (0..n)
                .filter(|i| i % r == req.researcher % r)
                .map(|i| by_key[i])
                .collect()
        } else {
            vec![by_key[req.researcher % n]]
        };
        a.sort_unstable();
        a
    } else {
        (0..n).collect()
    };
    active
        .into_iter()
        .filter(|&i| dims[i].zhi > dims[i].zlo)
        .collect()
}

/// A point's identity: every literal's value as written, joined.
fn point_key(lits: &[Literal], vals: &[f64]) -> String {
    lits.iter()
        .zip(vals)
        .map(|(l, &v)| canon(l, v))
        .collect::<Vec<_>>()
        .join("|")
}

/// Measured and pending points as this researcher sees them: through its current literals,
/// the ones it tunes in z.
struct View<'v> {
    lits: &'v [Literal],
    dims: &'v [Dim],
    active: &'v [usize],
    /// Every literal's current value.
    cur: &'v [f64],
}

impl View<'_> {
    /// Every literal's value in `params`, the current one where `params` has none.
    fn values(&self, params: &BTreeMap<String, f64>) -> Vec<f64> {
        self.lits
            .iter()
            .zip(self.cur)
            .map(|(l, &c)| params.get(&l.key).copied().unwrap_or(c))
            .collect()
    }

    /// The literals this researcher does not tune, as written.
    fn rest(&self, vals: &[f64]) -> String {
        (0..self.lits.len())
            .filter(|i| !self.active.contains(i))
            .map(|i| canon(&self.lits[i], vals[i]))
            .collect::<Vec<_>>()
            .join("|")
    }

    /// The tuned literals' normalised coordinates.
    fn z(&self, vals: &[f64]) -> Vec<f64> {
        self.active
            .iter()
            .map(|&i| self.dims[i].z_of(vals[i]))
            .collect()
    }

    /// The history's points, in order, each marked a duplicate when `seen` already holds it.
    fn points(&self, req: &Request, seen: &mut BTreeSet<String>) -> Vec<Point> {
        let cur_rest = self.rest(self.cur);
        let mut points = Vec::new();
        for t in req.history {
            let vals = self.values(&t.params);
            let rest = self.rest(&vals);
            let y = match t.metric {
                Some(m) if m.is_finite() => {
                    if req.minimize {
                        m
                    } else {
                        -m
                    }
                }
                _ => f64::INFINITY,
            };
            let duplicate = !seen.insert(point_key(self.lits, &vals));
            points.push(Point {
                z: self.z(&vals),
                vals,
                y,
                in_slice: rest == cur_rest,
                rest,
                duplicate,
            });
        }
        points
    }

    /// The points being measured (`avoid`), added to `seen`; those in this researcher's slice
    /// in z.
    fn pending(
        &self,
        avoid: &[BTreeMap<String, f64>],
        seen: &mut BTreeSet<String>,
    ) -> Vec<Vec<f64>> {
        let cur_rest = self.rest(self.cur);
        let mut pending = Vec::new();
        for p in avoid {
            let vals = self.values(p);
            seen.insert(point_key(self.lits, &vals));
            if self.rest(&vals) == cur_rest {
                pending.push(self.z(&vals));
            }
        }
        pending
    }
}

/// The box the surrogate searches, in z: per-dimension bounds and the half-widths that scale
/// its samples around the centres.
struct SearchBox {
    widths: Vec<f64>,
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl SearchBox {
    fn clamp(&self, z: Vec<f64>) -> Vec<f64> {
        z.into_iter()
            .enumerate()
            .map(|(k, v)| v.clamp(self.lower[k], self.upper[k]))
            .collect()
    }

    /// Uniform samples of the box, then Gaussian samples at three scales around each centre.
    fn candidates(&self, rng: &mut Rng, centres: &[Vec<f64>], span: f64) -> Vec<Vec<f64>> {
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
    fn polish(&self, scored: &mut [(f64, Vec<f64>)], score: impl Fn(&[f64]) -> f64, span: f64) {
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
enum ModelKind {
    /// A plane.
    Linear,
    /// A plane plus a square term per dimension.
    Separable,
    /// A full quadratic.
    Quadratic,
}

impl ModelKind {
    /// The model `count` points support in `n` dimensions, if any.
    fn for_points(count: usize, n: usize) -> Option<ModelKind> {
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
    fn terms(self, n: usize) -> usize {
        match self {
            ModelKind::Linear => 1 + n,
            ModelKind::Separable => 1 + 2 * n,
            ModelKind::Quadratic => 1 + n + n * (n + 1) / 2,
        }
    }

    /// The model's features at `u`: 1, the coordinates, then the square or product terms.
    fn features(self, u: &[f64]) -> Vec<f64> {
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
    fn hessian(self, c: &[f64], n: usize) -> Vec<Vec<f64>> {
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
enum Acq {
    /// Expected improvement over the best measured.
    Improvement,
    /// Probability of beating this researcher's own best (a kept attempt).
    AnyGain,
    /// Uncertainty with some regard for the mean: the devil's advocate's bold exploration.
    Explore,
}

/// A fitted model and the target transformation it was fitted with.
#[derive(Clone)]
struct Model {
    gp: Gp,
    /// Best standardised target.
    best: f64,
    lo: f64,
    delta: f64,
    mean: f64,
    sd: f64,
}

/// The local search state of one region.
struct Local {
    sigma: f64,
    since: usize,
    evaluated: usize,
    last_move: Option<(Vec<f64>, Vec<f64>)>,
    just_improved: bool,
}

fn short_key(key: &str) -> &str {
    key.rsplit_once(':').map_or(key, |(_, k)| k)
}

fn trim_num(v: f64) -> String {
    let s = format!("{:.6}", round_sig(v, 6));
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.into()
    }
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

fn dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

fn cap(v: &[f64], max: f64) -> Vec<f64> {
    let n = norm(v);
    if n > max {
        v.iter().map(|x| x * max / n).collect()
    } else {
        v.to_vec()
    }
}

/// Gaussian elimination with partial pivoting.
#[allow(clippy::needless_range_loop)] // matrix code reads best with indices
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-14 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for r in col + 1..n {
            let f = a[r][col] / a[col][col];
            if f != 0.0 {
                for k in col..n {
                    a[r][k] -= f * a[col][k];
                }
                b[r] -= f * b[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[allow(clippy::needless_range_loop)] // matrix code reads best with indices
fn cholesky_solve(h: &[Vec<f64>], lambda: f64, rhs: &[f64]) -> Option<Vec<f64>> {
    let n = rhs.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = h[i][j] + if i == j { lambda } else { 0.0 };
            for k in 0..j {
                s -= l[i][k] * l[j][k];
            }
            if i == j {
                if s <= 1e-12 {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (rhs[i] - s) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    Some(x)
}

/// Approximate minimiser of g·s + ½ sᵀHs over ‖s‖ ≤ delta (Levenberg-style search on λ).
fn trust_region(g: &[f64], h: &[Vec<f64>], delta: f64) -> Option<Vec<f64>> {
    let gn = norm(g);
    let neg: Vec<f64> = g.iter().map(|x| -x).collect();
    let hmax = h
        .iter()
        .flat_map(|r| r.iter())
        .fold(0.0f64, |a, &b| a.max(b.abs()));
    if hmax == 0.0 {
        if gn == 0.0 {
            return None;
        }
        return Some(neg.iter().map(|x| x * delta / gn).collect());
    }
    if let Some(s) = cholesky_solve(h, 0.0, &neg) {
        if norm(&s) <= delta {
            return Some(s);
        }
    }
    let mut hi = hmax.max(gn / delta).max(1e-12);
    let mut tries = 0;
    loop {
        match cholesky_solve(h, hi, &neg) {
            Some(s) if norm(&s) <= delta => break,
            _ => hi *= 2.0,
        }
        tries += 1;
        if tries > 200 {
            return None;
        }
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        match cholesky_solve(h, mid, &neg) {
            Some(s) if norm(&s) <= delta => hi = mid,
            _ => lo = mid,
        }
    }
    let s = cholesky_solve(h, hi, &neg)?;
    if gn == 0.0 && norm(&s) < 1e-15 {
        return None;
    }
    Some(s)
}
