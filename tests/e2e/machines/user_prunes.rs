//! The user's own `git fetch --prune` while a conference runs on several machines: git prunes
//! what it tracks under `refs/remotes/`, so the conference keeps nothing there.

use super::*;

/// Machines 1 and 2 run the conference through the remote they call `origin`, while the user
/// runs `git fetch --prune origin` on both, again and again: the fetches delete nothing, and
/// the conference reaches the one-machine best without a failed fetch of its own.
#[test]
fn the_users_fetch_prune_during_a_shared_run_changes_nothing() {
    let config = config("5s");
    let c = cluster(&config);
    c.repo.git(&["remote", "add", "origin", &c.url]);
    let m1 = c.spawn(
        0,
        &[
            "start",
            NAME,
            "--remote",
            "origin",
            "--researchers",
            "A",
            "--machine",
            "m1",
            "--yes",
        ],
    );
    c.wait_for("the conference on the remote", || {
        !c.repo
            .git_in(&c.remote, &["for-each-ref", "refs/conference/"])
            .is_empty()
    });
    let m2_dir = &c.machines[1];
    c.repo
        .conference_in(m2_dir, &["fetch", "origin", "--name", NAME])
        .ok();
    c.repo.conference_in(m2_dir, &["trust", NAME, "--yes"]).ok();
    let m2 = c.spawn(
        1,
        &[
            "join",
            "origin",
            NAME,
            "--researchers",
            "B,C",
            "--machine",
            "m2",
        ],
    );
    let mut runners = [(0, Some(m1)), (1, Some(m2))];
    let mut prunes = 0;
    while runners.iter().any(|(_, r)| r.is_some()) {
        for (m, runner) in runners.iter_mut() {
            let Some(child) = runner else { continue };
            let fetch = c
                .repo
                .run_in(&c.machines[*m], "git", &["fetch", "--prune", "origin"]);
            // The machine's own pushes move the same remote-tracking branches (git does that
            // for every push to a named remote): a fetch at that instant cannot lock one.
            let raced = fetch.stderr.contains("(unable to update local ref)");
            assert!(fetch.code == 0 || raced, "{}", fetch.stderr);
            assert!(
                !fetch.stderr.contains("[deleted]"),
                "the user's prune on machine {} deleted the conference's refs:\n{}",
                *m + 1,
                fetch.stderr
            );
            prunes += 1;
            if child.try_wait().unwrap().is_some() {
                c.finishes(*m, runner.take().unwrap());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(prunes > 4, "the user pruned only {prunes} times");
    for m in 0..2 {
        // The machines' own fetches never touch the user's remote-tracking branches, so the
        // user's fetch never makes one of them fail.
        assert!(!c.log(m).contains("cannot lock ref"), "{}", c.log(m));
    }
    c.reached_the_one_machine_best(&config);
}
