//! The texts users read, pinned as snapshots (insta): the status table, the log, the poster, the
//! peer review, the synthesis and the final report of a small conference, the prompt an agent
//! gets, and error messages with their hints. A change to any of them shows up as a diff of a
//! file in `tests/e2e/snapshots/` to review (`cargo insta review`, or `INSTA_UPDATE=always`
//! and `git diff`), never silently.
//!
//! What varies from run to run is normalised by filters: commit hashes, timestamps, durations,
//! temporary paths, process ids and token figures. The conference itself is made deterministic
//! by its researchers taking turns (see [`TURNS`]).

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::{ConfigBuilder, Run, TestRepo};

const NAME: &str = "pinned";

/// The researcher of the complement fixture (A lowers a.txt, B lowers b.txt, by one each time),
/// made to take turns: two researchers run at once, and the order in which their iterations are
/// recorded would otherwise depend on which process the machine runs first. A's iteration i
/// waits until B's iteration i-1 is in the event log, B's first until A's first, B's last until
/// A has finished the round. Every prompt is copied to the git dir.
const TURNS: &str = r#"#!/bin/sh
r=$CONFERENCE_ROUND
i=$CONFERENCE_ITERATION
after() {
    n=0
    until git log --format=%s refs/conference/pinned/events | grep -q "^$1"; do
        n=$((n + 1))
        [ "$n" -lt 2000 ] || { echo "waited in vain for: $1" >&2; exit 9; }
        sleep 0.05
    done
}
case "$CONFERENCE_RESEARCHER:$i" in
A:1) ;;
A:*) after "researcher.iteration: B r$r i$((i - 1)) " ;;
B:1) after "researcher.iteration: A r$r i1 " ;;
B:*) after "researcher.finished: A finished round $r " ;;
esac
cp "$CONFERENCE_PROMPT_FILE" "$(git rev-parse --git-common-dir)/prompt-$CONFERENCE_RESEARCHER-r$r-i$i.md"
exec ./agent.sh
"#;

/// The finished conference every test here reads (run once per test binary): 2 researchers,
/// 2 iterations per round, 2 rounds. A static is never dropped, so its folder outlives the
/// run: it is made under Cargo's scratch folder for tests, where the next run removes it.
fn conference() -> &'static TestRepo {
    static CONFERENCE: OnceLock<TestRepo> = OnceLock::new();
    CONFERENCE.get_or_init(|| {
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("snapshots");
        remove_older_than_an_hour(&parent);
        let repo = TestRepo::new_in(&parent).with_fixture("complement");
        repo.write_executable("turns.sh", TURNS);
        repo.commit_all("researchers that take turns");
        let config = ConfigBuilder::new("Complement", "./turns.sh")
            .count(2)
            .iterations(2)
            .rounds(2)
            .agent_timeout("3m")
            .build();
        repo.start(NAME, &config).ok();
        repo
    })
}

/// Removes the folders in `parent` last changed over an hour ago (earlier runs' conferences; a
/// test binary running now made its own more recently).
fn remove_older_than_an_hour(parent: &Path) {
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > Duration::from_secs(3600)));
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Filters for what varies from run to run, the temporary folder of `repo` among them.
fn settings(repo: &TestRepo) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    let tmp = repo.tmp.path();
    let mut paths = vec![tmp.to_path_buf()];
    paths.extend(tmp.canonicalize().ok());
    for path in paths {
        settings.add_filter(&regex_escape(&path.display().to_string()), "[TMP]");
    }
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[TIME]");
    settings.add_filter(r"\b[0-9a-f]{7,64}\b", "[HASH]");
    settings.add_filter(r"\b\d+(\.\d+)? ?(ms|µs)\b", "[DURATION]");
    settings.add_filter(r"\b\d+\.\d+ ?s\b", "[DURATION]");
    settings.add_filter(r"\bprocess \d+\b", "process [PID]");
    settings.add_filter(
        r"\b\d[\d,]* (input |output |cached )?tokens\b",
        "[N] tokens",
    );
    settings
}

/// `text` with every character a regex treats specially escaped.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// A command's exit code, stdout and stderr, as one text.
fn shown(run: &Run) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        run.code, run.stdout, run.stderr
    )
}

/// A file of the conference's state tree, as `git show` prints it.
fn state_file(repo: &TestRepo, path: &str) -> String {
    repo.show(&format!("refs/conference/{NAME}/events"), path)
        .unwrap_or_else(|| panic!("the state tree has no {path}"))
}

#[test]
fn the_status_table_after_two_rounds_reads_as_pinned() {
    let repo = conference();
    let run = repo.conference(&["status", NAME]);
    settings(repo).bind(|| insta::assert_snapshot!(shown(&run)));
}

#[test]
fn the_log_of_two_rounds_reads_as_pinned() {
    let repo = conference();
    let run = repo.conference(&["log", NAME]);
    settings(repo).bind(|| insta::assert_snapshot!(shown(&run)));
}

#[test]
fn the_poster_of_the_first_round_reads_as_pinned() {
    let repo = conference();
    let poster = state_file(repo, "round-1/poster_session_round_1.md");
    settings(repo).bind(|| insta::assert_snapshot!(poster));
}

#[test]
fn the_peer_review_of_the_last_round_reads_as_pinned() {
    let repo = conference();
    let review = state_file(repo, "round-2/peer_review_round_2.md");
    settings(repo).bind(|| insta::assert_snapshot!(review));
}

#[test]
fn the_synthesis_reads_as_pinned() {
    let repo = conference();
    let synthesis = state_file(repo, "synthesis.md");
    settings(repo).bind(|| insta::assert_snapshot!(synthesis));
}

#[test]
fn the_final_report_reads_as_pinned() {
    let repo = conference();
    let report = state_file(repo, "final_report.md");
    settings(repo).bind(|| insta::assert_snapshot!(report));
}

/// What researcher A is told at the start of the last round: the shared knowledge and the peer
/// review of round 1, its own attempts, the endgame.
#[test]
fn the_prompt_of_a_researcher_in_the_last_round_reads_as_pinned() {
    let repo = conference();
    let prompt = repo.git_dir_file("prompt-A-r2-i1.md");
    assert!(
        !prompt.is_empty(),
        "researcher A's agent never ran in round 2"
    );
    settings(repo).bind(|| insta::assert_snapshot!(prompt));
}

#[test]
fn a_malformed_line_of_conference_md_is_refused_with_its_fix() {
    let repo = TestRepo::from_fixture("complement");
    let config = ConfigBuilder::new("Complement", "./agent.sh")
        .count(2)
        .build()
        .replace("- **Count:** 2", "- **Count:** two");
    let run = repo.start("broken", &config);
    assert_eq!(run.code, 2, "{}", run.stderr);
    settings(&repo).bind(|| insta::assert_snapshot!(shown(&run)));
}

#[test]
fn resuming_an_unknown_conference_names_the_ones_there_are() {
    let repo = conference();
    let run = repo.conference(&["resume", "nosuch"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    settings(repo).bind(|| insta::assert_snapshot!(shown(&run)));
}

#[test]
fn apply_without_a_terminal_to_confirm_on_asks_for_yes() {
    let repo = conference();
    let run = repo.conference(&["apply", NAME]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    settings(repo).bind(|| insta::assert_snapshot!(shown(&run)));
}
