//! End-to-end tests of pruning (issue 27): an evaluation that prints a learning curve, a scripted
//! researcher whose attempts are clearly worse early, and `- prune: on`. The real binary runs as
//! `git conference …` through the real `git`; verdicts and curves are read from the event log and
//! with `git notes`, and whether an evaluation ran to its end from a log the evaluation itself
//! writes outside every worktree.

use crate::common;

use common::{line_of, ConfigBuilder, TestRepo};
use serde_json::Value;

/// Steps the fixture's evaluation prints, and the seconds it sleeps after each.
const STEPS: u32 = 8;
const STEP_S: f64 = 0.3;

/// A repository whose evaluation prints `score@step=S: v + (8 - S) * k` for S = 1..8 (a
/// learning curve that ends at `v`; value.txt holds `v` or `v,k`, k 0.2 by default), then
/// `score: v`; it logs `start`
/// and `end` lines (researcher, round, iteration, value) to `<git dir>/runs`, so a run stopped
/// early has a start and no end. `agent.sh 1-1:9 1-2:3` writes 9 into value.txt at round 1
/// iteration 1, 3 at iteration 2, and changes nothing otherwise.
fn curve_repo() -> TestRepo {
    curve_repo_logging_to(r#""$(git rev-parse --git-common-dir)/runs""#)
}

/// [`curve_repo`] whose evaluation logs its runs to `runs` (a word for `sh`) instead, and each
/// run's process id as `pid <pid> <who>` (for evaluations that run outside a worktree).
fn curve_repo_logging_to(runs: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write_executable(
        "eval.sh",
        &format!(
            r#"#!/bin/sh
runs={runs}
v=$(cut -d, -f1 value.txt)
slope=$(cut -s -d, -f2 value.txt)
[ -n "$slope" ] || slope=0.2
who="${{CONFERENCE_RESEARCHER-}} ${{CONFERENCE_ROUND-}} ${{CONFERENCE_ITERATION-}} $v"
echo "start $who" >>"$runs"
echo "pid $$ $who" >>"$runs"
s=1
while [ $s -le {STEPS} ]; do
    awk -v v="$v" -v s=$s -v k="$slope" 'BEGIN {{ printf "score@step=%d: %g\n", s, v + ({STEPS} - s) * k }}'
    sleep {STEP_S}
    s=$((s + 1))
done
echo "end $who" >>"$runs"
echo "score: $v"
"#
        ),
    );
    repo.write_executable(
        "agent.sh",
        r#"#!/bin/sh
for step in "$@"; do
    if [ "${step%%:*}" = "$CONFERENCE_ROUND-$CONFERENCE_ITERATION" ]; then
        echo "${step#*:}" >value.txt
        echo "value ${step#*:}" >"$CONFERENCE_NOTE_FILE"
    fi
done
"#,
    );
    repo.write("value.txt", "5\n");
    repo.commit_all("a training that prints its curve");
    repo
}

/// The conference.md of `curve_repo` with `evaluation` added under `## Evaluation`.
fn config(title: &str, plan: &str, evaluation: &str) -> String {
    let mut builder = ConfigBuilder::new(title, &format!("./agent.sh {plan}"))
        .iterations(2)
        .frozen("eval.sh, agent.sh");
    builder.eval_timeout = "60s".into();
    builder.build().replace(
        "- frozen: eval.sh, agent.sh\n",
        &format!("- frozen: eval.sh, agent.sh\n{evaluation}"),
    )
}

/// The lines of the fixture's run log.
fn runs(repo: &TestRepo) -> Vec<String> {
    lines(&repo.git_dir_file("runs"))
}

/// The run log's lines, without the `pid` lines.
fn lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| !l.starts_with("pid "))
        .map(str::to_string)
        .collect()
}

/// Researcher A's iteration events of a conference (round, iteration).
fn iteration(repo: &TestRepo, name: &str, round: u64, iteration: u64) -> Value {
    repo.events_named(name, "researcher.iteration")
        .into_iter()
        .find(|e| e["payload"]["round"] == round && e["payload"]["iteration"] == iteration)
        .unwrap_or_else(|| panic!("no iteration r{round} i{iteration}"))["payload"]
        .clone()
}

/// The note the attempt itself wrote on its commit (a review may add a line), read with
/// `git notes`.
fn note(repo: &TestRepo, payload: &Value) -> Value {
    let commit = payload["commit"].as_str().expect("the attempt's commit");
    let notes = repo.notes(commit);
    notes
        .into_iter()
        .find(|n| n["iteration"] == payload["iteration"])
        .expect("the attempt's note")
}

fn curve(note: &Value) -> Vec<(u64, f64)> {
    note["curve"]
        .as_array()
        .map(|points| {
            points
                .iter()
                .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs whose log has a start but no end (stopped early), by who ran them.
fn unfinished(repo: &TestRepo) -> Vec<String> {
    unfinished_in(&runs(repo))
}

fn unfinished_in(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .filter(|who| !lines.iter().any(|l| l.strip_prefix("end ") == Some(who)))
        .map(str::to_string)
        .collect()
}

/// With `prune: on`, an attempt clearly worse than the researcher's best's curve after the
/// warmup is stopped early and recorded as `pruned` with the step, its reading and the best's;
/// the process really stops (its end marker is never written, its evaluation time is short),
/// and the baseline and the review's readings, worse than the best, run to their end.
#[test]
fn a_run_behind_the_best_is_stopped_and_recorded_as_pruned() {
    let repo = curve_repo();
    repo.start("prune", &config("Prune", "1-1:9 1-2:3", "- prune: on\n"))
        .ok();

    let pruned = iteration(&repo, "prune", 1, 1);
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    assert_eq!(pruned["metric_value"], Value::Null, "{pruned}");
    // That it ended early is read from what it left (below: it never wrote its end), not from
    // its duration, which the machine's load stretches.
    eprintln!(
        "the pruned run took {}s of a {}s evaluation",
        pruned["eval_s"],
        STEPS as f64 * STEP_S
    );
    let n = note(&repo, &pruned);
    assert_eq!(n["verdict"], "pruned", "{n}");
    // The warmup (2 readings) first: at step 2 it reads 9 + 6 * 0.2 against the baseline's 6.2.
    assert_eq!(n["pruned"]["step"], 2, "{n}");
    assert!(
        (n["pruned"]["value"].as_f64().unwrap() - 10.2).abs() < 1e-9,
        "{n}"
    );
    assert!(
        (n["pruned"]["reference"].as_f64().unwrap() - 6.2).abs() < 1e-9,
        "{n}"
    );
    assert_eq!(curve(&n).len(), 2, "{n}");
    let reason = n["reason"].as_str().unwrap();
    assert!(
        reason.contains("at step 2") && reason.contains("10.2"),
        "{reason}"
    );

    // Stopped for real: the run of attempt 1 never wrote its end; every other run did.
    assert_eq!(unfinished(&repo), ["A 1 1 9"], "{:?}", runs(&repo));
    // The review read the round start (5, worse than the best's 3) in full, as did the baseline.
    let review_runs = runs(&repo)
        .iter()
        .filter(|l| l.starts_with("end review") && l.ends_with(" 5"))
        .count();
    assert!(review_runs >= 1, "{:?}", runs(&repo));

    // The better attempt ran to its end and its note holds the whole curve.
    let kept = iteration(&repo, "prune", 1, 2);
    assert_eq!(kept["status"], "kept", "{kept}");
    let n = note(&repo, &kept);
    assert_eq!(curve(&n).len(), STEPS as usize, "{n}");
    assert_eq!(curve(&n)[0], (1, 3.0 + 7.0 * 0.2), "{n}");

    // `status`, `log` and the state count it as a verdict of its own.
    let status = repo.conference(&["status", "prune"]).ok().stdout;
    assert!(status.contains("pruned"), "{status}");
    let st = repo.status_json("prune");
    assert_eq!(st["researchers"]["A"]["counts"]["pruned"], 1, "{st}");
    assert_eq!(st["researchers"]["A"]["counts"]["reverted"], 0, "{st}");
    let tsv = repo
        .conference(&["log", "prune", "--format", "tsv"])
        .ok()
        .stdout;
    let row = tsv.lines().find(|l| l.contains("\tpruned\t")).expect(&tsv);
    assert!(row.contains("[pruned: at step 2"), "{row}");
}

/// Through a launcher other than `local` the stop goes through the launcher's cancel: here the
/// `command` launcher with a small submitter script (it runs the staged tree where it is, as a
/// job runner would, and streams the run's output back). The attempt behind the best is
/// `pruned` while it runs (the submitter's stdout is tailed here), and its process really ended
/// early; the better attempt ran in full.
#[test]
fn a_run_through_the_command_launcher_is_pruned_and_ends_early() {
    let tmp = tempfile::tempdir().unwrap();
    let submitted = tmp.path().join("submitted");
    let submitter = tmp.path().join("submit.sh");
    std::fs::write(
        &submitter,
        format!(
            "#!/bin/sh\n# submit.sh DIR -- COMMAND…: runs COMMAND in DIR\ndir=$1; shift 2\necho \"$dir\" >>{}\ncd \"$dir\" && exec \"$@\"\n",
            submitted.display()
        ),
    )
    .unwrap();
    let staging = tmp.path().join("staging");
    let environment = format!(
        "- launcher: command\n- launch: sh {} {{dir}} -- env {{env}} {{command}}\n- staging: {}\n",
        submitter.display(),
        staging.display()
    );
    pruned_through("command", &environment, &[], tmp.path());
    // Every evaluation went through the submitter, in a staged tree.
    let dirs = std::fs::read_to_string(&submitted).unwrap();
    assert!(dirs.lines().count() >= 3, "{dirs}");
    assert!(
        dirs.lines()
            .all(|d| d.starts_with(&*staging.to_string_lossy())),
        "{dirs}"
    );
}

/// The same through ssh on a real OpenSSH server: the host streams the run's output back as it
/// runs, the run is pruned and its process group on the host killed.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn a_run_on_an_ssh_host_is_pruned_and_ends_early() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = crate::launchers::servers::SshHosts::start(tmp.path(), 1);
    pruned_through("ssh", &hosts.environment(""), &[], tmp.path());
    assert!(std::fs::read_dir(hosts.staging(0))
        .unwrap()
        .next()
        .is_none());
}

/// The same on a real single-node Slurm cluster: the wrapper's output on the shared staging
/// folder is tailed while the job runs, and the job is cancelled (`scancel`): none is left.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn a_slurm_job_is_pruned_and_ends_early() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = crate::launchers::servers::Slurm::start(tmp.path());
    let environment = slurm.environment(&tmp.path().join("staging"), "");
    let conf = slurm.conf.display().to_string();
    pruned_through("slurm", &environment, &[("SLURM_CONF", &conf)], tmp.path());
    assert_eq!(slurm.jobs(), "");
}

/// Runs `curve_repo`'s pruning conference with `environment` as `## Environment` and `env` in
/// the runner's environment (its run log in `tmp`) and checks that attempt 1 was pruned at step 2 through `launcher`, that its process
/// really ended early (it never wrote its end, every other run did, and it is gone), and that the
/// better attempt ran in full.
fn pruned_through(launcher: &str, environment: &str, env: &[(&str, &str)], tmp: &std::path::Path) {
    let log = tmp.join("runs");
    let repo = curve_repo_logging_to(&format!("'{}'", log.display()));
    let text = format!(
        "{}\n## Environment\n{environment}",
        config("Launched", "1-1:9 1-2:3", "- prune: on\n"),
    );
    repo.write("conference.md", &text);
    repo.conference_env(&["start", "launched"], env).ok();

    let pruned = iteration(&repo, "launched", 1, 1);
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    assert_eq!(pruned["placement"]["launcher"], launcher, "{pruned}");
    // That it ended early is read from what it left (below: it never wrote its end), not from
    // its duration, which the machine's load stretches.
    eprintln!(
        "the pruned run took {}s of a {}s evaluation",
        pruned["eval_s"],
        STEPS as f64 * STEP_S
    );
    let n = note(&repo, &pruned);
    assert_eq!(n["pruned"]["step"], 2, "{n}");
    assert_eq!(curve(&n).len(), 2, "{n}");

    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(unfinished_in(&lines(&text)), ["A 1 1 9"], "{text}");
    let pid = text
        .lines()
        .find_map(|l| l.strip_suffix(" A 1 1 9")?.strip_prefix("pid "))
        .expect(&text);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    assert!(
        stat.is_err() || stat.is_ok_and(|s| s.contains(") Z ")),
        "the pruned run's process {pid} still runs"
    );
    let kept = iteration(&repo, "launched", 1, 2);
    assert_eq!(kept["status"], "kept", "{kept}");
    assert_eq!(curve(&note(&repo, &kept)).len(), STEPS as usize);
}

/// Pruning is off by default: the same attempt runs to its end and is reverted (its curve is
/// still recorded); a warmup longer than the curve never prunes either.
#[test]
fn without_prune_on_or_within_the_warmup_nothing_is_pruned() {
    let repo = curve_repo();
    repo.start("off", &config("Off", "1-1:9 1-2:3", "")).ok();
    let attempt = iteration(&repo, "off", 1, 1);
    assert_eq!(attempt["status"], "reverted", "{attempt}");
    assert_eq!(curve(&note(&repo, &attempt)).len(), STEPS as usize);
    assert!(unfinished(&repo).is_empty(), "{:?}", runs(&repo));

    let warm = config("Warm", "1-1:9 1-2:3", "- prune: on\n- prune warmup: 20\n");
    repo.start("warm", &warm).ok();
    let attempt = iteration(&repo, "warm", 1, 1);
    assert_eq!(attempt["status"], "reverted", "{attempt}");
    assert!(unfinished(&repo).is_empty(), "{:?}", runs(&repo));
}

/// Curves that cross: a slow starter (behind the best at step 2, but improving fast enough to
/// end better) runs to its end and is kept with `prune: on`; `prune: early` stops it at step 2.
#[test]
fn a_slow_starter_goes_on_unless_prune_is_early() {
    let repo = curve_repo();
    // 4 + 6 × 1.0 = 10 at step 2, against the baseline's 6.2 there; it ends at 4 (< 5).
    repo.start("on", &config("On", "1-1:4,1.0", "- prune: on\n"))
        .ok();
    let attempt = iteration(&repo, "on", 1, 1);
    assert_eq!(attempt["status"], "kept", "{attempt}");
    assert!(unfinished(&repo).is_empty(), "{:?}", runs(&repo));

    let repo = curve_repo();
    repo.start("early", &config("Early", "1-1:4,1.0", "- prune: early\n"))
        .ok();
    let attempt = iteration(&repo, "early", 1, 1);
    assert_eq!(attempt["status"], "pruned", "{attempt}");
    assert_eq!(note(&repo, &attempt)["pruned"]["step"], 2);
    assert_eq!(unfinished(&repo), ["A 1 1 4"], "{:?}", runs(&repo));
}

/// A pruned attempt is not the tree evaluated: when the same tree comes back (here after
/// `resume` with pruning turned off), it is evaluated in full, not answered from the cache.
#[test]
fn a_pruned_tree_is_evaluated_again_in_full() {
    let repo = curve_repo();
    let text = config("Again", "1-1:9 1-2:3 2-1:9", "- prune: on\n");
    repo.start("again", &text).ok();
    assert_eq!(iteration(&repo, "again", 1, 1)["status"], "pruned");

    let text = text
        .replace("- prune: on\n", "- prune: off\n")
        .replace("**Max rounds:** 1", "**Max rounds:** 2");
    repo.write("conference.md", &text);
    repo.conference(&["resume", "again"]).ok();
    let again = iteration(&repo, "again", 2, 1);
    assert_eq!(again["tree"], iteration(&repo, "again", 1, 1)["tree"]);
    assert_eq!(again["status"], "reverted", "{again}");
    assert_eq!(again["metric_value"].as_f64(), Some(9.0), "{again}");
    assert!(
        runs(&repo).contains(&"end A 2 1 9".to_string()),
        "{:?}",
        runs(&repo)
    );
}

/// Readings are never the metric: an evaluation that prints only readings has none, and the
/// reason says what to print.
#[test]
fn readings_alone_are_no_metric() {
    let repo = curve_repo();
    let eval = std::fs::read_to_string(repo.dir.join("eval.sh")).unwrap();
    repo.write_executable("eval.sh", &eval.replace("echo \"score: $v\"\n", ""));
    repo.commit_all("no final reading");
    let run = repo.start("bare", &config("Bare", "1-1:9", "- prune: on\n"));
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("printed readings at steps, which are progress, not the metric")
            && run.stderr.contains("score@step=8: 5"),
        "{}",
        run.stderr
    );
}

/// A misspelled, misplaced or invalid pruning setting stops `start` with exit 2, its line and
/// what to write.
#[test]
fn pruning_settings_are_checked() {
    let repo = curve_repo();
    let good = config("Bad", "1-1:9", "- prune: on\n");
    let cases = [
        (
            "- prune: on\n",
            "- prune: maybe\n",
            "- prune: maybe",
            "- prune: on",
        ),
        (
            "- prune: on\n",
            "- prune: on\n- prune warmup: two\n",
            "- prune warmup: two",
            "- prune warmup: 2",
        ),
        ("- prune: on\n", "- prnue: on\n", "- prnue: on", "prune"),
    ];
    for (from, to, line, fix) in cases {
        let text = good.replace(from, to);
        let run = repo.start("bad", &text);
        assert_eq!(run.code, 2, "{to}: {}", run.stderr);
        let at = format!("conference.md:{}:", line_of(&text, line));
        assert!(run.stderr.contains(&at), "{to}: {}", run.stderr);
        assert!(run.stderr.contains(fix), "{to}: {}", run.stderr);
    }
    // Under another section: named, with where it belongs.
    let text = good
        .replace("- prune: on\n", "")
        .replace("## Agent\n", "## Agent\n- prune: on\n");
    let run = repo.start("bad", &text);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let at = format!("conference.md:{}:", line_of(&text, "- prune: on"));
    assert!(run.stderr.contains(&at), "{}", run.stderr);
    assert!(run.stderr.contains("Evaluation"), "{}", run.stderr);
    let log = repo.git_run(&["rev-parse", "--verify", "-q", "refs/conference/bad/events"]);
    assert_ne!(log.code, 0, "a refused start recorded nothing");
}
