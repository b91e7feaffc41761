//! What an agent CLI reported about its run: the tokens and cost it used, and whether it ended
//! with an error, a refused tool call, or a turn or budget limit.
//!
//! One tolerant parser per preset reads the CLI's machine-readable output (its stdout), and
//! [`super::stderr`] what some CLIs say only on stderr (a rejected edit, a failed tool call, an
//! unknown flag). These formats change between versions (Claude Code's `--output-format json`
//! is one `result` object, or an array of events with `--verbose`; Codex renamed its events),
//! so every parser looks for the fields it knows wherever they are and skips the rest: an
//! unknown shape yields no usage and no problem, never an error. The samples the parsers are
//! tested on were recorded from the real CLIs where they could be (see
//! `tests/data/agent_output/README.md`).

use serde_json::Value;

use super::stderr::clip;
use super::Preset;

pub use crate::model::Usage;

/// What the CLI said about its run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentReport {
    pub usage: Option<Usage>,
    /// An error, refused tool calls, or a turn or budget limit, as a sentence.
    pub problem: Option<String>,
    /// The agent's final message.
    pub message: Option<String>,
}

/// Reads the output of a run of `preset`: its `stdout` (the machine-readable report) and its
/// `stderr`.
pub fn parse(preset: Preset, stdout: &str, stderr: &str) -> AgentReport {
    let mut report = match preset {
        Preset::Claude => claude(stdout),
        Preset::Codex => codex(stdout),
        Preset::Aider => aider(stdout),
        Preset::Gemini => gemini(stdout, stderr),
        Preset::Opencode => opencode(stdout),
    };
    let mut problems: Vec<String> = report.problem.take().into_iter().collect();
    problems.extend(super::stderr::problems(preset, stderr));
    report.problem = join(problems);
    report
}

/// The order in which the output of a command that is no preset is tried: the formats with the
/// most particular markers first, aider's plain text last.
const TRIED_IN_ORDER: [Preset; 5] = [
    Preset::Claude,
    Preset::Codex,
    Preset::Opencode,
    Preset::Gemini,
    Preset::Aider,
];

/// Reads the output of any agent run: as its preset's when the command is one; else (a command
/// line of its own that runs a known CLI, a wrapper script around one) as the first known CLI's
/// report it is, one that yields tokens, a cost or a final message, with what that CLI says on
/// stderr. An output that is no known report reads as nothing.
pub fn read(preset: Option<Preset>, stdout: &str, stderr: &str) -> AgentReport {
    if let Some(preset) = preset {
        return parse(preset, stdout, stderr);
    }
    TRIED_IN_ORDER
        .into_iter()
        .find(|&p| {
            let r = parse(p, stdout, "");
            let counted = r
                .usage
                .is_some_and(|u| u.tokens() > 0 || u.cost_usd.is_some());
            counted || r.message.is_some()
        })
        .map(|p| parse(p, stdout, stderr))
        .unwrap_or_default()
}

/// The JSON values in `text`: one document (an array counts as its elements), or one per line
/// (lines that are not JSON are skipped).
fn json_values(text: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return match v {
            Value::Array(items) => items,
            v => vec![v],
        };
    }
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .collect()
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key)
        .and_then(|n| n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)))
        .unwrap_or(0)
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn join(problems: Vec<String>) -> Option<String> {
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Claude Code: the `result` object (alone, or the last event of an array or stream).
fn claude(stdout: &str) -> AgentReport {
    let values = json_values(stdout);
    let result = values
        .iter()
        .rev()
        .find(|v| v.get("type").and_then(Value::as_str) == Some("result"))
        .or_else(|| {
            values.iter().rev().find(|v| {
                v.get("total_cost_usd").is_some()
                    || v.get("cost_usd").is_some()
                    || v.get("is_error").is_some()
            })
        });
    let Some(r) = result else {
        return AgentReport::default();
    };
    let cost = r
        .get("total_cost_usd")
        .or_else(|| r.get("cost_usd"))
        .and_then(Value::as_f64);
    let mut usage = r.get("usage").map(|u| Usage {
        input: num(u, "input_tokens")
            + num(u, "cache_creation_input_tokens")
            + num(u, "cache_read_input_tokens"),
        output: num(u, "output_tokens"),
        cost_usd: None,
    });
    // Per model (`modelUsage`): the only tokens a run stopped by its budget reports.
    if let Some(models) = r.get("modelUsage").and_then(Value::as_object) {
        let per_model = models.values().fold(Usage::default(), |acc, m| Usage {
            input: acc.input
                + num(m, "inputTokens")
                + num(m, "cacheReadInputTokens")
                + num(m, "cacheCreationInputTokens"),
            output: acc.output + num(m, "outputTokens"),
            cost_usd: None,
        });
        if usage.is_none_or(|u| u.tokens() < per_model.tokens()) {
            usage = Some(per_model);
        }
    }
    if usage.is_none() && cost.is_some() {
        usage = Some(Usage::default());
    }
    if let Some(u) = usage.as_mut() {
        u.cost_usd = cost;
    }
    let message = text(r, "result");
    let mut problems = Vec::new();
    if let Some(denials) = r.get("permission_denials").and_then(Value::as_array) {
        let refused: Vec<String> = denials.iter().map(denial).collect();
        let edits = denials.iter().any(|d| {
            let tool = d.get("tool_name").and_then(Value::as_str).unwrap_or("");
            matches!(tool, "Edit" | "MultiEdit" | "Write" | "NotebookEdit")
        });
        let what = if edits { "edit was" } else { "tool calls were" };
        if !refused.is_empty() {
            problems.push(format!(
                "the agent's {what} refused: {}",
                refused.join(", ")
            ));
        }
    }
    let subtype = r
        .get("subtype")
        .and_then(Value::as_str)
        .unwrap_or("success");
    match subtype {
        "success" => {}
        "error_max_turns" => problems.push("the agent hit its turn limit (error_max_turns)".into()),
        "error_max_budget_usd" => {
            problems.push("the agent reached its spending cap (error_max_budget_usd)".into())
        }
        other => problems.push(format!("the agent stopped with {other}")),
    }
    if r.get("is_error").and_then(Value::as_bool) == Some(true) && subtype == "success" {
        let why = message.as_deref().map(|m| clip(m, 200));
        problems.push(format!(
            "the agent reported an error{}",
            why.map(|w| format!(": {w}")).unwrap_or_default()
        ));
    }
    AgentReport {
        usage,
        problem: join(problems),
        message,
    }
}

/// `Edit of /path/train.py`, `Bash (python3 train.py)`.
fn denial(d: &Value) -> String {
    let tool = d
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or("a tool");
    let input = d.get("tool_input").unwrap_or(&Value::Null);
    match (text(input, "file_path"), text(input, "command")) {
        (Some(path), _) => format!("{tool} of {path}"),
        (None, Some(cmd)) => format!("{tool} ({})", clip(&cmd, 80)),
        _ => tool.to_string(),
    }
}

/// Codex `exec --json`: `turn.completed` events carry each turn's usage (`output_tokens`
/// includes `reasoning_output_tokens`, `input_tokens` includes `cached_input_tokens`: Codex
/// 0.169 reports 400 output and 120 reasoning tokens for four calls of 100 tokens, 30 of them
/// reasoning); `turn.failed` the error that ended it. The older event envelope (`{"msg":
/// {"type": "token_count", …}}`) too.
fn codex(stdout: &str) -> AgentReport {
    let mut usage: Option<Usage> = None;
    let mut legacy: Option<Usage> = None;
    let mut problems = Vec::new();
    let mut message = None;
    for v in json_values(stdout) {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "turn.completed" => {
                if let Some(u) = v.get("usage") {
                    let t = usage.get_or_insert_with(Usage::default);
                    t.input += num(u, "input_tokens");
                    t.output += num(u, "output_tokens");
                }
            }
            "turn.failed" => {
                let why = v
                    .get("error")
                    .and_then(|e| text(e, "message"))
                    .unwrap_or_else(|| "turn failed".into());
                problems.push(format!("the agent's turn failed: {}", clip(&why, 200)));
            }
            "item.completed" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                match item.get("type").and_then(Value::as_str) {
                    Some("agent_message") => message = text(item, "text"),
                    Some("file_change")
                        if item.get("status").and_then(Value::as_str) == Some("failed") =>
                    {
                        let paths: Vec<String> = item
                            .get("changes")
                            .and_then(Value::as_array)
                            .map(|c| c.iter().filter_map(|c| text(c, "path")).collect())
                            .unwrap_or_default();
                        problems.push(format!(
                            "the agent's edit was refused: {}",
                            paths.join(", ")
                        ));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        if let Some(msg) = v.get("msg") {
            match msg.get("type").and_then(Value::as_str) {
                Some("token_count") => {
                    let u = msg
                        .get("info")
                        .and_then(|i| i.get("total_token_usage"))
                        .unwrap_or(msg);
                    legacy = Some(Usage {
                        input: num(u, "input_tokens"),
                        output: num(u, "output_tokens"),
                        cost_usd: None,
                    });
                }
                Some("agent_message") => message = text(msg, "message"),
                Some("error") => {
                    let why = text(msg, "message").unwrap_or_else(|| "error".into());
                    problems.push(format!("the agent reported an error: {}", clip(&why, 200)));
                }
                _ => {}
            }
        }
    }
    problems.dedup();
    AgentReport {
        usage: usage.or(legacy),
        problem: join(problems),
        message,
    }
}

/// aider prints text: `Tokens: 2.1k sent, 34 received. Cost: $0.00034 message, $0.00067
/// session.` per model call, and its edit errors in words.
fn aider(stdout: &str) -> AgentReport {
    let mut usage: Option<Usage> = None;
    let mut problems = Vec::new();
    for line in stdout.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Tokens:") {
            let (tokens, cost) = rest.split_once("Cost:").unwrap_or((rest, ""));
            let u = usage.get_or_insert_with(Usage::default);
            for part in tokens.split(',') {
                let part = part.trim().trim_end_matches('.');
                if let Some(n) = part.strip_suffix(" sent").and_then(aider_count) {
                    u.input += n;
                } else if let Some(n) = part.strip_suffix(" received").and_then(aider_count) {
                    u.output += n;
                }
            }
            // The session total after this call: the last one is the run's.
            let session = cost.split(',').find_map(|p| {
                p.trim()
                    .trim_end_matches('.')
                    .strip_suffix(" session")?
                    .trim()
                    .strip_prefix('$')?
                    .parse::<f64>()
                    .ok()
            });
            if session.is_some() {
                u.cost_usd = session;
            }
            continue;
        }
        let problem = if line.contains("SEARCH/REPLACE block failed to match")
            || line.contains("SEARCH/REPLACE blocks failed to match")
        {
            Some(format!("the agent's edit did not apply: {line}"))
        } else if line.starts_with("The LLM did not conform to the edit format") {
            Some("the agent's answer did not follow the edit format".to_string())
        } else if line.starts_with("litellm.") && line.contains("Error") {
            Some(format!("the model call failed: {}", clip(line, 200)))
        } else if (line.starts_with("Skipping edits to") && !line.contains(super::AGENT_DIR))
            || (line.starts_with("Only ") && line.contains("reflections allowed"))
        {
            Some(clip(line, 200))
        } else {
            None
        };
        if let Some(p) = problem {
            if !problems.contains(&p) {
                problems.push(p);
            }
        }
    }
    // Edits that matched after a retry leave no failure: the run's last word counts.
    if stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("Applied edit to"))
        .is_some()
        && problems
            .iter()
            .all(|p| p.contains("did not") || p.contains("edit format"))
    {
        problems.clear();
    }
    AgentReport {
        usage,
        problem: join(problems),
        message: None,
    }
}

/// `2.1k` → 2100, `34` → 34, `1.2M` → 1200000.
fn aider_count(s: &str) -> Option<u64> {
    let s = s.trim();
    let (number, scale) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1e3),
        'm' | 'M' => (&s[..s.len() - 1], 1e6),
        _ => (s, 1.0),
    };
    let n: f64 = number.trim().parse().ok()?;
    (n.is_finite() && n >= 0.0).then(|| (n * scale).round() as u64)
}

/// Gemini CLI `--output-format json`: one object with `response`, `stats` (tokens per model,
/// tool calls) and `error` (on stderr when the run failed); the `result` event of
/// `stream-json` carries `stats` too. Why a tool call failed is on stderr only.
fn gemini(stdout: &str, stderr: &str) -> AgentReport {
    let mut values = json_values(stdout);
    if values.is_empty() {
        values.extend(super::stderr::trailing_object(stderr));
    }
    let Some(r) = values.iter().rev().find(|v| {
        v.get("stats").is_some() || v.get("response").is_some() || v.get("error").is_some()
    }) else {
        return AgentReport::default();
    };
    let stats = r.get("stats").unwrap_or(&Value::Null);
    let mut usage = None;
    if let Some(models) = stats.get("models").and_then(Value::as_object) {
        let mut u = Usage::default();
        for m in models.values() {
            let t = m.get("tokens").unwrap_or(&Value::Null);
            u.input += num(t, "prompt") + num(t, "tool");
            u.output += num(t, "candidates") + num(t, "thoughts");
        }
        if u.tokens() > 0 {
            usage = Some(u);
        }
    }
    if usage.is_none() {
        let input = num(stats, "inputTokens").max(num(stats, "input_tokens"));
        let output = num(stats, "outputTokens").max(num(stats, "output_tokens"));
        if input + output > 0 {
            usage = Some(Usage {
                input,
                output,
                cost_usd: None,
            });
        }
    }
    let mut problems = Vec::new();
    let rejected = stats
        .get("tools")
        .and_then(|t| t.get("totalDecisions"))
        .map_or(0, |d| num(d, "reject"));
    if rejected > 0 {
        problems.push(format!("the agent's tool calls were refused ({rejected})"));
    }
    // Which tools failed; why is on stderr (read there when it is).
    if !stderr.contains("Error executing tool") {
        let failed: Vec<&str> = stats
            .get("tools")
            .and_then(|t| t.get("byName"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(_, t)| num(t, "fail") > 0)
                    .map(|(name, _)| name.as_str())
                    .collect()
            })
            .unwrap_or_default();
        if !failed.is_empty() {
            problems.push(format!(
                "the agent's tool calls failed: {}",
                failed.join(", ")
            ));
        }
    }
    if let Some(e) = r.get("error").filter(|e| !e.is_null()) {
        let why = text(e, "message")
            .or_else(|| e.as_str().map(str::to_string))
            .unwrap_or_else(|| "error".into());
        problems.push(format!("the agent reported an error: {}", clip(&why, 200)));
    }
    AgentReport {
        usage,
        problem: join(problems),
        message: text(r, "response"),
    }
}

/// opencode `run --format json`: `step_finish` events carry each step's tokens and cost;
/// `tool_use` events a refused permission; `error` events the errors.
fn opencode(stdout: &str) -> AgentReport {
    let mut usage: Option<Usage> = None;
    let mut problems = Vec::new();
    let mut message = String::new();
    for v in json_values(stdout) {
        let part = v.get("part").unwrap_or(&Value::Null);
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "step_start" => message.clear(),
            "text" => message.push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
            "step_finish" => {
                let u = usage.get_or_insert_with(Usage::default);
                let t = part.get("tokens").unwrap_or(&Value::Null);
                let cache = t.get("cache").unwrap_or(&Value::Null);
                u.input += num(t, "input") + num(cache, "read") + num(cache, "write");
                u.output += num(t, "output") + num(t, "reasoning");
                if let Some(c) = part.get("cost").and_then(Value::as_f64) {
                    u.cost_usd = Some(u.cost_usd.unwrap_or(0.0) + c);
                }
            }
            "tool_use" => problems.extend(opencode_tool(part)),
            "error" => {
                let e = v.get("error").unwrap_or(&Value::Null);
                let why = e
                    .get("data")
                    .and_then(|d| text(d, "message"))
                    .or_else(|| text(e, "message"))
                    .or_else(|| text(e, "name"))
                    .unwrap_or_else(|| "error".into());
                problems.push(format!("the agent reported an error: {}", clip(&why, 200)));
            }
            _ => {}
        }
    }
    let message = message.trim();
    AgentReport {
        usage,
        problem: join(problems),
        message: (!message.is_empty()).then(|| message.to_string()),
    }
}

/// A refused opencode tool call (`state.error` says the permission was rejected), or one of a
/// tool the configuration took away (opencode 1.18 records it as the tool `invalid`).
fn opencode_tool(part: &Value) -> Option<String> {
    let state = part.get("state").unwrap_or(&Value::Null);
    let input = state.get("input").unwrap_or(&Value::Null);
    let tool = text(part, "tool").unwrap_or_else(|| "a tool".into());
    if tool == "invalid" {
        let wanted = text(input, "tool").unwrap_or_else(|| "a tool".into());
        return Some(format!("the agent called a tool it may not use: {wanted}"));
    }
    let error = text(state, "error").unwrap_or_default();
    let refused = state.get("status").and_then(Value::as_str) == Some("error")
        && (error.contains("permission") || error.contains("rejected"));
    if !refused {
        return None;
    }
    Some(match text(input, "filePath") {
        Some(path) if matches!(tool.as_str(), "edit" | "write" | "patch") => {
            format!("the agent's edit was refused: {tool} of {path}")
        }
        _ => format!("the agent's {tool} call was refused"),
    })
}

#[cfg(test)]
mod tests;
