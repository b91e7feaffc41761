//! Several machines under fire (issue #28): a remote that refuses pushes for a while, refs of
//! the protocol deleted or replaced on the remote, crafted events from a participant, machines
//! stopped or copied. Each case ends as the issue says: the one-machine best where the conference
//! can go on, a clear stop naming the cause where it cannot, never a wait for ever.

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

/// Waits until the remote has an iteration event of `researcher` in round `round`.
fn wait_for_iteration(c: &Cluster, researcher: &str, round: u32, iteration: u32) {
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
    let m1 = c.start();
    let m2 = c.join(1, "B");
    let m3 = c.join(2, "C");
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
    let logs: String = (0..3).map(|m| c.log(m)).collect();
    assert!(
        logs.contains(&format!("publishing to {} failed:", c.url))
            && logs.contains("pushes are refused for now")
            && logs.contains("; retrying in "),
        "{logs}"
    );
}

/// Waits for machine `m`'s process to exit; its exit code.
fn exits(c: &Cluster, m: usize, mut child: Child, within: Duration) -> i32 {
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
            panic!("machine {} still runs:\n{}", m + 1, c.log(m));
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
    let m1 = c.start();
    let m2 = c.join(1, "B");
    let m3 = c.join(2, "C");
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
    let m1 = c.start();
    let m2 = c.join(1, "B");
    let m3 = c.join(2, "C");
    wait_for_iteration(&c, "B", 1, 1);
    let other = TestRepo::from_fixture("machines");
    other.write("conference.md", &config);
    other.commit_all("conference.md");
    other.conference(&["start", NAME]).ok();
    let events = format!("+refs/conference/{NAME}/events:refs/conference/{NAME}/events");
    other.git(&["push", "-q", &c.url, &events]);
    for (m, child) in [m1, m2, m3].into_iter().enumerate() {
        let code = exits(&c, m, child, Duration::from_secs(60));
        assert_ne!(code, 0, "{}", c.log(m));
        assert!(
            c.log(m).contains("shares no history with this machine's"),
            "{}",
            c.log(m)
        );
    }
}
