//! A conference on several machines (issue #15): "machines" are clones, each running its own
//! `git conference` process tree, against one bare remote served by `git daemon` on loopback.
//! The fixture's three researchers each lower their own file, so the best a conference reaches
//! does not depend on which machine ran which researcher: it must equal the best of the same
//! conference run on one machine.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{daemon, ConfigBuilder, Daemon, TestRepo};

mod user_prunes;

const NAME: &str = "shared";

fn config(lease: &str) -> String {
    ConfigBuilder::new("Shared", "./agent.sh")
        .count(3)
        .iterations(2)
        .rounds(2)
        .constraint(&format!("- **Lease:** {lease}"))
        .build()
}

/// Machine 1 (the fixture's repository, which starts the conference), the served remote, and
/// two more machines cloned from it.
struct Cluster {
    repo: TestRepo,
    url: String,
    remote: PathBuf,
    machines: Vec<PathBuf>,
    _daemon: Daemon,
}

fn cluster(config: &str) -> Cluster {
    cluster_of("machines", &[("conference.md", config)])
}

/// [`cluster`] of fixture `fixture`, with `files` written over it (conference.md among them).
fn cluster_of(fixture: &str, files: &[(&str, &str)]) -> Cluster {
    let repo = TestRepo::from_fixture(fixture);
    for (path, text) in files {
        repo.write(path, text);
    }
    repo.commit_all("conference.md");
    let served = repo.tmp.path().join("served");
    let remote = served.join("remote.git");
    repo.git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        remote.to_str().unwrap(),
    ]);
    let d = daemon(&repo, &served);
    let url = format!("git://127.0.0.1:{}/remote.git", d.1);
    repo.git(&["push", "-q", &url, "main"]);
    let mut machines = vec![repo.dir.clone()];
    for m in ["m2", "m3"] {
        let dir = repo.tmp.path().join(m);
        repo.git(&["clone", "-q", &url, dir.to_str().unwrap()]);
        machines.push(dir);
    }
    Cluster {
        repo,
        url,
        remote,
        machines,
        _daemon: d,
    }
}

impl Cluster {
    /// `git conference <args>` on machine `m` (0-based), in the background, in a process group of
    /// its own (the machine's process tree, killed whole by `kill_machine`).
    fn spawn(&self, m: usize, args: &[&str]) -> Child {
        self.spawn_env(m, args, &[])
    }

    /// [`Cluster::spawn`] with more environment variables.
    fn spawn_env(&self, m: usize, args: &[&str], env: &[(&str, &str)]) -> Child {
        let log = std::fs::File::create(self.log_path(m)).unwrap();
        self.repo
            .command("git")
            .current_dir(&self.machines[m])
            .arg("conference")
            .args(args)
            .env("CONFERENCE_AGENT_DELAY", "0.3")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn log_path(&self, m: usize) -> PathBuf {
        self.repo.tmp.path().join(format!("machine-{}.log", m + 1))
    }

    fn log(&self, m: usize) -> String {
        std::fs::read_to_string(self.log_path(m)).unwrap_or_default()
    }

    /// Every machine's log, each under its number.
    fn logs(&self) -> String {
        (0..self.machines.len())
            .map(|m| format!("--- machine {}:\n{}", m + 1, self.log(m)))
            .collect()
    }

    /// Machine 1 starts the conference with researcher A; returns once the remote has it.
    fn start(&self) -> Child {
        self.start_env(&[])
    }

    /// [`Cluster::start`], the machine's process with more environment variables.
    fn start_env(&self, env: &[(&str, &str)]) -> Child {
        let args = [
            "start",
            NAME,
            "--remote",
            &self.url,
            "--researchers",
            "A",
            "--machine",
            "m1",
            "--yes",
        ];
        let child = self.spawn_env(0, &args, env);
        self.wait_for("the conference on the remote", || {
            !self
                .repo
                .git_in(&self.remote, &["for-each-ref", "refs/conference/"])
                .is_empty()
        });
        child
    }

    /// Machine 1 starts the conference; machines 2 and 3 join it as researchers B and C (in
    /// that order).
    fn start_all(&self) -> [Child; 3] {
        [self.start(), self.join(1, "B"), self.join(2, "C")]
    }

    /// Machine `m` fetches the conference, trusts its commands and joins with `researcher`.
    fn join(&self, m: usize, researcher: &str) -> Child {
        self.join_env(m, researcher, &[])
    }

    /// [`Cluster::join`], the machine's process with more environment variables.
    fn join_env(&self, m: usize, researcher: &str, env: &[(&str, &str)]) -> Child {
        let dir = &self.machines[m];
        self.repo
            .conference_in(dir, &["fetch", &self.url, "--name", NAME])
            .ok();
        self.repo.conference_in(dir, &["trust", NAME, "--yes"]).ok();
        self.spawn_join_env(m, researcher, env)
    }

    /// `git conference join` on machine `m` (named `m<m+1>`), claiming `researcher`.
    fn spawn_join(&self, m: usize, researcher: &str) -> Child {
        self.spawn_join_env(m, researcher, &[])
    }

    /// [`Cluster::spawn_join`] with more environment variables.
    fn spawn_join_env(&self, m: usize, researcher: &str, env: &[(&str, &str)]) -> Child {
        let machine = format!("m{}", m + 1);
        let args = [
            "join",
            &self.url,
            NAME,
            "--researchers",
            researcher,
            "--machine",
            &machine,
        ];
        self.spawn_env(m, &args, env)
    }

    /// The remote's events, oldest first, as a fresh clone reads them (`log --format jsonl`).
    fn remote_events(&self) -> Vec<serde_json::Value> {
        let reader = self.fresh_clone();
        let log = self
            .repo
            .conference_in(&reader, &["log", NAME, "--format", "jsonl"])
            .ok();
        log.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A clone of the remote made now (a folder of its own), with the conference fetched into it.
    fn fresh_clone(&self) -> PathBuf {
        let dir = self.repo.tmp.path().join(format!(
            "reader-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        self.repo
            .git(&["clone", "-q", &self.url, dir.to_str().unwrap()]);
        self.repo
            .conference_in(&dir, &["fetch", &self.url, "--name", NAME])
            .ok();
        dir
    }

    fn wait_for(&self, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills machine `m`'s whole process group (`kill -9`), and waits until its runner is gone.
    fn kill_machine(&self, m: usize, child: &mut Child) {
        let lock = self.machines[m].join(format!(".git/conference/{NAME}/lock"));
        let runner = std::fs::read_to_string(&lock).unwrap_or_default();
        let runner = runner.split_whitespace().next().unwrap_or("0").to_string();
        let group = format!("-{}", child.id());
        let killed = std::process::Command::new("kill")
            .args(["-9", "--", &group])
            .status()
            .unwrap();
        assert!(killed.success());
        let _ = child.wait();
        // The runner (git's child) is gone once the system has reaped it.
        self.wait_for("the killed runner's end", || {
            !std::path::Path::new(&format!("/proc/{runner}")).exists()
        });
    }

    /// Waits for machine `m`'s process to exit 0.
    fn finishes(&self, m: usize, mut child: Child) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(180) {
                // The whole process group: the runner, not only the `git` that started it.
                let _ = std::process::Command::new("kill")
                    .args(["-9", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                panic!("machine {} did not finish:\n{}", m + 1, self.logs());
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            status.success(),
            "machine {} failed:\n{}",
            m + 1,
            self.log(m)
        );
    }

    /// Checks that the remote's best tree is the one the same conference reaches on one
    /// machine, with each of its 12 iterations recorded once; the remote's events and those
    /// iterations.
    fn reached_the_one_machine_best(&self, config: &str) -> (Vec<serde_json::Value>, Runs) {
        assert_eq!(self.best_tree(), single_machine_best_tree(config));
        let events = self.remote_events();
        let runs = iterations(&events);
        assert_eq!(
            runs.len(),
            12,
            "3 researchers × 2 iterations × 2 rounds: {runs:?}"
        );
        (events, runs)
    }

    /// The tree of the remote's best branch.
    fn best_tree(&self) -> String {
        let best = format!("refs/heads/conference/{NAME}/best^{{tree}}");
        self.repo.git_in(&self.remote, &["rev-parse", &best])
    }
}

/// The best tree the same conference reaches on one machine.
fn single_machine_best_tree(config: &str) -> String {
    let repo = TestRepo::from_fixture("machines");
    repo.write("conference.md", config);
    repo.commit_all("conference.md");
    repo.conference(&["start", NAME]).ok();
    repo.git(&[
        "rev-parse",
        &format!("refs/heads/conference/{NAME}/best^{{tree}}"),
    ])
}

fn machine_of(event: &serde_json::Value) -> &str {
    event["payload"]["machine"].as_str().unwrap_or("")
}

/// (researcher, round, iteration, machine) of every iteration event.
type Runs = Vec<(String, u64, u64, String)>;

/// Every iteration event's run; no attempt is recorded twice.
fn iterations(events: &[serde_json::Value]) -> Runs {
    let found: Runs = events
        .iter()
        .filter(|e| e["event"] == "researcher.iteration")
        .map(|e| {
            let p = &e["payload"];
            (
                p["researcher"].as_str().unwrap().to_string(),
                p["round"].as_u64().unwrap(),
                p["iteration"].as_u64().unwrap(),
                machine_of(e).to_string(),
            )
        })
        .collect();
    let mut keys: Vec<_> = found.iter().map(|(r, n, i, _)| (r, n, i)).collect();
    let all = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(
        keys.len(),
        all,
        "an iteration was recorded twice: {found:?}"
    );
    found
}

#[test]
fn three_machines_reach_the_best_of_one_machine_and_the_events_say_who_ran_what() {
    let config = config("5s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);

    let (events, runs) = c.reached_the_one_machine_best(&config);
    for (researcher, _, _, machine) in &runs {
        let expected = match researcher.as_str() {
            "A" => "m1",
            "B" => "m2",
            _ => "m3",
        };
        assert_eq!(machine, expected, "{runs:?}");
    }
    let reviews: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "round.peer_review")
        .map(machine_of)
        .collect();
    assert_eq!(reviews, ["m1", "m1"], "the chair (machine 1) reviews");
    // Each machine published its own attempts and notes; the remote is a sound repository.
    let refs = c
        .repo
        .git_in(&c.remote, &["for-each-ref", "--format=%(refname)"]);
    for m in ["m1", "m2", "m3"] {
        assert!(
            refs.contains(&format!("refs/conference/{NAME}/machines/{m}/attempts")),
            "{refs}"
        );
        assert!(
            refs.contains(&format!("refs/notes/conference-machines/{NAME}/{m}")),
            "{refs}"
        );
    }
    assert!(
        !refs.contains("/leases/"),
        "every machine gave its leases back: {refs}"
    );
    c.repo.git_in(&c.remote, &["fsck", "--no-progress"]);
    // A fresh clone that fetches it sees every machine's notes, merged.
    let clone = c.repo.tmp.path().join("notes-reader");
    c.repo
        .git(&["clone", "-q", &c.url, clone.to_str().unwrap()]);
    c.repo
        .conference_in(&clone, &["fetch", &c.url, "--name", NAME])
        .ok();
    let researchers: Vec<String> = ["A", "B", "C"]
        .iter()
        .map(|r| {
            let branch = format!("refs/heads/conference/{NAME}/researcher-{r}");
            c.repo
                .git_in(&clone, &["notes", "--ref=conference", "show", &branch])
        })
        .collect();
    for (r, note) in ["A", "B", "C"].iter().zip(&researchers) {
        assert!(note.contains("\"verdict\":\"kept\""), "{r}: {note}");
    }
    let status = c.repo.conference_in(&clone, &["status", NAME]).ok();
    for m in ["m1", "m2", "m3"] {
        assert!(
            status.stdout.contains(m),
            "status names every machine:\n{}",
            status.stdout
        );
    }
    // `clean --all` on a machine that joined deletes its views of the shared remote, and only
    // this conference's (another conference's view stays).
    let m2 = &c.machines[1];
    let views = |dir: &PathBuf| {
        c.repo.git_in(
            dir,
            &[
                "for-each-ref",
                "--format=%(refname)",
                "refs/conference-shared/",
            ],
        )
    };
    assert!(
        views(m2).contains(&format!("/{NAME}/events")),
        "{}",
        views(m2)
    );
    let other = format!("refs/conference-shared/origin/{NAME}-other/events");
    c.repo.git_in(m2, &["update-ref", &other, "HEAD"]);
    c.repo.conference_in(m2, &["clean", "--all", NAME]).ok();
    assert_eq!(
        views(m2).trim(),
        other,
        "only the other conference's view is left"
    );
}

/// Kills machine `m`'s whole process group once the remote has an iteration of `researcher`.
fn kill_after_first_iteration(c: &Cluster, m: usize, child: &mut Child, researcher: &str) {
    c.wait_for(
        &format!("{researcher}'s first iteration on the remote"),
        || {
            let subjects = c.repo.git_in(
                &c.remote,
                &[
                    "log",
                    "--format=%s",
                    &format!("refs/conference/{NAME}/events"),
                ],
            );
            subjects
                .lines()
                .any(|s| s.starts_with(&format!("researcher.iteration: {researcher} r1 i1")))
        },
    );
    c.kill_machine(m, child);
    assert!(c.log(m).contains("runs researcher"), "{}", c.log(m));
}

#[test]
fn a_killed_machine_is_taken_over_and_a_restarted_one_runs_nothing_twice() {
    let config = config("2s");
    let c = cluster(&config);
    let m1 = c.start();
    let mut m2 = c.join(1, "B");
    let mut m3 = c.join(2, "C");
    // Machine 3 dies for good: C continues on another machine once its lease expires.
    kill_after_first_iteration(&c, 2, &mut m3, "C");
    // Machine 2 dies and comes back at once: it takes its own lease back and goes on from what
    // it published.
    kill_after_first_iteration(&c, 1, &mut m2, "B");
    let m2 = c.spawn_join(1, "B");
    c.finishes(0, m1);
    c.finishes(1, m2);

    let (_, runs) = c.reached_the_one_machine_best(&config);
    let c_elsewhere = runs
        .iter()
        .filter(|(r, _, _, m)| r == "C" && m != "m3")
        .count();
    assert!(c_elsewhere > 0, "C was taken over: {runs:?}");
    let took_over = c.log(0) + &c.log(1);
    assert!(
        took_over.contains("took over researcher C from m3"),
        "{took_over}"
    );
    c.repo.git_in(&c.remote, &["fsck", "--no-progress"]);
}

#[test]
fn join_runs_nothing_this_clone_does_not_trust_and_refuses_unknown_researchers() {
    let config = config("5s");
    let c = cluster(&config);
    // Machine 1 publishes the conference; the test stops it before it ends.
    let mut m1 = c.start();
    let dir = &c.machines[1];
    let untrusted = c
        .repo
        .conference_in(dir, &["join", &c.url, NAME, "--machine", "m2"]);
    assert_eq!(
        untrusted.code, 2,
        "{}{}",
        untrusted.stdout, untrusted.stderr
    );
    assert!(
        untrusted.stderr.contains("./agent.sh"),
        "{}",
        untrusted.stderr
    );
    assert!(
        untrusted.stderr.contains("git conference trust"),
        "{}",
        untrusted.stderr
    );
    c.repo.conference_in(dir, &["trust", NAME, "--yes"]).ok();
    let unknown = c.repo.conference_in(
        dir,
        &[
            "join",
            &c.url,
            NAME,
            "--machine",
            "m2",
            "--researchers",
            "Z",
        ],
    );
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("`Z` is not a researcher"),
        "{}",
        unknown.stderr
    );
    // A conference of that name on the remote already: a start there keeps nothing here.
    let other = &c.machines[2];
    let taken = c.repo.conference_in(
        other,
        &[
            "start",
            NAME,
            "--remote",
            &c.url,
            "--machine",
            "m3",
            "--yes",
        ],
    );
    assert_eq!(taken.code, 2, "{}", taken.stderr);
    assert!(
        taken
            .stderr
            .contains("already has a conference named `shared`"),
        "{}",
        taken.stderr
    );
    let left = c.repo.git_in(
        other,
        &["for-each-ref", "refs/conference/", "refs/heads/conference/"],
    );
    assert_eq!(left, "", "nothing of the refused start is kept");
    // Killed mid-round, machine 1 takes part again with `join`, not `resume` (which would run
    // the conference here alone).
    c.kill_machine(0, &mut m1);
    let resume = c.repo.conference(&["resume", NAME]);
    assert_eq!(resume.code, 2, "{}", resume.stderr);
    assert!(
        resume.stderr.contains("git conference join"),
        "{}",
        resume.stderr
    );
}

#[test]
fn a_machine_whose_clock_is_hours_ahead_runs_its_researcher_within_the_time_budget() {
    // Budgets count the conference's recorded running time, never a difference between two
    // machines' clocks (issue #28, cause 4): machine 2's clock is two hours ahead of the
    // starter's, and the time budget is one hour.
    let config = config("5s").replace("- **Lease:** 5s", "- **Lease:** 5s\n- **Time budget:** 1h");
    assert!(config.contains("Time budget:** 1h"));
    let c = cluster(&config);
    let m1 = c.start();
    let ahead = [("GIT_CONFERENCE_TEST_CLOCK_OFFSET", "7200")];
    let m2 = c.join_env(1, "B", &ahead);
    let m3 = c.join(2, "C");
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);

    let (events, runs) = c.reached_the_one_machine_best(&config);
    let on_m2 = runs
        .iter()
        .filter(|(r, _, _, m)| r == "B" && m == "m2")
        .count();
    assert_eq!(on_m2, 4, "B ran all its iterations on machine 2: {runs:?}");
    let stopped: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "conference.budget_stop")
        .collect();
    assert!(
        stopped
            .iter()
            .all(|e| e["payload"]["reason"] == "max_rounds"),
        "{stopped:?}"
    );
}

mod remotes;
mod sweeps;
mod under_fire;
mod under_fire_again;

/// `steer` on the machine holding the chair while researchers run on every machine: the guidance
/// is recorded there, published over the other machines' iterations, and the conference reaches
/// the same best; `stop` is refused on several machines (each machine stops with Ctrl-C).
#[test]
fn guidance_given_mid_research_is_published_over_the_other_machines_events() {
    let config = config("5s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    let m1_dir = c.machines[0].clone();
    c.wait_for("a first iteration on machine 1", || {
        c.repo
            .git_in(
                &m1_dir,
                &[
                    "log",
                    "--format=%s",
                    &format!("refs/conference/{NAME}/events"),
                ],
            )
            .contains("researcher.iteration")
    });
    let said = c
        .repo
        .conference_in(&m1_dir, &["steer", NAME, "prefer small steps"])
        .ok();
    assert!(
        said.stdout.contains("recorded by the running conference"),
        "{}",
        said.stdout
    );
    let stop = c.repo.conference_in(&m1_dir, &["stop", NAME]);
    assert_eq!(stop.code, 2, "{}{}", stop.stdout, stop.stderr);
    assert!(
        stop.stderr.contains("runs on several machines"),
        "{}",
        stop.stderr
    );
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    let (events, _) = c.reached_the_one_machine_best(&config);
    let guidance: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "conference.guidance")
        .collect();
    assert_eq!(guidance.len(), 1, "{guidance:?}");
    assert_eq!(guidance[0]["payload"]["text"], "prefer small steps");
    assert_eq!(machine_of(guidance[0]), "m1");
}

/// Several machines keep working with a launcher: each machine's evaluations go through the
/// launcher from its own clone (staged under its own run folder, removed afterwards), and the
/// conference reaches the best of one machine running the same config.
#[test]
fn machines_with_a_command_launcher_reach_the_best_of_one_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let submitted = tmp.path().join("submitted.log");
    let submitter = tmp.path().join("submit.sh");
    std::fs::write(
        &submitter,
        format!(
            "#!/bin/sh\n# submit.sh DIR COMMAND…: runs COMMAND in DIR, as a job runner would\ndir=$1; shift\necho \"$dir\" >>{}\ncd \"$dir\" && exec \"$@\"\n",
            submitted.display()
        ),
    )
    .unwrap();
    let config = format!(
        "{}\n## Environment\n- launcher: command\n- launch: sh {} {{dir}} {{command}}\n",
        config("5s"),
        submitter.display()
    );
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
    let lines = std::fs::read_to_string(&submitted).unwrap();
    for (m, dir) in c.machines.iter().enumerate() {
        let staging = dir.join(".git/conference").join(NAME).join("staging");
        let staging = staging.display().to_string();
        assert!(
            lines.lines().any(|l| l.starts_with(&staging)),
            "machine {} ran no evaluation through the launcher: {lines}",
            m + 1
        );
        let left = std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "machine {} left staged trees", m + 1);
    }
}
