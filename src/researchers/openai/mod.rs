//! `builtin:openai`: a researcher that asks any OpenAI-compatible chat endpoint (hosted APIs,
//! vLLM, Ollama, llama.cpp, LM Studio) for edits, in-process (DESIGN.md §5).
//!
//! One run: send the prompt and the files the researcher may change (`files`), read the answer's
//! SEARCH/REPLACE blocks and whole-file rewrites (`edits`), apply them tolerantly in memory
//! (`matcher`, `apply`), ask once more about what did not apply (saying why), then write the
//! files. An answer that edits a path the researcher may not change is not applied at all and
//! the attempt is `rejected`; one that still does not apply, or holds no edit, is `no_change`
//! with the reason. HTTP retries live in `client`; the agent timeout bounds the whole run.

mod apply;
mod client;
mod edits;
mod files;
mod matcher;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::agents::call::{AgentCall, AgentOutcome, AgentRun};
use crate::config::paths::Guard;
use crate::exec::process;
use crate::git::snapshot;
use crate::model::Tokens;
use apply::Problem;
use client::{Endpoint, Message};

/// What the model is told about answering, before the conference's prompt.
const SYSTEM: &str = "You are a researcher in an automated research conference. You improve a \
project by editing its files; the conference measures every change and keeps it only if the \
metric improves. Answer with your edits, in this exact format, and nothing the conference \
must run: it runs the evaluation itself.

Start with one line `NOTE: <one-line description of the change>`.

To change part of a file, write its path on a line, then a SEARCH/REPLACE block:

path/to/file.py
<<<<<<< SEARCH
lines copied exactly from the file, enough to be unique
=======
the new lines
>>>>>>> REPLACE

To create a file or rewrite a whole small file, write its path on a line, then its complete \
new content in a fenced code block:

path/to/file.py
```
complete file content
```

Only change the files shown as yours to change. Keep changes small and focused: one idea per \
answer.";

/// What the endpoint lacks, and how to give it (the Agent key it concerns, for its line).
#[derive(Debug)]
pub struct Missing {
    pub key: &'static str,
    pub message: String,
    pub hint: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.message, self.hint)
    }
}

/// The endpoint `agent` names, with the usual environment variables as fallbacks.
pub fn endpoint(
    agent: &crate::config::Agent,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Endpoint, Missing> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let missing = |key, message: &str, hint: String| Missing {
        key,
        message: message.to_string(),
        hint,
    };
    let base = agent
        .base_url
        .clone()
        .or_else(|| var("OPENAI_BASE_URL"))
        .or_else(|| var("OPENAI_API_BASE"))
        .ok_or_else(|| {
            missing(
                "command",
                "builtin:openai needs the endpoint's base URL",
                "add under `## Agent` `- base url: http://127.0.0.1:8000/v1` (the API's address, \
                 usually ending in /v1), or set OPENAI_BASE_URL"
                    .into(),
            )
        })?;
    let model = agent
        .model
        .clone()
        .or_else(|| var("OPENAI_MODEL"))
        .ok_or_else(|| {
            missing(
                "command",
                "builtin:openai needs a model",
                "add under `## Agent` `- model: <the model's name>`, or set OPENAI_MODEL".into(),
            )
        })?;
    let key = match &agent.api_key_env {
        Some(name) => Some(var(name).ok_or_else(|| {
            missing(
                "api key env",
                &format!("`- api key env: {name}` names an environment variable that is not set"),
                format!(
                    "export {name}=<your key> first, or remove the line for a server without keys"
                ),
            )
        })?),
        None => var("OPENAI_API_KEY"),
    };
    let base = base.trim().trim_end_matches('/');
    let url = if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/chat/completions")
    };
    Ok(Endpoint { url, model, key })
}

/// What the HTTP agent needs of the conference that calls it.
pub struct Context<'a> {
    /// The Agent section (endpoint, model, key, timeout).
    pub agent: &'a crate::config::Agent,
    /// The path rules: which files the researcher may edit.
    pub guard: &'a Guard,
    /// The repository, to read the files of the kept snapshot.
    pub repo_dir: &'a std::path::Path,
    /// The exchange's log, where a command agent's stdout goes (`A-r1-i2.out`).
    pub log: std::path::PathBuf,
}

/// One agent run; the tokens of every answer received, whatever the outcome.
pub async fn run(conf: &Context<'_>, call: &AgentCall<'_>) -> Result<AgentRun> {
    let tokens = Mutex::new(None::<Tokens>);
    let timeout = call.timeout.unwrap_or(conf.agent.timeout);
    let deadline = Instant::now() + timeout;
    let work = converse(conf, call, deadline, &tokens);
    let outcome = tokio::select! {
        done = tokio::time::timeout(timeout, work) => match done {
            Err(_) => AgentOutcome::TimedOut,
            Ok(Ok(outcome)) => outcome,
            Ok(Err(why)) => AgentOutcome::Crashed(why),
        },
        _ = cancelled() => AgentOutcome::Interrupted,
    };
    let usage = tokens.lock().unwrap().map(|t| crate::agents::Usage {
        input: t.input,
        output: t.output,
        cost_usd: None,
    });
    Ok(AgentRun {
        outcome,
        report: crate::agents::AgentReport {
            usage,
            ..Default::default()
        },
        batch: None,
    })
}

async fn cancelled() {
    while !process::cancelled() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The conversation: an answer, at most one re-ask, the files written. Err: the request failed.
async fn converse(
    conf: &Context<'_>,
    call: &AgentCall<'_>,
    deadline: Instant,
    tokens: &Mutex<Option<Tokens>>,
) -> Result<AgentOutcome, String> {
    let endpoint = endpoint(conf.agent, &|n| std::env::var(n).ok()).map_err(|m| m.to_string())?;
    let mut log = open_log(&conf.log)?;
    let shown = editable_files(conf, call).map_err(|e| format!("{e:#}"))?;
    let mut messages = opening(call.prompt, &shown);
    let http = client::client()?;
    let mut workspace = apply::Workspace::new(call.worktree, conf.guard);
    let mut note = None;
    for ask in 0..2 {
        let reply = client::chat(&http, &endpoint, &messages, deadline, &mut log).await?;
        *tokens.lock().unwrap().get_or_insert_with(Tokens::default) += reply.tokens;
        let problems = match apply_answer(&reply.content, &mut workspace, &mut note) {
            Ok(problems) => problems,
            Err(refused) => return Ok(refused),
        };
        messages.push(message("assistant", reply.content));
        if problems.is_empty() {
            return finish(&workspace, note);
        }
        if ask == 1 {
            let said: Vec<String> = problems.iter().map(Problem::to_string).collect();
            let reason = format!(
                "the model's edits did not apply, even after a re-ask: {}",
                said.join("; ")
            );
            return Ok(AgentOutcome::Unapplied {
                verdict: crate::model::Verdict::NoChange,
                reason,
            });
        }
        messages.push(message("user", reask(&problems, &mut workspace)));
    }
    unreachable!("the second answer returns")
}

/// The exchange's log, created with its folder.
fn open_log(path: &std::path::Path) -> Result<std::fs::File, String> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// The first two messages: how to answer, then the prompt and the files.
fn opening(prompt: &str, shown: &[(String, String)]) -> Vec<Message> {
    let user = format!(
        "{prompt}\n\nAnswer with your edits in the format above: the conference applies them and \
         takes the description from your NOTE line.\n\n## Files yours to change\n\n{}",
        files::render(shown)
    );
    vec![message("system", SYSTEM.to_string()), message("user", user)]
}

/// Applies an answer's edits in memory: what did not apply, or (Err) the outcome of an answer
/// that edits a path the researcher may not change. Its NOTE line goes to `note` (the first wins).
fn apply_answer(
    content: &str,
    workspace: &mut apply::Workspace,
    note: &mut Option<String>,
) -> Result<Vec<Problem>, AgentOutcome> {
    let answer = match edits::parse(content) {
        Err(why) => return Ok(vec![Problem { path: None, why }]),
        Ok(answer) => answer,
    };
    if answer.edits.is_empty() {
        let why = format!(
            "the answer holds no edit (no SEARCH/REPLACE block, no path line before a fenced \
             file); it began: {}",
            client::snippet(content)
        );
        return Ok(vec![Problem { path: None, why }]);
    }
    if note.is_none() {
        *note = answer.note;
    }
    if let Some(why) = workspace.refusal(&answer.edits) {
        return Err(AgentOutcome::Unapplied {
            verdict: crate::model::Verdict::Rejected,
            reason: format!("{why}; nothing was applied"),
        });
    }
    Ok(workspace.apply(&answer.edits))
}

/// Writes a wholly applied answer; one that changes nothing is `no_change` with that reason.
fn finish(workspace: &apply::Workspace, note: Option<String>) -> Result<AgentOutcome, String> {
    let written = workspace
        .write()
        .map_err(|e| format!("cannot write the edits: {e}"))?;
    if written.is_empty() {
        return Ok(AgentOutcome::Unapplied {
            verdict: crate::model::Verdict::NoChange,
            reason: "the model's edits leave every file as it was".into(),
        });
    }
    Ok(AgentOutcome::Done(note))
}

fn message(role: &'static str, content: String) -> Message {
    Message { role, content }
}

/// The follow-up after an answer that did not (wholly) apply: why, and the files it was about
/// as they are now.
fn reask(problems: &[Problem], workspace: &mut apply::Workspace) -> String {
    let mut paths: Vec<&str> = problems.iter().filter_map(|p| p.path.as_deref()).collect();
    paths.sort_unstable();
    paths.dedup();
    let current: Vec<(String, String)> = paths
        .iter()
        .filter_map(|p| Some((p.to_string(), workspace.read(p).ok()??)))
        .collect();
    let mut text = format!(
        "Your answer could not be applied as written:\n- {}\n\nThe edits that did apply are kept. \
         Answer again with SEARCH/REPLACE blocks (or whole files) for the failed changes only, \
         in the same format, copying the SEARCH lines exactly from the files as they are now.",
        problems
            .iter()
            .map(Problem::to_string)
            .collect::<Vec<_>>()
            .join("\n- ")
    );
    if !current.is_empty() {
        text.push_str("\n\n## The files as they are now\n\n");
        text.push_str(&files::render(&current));
    }
    text
}

/// The files the researcher may change, as committed in its kept snapshot: source first, lock
/// files and data last (they are the first left out when the request's budget runs short).
fn editable_files(conf: &Context<'_>, call: &AgentCall<'_>) -> Result<Vec<(String, String)>> {
    let repo = git2::Repository::open(conf.repo_dir)?;
    let mut paths: Vec<String> = snapshot::list_files(&repo, call.head_tree)?
        .into_iter()
        .filter(|p| conf.guard.may_edit(p))
        .collect();
    paths.sort_by_key(|p| files::is_bulk(p));
    snapshot::read_files(&repo, call.head_tree, &paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(lines: &str) -> crate::config::Agent {
        let text = format!(
            "# Conference: T\n## Goal\nG\n## Mode\nmetric\n## Success Metric\n- metric: s\n\
             - target: none\n- direction: minimize\n## Researchers\n- count: 1\n\
             - iterations per round: 1\n- max rounds: 1\n## Evaluation\n- command: ./eval.sh\n\
             ## Agent\n- command: builtin:openai\n{lines}"
        );
        crate::config::load(&text).expect("valid").agent
    }

    #[test]
    fn the_endpoint_from_the_agent_section_then_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let a = agent("- base url: http://127.0.0.1:8000/v1/\n- model: m\n- api key env: MY_KEY\n");
        let e = endpoint(&a, &env(&[("MY_KEY", "k1"), ("OPENAI_API_KEY", "k2")])).unwrap();
        assert_eq!(
            e,
            Endpoint {
                url: "http://127.0.0.1:8000/v1/chat/completions".into(),
                model: "m".into(),
                key: Some("k1".into()),
            }
        );
        let bare = agent("");
        let vars = env(&[
            ("OPENAI_API_BASE", "http://h/v1"),
            ("OPENAI_MODEL", "m2"),
            ("OPENAI_API_KEY", ""),
        ]);
        let e = endpoint(&bare, &vars).unwrap();
        assert_eq!(
            (e.url.as_str(), e.model.as_str(), e.key),
            ("http://h/v1/chat/completions", "m2", None)
        );
        let missing = endpoint(&bare, &env(&[("OPENAI_MODEL", "m")]))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("base url") && missing.contains("OPENAI_BASE_URL"),
            "{missing}"
        );
        let missing = endpoint(&bare, &env(&[("OPENAI_BASE_URL", "http://h")])).unwrap_err();
        assert!(missing.message.contains("needs a model"), "{missing}");
        let unset = endpoint(&a, &env(&[])).unwrap_err();
        assert_eq!(unset.key, "api key env");
        assert!(
            unset.message.contains("MY_KEY") && unset.message.contains("not set"),
            "{unset}"
        );
    }
}
