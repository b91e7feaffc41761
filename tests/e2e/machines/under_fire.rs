//! Several machines under fire (issue #28): a remote that refuses pushes for a while, refs of
//! the protocol deleted or replaced on the remote, crafted events from a participant, machines
//! stopped or copied. Each case ends as the issue says: the one-machine best where the conference
//! can go on, a clear stop naming the cause where it cannot, never a wait for ever.

use std::path::Path;
use std::time::Duration;

use super::*;

/// The remote's pre-receive hook refuses every push while `refuse` exists in the remote.
fn refuse_pushes_while_flagged(c: &Cluster) -> PathBuf {
    let flag = c.remote.join("refuse");
    let hook = c.remote.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif [ -e '{}' ]; then echo 'pushes are refused for now' >&2; exit 1; fi\n",
            flag.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    flag
}

/// The remote down for 10 s while all three machines publish (its daemon stopped, then started
/// again on its port): each machine says it retries, none blames an agent, and the conference
/// ends with the one-machine best.
#[test]
fn a_remote_down_for_ten_seconds_is_waited_for() {
    let config = config("5s");
    let mut c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "B", 1, 1);
    let port = c._daemon.1;
    let _ = c._daemon.0.kill();
    let _ = c._daemon.0.wait();
    std::thread::sleep(Duration::from_secs(10));
    let served = c.remote.parent().unwrap().to_path_buf();
    c._daemon = crate::common::daemon_on(&c.repo, &served, port);
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);

    let (events, _) = c.reached_the_one_machine_best(&config);
    let blamed: Vec<String> = reasons(&events)
        .into_iter()
        .filter(|r| r.contains("moved refs/conference"))
        .collect();
    assert!(
        blamed.is_empty(),
        "agents blamed for a failed push: {blamed:?}"
    );
    let logs = c.logs();
    assert!(
        logs.contains(&format!("publishing to {} failed:", c.url))
            && logs.contains("; retrying in "),
        "{logs}"
    );
}

/// Waits until the remote has an iteration event of `researcher` in round `round`.
pub(super) fn wait_for_iteration(c: &Cluster, researcher: &str, round: u32, iteration: u32) {
    let subject = format!("researcher.iteration: {researcher} r{round} i{iteration}");
    c.wait_for(&subject, || {
        c.repo
            .git_in(
                &c.remote,
                &[
                    "log",
                    "--format=%s",
                    &format!("refs/conference/{NAME}/events"),
                ],
            )
            .lines()
            .any(|s| s.starts_with(&subject))
    });
}

/// Every reason the remote's iteration events give.
fn reasons(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["payload"]["reason"].as_str().map(str::to_string))
        .collect()
}

/// Pushes refused for seconds while all three machines publish: no agent's step is blamed for
/// the failed publications, each machine says it retries, and the conference ends with the
/// one-machine best.
#[test]
fn a_failed_publication_is_retried_and_blames_no_agent() {
    let config = config("5s");
    let c = cluster(&config);
    let flag = refuse_pushes_while_flagged(&c);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "B", 1, 1);
    std::fs::write(&flag, "").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    std::fs::remove_file(&flag).unwrap();
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);

    let (events, _) = c.reached_the_one_machine_best(&config);
    let blamed: Vec<String> = reasons(&events)
        .into_iter()
        .filter(|r| r.contains("moved refs/conference"))
        .collect();
    assert!(
        blamed.is_empty(),
        "agents blamed for a failed push: {blamed:?}"
    );
    // Every lease was given back: no machine's status shows one held.
    for dir in &c.machines {
        let status = c.repo.conference_in(dir, &["status", NAME]).ok();
        assert!(!status.stdout.contains("heartbeat"), "{}", status.stdout);
    }
    let logs: String = (0..3).map(|m| c.log(m)).collect();
    assert!(
        logs.contains(&format!("publishing to {} failed:", c.url))
            && logs.contains("pushes are refused for now")
            && logs.contains("; retrying in "),
        "{logs}"
    );
}

/// What [`exits`] returns for a machine it had to kill.
const STILL_RAN: i32 = -9;

/// Waits for machine `m`'s process to exit; its exit code ([`STILL_RAN`] when it had not exited
/// within `within`: its process group is killed).
pub(super) fn exits(m: usize, mut child: Child, within: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > within {
            let _ = std::process::Command::new("kill")
                .args(["-9", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            eprintln!("machine {} still ran after {within:?}: killed", m + 1);
            return STILL_RAN;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A machine's own attempts ref deleted on the remote: it pushes it again from what the remote
/// holds (nothing) and goes on publishing; the conference ends with the one-machine best.
#[test]
fn a_machines_attempts_ref_deleted_on_the_remote_does_not_stop_its_publications() {
    let config = config("3s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "B", 1, 1);
    let own = format!("refs/conference/{NAME}/machines/m2/attempts");
    c.repo.git_in(&c.remote, &["update-ref", "-d", &own]);
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
    c.repo.git_in(&c.remote, &["rev-parse", "--verify", &own]);
}

/// An unrelated event log of the same name forced onto the remote: every machine stops with the
/// reason instead of retrying for ever.
#[test]
fn an_unrelated_log_forced_onto_the_remote_stops_every_machine_with_the_reason() {
    let config = config("5s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "B", 1, 1);
    let other = TestRepo::from_fixture("machines");
    other.write("conference.md", &config);
    other.commit_all("conference.md");
    other.conference(&["start", NAME]).ok();
    let events = format!("+refs/conference/{NAME}/events:refs/conference/{NAME}/events");
    // Forced over whatever the machines publish meanwhile.
    let forced = (0..20).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        other.git_run(&["push", "-q", &c.url, &events]).code == 0
    });
    assert!(forced, "the unrelated log never reached the remote");
    let codes: Vec<i32> = [m1, m2, m3]
        .into_iter()
        .enumerate()
        .map(|(m, child)| exits(m, child, Duration::from_secs(60)))
        .collect();
    for (m, code) in codes.into_iter().enumerate() {
        assert!(code != 0 && code != STILL_RAN, "exit {code}: {}", c.log(m));
        assert!(
            c.log(m).contains("shares no history with this machine's"),
            "{}",
            c.log(m)
        );
    }
}

/// `git <args>` in `dir` with `env` and `stdin`; must succeed; its output, trimmed.
fn git_with(c: &Cluster, dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> String {
    use std::io::Write;
    let mut child = c
        .repo
        .command("git")
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A tree: `base`'s with `path` set to a blob of `bytes` (mode `mode`).
fn tree_with(c: &Cluster, dir: &Path, base: &str, path: &str, mode: &str, bytes: &[u8]) -> String {
    let index = dir.join("crafted-index");
    let env = [("GIT_INDEX_FILE", index.to_str().unwrap())];
    let blob = git_with(c, dir, &["hash-object", "-w", "--stdin"], &[], bytes);
    git_with(c, dir, &["read-tree", base], &env, b"");
    let entry = format!("{mode},{blob},{path}");
    git_with(
        c,
        dir,
        &["update-index", "--add", "--cacheinfo", &entry],
        &env,
        b"",
    );
    git_with(c, dir, &["write-tree"], &env, b"")
}

/// Participant `mallory` publishes a crafted event on the remote, as the child of its last event:
/// `craft` gets the last event's state and the message of one of the 30 latest events (the newest
/// first, each renamed as mallory's) and changes them, given mallory's own commit of researcher
/// B's branch (whose eval.sh leaves `marker` when it runs); the first message it returns true for
/// is published. Tries again until the remote takes it; mallory's commit goes to the remote's best
/// branch. Not only the last event's message: while three machines publish, the last event is
/// seldom of the kind a craft needs, and the conference may end before it is.
pub(super) fn publish_crafted(
    c: &Cluster,
    marker: &Path,
    craft: impl Fn(&mut serde_json::Value, &mut String, &str) -> bool,
) -> String {
    let dir = c.repo.tmp.path().join("mallory");
    c.repo.git(&["init", "-q", dir.to_str().unwrap()]);
    let fetch = [
        "fetch",
        "-q",
        &c.url,
        &format!("+refs/conference/{NAME}/events:refs/x/events"),
        &format!("+refs/heads/conference/{NAME}/*:refs/x/heads/*"),
    ];
    git_with(c, &dir, &fetch, &[], b"");
    let harness = format!(
        "#!/bin/sh\ntouch '{}'\n{}",
        marker.display(),
        std::fs::read_to_string(c.repo.dir.join("eval.sh")).unwrap()
    );
    let base = "refs/x/heads/researcher-B";
    let tree = tree_with(c, &dir, base, "eval.sh", "100755", harness.as_bytes());
    let evil = git_with(
        c,
        &dir,
        &["commit-tree", &tree, "-p", base, "-m", "mine"],
        &[],
        b"",
    );
    for _ in 0..100 {
        git_with(c, &dir, &fetch, &[], b"");
        let last = git_with(c, &dir, &["show", "refs/x/events:state.json"], &[], b"");
        let last: serde_json::Value = serde_json::from_str(&last).unwrap();
        let recent = git_with(
            c,
            &dir,
            &["log", "-30", "--format=%B%x00", "refs/x/events"],
            &[],
            b"",
        );
        let crafted = recent.split('\0').find_map(|message| {
            let mut message = message.trim().to_string();
            for m in ["m1", "m2", "m3"] {
                message = message
                    .replace(&format!("\"machine\":\"{m}\""), "\"machine\":\"mallory\"")
                    .replace(&format!(" [{m}]"), " [mallory]");
            }
            let mut state = last.clone();
            craft(&mut state, &mut message, &evil).then_some((state, message))
        });
        let Some((state, message)) = crafted else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        let bytes = serde_json::to_vec_pretty(&state).unwrap();
        let tree = tree_with(c, &dir, "refs/x/events", "state.json", "100644", &bytes);
        let args = ["commit-tree", &tree, "-p", "refs/x/events", "-F", "-"];
        let event = git_with(c, &dir, &args, &[], message.as_bytes());
        let push = c.repo.run_in(
            &dir,
            "git",
            &[
                "push",
                "-q",
                &c.url,
                &format!("{event}:refs/conference/{NAME}/events"),
                &format!("+{evil}:refs/heads/conference/{NAME}/best"),
            ],
        );
        if push.code == 0 {
            return evil;
        }
    }
    panic!("the crafted event never reached the remote");
}

/// Three machines running, and mallory's crafted event published once B's first iteration is
/// on the remote: the first honest machine to see it voids it (naming mallory and why), every
/// machine skips it and goes on, mallory's harness never runs, and the conference ends with the
/// one-machine best; `log`, `status` and `report` on a fresh clone of the remote name mallory.
fn every_machine_voids(
    craft: impl Fn(&mut serde_json::Value, &mut String, &str) -> bool,
    why: &str,
) -> (Cluster, String) {
    let config = config("5s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "B", 1, 1);
    let marker = c.repo.tmp.path().join("mallory-ran");
    let evil = publish_crafted(&c, &marker, craft);
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    let (events, _) = c.reached_the_one_machine_best(&config);
    let voided: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "event.voided")
        .collect();
    assert!(!voided.is_empty(), "nothing voided: {events:?}");
    for v in &voided {
        assert_eq!(v["payload"]["participant"], "mallory", "{v}");
        let reason = v["payload"]["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{reason}");
    }
    assert!(
        c.logs().contains("voided event"),
        "no machine said it voided it:\n{}",
        c.logs()
    );
    assert!(
        !marker.exists(),
        "mallory's eval.sh ran on an honest machine"
    );
    let best = format!("refs/heads/conference/{NAME}/best");
    for dir in c.machines.iter().chain([&c.remote]) {
        let here = c.repo.git_in(dir, &["rev-parse", &best]);
        assert_ne!(
            here.trim(),
            evil,
            "{} follows mallory's best",
            dir.display()
        );
    }
    let clone = c.fresh_clone();
    let status = c.repo.conference_in(&clone, &["status", NAME]).ok();
    assert!(
        status.stdout.contains("machine `mallory`: "),
        "{}",
        status.stdout
    );
    c.repo.conference_in(&clone, &["report", NAME]).ok();
    let report = clone.join(format!("conference-{NAME}-report/final_report.md"));
    let report = std::fs::read_to_string(report).unwrap();
    assert!(report.contains("machine `mallory`: "), "{report}");
    (c, evil)
}

#[test]
fn an_event_that_moves_best_to_a_participants_own_commit_is_voided_naming_it() {
    every_machine_voids(
        |state, _, evil| {
            state["best"]["commit"] = evil.into();
            state["researchers"]["B"]["head"] = evil.into();
            true
        },
        "`best.commit`",
    );
}

#[test]
fn a_state_naming_a_researcher_outside_the_conference_is_voided_not_looped_on() {
    every_machine_voids(
        |state, _, _| {
            state["researchers"]["../A"] = state["researchers"]["A"].clone();
            true
        },
        "researchers.../A",
    );
}

#[test]
fn an_event_with_a_non_finite_metric_is_voided() {
    every_machine_voids(
        |_, message, _| {
            let Some(at) = message.find("\"metric_value\":") else {
                return false;
            };
            let start = at + "\"metric_value\":".len();
            let end = start
                + message[start..]
                    .find([',', '}'])
                    .unwrap_or(message.len() - start);
            message.replace_range(start..end, "1e999");
            true
        },
        "cannot be read",
    );
}

/// A crafted `conference.config_changed` (new commands, which only `resume` on one machine may
/// record): voided, and the machines keep running the approved commands.
#[test]
fn a_crafted_config_change_is_voided_and_the_approved_commands_run_on() {
    every_machine_voids(
        |_, message, _| {
            let payload = serde_json::json!({
                "changes": [], "file": "conference.md", "round": 1,
                "diff": "- evaluation: ./eval.sh\n+ evaluation: sh -c 'echo score: 0'",
                "machine": "mallory", "running_s": 1.0
            });
            let line = serde_json::json!({
                "event": "conference.config_changed",
                "timestamp": "2030-01-01T00:00:00Z",
                "payload": payload
            });
            *message =
                format!("conference.config_changed: evaluation changed [mallory]\n\n{line}\n");
            true
        },
        "never while the conference runs on several",
    );
}

/// The remote's best branch moved by a participant to its own commit, the event log unchanged:
/// `fetch` takes best where the event log says, and `apply` merges that one.
#[test]
fn fetch_takes_best_from_the_event_log_not_from_the_remotes_branch() {
    let config = config("5s");
    let repo = TestRepo::from_fixture("machines");
    repo.write("conference.md", &config);
    repo.commit_all("conference.md");
    repo.conference(&["start", NAME]).ok();
    let remote = repo.tmp.path().join("remote.git");
    repo.git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        remote.to_str().unwrap(),
    ]);
    let url = remote.to_str().unwrap();
    repo.git(&["push", "-q", url, "HEAD:refs/heads/main"]);
    repo.conference(&["push", url, "--name", NAME]).ok();
    let best = format!("refs/heads/conference/{NAME}/best");
    let recorded = repo.git(&["rev-parse", &best]).trim().to_string();
    // A participant's own commit, with its own harness, pushed over the remote's best.
    repo.write("eval.sh", "#!/bin/sh\necho score: 0\n");
    repo.commit_all("mine");
    let mine = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    repo.git(&["push", "-q", "--force", url, &format!("{mine}:{best}")]);
    // The recorded best stays on the remote (the machines' own refs keep it there).
    repo.git(&["push", "-q", url, &format!("{recorded}:refs/heads/kept")]);

    let clone = repo.tmp.path().join("reader");
    repo.git(&["clone", "-q", url, clone.to_str().unwrap()]);
    let fetched = repo
        .conference_in(&clone, &["fetch", url, "--name", NAME])
        .ok();
    assert!(
        fetched.stdout.contains("where its event log says"),
        "{}",
        fetched.stdout
    );
    let here = repo.git_in(&clone, &["rev-parse", &best]);
    assert_eq!(here.trim(), recorded, "best is the event log's, not {mine}");
    repo.conference_in(&clone, &["trust", NAME, "--yes"]).ok();
    repo.conference_in(&clone, &["apply", NAME, "--yes"]).ok();
    let harness = std::fs::read_to_string(clone.join("eval.sh")).unwrap();
    assert!(
        !harness.contains("score: 0"),
        "apply merged the participant's commit"
    );
}

/// Machine 3 stopped with Ctrl-C mid-round gives researcher C back and says to `join` again;
/// the machines started with `--researchers A` and `B` say they wait for C and, after the lease,
/// one of them takes it: the conference ends with the one-machine best.
#[test]
fn a_researcher_given_back_with_ctrl_c_is_taken_by_a_live_machine() {
    // A lease long enough for machine 3's give-back to reach the remote before it would expire
    // on a loaded machine (with 2 s, CI once saw machine 1 take C over as silent instead).
    let config = config("5s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "C", 1, 1);
    let pressed = std::process::Command::new("kill")
        .args(["-INT", "--", &format!("-{}", m3.id())])
        .status()
        .unwrap();
    assert!(pressed.success());
    let code = exits(2, m3, Duration::from_secs(60));
    let stopped = c.log(2);
    assert!(code != STILL_RAN, "{stopped}");
    assert!(
        stopped.contains(&format!(
            "Continue with `git conference join {} {NAME}`",
            c.url
        )),
        "{stopped}"
    );
    assert!(!stopped.contains("git conference resume"), "{stopped}");
    // Whether machine 3 gave C back mid-round 1, before C finished it: on a loaded machine it
    // may finish the round first (the Ctrl-C reaches it after C's second iteration).
    let mid_round = !c
        .repo
        .git_in(
            &c.remote,
            &[
                "log",
                "--format=%s",
                &format!("refs/conference/{NAME}/events"),
            ],
        )
        .contains("researcher.finished: C finished round 1");
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.reached_the_one_machine_best(&config);
    let waited = c.log(0) + &c.log(1);
    // One of them takes C: as given back, or, when machine 3's last heartbeat was older than
    // the lease by the time its give-back arrived (seen under the whole suite beside two
    // benchmarks on two cores), as silent.
    assert!(
        waited.contains("runs researcher C") || waited.contains("took over researcher C from"),
        "{waited}"
    );
    // Mid-round, machines 1 and 2 end their own research of the round and wait for C, which
    // no machine holds until the lease has passed; between rounds they may be busy meanwhile.
    assert!(
        !mid_round
            || waited.contains(
                "waiting for researcher C: no machine holds it; run `git conference join"
            ),
        "{waited}"
    );
}

/// A copy of machine 2's clone (`cp -a`, the same machine name) joining while machine 2 runs is
/// refused with the reason, and stops none of machine 2's agents (the copy holds machine 2's
/// records of them); the conference ends with the one-machine best.
#[test]
fn a_copied_clone_joining_under_the_same_name_is_refused() {
    let config = config("3s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_iteration(&c, "B", 1, 1);
    let copy = c.repo.tmp.path().join("m2-copy");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&c.machines[1])
        .arg(&copy)
        .status()
        .unwrap();
    assert!(copied.success());
    let args = [
        "join",
        &c.url,
        NAME,
        "--researchers",
        "B",
        "--machine",
        "m2",
    ];
    let second = c.repo.conference_in(&copy, &args);
    assert_eq!(second.code, 2, "{}{}", second.stdout, second.stderr);
    assert!(
        second
            .stderr
            .contains("machine `m2` already takes part in `shared` from another clone"),
        "{}",
        second.stderr
    );
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
}
