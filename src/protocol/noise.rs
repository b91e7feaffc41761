//! The peer review's verdict on a finding, as a pure function of measured numbers.
//!
//! An evaluation can be noisy (a training run, a benchmark on a busy machine) and now and then
//! wild (one reading far off). The review therefore measures the round start and the finding in
//! interleaved runs (start, finding, start, finding, …, so drift hits both alike), compares their
//! medians (one wild reading moves a median little), and accepts only a gain beyond the larger of
//! the minimum delta and the noise: the spread of repeated readings of one tree (the baseline's
//! noise runs, the review's own readings), scaled to what a difference of two medians of n runs
//! may show by chance. A gain that reproduces every time is validated even when one reading was
//! wild; a one-time lucky reading of the researcher's does not reproduce and never reaches best.
//!
//! With one reading per tree (Noise runs: 1) there is no noise measurement: then the researcher's
//! reading and the review's reading of the same tree are the only two readings, and when they
//! disagree beyond the tolerance the evaluation is noisy: the finding needs a gain beyond that
//! disagreement, and the review says so and suggests a number of noise runs.

use crate::model::Direction;

/// How many standard errors of the difference of two medians a gain must exceed.
const Z: f64 = 3.0;
/// A median of n normal readings has about 1.25× the standard error of their mean.
const MEDIAN_EFFICIENCY: f64 = 1.25;
/// MAD × this estimates a normal standard deviation.
const MAD_TO_SD: f64 = 1.4826;

/// Median of the values (None for none).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        // Halves first: the sum of two readings near f64::MAX overflows.
        v[n / 2 - 1] / 2.0 + v[n / 2] / 2.0
    })
}

/// `v` when it is a finite number, else `or`: what is stored must read back (JSON has no
/// infinity; serde writes `null` and then fails to read it as a number).
pub fn finite_or(v: f64, or: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        or
    }
}

/// A robust standard deviation of one reading, pooled over groups of repeated readings of one
/// tree each: 1.4826 × the median absolute deviation of every reading from its group's median.
/// Groups of one reading say nothing about noise; None when no group has two.
pub fn pooled_noise_sd(groups: &[&[f64]]) -> Option<f64> {
    let mut residuals = Vec::new();
    for g in groups.iter().filter(|g| g.len() >= 2) {
        let m = median(g)?;
        let mut r: Vec<f64> = g.iter().map(|x| (x - m).abs()).collect();
        // An odd group's median reading is its own median: that zero says nothing.
        if g.len() % 2 == 1 {
            if let Some(i) = r.iter().position(|&x| x == 0.0) {
                r.remove(i);
            }
        }
        residuals.extend(r);
    }
    Some(MAD_TO_SD * median(&residuals)?)
}

/// What a difference of two medians of `n` readings each may show by chance at noise `sd`.
pub fn noise_margin(sd: f64, n: usize) -> f64 {
    Z * MEDIAN_EFFICIENCY * sd * (2.0 / n.max(1) as f64).sqrt()
}

/// Noise runs that would resolve a gain of `gain` at noise `sd` (at least 3, at most 20).
pub fn suggested_runs(sd: f64, gain: f64) -> u32 {
    if gain <= 0.0 || !sd.is_finite() {
        return 5;
    }
    let n = 2.0 * (Z * MEDIAN_EFFICIENCY * sd / gain).powi(2);
    (n.ceil() as u32).clamp(3, 20)
}

/// Everything the verdict depends on.
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    pub direction: Direction,
    /// The round start's readings, interleaved with `runs` (start_runs[i] just before runs[i]).
    pub start_runs: &'a [f64],
    /// The finding's readings in the review.
    pub runs: &'a [f64],
    /// The researcher's own reading of the finding, and the gain it claimed.
    pub claimed: Option<f64>,
    pub gain_claimed: f64,
    /// Min consensus delta (or its default).
    pub min_delta: f64,
    /// Repeated readings of the baseline (noise runs at the start); empty or one when not measured.
    pub baseline_runs: &'a [f64],
}

/// The review's judgement of one finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// validated | challenged | overturned
    pub verdict: &'static str,
    pub start: f64,
    pub reproduced: f64,
    /// Gain of the finding's median over the start's median (positive = better).
    pub gain: f64,
    /// The gain needed: max(min delta, noise margin, disagreement when it is the only noise).
    pub needed: f64,
    /// Noise of one reading, when repeated readings measured it.
    pub noise_sd: Option<f64>,
    /// The researcher's and the review's readings of the same tree disagree by this much, beyond
    /// the tolerance, with no other noise measurement: the evaluation is noisy.
    pub noisy: Option<f64>,
    /// When noisy: the noise runs that would resolve the claimed gain.
    pub suggested_runs: Option<u32>,
    pub reasoning: String,
}

/// Pairs (start, finding) in which the finding reads better.
fn wins(e: &Evidence) -> (usize, usize) {
    let pairs = e.start_runs.len().min(e.runs.len());
    let won = (0..pairs)
        .filter(|&i| e.direction.gain(e.runs[i], e.start_runs[i]) > 0.0)
        .count();
    (won, pairs)
}

/// Why a gain of `gain` (not beyond `needed`) is challenged, naming what decided: Min consensus
/// delta (a gain that reproduces but is too small to count), the noise the readings measured,
/// or the disagreement of the researcher's and the review's readings.
fn too_small(
    e: &Evidence,
    gain: f64,
    needed: f64,
    noise_sd: Option<f64>,
    n: usize,
    noisy: Option<f64>,
) -> String {
    let runs = e.runs.len();
    let margin = noise_sd.map(|sd| noise_margin(sd, n));
    let measured = match margin {
        Some(m) => format!("the measured noise allows {m:.6}"),
        None => "no noise was measured".into(),
    };
    if noisy == Some(needed) && needed > e.min_delta {
        format!("Gain {gain:.6} (median of {runs} interleaved run(s)) is within the disagreement of the researcher's and the review's readings of the same snapshot ({needed:.6}); it may be noise.")
    } else if margin.is_some_and(|m| m >= e.min_delta && m > 0.0) {
        format!("Gain {gain:.6} (median of {runs} interleaved run(s)) is within the measured noise ({needed:.6}, above Min consensus delta {:.6}); it may be noise.", e.min_delta)
    } else {
        format!("Gain {gain:.6} (median of {runs} interleaved run(s)) does not exceed Min consensus delta ({:.6}), the smallest gain that counts ({measured}).", e.min_delta)
    }
}

/// The verdict on a finding that ran (the caller handles crashes and frozen paths).
pub fn judge(e: &Evidence) -> Judgement {
    let start = median(e.start_runs).unwrap_or(f64::NAN);
    let reproduced = median(e.runs).unwrap_or(f64::NAN);
    let gain = e.direction.gain(reproduced, start);
    let noise_sd = pooled_noise_sd(&[e.baseline_runs, e.start_runs, e.runs]);
    let n = e.runs.len().min(e.start_runs.len()).max(1);
    let mut needed = e
        .min_delta
        .max(noise_sd.map_or(0.0, |sd| noise_margin(sd, n)));
    let disagreement = e.claimed.map(|c| (c - reproduced).abs());
    let noisy = disagreement.filter(|&d| noise_sd.is_none() && d > needed);
    if let Some(d) = noisy {
        needed = needed.max(d);
    }
    let (won, pairs) = wins(e);
    // One wild reading may lose its pair; with fewer than 3 pairs none may.
    let consistent = won + usize::from(pairs >= 3) >= pairs;
    let runs = e.runs.len();
    let (verdict, mut reasoning) = if !gain.is_finite() || gain <= 0.0 {
        (
            "overturned",
            format!("No gain on re-run: median {reproduced:.6} against {start:.6} at the round start over {runs} interleaved run(s)."),
        )
    } else if gain <= needed {
        ("challenged", too_small(e, gain, needed, noise_sd, n, noisy))
    } else if !consistent {
        (
            "challenged",
            format!("Gain {gain:.6} is not consistent: the finding read better in only {won} of {pairs} interleaved pairs."),
        )
    } else {
        (
            "validated",
            format!("Gain {gain:.6} reproduces (median of {runs} interleaved run(s), better in {won} of {pairs} pairs), beyond the tolerance {needed:.6}."),
        )
    };
    // Two readings of one tree differing by d: one reading's noise is about d / √2.
    let suggested = noisy.map(|d| {
        suggested_runs(
            d / std::f64::consts::SQRT_2,
            e.gain_claimed.abs().max(e.min_delta),
        )
    });
    if let (Some(d), Some(c), Some(n)) = (noisy, e.claimed, suggested) {
        reasoning.push_str(&format!(
            " The evaluation is noisy: the researcher read {c:.6} and the review {reproduced:.6} for the same snapshot (a difference of {d:.6}); set Noise runs to {n} or more."
        ));
    }
    let judgement = Judgement {
        verdict,
        start,
        reproduced,
        gain,
        needed,
        noise_sd,
        noisy,
        suggested_runs: suggested,
        reasoning,
    };
    overflowed(judgement)
}

/// A judgement whose arithmetic left finite numbers (readings near `f64::MAX` make differences
/// and margins infinite) is overturned with the reason, and holds only finite numbers.
fn overflowed(j: Judgement) -> Judgement {
    let numbers = [j.start, j.reproduced, j.gain, j.needed];
    let optional = [j.noise_sd, j.noisy];
    if numbers
        .iter()
        .chain(optional.iter().flatten())
        .all(|v| v.is_finite())
    {
        return j;
    }
    Judgement {
        verdict: "overturned",
        start: finite_or(j.start, 0.0),
        reproduced: finite_or(j.reproduced, 0.0),
        gain: finite_or(j.gain, 0.0),
        needed: finite_or(j.needed, 0.0),
        noise_sd: j.noise_sd.filter(|v| v.is_finite()),
        noisy: j.noisy.filter(|v| v.is_finite()),
        suggested_runs: None,
        reasoning: format!(
            "The readings cannot be compared: the gain or the noise tolerance is not a finite \
             number (readings {:e} at the round start, {:e} on re-run).",
            j.start, j.reproduced
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Maximize, Minimize};

    #[test]
    fn medians_and_pooled_noise() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[1.0, 1.0, 100.0]), Some(1.0));
        assert_eq!(median(&[f64::MAX, f64::MAX]), Some(f64::MAX));
        assert_eq!(median(&[-1.7e308, -1.7e308]), Some(-1.7e308));
        assert_eq!(pooled_noise_sd(&[&[1.0], &[2.0]]), None);
        // One wild reading does not blow the noise up.
        let sd = pooled_noise_sd(&[&[10.0, 10.1, 9.9, 10.0, 40.0]]).unwrap();
        assert!(sd < 0.2, "{sd}");
        assert_eq!(pooled_noise_sd(&[&[5.0, 5.0, 5.0]]), Some(0.0));
    }

    fn ev<'a>(
        direction: Direction,
        start_runs: &'a [f64],
        runs: &'a [f64],
        claimed: Option<f64>,
        baseline_runs: &'a [f64],
    ) -> Evidence<'a> {
        let gain_claimed = claimed.map_or(0.0, |c| direction.gain(c, start_runs[0]));
        Evidence {
            direction,
            start_runs,
            runs,
            claimed,
            gain_claimed,
            min_delta: 0.01,
            baseline_runs,
        }
    }

    /// The verdict table: (what it pins, evidence, verdict, noisy?).
    #[test]
    fn verdict_table() {
        let base = [10.0, 10.1, 9.9, 10.05, 9.95];
        let cases: Vec<(&str, Evidence, &str, bool)> = vec![
            (
                "a gain that reproduces every time",
                ev(
                    Minimize,
                    &[10.0, 10.1, 9.9, 10.0, 10.05],
                    &[9.0, 9.1, 8.9, 9.0, 9.05],
                    Some(9.0),
                    &base,
                ),
                "validated",
                false,
            ),
            (
                "…even when one start reading was wild",
                ev(
                    Minimize,
                    &[10.0, 10.1, 4.0, 10.0, 10.05],
                    &[9.0, 9.1, 8.9, 9.0, 9.05],
                    Some(9.0),
                    &base,
                ),
                "validated",
                false,
            ),
            (
                "…or one of its own readings was",
                ev(
                    Minimize,
                    &[10.0, 10.1, 9.9, 10.0, 10.05],
                    &[9.0, 9.1, 30.0, 9.0, 9.05],
                    Some(9.0),
                    &base,
                ),
                "validated",
                false,
            ),
            (
                "…or the researcher's reading was lucky beyond it",
                ev(
                    Minimize,
                    &[10.0, 10.1, 9.9, 10.0, 10.05],
                    &[9.0, 9.1, 8.9, 9.0, 9.05],
                    Some(5.0),
                    &base,
                ),
                "validated",
                false,
            ),
            (
                "a lucky reading of no change does not reproduce",
                ev(
                    Minimize,
                    &[10.0, 10.1, 9.9, 10.0, 10.05],
                    &[10.05, 9.95, 10.1, 9.9, 10.0],
                    Some(7.0),
                    &base,
                ),
                "overturned",
                false,
            ),
            (
                "a gain inside the noise is challenged",
                ev(
                    Minimize,
                    &[10.0, 10.1, 9.9, 10.0, 10.05],
                    &[9.95, 10.0, 9.85, 9.95, 10.0],
                    Some(9.0),
                    &base,
                ),
                "challenged",
                false,
            ),
            (
                "a gain in two pairs of five is inconsistent",
                ev(
                    Maximize,
                    &[1.0, 1.0, 1.0, 1.0, 1.0],
                    &[2.0, 2.0, 2.0, 0.5, 0.5],
                    None,
                    &[],
                ),
                "challenged",
                false,
            ),
            (
                "a deterministic evaluation needs only the minimum delta",
                ev(Maximize, &[1.0], &[1.02], Some(1.02), &[1.0]),
                "validated",
                false,
            ),
            (
                "…and a gain below it is challenged",
                ev(Maximize, &[1.0], &[1.005], Some(1.005), &[1.0]),
                "challenged",
                false,
            ),
            (
                "one reading each: a disagreeing researcher reading flags noise",
                ev(Minimize, &[10.0], &[9.9], Some(7.0), &[10.0]),
                "challenged",
                true,
            ),
            (
                "one reading each: a gain beyond the disagreement still counts",
                ev(Minimize, &[10.0], &[8.0], Some(7.6), &[10.0]),
                "validated",
                true,
            ),
            (
                "no gain at all",
                ev(
                    Maximize,
                    &[1.0, 1.0, 1.0],
                    &[0.9, 0.9, 0.9],
                    Some(2.0),
                    &[1.0, 1.0, 1.0],
                ),
                "overturned",
                false,
            ),
        ];
        for (what, e, verdict, noisy) in cases {
            let j = judge(&e);
            assert_eq!(j.verdict, verdict, "{what}: {j:?}");
            assert_eq!(j.noisy.is_some(), noisy, "{what}: {j:?}");
            if noisy {
                assert!(j.reasoning.contains("set Noise runs to"), "{what}: {j:?}");
            }
        }
    }

    /// A challenged gain names what decided: Min consensus delta, the measured noise, or the
    /// disagreement of two readings of one snapshot.
    #[test]
    fn a_challenged_gain_names_the_setting_that_decided() {
        let cases = [
            (
                ev(Maximize, &[1.0], &[1.005], Some(1.005), &[1.0]),
                "does not exceed Min consensus delta (0.010000)",
            ),
            (
                ev(Maximize, &[1.0, 1.0, 1.0], &[1.005, 1.005, 1.005], None, &[1.0, 1.0]),
                "does not exceed Min consensus delta (0.010000), the smallest gain that counts (the measured noise allows 0.000000)",
            ),
            (
                ev(
                    Minimize,
                    &[10.0, 10.1, 9.9, 10.0, 10.05],
                    &[9.95, 10.0, 9.85, 9.95, 10.0],
                    Some(9.0),
                    &[10.0, 10.1, 9.9, 10.05, 9.95],
                ),
                "is within the measured noise",
            ),
            (
                ev(Minimize, &[10.0], &[9.9], Some(7.0), &[10.0]),
                "within the disagreement of the researcher's and the review's readings",
            ),
        ];
        for (e, words) in cases {
            let j = judge(&e);
            assert_eq!(j.verdict, "challenged", "{j:?}");
            assert!(j.reasoning.contains(words), "{words}: {}", j.reasoning);
        }
        let exact = judge(&ev(Maximize, &[1.0], &[1.005], Some(1.005), &[1.0]));
        assert!(
            !exact.reasoning.contains("may be noise"),
            "{}",
            exact.reasoning
        );
    }

    #[test]
    fn margins_shrink_with_runs_and_suggestions_are_bounded() {
        assert!(noise_margin(0.1, 10) < noise_margin(0.1, 3));
        assert_eq!(noise_margin(0.0, 5), 0.0);
        assert_eq!(suggested_runs(0.01, 1.0), 3);
        assert_eq!(suggested_runs(1.0, 0.01), 20);
        let n = suggested_runs(0.2, 0.5);
        assert!((3..=20).contains(&n), "{n}");
    }
}
