//! `demo`: the embedded default, runnable on a fresh machine with nothing but git. It copies the
//! bundled 2-D tuning fixture into a new temporary repository, runs a 3-researcher conference
//! with `builtin:tune`, writes the report, and says how close the best is to the known optimum.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

/// The fixture, bundled into the binary so the demo needs no source tree.
const PARAMS: &str = include_str!("../../fixtures/tune-2d/params.sh");
const EVAL: &str = include_str!("../../fixtures/tune-2d/eval.sh");
/// Known global minimum of f(x, y) = sin x · cos y + sin(xy) + (x² + y²)/20 over [-5, 5]²:
/// −1.5186858 at (−1.704083, 0.677508) (a 2001² grid refined by pattern search; the unit tests
/// check it is a minimum).
pub const OPTIMUM: f64 = -1.518_685_8;

const CONFERENCE_MD: &str = "# Conference: Demo 2-D tuning

## Goal
Minimise f(x, y) = sin x · cos y + sin(xy) + (x² + y²)/20 by tuning the literals in params.sh.

## Mode
metric

## Success Metric
- **Metric:** f
- **Target:** -1.515
- **Direction:** minimize

## Researchers
- **Count:** 3
- **Iterations per round:** 5
- **Max rounds:** 4

## Pre-Flight Gate
- **Critic / Devil's Advocate:** disabled
- **Final confirmation:** confirmed

## Search Space
**Allowed changes:**
- params.sh

**Forbidden changes:**
- eval.sh (the evaluation harness)

## Search Space Partitioning
**Strategy:** free

## Noise Handling
- **Noise runs:** 1

## Constraints
- **Max total iterations:** 60

## Evaluation
- command: ./eval.sh
- timeout: 30s
- frozen: eval.sh

## Agent
- command: builtin:tune
- seed: 1

## Current Approach
x = -1.0, y = 1.0 (f ≈ -1.196).

## Shared Knowledge

## Conference Log
| Round | Researcher | Best Metric | Key Finding | Status |
|---|---|---|---|---|
";

/// Run a demo conference (3 researchers, builtin:tune, a 2-D function with a known minimum) in a
/// new temporary repository; needs only git.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Folder for the demo repository (default: a new folder under the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the built-in tuner.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs git in the demo's own repository: never in the one the demo was started from, even
/// under `git --git-dir=… conference demo` (which exports GIT_DIR to this process).
fn git(dir: &std::path::Path, args: &[&str]) -> Result<()> {
    let status = crate::exec::command("git", crate::exec::GitEnv::Clear)
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "git-conference demo")
        .env("GIT_AUTHOR_EMAIL", "demo@git-conference.invalid")
        .env("GIT_COMMITTER_NAME", "git-conference demo")
        .env("GIT_COMMITTER_EMAIL", "demo@git-conference.invalid")
        .status()?;
    if !status.success() {
        bail!("git {} failed in {}", args.join(" "), dir.display());
    }
    Ok(())
}

/// Whether an executable `program` is in one of PATH's folders (where `git` looks for
/// `git-conference` when asked for `git conference`).
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// `word` as one shell word: as it is when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c));
    if plain && !word.is_empty() {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

pub fn run(args: DemoArgs, quiet: bool) -> Result<i32> {
    let dir = match args.dir {
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("git-conference-demo-")
            .tempdir()?
            .keep(),
    };
    std::fs::create_dir_all(&dir)?;
    // The demo commits everything in its folder: never someone's files.
    if std::fs::read_dir(&dir)?.next().is_some() {
        return Err(crate::error::usage(format!(
            "{} is not empty; pass a new or empty folder to --dir (or leave --dir out)",
            dir.display()
        )));
    }
    git(&dir, &["init", "-q"])?;
    std::fs::write(dir.join("params.sh"), PARAMS)?;
    std::fs::write(dir.join("eval.sh"), EVAL)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("eval.sh"), std::fs::Permissions::from_mode(0o755))?;
    std::fs::write(
        dir.join("conference.md"),
        CONFERENCE_MD.replace("- seed: 1", &format!("- seed: {}", args.seed)),
    )?;
    git(&dir, &["add", "-A"])?;
    git(
        &dir,
        &["commit", "-q", "-m", "demo: a 2-D function to minimise"],
    )?;
    eprintln!("demo repository: {}", dir.display());
    // The hints must work as printed, from the shell the demo was started in: in the demo's
    // repository, and, when run from a build before the install (`cargo run --release --
    // demo`), with this executable's path instead of `git conference`.
    let program = match std::env::current_exe() {
        Ok(exe) if !on_path("git-conference") => shell_word(&exe.display().to_string()),
        _ => "git conference".to_string(),
    };
    let here = shell_word(&dir.display().to_string());
    crate::ui::set_invocation(format!("cd {here} && {program}"));
    eprintln!("running: {program} start   (3 researchers, builtin:tune, at most 60 iterations)\n");
    std::env::set_current_dir(&dir)?;
    // The conference below runs in the demo repository: nothing it starts (evaluations, git)
    // may find the caller's repository through the environment. Still one thread here.
    for var in crate::exec::spawn::REPOSITORY_ENV {
        std::env::remove_var(var);
    }
    let code = super::run::start(
        super::run::StartArgs {
            name: Some("demo".into()),
            config: "conference.md".into(),
            base: None,
            yes: true,
            remote: None,
            machine: Default::default(),
        },
        quiet,
    )?;
    let report_dir = dir.join("report");
    let repo = git2::Repository::open(&dir)?;
    super::report::write(&repo, "demo", &report_dir)?;
    let conf = crate::engine::Conference::open(repo.path(), "demo", crate::ui::Ui::new(true))?;
    let st = conf.state();
    let best = st.best.metric.unwrap_or(f64::NAN);
    println!();
    println!(
        "Best f = {best:.6} (baseline {:.6}); known optimum {OPTIMUM:.7}: gap {:.6}",
        st.baseline_metric.unwrap_or(f64::NAN),
        // eval.sh prints six decimals: a best at the optimum may round just below it.
        (best - OPTIMUM).max(0.0)
    );
    println!(
        "Report: {}/final_report.md (plot: conference_progress.png)",
        report_dir.display()
    );
    println!("Look around: cd {here} && git log --oneline refs/conference/demo/events && {program} status");
    Ok(code)
}
