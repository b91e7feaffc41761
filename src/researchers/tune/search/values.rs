//! Points as the literals' written values: a candidate built from `z` and rewritten into the
//! files, its identity, what it changed, and a researcher's view of the measured points.

use std::collections::{BTreeMap, BTreeSet};

use super::dims::{Dim, Point};
use super::*;
use crate::researchers::tune::literals::values::{canon, format_like, quantize, round_sig};
use crate::researchers::tune::literals::{extract_params, rewrite};
use crate::researchers::tune::{Literal, Proposal, Request};

impl<'a> Search<'a> {
    /// The proposal for active coordinates `z` around the centre, unless it is a point already
    /// evaluated.
    pub(super) fn build(&mut self, z: &[f64], how: &str) -> Option<Proposal> {
        self.build_with(z, how, false)
    }

    /// `design`: round to the design's resolution instead of one matching the step.
    pub(super) fn build_with(&mut self, z: &[f64], how: &str, design: bool) -> Option<Proposal> {
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
    pub(super) fn values_at(&self, z: &[f64], design: bool) -> Vec<f64> {
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
    pub(super) fn rewritten(&self, changed: &[usize], vals: &[f64]) -> BTreeMap<String, String> {
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
    pub(super) fn describe(
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

/// A point's identity: every literal's value as written, joined.
pub(super) fn point_key(lits: &[Literal], vals: &[f64]) -> String {
    lits.iter()
        .zip(vals)
        .map(|(l, &v)| canon(l, v))
        .collect::<Vec<_>>()
        .join("|")
}

/// Measured and pending points as this researcher sees them: through its current literals,
/// the ones it tunes in z.
pub(super) struct View<'v> {
    pub(super) lits: &'v [Literal],
    pub(super) dims: &'v [Dim],
    pub(super) active: &'v [usize],
    /// Every literal's current value.
    pub(super) cur: &'v [f64],
}

impl View<'_> {
    /// Every literal's value in `params`, the current one where `params` has none.
    pub(super) fn values(&self, params: &BTreeMap<String, f64>) -> Vec<f64> {
        self.lits
            .iter()
            .zip(self.cur)
            .map(|(l, &c)| params.get(&l.key).copied().unwrap_or(c))
            .collect()
    }

    /// The literals this researcher does not tune, as written.
    pub(super) fn rest(&self, vals: &[f64]) -> String {
        (0..self.lits.len())
            .filter(|i| !self.active.contains(i))
            .map(|i| canon(&self.lits[i], vals[i]))
            .collect::<Vec<_>>()
            .join("|")
    }

    /// The tuned literals' normalised coordinates.
    pub(super) fn z(&self, vals: &[f64]) -> Vec<f64> {
        self.active
            .iter()
            .map(|&i| self.dims[i].z_of(vals[i]))
            .collect()
    }

    /// The history's points, in order, each marked a duplicate when `seen` already holds it.
    pub(super) fn points(&self, req: &Request, seen: &mut BTreeSet<String>) -> Vec<Point> {
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
    pub(super) fn pending(
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

pub(super) fn short_key(key: &str) -> &str {
    key.rsplit_once(':').map_or(key, |(_, k)| k)
}

pub(super) fn trim_num(v: f64) -> String {
    let s = format!("{:.6}", round_sig(v, 6));
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.into()
    }
}
