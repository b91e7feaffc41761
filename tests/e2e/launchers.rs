//! Launchers (`## Environment`'s `launcher`): evaluations shipped as `git archive` of the
//! attempt's commit and run through a submitter template (`command`), on real OpenSSH servers on
//! loopback (`ssh`) and on a real single-node Slurm cluster (`slurm`), all started by the tests
//! with private configs (`launchers/servers.rs`). Checked: the same best as a local run, where it
//! ran in notes and events, timeouts and kills cancel what was submitted, `resume` after `kill -9`
//! cancels the orphan, nothing is left running or staged.

use crate::common;

#[path = "launchers/servers.rs"]
pub(crate) mod servers;

#[path = "launchers/ray.rs"]
mod ray;

#[path = "launchers/hardware.rs"]
mod hardware;

use std::path::{Path, PathBuf};

use common::{ConfigBuilder, TestRepo};
use serde_json::Value;

/// `eval.sh LOG [GATE]`: logs `start <value> <pwd> <data/x> <setup-ran>` and `end <value>` to LOG (an absolute path
/// outside every tree); when the file GATE exists it removes it and sleeps (its pid in
/// GATE.pid) before printing the score: the value in value.txt (minimize). A sleep that is
/// killed ends the evaluation there, without its end line: a cancel that signals the job's
/// processes one by one (Slurm's) can reach the sleep before the shell, which must not then
/// log an evaluation that never finished.
const EVAL: &str = r#"#!/bin/sh
v=$(cat value.txt)
echo "start $v $PWD $(cat data/x 2>/dev/null) $(cat setup-ran 2>/dev/null)" >>"$1"
if [ -n "${2-}" ] && [ -e "$2" ]; then
    rm -f "$2"
    sleep 600 &
    echo $! >"$2.pid"
    wait $! || exit 1
fi
echo "end $v" >>"$1"
echo "score: $v"
"#;

/// A repository whose agent lowers value.txt by one per attempt.
fn repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write_executable("eval.sh", EVAL);
    repo.write_executable(
        "agents/improve.sh",
        "#!/bin/sh\nv=$(cat value.txt)\necho $((v - 1)) >value.txt\n",
    );
    repo.write("value.txt", "10\n");
    repo.commit_all("project");
    repo
}

/// The conference.md: `iterations` attempts, `eval.sh` logging to `log` (gated by `gate`), and
/// `environment` as `## Environment`.
fn config(
    iterations: u32,
    log: &Path,
    gate: Option<&Path>,
    timeout: &str,
    environment: &str,
) -> String {
    let mut b = ConfigBuilder::new("Launch", "./agents/improve.sh")
        .iterations(iterations)
        .frozen("eval.sh, agents/**");
    b.eval = match gate {
        Some(g) => format!("sh eval.sh {} {}", log.display(), g.display()),
        None => format!("sh eval.sh {}", log.display()),
    };
    b.eval_timeout = timeout.into();
    format!("{}\n## Environment\n{environment}", b.build())
}

/// The lines of the evaluation log.
fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every `researcher.iteration` event's payload.
fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

/// Whether process `pid` is alive (and not a zombie).
fn alive(pid: &str) -> bool {
    let pid: u32 = pid.trim().parse().expect("a pid");
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// The entries of a folder (none when it does not exist).
fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The best metric of a conference run to its end with `environment`.
fn best_with(environment: &str, log: &Path) -> (TestRepo, f64) {
    let repo = repo();
    repo.write("conference.md", &config(3, log, None, "30s", environment));
    repo.conference(&["start", "launch"]).ok();
    let best = repo.status_json("launch")["best"]["metric"]
        .as_f64()
        .unwrap();
    (repo, best)
}

/// The `command` launcher runs the filled-in template: the submitter gets the staged tree
/// (`git archive` of the commit, not the worktree: an untracked file there is not shipped), the
/// command and the variables, and its output and exit code are the evaluation's; the staged
/// folders are gone afterwards.
#[test]
fn a_command_launcher_runs_the_staged_commit_through_the_submitter() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("evals.log");
    let submitted = tmp.path().join("submitted.log");
    let submitter = tmp.path().join("submit.sh");
    std::fs::write(
        &submitter,
        format!(
            "#!/bin/sh\n# submit.sh DIR -- COMMAND…: runs COMMAND in DIR, as a job runner would\ndir=$1; shift 2\necho \"$dir $*\" >>{}\ncd \"$dir\" && [ ! -e stray.txt ] && exec \"$@\"\n",
            submitted.display()
        ),
    )
    .unwrap();
    let staging = tmp.path().join("staging");
    let env = format!(
        "- launcher: command\n- launch: sh {} {{dir}} -- env {{env}} {{command}}\n- staging: {}\n",
        submitter.display(),
        staging.display()
    );
    let (local_repo, local_best) = best_with("- launcher: local\n", &tmp.path().join("local.log"));
    drop(local_repo);
    let repo = repo();
    // An untracked file in the user's tree (and so in no commit) must not travel.
    repo.write("conference.md", &config(3, &log, None, "30s", &env));
    repo.write("stray.txt", "x");
    repo.conference(&["start", "launch"]).ok();
    let best = repo.status_json("launch")["best"]["metric"]
        .as_f64()
        .unwrap();
    assert_eq!(best, local_best);
    assert_eq!(best, 7.0);
    let submitted = log_lines(&submitted);
    // The baseline, three attempts and the review's two readings, each in a staged folder
    // under the staging root.
    assert_eq!(submitted.len(), 6, "{submitted:?}");
    for line in &submitted {
        assert!(line.starts_with(&staging.display().to_string()), "{line}");
        assert!(line.contains("CONFERENCE_RESEARCHER="), "{line}");
        assert!(line.ends_with("sh .git-conference-run.sh"), "{line}");
    }
    assert!(entries(&staging).is_empty(), "{:?}", entries(&staging));
    let it = iterations(&repo, "launch");
    let it: Vec<&Value> = it.iter().map(|e| &e["payload"]).collect();
    assert_eq!(it[0]["placement"]["launcher"], "command", "{it:?}");
    assert!(it[0]["placement"]["host"]
        .as_str()
        .is_some_and(|h| !h.is_empty()));
    let commit = it[0]["commit"].as_str().unwrap();
    assert_eq!(repo.notes(commit)[0]["placement"]["launcher"], "command");
}

/// With a launcher that runs evaluations elsewhere, `setup` runs there only: once in each
/// staged tree, before the evaluation — never in the local worktrees, where the agents work and
/// nothing is evaluated (a `uv sync` of a GPU stack on a laptop). Its program need not exist on
/// this machine. `start` says where it runs.
#[test]
fn with_a_remote_launcher_setup_runs_where_evaluations_run_only() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("evals.log");
    let setups = tmp.path().join("setups.log");
    let submitter = tmp.path().join("submit.sh");
    std::fs::write(
        &submitter,
        "#!/bin/sh\n# submit.sh DIR -- COMMAND…: runs COMMAND in DIR, as a job runner would\n\
         dir=$1; shift 2\ncd \"$dir\" && exec \"$@\"\n",
    )
    .unwrap();
    let staging = tmp.path().join("staging");
    let env = format!(
        "- launcher: command\n- launch: sh {} {{dir}} -- env {{env}} {{command}}\n- staging: {}\n\
         - setup: far-side-sync || echo \"$PWD\" >>{}\n",
        submitter.display(),
        staging.display(),
        setups.display()
    );
    let repo = repo();
    repo.write("conference.md", &config(2, &log, None, "30s", &env));
    let run = repo.conference(&["start", "launch"]).ok();
    assert!(
        run.stderr.contains("not in the local worktrees"),
        "{}",
        run.stderr
    );
    let ran = log_lines(&setups);
    // The baseline, two attempts and the review's two readings: one staged tree each.
    assert_eq!(ran.len(), 5, "{ran:?}");
    let staging = staging.canonicalize().unwrap();
    for dir in &ran {
        assert!(
            Path::new(dir).starts_with(&staging),
            "setup ran in {dir}, not a staged tree under {}",
            staging.display()
        );
    }
    assert_eq!(repo.status_json("launch")["best"]["metric"], 8.0);
}

/// The same conference reaches the same best through ssh on two real OpenSSH servers: every
/// evaluation ran in a staged folder on a host (not in the worktree), where it ran is in the
/// notes and events, and the hosts' staging folders are empty afterwards.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn ssh_reaches_the_same_best_as_local() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = servers::SshHosts::start(tmp.path(), 2);
    let (_, local_best) = best_with("", &tmp.path().join("local.log"));
    let log = tmp.path().join("evals.log");
    // Data that exists on the host side only, and a setup that runs in each staged tree.
    let data = tmp.path().join("host-data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("x"), "42\n").unwrap();
    let extra = format!(
        "- remote shared: data={}\n- setup: echo $$ >setup-ran\n",
        data.display()
    );
    let (repo, best) = best_with(&hosts.environment(&extra), &log);
    assert_eq!(best, local_best);
    let lines = log_lines(&log);
    let starts: Vec<&String> = lines.iter().filter(|l| l.starts_with("start")).collect();
    // The baseline, three attempts, and the review's readings of the round start and the finding.
    assert_eq!(starts.len(), 6, "{lines:?}");
    let mut setups = std::collections::BTreeSet::new();
    for line in &starts {
        let words: Vec<&str> = line.split_whitespace().collect();
        let staging = hosts.staging(0).display().to_string();
        assert!(words[2].starts_with(&staging), "{line}");
        assert_eq!(words[3], "42", "{line}");
        setups.insert(words[4].to_string());
    }
    // Setup ran in every staged tree, a process of its own each time.
    assert_eq!(setups.len(), 6, "{lines:?}");
    let it = iterations(&repo, "launch");
    let it: Vec<&Value> = it.iter().map(|e| &e["payload"]).collect();
    assert_eq!(it[0]["placement"]["launcher"], "ssh", "{it:?}");
    assert_eq!(it[0]["placement"]["host"], "gc-host-0");
    let commit = it[2]["commit"].as_str().unwrap();
    assert_eq!(repo.notes(commit)[0]["placement"]["host"], "gc-host-0");
    for i in 0..2 {
        assert!(
            entries(&hosts.staging(i)).is_empty(),
            "{:?}",
            entries(&hosts.staging(i))
        );
    }
}

/// An evaluation past its timeout is cancelled on the host: its process group is gone, the
/// attempt is a timeout, and nothing stays staged.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn an_ssh_timeout_kills_the_remote_process_group() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = servers::SshHosts::start(tmp.path(), 1);
    let log = tmp.path().join("evals.log");
    let gate = tmp.path().join("gate");
    let repo = repo();
    repo.write(
        "conference.md",
        &config(1, &log, Some(&gate), "3s", &hosts.environment("")),
    );
    std::fs::write(&gate, "").unwrap();
    // The baseline consumes the gate and hangs past the timeout: the start fails with the
    // baseline's timeout, the remote sleep is killed.
    let out = repo.conference(&["start", "launch"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    let pid = std::fs::read_to_string(tmp.path().join("gate.pid")).unwrap();
    assert!(
        !alive(&pid),
        "the evaluation's sleep {pid} still runs on the host"
    );
    assert!(
        entries(&hosts.staging(0)).is_empty(),
        "{:?}",
        entries(&hosts.staging(0))
    );
}

/// The runner killed with `kill -9` while an evaluation runs on a host: `resume` kills the
/// orphan on the host, evaluates that attempt again and completes; no evaluation ran to its
/// end twice and nothing stays staged.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn resume_after_kill_9_cancels_the_orphan_on_the_host() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = servers::SshHosts::start(tmp.path(), 1);
    let log = tmp.path().join("evals.log");
    let gate = tmp.path().join("gate");
    let repo = repo();
    repo.write(
        "conference.md",
        &config(2, &log, Some(&gate), "60s", &hosts.environment("")),
    );
    repo.commit_all("config");
    // Open the gate once the baseline has run: the first attempt's evaluation hangs.
    let mut runner = start_in_background(&repo);
    hang_the_first_attempt(&log, &gate, &mut runner);
    let pid_file = tmp.path().join("gate.pid");
    wait_for(&pid_file);
    repo.kill_runner("launch", runner);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(alive(&pid), "the orphan should still run after kill -9");
    let out = repo.conference(&["resume", "launch"]).ok();
    assert!(
        out.stderr.contains("cancelled 1 evaluation job"),
        "{}",
        out.stderr
    );
    assert!(!alive(&pid), "resume left the orphan {pid} running");
    assert_eq!(
        repo.status_json("launch")["best"]["metric"].as_f64(),
        Some(8.0)
    );
    let lines = log_lines(&log);
    let ends: Vec<&String> = lines.iter().filter(|l| l.starts_with("end")).collect();
    // As in a run never killed: the baseline, two attempts, the review's two readings.
    assert_eq!(
        ends,
        ["end 10", "end 9", "end 8", "end 10", "end 8"],
        "{lines:?}"
    );
    assert!(
        entries(&hosts.staging(0)).is_empty(),
        "{:?}",
        entries(&hosts.staging(0))
    );
}

/// A host that stops accepting connections mid-run: the evaluations it can no longer run are
/// `crashed` with ssh's reason (not cached as the tree's), and the conference goes on to its end.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn a_host_that_refuses_connections_makes_the_evaluation_crash_and_the_conference_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut hosts = servers::SshHosts::start(tmp.path(), 1);
    let log = tmp.path().join("evals.log");
    let repo = repo();
    repo.write(
        "conference.md",
        &config(2, &log, None, "30s", &hosts.environment("")),
    );
    repo.commit_all("config");
    let runner = start_in_background(&repo);
    while !log_lines(&log).iter().any(|l| l.starts_with("end 10")) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    hosts.stop(0);
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let it = iterations(&repo, "launch");
    assert_eq!(it.len(), 2, "{it:?}");
    for i in &it {
        let i = &i["payload"];
        assert_eq!(i["status"], "crashed", "{i}");
        let reason = i["reason"].as_str().unwrap();
        assert!(reason.contains("ssh to gc-host-0 failed"), "{reason}");
    }
}

fn start_in_background(repo: &TestRepo) -> std::process::Child {
    repo.command(env!("CARGO_BIN_EXE_git-conference"))
        .args(["start", "launch"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `path` holds a line (a pid file is created empty before its pid is written).
fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n')) {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Each launcher key misspelled, or given to a launcher that does not read it, is exit 2 with
/// its line.
#[test]
fn launcher_keys_misspelled_or_misplaced_are_refused_with_their_line() {
    let repo = repo();
    // (the conference.md lines, the line the error names, what it must say)
    let cases = [
        (
            "- launcher: slurm\n- slurm argz: -p debug\n",
            "slurm argz",
            "did you mean `slurm args`",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- ssh comand: ssh\n",
            "ssh comand",
            "did you mean `ssh command`",
        ),
        (
            "- launcher: kubernetes\n",
            "launcher: kubernetes",
            "must be local, ssh, slurm, ray or command",
        ),
        (
            "- launcher: ray\n- ray adress: http://127.0.0.1:9\n",
            "ray adress",
            "did you mean `ray address`",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- ray resources: gpus=1\n",
            "ray resources: gpus=1",
            "read by launcher ray only",
        ),
        (
            "- launcher: ray\n- ray address: http://127.0.0.1:9\n- ray resources: gpus=lots\n",
            "ray resources: gpus=lots",
            "must be a number",
        ),
        (
            "- launcher: ray\n- ray address: head:8265\n",
            "ray address: head:8265",
            "must be the address of Ray's dashboard",
        ),
        (
            "- launcher: ray\n- ray address: http://127.0.0.1:9\n- ray runtime env: {\"working_dir\": \".\"}\n",
            "ray runtime env",
            "must not set working_dir",
        ),
        (
            "- launcher: ray\n- ray address: http://127.0.0.1:9\n- devices: 0,1\n",
            "devices: 0,1",
            "Ray places each evaluation",
        ),
        (
            "- launcher: slurm\n- ray runtime env: {}\n",
            "ray runtime env",
            "read by launcher ray only",
        ),
        (
            "- launcher: local\n- hosts: gpu1\n",
            "hosts: gpu1",
            "read by launcher ssh only",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- slurm args: -p x\n",
            "slurm args: -p x",
            "read by launcher slurm only",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- launch: x {command}\n",
            "launch: x",
            "read by launcher command only",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- queue timeout: 1h\n",
            "queue timeout: 1h",
            "read by launcher slurm or ray only",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- staging: /x\n",
            "staging: /x",
            "read by launcher slurm or command only",
        ),
        (
            "- launcher: slurm\n- ssh command: ssh\n",
            "ssh command: ssh",
            "read by launcher ssh only",
        ),
        (
            "- remote shared: data=/x\n",
            "remote shared: data=/x",
            "this conference's launcher is local",
        ),
        (
            "- launcher: ssh\n- hosts: a\n- remote shared: data\n",
            "remote shared: data",
            "name=/path",
        ),
        (
            "- launcher: slurm\n- queue timeout: soon\n",
            "queue timeout: soon",
            "positive duration",
        ),
        (
            "- launcher: command\n- launch: sky exec c\n",
            "launch: sky exec c",
            "must contain {command}",
        ),
        ("- launcher: ssh\n", "launcher: ssh", "needs `- hosts:`"),
        (
            "- launcher: ssh\n- hosts: a b\n",
            "hosts: a b",
            "is not a host as ssh names it",
        ),
    ];
    for (env, needle, says) in cases {
        let text = config(1, Path::new("/tmp/x.log"), None, "30s", env);
        repo.write("conference.md", &text);
        let out = repo.conference(&["start", "keys"]);
        assert_eq!(out.code, 2, "{env}: {}", out.stderr);
        let line = common::line_of(&text, needle);
        let at = format!("conference.md:{line}:");
        // The error's line and the `fix:` line after it.
        let lines: Vec<&str> = out.stderr.lines().collect();
        let error = (lines.iter().position(|l| l.contains(&at)))
            .map(|i| lines[i..(i + 2).min(lines.len())].join("\n"));
        assert!(
            error.is_some_and(|e| e.contains(says)),
            "{env}: expected line {line} to say {says:?}: {}",
            out.stderr
        );
    }
    // An address where no Ray answers: refused at the start, on its line.
    let port = servers::free_port();
    let text = config(
        1,
        Path::new("/tmp/x.log"),
        None,
        "30s",
        &format!("- launcher: ray\n- ray address: http://127.0.0.1:{port}\n"),
    );
    repo.write("conference.md", &text);
    let out = repo.conference(&["start", "keys"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let line = common::line_of(&text, "ray address");
    assert!(
        out.stderr.contains(&format!(
            "conference.md:{line}: cannot reach Ray's Jobs API"
        )),
        "{}",
        out.stderr
    );
    // Misplaced in another section.
    let text = config(1, Path::new("/tmp/x.log"), None, "30s", "")
        .replace("## Agent\n", "## Agent\n- hosts: gpu1\n");
    repo.write("conference.md", &text);
    let out = repo.conference(&["start", "keys"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let line = common::line_of(&text, "hosts: gpu1");
    assert!(
        out.stderr.contains(&format!("conference.md:{line}:")),
        "{}",
        out.stderr
    );
}

/// A start against the test's Slurm cluster (its clients find it through `SLURM_CONF`).
fn slurm_start(repo: &TestRepo, slurm: &servers::Slurm) -> common::Run {
    let conf = slurm.conf.display().to_string();
    repo.conference_env(&["start", "launch"], &[("SLURM_CONF", &conf)])
}

/// The same conference reaches the same best through Slurm: each evaluation is a job on the
/// node (its id and node in the notes and events), and afterwards no job is listed and nothing
/// stays staged.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn slurm_reaches_the_same_best_as_local() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = servers::Slurm::start(tmp.path());
    let (_, local_best) = best_with("", &tmp.path().join("local.log"));
    let log = tmp.path().join("evals.log");
    let staging = tmp.path().join("staging");
    let repo = repo();
    repo.write(
        "conference.md",
        &config(3, &log, None, "30s", &slurm.environment(&staging, "")),
    );
    slurm_start(&repo, &slurm).ok();
    assert_eq!(
        repo.status_json("launch")["best"]["metric"].as_f64(),
        Some(local_best)
    );
    let lines = log_lines(&log);
    let starts: Vec<&String> = lines.iter().filter(|l| l.starts_with("start")).collect();
    // The baseline, three attempts, and the review's readings of the round start and the finding.
    assert_eq!(starts.len(), 6, "{lines:?}");
    assert!(
        starts
            .iter()
            .all(|l| l.contains(&staging.display().to_string())),
        "{lines:?}"
    );
    let it = iterations(&repo, "launch");
    let it: Vec<&Value> = it.iter().map(|e| &e["payload"]).collect();
    assert_eq!(it[0]["placement"]["launcher"], "slurm", "{it:?}");
    assert_eq!(it[0]["placement"]["node"], "localhost");
    assert!(it[0]["placement"]["job"]
        .as_str()
        .is_some_and(|j| j.parse::<u32>().is_ok()));
    assert_eq!(slurm.jobs(), "");
    assert!(entries(&staging).is_empty(), "{:?}", entries(&staging));
}

/// A Slurm evaluation past its timeout is cancelled: the job is gone from `squeue`, its
/// process is dead, nothing stays staged.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn a_slurm_timeout_cancels_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = servers::Slurm::start(tmp.path());
    let log = tmp.path().join("evals.log");
    let gate = tmp.path().join("gate");
    let staging = tmp.path().join("staging");
    std::fs::write(&gate, "").unwrap();
    let repo = repo();
    let env = slurm.environment(&staging, "");
    repo.write("conference.md", &config(1, &log, Some(&gate), "3s", &env));
    let out = slurm_start(&repo, &slurm);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    let pid = std::fs::read_to_string(tmp.path().join("gate.pid")).unwrap();
    assert!(!alive(&pid), "the job's sleep {pid} still runs");
    assert_eq!(slurm.jobs(), "");
    assert!(entries(&staging).is_empty(), "{:?}", entries(&staging));
}

/// A job that waits in the queue (a partition that is down) past `queue timeout` is cancelled
/// and its evaluation fails with the queue timeout as the reason.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn a_queue_timeout_cancels_a_job_that_never_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = servers::Slurm::start(tmp.path());
    let log = tmp.path().join("evals.log");
    let staging = tmp.path().join("staging");
    let repo = repo();
    let env = slurm.environment(
        &staging,
        "- slurm args: --partition=down\n- queue timeout: 3s\n",
    );
    repo.write("conference.md", &config(1, &log, None, "30s", &env));
    let out = slurm_start(&repo, &slurm);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("queue timeout (3s"), "{}", out.stderr);
    assert!(log_lines(&log).is_empty());
    assert_eq!(slurm.jobs(), "");
    assert!(entries(&staging).is_empty(), "{:?}", entries(&staging));
}

/// `slurm args` Slurm itself refuses is exit 2 at the start, with its line and Slurm's words.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn bad_slurm_args_are_refused_at_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = servers::Slurm::start(tmp.path());
    let repo = repo();
    let env = slurm.environment(&tmp.path().join("s"), "- slurm args: --partition=nosuch\n");
    let text = config(1, &tmp.path().join("l"), None, "30s", &env);
    repo.write("conference.md", &text);
    let out = slurm_start(&repo, &slurm);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let line = common::line_of(&text, "slurm args");
    assert!(
        out.stderr.contains(&format!("conference.md:{line}:")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("invalid partition"), "{}", out.stderr);
    assert_eq!(slurm.jobs(), "");
}

/// The runner killed with `kill -9` while a Slurm job evaluates: `resume` cancels the job (by
/// the name recorded before `sbatch` returned), evaluates the attempt again and completes with
/// no evaluation run to its end twice.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn resume_after_kill_9_cancels_the_orphaned_slurm_job() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = servers::Slurm::start(tmp.path());
    let log = tmp.path().join("evals.log");
    let gate = tmp.path().join("gate");
    let staging = tmp.path().join("staging");
    let repo = repo();
    let env = slurm.environment(&staging, "");
    repo.write("conference.md", &config(2, &log, Some(&gate), "60s", &env));
    repo.commit_all("config");
    let conf = slurm.conf.display().to_string();
    let mut runner = repo
        .command(env!("CARGO_BIN_EXE_git-conference"))
        .args(["start", "launch"])
        .env("SLURM_CONF", &conf)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    hang_the_first_attempt(&log, &gate, &mut runner);
    let pid_file = tmp.path().join("gate.pid");
    wait_for(&pid_file);
    repo.kill_runner("launch", runner);
    assert!(slurm.jobs().contains("RUNNING"), "{}", slurm.jobs());
    let out = repo
        .conference_env(&["resume", "launch"], &[("SLURM_CONF", &conf)])
        .ok();
    assert!(
        out.stderr.contains("cancelled 1 evaluation job"),
        "{}",
        out.stderr
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !alive(&pid),
        "resume left the orphaned job's sleep {pid} running"
    );
    assert_eq!(
        repo.status_json("launch")["best"]["metric"].as_f64(),
        Some(8.0)
    );
    let lines = log_lines(&log);
    let ends: Vec<&String> = lines.iter().filter(|l| l.starts_with("end")).collect();
    // As in a run never killed: the baseline, two attempts, the review's two readings.
    assert_eq!(
        ends,
        ["end 10", "end 9", "end 8", "end 10", "end 8"],
        "{lines:?}"
    );
    assert_eq!(slurm.jobs(), "");
    assert!(entries(&staging).is_empty(), "{:?}", entries(&staging));
}

/// Evaluations that ran on different GPU models: each attempt's placement names its model, and
/// the review and the final report say the numbers were not measured alike. (No machine here has
/// two GPU models: the submitter stands for a cluster of two node types and gives each job the
/// `nvidia-smi` of its node, by iteration parity; the wrapper asks it as on a real node.)
#[test]
fn evaluations_on_different_gpu_models_are_named_in_the_review_and_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    for (node, model) in [
        ("even", "NVIDIA A100-SXM4-40GB"),
        ("odd", "NVIDIA H100 80GB HBM3"),
    ] {
        let bin = tmp.path().join(node);
        std::fs::create_dir_all(&bin).unwrap();
        let smi = bin.join("nvidia-smi");
        std::fs::write(&smi, format!("#!/bin/sh\necho '{model}'\n")).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&smi)
            .status()
            .unwrap();
    }
    let submitter = tmp.path().join("submit.sh");
    std::fs::write(
        &submitter,
        format!(
            "#!/bin/sh\n# submit.sh DIR COMMAND…: a job on the node of the iteration's parity\ndir=$1; shift\nnode=even; [ $(( ${{CONFERENCE_ITERATION:-0}} % 2 )) = 1 ] && node=odd\ncd \"$dir\" && PATH={}/$node:$PATH exec \"$@\"\n",
            tmp.path().display()
        ),
    )
    .unwrap();
    let env = format!(
        "- launcher: command\n- launch: sh {} {{dir}} {{command}}\n",
        submitter.display()
    );
    let repo = repo();
    repo.write(
        "conference.md",
        &config(2, &tmp.path().join("log"), None, "30s", &env),
    );
    repo.conference(&["start", "launch"]).ok();
    let it = iterations(&repo, "launch");
    let models: Vec<&str> = it
        .iter()
        .map(|e| e["payload"]["placement"]["gpu"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]);
    let events = "refs/conference/launch/events";
    let review = repo.show(events, "round-1/peer_review_round_1.md").unwrap();
    let report = repo.show(events, "final_report.md").unwrap();
    for text in [&review, &report] {
        assert!(
            text.contains("different GPU models (NVIDIA A100-SXM4-40GB, NVIDIA H100 80GB HBM3)"),
            "{text}"
        );
    }
}

/// Waits for the baseline's evaluation to end (its `end 10` line), then opens the gate the first
/// attempt's evaluation hangs at. Fails with the runner's output when the runner ends first (a
/// launcher that could not run the baseline), or after 5 minutes.
fn hang_the_first_attempt(log: &Path, gate: &Path, runner: &mut std::process::Child) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !log_lines(log).iter().any(|l| l.starts_with("end 10")) {
        if let Ok(Some(status)) = runner.try_wait() {
            let mut said = String::new();
            use std::io::Read;
            if let Some(mut out) = runner.stdout.take() {
                let _ = out.read_to_string(&mut said);
            }
            if let Some(mut err) = runner.stderr.take() {
                let _ = err.read_to_string(&mut said);
            }
            panic!("the runner ended ({status}) before the baseline was measured:\n{said}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the baseline's evaluation did not end in 5 minutes: {:?}",
            log_lines(log)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(gate, "").unwrap();
}

/// A conference on one ssh host whose first attempt's evaluation hangs there: the host, the
/// repository, its runner in the background, and the file holding the evaluation's pid.
fn hung_on_one_host(
    tmp: &std::path::Path,
) -> (
    servers::SshHosts,
    TestRepo,
    std::process::Child,
    std::path::PathBuf,
) {
    let hosts = servers::SshHosts::start(tmp, 1);
    let (log, gate) = (tmp.join("evals.log"), tmp.join("gate"));
    let repo = repo();
    repo.write(
        "conference.md",
        &config(2, &log, Some(&gate), "60s", &hosts.environment("")),
    );
    repo.commit_all("config");
    let mut runner = start_in_background(&repo);
    hang_the_first_attempt(&log, &gate, &mut runner);
    let pid_file = tmp.join("gate.pid");
    wait_for(&pid_file);
    (hosts, repo, runner, pid_file)
}

/// Ctrl-C while an evaluation runs on a host ends it there (the wrapper's process group) and
/// removes its staged folder; the run exits 130 and `resume` finishes the conference.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn ctrl_c_cancels_the_evaluation_on_the_host() {
    let tmp = tempfile::tempdir().unwrap();
    let (hosts, repo, runner, pid_file) = hung_on_one_host(tmp.path());
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &runner.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        !alive(&pid),
        "Ctrl-C left the evaluation {pid} running on the host"
    );
    assert!(
        entries(&hosts.staging(0)).is_empty(),
        "{:?}",
        entries(&hosts.staging(0))
    );
    repo.conference(&["resume", "launch"]).ok();
    assert_eq!(
        repo.status_json("launch")["best"]["metric"].as_f64(),
        Some(8.0)
    );
}

/// `clean` after `kill -9` of the runner cancels what it left on the host and removes the
/// staged folder.
#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn clean_cancels_what_a_killed_runner_left_on_the_host() {
    let tmp = tempfile::tempdir().unwrap();
    let (hosts, repo, runner, pid_file) = hung_on_one_host(tmp.path());
    repo.kill_runner("launch", runner);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(alive(&pid));
    assert_eq!(entries(&hosts.staging(0)).len(), 1);
    let out = repo.conference(&["clean", "launch"]).ok();
    assert!(
        out.stdout.contains("Cancelled 1 submitted evaluation"),
        "{}",
        out.stdout
    );
    assert!(
        !alive(&pid),
        "clean left the evaluation {pid} running on the host"
    );
    assert!(
        entries(&hosts.staging(0)).is_empty(),
        "{:?}",
        entries(&hosts.staging(0))
    );
}

/// Ctrl-C while a Slurm job evaluates cancels the job (`squeue` empty, its process dead) and
/// removes its staged tree; the run exits 130.
#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (slurmctld, slurmd, munge): .ci/run installs it"
)]
fn ctrl_c_cancels_the_slurm_job() {
    let tmp = tempfile::tempdir().unwrap();
    let slurm = servers::Slurm::start(tmp.path());
    let (log, gate) = (tmp.path().join("evals.log"), tmp.path().join("gate"));
    let staging = tmp.path().join("staging");
    let repo = repo();
    let env = slurm.environment(&staging, "");
    repo.write("conference.md", &config(2, &log, Some(&gate), "60s", &env));
    repo.commit_all("config");
    let mut runner = repo
        .command(env!("CARGO_BIN_EXE_git-conference"))
        .args(["start", "launch"])
        .env("SLURM_CONF", &slurm.conf)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    hang_the_first_attempt(&log, &gate, &mut runner);
    let pid_file = tmp.path().join("gate.pid");
    wait_for(&pid_file);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &runner.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = runner.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(slurm.jobs(), "");
    assert!(!alive(&pid), "Ctrl-C left the job's sleep {pid} running");
    assert!(entries(&staging).is_empty(), "{:?}", entries(&staging));
}
