//! The space-filling design: a seeded low-discrepancy sequence over the bounds, its share of
//! the budget, and who measures it.

use super::dims::mix;
use super::*;
use crate::researchers::tune::Proposal;

impl<'a> Search<'a> {
    /// Size of the space-filling design for the bounded literals (0 when none is bounded).
    pub(super) fn design_size(&self) -> usize {
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
    pub(super) fn design_z(&self, i: usize) -> Vec<f64> {
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
    /// `assigned` partitioning): under `free` partitioning every researcher shares the design,
    /// researcher k taking points k, k+R, k+2R… of one conference-wide sequence, so that it is
    /// measured in a fraction of the iterations. Researcher A used to refine the best point
    /// meanwhile (the conference kept improving while the others explored); its steps refined a
    /// basin the design had not yet shown to be the best, and the design took the others a
    /// whole round at 200 evaluations: on the rugged fixtures three researchers fell behind one
    /// (BENCHMARKS.md, "every researcher on the design").
    pub(super) fn explorer(&self) -> Option<(usize, usize)> {
        if self.req.assigned && self.req.researchers > 1 {
            // Each researcher refines its own literals from the combined best.
            return None;
        }
        let r = self.sharing();
        Some((self.req.researcher % r, r))
    }

    /// The number of design points that are this researcher's, and the index of its k-th.
    pub(super) fn design_share(&self) -> Option<(usize, impl Fn(usize) -> usize)> {
        let (place, explorers) = self.explorer()?;
        let size = self.design_size();
        let share = (0..size).filter(|i| i % explorers == place).count();
        Some((share, move |k| place + k * explorers))
    }
}

impl<'a> Search<'a> {
    /// The next design point of this researcher's share that has not been evaluated yet.
    pub(super) fn design_phase(&mut self) -> Option<Proposal> {
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
    pub(super) fn design_point_beyond_share(&mut self) -> Option<Proposal> {
        if self.design_size() == 0 {
            return None;
        }
        let (share, index) = self.design_share()?;
        (share..share + 64).find_map(|k| self.design_proposal(index(k)))
    }

    pub(super) fn design_proposal(&mut self, i: usize) -> Option<Proposal> {
        let z = self.design_z(i);
        if self.evaluated_near(&z) {
            return None;
        }
        self.build_with(&z, "explore", true)
    }
}

#[cfg(test)]
mod tests {
    use crate::researchers::tune::{Request, Trial};
    use std::collections::BTreeMap;

    /// How each of three researchers sharing five bounded literals proposes its first point,
    /// with a conference budget of `total` attempts: whether it explores (a design point).
    fn explores(total: u64) -> Vec<bool> {
        let text: String = (1..=5)
            .map(|i| format!("X{i} = 0.5  # tune: [-5, 5]\n"))
            .collect();
        let files = vec![("train.py".to_string(), text)];
        let baseline = Trial {
            params: (1..=5)
                .map(|i| (format!("train.py:X{i}"), 0.5))
                .collect::<BTreeMap<_, _>>(),
            metric: Some(10.0),
        };
        let history = vec![baseline];
        (0..3)
            .map(|researcher| {
                let req = Request {
                    researcher,
                    researchers: 3,
                    budget_total: Some(total),
                    budget_left: Some(total / 3),
                    ..crate::researchers::tune::tests::req(&files, &history, 1, 0)
                };
                let p = super::super::propose(&req).expect("a proposal");
                p.description.ends_with("(explore)")
            })
            .collect()
    }

    #[test]
    fn every_researcher_measures_the_design_first() {
        // Researcher A does not refine the start meanwhile, whether the budget affords a region
        // each (198 attempts) or one region for the three (54): the design is measured in a
        // third of the iterations (rugged-5d at 54 and 198 evaluations, BENCHMARKS.md).
        assert_eq!(explores(198), [true, true, true]);
        assert_eq!(explores(54), [true, true, true]);
    }
}
