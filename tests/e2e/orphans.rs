//! A runner killed with SIGKILL together with its watchdog (which otherwise ends everything the
//! runner started at once: `hostile::a4_…`) leaves its agent's processes running; the next
//! `resume` must stop them before they touch the worktrees again.

use crate::common;

use std::time::{Duration, Instant};

use common::{ConfigBuilder, TestRepo};

fn alive(pid: i32) -> bool {
    // A zombie still has /proc/<pid>; only a running or sleeping process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[test]
fn resume_kills_agents_left_running_by_a_killed_runner() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Orphans", "./agents/seq.sh hang improve")
        .iterations(2)
        .agent_timeout("3s")
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    let runner = repo
        .command("git")
        .args(["conference", "start", "orphans"])
        .spawn()
        .unwrap();
    let pid_file = repo.git_dir().join("agent-sleep.pid");
    let deadline = Instant::now() + Duration::from_secs(20);
    // The agent's shell creates the file before it writes the pid: wait for the number.
    let sleeper: i32 = loop {
        let written = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if let Ok(pid) = written.trim().parse() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the hanging agent never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    repo.kill_runner_and_watchdog("orphans", runner);
    assert!(
        alive(sleeper),
        "the agent's child should have outlived the killed runner and watchdog"
    );
    std::fs::remove_file(&pid_file).unwrap();

    let resumed = repo.conference(&["resume", "orphans"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stderr.contains("left running by a killed run"),
        "{}",
        resumed.stderr
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(sleeper) {
        assert!(
            Instant::now() < deadline,
            "the orphaned agent {sleeper} is still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = repo.status_json("orphans");
    assert_eq!(status["status"], "completed");
}

/// A child the agent started in a session of its own (`setsid`) is outside the agent's process
/// group; when the runner is killed with SIGKILL, the next `resume` still finds it by the run
/// mark in its environment and stops it.
#[test]
fn resume_kills_setsid_children_left_by_a_killed_runner() {
    let repo = TestRepo::from_fixture("loop");
    repo.write_executable(
        "agents/setsid-hang.sh",
        "#!/bin/sh\ncommon=$(git rev-parse --git-common-dir)\n\
         setsid sh -c 'while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &\n\
         echo $! >\"$common/child.pid\"\n\
         sleep 600 &\necho $! >\"$common/agent-sleep.pid\"\nwait\n",
    );
    repo.commit_all("a setsid agent");
    let config = ConfigBuilder::new("Setsid", "./agents/setsid-hang.sh")
        .iterations(1)
        .agent_timeout("30s")
        .frozen("eval.sh, agents/**")
        .build();
    repo.write("conference.md", &config);
    let runner = repo.start_until_the_agent_hangs("setsid");
    let child: i32 = repo.git_dir_file("child.pid").trim().parse().unwrap();
    repo.kill_runner_and_watchdog("setsid", runner);
    assert!(alive(child), "the setsid child outlived the killed runner");

    // The agent hangs again on resume; a short timeout ends that run.
    repo.write(
        "conference.md",
        &config.replace("timeout: 30s", "timeout: 1s"),
    );
    let resumed = repo.conference(&["resume", "setsid"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) {
        assert!(
            Instant::now() < deadline,
            "the setsid child {child} is still running\n{}{}",
            resumed.stdout,
            resumed.stderr
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
