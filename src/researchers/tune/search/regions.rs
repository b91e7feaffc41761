//! Regions (local optima): which one a researcher refines, when one gives way to the next,
//! and the success rule that sets the step size, replayed over a region's points.

use super::linalg::dist;
use super::model::Local;
use super::*;

impl<'a> Search<'a> {
    /// How many regions the budget can afford a local search in (about `LOCAL_COST`
    /// evaluations per dimension each).
    pub(super) fn regions_affordable(&self) -> usize {
        let nd = self.active.len() as f64;
        (self.budget() / (LOCAL_COST * (nd + 1.0))).round() as usize
    }

    /// How many regions are refined at once: as many as the budget can afford a local search
    /// in (about `LOCAL_COST` evaluations per dimension each), at most one per researcher or
    /// three; but several researchers that can afford fewer regions than there are of them
    /// (at most three) all refine the best one. Split two to one over two regions, each local
    /// search advanced by one or two points an iteration: on a rugged function (the shifted,
    /// rotated Rastrigin of fixtures/rugged-5d, 60 evaluations) three researchers ended far
    /// behind one, whose single chain of steps the three then match (BENCHMARKS.md, issue 41).
    pub(super) fn regions_kept(&self, researchers: usize) -> usize {
        let affordable = self.regions_affordable();
        if researchers > 1 && affordable < researchers.min(3) {
            return 1;
        }
        affordable.clamp(1, researchers.max(3))
    }

    /// Chooses the centre of the local search and replays its region's history for the step
    /// size. Returns true when the chosen region has stalled and budget remains (restart).
    pub(super) fn focus(&mut self) -> bool {
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
        let k_max = self.regions_kept(researchers);
        let promising: Vec<usize> = promising.into_iter().take(k_max).collect();
        self.regions = promising
            .iter()
            .map(|&k| self.points[reps[k]].z.clone())
            .collect();
        let lone_and_cautious = self.cautious() && researchers == 1;
        let pick = if endgame || self.role == Role::DevilsAdvocate || lone_and_cautious {
            0
        } else if self.req.chosen_head {
            // The region of the head the conference chose (the files' point).
            (0..reps.len())
                .min_by(|&a, &b| {
                    let da = dist(&self.points[reps[a]].z, &self.zc);
                    let db = dist(&self.points[reps[b]].z, &self.zc);
                    da.total_cmp(&db).then(a.cmp(&b))
                })
                .unwrap_or(0)
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
    pub(super) fn replay(&self, c: usize) -> Local {
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
}

#[cfg(test)]
mod tests {
    use super::super::{ModelCache, Search};
    use crate::researchers::tune::{Request, Trial};

    /// The regions refined at once for `researchers` sharing `n` bounded literals, with a
    /// conference budget of `total` attempts.
    fn kept(n: usize, researchers: usize, total: u64) -> usize {
        let text: String = (1..=n)
            .map(|i| format!("X{i} = 0.5  # tune: [-5, 5]\n"))
            .collect();
        let files = vec![("train.py".to_string(), text)];
        let history: Vec<Trial> = Vec::new();
        let req = Request {
            files: &files,
            history: &history,
            avoid: &[],
            minimize: true,
            seed: 1,
            researcher: 0,
            researchers,
            assigned: false,
            advocate: None,
            streaks: &[],
            budget_left: None,
            budget_total: Some(total),
            round_progress: None,
            chosen_head: false,
        };
        let cache = ModelCache::default();
        Search::new(&req, &cache)
            .expect("literals")
            .regions_kept(researchers)
    }

    #[test]
    fn several_researchers_split_over_regions_only_when_each_has_one() {
        // 5 literals, 54 attempts: two regions affordable. One researcher visits both; three
        // do not split two to one, they all refine the best.
        assert_eq!(kept(5, 1, 54), 2);
        assert_eq!(kept(5, 3, 54), 1);
        assert_eq!(kept(5, 4, 54), 1);
        // Two researchers, two regions: one each.
        assert_eq!(kept(5, 2, 54), 2);
        // 200 attempts afford five regions: one per researcher, at most three.
        assert_eq!(kept(5, 3, 200), 3);
        assert_eq!(kept(5, 1, 200), 3);
        // The 2-D fixture's shape (three regions for three researchers) and the 6-D one's (one
        // region) are as before.
        assert_eq!(kept(2, 3, 54), 3);
        assert_eq!(kept(6, 3, 54), 1);
    }
}
