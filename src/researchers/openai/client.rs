//! The HTTP half of `builtin:openai`: one chat completion against an OpenAI-compatible endpoint
//! (`POST {base}/chat/completions`), retried on rate limits (429) and server errors (5xx) with
//! exponential backoff that honours `Retry-After`, never past the agent's deadline. Other HTTP
//! errors (a wrong model, a bad key) are not retried: they would fail the same way again.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::model::Tokens;

/// Where and as whom to ask.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The full chat completions address.
    pub url: String,
    pub model: String,
    pub key: Option<String>,
}

/// One message of the conversation (`system`, `user`, `assistant`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

/// The body of a chat completions request (one answer, not streamed).
#[derive(serde::Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    stream: bool,
}

/// The model's answer and what it cost.
pub struct Reply {
    pub content: String,
    pub tokens: Tokens,
}

/// Tries per request at most (rate limits and server errors).
const MAX_TRIES: u32 = 8;
/// The first pause between tries; it doubles each time, up to `MAX_PAUSE`.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// A client for the whole run (connections are reused between the requests of an attempt).
pub fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

/// Asks `endpoint` for the next message of `messages`; each exchange goes to `log`.
pub async fn chat(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    messages: &[Message],
    deadline: Instant,
    log: &mut std::fs::File,
) -> Result<Reply, String> {
    let body = ChatRequest {
        model: &endpoint.model,
        messages,
        stream: false,
    };
    let mut pause = FIRST_PAUSE;
    for attempt in 1.. {
        let _ = writeln!(log, "--- request {attempt} to {}", endpoint.url);
        let mut request = client.post(&endpoint.url).json(&body);
        if let Some(key) = &endpoint.key {
            request = request.bearer_auth(key);
        }
        let (why, retry_after) = match request.send().await {
            Ok(response) => {
                let status = response.status();
                let retry_after = retry_after(response.headers());
                let text = response.text().await.unwrap_or_default();
                let _ = writeln!(log, "--- response: HTTP {status}\n{text}");
                if status.is_success() {
                    return read_reply(&text);
                }
                let why = format!(
                    "HTTP {} from {}: {}",
                    status.as_u16(),
                    endpoint.url,
                    snippet(&text)
                );
                if status.as_u16() != 429 && !status.is_server_error() {
                    return Err(why);
                }
                (why, retry_after)
            }
            Err(e) => {
                let why = format!("cannot reach {}: {}", endpoint.url, error_chain(&e));
                let _ = writeln!(log, "--- {why}");
                (why, None)
            }
        };
        let wait = retry_after.unwrap_or(pause).min(MAX_PAUSE);
        if attempt >= MAX_TRIES || Instant::now() + wait >= deadline {
            return Err(format!("{why} (gave up after {attempt} tries)"));
        }
        let _ = writeln!(log, "--- retrying in {wait:?}");
        tokio::time::sleep(wait).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
    unreachable!("the loop returns")
}

/// `Retry-After` in seconds (the HTTP-date form is rare from these APIs and waits the backoff).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The answer's text and token counts from a chat completion body.
fn read_reply(text: &str) -> Result<Reply, String> {
    let body: Value = serde_json::from_str(text)
        .map_err(|e| format!("the endpoint's answer is not JSON ({e}): {}", snippet(text)))?;
    let message = &body["choices"][0]["message"]["content"];
    // A string, or (some servers) a list of parts with `text`.
    let content = match message {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => {
            return Err(format!(
                "the endpoint's answer has no choices[0].message.content: {}",
                snippet(text)
            ))
        }
    };
    let usage = &body["usage"];
    let tokens = Tokens {
        input: usage["prompt_tokens"].as_u64().unwrap_or(0),
        output: usage["completion_tokens"].as_u64().unwrap_or(0),
    };
    Ok(Reply { content, tokens })
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// The start of a text, on one line, for a reason.
pub fn snippet(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_from_the_usual_shapes() {
        let r = read_reply(
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],
                "usage":{"prompt_tokens":12,"completion_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(
            (r.content.as_str(), r.tokens),
            (
                "hi",
                Tokens {
                    input: 12,
                    output: 3
                }
            )
        );
        let parts = read_reply(
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"text":"b"}]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            (parts.content.as_str(), parts.tokens),
            ("ab", Tokens::default())
        );
        let e = read_reply(r#"{"error":{"message":"no such model"}}"#)
            .err()
            .unwrap();
        assert!(
            e.contains("no choices[0].message.content") && e.contains("no such model"),
            "{e}"
        );
        assert!(read_reply("<html>").err().unwrap().contains("not JSON"));
    }
}
