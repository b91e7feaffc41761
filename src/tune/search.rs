//! The optimiser behind `builtin:tune`: a derivative-free trust-region search for a few (2–8)
//! parameters and tens of evaluations. Each call rebuilds its state from the history (step size by
//! the 1/5 success rule, the incumbent, the last successful move) and proposes, in order of
//! preference: an extrapolation of a move that just succeeded, the minimiser of a quadratic (or
//! linear) model fitted to nearby evaluated points within the trust radius, a coordinate poll, a
//! random step. The devil's advocate jumps boldly and contrarily or explores the emptiest region.
//! Candidates already evaluated are never returned.

use std::collections::{BTreeMap, BTreeSet};

use super::literals::{
    canon, extract_params, find_all, format_like, quantize, rewrite, round_sig, written_resolution,
};
use super::{Literal, Proposal, Request, Role};

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
        if self.lit.integer {
            return quantize(&self.lit, v.round().clamp(self.vlo, self.vhi));
        }
        let mut res = written_resolution(&self.lit);
        if step > 0.0 && step.is_finite() {
            res = res.min(10f64.powf(step.log10().floor() - 1.0));
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
    z: Vec<f64>,
    /// Metric turned into "lower is better"; +∞ for a crash.
    y: f64,
    key: String,
    /// The parameters this researcher does not tune, written out.
    rest: String,
    /// Non-tuned parameters equal the current ones (so the point lies in this researcher's slice).
    in_slice: bool,
    /// Same point evaluated earlier in the history.
    duplicate: bool,
}

struct Search<'a> {
    req: &'a Request<'a>,
    lits: Vec<Literal>,
    dims: Vec<Dim>,
    active: Vec<usize>,
    cur: Vec<f64>,
    zc: Vec<f64>,
    seen: BTreeSet<String>,
    points: Vec<Point>,
    sigma: f64,
    /// Moves since the incumbent was found.
    since: usize,
    /// Distinct points evaluated (drives the cycle of coordinate polls).
    evaluated: usize,
    /// Last improving move (z of the previous best, z of the new best) and whether it is the most
    /// recent evaluation and lands on the current state.
    last_move: Option<(Vec<f64>, Vec<f64>)>,
    just_improved: bool,
    rng: Rng,
}

const SIGMA_MAX: f64 = 0.3;
const SIGMA_MIN: f64 = 1e-9;

pub(crate) fn propose(req: &Request) -> Option<Proposal> {
    let mut s = Search::new(req)?;
    let order: Vec<Move> = match req.role {
        Role::Normal => {
            let mut v = Vec::new();
            if s.just_improved {
                v.push(Move::Extrapolate(1.5));
            }
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
    None
}

#[derive(Debug, Clone, Copy)]
enum Move {
    Extrapolate(f64),
    Model,
    Poll,
    Gauss,
    Random,
    Bold,
    Explore,
}

impl<'a> Search<'a> {
    fn new(req: &'a Request<'a>) -> Option<Search<'a>> {
        let lits = find_all(req.files);
        if lits.is_empty() {
            return None;
        }
        let dims: Vec<Dim> = lits.iter().map(Dim::new).collect();
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
        let active: Vec<usize> = active
            .into_iter()
            .filter(|&i| dims[i].zhi > dims[i].zlo)
            .collect();
        if active.is_empty() {
            return None;
        }
        let cur: Vec<f64> = lits.iter().map(|l| l.value).collect();
        let zc: Vec<f64> = active.iter().map(|&i| dims[i].z_of(cur[i])).collect();
        let key_of = |vals: &[f64]| -> String {
            lits.iter()
                .zip(vals)
                .map(|(l, &v)| canon(l, v))
                .collect::<Vec<_>>()
                .join("|")
        };
        let cur_key = key_of(&cur);
        let mut seen = BTreeSet::new();
        let mut points = Vec::new();
        for t in req.history {
            let vals: Vec<f64> = lits
                .iter()
                .zip(&cur)
                .map(|(l, &c)| t.params.get(&l.key).copied().unwrap_or(c))
                .collect();
            let key = key_of(&vals);
            let rest_of = |vals: &[f64]| -> String {
                (0..n)
                    .filter(|i| !active.contains(i))
                    .map(|i| canon(&lits[i], vals[i]))
                    .collect::<Vec<_>>()
                    .join("|")
            };
            let rest = rest_of(&vals);
            let in_slice = rest == rest_of(&cur);
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
            let duplicate = !seen.insert(key.clone());
            points.push(Point {
                z: active.iter().map(|&i| dims[i].z_of(vals[i])).collect(),
                y,
                key,
                rest,
                in_slice,
                duplicate,
            });
        }
        seen.insert(cur_key.clone());

        // Replay the history: success-based step control (grow after a successful move of about
        // the step size, shrink after a failed local move), remembering the last improvement.
        // Points where parameters this researcher does not tune changed (restarts from a combined
        // best under `assigned`) move the reference without touching the step size.
        let base = [1.0, 1.5, 0.67][req.researcher % 3];
        let mut sigma: f64 = 0.06 * base;
        if req.role == Role::DevilsAdvocate {
            sigma *= 2.0;
        }
        let mut best: Option<usize> = None;
        let mut last_move = None;
        let mut last_success_at = None;
        for (i, p) in points.iter().enumerate() {
            if p.duplicate {
                continue;
            }
            let Some(b) = best else {
                if p.y.is_finite() {
                    best = Some(i);
                }
                continue;
            };
            let local = p.rest == points[b].rest;
            let len = dist(&p.z, &points[b].z);
            if p.y < points[b].y {
                if local {
                    sigma = sigma.max(1.6 * len).min(SIGMA_MAX);
                    last_move = Some((points[b].z.clone(), p.z.clone()));
                    last_success_at = Some(i);
                }
                best = Some(i);
            } else if local && len < 2.0 * sigma {
                sigma = (sigma * 0.7).max(SIGMA_MIN);
            }
        }
        let inc = points.iter().rposition(|p| p.key == cur_key).or(best);
        let since = inc.map_or(points.len(), |i| {
            points[i + 1..].iter().filter(|p| !p.duplicate).count()
        });
        let last_real = points.iter().rposition(|p| !p.duplicate);
        let just_improved = last_success_at.is_some()
            && last_success_at == last_real
            && last_real.is_some_and(|i| points[i].key == cur_key);
        let evaluated = points.iter().filter(|p| !p.duplicate).count();
        let rng = Rng(mix(&[
            req.seed,
            req.researcher as u64,
            req.attempt,
            req.history.len() as u64,
        ]));
        Some(Search {
            req,
            lits,
            dims,
            active,
            cur,
            zc,
            seen,
            points,
            sigma,
            since,
            evaluated,
            last_move,
            just_improved,
            rng,
        })
    }

    fn try_move(&mut self, m: Move) -> Option<Proposal> {
        let n = self.active.len();
        match m {
            Move::Extrapolate(f) => {
                let (from, to) = self.last_move.clone()?;
                let d: Vec<f64> = to.iter().zip(&from).map(|(a, b)| (a - b) * f).collect();
                let d = cap(&d, 2.0 * self.sigma);
                let z: Vec<f64> = self.zc.iter().zip(&d).map(|(a, b)| a + b).collect();
                self.build(&z, "extrapolate")
            }
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
            Move::Poll => {
                let rot = self.req.researcher + (self.req.seed % 7) as usize;
                let flip = ((self.req.researcher / n) as u64 + (self.req.seed >> 3)) & 1 == 1;
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
            Move::Gauss => {
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
            Move::Random => {
                for _ in 0..200 {
                    let z = self.random_z();
                    if let Some(p) = self.build(&z, "random point") {
                        return Some(p);
                    }
                }
                None
            }
            Move::Bold => {
                let len = (3.0 * self.sigma).max(0.3);
                let mut dir: Vec<f64> = (0..n).map(|_| 0.7 * self.rng.normal()).collect();
                if let Some((from, to)) = &self.last_move {
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
            Move::Explore => {
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
        }
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
    #[allow(clippy::needless_range_loop)] // matrix code reads best with indices
    fn model_step(&self) -> Option<Vec<f64>> {
        let n = self.active.len();
        let mut pts: Vec<(f64, &Point)> = self
            .points
            .iter()
            .filter(|p| p.y.is_finite() && p.in_slice && !p.duplicate)
            .map(|p| (dist(&p.z, &self.zc), p))
            .filter(|(d, _)| *d <= 5.0 * self.sigma)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let full = 1 + n + n * (n + 1) / 2;
        let diag = 1 + 2 * n;
        let lin = 1 + n;
        let count = pts.len();
        let (kind, p) = if count > full + 1 {
            (2, full)
        } else if count > diag + 1 {
            (1, diag)
        } else if count > lin && n <= 2 {
            // A plane through a few points is a fair guide in 1-2 dimensions only; in more, the
            // coordinate polls explore better until a curved model can be fitted.
            (0, lin)
        } else {
            return None;
        };
        let m = count.min(p + n + 3);
        let pts = &pts[..m];
        let rho = pts.last()?.0.max(1e-12);
        let y0 = pts[0].1.y;
        let feats = |u: &[f64]| -> Vec<f64> {
            let mut f = vec![1.0];
            f.extend_from_slice(u);
            match kind {
                2 => {
                    for i in 0..n {
                        for j in i..n {
                            f.push(u[i] * u[j]);
                        }
                    }
                }
                1 => f.extend(u.iter().map(|x| x * x)),
                _ => {}
            }
            f
        };
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
            let f = feats(&u);
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
        let c = solve(ata, aty)?;
        let g: Vec<f64> = c[1..=n].to_vec();
        let mut h = vec![vec![0.0; n]; n];
        match kind {
            2 => {
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
            1 => {
                for i in 0..n {
                    h[i][i] = 2.0 * c[1 + n + i];
                }
            }
            _ => {}
        }
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

    /// The proposal for active coordinates `z`, unless it is a point already evaluated.
    fn build(&mut self, z: &[f64], how: &str) -> Option<Proposal> {
        let mut vals = self.cur.clone();
        let mut changed = Vec::new();
        let mut moved = Vec::new();
        for (k, &i) in self.active.iter().enumerate() {
            if !z[k].is_finite() || (z[k] - self.zc[k]).abs() < 1e-12 {
                continue;
            }
            let d = &self.dims[i];
            let raw = d.value_at(z[k]);
            let v = d.snap(raw, (raw - self.cur[i]).abs());
            moved.push((k, i));
            if canon(&d.lit, v) != canon(&d.lit, self.cur[i]) {
                vals[i] = v;
                changed.push(i);
            }
        }
        if changed.is_empty() {
            // The move is below the literals' resolution: take the smallest visible step.
            for (k, i) in moved {
                let d = &self.dims[i];
                let dir = if z[k] > self.zc[k] { 1.0 } else { -1.0 };
                let v = d.snap(
                    (self.cur[i] + dir * d.quantum()).clamp(d.vlo, d.vhi),
                    d.quantum(),
                );
                if canon(&d.lit, v) != canon(&d.lit, self.cur[i]) {
                    vals[i] = v;
                    changed.push(i);
                }
            }
        }
        if changed.is_empty() {
            return None;
        }
        let key: String = self
            .lits
            .iter()
            .zip(&vals)
            .map(|(l, &v)| canon(l, v))
            .collect::<Vec<_>>()
            .join("|");
        if self.seen.contains(&key) {
            return None;
        }
        // Rewrite each touched file, literals from the end so byte offsets stay valid.
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        let mut order = changed.clone();
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
        let new_key: String = self
            .lits
            .iter()
            .map(|l| canon(l, params[&l.key]))
            .collect::<Vec<_>>()
            .join("|");
        if !self.seen.insert(new_key) {
            return None;
        }
        self.seen.insert(key);
        let parts: Vec<String> = changed
            .iter()
            .map(|&i| {
                let l = &self.lits[i];
                let after = format_like(&l.text, quantize(l, vals[i]), l.integer);
                format!("{}: {} -> {}", short_key(&l.key), l.text, after)
            })
            .collect();
        let detail = if changed.len() == 1 {
            let i = changed[0];
            let step = (params[&self.lits[i].key] - self.cur[i]).abs();
            format!("{how} {}", trim_num(step))
        } else {
            how.to_string()
        };
        Some(Proposal {
            files: files.into_iter().collect(),
            description: format!("tune {} ({detail})", parts.join(", ")),
            params,
        })
    }
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
