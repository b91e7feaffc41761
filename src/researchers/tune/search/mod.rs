//! The optimiser behind `builtin:tune`, for a few (2–8) parameters and tens of evaluations. Every
//! call rebuilds its whole state from the evaluated history, so a killed conference resumes with
//! the same proposals and every researcher learns from every point the conference has measured.
//!
//! When the literals have written bounds, a share of the budget (a fifth; three tenths when the
//! budget affords local searches in several regions) goes to a seeded low-discrepancy design over
//! the bounds, so the result does not hinge on where the user's start happens to be, and the seed
//! changes every run. Under `free` partitioning the researchers share the design; a lone
//! researcher with many literals alternates it with refining the best point.
//!
//! Then local searches: the good points are grouped into regions (local optima); researchers
//! refine different promising regions when the budget affords one each, else all the best (a
//! lone researcher visits them in turn), a region that a
//! few local moves did not make the best, or whose search stalled, gives way to the next (a
//! restart), and the last quarter of the budget refines the best. Around a region's best the
//! search proposes, in order of preference: an extrapolation of a move that just succeeded,
//! (every third point) the minimum of a quadratic trend fitted to every point measured (`trend`:
//! on a rugged function it points past the local minima to the bottom of the trend), (for
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

//!
//! The folder: the search's state and its order of proposals here; `dims` (the space), `design`,
//! `regions`, `moves`, `model` (the surrogates), `trend`, `values` (points as written values),
//! `linalg`.

mod design;
mod dims;
mod linalg;
mod model;
mod moves;
mod regions;
mod trend;
mod values;

use dims::{mix, Dim, Point, Rng};
use model::Model;
use std::collections::BTreeSet;
use values::{point_key, View};

use crate::researchers::tune::literals::find_all;
use crate::researchers::tune::literals::values::canon;
use crate::researchers::tune::{Literal, Proposal, Request};

/// How the researcher behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Normal,
    /// Bold, contrarian jumps across the range instead of careful local refinement.
    DevilsAdvocate,
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
/// Most pending points the model believes measured (the latest ones); the rest still fade the
/// score near them. Each believed point refits the model, so with a hundred researchers
/// believing every one made each proposal take seconds (bench/many_researchers.py).
const BELIEVED_PENDING: usize = 16;
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
    propose_batch(req, 1).pop()
}

/// Up to `q` distinct points for this researcher to measure at once (`- sweep: q`). Each is
/// proposed as the next one would be were the points before it measured: they are pending, so
/// the surrogate believes each at its own prediction (kriging believer) and a candidate's score
/// fades near them (local penalisation), the design hands out its next points, and no move
/// returns a point already taken. This is how researchers that share literals already split
/// one iteration among themselves, so a batch of q from one researcher spreads like q
/// researchers would; the researchers before this one propose their batches first.
pub(crate) fn propose_batch(req: &Request, q: usize) -> Vec<Proposal> {
    let cache = ModelCache::default();
    // The researchers before this one propose from the same history at the same time: their
    // points are pending, not to be proposed again.
    let before = match req.assigned || req.researchers <= 1 {
        true => 0,
        false => req.researcher % req.researchers,
    };
    let mut pending = req.avoid.to_vec();
    let mut mine = Vec::new();
    for j in (0..before).chain([req.researcher]) {
        for k in 0..q {
            let one = Request {
                researcher: j,
                avoid: &pending,
                ..req.clone()
            };
            let Some(p) = propose_one(&one, &cache, BATCH_STRIDES[k % BATCH_STRIDES.len()]) else {
                break;
            };
            pending.push(p.params.clone());
            if j == req.researcher {
                mine.push(p);
            }
        }
    }
    mine
}

/// The step size of a batch's k-th point, in the region's step sizes: the first is the point
/// one iteration would measure, the others look farther and nearer, so that a batch also
/// advances when the way to the optimum is long (four points at one step size made a quarter
/// of the steps of one point per iteration).
const BATCH_STRIDES: [f64; 8] = [1.0, 2.5, 0.5, 5.0, 1.5, 0.3, 3.5, 0.8];

fn propose_one(req: &Request, cache: &ModelCache, stride: f64) -> Option<Proposal> {
    let mut s = Search::new(req, cache)?;
    if let Some(p) = s.design_phase() {
        return Some(p);
    }
    let restart = s.focus();
    s.sigma = (s.sigma * stride).clamp(SIGMA_MIN, SIGMA_MAX.max(s.sigma));
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
            if s.trend_turn() {
                v.push(Move::Trend);
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
    /// The minimum of a quadratic trend over every point measured.
    Trend,
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
}

impl<'a> Search<'a> {
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
}

impl<'a> Search<'a> {
    /// The last part of this researcher's budget goes to local refinement around the best.
    fn endgame(&self) -> bool {
        let per_researcher = self.budget() / self.sharing() as f64;
        self.req
            .budget_left
            .is_some_and(|b| (b as f64) <= (per_researcher * LOCAL_SHARE).max(2.0))
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
