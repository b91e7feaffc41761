use super::*;

/// Decodes the PNG: (width, height, RGB pixels).
fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let mut reader = png::Decoder::new(bytes).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn pixel(raw: &[u8], w: u32, x: u32, y: u32) -> [u8; 3] {
    let i = (y * w + x) as usize * 3;
    [raw[i], raw[i + 1], raw[i + 2]]
}

fn sample() -> PlotData {
    let mut series = Vec::new();
    for (k, name) in ["A", "B", "C"].iter().enumerate() {
        let points = (0..20)
            .filter(|i| i % 3 == k)
            .map(|i| {
                let x = (i + 1) as f64;
                let y = if i == 7 {
                    None
                } else {
                    Some(1.0 / (1.0 + 0.2 * x) + 0.05 * ((i * 7 + k) % 5) as f64)
                };
                (x, y)
            })
            .collect();
        series.push(PlotSeries {
            label: format!("Researcher {name}"),
            points,
            kept: vec![],
        });
    }
    PlotData {
        title: "Sample — val_loss by iteration".into(),
        metric: "val_loss".into(),
        minimize: true,
        target: Some(0.3),
        series,
        baseline: Some(1.0),
        round_boundaries: vec![6.5, 12.5],
        round_bests: vec![(6.5, 0.6), (12.5, 0.35)],
    }
}

fn check(data: &PlotData) -> Vec<u8> {
    let png = render_png(data).unwrap();
    let (w, h, raw) = decode(&png);
    assert_eq!((w, h), (WIDTH, HEIGHT));
    assert_eq!(raw.len(), (w * h * 3) as usize);
    assert_eq!(pixel(&raw, w, 2, 2), [255, 255, 255]);
    assert!(
        png.len() < raw.len() / 10,
        "compressed: {} bytes for {} pixels",
        png.len(),
        w * h
    );
    raw
}

#[test]
fn sample_chart_is_valid_png_with_colours() {
    let raw = check(&sample());
    let has = |c: [u8; 3]| raw.chunks(3).any(|p| p == c);
    assert!(has([0xE6, 0x9F, 0x00]), "orange series drawn");
    assert!(has([0, 0, 0]), "black envelope/axes drawn");
}

#[test]
fn empty_data_works() {
    check(&PlotData::default());
    check(&PlotData {
        metric: "score".into(),
        series: vec![PlotSeries {
            label: "Researcher A".into(),
            points: vec![(1.0, None), (2.0, None)],
            kept: vec![],
        }],
        ..Default::default()
    });
}

#[test]
fn single_point_and_flat_values() {
    check(&PlotData {
        metric: "acc".into(),
        series: vec![PlotSeries {
            label: "Researcher A".into(),
            points: vec![(1.0, Some(0.5))],
            kept: vec![],
        }],
        ..Default::default()
    });
    check(&PlotData {
        metric: "acc".into(),
        target: Some(0.0),
        baseline: Some(0.0),
        series: vec![PlotSeries {
            label: "Researcher A".into(),
            points: vec![(1.0, Some(0.0)), (2.0, Some(0.0)), (3.0, Some(0.0))],
            kept: vec![],
        }],
        ..Default::default()
    });
}

#[test]
fn the_best_line_is_the_validated_best_never_a_reading() {
    // A lucky reading (0.1) far below what the review validated (0.6, then 0.35).
    let mut data = sample();
    data.series[0].points.push((3.0, Some(0.1)));
    let line = best_line(&data, 1.0, 20.0);
    assert_eq!(
        line,
        [
            (1.0, 1.0),
            (6.5, 1.0),
            (6.5, 0.6),
            (12.5, 0.6),
            (12.5, 0.35),
            (20.0, 0.35)
        ]
    );
    // No round completed yet: the baseline alone.
    data.round_bests.clear();
    assert_eq!(best_line(&data, 1.0, 4.0), [(1.0, 1.0), (4.0, 1.0)]);
    // A round whose best did not move adds no corner.
    data.round_bests = vec![(6.5, 1.0), (12.5, 0.8)];
    assert_eq!(
        best_line(&data, 1.0, 12.5),
        [(1.0, 1.0), (12.5, 1.0), (12.5, 0.8)]
    );
    // all_points merges series in x order and drops crashes.
    let data = PlotData {
        series: vec![
            PlotSeries {
                label: "A".into(),
                points: vec![(1.0, Some(2.0)), (3.0, None)],
                kept: vec![],
            },
            PlotSeries {
                label: "B".into(),
                points: vec![(2.0, Some(1.0))],
                kept: vec![],
            },
        ],
        ..Default::default()
    };
    assert_eq!(all_points(&data), [(1.0, 2.0), (2.0, 1.0)]);
}

/// Worst-score sentinels (`f64::MAX`), huge and tiny values and a wide range still give a
/// chart (before, `f64::MAX` made the ranges infinite and drawing never finished).
#[test]
fn extreme_values_are_drawn_or_left_out() {
    let mut data = sample();
    data.series[0].points.push((5.0, Some(f64::MAX)));
    data.series[0].points.push((6.0, Some(-1.7e308)));
    data.series[0].points.push((7.0, Some(f64::INFINITY)));
    data.series[0].points.push((8.0, Some(1e299)));
    data.series[0].points.push((9.0, Some(-1e-300)));
    data.round_bests.push((9.5, f64::MAX));
    data.baseline = Some(-1e299);
    data.target = Some(f64::MAX);
    check(&data);
    assert!(all_points(&data).iter().all(|p| p.1.abs() <= 1e300));
}

/// One wild reading is left out of the y-range and counted; a metric that reads the same
/// every time but once keeps its one real change; validated values always stay in.
#[test]
fn a_wild_reading_is_left_out_and_counted() {
    let mut data = sample();
    assert!(off_the_chart(&data).is_empty());
    data.series[1].points.push((21.0, Some(1e6)));
    assert_eq!(
        off_the_chart(&data),
        [("Researcher B".to_string(), 21.0, 1e6)]
    );
    let flat = PlotData {
        baseline: Some(10.0),
        series: vec![PlotSeries {
            label: "A".into(),
            points: [10.0, 10.0, 10.0, 10.0, 9.0, 10.0]
                .iter()
                .enumerate()
                .map(|(i, &y)| ((i + 1) as f64, Some(y)))
                .collect(),
            kept: vec![5.0],
        }],
        round_bests: vec![(6.5, 9.0)],
        ..Default::default()
    };
    assert!(off_the_chart(&flat).is_empty());
    let mut far_best = flat.clone();
    far_best.round_bests = vec![(6.5, 500.0)];
    far_best.series[0].points.push((7.0, Some(500.0)));
    assert!(
        off_the_chart(&far_best).is_empty(),
        "validated values stay in"
    );
}

fn ink(raw: &[u8], color: [u8; 3]) -> usize {
    raw.chunks(3).filter(|p| *p == color).count()
}

/// Kept readings are filled, reverted ones hollow; the title and the round labels are drawn.
#[test]
fn kept_readings_are_filled_and_the_chart_has_a_title_and_round_labels() {
    let orange = [0xE6, 0x9F, 0x00];
    let mut data = sample();
    let hollow = check(&data);
    data.series[0].kept = data.series[0].points.iter().map(|p| p.0).collect();
    let filled = check(&data);
    assert!(
        ink(&filled, orange) > ink(&hollow, orange) + 100,
        "{} {}",
        ink(&filled, orange),
        ink(&hollow, orange)
    );

    let top_ink = |raw: &[u8]| {
        raw[..(WIDTH * 60 * 3) as usize]
            .chunks(3)
            .filter(|p| *p != [255, 255, 255])
            .count()
    };
    let mut untitled = sample();
    untitled.title.clear();
    assert!(top_ink(&hollow) > top_ink(&check(&untitled)), "a title");
    let grey = [0x66, 0x66, 0x66];
    let mut unlabelled = sample();
    unlabelled.round_boundaries.clear();
    assert!(
        ink(&hollow, grey) > ink(&check(&unlabelled), grey),
        "round labels at each boundary"
    );
}

/// A conference of `n` attempts by three researchers: noisy readings drifting down, a
/// few kept, rounds of 100.
fn large(n: usize) -> PlotData {
    let mut series: Vec<PlotSeries> = ["A", "B", "C"]
        .iter()
        .map(|name| PlotSeries {
            label: format!("Researcher {name}"),
            ..Default::default()
        })
        .collect();
    for i in 0..n {
        let x = (i + 1) as f64;
        let noise = ((i * 7919) % 101) as f64 / 100.0;
        let y = (i % 13 != 5).then(|| 1.0 / (1.0 + x / 500.0) + 0.3 * noise);
        let s = &mut series[i % 3];
        s.points.push((x, y));
        if i % 37 == 0 {
            s.kept.push(x);
        }
    }
    let round_boundaries: Vec<f64> = (1..n / 100).map(|r| r as f64 * 100.0 + 0.5).collect();
    let round_bests = round_boundaries
        .iter()
        .map(|&x| (x, 1.0 / (1.0 + x / 500.0)))
        .collect();
    PlotData {
        title: "Large — val_loss by iteration".into(),
        metric: "val_loss".into(),
        minimize: true,
        target: Some(0.1),
        series,
        baseline: Some(1.0),
        round_boundaries,
        round_bests,
    }
}

/// Draws `data` and returns the RGB pixels and the plotting area.
fn drawn(data: &PlotData) -> (Vec<u8>, PixelArea) {
    ensure_font().unwrap();
    let mut buf = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    let area = draw(data, &mut buf, (WIDTH, HEIGHT)).unwrap();
    (buf, area)
}

/// Coloured pixels (not white, black or grey) outside the plotting area: only the axes,
/// their labels and the title belong there, and they are black or grey.
fn colour_outside(raw: &[u8], (xs, ys): &PixelArea) -> usize {
    (0..HEIGHT as i32)
        .flat_map(|y| (0..WIDTH as i32).map(move |x| (x, y)))
        .filter(|&(x, y)| !xs.contains(&x) || !ys.contains(&y))
        .filter(|&(x, y)| {
            let p = pixel(raw, WIDTH, x as u32, y as u32);
            p[0] != p[1] || p[1] != p[2]
        })
        .count()
}

/// At 10,000 attempts the chart aggregates: everything coloured stays inside the plotting
/// area, the round labels are thinned out, and the PNG stays small.
#[test]
fn a_chart_of_ten_thousand_attempts_stays_inside_the_plot_and_small() {
    let data = large(10_000);
    let (raw, area) = drawn(&data);
    assert_eq!(colour_outside(&raw, &area), 0, "area {area:?}");
    let png = render_png(&data).unwrap();
    assert!(png.len() < 120_000, "{} bytes", png.len());
    let (small_raw, small_area) = drawn(&sample());
    assert_eq!(colour_outside(&small_raw, &small_area), 0);
}

/// Aggregated readings: each column holds its lowest, median and highest reading, and only
/// a bounded sample of kept readings is marked.
#[test]
fn readings_are_aggregated_only_above_the_threshold() {
    let readings: Vec<(f64, f64)> = (1..=1000).map(|i| (i as f64, (i % 10) as f64)).collect();
    let columns = bins(&readings, (0.5, 1000.5));
    assert_eq!(columns.len(), BINS);
    assert!(columns
        .iter()
        .all(|&(_, _, lo, median, hi)| lo <= median && median <= hi));
    assert_eq!(columns.iter().map(|c| c.2).fold(f64::MAX, f64::min), 0.0);
    assert_eq!(columns.iter().map(|c| c.4).fold(f64::MIN, f64::max), 9.0);
    let xs: Vec<f64> = (0..1000).map(|i| i as f64).collect();
    let picked = thinned(&xs, MAX_KEPT_MARKERS);
    assert_eq!(picked.len(), MAX_KEPT_MARKERS);
    assert_eq!((picked[0], *picked.last().unwrap()), (0.0, 999.0));
    assert_eq!(thinned(&xs[..5], MAX_KEPT_MARKERS), &xs[..5]);
}

/// Time to draw the chart at 100, 1,000 and 10,000 attempts, aggregated above the
/// threshold as production does and with every reading drawn (before), in one run
/// (BENCHMARKS.md):
/// `cargo test --release --lib render::plot::tests::chart_drawing_time -- --ignored --nocapture`
#[test]
#[ignore = "a benchmark: prints figures"]
fn chart_drawing_time() {
    ensure_font().unwrap();
    let png_of = |data: &PlotData, max_drawn: usize| {
        let mut buf = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
        draw_aggregating_above(data, &mut buf, (WIDTH, HEIGHT), max_drawn).unwrap();
        encode_png_rgb(WIDTH, HEIGHT, &buf).unwrap()
    };
    for n in [100, 1_000, 10_000] {
        let data = large(n);
        for (how, max_drawn) in [
            ("as drawn", MAX_DRAWN_READINGS),
            ("every reading", usize::MAX),
        ] {
            let mut times: Vec<f64> = (0..5)
                .map(|_| {
                    let t = std::time::Instant::now();
                    std::hint::black_box(png_of(&data, max_drawn));
                    t.elapsed().as_secs_f64() * 1000.0
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let size = png_of(&data, max_drawn).len();
            println!(
                "{n:>6} attempts, {how:<13}: median {:.0} ms ({:.0}–{:.0}), {} KB",
                times[2],
                times[0],
                times[4],
                size / 1024
            );
        }
    }
}

#[test]
fn png_round_trips() {
    let (w, h) = (3u32, 2u32);
    let rgb: Vec<u8> = (0..18).collect();
    let (dw, dh, raw) = decode(&encode_png_rgb(w, h, &rgb).unwrap());
    assert_eq!((dw, dh), (w, h));
    assert_eq!(raw, rgb);
    assert_eq!(pixel(&raw, w, 1, 1), [12, 13, 14]);
}
