//! The shipped man pages are generated from the same clap definitions as `-h`: this fails when
//! they drift (refresh them with `cargo run -- __man man`).

use std::process::Command;

#[test]
fn man_pages_are_up_to_date() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_git-conference"))
        .arg("__man")
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success());
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let mut count = 0;
    for entry in std::fs::read_dir(out.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let fresh = std::fs::read(entry.path()).unwrap();
        let committed = std::fs::read(shipped.join(&name)).unwrap_or_else(|_| {
            panic!(
                "man/{} is missing: run `cargo run -- __man man`",
                name.to_string_lossy()
            )
        });
        assert!(
            fresh == committed,
            "man/{} is out of date: run `cargo run -- __man man`",
            name.to_string_lossy()
        );
        count += 1;
    }
    assert!(count >= 12, "expected a page per command, got {count}");
}

#[test]
fn help_names_every_command() {
    let out = Command::new(env!("CARGO_BIN_EXE_git-conference"))
        .arg("-h")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for cmd in [
        "init", "start", "resume", "status", "log", "report", "apply", "clean", "push", "fetch",
        "join", "list", "trust", "demo", "steer", "answer", "stop", "approve",
    ] {
        assert!(text.contains(cmd), "`-h` does not mention {cmd}:\n{text}");
    }
    assert!(!text.contains("__man"));
    assert!(!text.contains("watchdog"), "{text}");
}

#[test]
fn bad_usage_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_git-conference"))
        .arg("no-such-command")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The runner's watchdog is no command a user can start (it would wait on its stdin).
    let out = Command::new(env!("CARGO_BIN_EXE_git-conference"))
        .args(["__watchdog", "/tmp", "1"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
