//! `## Guard` commands, enforced: each runs in the candidate's worktree, after the candidate
//! measured better and before it is kept (and on a combination knowledge transfer would put on
//! best). The first that fails (or times out) rejects the
//! candidate, with the command and the end of its output as the reason, so the agent reads in its
//! next prompt what broke. Which bullets are commands is decided in `config::guard`.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::engine::Conference;
use crate::exec::process::{self, Outcome, Spec};
use crate::model::Verdict as AttemptVerdict;

/// What the guards say about the candidate in `cwd`.
pub enum Verdict {
    Pass,
    /// Why the candidate is rejected.
    Fail(String),
    Interrupted,
}

/// Runs the guard commands in `cwd`; `label` names the log files (`<label>.guard<N>.out`).
pub async fn check(
    conf: &Conference,
    cwd: &Path,
    env: &[(String, String)],
    label: &str,
    timeout: Duration,
) -> Result<Verdict> {
    for (i, command) in crate::config::guard::commands(&conf.config.guard)
        .iter()
        .enumerate()
    {
        let prefix = conf.log_path(&format!("{label}.guard{i}"));
        let stdout = prefix.with_extension(format!("guard{i}.out"));
        let stderr = prefix.with_extension(format!("guard{i}.err"));
        let finished = process::run(Spec {
            command,
            cwd,
            env: env.to_vec(),
            timeout: Some(timeout),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            stdin: None,
        })
        .await?;
        match finished.outcome {
            Outcome::Cancelled => return Ok(Verdict::Interrupted),
            ref o if o.success() => {}
            ref o => {
                let output = format!(
                    "{}\n{}",
                    process::read_output(&stdout),
                    process::read_output(&stderr)
                );
                return Ok(Verdict::Fail(format!(
                    "guard `{command}` failed ({}){}",
                    o.describe(),
                    crate::engine::measure::evaluate::tail(&output, 5)
                )));
            }
        }
    }
    Ok(Verdict::Pass)
}

/// Runs the guard commands on `commit` in the `best` worktree (knowledge transfer's combined
/// best, which no researcher measured).
pub async fn check_commit(conf: &Conference, commit: git2::Oid, label: &str) -> Result<Verdict> {
    if crate::config::guard::commands(&conf.config.guard).is_empty() {
        return Ok(Verdict::Pass);
    }
    let st = conf.state();
    let path = conf.prepare_worktree("best", None, &commit.into())?;
    let env = conf.context_env("best", st.round, 0, st.best.metric);
    check(conf, &path, &env, label, conf.config.evaluation.timeout).await
}

/// The research loop's gate: a `kept` verdict stands only if the guards pass, else it becomes
/// `rejected` with the failure as the reason; other verdicts pass through. None on Ctrl-C.
pub async fn gate(
    conf: &Conference,
    verdict: AttemptVerdict,
    reason: Option<String>,
    cwd: &Path,
    env: &[(String, String)],
    label: &str,
) -> Result<Option<(AttemptVerdict, Option<String>)>> {
    if verdict != AttemptVerdict::Kept {
        return Ok(Some((verdict, reason)));
    }
    let timeout = conf.config.evaluation.timeout;
    Ok(match check(conf, cwd, env, label, timeout).await? {
        Verdict::Pass => Some((verdict, reason)),
        Verdict::Fail(why) => Some((AttemptVerdict::Rejected, Some(why))),
        Verdict::Interrupted => None,
    })
}
