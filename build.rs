//! Which real agent CLIs the end-to-end tests in `tests/e2e/agents.rs` can drive: each
//! `GIT_CONFERENCE_TEST_<CLI>` that names an executable file sets the cfg `agent_cli_<cli>`, and a
//! test without its CLI is `#[ignore]`d with the reason, so `cargo test` reports it as
//! `ignored, needs Claude Code: …` instead of passing without having run. Under CI (`CI` set)
//! Claude Code, aider and Codex, which `.ci/run` installs, are always on: there a missing one
//! fails its test.
//!
//! The same holds for the real servers the tests start themselves (`SYSTEM_TOOLS`): headless
//! Chromium with ChromeDriver for the live page, Slurm with munge for the slurm launcher, OpenSSH's
//! server for the ssh launcher. Each sets `has_<tool>` when every one of its files exists, and always
//! under CI, which installs them (`.ci/run`). Two come from PyPI, each into a git-ignored venv of
//! the clone that `.ci/run` makes: Ray for the ray launcher (`has_ray` when `.ci/ray-venv/bin/ray`
//! exists) and MLflow's tracking server for the MLflow sink (`has_mlflow` when
//! `.ci/mlflow-venv/bin/mlflow` exists, or the venv `GIT_CONFERENCE_TEST_MLFLOW_VENV` names); both
//! always under CI.

use std::path::Path;

/// (cfg name, the variable naming the CLI, whether CI must have it)
const CLIS: [(&str, &str, bool); 5] = [
    ("agent_cli_claude", "GIT_CONFERENCE_TEST_CLAUDE", true),
    ("agent_cli_aider", "GIT_CONFERENCE_TEST_AIDER", true),
    ("agent_cli_codex", "GIT_CONFERENCE_TEST_CODEX", true),
    ("agent_cli_gemini", "GIT_CONFERENCE_TEST_GEMINI", false),
    ("agent_cli_opencode", "GIT_CONFERENCE_TEST_OPENCODE", false),
];

/// (cfg name, the files the tests run)
const SYSTEM_TOOLS: [(&str, &[&str]); 3] = [
    (
        "has_chromium",
        &["/usr/bin/chromium", "/usr/bin/chromedriver"],
    ),
    (
        "has_slurm",
        &[
            "/usr/sbin/slurmctld",
            "/usr/sbin/slurmd",
            "/usr/bin/sbatch",
            "/usr/sbin/munged",
        ],
    ),
    (
        "has_sshd",
        &["/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"],
    ),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CI");
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    for (cfg, var, in_ci) in CLIS {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
        println!("cargo:rerun-if-env-changed={var}");
        let named = std::env::var_os(var).is_some_and(|p| Path::new(&p).is_file());
        if named {
            // A CLI reinstalled or removed at that path is seen at the next build.
            println!(
                "cargo:rerun-if-changed={}",
                std::env::var(var).unwrap_or_default()
            );
        }
        if named || (ci && in_ci) {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    println!("cargo:rustc-check-cfg=cfg(has_ray)");
    println!("cargo:rerun-if-changed=.ci/ray-venv/bin/ray");
    if ci || Path::new(".ci/ray-venv/bin/ray").is_file() {
        println!("cargo:rustc-cfg=has_ray");
    }
    for (cfg, files) in SYSTEM_TOOLS {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
        for file in files {
            println!("cargo:rerun-if-changed={file}");
        }
        if ci || files.iter().all(|f| Path::new(f).is_file()) {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    // MLflow's tracking server, which `.ci/run` installs from PyPI into a venv of the clone.
    println!("cargo:rustc-check-cfg=cfg(has_mlflow)");
    println!("cargo:rerun-if-env-changed=GIT_CONFERENCE_TEST_MLFLOW_VENV");
    let venv = std::env::var_os("GIT_CONFERENCE_TEST_MLFLOW_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/mlflow-venv"));
    let mlflow = venv.join("bin/mlflow");
    println!("cargo:rerun-if-changed={}", mlflow.display());
    if ci || mlflow.is_file() {
        println!("cargo:rustc-cfg=has_mlflow");
    }
}
