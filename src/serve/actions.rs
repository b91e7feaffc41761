//! The page's actions: steer, answer and stop, each a POST (already checked for the token and
//! the Origin by [`super::auth`]) that calls the engine's own function — the same one `git
//! conference steer|answer|stop` calls (`engine::phases::talk`), so a request from the page is recorded
//! exactly as one from the command line: in the event log, once.

use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use super::http::Response;
use crate::engine::phases::talk;

/// The body of a steer.
#[derive(Deserialize)]
struct Steer {
    text: String,
}

/// The body of an answer.
#[derive(Deserialize)]
struct Answer {
    question: String,
    text: String,
}

/// Runs action `what` on conference `name` (whose existence the caller checked); None when
/// `what` is not an action.
pub fn act(git_dir: &Path, name: &str, what: &str, body: &[u8]) -> Option<Response> {
    let delivery = match what {
        "steer" => match serde_json::from_slice::<Steer>(body) {
            Ok(s) => talk::steer(git_dir, name, &s.text),
            Err(e) => return Some(bad_body(e, r#"{"text": "try a cosine schedule"}"#)),
        },
        "answer" => match serde_json::from_slice::<Answer>(body) {
            Ok(a) => talk::answer(git_dir, name, &a.question, &a.text),
            Err(e) => return Some(bad_body(e, r#"{"question": "Q1", "text": "yes, go on"}"#)),
        },
        "stop" => talk::stop(git_dir, name),
        _ => return None,
    };
    Some(match delivery {
        Ok(d) => Response::json(&json!({ "said": d.describe(what, name) })),
        Err(e) if e.downcast_ref::<crate::error::UsageError>().is_some() => {
            Response::text(400, format!("{e:#}"))
        }
        Err(e) => Response::text(500, format!("{e:#}")),
    })
}

fn bad_body(e: serde_json::Error, example: &str) -> Response {
    Response::text(
        400,
        format!("the body must be JSON such as {example} ({e})"),
    )
}
