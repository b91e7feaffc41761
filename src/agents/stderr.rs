//! What agent CLIs say only on stderr. Recorded from the real CLIs (samples in
//! `tests/data/agent_output/`): Codex 0.169 logs an edit its approval policy rejected there and
//! nowhere in its `--json` events; Gemini CLI 0.61 logs each failed tool call there, and with
//! `--output-format json` writes its error object there too; every CLI names a flag it does not
//! know there (Claude Code before 2.0 has no `--max-budget-usd`).

use serde_json::Value;

use super::Preset;

/// The problems `stderr` of a run of `preset` reports, as sentences, each once.
pub fn problems(preset: Preset, stderr: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in stderr.lines() {
        let line = plain(line);
        let line = line.trim();
        let problem = unknown_flag(preset, line).or_else(|| match preset {
            Preset::Codex => codex(line),
            Preset::Gemini => gemini(line),
            _ => None,
        });
        if let Some(p) = problem.filter(|p| !out.contains(p)) {
            out.push(p);
        }
    }
    out
}

/// The JSON object that ends `text` (Gemini CLI's pretty-printed error object after its log
/// lines), if one does.
pub fn trailing_object(text: &str) -> Option<Value> {
    let starts = text
        .match_indices('{')
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || text[..i].ends_with('\n'));
    let starts: Vec<usize> = starts.collect();
    starts.into_iter().rev().find_map(|i| {
        serde_json::from_str::<Value>(text[i..].trim())
            .ok()
            .filter(Value::is_object)
    })
}

/// `line` without terminal colour codes (clap colours its errors).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters… final byte (a letter).
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A flag the CLI does not know: commander (Claude Code) `error: unknown option '--x'`, clap
/// (Codex) `error: unexpected argument '--x' found`, yargs (Gemini CLI) `Unknown argument: x`,
/// argparse (aider) `aider: error: unrecognized arguments: --x`.
fn unknown_flag(preset: Preset, line: &str) -> Option<String> {
    let unknown = line.starts_with("error: unknown option")
        || line.starts_with("error: unexpected argument")
        || line.starts_with("Unknown argument")
        || line.contains(": error: unrecognized arguments");
    if !unknown {
        return None;
    }
    if preset == Preset::Claude && line.contains("--max-budget-usd") {
        return Some(
            "this Claude Code has no --max-budget-usd (it came with Claude Code 2.0; the Cost \
             budget passes it): upgrade Claude Code or remove the Cost budget"
                .into(),
        );
    }
    Some(format!(
        "{} refused its command line: {}",
        preset.product(),
        clip(line, 200)
    ))
}

/// `… ERROR codex_core::tools::router: error=patch rejected: writing outside of the project;
/// rejected by user approval settings`.
fn codex(line: &str) -> Option<String> {
    let (_, why) = line.split_once(" error=")?;
    if !why.contains("rejected") {
        return None;
    }
    let what = if why.starts_with("patch") {
        "edit was"
    } else {
        "tool call was"
    };
    Some(format!("the agent's {what} refused: {}", clip(why, 200)))
}

/// `Error executing tool write_file: Path not in workspace: …`, `Error executing tool
/// run_shell_command: Tool "run_shell_command" not found. …`, and the note that an untrusted
/// folder turned auto-approved edits off.
fn gemini(line: &str) -> Option<String> {
    if line.starts_with("Approval mode overridden") && line.contains("not trusted") {
        return Some(
            "Gemini CLI did not trust the worktree, so it approved no edit (run it with \
             --skip-trust)"
                .into(),
        );
    }
    let rest = line.strip_prefix("Error executing tool ")?;
    let (tool, why) = rest.split_once(": ").unwrap_or((rest, ""));
    let why = clip(why, 200);
    if why.contains("not found") {
        return Some(format!("the agent called a tool it may not use: {tool}"));
    }
    let edit = matches!(tool, "write_file" | "replace" | "edit");
    Some(if edit && why.contains("workspace") {
        format!("the agent's edit was refused: {tool}: {why}")
    } else if edit {
        format!("the agent's edit did not apply: {tool}: {why}")
    } else {
        format!("the agent's {tool} call failed: {why}")
    })
}

/// `s` on one line, cut to `max` characters with an ellipsis.
pub(super) fn clip(s: &str, max: usize) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    format!("{}…", line.chars().take(max).collect::<String>())
}
