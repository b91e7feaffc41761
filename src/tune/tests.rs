//! Tests of `builtin:tune`: literal detection and byte-exact rewriting, determinism, no repeated
//! points, bounds/sign/integer rules, and simulations on the 2-D fixture function (one researcher,
//! and the conference shape of three researchers restarting each round from the combined best).

use std::collections::BTreeMap;

use super::*;

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

fn texts(lits: &[Literal]) -> Vec<&str> {
    lits.iter().map(|l| l.text.as_str()).collect()
}

const FIXTURE_2D: &str = include_str!("../../fixtures/tune-2d/params.sh");

#[test]
fn detects_ints_floats_sci_and_negatives() {
    let src = "a = 3\nb = -1.5\nc = 3e-4\nd=+2.5E+03\ne = .5\nf: 7.\n\"g\": -12,\n";
    let lits = find_literals("p.py", src);
    assert_eq!(
        texts(&lits),
        ["3", "-1.5", "3e-4", "+2.5E+03", ".5", "7.", "-12"]
    );
    let keys: Vec<&str> = lits.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        keys,
        ["p.py:a", "p.py:b", "p.py:c", "p.py:d", "p.py:e", "p.py:f", "p.py:g"]
    );
    let vals: Vec<f64> = lits.iter().map(|l| l.value).collect();
    assert_eq!(vals, [3.0, -1.5, 3e-4, 2500.0, 0.5, 7.0, -12.0]);
    let ints: Vec<bool> = lits.iter().map(|l| l.integer).collect();
    assert_eq!(ints, [true, false, false, false, false, false, true]);
    for l in &lits {
        assert_eq!(&src[l.start..l.end], l.text);
    }
}

#[test]
fn ignores_things_that_are_not_parameters() {
    let src = "#!/usr/bin/env python3\n\
               # run 3 times with 0.5 probability\n\
               version = \"1.2.3\"\n\
               release = 1.2.3\n\
               date = 2024-01-15\n\
               at = 12:30\n\
               color = \"#ff0033\"\n\
               arch = x86_64\n\
               hexv = 0x1F\n\
               size = 64bit\n\
               port = 8080\n\
               seed = 42\n\
               url = \"http://host:8080/a/1\"\n\
               y = a[0] + 1.5\n\
               print(3)\n\
               if x == 2:\n\
               name = \"run 5\"\n\
               dim = 16 // 2\n\
               ip = 192.168.0.1\n\
               lr = 0.01  # step size\n";
    let lits = find_literals("train.py", src);
    // `1.5` is the only value of an assignment that is not an index; `16`, `0.01` too.
    assert_eq!(texts(&lits), ["1.5", "16", "0.01"]);
    assert!(find_literals("README.md", "x = 3\n").is_empty());
    assert!(find_literals("bin.dat", "x = 3\0\n").is_empty());
}

#[test]
fn markers_select_literals_and_give_bounds() {
    let src = "x=-1.0  # tune: [-5, 5]\n\
               y = 2.0\n\
               lr = 3e-4  // tune [1e-5, 1e-2]\n\
               n = 8  # tune: int [1, 64]\n\
               w = 2  # tune: float\n\
               z = 1.0  # tuned by hand\n\
               q = 0.5  # retune later\n";
    let lits = find_literals("params.sh", src);
    assert_eq!(texts(&lits), ["-1.0", "3e-4", "8", "2"]);
    assert_eq!((lits[0].lower, lits[0].upper), (Some(-5.0), Some(5.0)));
    assert_eq!((lits[1].lower, lits[1].upper), (Some(1e-5), Some(1e-2)));
    assert!(lits[2].integer && lits[2].lower == Some(1.0) && lits[2].upper == Some(64.0));
    assert!(!lits[3].integer && lits[3].lower.is_none());
    assert_eq!(lits[0].key, "params.sh:x");

    // One marked file makes every unmarked file's literals invisible.
    let fs = files(&[("a.sh", "x=1.0 # tune\n"), ("b.py", "lr = 0.1\n")]);
    let all = find_all(&fs);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].key, "a.sh:x");
    assert_eq!(
        extract_params(&fs),
        BTreeMap::from([("a.sh:x".to_string(), 1.0)])
    );
    // Without any marker both count.
    let fs = files(&[("a.sh", "x=1.0\n"), ("b.py", "lr = 0.1\n")]);
    assert_eq!(find_all(&fs).len(), 2);
}

#[test]
fn keys_fall_back_to_ordinals() {
    let src = "pair = (1.5, 2.5)\nx = 1\nx = 2\nconst K: f64 = 0.25;\nrun --lr 0.1\n";
    let lits = find_literals("m.rs", src);
    let keys: Vec<&str> = lits.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        keys,
        ["m.rs#0", "m.rs#1", "m.rs:x", "m.rs#3", "m.rs:K", "m.rs:lr"]
    );
}

#[test]
fn rewrite_changes_only_the_literal_and_keeps_its_style() {
    let src = "a = 3\nb = -1.5\nc = 3e-4\nd=+2.5E+03\ne = .5\nf: 7.\nh = 1.0e-05 # keep\n";
    let lits = find_literals("p.py", src);
    let cases = [
        (0, 4.6, "5"),
        (1, -1.25, "-1.25"),
        (1, 2.0, "2.0"),
        (2, 2.5e-4, "2.5e-4"),
        (2, 0.003, "3e-3"),
        (3, 3100.0, "+3.1E+03"),
        (4, 0.25, ".25"),
        (5, 9.0, "9."),
        (6, 1.5e-6, "1.5e-06"),
        (1, 1.0 / 3.0, "0.333333"),
    ];
    for (i, v, want) in cases {
        let out = rewrite(src, &lits[i], v);
        let l = &lits[i];
        assert_eq!(&out[..l.start], &src[..l.start]);
        assert_eq!(&out[out.len() - (src.len() - l.end)..], &src[l.end..]);
        assert_eq!(
            &out[l.start..out.len() - (src.len() - l.end)],
            want,
            "case {i} {v}"
        );
        // The rewritten literal is found again, same key, new value.
        let again = find_literals("p.py", &out);
        assert_eq!(again.len(), lits.len());
        assert_eq!(again[i].key, l.key);
    }
    // Bounds clamp, and CRLF files keep their line endings.
    let src = "x=-1.0  # tune: [-5, 5]\r\ny=1  # tune: int [0, 3]\r\n";
    let lits = find_literals("p.sh", src);
    assert_eq!(
        rewrite(src, &lits[0], -9.0),
        "x=-5.0  # tune: [-5, 5]\r\ny=1  # tune: int [0, 3]\r\n"
    );
    assert_eq!(
        rewrite(src, &lits[1], 2.6),
        "x=-1.0  # tune: [-5, 5]\r\ny=3  # tune: int [0, 3]\r\n"
    );
}

fn req<'a>(fs: &'a [(String, String)], hist: &'a [Trial], seed: u64, attempt: u64) -> Request<'a> {
    Request {
        files: fs,
        history: hist,
        minimize: true,
        seed,
        researcher: 0,
        researchers: 1,
        assigned: false,
        role: Role::Normal,
        attempt,
        budget_left: None,
    }
}

fn f2(p: &BTreeMap<String, f64>) -> f64 {
    let x = p["params.sh:x"];
    let y = p["params.sh:y"];
    x.sin() * y.cos() + (x * y).sin() + (x * x + y * y) / 20.0
}

const F2_MIN: f64 = -1.519;

fn apply(fs: &mut [(String, String)], p: &Proposal) {
    for (path, text) in &p.files {
        if let Some(f) = fs.iter_mut().find(|(q, _)| q == path) {
            f.1 = text.clone();
        }
    }
}

#[test]
fn proposals_are_deterministic() {
    let fs = files(&[("params.sh", FIXTURE_2D)]);
    let mut hist = vec![Trial {
        params: extract_params(&fs),
        metric: Some(f2(&extract_params(&fs))),
    }];
    for a in 0..12 {
        let p1 = propose(&req(&fs, &hist, 3, a)).unwrap();
        let p2 = propose(&req(&fs, &hist, 3, a)).unwrap();
        assert_eq!(p1, p2);
        assert_eq!(p1.files.len(), 1);
        assert!(p1.description.starts_with("tune "), "{}", p1.description);
        assert!(!p1.description.contains('\n'));
        let m = f2(&p1.params);
        hist.push(Trial {
            params: p1.params.clone(),
            metric: Some(m),
        });
    }
}

#[test]
fn never_reproposes_an_evaluated_point() {
    // A tiny integer space gets exhausted: every point once, then None.
    let fs = files(&[("c.sh", "a=2  # tune: int [0, 4]\nb=1  # tune: int [0, 2]\n")]);
    let mut hist = vec![Trial {
        params: extract_params(&fs),
        metric: Some(5.0),
    }];
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(format!("{:?}", hist[0].params));
    for a in 0..20 {
        let Some(p) = propose(&req(&fs, &hist, 1, a)) else {
            break;
        };
        assert!(
            seen.insert(format!("{:?}", p.params)),
            "repeated {:?}",
            p.params
        );
        for (k, v) in &p.params {
            assert_eq!(v.fract(), 0.0, "{k} not an integer");
        }
        assert!((0.0..=4.0).contains(&p.params["c.sh:a"]));
        assert!((0.0..=2.0).contains(&p.params["c.sh:b"]));
        hist.push(Trial {
            params: p.params,
            metric: Some(a as f64),
        });
    }
    assert_eq!(seen.len(), 15);
    assert!(propose(&req(&fs, &hist, 1, 99)).is_none());

    // Floats: a long run on the 2-D problem never repeats (compared on the written values).
    let mut fs = files(&[("params.sh", FIXTURE_2D)]);
    let p0 = extract_params(&fs);
    let mut best = f2(&p0);
    let mut hist = vec![Trial {
        params: p0,
        metric: Some(best),
    }];
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(format!("{:?}", hist[0].params));
    for a in 0..120 {
        let p = propose(&req(&fs, &hist, 5, a)).unwrap();
        assert!(
            seen.insert(format!("{:?}", p.params)),
            "repeated {:?}",
            p.params
        );
        let m = f2(&p.params);
        if m < best {
            best = m;
            apply(&mut fs, &p);
        }
        hist.push(Trial {
            params: p.params,
            metric: Some(m),
        });
    }
}

#[test]
fn respects_sign_integers_and_bounds() {
    let fs = files(&[(
        "cfg.py",
        "lr = 0.001\nlayers = 4\nmomentum = 0.9  # tune: [0, 0.95]\nshift = -2.5\n",
    )]);
    let mut cur = fs.clone();
    let mut hist = vec![Trial {
        params: extract_params(&fs),
        metric: Some(10.0),
    }];
    for a in 0..60 {
        let mut r = req(&cur, &hist, 9, a);
        r.role = if a % 2 == 0 {
            Role::DevilsAdvocate
        } else {
            Role::Normal
        };
        let p = propose(&r).unwrap();
        // Only the marked literal is tuned since the file has a marker.
        assert_eq!(p.params.len(), 1);
        let m = p.params["cfg.py:momentum"];
        assert!((0.0..=0.95).contains(&m), "{m}");
        let metric = (m - 0.77).powi(2);
        if metric
            < hist
                .iter()
                .filter_map(|t| t.metric)
                .fold(f64::MAX, f64::min)
        {
            apply(&mut cur, &p);
        }
        hist.push(Trial {
            params: p.params,
            metric: Some(metric),
        });
    }
    // Unmarked: positive stays positive, negative stays negative, integers stay integers.
    let fs = files(&[("cfg.py", "lr = 0.001\nlayers = 4\nshift = -2.5\n")]);
    let mut hist = vec![Trial {
        params: extract_params(&fs),
        metric: Some(10.0),
    }];
    for a in 0..60 {
        let mut r = req(&fs, &hist, 2, a);
        r.role = if a % 3 == 0 {
            Role::DevilsAdvocate
        } else {
            Role::Normal
        };
        let p = propose(&r).unwrap();
        assert!(p.params["cfg.py:lr"] > 0.0);
        assert!(p.params["cfg.py:layers"] >= 1.0);
        assert_eq!(p.params["cfg.py:layers"].fract(), 0.0);
        assert!(p.params["cfg.py:shift"] < 0.0);
        hist.push(Trial {
            params: p.params,
            metric: Some(20.0 + a as f64),
        });
    }
}

#[test]
fn assigned_partition_tunes_disjoint_literals() {
    let fs = files(&[(
        "p.sh",
        "a=1.0 # tune\nb=2.0 # tune\nc=3.0 # tune\nd=4.0 # tune\n",
    )]);
    let hist = vec![Trial {
        params: extract_params(&fs),
        metric: Some(1.0),
    }];
    let base = extract_params(&fs);
    let mut owned: Vec<Vec<String>> = Vec::new();
    for r in 0..3 {
        let mut touched = std::collections::BTreeSet::new();
        let mut h = hist.clone();
        for a in 0..10 {
            let mut rq = req(&fs, &h, 4, a);
            rq.researcher = r;
            rq.researchers = 3;
            rq.assigned = true;
            let p = propose(&rq).unwrap();
            for (k, v) in &p.params {
                if *v != base[k] {
                    touched.insert(k.clone());
                }
            }
            h.push(Trial {
                params: p.params,
                metric: Some(2.0),
            });
        }
        owned.push(touched.into_iter().collect());
    }
    assert_eq!(owned[0], ["p.sh:a", "p.sh:d"]);
    assert_eq!(owned[1], ["p.sh:b"]);
    assert_eq!(owned[2], ["p.sh:c"]);
}

/// One researcher, `evals` evaluations from the fixture's start; returns the best f.
fn single_run(seed: u64, evals: u64) -> f64 {
    let mut fs = files(&[("params.sh", FIXTURE_2D)]);
    let p0 = extract_params(&fs);
    let mut best = f2(&p0);
    let mut hist = vec![Trial {
        params: p0,
        metric: Some(best),
    }];
    for a in 0..evals {
        let mut r = req(&fs, &hist, seed, a);
        r.budget_left = Some(evals - a);
        let Some(p) = propose(&r) else { break };
        let m = f2(&p.params);
        if m < best {
            best = m;
            apply(&mut fs, &p);
        }
        hist.push(Trial {
            params: p.params,
            metric: Some(m),
        });
    }
    best
}

/// The conference shape: `rounds` × 3 researchers × `iters`; each round every researcher restarts
/// from the combined best (round-bests cherry-picked parameter-wise, kept only when better).
fn conference_run(seed: u64, rounds: u64, iters: u64, researchers: usize, assigned: bool) -> f64 {
    let start = files(&[("params.sh", FIXTURE_2D)]);
    let mut best_files = start.clone();
    let mut best_params = extract_params(&start);
    let mut best = f2(&best_params);
    let mut hists: Vec<Vec<Trial>> = vec![Vec::new(); researchers];
    let mut attempts = vec![0u64; researchers];
    for round in 0..rounds {
        let mut round_bests = Vec::new();
        for r in 0..researchers {
            let h = &mut hists[r];
            h.push(Trial {
                params: best_params.clone(),
                metric: Some(best),
            });
            let mut fs = best_files.clone();
            let mut mine = best;
            let mut mine_params = best_params.clone();
            for _ in 0..iters {
                let rq = Request {
                    files: &fs,
                    history: h,
                    minimize: true,
                    seed,
                    researcher: r,
                    researchers,
                    assigned,
                    role: Role::Normal,
                    attempt: attempts[r],
                    budget_left: Some((rounds - round) * iters),
                };
                attempts[r] += 1;
                let Some(p) = propose(&rq) else { break };
                let m = f2(&p.params);
                if m < mine {
                    mine = m;
                    mine_params = p.params.clone();
                    apply(&mut fs, &p);
                }
                h.push(Trial {
                    params: p.params,
                    metric: Some(m),
                });
            }
            round_bests.push((mine, mine_params, fs));
        }
        // Knowledge transfer: best finding first, then cherry-pick others' non-conflicting changes.
        round_bests.sort_by(|a, b| a.0.total_cmp(&b.0));
        let base = best_params.clone();
        let (m0, p0, f0) = round_bests[0].clone();
        if m0 < best {
            best = m0;
            best_params = p0;
            best_files = f0;
        }
        for (m, p, _) in round_bests.iter().skip(1) {
            if *m >= f2(&base) {
                continue;
            }
            let mut combined = best_params.clone();
            for (k, v) in p {
                if *v != base[k] && best_params[k] == base[k] {
                    combined.insert(k.clone(), *v);
                }
            }
            let cm = f2(&combined);
            if combined != best_params && cm < best {
                best = cm;
                best_params = combined;
                let mut text = FIXTURE_2D.to_string();
                for lit in find_literals("params.sh", FIXTURE_2D).iter().rev() {
                    text = rewrite(&text, lit, best_params[&lit.key]);
                }
                best_files = files(&[("params.sh", &text)]);
            }
        }
    }
    best
}

#[test]
fn fixture_start_is_honest() {
    let p = extract_params(&files(&[("params.sh", FIXTURE_2D)]));
    assert_eq!(p.len(), 2);
    assert!(f2(&p) > F2_MIN + 0.1);
}

#[test]
fn simulation_single_researcher_reaches_the_2d_minimum() {
    let seeds = 20;
    let results: Vec<f64> = (0..seeds).map(|s| single_run(s, 60)).collect();
    let hits = results.iter().filter(|b| **b <= F2_MIN + 0.01).count();
    eprintln!("single researcher, 60 evals: {hits}/{seeds} within 0.01; bests {results:?}");
    assert!(hits * 10 >= seeds as usize * 8, "{hits}/{seeds}");
}

#[test]
fn simulation_conference_shape_reaches_the_2d_minimum() {
    for assigned in [false, true] {
        let seeds = 20;
        let results: Vec<f64> = (0..seeds)
            .map(|s| conference_run(s, 4, 5, 3, assigned))
            .collect();
        let hits = results.iter().filter(|b| **b <= F2_MIN + 0.01).count();
        eprintln!(
            "conference 4x5x3 (assigned={assigned}): {hits}/{seeds} within 0.01; bests {results:?}"
        );
        assert!(hits * 10 >= seeds as usize * 8, "{hits}/{seeds}");
    }
}

const FIXTURE_6D: &str = include_str!("../../fixtures/tune-6d/params.sh");

/// The 6-D fixture's loss (as in its eval.sh) with Gaussian noise of sd 0.01 from `noise`.
fn f6(p: &BTreeMap<String, f64>, noise: &mut u64) -> f64 {
    let g = |k: &str| p[&format!("params.sh:{k}")];
    let x = [g("a") - 0.3, g("b") + 0.2, g("c") - 0.5, g("d") - 0.1];
    let mut r = 0.0;
    for i in 0..3 {
        r += 10.0 * (x[i + 1] - x[i] * x[i]).powi(2) + (1.0 - x[i]).powi(2);
    }
    let v = g("lr").log10() + 2.5;
    let w = (g("batch") - 24.0) / 8.0;
    r += v * v + w * w + v * w;
    let mut next = || {
        *noise = noise
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*noise >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let (u1, u2) = (next(), next());
    r + 0.01 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The 6-D fixture in the conference shape (free partitioning, best point wins each round).
fn conference_6d(seed: u64, rounds: u64, iters: u64) -> f64 {
    let mut noise = seed ^ 0xABCD;
    let mut best_files = files(&[("params.sh", FIXTURE_6D)]);
    let mut best_params = extract_params(&best_files);
    let mut best = f6(&best_params, &mut noise);
    let mut hists: Vec<Vec<Trial>> = vec![Vec::new(); 3];
    for round in 0..rounds {
        let mut round_bests = Vec::new();
        for (r, h) in hists.iter_mut().enumerate() {
            h.push(Trial {
                params: best_params.clone(),
                metric: Some(best),
            });
            let mut fs = best_files.clone();
            let mut mine = (best, best_params.clone());
            for i in 0..iters {
                let rq = Request {
                    files: &fs,
                    history: h,
                    minimize: true,
                    seed,
                    researcher: r,
                    researchers: 3,
                    assigned: false,
                    role: Role::Normal,
                    attempt: round * iters + i,
                    budget_left: Some((rounds - round) * iters - i),
                };
                let Some(p) = propose(&rq) else { break };
                let m = f6(&p.params, &mut noise);
                if m < mine.0 {
                    mine = (m, p.params.clone());
                    apply(&mut fs, &p);
                }
                h.push(Trial {
                    params: p.params,
                    metric: Some(m),
                });
            }
            round_bests.push((mine, fs));
        }
        round_bests.sort_by(|a, b| a.0 .0.total_cmp(&b.0 .0));
        let ((m, p), f) = round_bests.swap_remove(0);
        if m < best {
            (best, best_params, best_files) = (m, p, f);
        }
    }
    best
}

#[test]
fn simulation_6d_conference_shape() {
    let mut gaps: Vec<f64> = (0..20).map(|s| conference_6d(s, 4, 5)).collect();
    gaps.sort_by(f64::total_cmp);
    eprintln!("6-D fixture, conference 4x5x3 = 60 evals: median best loss {:.4}, worst {:.4}, all {gaps:?}", gaps[10], gaps[19]);
    // The start is at 167. At 60 evaluations random search ends at a median of about 20 and
    // Optuna TPE at about 5.9 (bench/tune_quality.py, same function, no process overhead).
    assert!(gaps[10] < 8.0 && gaps[19] < 25.0, "{gaps:?}");
}
