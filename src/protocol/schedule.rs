//! Round scheduling rules: how many iterations each researcher may run in a round (so
//! `max_total_iterations` is a hard cap that no race overshoots), whether a round is the last one
//! the budgets allow (the prompt's endgame signal), and whether to pause after a round.

/// How many iterations researcher number `index` (0 for A, in letter order) of `researchers` may
/// run this round: `per_round`, unless `max_total` leaves less after the `done_before` iterations
/// of earlier rounds. What is left is shared out in letter order, A getting the remainder first.
pub fn allotment(
    per_round: u32,
    max_total: Option<u32>,
    done_before: u64,
    researchers: usize,
    index: usize,
) -> u32 {
    let Some(max) = max_total else {
        return per_round;
    };
    let left = (max as u64).saturating_sub(done_before);
    let n = researchers.max(1) as u64;
    let share = left / n + u64::from((index as u64) < left % n);
    share.min(per_round as u64) as u32
}

/// Whether the round `round` is the last one the budgets allow: it is the last of `max_rounds`,
/// or a full round of `count × per_round` iterations reaches `max_total`.
pub fn is_endgame(
    round: u32,
    max_rounds: u32,
    max_total: Option<u32>,
    done_before: u64,
    count: usize,
    per_round: u32,
) -> bool {
    round >= max_rounds
        || max_total.is_some_and(|max| done_before + count as u64 * per_round as u64 >= max as u64)
}

/// Whether to pause after round `round` (`Pause every: N`: after every N-th round).
pub fn pause_after(pause_every: Option<u32>, round: u32) -> bool {
    matches!(pause_every, Some(n) if n > 0 && round > 0 && round.is_multiple_of(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allotment_table() {
        // (per round, max total, done before, researchers) → each researcher's share, A first.
        type Case = (u32, Option<u32>, u64, usize, &'static [u32]);
        let cases: &[Case] = &[
            (3, None, 1_000, 3, &[3, 3, 3]),
            (3, Some(100), 0, 3, &[3, 3, 3]),
            // Exactly one full round left.
            (3, Some(9), 0, 3, &[3, 3, 3]),
            // Less than a round: shared out, the remainder to A then B.
            (3, Some(8), 0, 3, &[3, 3, 2]),
            (3, Some(5), 0, 3, &[2, 2, 1]),
            (3, Some(4), 0, 3, &[2, 1, 1]),
            (3, Some(2), 0, 3, &[1, 1, 0]),
            (3, Some(20), 18, 3, &[1, 1, 0]),
            // Used up (or overshot by an older log): nothing.
            (3, Some(18), 18, 3, &[0, 0, 0]),
            (3, Some(18), 25, 3, &[0, 0, 0]),
            // No researcher list yet: one share.
            (4, Some(2), 0, 0, &[2]),
        ];
        for &(per_round, max, done, n, want) in cases {
            let got: Vec<u32> = (0..want.len())
                .map(|i| allotment(per_round, max, done, n, i))
                .collect();
            assert_eq!(
                got, want,
                "{per_round} per round, max {max:?}, {done} done, {n} researchers"
            );
            if let Some(max) = max {
                assert!(
                    done + got.iter().map(|&g| g as u64).sum::<u64>() <= (max as u64).max(done)
                );
            }
        }
    }

    #[test]
    fn endgame_and_pause_tables() {
        // (round, max rounds, max total, done before, count, per round) → endgame.
        type Case = (u32, u32, Option<u32>, u64, usize, u32, bool);
        let cases: &[Case] = &[
            (1, 3, None, 0, 2, 3, false),
            (3, 3, None, 12, 2, 3, true),
            (4, 3, None, 18, 2, 3, true),
            (2, 10, Some(12), 6, 2, 3, true),
            (2, 10, Some(13), 6, 2, 3, false),
            (1, 10, Some(5), 0, 2, 3, true),
        ];
        for &(round, max_rounds, max_total, done, count, per_round, want) in cases {
            assert_eq!(
                is_endgame(round, max_rounds, max_total, done, count, per_round),
                want,
                "round {round} of {max_rounds}, max {max_total:?}, {done} done"
            );
        }
        let paused: Vec<u32> = (0..=7).filter(|&r| pause_after(Some(3), r)).collect();
        assert_eq!(paused, [3, 6]);
        let every: Vec<u32> = (0..=3).filter(|&r| pause_after(Some(1), r)).collect();
        assert_eq!(every, [1, 2, 3]);
        assert!(!(0..=10).any(|r| pause_after(None, r) || pause_after(Some(0), r)));
    }
}
