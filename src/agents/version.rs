//! The agent CLI's version, where a preset's line depends on it. A Cost budget passes Claude
//! Code its native cap, `--max-budget-usd`, which came with Claude Code 2.0: Claude Code
//! 1.0.128 answers `error: unknown option '--max-budget-usd'` and exits 1, so every run of the
//! conference would crash the same way. `start` asks the CLI its version first (`claude
//! --version` prints `1.0.128 (Claude Code)`) and refuses such a pair on the Cost budget's line
//! (the check against conference.md lives in `engine::run::preflight`, above both `config` and
//! `agents`, so that neither imports the other).

use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long `--version` may take before the check gives up (and lets the conference start).
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// What `program --version` prints (its first word), or None when it cannot tell in time.
pub fn version_of(program: &str) -> Option<String> {
    let mut child = crate::exec::command(program, crate::exec::GitEnv::Inherit)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    out.split_whitespace().next().map(str::to_string)
}

/// The major version of `1.0.128` or `v2.1.197`.
pub fn major(version: &str) -> Option<u32> {
    version
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions() {
        assert_eq!(major("1.0.128"), Some(1));
        assert_eq!(major("2.1.197"), Some(2));
        assert_eq!(major("v2.0.0"), Some(2));
        assert_eq!(major("(Claude"), None);
    }
}
