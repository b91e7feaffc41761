//! The stop rules, checked after each round in the original skill's order: target reached →
//! converged; spent tokens or money, max total iterations, max rounds, time budget →
//! budget_stop (every budget used up is named, the spend first); every researcher stalled for
//! `Stall rounds` consecutive rounds → stalled; no progress beyond the noise for as many rounds
//! (at least 2) → converged on a plateau; qualitative scores all ≥ 8 for 2 rounds → converged.

use crate::model::FinalStatus;

/// A decision to stop.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    /// The final report's status.
    pub status: FinalStatus,
    /// A stable token for scripts (`target_reached`, `metric_plateau`, `max_rounds`, …), as the
    /// seed's `conference.converged` payload has it.
    pub token: &'static str,
    /// The sentence users read.
    pub why: String,
}

fn stop(status: FinalStatus, token: &'static str, why: impl Into<String>) -> Option<Stop> {
    Some(Stop {
        status,
        token,
        why: why.into(),
    })
}

/// Everything the stop rules read after a round, as plain data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AfterRound {
    /// The best metric reaches the target.
    pub target_reached: bool,
    /// The token or cost budget is used up: its token and sentence.
    pub spend_used: Option<(&'static str, String)>,
    pub total_iterations: u64,
    pub max_total_iterations: Option<u32>,
    /// The round that just completed.
    pub round: u32,
    pub max_rounds: u32,
    /// The time budget is used up: its sentence.
    pub time_used: Option<String>,
    /// Qualitative mode (scores, no metric plateau).
    pub qualitative: bool,
    /// `Stall rounds` (None: `never`).
    pub stall_rounds: Option<u32>,
    /// Consecutive rounds in which every researcher was stalled.
    pub stalled_rounds: u32,
    /// Consecutive rounds without progress beyond the noise.
    pub plateau_rounds: u32,
    /// Consecutive rounds with every qualitative score ≥ 8.
    pub high_score_rounds: u32,
}

/// Whether the conference stops after the round, and why; the first rule that applies decides.
pub fn decide(r: &AfterRound) -> Option<Stop> {
    if r.target_reached {
        return stop(FinalStatus::Converged, "target_reached", "target reached");
    }
    if let Some(s) = budgets(r) {
        return Some(s);
    }
    let plateau = (!r.qualitative).then_some(r.plateau_rounds);
    if let Some(s) = no_progress(r.stall_rounds, r.stalled_rounds, plateau) {
        return Some(s);
    }
    if r.qualitative && r.high_score_rounds >= 2 {
        return stop(
            FinalStatus::Converged,
            "quality_reached",
            "all scores >= 8/10 for 2 rounds",
        );
    }
    None
}

/// Every budget used up, spent money or tokens first (the reason a user most needs to see): the
/// first one's token, every one's sentence.
fn budgets(r: &AfterRound) -> Option<Stop> {
    let mut used: Vec<(&'static str, String)> = r.spend_used.iter().cloned().collect();
    if let Some(max) = r.max_total_iterations {
        if r.total_iterations >= max as u64 {
            used.push((
                "max_total_iterations",
                format!("max_total_iterations ({max}) reached"),
            ));
        }
    }
    if r.round >= r.max_rounds {
        used.push((
            "max_rounds",
            format!("max_rounds ({}) reached", r.max_rounds),
        ));
    }
    if let Some(why) = &r.time_used {
        used.push(("time_budget", why.clone()));
    }
    let (token, _) = used.first()?;
    let why: Vec<&str> = used.iter().map(|(_, w)| w.as_str()).collect();
    stop(FinalStatus::BudgetStop, token, why.join("; "))
}

/// The rules for rounds without progress, over the counts: every researcher stalled for
/// `stall_rounds` consecutive rounds → stalled; the best not moving beyond the noise for as many
/// rounds (at least the seed's 2) → converged on a plateau (`plateau_rounds` is None in
/// qualitative mode). `stall_rounds` None (`never`) disables both.
pub fn no_progress(
    stall_rounds: Option<u32>,
    stalled_rounds: u32,
    plateau_rounds: Option<u32>,
) -> Option<Stop> {
    let n = stall_rounds?.max(1);
    if stalled_rounds >= n {
        return stop(
            FinalStatus::Stalled,
            "all_researchers_stuck",
            format!(
                "every researcher stalled (stuck, nothing kept) for {stalled_rounds} consecutive round(s) (Stall rounds: {n})"
            ),
        );
    }
    let needed = n.max(2);
    if plateau_rounds.is_some_and(|p| p >= needed) {
        return stop(
            FinalStatus::Converged,
            "metric_plateau",
            format!("metric plateau: no progress beyond the noise threshold for {needed} rounds"),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_without_progress_table() {
        // (Stall rounds, consecutive all-stalled rounds, plateau rounds) → stop token.
        type Case = (Option<u32>, u32, Option<u32>, Option<&'static str>);
        let cases: &[Case] = &[
            (Some(2), 0, Some(0), None),
            // One stalled round is a signal, not a stop (the repro).
            (Some(2), 1, Some(1), None),
            (Some(2), 2, Some(2), Some("all_researchers_stuck")),
            (Some(2), 0, Some(2), Some("metric_plateau")),
            (Some(2), 1, Some(2), Some("metric_plateau")),
            (Some(3), 2, Some(2), None),
            (Some(3), 3, Some(3), Some("all_researchers_stuck")),
            (Some(3), 0, Some(3), Some("metric_plateau")),
            // A plateau needs at least the seed's 2 rounds even with Stall rounds: 1.
            (Some(1), 0, Some(1), None),
            (Some(1), 1, Some(1), Some("all_researchers_stuck")),
            // Stall rounds: 0 counts as 1.
            (Some(0), 1, Some(0), Some("all_researchers_stuck")),
            // Qualitative mode has no metric plateau.
            (Some(2), 0, None, None),
            // never: the never-stop loop.
            (None, 50, Some(50), None),
        ];
        for &(setting, stalled, plateau, want) in cases {
            let got = no_progress(setting, stalled, plateau).map(|s| s.token);
            assert_eq!(got, want, "{setting:?} {stalled} {plateau:?}");
        }
    }

    /// A round that triggers no rule: round 1 of 10, budgets far, progress made.
    fn quiet() -> AfterRound {
        AfterRound {
            round: 1,
            max_rounds: 10,
            total_iterations: 9,
            max_total_iterations: Some(100),
            stall_rounds: Some(2),
            ..Default::default()
        }
    }

    /// Each rule alone, at its threshold and one short of it.
    #[test]
    fn each_rule_at_its_threshold() {
        type Case = (
            &'static str,
            fn(&mut AfterRound),
            Option<(FinalStatus, &'static str)>,
        );
        let cases: &[Case] = &[
            ("nothing", |_| {}, None),
            (
                "target",
                |r| r.target_reached = true,
                Some((FinalStatus::Converged, "target_reached")),
            ),
            ("iterations one short", |r| r.total_iterations = 99, None),
            (
                "iterations at the cap",
                |r| r.total_iterations = 100,
                Some((FinalStatus::BudgetStop, "max_total_iterations")),
            ),
            (
                "no iteration cap",
                |r| {
                    r.max_total_iterations = None;
                    r.total_iterations = 10_000
                },
                None,
            ),
            ("rounds one short", |r| r.round = 9, None),
            (
                "rounds at the cap",
                |r| r.round = 10,
                Some((FinalStatus::BudgetStop, "max_rounds")),
            ),
            (
                "time",
                |r| r.time_used = Some("time_budget (1h) used".into()),
                Some((FinalStatus::BudgetStop, "time_budget")),
            ),
            (
                "cost",
                |r| r.spend_used = Some(("cost_budget", "cost".into())),
                Some((FinalStatus::BudgetStop, "cost_budget")),
            ),
            ("stalled one short", |r| r.stalled_rounds = 1, None),
            (
                "stalled",
                |r| r.stalled_rounds = 2,
                Some((FinalStatus::Stalled, "all_researchers_stuck")),
            ),
            ("plateau one short", |r| r.plateau_rounds = 1, None),
            (
                "plateau",
                |r| r.plateau_rounds = 2,
                Some((FinalStatus::Converged, "metric_plateau")),
            ),
            (
                "qualitative plateau is no stop",
                |r| {
                    r.qualitative = true;
                    r.plateau_rounds = 5
                },
                None,
            ),
            (
                "scores one round",
                |r| {
                    r.qualitative = true;
                    r.high_score_rounds = 1
                },
                None,
            ),
            (
                "scores two rounds",
                |r| {
                    r.qualitative = true;
                    r.high_score_rounds = 2
                },
                Some((FinalStatus::Converged, "quality_reached")),
            ),
            (
                "metric mode ignores scores",
                |r| r.high_score_rounds = 5,
                None,
            ),
        ];
        for (what, set, want) in cases {
            let mut r = quiet();
            set(&mut r);
            let got = decide(&r).map(|s| (s.status, s.token));
            assert_eq!(got, *want, "{what}");
        }
    }

    /// When several rules apply, the first in order decides.
    #[test]
    fn the_rules_apply_in_order() {
        let mut all = quiet();
        all.target_reached = true;
        all.spend_used = Some(("token_budget", "token_budget (2M) used".into()));
        all.total_iterations = 100;
        all.round = 10;
        all.time_used = Some("time_budget (1h) used".into());
        all.stalled_rounds = 5;
        all.plateau_rounds = 5;
        let mut order = Vec::new();
        let mut r = all.clone();
        while let Some(s) = decide(&r) {
            order.push(s.token);
            match s.token {
                "target_reached" => r.target_reached = false,
                "token_budget" => r.spend_used = None,
                "max_total_iterations" => r.total_iterations = 0,
                "max_rounds" => r.round = 1,
                "time_budget" => r.time_used = None,
                "all_researchers_stuck" => r.stalled_rounds = 0,
                "metric_plateau" => r.plateau_rounds = 0,
                other => panic!("{other}"),
            }
        }
        assert_eq!(
            order,
            [
                "target_reached",
                "token_budget",
                "max_total_iterations",
                "max_rounds",
                "time_budget",
                "all_researchers_stuck",
                "metric_plateau"
            ]
        );
        // Every used budget is named in the sentence, the spend first.
        let mut budgets = all;
        budgets.target_reached = false;
        let s = decide(&budgets).unwrap();
        assert_eq!(s.token, "token_budget");
        assert_eq!(
            s.why,
            "token_budget (2M) used; max_total_iterations (100) reached; max_rounds (10) reached; time_budget (1h) used"
        );
    }
}
