//! The README's first command runs `git conference demo`: it must reach the known 2-D minimum
//! within 0.01 on a fresh machine, with nothing but git, and it must never commit someone's files.

use crate::common;

/// Known global minimum of the 2-D fixture's f (the demo's `OPTIMUM`).
const OPTIMUM: f64 = -1.518_685_8;

#[test]
fn demo_reaches_the_known_minimum() {
    let repo = common::TestRepo::new();
    let dir = repo.tmp.path().join("demo");
    let out = repo
        .command("git")
        .args(["conference", "demo", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Read the result back with git, not through the program.
    let git = |args: &[&str]| {
        let o = repo
            .command("git")
            .current_dir(&dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let state: serde_json::Value =
        serde_json::from_str(&git(&["show", "refs/conference/demo/events:state.json"])).unwrap();
    let best = state["best"]["metric"].as_f64().unwrap();
    assert!(
        best - OPTIMUM < 0.01,
        "best {best} is not within 0.01 of the minimum"
    );
    // The best branch really holds parameters that evaluate to that metric: run the fixture's
    // own evaluation (sh and awk) on the best branch's params.sh, outside the program.
    let check = repo.tmp.path().join("check");
    std::fs::create_dir_all(&check).unwrap();
    std::fs::write(
        check.join("params.sh"),
        git(&["show", "conference/demo/best:params.sh"]),
    )
    .unwrap();
    std::fs::write(check.join("eval.sh"), git(&["show", "HEAD:eval.sh"])).unwrap();
    let eval = repo
        .command("sh")
        .arg("eval.sh")
        .current_dir(&check)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&eval.stdout);
    let f: f64 = printed
        .trim()
        .strip_prefix("f: ")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("eval.sh printed {printed:?}"));
    assert!(
        (f - best).abs() < 1e-9,
        "best branch evaluates to {f}, state says {best}"
    );
    assert!(f - OPTIMUM < 0.01, "{f}");
    assert!(
        stdout.contains("gap"),
        "the demo should say how far it is from the optimum: {stdout}"
    );
    assert!(dir.join("report/final_report.md").exists());
    assert!(dir.join("report/conference_progress.png").exists());
}

#[test]
fn demo_refuses_a_folder_with_files() {
    let repo = common::TestRepo::new();
    let dir = repo.tmp.path().join("mine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "my notes\n").unwrap();
    let out = repo
        .command("git")
        .args(["conference", "demo", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert!(!dir.join(".git").exists(), "no repository was made there");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "my notes\n"
    );
}
