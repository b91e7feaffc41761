//! Optional prose from an agent for the session chair, reviewer and synthesizer (the Agent
//! section's `chair`, `reviewer`, `synthesizer` commands). The built-in text, made from the data,
//! is always the basis: the command reads it on stdin and what it prints is appended as commentary.
//! A prose command that fails costs a line in the file, never the conference.

use crate::engine::Conference;
use crate::exec::process::{self, Outcome, Spec};

/// `md` with the commentary of `command` (if configured) appended.
pub async fn with_prose(
    conf: &Conference,
    command: Option<&String>,
    role: &str,
    md: String,
) -> String {
    let Some(command) = command else { return md };
    let st = conf.state();
    let log = conf.log_path(&format!("r{}-{role}.prose", st.round));
    let mut env = conf.context_env(role, st.round, 0, st.best.metric);
    env.push(("CONFERENCE_ROLE".into(), role.to_string()));
    let run = process::run(Spec {
        command,
        cwd: &conf.run_dir,
        env,
        timeout: Some(conf.config.agent.timeout),
        stdout: log.with_extension("out"),
        stderr: log.with_extension("err"),
        stdin: Some(md.clone().into_bytes()),
    })
    .await;
    let text = process::read_output(&log.with_extension("out"));
    match run {
        Ok(f) if f.outcome == Outcome::Exited(0) && !text.trim().is_empty() => {
            format!("{md}\n## Commentary ({role})\n\n{}\n", text.trim())
        }
        Ok(f) => format!(
            "{md}\n_The {role} command `{command}` gave no commentary ({})._\n",
            f.outcome.describe()
        ),
        Err(e) => format!("{md}\n_The {role} command `{command}` could not run: {e}._\n"),
    }
}
