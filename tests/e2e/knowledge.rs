//! The knowledge store across conferences (DESIGN.md §10): a finished conference's
//! retrospective stores what worked and what failed on `refs/conference-knowledge/store`; the next
//! conference's researchers read the relevant entries in their prompt; `knowledge
//! list/show/forget`; push and fetch carry the store between clones.

use std::path::{Path, PathBuf};

use crate::common::{daemon, TestRepo};

const KNOWLEDGE_REF: &str = "refs/conference-knowledge/store";

/// An agent that copies its prompt to `<git-common-dir>/prompt-<name>-<round>-<iteration>.md`,
/// then improves value.txt on iteration 1 and edits the frozen eval.sh afterwards.
const AGENT: &str = r##"#!/bin/sh
common=$(git rev-parse --git-common-dir)
cp "$CONFERENCE_PROMPT_FILE" "$common/prompt-$CONFERENCE_NAME-$CONFERENCE_ROUND-$CONFERENCE_ITERATION.md"
if [ "$CONFERENCE_ITERATION" = 1 ]; then
    v=$(cat value.txt)
    echo $((v - 1)) > value.txt
    echo "lower the value by one" > "$CONFERENCE_NOTE_FILE"
else
    echo "# tampered" >> eval.sh
    echo "edit the evaluation script" > "$CONFERENCE_NOTE_FILE"
fi
"##;

/// The agent script, outside the repository (so no candidate ever touches it).
fn agent(repo: &TestRepo) -> PathBuf {
    let path = repo.tmp.path().join("kagent.sh");
    std::fs::write(&path, AGENT).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

/// A one-round conference of one researcher with 3 iterations.
fn config(
    title: &str,
    goal: &str,
    metric: &str,
    allowed: &str,
    eval: &str,
    agent: &Path,
) -> String {
    format!(
        "# Conference: {title}\n\n## Goal\n{goal}\n\n## Mode\nmetric\n\n\
         ## Success Metric\n- **Metric:** {metric}\n- **Target:** none\n- **Direction:** minimize\n\n\
         ## Researchers\n- **Count:** 1\n- **Iterations per round:** 3\n- **Max rounds:** 1\n\n\
         ## Search Space\n**Allowed changes:**\n- {allowed}\n\n\
         ## Search Space Partitioning\n**Strategy:** free\n\n\
         ## Evaluation\n- command: {eval}\n- timeout: 30s\n- frozen: {}\n\n\
         ## Agent\n- command: {}\n- timeout: 30s\n",
        eval.trim_start_matches("./"),
        agent.display()
    )
}

fn first_config(agent: &Path) -> String {
    config(
        "First",
        "Lower the score of value.txt.",
        "score",
        "value.txt",
        "./eval.sh",
        agent,
    )
}

/// The prompt the researcher of `name` read at round 1, iteration 1.
fn prompt(repo: &TestRepo, name: &str) -> String {
    std::fs::read_to_string(repo.git_dir().join(format!("prompt-{name}-1-1.md")))
        .unwrap_or_else(|e| panic!("no prompt of {name}: {e}"))
}

/// The `## Knowledge from earlier conferences` section of a prompt, if any.
fn section(prompt: &str) -> Option<String> {
    let start = prompt.find("## Knowledge from earlier conferences")?;
    let rest = &prompt[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |n| n + 3);
    Some(rest[..end].to_string())
}

/// A repository with the loop fixture where conference `first` ran to its end.
fn after_first() -> (TestRepo, PathBuf) {
    let repo = TestRepo::from_fixture("loop");
    let agent = agent(&repo);
    repo.start("first", &first_config(&agent)).ok();
    (repo, agent)
}

#[test]
fn a_second_conference_is_briefed_with_the_first_ones_finding_and_failure() {
    let (repo, agent) = after_first();
    assert!(
        section(&prompt(&repo, "first")).is_none(),
        "nothing to brief the first with"
    );
    // The retrospective: one commit on the store's ref, naming the conference.
    let log = repo.git(&["log", "--format=%s", KNOWLEDGE_REF]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["retrospective: first (budget_stop, 1 rounds)"],
        "{log}"
    );
    let list = repo.conference(&["knowledge", "list"]).ok().stdout;
    assert!(
        list.contains("first-r1-A\tpattern\tfirst\tgain 1 score: lower the value by one"),
        "{list}"
    );
    assert!(
        list.contains("first-e1\terror\tfirst\t2× rejected: changes frozen path eval.sh"),
        "{list}"
    );

    // A second conference, same goal, metric and files: briefed with both.
    let second = config(
        "Second",
        "Lower the score of value.txt further.",
        "score",
        "value.txt",
        "./eval.sh",
        &agent,
    );
    repo.start("second", &second).ok();
    let brief = section(&prompt(&repo, "second")).expect("a knowledge section");
    assert!(brief.contains("- [first-r1-A] lower the value by one (conference first round 1, score minimize, gain 1; files value.txt)"), "{brief}");
    assert!(brief.contains("- [first-e1] rejected: changes frozen path eval.sh (2 attempt(s) in conference first; files eval.sh); tried: edit the evaluation script"), "{brief}");
    // Every prompt of the conference carries the same brief.
    assert_eq!(
        section(&std::fs::read_to_string(repo.git_dir().join("prompt-second-1-3.md")).unwrap()),
        Some(brief.clone())
    );
    let briefed = repo.events_named("second", "knowledge.briefed");
    assert_eq!(briefed.len(), 1);
    assert_eq!(
        briefed[0]["payload"]["entries"],
        serde_json::json!(["first-r1-A", "first-e1"])
    );
    let status = repo.conference(&["status", "second"]).ok().stdout;
    assert!(
        status.contains("Knowledge:  briefed first-r1-A, first-e1"),
        "{status}"
    );
    let report = repo
        .show("refs/conference/second/events", "final_report.md")
        .unwrap();
    assert!(
        report.contains("Briefed from earlier conferences' knowledge: first-r1-A, first-e1"),
        "{report}"
    );
    // Its own entries are not briefed to it again; its retrospective is a second commit.
    let log = repo.git(&["log", "--format=%s", KNOWLEDGE_REF]);
    assert_eq!(log.lines().count(), 2, "{log}");

    // A third with an unrelated goal, metric and files: briefed with neither.
    repo.write_executable(
        "bench.sh",
        "#!/bin/sh\necho \"latency_ms: $(cat parser.txt)\"\n",
    );
    repo.write("parser.txt", "50\n");
    repo.commit_all("parser benchmark");
    let third = config(
        "Third",
        "Speed up the JSON tokenizer.",
        "latency_ms",
        "parser.txt",
        "./bench.sh",
        &agent,
    );
    repo.start("third", &third).ok();
    assert!(
        section(&prompt(&repo, "third")).is_none(),
        "{}",
        prompt(&repo, "third")
    );
    assert!(repo.events_named("third", "knowledge.briefed").is_empty());
}

#[test]
fn a_retrospective_is_stored_once_even_when_the_run_is_killed_before_it() {
    let repo = TestRepo::from_fixture("loop");
    let agent = agent(&repo);
    repo.write("conference.md", &first_config(&agent));
    let run = repo.conference_env(
        &["start", "first"],
        &[("GIT_CONFERENCE_FAILPOINT", "retrospective.computed")],
    );
    assert_ne!(run.code, 0, "killed at the failpoint: {}", run.stderr);
    assert!(
        repo.git_run(&["rev-parse", "--verify", "-q", KNOWLEDGE_REF])
            .code
            != 0,
        "not stored yet"
    );
    repo.conference(&["resume", "first"]).ok();
    repo.conference(&["resume", "first"]).ok();
    let log = repo.git(&["log", "--format=%s", KNOWLEDGE_REF]);
    assert_eq!(log.lines().count(), 1, "stored exactly once: {log}");
}

#[test]
fn show_forget_a_hand_edit_and_a_malformed_entry() {
    let (repo, _) = after_first();
    let show = repo
        .conference(&["knowledge", "show", "first-r1-A"])
        .ok()
        .stdout;
    assert!(
        show.starts_with(
            "# pattern first-r1-A: lower the value by one\nkind: pattern\nconference: first\n"
        ),
        "{show}"
    );
    assert!(
        show.contains("(added by ") && show.contains("retrospective: first"),
        "{show}"
    );

    // A person edits the store as text: a worktree of the ref, a commit, the ref moved.
    let wt = repo.tmp.path().join("kn");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        KNOWLEDGE_REF,
    ]);
    let file = wt.join("first-r1-A.md");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "change: lower the value by one",
            "change: lower value.txt by exactly one",
        ) + "\nChecked by hand.\n",
    )
    .unwrap();
    std::fs::write(
        wt.join("first-e1.md"),
        "kind: error\nconference: first\nreason: x\ncount: many\n",
    )
    .unwrap();
    repo.git_in(&wt, &["commit", "-qam", "hand edit"]);
    let head = repo.git_in(&wt, &["rev-parse", "HEAD"]);
    repo.git(&["update-ref", KNOWLEDGE_REF, head.trim()]);
    let list = repo.conference(&["knowledge", "list"]).ok();
    assert!(
        list.stdout.contains("lower value.txt by exactly one"),
        "{}",
        list.stdout
    );
    assert!(!list.stdout.contains("first-e1"), "{}", list.stdout);
    assert!(
        list.stderr
            .contains("first-e1.md:4: `count: many` is not a count"),
        "{}",
        list.stderr
    );
    let show = repo
        .conference(&["knowledge", "show", "first-r1-A"])
        .ok()
        .stdout;
    assert!(show.contains("Checked by hand."), "{show}");

    // A malformed entry never stops a conference: it is left out, with its file and line.
    let agent = agent(&repo);
    let second = config(
        "Second",
        "Lower the score of value.txt further.",
        "score",
        "value.txt",
        "./eval.sh",
        &agent,
    );
    let run = repo.start("second", &second).ok();
    assert!(run.stderr.contains("first-e1.md:4"), "{}", run.stderr);
    assert!(section(&prompt(&repo, "second"))
        .unwrap()
        .contains("lower value.txt by exactly one"));

    // forget: a commit of its own, undone with git revert.
    let forgot = repo
        .conference(&["knowledge", "forget", "first-r1-A"])
        .ok()
        .stdout;
    assert!(
        forgot.starts_with("Forgot first-r1-A (a pattern from conference first)"),
        "{forgot}"
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", KNOWLEDGE_REF])
            .trim(),
        "knowledge: forget first-r1-A"
    );
    assert!(!repo
        .conference(&["knowledge", "list"])
        .ok()
        .stdout
        .contains("first-r1-A\t"));
    let missing = repo.conference(&["knowledge", "show", "first-r1-A"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("no knowledge entry `first-r1-A`"),
        "{}",
        missing.stderr
    );
}

/// Commits `count` pattern entries relevant to the loop fixture's conferences on the store.
fn fill_store(repo: &TestRepo, count: usize) {
    let dir = repo.tmp.path().join("many");
    std::fs::create_dir_all(&dir).unwrap();
    let long = "a long description of a change to value.txt that lowers the score ".repeat(6);
    for i in 0..count {
        let kind = if i % 2 == 0 {
            "pattern\nchange"
        } else {
            "error\nreason"
        };
        std::fs::write(
            dir.join(format!("old-{i:04}.md")),
            format!("kind: {kind}: {i} {long}\nconference: old\nmetric: score\nfiles: value.txt\ngoal: Lower the score.\n"),
        )
        .unwrap();
    }
    let index = repo.tmp.path().join("many.index");
    let with_index = |args: &[&str]| {
        let out = repo
            .command("git")
            .env("GIT_INDEX_FILE", &index)
            .arg("--work-tree")
            .arg(&dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    with_index(&["add", "-A", "."]);
    let tree = with_index(&["write-tree"]);
    let commit = repo.git(&["commit-tree", &tree, "-m", "a thousand entries"]);
    repo.git(&["update-ref", KNOWLEDGE_REF, commit.trim()]);
}

#[test]
fn a_thousand_entries_keep_the_brief_within_500_tokens() {
    let repo = TestRepo::from_fixture("loop");
    fill_store(&repo, 1000);
    assert_eq!(
        repo.conference(&["knowledge", "list"])
            .ok()
            .stdout
            .lines()
            .count(),
        1000
    );
    let agent = agent(&repo);
    repo.start("first", &first_config(&agent)).ok();
    let brief = section(&prompt(&repo, "first")).expect("briefed");
    let body = brief.split_once('\n').unwrap().1.trim_end();
    assert!(
        body.chars().count().div_ceil(4) <= 500,
        "{} characters:\n{body}",
        body.chars().count()
    );
    let entries = repo.events_named("first", "knowledge.briefed")[0]["payload"]["entries"].clone();
    let n = entries.as_array().unwrap().len();
    assert!((2..=6).contains(&n), "{entries}");
}

#[test]
fn push_and_fetch_carry_the_store_and_merge_two_clones_entries() {
    let (a, agent) = after_first();
    let base = a.tmp.path().join("served");
    std::fs::create_dir_all(&base).unwrap();
    a.git(&[
        "clone",
        "-q",
        "--bare",
        a.dir.to_str().unwrap(),
        base.join("origin.git").to_str().unwrap(),
    ]);
    let d = daemon(&a, &base);
    let url = format!("git://127.0.0.1:{}/origin.git", d.1);
    a.git(&["remote", "add", "origin", &url]);
    a.conference(&["push", "origin"]).ok();

    // Clone B runs a conference of its own, then fetches A's store: both sets of entries.
    let b = TestRepo::new();
    b.git(&["remote", "add", "origin", &url]);
    b.git(&["fetch", "-q", "origin", "main"]);
    b.git(&["checkout", "-q", "-b", "main", "FETCH_HEAD"]);
    let agent_b = agent;
    b.start(
        "bee",
        &config(
            "Bee",
            "Lower the score of value.txt.",
            "score",
            "value.txt",
            "./eval.sh",
            &agent_b,
        ),
    )
    .ok();
    let fetched = b.conference(&["fetch", "origin"]).ok();
    assert!(
        fetched
            .stdout
            .contains("Knowledge: merged origin's entries"),
        "{}",
        fetched.stdout
    );
    let list = b.conference(&["knowledge", "list"]).ok().stdout;
    for id in ["first-r1-A", "first-e1", "bee-r1-A", "bee-e1"] {
        assert!(list.contains(&format!("{id}\t")), "{id} in {list}");
    }
    // A forgets one of its entries; B pushes its merged store; A fetches: nothing lost, the
    // forget holds.
    a.conference(&["knowledge", "forget", "first-e1"]).ok();
    b.conference(&["push", "origin", "--name", "bee"]).ok();
    a.conference(&["fetch", "origin"]).ok();
    let list = a.conference(&["knowledge", "list"]).ok().stdout;
    assert!(
        list.contains("bee-r1-A\t") && list.contains("bee-e1\t") && list.contains("first-r1-A\t"),
        "{list}"
    );
    assert!(!list.contains("first-e1\t"), "the forget holds: {list}");
    let log = a.git(&["log", "--format=%s", KNOWLEDGE_REF]);
    assert!(
        log.contains("retrospective: bee") && log.contains("retrospective: first"),
        "{log}"
    );
    a.git(&["fsck", "--no-progress"]);
}

#[test]
fn the_retrospective_command_adds_prose_and_never_changes_the_data() {
    let repo = TestRepo::from_fixture("loop");
    let agent = agent(&repo);
    let prose = repo.tmp.path().join("prose.sh");
    std::fs::write(&prose, "#!/bin/sh\nread -r title\necho \"Prose for $CONFERENCE_KNOWLEDGE_ID ($CONFERENCE_ROLE), after: $title\"\necho 'change: overwritten'\n").unwrap();
    let mut perms = std::fs::metadata(&prose).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&prose, perms).unwrap();
    let config = format!(
        "{}- retrospective: {}\n",
        first_config(&agent),
        prose.display()
    );
    repo.start("first", &config).ok();
    let show = repo
        .conference(&["knowledge", "show", "first-r1-A"])
        .ok()
        .stdout;
    assert!(show.contains("change: lower the value by one\n"), "{show}");
    assert!(show.contains("\n\nProse for first-r1-A (retrospective), after: # pattern first-r1-A: lower the value by one\nchange: overwritten\n"), "{show}");
    let list = repo.conference(&["knowledge", "list"]).ok().stdout;
    assert!(
        list.contains("gain 1 score: lower the value by one"),
        "the prose is not data: {list}"
    );
}

/// The knowledge store's error entry keeps the evaluation's own error line (the last line of
/// its output that names an error, here printed before three more lines), and the next
/// conference's brief carries it: the next researchers learn why it crashed, not only that it
/// did.
#[test]
fn an_error_entry_keeps_the_evaluations_own_error_line_into_the_next_brief() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "eval.sh",
        "#!/bin/sh\nv=$(cat value.txt)\ncase \"$v\" in *[!0-9-]*)\n\
         echo 'Traceback (most recent call last):' >&2\n\
         echo '  File \"eval.py\", line 3, in <module>' >&2\n\
         echo \"ValueError: value.txt holds '$v', not a number\" >&2\n\
         echo 'cleaning up' >&2\necho 'closing the data loader' >&2\necho 'bye' >&2\n\
         exit 1;;\nesac\necho \"score: $v\"\n",
    );
    repo.write_executable(
        "boom.sh",
        "#!/bin/sh\ncommon=$(git rev-parse --git-common-dir)\n\
         cp \"$CONFERENCE_PROMPT_FILE\" \"$common/prompt-$CONFERENCE_NAME-$CONFERENCE_ROUND-$CONFERENCE_ITERATION.md\"\n\
         echo boom >value.txt\n",
    );
    repo.commit_all("a harness that says why it fails");
    let boom = repo.dir.join("boom.sh");
    let first = config(
        "First",
        "Lower the score of value.txt.",
        "score",
        "value.txt",
        "./eval.sh",
        &boom,
    )
    .replace("- frozen: eval.sh", "- frozen: eval.sh, boom.sh");
    repo.start("first", &first).ok();
    let said = "ValueError: value.txt holds 'boom', not a number";
    let entry = repo.conference(&["knowledge", "show", "first-e1"]).ok();
    assert!(
        entry.stdout.contains(&format!("\nerror: {said}\n")),
        "{}",
        entry.stdout
    );
    let second = config(
        "Second",
        "Lower the score of value.txt again.",
        "score",
        "value.txt",
        "./eval.sh",
        &boom,
    )
    .replace("- frozen: eval.sh", "- frozen: eval.sh, boom.sh");
    repo.start("second", &second).ok();
    let brief = section(&prompt(&repo, "second")).expect("a knowledge section");
    assert!(
        brief.contains("[first-e1]") && brief.contains(said),
        "{brief}"
    );
}
