//! Talking to a conference: `steer`, `answer`, `stop` from another process while it runs and
//! while it does not, the agents' `QUESTION:` lines, and human-in-the-loop mode with `approve`.
//! The researchers are shell scripts that copy each prompt they get into the git dir, and that
//! wait (for a file the test writes) where the test needs a conference mid-attempt.

use crate::common::{ConfigBuilder, TestRepo};

/// Lowers a.txt (researcher A) or b.txt (B) by one (raises it while `worsen` exists); copies its prompt to
/// `<git-dir>/prompt-<id>-r<round>-i<iteration>.md`, says it started (`started-<tag>`), waits for
/// `go-<tag>` when `hold-<tag>` exists, and appends `ask-<tag>` to its note when it exists.
const AGENT: &str = r#"#!/bin/sh
common=$(git rev-parse --git-common-dir)
tag="$CONFERENCE_RESEARCHER-r$CONFERENCE_ROUND-i$CONFERENCE_ITERATION"
cp "$CONFERENCE_PROMPT_FILE" "$common/prompt-$tag.md"
if [ -f "$common/hold-$tag" ]; then
    touch "$common/started-$tag"
    while [ ! -f "$common/go-$tag" ]; do sleep 0.05; done
fi
case "$CONFERENCE_RESEARCHER" in B) file=b.txt ;; *) file=a.txt ;; esac
v=$(cat "$file")
step=-1
if [ -f "$common/worsen" ]; then step=1; fi
n=$(awk -v v="$v" -v s="$step" 'BEGIN { print v + s }')
echo "$n" >"$file"
echo "lower $file to $n" >"$CONFERENCE_NOTE_FILE"
if [ -f "$common/ask-$tag" ]; then cat "$common/ask-$tag" >>"$CONFERENCE_NOTE_FILE"; fi
"#;

fn repo_with_agent() -> TestRepo {
    let repo = TestRepo::new().with_fixture("complement");
    repo.write_executable("talk-agent.sh", AGENT);
    repo.commit_all("the talking agent");
    repo
}

fn config(count: u32, iterations: u32, rounds: u32) -> ConfigBuilder {
    ConfigBuilder::new("Talk", "./talk-agent.sh")
        .count(count)
        .iterations(iterations)
        .rounds(rounds)
}

/// The conference's config in human-in-the-loop mode.
fn human_in_the_loop(config: &ConfigBuilder) -> String {
    let text = config.build();
    let at = text.find("- **Max rounds:**").unwrap();
    format!("{}- mode: human-in-the-loop\n{}", &text[..at], &text[at..])
}

fn touch(repo: &TestRepo, file: &str) {
    std::fs::write(repo.git_dir().join(file), "").unwrap();
}

/// Starts conference `name` in the background with `config`, and returns once the attempt
/// `tag` (held) has started.
fn start_held(repo: &TestRepo, name: &str, config: &str, tag: &str) -> std::process::Child {
    repo.write("conference.md", config);
    touch(repo, &format!("hold-{tag}"));
    repo.start_until(name, &format!("started-{tag}"))
}

fn finish(child: std::process::Child) -> (i32, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn prompt(repo: &TestRepo, tag: &str) -> String {
    repo.git_dir_file(&format!("prompt-{tag}.md"))
}

fn inbox(repo: &TestRepo) -> String {
    repo.git(&["for-each-ref", "refs/conference-inbox/"])
}

#[test]
fn steer_while_it_runs_reaches_the_next_prompt_and_the_report() {
    let repo = repo_with_agent();
    let runner = start_held(&repo, "talk", &config(1, 3, 1).build(), "A-r1-i2");
    let said = repo
        .conference(&["steer", "talk", "try a cosine schedule"])
        .ok();
    assert!(
        said.stdout
            .contains("recorded by the running conference `talk` (process"),
        "{}",
        said.stdout
    );
    // In the event log at once, while the attempt still runs.
    let log = repo.git(&["log", "--format=%s", "refs/conference/talk/events"]);
    assert!(
        log.lines()
            .next()
            .unwrap()
            .starts_with("conference.guidance: try a cosine schedule"),
        "{log}"
    );
    let status = repo.conference(&["status", "talk"]).ok().stdout;
    assert!(
        status.contains("Guidance:") && status.contains("(round 1) try a cosine schedule"),
        "{status}"
    );
    touch(&repo, "go-A-r1-i2");
    let (code, _, stderr) = finish(runner);
    assert_eq!(code, 0, "{stderr}");
    assert!(!prompt(&repo, "A-r1-i2").contains("cosine"));
    let next = prompt(&repo, "A-r1-i3");
    assert!(
        next.contains("## Guidance from the humans (newest first; follow it)\n- (round 1) try a cosine schedule"),
        "{next}"
    );
    let report = repo
        .show("refs/conference/talk/events", "final_report.md")
        .unwrap();
    assert!(
        report.contains("## Guidance given (newest first)")
            && report.contains("try a cosine schedule"),
        "{report}"
    );
    assert_eq!(inbox(&repo), "", "the request is gone once recorded");
    let guidance = repo.events_named("talk", "conference.guidance");
    assert_eq!(guidance.len(), 1);
    assert_eq!(guidance[0]["payload"]["text"], "try a cosine schedule");
}

#[test]
fn questions_stand_in_status_and_report_and_answers_reach_the_next_prompt() {
    let repo = repo_with_agent();
    std::fs::write(
        repo.git_dir().join("ask-A-r1-i1"),
        "QUESTION: may I change the tokenizer?\n",
    )
    .unwrap();
    std::fs::write(
        repo.git_dir().join("ask-A-r1-i2"),
        "QUESTION: is a.txt the only file that matters?\n",
    )
    .unwrap();
    let runner = start_held(&repo, "talk", &config(1, 2, 2).build(), "A-r1-i2");
    let status = repo.conference(&["status", "talk"]).ok().stdout;
    let first = status.lines().next().unwrap();
    assert!(first.starts_with("Open questions (1;"), "{status}");
    assert!(
        status.contains("  Q1 (researcher A, round 1): may I change the tokenizer?"),
        "{status}"
    );
    let said = repo
        .conference(&["answer", "talk", "Q1", "no, keep the tokenizer"])
        .ok();
    assert!(
        said.stdout.contains("answer to Q1: recorded"),
        "{}",
        said.stdout
    );
    touch(&repo, "go-A-r1-i2");
    let (code, _, stderr) = finish(runner);
    assert_eq!(code, 0, "{stderr}");
    // The note's description keeps no question line.
    let iteration = &repo.events_named("talk", "researcher.iteration")[0];
    assert_eq!(iteration["payload"]["description"], "lower a.txt to 9");
    assert_eq!(
        iteration["payload"]["questions"][0]["text"],
        "may I change the tokenizer?"
    );
    assert!(!prompt(&repo, "A-r1-i2").contains("keep the tokenizer"));
    let next = prompt(&repo, "A-r2-i1");
    assert!(
        next.contains("- Q1 (researcher A, round 1): may I change the tokenizer?\n  Answer: no, keep the tokenizer"),
        "{next}"
    );
    assert!(
        next.contains("end your note with a line `QUESTION: …`"),
        "{next}"
    );
    let status = repo.conference(&["status", "talk"]).ok().stdout;
    assert!(status.starts_with("Open questions (1;"), "{status}");
    assert!(!status.contains("  Q1 "), "Q1 is answered: {status}");
    assert!(
        status.contains("  Q2 (researcher A, round 1): is a.txt"),
        "{status}"
    );
    let report = repo
        .show("refs/conference/talk/events", "final_report.md")
        .unwrap();
    let open = report
        .find("## Open questions from the researchers")
        .unwrap();
    assert!(
        open < report.find("## Rounds").unwrap(),
        "at the top: {report}"
    );
    assert!(report.contains("- Q2 (researcher A, round 1): is a.txt the only file that matters?"));
    assert!(report.contains("## Questions answered"), "{report}");
    let answered = repo.events_named("talk", "question.answered");
    assert_eq!(answered[0]["payload"]["question"], "Q1");
}

#[test]
fn stop_from_another_process_pauses_gracefully_and_resume_completes() {
    let repo = repo_with_agent();
    let runner = start_held(&repo, "talk", &config(1, 3, 1).build(), "A-r1-i2");
    let said = repo.conference(&["stop", "talk"]).ok();
    assert!(
        said.stdout.contains("stop (after the running attempts"),
        "{}",
        said.stdout
    );
    let status = repo.conference(&["status", "talk"]).ok().stdout;
    assert!(status.contains("Stopping:"), "{status}");
    touch(&repo, "go-A-r1-i2");
    let (code, stdout, stderr) = finish(runner);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(
        stdout.contains("Conference `talk` paused: stopped by `git conference stop`; continue with `git conference resume talk`"),
        "{stdout}"
    );
    // The running attempt finished and was recorded; the next one never started.
    let st = repo.status_json("talk");
    assert_eq!(st["total_iterations"], 2);
    assert_eq!(st["status"], "paused");
    assert_eq!(st["waiting"]["kind"], "stop");
    assert!(prompt(&repo, "A-r1-i3").is_empty());
    let subjects = repo.event_subjects("talk");
    let stop = subjects
        .iter()
        .position(|s| s.starts_with("conference.stop_requested"))
        .unwrap();
    let iteration = subjects
        .iter()
        .rposition(|s| s.starts_with("researcher.iteration"))
        .unwrap();
    let paused = subjects
        .iter()
        .position(|s| s.starts_with("conference.paused"))
        .unwrap();
    assert!(stop < iteration && iteration < paused, "{subjects:#?}");
    let resumed = repo.conference(&["resume", "talk"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let report = repo
        .show("refs/conference/talk/events", "final_report.md")
        .unwrap();
    assert!(
        report.contains("- round 1: paused, stopped by `git conference stop`"),
        "{report}"
    );
    let st = repo.status_json("talk");
    assert_eq!(st["total_iterations"], 3);
    assert_eq!(st["status"], "completed");
    assert!(st.get("stop_requested").is_none());
}

#[test]
fn steer_and_answer_when_nothing_runs_are_recorded_at_once() {
    let repo = repo_with_agent();
    // Agentic: even a blocking question never makes the loop wait.
    std::fs::write(
        repo.git_dir().join("ask-A-r1-i1"),
        "QUESTION (blocking): more data?\n",
    )
    .unwrap();
    repo.start("talk", &config(1, 1, 1).build()).ok();
    assert!(repo.events_named("talk", "conference.paused").is_empty());
    let said = repo
        .conference(&["steer", "talk", "prefer small steps"])
        .ok();
    assert!(
        said.stdout
            .contains("guidance: recorded in the event log of `talk`"),
        "{}",
        said.stdout
    );
    let answered = repo.conference(&["answer", "talk", "q1", "not yet"]).ok();
    assert!(
        answered.stdout.contains("answer to Q1: recorded"),
        "{}",
        answered.stdout
    );
    let st = repo.status_json("talk");
    assert_eq!(st["guidance"][0]["text"], "prefer small steps");
    assert_eq!(st["questions"][0]["answer"], "not yet");
    assert_eq!(inbox(&repo), "");
    let stopped = repo.conference(&["stop", "talk"]).ok();
    assert!(
        stopped.stdout.contains("is not running: nothing to stop"),
        "{}",
        stopped.stdout
    );
    repo.git(&["fsck", "--no-progress"]);
}

#[test]
fn a_request_left_in_the_inbox_is_recorded_once_by_the_next_process() {
    let repo = repo_with_agent();
    repo.start("talk", &config(1, 1, 1).build()).ok();
    // A command killed after it wrote its request, before anything recorded it.
    let request = |id: &str, text: &str| {
        let json = format!(
            r#"{{"id":"{id}","requested_at":"2026-01-01T00:00:00Z","action":"steer","text":"{text}"}}"#
        );
        let tree = repo.git(&["hash-object", "-t", "tree", "/dev/null"]);
        let commit = repo.git(&[
            "commit-tree",
            tree.trim(),
            "-m",
            &format!("git conference steer\n\n{json}"),
        ]);
        repo.git(&[
            "update-ref",
            &format!("refs/conference-inbox/talk/{id}"),
            commit.trim(),
        ]);
    };
    request("00000000000000000001-1-0", "left behind");
    repo.conference(&["steer", "talk", "second"]).ok();
    let texts: Vec<String> = repo
        .events_named("talk", "conference.guidance")
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, ["left behind", "second"]);
    // Killed after the event, before the delete: the next process deletes it, records nothing.
    request("00000000000000000001-1-0", "left behind");
    repo.conference(&["steer", "talk", "third"]).ok();
    assert_eq!(repo.events_named("talk", "conference.guidance").len(), 3);
    assert_eq!(inbox(&repo), "");
}

#[test]
fn unknown_questions_and_conferences_are_usage_errors() {
    let repo = repo_with_agent();
    repo.start("talk", &config(1, 1, 1).build()).ok();
    let q = repo.conference(&["answer", "talk", "Q9", "yes"]);
    assert_eq!(q.code, 2, "{}", q.stderr);
    assert!(
        q.stderr
            .contains("conference `talk` has no question `Q9`; it has no open question"),
        "{}",
        q.stderr
    );
    for args in [
        vec!["steer", "nope", "x"],
        vec!["answer", "nope", "Q1", "x"],
        vec!["stop", "nope"],
        vec!["approve", "nope"],
    ] {
        let run = repo.conference(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr
                .contains("no conference named `nope`; this repository has: talk"),
            "{}",
            run.stderr
        );
    }
    let empty = repo.conference(&["steer", "talk", "  "]);
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    let approve = repo.conference(&["approve", "talk"]);
    assert_eq!(approve.code, 2, "{}", approve.stderr);
    assert!(
        approve
            .stderr
            .contains("is agentic: it never waits for an approval"),
        "{}",
        approve.stderr
    );
    assert_eq!(repo.events_named("talk", "conference.guidance").len(), 0);
}

#[test]
fn human_in_the_loop_pauses_before_transfer_and_approve_drop_b_keeps_b_off_best() {
    let repo = repo_with_agent();
    let first = repo.start("talk", &human_in_the_loop(&config(2, 1, 1)));
    assert_eq!(first.code, 3, "{}{}", first.stdout, first.stderr);
    let question = "waits for approval of round 1's candidates for best: A (validated, gain 1.000000: lower a.txt to 9); B (validated, gain 1.000000: lower b.txt to 9)";
    assert!(first.stdout.contains(question), "{}", first.stdout);
    assert!(first
        .stdout
        .contains("`git conference approve talk` (leave one out with `--drop A`)"));
    let status = repo.conference(&["status", "talk"]).ok().stdout;
    assert!(
        status.starts_with(&format!("Waiting:    {question}")),
        "{status}"
    );
    // Without the approval, resume asks again.
    let again = repo.conference(&["resume", "talk"]);
    assert_eq!(again.code, 3, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.contains(question), "{}", again.stdout);
    let unknown = repo.conference(&["approve", "talk", "--drop", "C"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("the candidates are: A, B"),
        "{}",
        unknown.stderr
    );
    let approved = repo.conference(&["approve", "talk", "--drop", "B"]).ok();
    assert!(
        approved.stdout.contains("approval without B"),
        "{}",
        approved.stdout
    );
    let done = repo.conference(&["resume", "talk"]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let base = repo.status_json("talk")["baseline_commit"]
        .as_str()
        .unwrap()
        .to_string();
    let changed = repo.git(&["diff", "--name-only", &base, "conference/talk/best"]);
    assert_eq!(changed, "a.txt\n", "only A's finding is on best");
    assert_eq!(repo.show("conference/talk/best", "b.txt").unwrap(), "10\n");
    let paused = repo.events_named("talk", "conference.paused");
    assert_eq!(paused.len(), 2);
    assert!(paused
        .iter()
        .all(|p| p["payload"]["waits_for"]["kind"] == "approval"));
    let decision = &repo.events_named("talk", "transfer.approved")[0]["payload"];
    assert_eq!(decision["approved"], serde_json::json!(["A"]));
    assert_eq!(decision["dropped"], serde_json::json!(["B"]));
    let picks = repo.events_named("talk", "transfer.pick");
    let b = picks
        .iter()
        .find(|p| p["payload"]["researcher"] == "B")
        .unwrap();
    assert_eq!(b["payload"]["result"], "dropped");
    assert!(b["payload"]["reason"]
        .as_str()
        .unwrap()
        .contains("approve talk --drop B"));
    let report = repo
        .show("refs/conference/talk/events", "final_report.md")
        .unwrap();
    assert!(
        report.contains("- round 1: candidates for best approved, dropped B"),
        "{report}"
    );
    assert!(report.contains("## Pauses and decisions"), "{report}");
    let paused = "- round 1: paused, waits for approval of round 1's candidates";
    assert_eq!(report.matches(paused).count(), 2, "{report}");
}

#[test]
fn human_in_the_loop_waits_for_the_answer_to_a_blocking_question() {
    let repo = repo_with_agent();
    std::fs::write(
        repo.git_dir().join("ask-A-r1-i1"),
        "QUESTION (blocking): may I edit eval.sh?\n",
    )
    .unwrap();
    let first = repo.start("talk", &human_in_the_loop(&config(1, 2, 1)));
    assert_eq!(first.code, 3, "{}{}", first.stdout, first.stderr);
    assert!(
        first.stdout.contains(
            "waits for the answer to Q1 (researcher A, round 1): \"may I edit eval.sh?\""
        ),
        "{}",
        first.stdout
    );
    assert_eq!(repo.status_json("talk")["total_iterations"], 1);
    let again = repo.conference(&["resume", "talk"]);
    assert_eq!(again.code, 3, "{}", again.stdout);
    assert!(
        again.stdout.contains("waits for the answer to Q1"),
        "{}",
        again.stdout
    );
    assert_eq!(
        repo.status_json("talk")["total_iterations"],
        1,
        "nothing ran"
    );
    repo.conference(&["answer", "talk", "Q1", "no"]).ok();
    let next = repo.conference(&["resume", "talk"]);
    assert_eq!(next.code, 3, "then the approval: {}", next.stdout);
    assert!(
        next.stdout.contains("waits for approval"),
        "{}",
        next.stdout
    );
    assert!(prompt(&repo, "A-r1-i2").contains("Answer: no"));
    assert!(prompt(&repo, "A-r1-i2").contains("`QUESTION (blocking): …`"));
    repo.conference(&["approve", "talk"]).ok();
    let done = repo.conference(&["resume", "talk"]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let kinds: Vec<String> = repo
        .events_named("talk", "conference.paused")
        .iter()
        .map(|p| {
            p["payload"]["waits_for"]["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["answer", "answer", "approval"]);
}

#[test]
fn human_in_the_loop_pauses_once_when_every_researcher_is_stalled() {
    let repo = repo_with_agent();
    touch(&repo, "worsen");
    let first = repo.start("talk", &human_in_the_loop(&config(1, 5, 2)));
    assert_eq!(first.code, 3, "{}{}", first.stdout, first.stderr);
    assert!(
        first.stdout.contains("every researcher is stalled after round 1: steer them (`git conference steer talk \"…\"`)"),
        "{}",
        first.stdout
    );
    let waiting = &repo.status_json("talk")["waiting"];
    assert_eq!(waiting["kind"], "stalled");
    std::fs::remove_file(repo.git_dir().join("worsen")).unwrap();
    repo.conference(&["steer", "talk", "lower a.txt instead"])
        .ok();
    let done = repo.conference(&["resume", "talk"]);
    assert_eq!(
        done.code, 3,
        "round 2 has a finding to approve: {}{}",
        done.stdout, done.stderr
    );
    assert!(
        done.stdout.contains("waits for approval of round 2"),
        "{}",
        done.stdout
    );
    assert!(prompt(&repo, "A-r2-i1").contains("lower a.txt instead"));
}

#[test]
fn a_misspelled_or_invalid_mode_is_refused_with_its_line() {
    let repo = repo_with_agent();
    let text = human_in_the_loop(&config(1, 1, 1));
    for (written, says) in [
        (
            "- mdoe: human-in-the-loop",
            "unknown key `mdoe` in `## Researchers`",
        ),
        ("- mode: sometimes", "must be agentic or human-in-the-loop"),
    ] {
        let bad = text.replace("- mode: human-in-the-loop", written);
        let line = bad.lines().position(|l| l == written).unwrap() + 1;
        let run = repo.start("talk", &bad);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(says), "{}", run.stderr);
        assert!(run.stderr.contains(&format!(":{line}")), "{}", run.stderr);
    }
}

#[test]
fn clean_all_removes_requests_left_in_the_inbox() {
    let repo = repo_with_agent();
    repo.start("talk", &config(1, 1, 1).build()).ok();
    let tree = repo.git(&["hash-object", "-t", "tree", "/dev/null"]);
    let commit = repo.git(&[
        "commit-tree",
        tree.trim(),
        "-m",
        "git conference stop\n\n{}",
    ]);
    repo.git(&[
        "update-ref",
        "refs/conference-inbox/talk/1-1-0",
        commit.trim(),
    ]);
    repo.conference(&["clean", "--all", "talk"]).ok();
    assert_eq!(inbox(&repo), "");
}

#[test]
fn human_in_the_loop_is_refused_on_several_machines_and_nothing_is_kept() {
    let repo = repo_with_agent();
    repo.bare_origin();
    repo.write("conference.md", &human_in_the_loop(&config(1, 1, 1)));
    let run = repo.conference(&["start", "talk", "--remote", "origin", "--yes"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is in human-in-the-loop mode")
            && run.stderr.contains("- mode: agentic"),
        "{}",
        run.stderr
    );
    assert_eq!(repo.git(&["for-each-ref", "refs/conference/"]), "");
}
