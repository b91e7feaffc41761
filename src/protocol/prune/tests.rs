use super::*;
use Direction::{Maximize, Minimize};

const REF: &[Point] = &[(100, 2.0), (200, 1.5), (300, 1.2)];

fn rule(
    reference: &[Point],
    warmup: u32,
    margin: f64,
    direction: Option<Direction>,
    early: bool,
) -> Rule<'_> {
    Rule {
        reference,
        warmup,
        margin,
        noise: 0.0,
        direction,
        early,
    }
}

#[test]
fn the_reference_between_and_past_its_readings() {
    let cases: &[(&[Point], u64, Option<f64>)] = &[
        (REF, 100, Some(2.0)),
        (REF, 150, Some(1.75)),
        (REF, 250, Some(1.35)),
        (REF, 300, Some(1.2)),
        // Past its last reading: its last reading.
        (REF, 1000, Some(1.2)),
        // Before its first: nothing to compare with.
        (REF, 50, None),
        (&[], 100, None),
        // Printed out of order: sorted by step.
        (&[(200, 1.5), (100, 2.0)], 150, Some(1.75)),
        // A reading that is not a number is left out.
        (&[(100, 2.0), (200, f64::NAN), (300, 1.0)], 200, Some(1.5)),
    ];
    for &(reference, step, want) in cases {
        assert_eq!(
            reference_at(reference, step),
            want,
            "{reference:?} at {step}"
        );
    }
}

#[test]
fn decision_table() {
    type Case = (
        &'static [Point],
        u32,
        f64,
        Option<Direction>,
        Option<Pruned>,
    );
    let pruned = |step, value, reference| {
        Some(Pruned {
            step,
            value,
            reference,
        })
    };
    let cases: &[Case] = &[
        // Worse than the reference by more than the margin after the warmup: pruned.
        (
            &[(100, 2.5), (200, 2.0)],
            2,
            0.1,
            Some(Minimize),
            pruned(200, 2.0, 1.5),
        ),
        // Fewer readings than the warmup: never, however bad.
        (&[(100, 9.0)], 2, 0.1, Some(Minimize), None),
        (&[(100, 9.0), (200, 9.0)], 3, 0.1, Some(Minimize), None),
        // A warmup of 0 still needs one reading to compare.
        (&[], 0, 0.1, Some(Minimize), None),
        (&[(100, 9.0)], 0, 0.1, Some(Minimize), pruned(100, 9.0, 2.0)),
        // Able to end within the margin of the reference's end (1.2): goes on.
        (&[(100, 2.0), (200, 1.55)], 2, 0.1, Some(Minimize), None),
        // Within the margin at its step: goes on, though at its pace it ends at 1.5, 0.3
        // behind the reference's end (stopped once it is behind by more).
        (&[(100, 2.0), (200, 1.75)], 2, 0.25, Some(Minimize), None),
        (
            &[(100, 2.0), (200, 1.76)],
            2,
            0.25,
            Some(Minimize),
            pruned(200, 1.76, 1.5),
        ),
        // Better than the reference: goes on.
        (&[(100, 1.0), (200, 0.9)], 2, 0.0, Some(Minimize), None),
        // Only the latest reading counts: an early bad reading that recovered goes on.
        (&[(100, 9.0), (200, 1.5)], 2, 0.0, Some(Minimize), None),
        // Interpolated reference at step 250 (1.35).
        (
            &[(100, 2.0), (250, 1.5)],
            2,
            0.1,
            Some(Minimize),
            pruned(250, 1.5, 1.35),
        ),
        // Behind, but improving fast enough to end better than the reference's end (1.2):
        // curves that cross, a slow starter goes on.
        (&[(100, 3.0), (200, 2.0)], 2, 0.1, Some(Minimize), None),
        // Behind and improving, not fast enough: pruned.
        (
            &[(100, 2.2), (200, 2.0)],
            2,
            0.1,
            Some(Minimize),
            pruned(200, 2.0, 1.5),
        ),
        // Past the reference's last step there is nothing left to catch up with.
        (
            &[(300, 1.6), (400, 1.5)],
            2,
            0.1,
            Some(Minimize),
            pruned(400, 1.5, 1.2),
        ),
        // Getting worse: no pace at all.
        (
            &[(100, 2.0), (200, 2.1)],
            2,
            0.1,
            Some(Minimize),
            pruned(200, 2.1, 1.5),
        ),
        // Before the reference's first step: no decision.
        (&[(10, 9.0), (20, 9.0)], 2, 0.1, Some(Minimize), None),
        // Qualitative mode: never.
        (&[(100, 9.0), (200, 9.0)], 2, 0.1, None, None),
        // A reading that is not a number decides nothing.
        (&[(100, 9.0), (200, f64::NAN)], 2, 0.1, Some(Minimize), None),
        // A negative margin counts as none.
        (&[(100, 2.0), (200, 1.5)], 2, -1.0, Some(Minimize), None),
    ];
    for &(curve, warmup, margin, direction, want) in cases {
        assert_eq!(
            decide(curve, &rule(REF, warmup, margin, direction, false)),
            want,
            "{curve:?} warmup {warmup} margin {margin} {direction:?}"
        );
    }
    // Maximize: lower is worse, and the pace is a rise.
    let up: &[Point] = &[(100, 0.5), (200, 0.8), (300, 0.9)];
    let max_cases: &[(&[Point], Option<Pruned>)] = &[
        (&[(100, 0.3), (200, 0.4)], pruned(200, 0.4, 0.8)),
        (&[(100, 0.2), (200, 0.6)], None),
        (&[(100, 0.9), (200, 0.85)], None),
    ];
    for &(curve, want) in max_cases {
        assert_eq!(
            decide(curve, &rule(up, 2, 0.1, Some(Maximize), false)),
            want,
            "{curve:?}"
        );
    }
    // `prune: early`: behind at the step is enough, even for a run that would catch up.
    let slow_starter: &[Point] = &[(100, 3.0), (200, 2.0)];
    assert_eq!(
        decide(slow_starter, &rule(REF, 2, 0.1, Some(Minimize), true)),
        pruned(200, 2.0, 1.5)
    );
    assert_eq!(
        decide(slow_starter, &rule(REF, 2, 0.1, Some(Minimize), false)),
        None
    );
    assert_eq!(
        decide(
            &[(100, 2.0), (200, 1.55)],
            &rule(REF, 2, 0.1, Some(Minimize), true)
        ),
        None
    );
    assert_eq!(
        decide(&[(100, 9.0)], &rule(REF, 2, 0.1, Some(Minimize), true)),
        None
    );
    // No reference curve (the best printed no readings): never.
    assert_eq!(
        decide(
            &[(100, 9.0), (200, 9.0)],
            &rule(&[], 2, 0.0, Some(Minimize), false)
        ),
        None
    );
}

/// A curve of `steps` readings, `f(t)` at t = step / steps, plus `noise` times a fixed
/// pseudo-random sequence of unit sd (the same for every call).
fn curve(steps: u64, noise: f64, f: impl Fn(f64) -> f64) -> Vec<Point> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut unit = move || {
        // Sum of 12 uniforms minus 6: about normal, sd 1.
        (0..12)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .sum::<f64>()
            - 6.0
    };
    (1..=steps)
        .map(|s| (s, f(s as f64 / steps as f64) + noise * unit()))
        .collect()
}

/// The first step at which `run`, printed reading by reading, is pruned.
fn first_pruned(run: &[Point], rule: &Rule) -> Option<u64> {
    (1..=run.len()).find_map(|n| decide(&run[..n], rule).map(|p| p.step))
}

#[test]
fn reading_noise_is_the_scatter_around_the_curve() {
    // A smooth curve has none; where it bends faster than a quadratic follows over five
    // readings (a steep start), the bend counts as noise: the estimate errs on the wide side.
    let smooth = curve(20, 0.0, |t| 1.0 + 3.0 * (-t).exp());
    assert!(reading_noise(&smooth).unwrap() < 3e-4, "{smooth:?}");
    let steep = curve(20, 0.0, |t| 1.0 + 3.0 * (-4.0 * t).exp());
    assert!(reading_noise(&steep).unwrap() < 0.002, "{steep:?}");
    // Noise of sd 0.003 on a learning curve is never found much smaller; the steeper the
    // start, the more its bend adds (up to 2.2 times here at rate 10: a wider margin, fewer
    // prunes, never more).
    for (rate, sd) in [(4.0, 0.003), (10.0, 0.003), (4.0, 0.01)] {
        let noisy = curve(20, sd, |t| 1.0 + 3.0 * (-rate * t).exp());
        let found = reading_noise(&noisy).unwrap();
        assert!(
            (0.67..2.5).contains(&(found / sd)),
            "rate {rate} sd {sd}: {found}"
        );
    }
    // Uneven steps, printed out of order, a reading that is not a number left out.
    let uneven: &[Point] = &[
        (40, 1.4),
        (10, 2.0),
        (20, 1.7),
        (25, f64::NAN),
        (30, 1.5),
        (80, 1.2),
        (60, 1.3),
    ];
    assert!(reading_noise(uneven).is_some());
    // Fewer than five readings: unknown.
    assert_eq!(reading_noise(&smooth[..4]), None);
    assert_eq!(reading_noise(&[]), None);
}

#[test]
fn the_chi_square_quantile() {
    for (df, want) in [(1.0, 10.828), (2.0, 13.816), (5.0, 20.515), (17.0, 40.790)] {
        let got = chi2_999(df);
        assert!((got / want - 1.0).abs() < 0.035, "{df}: {got} vs {want}");
    }
}

#[test]
fn the_margin_is_widened_to_the_reading_noise() {
    let mut r = rule(REF, 2, 0.001, Some(Minimize), false);
    assert_eq!(r.effective_margin(), 0.001);
    r.noise = 0.01;
    assert!((r.effective_margin() - 0.02).abs() < 1e-12);
    // `early` compares two noisy readings at one step: 2·√2 sd.
    let early = Rule { early: true, ..r };
    assert!((early.effective_margin() - 0.02 * std::f64::consts::SQRT_2).abs() < 1e-12);
    r.noise = f64::NAN;
    assert_eq!(r.effective_margin(), 0.001);
    // A near-tie at the end: 0.005 behind the reference's end, with readings that scatter
    // by 0.003. With the noise known it goes on; with the margin alone it is stopped.
    let reference = curve(20, 0.0, |t| 1.0 + 3.0 * (-6.0 * t).exp());
    let tie = curve(20, 0.0, |t| 1.005 + 3.0 * (-6.0 * t).exp());
    let mut r = rule(&reference, 2, 0.001, Some(Minimize), false);
    assert!(first_pruned(&tie, &r).is_some());
    r.noise = 0.003;
    assert_eq!(first_pruned(&tie, &r), None);
}

#[test]
fn a_run_that_cannot_beat_the_best_by_its_own_end_noise_is_stopped() {
    // The best's end (1.0074) is a known number; the run ends 0.007 behind it, more than its
    // own end reading's two sds (0.006) and less than two readings' difference (0.0085):
    // it is stopped before its end, as the keep rule would revert it.
    let reference = curve(20, 0.0, |t| 1.0 + 3.0 * (-6.0 * t).exp());
    let behind = curve(20, 0.0, |t| 1.007 + 3.0 * (-6.0 * t).exp());
    let r = Rule {
        noise: 0.003,
        ..rule(&reference, 2, 0.001, Some(Minimize), false)
    };
    let step = first_pruned(&behind, &r).expect("pruned");
    assert!(step < 20, "pruned at {step}");
    // Within its end's noise (0.005 behind): it may still be kept by chance, and goes on.
    let tie = curve(20, 0.0, |t| 1.005 + 3.0 * (-6.0 * t).exp());
    assert_eq!(first_pruned(&tie, &r), None);
}

/// Curves that cross: the reference (the best) starts fast and ends at 1.055.
fn crossing_reference() -> Vec<Point> {
    curve(20, 0.003, |t| 1.0 + 3.0 * (-4.0 * t).exp())
}

#[test]
fn a_fast_starter_on_a_higher_floor_is_stopped_once_behind() {
    let reference = crossing_reference();
    let noise = reading_noise(&reference).unwrap();
    let r = Rule {
        noise,
        ..rule(&reference, 2, 0.001, Some(Minimize), false)
    };
    // Fast to its floor of 1.3, ending 0.25 worse than the best: ahead of the best's curve
    // until step 11 or 12, where the curves cross; stopped at the first reading behind.
    let fast = curve(20, 0.003, |t| 1.3 + 2.7 * (-12.0 * t).exp());
    let step = first_pruned(&fast, &r).expect("pruned");
    assert!(step <= 13, "pruned at {step}");
    for &(s, v) in &fast[..step as usize] {
        let at = reference_at(&reference, s).unwrap();
        let behind = v - at > r.effective_margin();
        assert_eq!(behind, s == step, "step {s}: {v} against {at}");
    }
    // Once behind, it cannot catch up: stopped no later than `early`, which compares levels
    // with a wider margin.
    let early = Rule { early: true, ..r };
    assert!(first_pruned(&fast, &early).unwrap() >= step);
}

/// A real training's readings: a small character-level transformer on an H100
/// (`bench/prune_gpu.sh`, 27 Nov 2026), validation loss every 75 steps of 1,500.
const GPU_BEST: &[Point] = &[
    (75, 3.95515),
    (150, 3.80688),
    (225, 3.77318),
    (300, 3.76125),
    (375, 3.75425),
    (450, 3.74955),
    (525, 3.7449),
    (600, 3.74148),
    (675, 3.73848),
    (750, 3.7343),
    (825, 3.7309),
    (900, 3.72642),
    (975, 3.7229),
    (1050, 3.71986),
    (1125, 3.7177),
    (1200, 3.71655),
    (1275, 3.71537),
    (1350, 3.71461),
    (1425, 3.71441),
    (1500, 3.7144),
];

/// The next attempt of that night, with a higher learning rate.
const GPU_ESCAPES: &[Point] = &[
    (75, 3.85032),
    (150, 3.77034),
    (225, 3.7528),
    (300, 3.74413),
    (375, 3.73279),
    (450, 3.71089),
    (525, 3.67157),
    (600, 3.60597),
    (675, 3.51849),
    (750, 3.41764),
    (825, 3.32621),
    (900, 3.23953),
    (975, 3.16948),
    (1050, 3.11635),
    (1125, 3.07693),
    (1200, 3.05084),
    (1275, 3.03489),
    (1350, 3.0262),
    (1425, 3.02322),
    (1500, 3.02283),
];

#[test]
fn a_run_ahead_on_a_plateau_is_never_stopped() {
    // The next attempt, ahead of the best from its first reading, flattening on the
    // plateau near 3.75 like any floor (gains 0.080, 0.017, 0.009), then leaving it at step
    // 450 and ending at 3.02, the night's largest improvement. The rule of 27 Nov stopped
    // it at step 225.
    let r = Rule {
        noise: reading_noise(GPU_BEST).unwrap(),
        ..rule(GPU_BEST, 2, 0.0037, Some(Minimize), false)
    };
    assert_eq!(first_pruned(GPU_ESCAPES, &r), None);
    // Had it stayed on the plateau behind the best, it would have been stopped.
    let stays: Vec<Point> = GPU_ESCAPES[..4]
        .iter()
        .map(|&(s, v)| (s, v + 0.05))
        .collect();
    assert!(first_pruned(&stays, &r).is_some());
}

#[test]
fn once_the_best_left_a_plateau_runs_are_judged_only_after_it_stopped_speeding_up() {
    // The best that left the plateau: from step 375 on it gained more than twice as fast
    // as on the plateau, up to step 1,200. A cosine schedule's bend is no plateau.
    let noise = reading_noise(GPU_ESCAPES).unwrap();
    assert_eq!(speedup_end(GPU_ESCAPES, noise), 1200);
    assert_eq!(speedup_end(GPU_BEST, reading_noise(GPU_BEST).unwrap()), 0);
    // A run of that night behind it from step 375 on, reverted at 3.326: on the plateau it
    // could still have left it sooner, so it is stopped only after step 1,200.
    let later: &[Point] = &[
        (75, 3.86649),
        (150, 3.77438),
        (225, 3.75537),
        (300, 3.74759),
        (375, 3.7403),
        (450, 3.72905),
        (525, 3.71108),
        (600, 3.68457),
        (675, 3.64598),
        (750, 3.59417),
        (825, 3.53909),
        (900, 3.48163),
        (975, 3.43233),
        (1050, 3.39553),
        (1125, 3.36662),
        (1200, 3.34771),
        (1275, 3.33522),
        (1350, 3.32861),
        (1425, 3.32633),
        (1500, 3.32605),
    ];
    let r = Rule {
        noise,
        ..rule(GPU_ESCAPES, 2, 0.0037, Some(Minimize), false)
    };
    assert_eq!(first_pruned(later, &r), Some(1275));
    // `early` compares levels only, and stops it on the plateau.
    let early = Rule { early: true, ..r };
    assert!(first_pruned(later, &early).unwrap() <= 450);
    // The same for a metric to maximize (the curves turned over).
    let turn = |c: &[Point]| c.iter().map(|&(s, v)| (s, -v)).collect::<Vec<_>>();
    let best = turn(GPU_ESCAPES);
    let up = Rule {
        noise,
        ..rule(&best, 2, 0.0037, Some(Maximize), false)
    };
    assert_eq!(first_pruned(&turn(later), &up), Some(1275));
}

#[test]
fn a_slow_starter_that_ends_better_is_never_stopped() {
    let reference = crossing_reference();
    let noise = reading_noise(&reference).unwrap();
    let r = Rule {
        noise,
        ..rule(&reference, 2, 0.001, Some(Minimize), false)
    };
    // Exponential, slower and on a lower floor: ends at 0.96, behind at every early step.
    let slow = curve(20, 0.003, |t| 0.8 + 3.2 * (-3.0 * t).exp());
    assert!(slow[4].1 > reference[4].1);
    assert!(slow[19].1 < reference[19].1);
    assert_eq!(
        first_pruned(&slow, &r),
        None,
        "{slow:?} {reference:?} {noise}"
    );
    // A power law in the step (slow to flatten, unlike any exponential): ends at 1.02.
    let power = curve(20, 0.003, |t| -0.1 + 5.0 * (20.0 * t).powf(-0.5));
    assert!(power[4].1 > reference[4].1);
    assert!(power[19].1 < reference[19].1);
    assert_eq!(first_pruned(&power, &r), None);
    // `early` stops both.
    let early = Rule { early: true, ..r };
    assert!(first_pruned(&slow, &early).is_some());
    assert!(first_pruned(&power, &early).is_some());
    // Where they end worse than the best, they are stopped before the end.
    let slow_worse = curve(20, 0.003, |t| 1.2 + 2.8 * (-3.0 * t).exp());
    assert!(first_pruned(&slow_worse, &r).unwrap() < 20);
    let power_worse = curve(20, 0.003, |t| 0.1 + 5.0 * (20.0 * t).powf(-0.5));
    assert!(first_pruned(&power_worse, &r).unwrap() < 20);
}

#[test]
fn a_sweeps_race_stops_a_variant_behind_the_leader_at_a_rung_only() {
    let leader: Vec<Point> = (1..=8).map(|s| (s * 100, 2.0 - 0.1 * s as f64)).collect();
    let close: Vec<Point> = (1..=8).map(|s| (s * 100, 2.01 - 0.1 * s as f64)).collect();
    let behind: Vec<Point> = (1..=4).map(|s| (s * 100, 3.0 - 0.1 * s as f64)).collect();
    let others: [&[Point]; 2] = [&close, &leader];
    let early = |warmup| rule(&[], warmup, 0.05, Some(Minimize), true);
    // Readings 1, 2 and 4 are rungs with warmup 1; 3 is not.
    let (who, at) = race(&behind[..2], &others, &early(1)).unwrap();
    assert_eq!((who, at.step, at.value), (1, 200, 2.8));
    assert!((at.reference - 1.8).abs() < 1e-12);
    assert_eq!(race(&behind[..3], &others, &early(1)), None);
    // Warmup 2: the 2nd, 4th, 8th readings.
    assert_eq!(race(&behind[..1], &others, &early(2)), None);
    assert!(race(&behind[..4], &others, &early(2)).is_some());
    // Within the margin of the leader, or no other at that step yet: it goes on.
    assert_eq!(race(&close[..2], &[&leader], &early(1)), None);
    assert_eq!(race(&behind[..2], &[&leader[..1]], &early(1)), None);
    // Maximizing, the same curves turned: the worse one is stopped.
    let up = |c: &[Point]| c.iter().map(|&(s, v)| (s, -v)).collect::<Vec<Point>>();
    let (l, b) = (up(&leader), up(&behind));
    let max = rule(&[], 1, 0.05, Some(Maximize), true);
    assert!(race(&b[..2], &[&l], &max).is_some());
    assert_eq!(race(&l[..2], &[&b], &max), None);
    assert_eq!(
        race(&behind[..2], &others, &rule(&[], 1, 0.05, None, true)),
        None
    );
}

#[test]
fn unless_early_a_slow_starter_that_may_still_cross_the_leader_goes_on() {
    // The leader falls fast then flattens at 1.0; the slow starter falls steadily towards 0.2.
    let leader: Vec<Point> = [(100, 1.5), (200, 1.2), (300, 1.1), (400, 1.05)].to_vec();
    let slow: Vec<Point> = [(100, 2.6), (200, 2.2), (300, 1.8), (400, 1.4)].to_vec();
    let end: Vec<Point> = (1..=16).map(|s| (s * 100, 1.0)).collect();
    let patient = rule(&end, 1, 0.05, Some(Minimize), false);
    assert_eq!(race(&slow, &[&leader], &patient), None);
    assert!(race(
        &slow,
        &[&leader],
        &rule(&end, 1, 0.05, Some(Minimize), true)
    )
    .is_some());
    // Without a reference (no last step to extrapolate to), only `early` stops.
    assert_eq!(
        race(
            &slow,
            &[&leader],
            &rule(&[], 1, 0.05, Some(Minimize), false)
        ),
        None
    );
    // Flat and far behind: even optimistically it cannot reach where the leader already is.
    let flat: Vec<Point> = [(100, 3.0), (200, 3.0), (300, 3.0), (400, 3.0)].to_vec();
    assert!(race(&flat, &[&leader], &patient).is_some());
}
