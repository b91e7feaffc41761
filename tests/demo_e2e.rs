//! The README's first command runs `git conference demo`: it must reach the known 2-D minimum
//! within 0.01 on a fresh machine, with nothing but git.

mod common;

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
        (best - (-1.51868)).abs() < 0.01,
        "best {best} is not within 0.01 of the minimum"
    );
    // The best branch really holds parameters that evaluate to that metric.
    let params = git(&["show", "conference/demo/best:params.sh"]);
    assert!(params.contains("x=") && params.contains("y="));
    assert!(
        stdout.contains("gap"),
        "the demo should say how far it is from the optimum: {stdout}"
    );
    assert!(dir.join("report/final_report.md").exists());
    assert!(dir.join("report/conference_progress.png").exists());
}
