//! Upper bounds on conference.md's counts and durations, and bytes no setting may hold.
//!
//! A value can be well-formed and still unusable: `repeats: 1000000000` would evaluate forever,
//! `timeout: 99999999999999999h` overflows every clock, and a NUL byte cannot be passed to a
//! program. These are refused at validation, with the line and the maximum, before any conference
//! state exists. The caps are far above any real conference (documented in docs/rules.md and the
//! `init` template's comments):
//!
//! | setting | maximum |
//! | --- | --- |
//! | researcher count | 256 (what one runner was measured to carry: BENCHMARKS.md) |
//! | iterations per round, max rounds, pause every | 10000 |
//! | max total iterations | 1000000 |
//! | noise runs, evaluation repeats | 100 |
//! | every duration (timeouts, time budget) | 365d |

use super::duration::MAX_DURATION;
use super::keys::Key;

use super::parse::Document;
use super::sections::SectionKind as S;
use super::ConfigError;

/// The most researchers a conference may have: what one runner was measured to carry
/// (`bench/many_researchers.py`, BENCHMARKS.md "Many researchers on one runner": its threads,
/// open files and memory stay flat, the bookkeeping per attempt grows with the count).
pub const MAX_RESEARCHERS: u64 = 256;
/// The most rounds a conference may run.
pub const MAX_ROUNDS: u64 = 10_000;

/// (section, key, maximum) of every whole-number setting.
const COUNTS: &[(S, &str, u64)] = &[
    (S::Researchers, "Count", MAX_RESEARCHERS),
    (
        S::PreFlightGate,
        Key::ResearcherCount.name(),
        MAX_RESEARCHERS,
    ),
    (S::Researchers, Key::IterationsPerRound.name(), 10_000),
    (S::PreFlightGate, Key::IterationsPerRound.name(), 10_000),
    (S::Researchers, Key::MaxRounds.name(), MAX_ROUNDS),
    (S::PreFlightGate, Key::MaxRounds.name(), MAX_ROUNDS),
    (S::PreFlightGate, Key::PauseEvery.name(), 10_000),
    (S::Constraints, Key::PauseEvery.name(), 10_000),
    (S::PreFlightGate, Key::MaxTotalIterations.name(), 1_000_000),
    (S::Constraints, Key::MaxTotalIterations.name(), 1_000_000),
    (S::NoiseHandling, Key::NoiseRuns.name(), 100),
    (S::Evaluation, "repeats", 100),
];

/// (section, key) of every duration setting.
const DURATIONS: &[(S, &str)] = &[
    (S::Evaluation, "timeout"),
    (S::Agent, "timeout"),
    (S::Constraints, Key::TimeBudget.name()),
    (S::Constraints, Key::ResearcherTimeout.name()),
    (S::Constraints, "Lease"),
];

/// Every count above its maximum, every duration longer than [`MAX_DURATION`], every line with
/// a NUL byte.
pub fn errors(text: &str, doc: &Document) -> Vec<ConfigError> {
    let mut out = nul_bytes(text);
    for &(kind, key, max) in COUNTS {
        let Some(s) = doc.setting(kind, key) else {
            continue;
        };
        let digits = leading_digits(&s.value);
        if !digits.is_empty() && digits.parse::<u64>().map_or(true, |n| n > max) {
            out.push(ConfigError {
                line: s.line,
                message: format!(
                    "`{}: {}` is more than the maximum, {max}",
                    s.written, s.value
                ),
                hint: count_hint(key, max),
            });
        }
    }
    for &(kind, key) in DURATIONS {
        let Some(s) = doc.setting(kind, key) else {
            continue;
        };
        if super::duration::seconds_written(&s.value)
            .is_some_and(|secs| secs > MAX_DURATION.as_secs_f64())
        {
            out.push(ConfigError {
                line: s.line,
                message: format!(
                    "`{}: {}` is longer than the maximum, 365d",
                    s.written, s.value
                ),
                hint: "write a duration of at most 365d (e.g. 30m, 2h, 7d)".into(),
            });
        }
    }
    out
}

/// What to write instead of a count over its maximum; the researcher count says where its
/// maximum comes from.
fn count_hint(key: &str, max: u64) -> String {
    if max == MAX_RESEARCHERS && (key == "Count" || key == Key::ResearcherCount.name()) {
        format!(
            "write a number from 1 to {max}: one runner was measured to carry {max} researchers (BENCHMARKS.md, bench/many_researchers.py); past that, run the conference on several machines (`start --remote`, `join`)"
        )
    } else {
        format!("write a number from 1 to {max}")
    }
}

/// The number a count setting starts with (`12 rounds` → `12`).
fn leading_digits(value: &str) -> &str {
    let v = value.trim();
    &v[..v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len())]
}

fn nul_bytes(text: &str) -> Vec<ConfigError> {
    text.split('\n')
        .enumerate()
        .filter(|(_, l)| l.contains('\0'))
        .map(|(i, _)| ConfigError {
            line: i + 1,
            message: "this line holds a NUL byte (no command or setting can contain one)".into(),
            hint: "remove the NUL byte (an editor shows it as ^@ or \\0)".into(),
        })
        .collect()
}

/// Merges the bound errors into `errors`: a line refused here is refused for that reason only
/// (the generic "must be a whole number" of an overflowing value says less).
pub fn merge(errors: &mut Vec<ConfigError>, bounds: Vec<ConfigError>) {
    errors.retain(|e| e.line == 0 || !bounds.iter().any(|b| b.line == e.line));
    errors.extend(bounds);
}

#[cfg(test)]
mod tests {
    use crate::config::load;

    fn errs(text: &str) -> Vec<crate::config::ConfigError> {
        load(text).err().unwrap_or_default()
    }

    fn base() -> String {
        "# Conference: Bounds\n## Goal\nFast.\n## Mode\n- mode: metric\n## Success Metric\n\
         - metric: ms\n- target: none\n- direction: lower is better\n## Researchers\n\
         - count: 2\n- iterations_per_round: 3\n- max rounds: 2\n## Evaluation\n\
         - command: ./eval.sh\n- timeout: 5m\n- repeats: 1\n## Agent\n- command: builtin:tune\n"
            .to_string()
    }

    #[test]
    fn counts_durations_and_nul_are_bounded_with_the_line() {
        let text = base();
        assert!(load(&text).is_ok(), "{:?}", errs(&text));
        let cases = [
            ("- repeats: 1", "- repeats: 1000000000", "100"),
            ("- repeats: 1", "- repeats: 99999999999999999999999", "100"),
            ("- timeout: 5m", "- timeout: 99999999999999999h", "365d"),
            ("- timeout: 5m", "- timeout: 400d", "365d"),
            ("- command: ./eval.sh", "- command: ./eval.sh\0x", "NUL"),
            ("- count: 2", "- count: 257", "256"),
            ("- max rounds: 2", "- max rounds: 10001", "10000"),
        ];
        for (from, to, says) in cases {
            assert!(text.contains(from), "{from}");
            let bad = text.replacen(from, to, 1);
            let line = bad.lines().position(|l| l == to).unwrap() + 1;
            let e = errs(&bad);
            assert_eq!(e.len(), 1, "{to}: {e:?}");
            assert_eq!(e[0].line, line, "{to}: {e:?}");
            assert!(format!("{}", e[0]).contains(says), "{to}: {e:?}");
        }
        let ok = text.replacen("- timeout: 5m", "- timeout: 365d", 1);
        assert!(load(&ok).is_ok(), "{:?}", errs(&ok));
    }

    /// Mutated fixtures (bytes flipped, lines dropped, duplicated and swapped, values replaced by
    /// hostile ones) never make the parser and validator panic, and every error's line is one of
    /// the file's. Deterministic: the same inputs every run (the `fuzz/` target explores more).
    #[test]
    fn mutated_files_never_panic_and_errors_name_real_lines() {
        let seeds = [
            include_str!("../../tests/data/config/example.md"),
            include_str!("../../tests/data/config/original-template.md"),
            include_str!("../../fixtures/autoresearch/conference.md"),
        ];
        let hostile = [
            "99999999999999999h",
            "1000000000",
            "-1",
            "0",
            "1e309",
            "NaN",
            "inf",
            "\0",
            "\u{feff}",
            "- **Count:**",
            "## Evaluation",
            "# Conference:",
            "`",
            "**",
            "18446744073709551616",
            "1.5.5h",
            "999999999999999999999999999999d",
            "ms",
            "- frozen: ../../x",
            "### Researcher Z Focus",
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n.max(1) as u64) as usize
        };
        for round in 0..1000 {
            let seed = seeds[round % seeds.len()];
            let mut lines: Vec<String> = seed.split('\n').map(str::to_string).collect();
            for _ in 0..1 + next(4) {
                let i = next(lines.len());
                match next(6) {
                    0 => {
                        lines.remove(i);
                    }
                    1 => lines.insert(i, lines[i].clone()),
                    2 => {
                        let j = next(lines.len());
                        lines.swap(i, j);
                    }
                    3 => {
                        let line = &lines[i];
                        let cut = line.find(':').map_or(line.len(), |c| c + 1);
                        lines[i] = format!("{} {}", &line[..cut], hostile[next(hostile.len())]);
                    }
                    4 => lines[i].insert_str(0, hostile[next(hostile.len())]),
                    _ => {
                        let mut bytes = lines[i].clone().into_bytes();
                        if !bytes.is_empty() {
                            let k = next(bytes.len());
                            bytes[k] = (next(96) + 32) as u8;
                        }
                        lines[i] = String::from_utf8_lossy(&bytes).into_owned();
                    }
                }
                if lines.is_empty() {
                    lines.push(String::new());
                }
            }
            let text = lines.join("\n");
            let count = text.split('\n').count();
            if let Err(errors) = load(&text) {
                for e in &errors {
                    assert!(e.line <= count, "line {} of {count}: {e}\n{text}", e.line);
                }
            }
        }
    }
}
