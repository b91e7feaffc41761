//! Several machines under fire, again (issue #45): machines killed and joined again at once,
//! leases deleted on the remote over and over, kills in the middle of a publication, and a stale
//! clone forcing its old copy of the conference over the remote. Each ends with the one-machine
//! best, every iteration recorded once.

use std::time::Duration;

use super::*;

/// The subjects of the remote's events, newest first.
fn remote_subjects(c: &Cluster) -> String {
    c.repo.git_in(
        &c.remote,
        &[
            "log",
            "--format=%s",
            &format!("refs/conference/{NAME}/events"),
        ],
    )
}

/// Waits until the remote has at least `n` events.
fn wait_for_events(c: &Cluster, n: usize) {
    c.wait_for(&format!("{n} events on the remote"), || {
        remote_subjects(c).lines().count() >= n
    });
}

/// Kills machine `m`'s whole process group with `kill -9` and returns at once: its runner may
/// still be dying when the caller joins again.
fn kill_now(m: usize, child: &mut Child) {
    let group = format!("-{}", child.id());
    let killed = std::process::Command::new("kill")
        .args(["-9", "--", &group])
        .status()
        .unwrap();
    assert!(killed.success(), "machine {}", m + 1);
    let _ = child.wait();
}

/// Machine 2 killed with `kill -9` twelve times, each time joined again at once (its runner not
/// waited for): each join waits for the dying runner instead of refusing, takes B back, and the
/// conference ends with the one-machine best, no iteration run twice.
#[test]
fn a_machine_killed_twelve_times_and_joined_again_at_once_goes_on() {
    let config = config("3s");
    let c = cluster(&config);
    let [m1, mut m2, m3] = c.start_all();
    wait_for_events(&c, 3);
    // Pauses between the kills, in tenths of a second: some before B's first publication of a
    // run, some in the middle of one.
    for (kill, tenths) in [2, 9, 4, 15, 1, 7, 12, 3, 6, 20, 5, 8]
        .into_iter()
        .enumerate()
    {
        std::thread::sleep(Duration::from_millis(tenths * 100));
        kill_now(1, &mut m2);
        eprintln!("kill {}", kill + 1);
        m2 = c.spawn_join(1, "B");
    }
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
    assert!(
        !c.log(1).contains("is already running"),
        "a dead runner was taken for a live one:\n{}",
        c.log(1)
    );
}

/// Every lease deleted on the remote every 0.3 s for 10 s (a participant's loop of `git push
/// --delete`): every machine loses its slots over and over, claims them again, and once the
/// deletions stop the conference ends with the one-machine best; no machine waits on its own
/// unpublished events for ever.
#[test]
fn leases_deleted_every_third_of_a_second_starve_no_machine() {
    let config = config("3s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_events(&c, 4);
    let until = Instant::now() + Duration::from_secs(10);
    let mut deleted = 0;
    while Instant::now() < until {
        let leases = c.repo.git_in(
            &c.remote,
            &[
                "for-each-ref",
                "--format=%(refname)",
                &format!("refs/conference/{NAME}/leases/"),
            ],
        );
        for lease in leases.lines() {
            if c.repo
                .run_in(&c.remote, "git", &["update-ref", "-d", lease])
                .code
                == 0
            {
                deleted += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(deleted > 3, "the machines held no lease to delete");
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
}

/// Machine 2 killed in the middle of a publication up to three times: right after the remote
/// took its push of events (before it moved its own log), then right before one, then after one
/// again, the last time for good (a machine that took B over meanwhile leaves it nothing to
/// publish: it ends with the conference). What it published stays on the remote, what it had
/// not is run again by the machine that takes B over, and the conference ends with the
/// one-machine best.
#[test]
fn a_machine_killed_while_publishing_loses_nothing_it_published() {
    let config = config("3s");
    let c = cluster(&config);
    let m1 = c.start();
    let mut m3 = None;
    let kills = [
        "publish.events-pushed:1",
        "publish.events-before-push:2",
        "publish.events-pushed:2",
    ];
    let mut published = 0;
    for (kill, failpoint) in kills.iter().enumerate() {
        let env = [("GIT_CONFERENCE_FAILPOINT", *failpoint)];
        let m2 = if kill == 0 {
            c.join_env(1, "B", &env)
        } else {
            c.spawn_join_env(1, "B", &env)
        };
        if kill == 0 {
            // C runs on machine 3 from the start, alongside.
            m3 = Some(c.join(2, "C"));
        }
        let code = super::under_fire::exits(1, m2, Duration::from_secs(120));
        if code == 0 && kill > 0 {
            // Another machine took B over meanwhile (after its lease): machine 2 had nothing
            // left to publish, and left when the conference ended.
            break;
        }
        assert!(
            code == 137 || code == -1,
            "machine 2 was to die at {failpoint} (exit {code}):\n{}",
            c.log(1)
        );
        let now = remote_subjects(&c)
            .lines()
            .filter(|s| s.ends_with("[m2]"))
            .count();
        assert!(
            now >= published,
            "events machine 2 published were lost: {now} < {published}"
        );
        published = now;
    }
    assert!(published > 0, "machine 2 published nothing");
    c.finishes(0, m1);
    c.finishes(2, m3.unwrap());
    c.reached_the_one_machine_best(&config);
}

/// A clone that fetched the conference early forces its old copy of every conference ref over
/// the remote mid-run (`git push --force`): the machines put back what they published (the
/// remote's log goes back to an event their own logs continue), and the conference ends with the
/// one-machine best, every iteration recorded once.
#[test]
fn a_stale_clone_forcing_its_old_copy_over_the_remote_is_outlived() {
    let config = config("3s");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    wait_for_events(&c, 4);
    let stale = c.repo.tmp.path().join("stale");
    c.repo
        .git(&["clone", "-q", "--mirror", &c.url, stale.to_str().unwrap()]);
    let old = remote_subjects(&c).lines().count();
    wait_for_events(&c, old + 6);
    force_push_everything(&c, &stale);
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
}

/// Forces the stale mirror's copy of every conference ref over the remote, all refs or none
/// (`--atomic`). A machine pushing at the same instant holds a ref's lock on the remote and the
/// push is refused ("failed to update ref"), as it would be for a user, who pushes again: so
/// does this, until the whole stale copy is on the remote.
fn force_push_everything(c: &Cluster, stale: &std::path::Path) {
    let mut refused = String::new();
    for _ in 0..50 {
        let forced = c.repo.run_in(
            stale,
            "git",
            &[
                "push",
                "-q",
                "--atomic",
                "--force",
                &c.url,
                "refs/conference/*:refs/conference/*",
                "refs/heads/conference/*:refs/heads/conference/*",
                "refs/notes/*:refs/notes/*",
            ],
        );
        if forced.code == 0 {
            return;
        }
        assert!(
            forced.stderr.contains("failed to update ref") || forced.stderr.contains("atomic"),
            "{}",
            forced.stderr
        );
        refused = forced.stderr;
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the remote refused the forced push 50 times: {refused}");
}

/// `trust` on a machine whose own conference.md names another agent command than the stored
/// one: it shows and approves the stored commands, which `join` runs (a conference on several
/// machines runs its stored settings), says the local file differs, and `join` then runs.
#[test]
fn trust_approves_what_join_runs_not_a_local_conference_md() {
    let config = config("3s");
    let c = cluster(&config);
    let m1 = c.start();
    wait_for_events(&c, 2);
    let dir = &c.machines[1];
    c.repo
        .conference_in(dir, &["fetch", &c.url, "--name", NAME])
        .ok();
    std::fs::write(
        dir.join("conference.md"),
        config.replace("./agent.sh", "./other-agent.sh"),
    )
    .unwrap();
    let trusted = c.repo.conference_in(dir, &["trust", NAME, "--yes"]).ok();
    assert!(
        trusted.stdout.contains("./agent.sh") && !trusted.stdout.contains("./other-agent.sh"),
        "{}",
        trusted.stdout
    );
    assert!(
        trusted
            .stdout
            .contains("your conference.md names other commands"),
        "{}",
        trusted.stdout
    );
    let m2 = c.spawn_join(1, "B");
    let m3 = c.join(2, "C");
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    c.reached_the_one_machine_best(&config);
}

/// A participant's event claiming it ran for 10^7 seconds (`running_s`, with a state that
/// accounts for the claim, so the check of arriving events takes it) in a conference with a
/// time budget of one hour: each machine counts no more running time than there can have been
/// since it took part, so the conference ends on its rounds with the one-machine best, not on
/// its time budget.
#[test]
fn a_participant_claiming_a_long_running_time_does_not_end_the_conference() {
    let config = config("3s").replace("- **Lease:** 3s", "- **Lease:** 3s\n- **Time budget:** 1h");
    let c = cluster(&config);
    let [m1, m2, m3] = c.start_all();
    super::under_fire::wait_for_iteration(&c, "B", 1, 1);
    let marker = c.repo.tmp.path().join("mallory-ran");
    super::under_fire::publish_crafted(&c, &marker, |state, message, _| {
        let (ts, claimed) = ("2030-01-01T00:00:00Z", 1e7);
        state["events"] = (state["events"].as_u64().unwrap() + 1).into();
        state["last_event"] = "round.phase_started".into();
        state["updated_at"] = ts.into();
        state["machines"]["mallory"] = serde_json::json!({
            "researchers": [], "iterations": 0, "chair_events": 1, "last_event": ts,
            "spend": {"input": 0, "output": 0, "cost_usd": 0.0, "runs": 0},
            "running_seconds": claimed
        });
        let recorded = state["running_seconds"].as_f64().unwrap_or(0.0);
        state["running_seconds"] = recorded.max(claimed).into();
        let line = serde_json::json!({
            "event": "round.phase_started", "timestamp": ts,
            "payload": {"round": state["round"], "phase": "peer_review", "measuring": "",
                        "machine": "mallory", "running_s": claimed}
        });
        *message = format!("round.phase_started: peer review [mallory]\n\n{line}\n");
        true
    });
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    let (events, _) = c.reached_the_one_machine_best(&config);
    assert!(
        events.iter().all(|e| e["event"] != "event.voided"),
        "the claim was to be taken as consistent, not voided"
    );
    let claimed = events.iter().any(|e| e["payload"]["machine"] == "mallory");
    assert!(claimed, "mallory's event is not in the log");
}

/// Machine 2's evaluations read every score 10 lower (another GPU or library: here an `awk`
/// first on its PATH): researcher B's findings, read there, do not reproduce when the chair's
/// review re-measures them on machine 1, while A's and C's do, and the review page says that
/// machine 2's readings did not reproduce.
#[test]
fn the_review_names_the_machine_whose_readings_did_not_reproduce() {
    let config = config("5s");
    let c = cluster(&config);
    let bin = c.repo.tmp.path().join("m2-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let awk = c.repo.run_in(&c.repo.dir, "sh", &["-c", "command -v awk"]);
    let lower = format!(
        "#!/bin/sh\nout=$({} \"$@\") || exit\ncase \"$out\" in\n\"score: \"*) echo \"score: $(( ${{out#score: }} - 10 ))\" ;;\n*) printf '%s\\n' \"$out\" ;;\nesac\n",
        awk.stdout.trim()
    );
    std::fs::write(bin.join("awk"), lower).unwrap();
    std::fs::set_permissions(
        bin.join("awk"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        c.repo.bin_dir.display(),
        std::env::var("PATH").unwrap()
    );
    let m1 = c.start();
    let m2 = c.join_env(1, "B", &[("PATH", &path)]);
    let m3 = c.join(2, "C");
    c.finishes(0, m1);
    c.finishes(1, m2);
    c.finishes(2, m3);
    let page = c.repo.git_in(
        &c.remote,
        &[
            "show",
            &format!("refs/conference/{NAME}/events:round-1/peer_review_round_1.md"),
        ],
    );
    assert!(
        page.contains("the readings of machine `m2` (researcher B read"),
        "{page}"
    );
    assert!(page.contains("re-measured them on `m1`"), "{page}");
}
