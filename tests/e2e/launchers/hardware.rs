//! Every reading knows its hardware: two real OpenSSH hosts on loopback, each with a stand-in
//! `nvidia-smi` on its PATH naming a different GPU model (no machine here has a GPU, let alone
//! two models), and an evaluation that waits until two attempts are in flight, so that one runs
//! on each host. With `- hardware: any` the readings record their class (model, count, driver)
//! and `status`, the review and the report say the classes mix; with `- hardware: same` a
//! reading taken on another class than the first one's is refused as not comparable.

use super::ray::{config, repo};
use super::servers::SshHosts;
use super::{iterations, log_lines};
use crate::common::TestRepo;

const MODELS: [&str; 2] = ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"];

/// Two hosts, host `i` with an `nvidia-smi` that names `MODELS[i]` and driver 550.54.
fn two_classes(tmp: &std::path::Path) -> SshHosts {
    for (i, model) in MODELS.iter().enumerate() {
        let bin = tmp.join(format!("bin-{i}"));
        std::fs::create_dir_all(&bin).unwrap();
        let smi = bin.join("nvidia-smi");
        std::fs::write(&smi, format!("#!/bin/sh\necho '{model}, 550.54'\n")).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&smi)
            .status()
            .unwrap();
    }
    let keys = |i: usize| tmp.join(format!("keys-{i}"));
    let hosts = SshHosts::start_with(tmp, 2, &|i| {
        format!(
            "PermitUserEnvironment PATH\nAuthorizedKeysFile {}\n",
            keys(i).display()
        )
    });
    for i in 0..2 {
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            tmp.join(format!("bin-{i}")).display()
        );
        std::fs::write(
            keys(i),
            format!("environment=\"PATH={path}\" {}", hosts.public_key()),
        )
        .unwrap();
    }
    hosts
}

/// Two researchers, one attempt each, both in flight at once (one per host).
fn run(tmp: &std::path::Path, hosts: &SshHosts, hardware: &str) -> TestRepo {
    let log = tmp.join("evals.log");
    std::fs::write(log.with_extension("log.pair"), "").unwrap();
    let repo = repo();
    let text = config(2, 1, &log, None, "60s", &hosts.environment("")).replace(
        "## Evaluation\n",
        &format!("## Evaluation\n- hardware: {hardware}\n"),
    );
    repo.write("conference.md", &text);
    repo.conference(&["start", "launch"]).ok();
    assert!(log_lines(&log).len() >= 4, "{:?}", log_lines(&log));
    repo
}

#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn readings_of_two_classes_are_recorded_and_said_to_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = two_classes(tmp.path());
    let repo = run(tmp.path(), &hosts, "any");
    let it = iterations(&repo, "launch");
    let mut models: Vec<&str> = (it.iter())
        .map(|e| e["payload"]["placement"]["gpu"].as_str().unwrap())
        .collect();
    models.sort();
    assert_eq!(models, MODELS);
    for e in &it {
        let p = &e["payload"]["placement"];
        assert_eq!(
            (p["driver"].as_str(), p["gpus"].as_u64()),
            (Some("550.54"), Some(1)),
            "{p}"
        );
    }
    let status = repo.conference(&["status", "launch"]).ok().stdout;
    assert!(
        status.contains("readings of different classes are not one comparison"),
        "{status}"
    );
    let events = "refs/conference/launch/events";
    let review = repo.show(events, "round-1/peer_review_round_1.md").unwrap();
    let report = repo.show(events, "final_report.md").unwrap();
    for text in [&review, &report] {
        assert!(
            text.contains(&format!(
                "different GPU models ({}, {})",
                MODELS[0], MODELS[1]
            )),
            "{text}"
        );
    }
}

#[test]
#[cfg_attr(not(has_sshd), ignore = "needs OpenSSH's sshd: .ci/run installs it")]
fn hardware_same_refuses_a_reading_of_another_class() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = two_classes(tmp.path());
    let repo = run(tmp.path(), &hosts, "same");
    let it = iterations(&repo, "launch");
    assert_eq!(it.len(), 2, "{it:?}");
    // The baseline ran on host 0 (the first free), so its class is the conference's.
    let (ok, refused): (Vec<_>, Vec<_>) =
        it.iter().partition(|e| e["payload"]["status"] != "crashed");
    assert_eq!((ok.len(), refused.len()), (1, 1), "{it:?}");
    assert_eq!(ok[0]["payload"]["placement"]["gpu"], MODELS[0]);
    let reason = refused[0]["payload"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "ran on {}, and this conference measures on {}",
            MODELS[1], MODELS[0]
        )),
        "{reason}"
    );
    let status = repo.conference(&["status", "launch"]).ok().stdout;
    assert!(
        status.contains(&format!("Hardware:   {}", MODELS[0])),
        "{status}"
    );
}
