//! Which URL is which view: axum's router over the views of [`super`], the stream of events and
//! the actions. Every request passes [`guard`] first (a body without a length, the token, the
//! Origin and Host checks) and every response leaves with the safety headers. Bodies of a
//! kilobyte or more are compressed (brotli or gzip) when the client accepts it; the event
//! stream never is.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, Version};
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::sync::broadcast;
use tower_http::compression::predicate::{DefaultPredicate, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};

use super::http::{self, Response};
use super::{actions, blocking, known_conference, not_found, watch, Shared, View};

/// The most a request's body may take (an action's JSON).
const MAX_BODY: usize = 64 * 1024;
/// Responses smaller than this go uncompressed.
const COMPRESS_FROM: u16 = 1024;

type App = State<Arc<Shared>>;

pub(super) fn router(shared: Arc<Shared>) -> Router {
    let compression = CompressionLayer::new()
        .quality(CompressionLevel::Fastest)
        .compress_when(DefaultPredicate::new().and(SizeAbove::new(COMPRESS_FROM)));
    Router::new()
        .route("/", get(index))
        .route("/api/conferences", get(conferences))
        .route("/c/{name}", get(conference))
        .route("/api/{name}/events", get(events))
        .route("/api/{name}/{what}", get(api).post(action))
        .route("/api/{name}/{what}/{commit}", get(commit))
        .fallback(|| async { not_found() })
        .method_not_allowed_fallback(|| async {
            Response::text(
                405,
                "only GET here (actions are POSTs to /api/<name>/steer, answer, stop)",
            )
        })
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .layer(compression)
        .with_state(shared)
}

/// Checks a request before it is routed, and puts the safety headers on its response. A body
/// sent in chunks is refused: no action needs one, and a request that gives both a length and
/// chunks (request smuggling) must not be read two ways.
async fn guard(State(shared): App, request: Request, next: Next) -> axum::response::Response {
    let mut response = if request.headers().contains_key(header::TRANSFER_ENCODING) {
        let mut refused = Response::text(
            400,
            "send a request's body with a Content-Length (Transfer-Encoding is refused here)",
        )
        .into_response();
        if request.version() <= Version::HTTP_11 {
            // What follows on this connection is not read as a request.
            let close = HeaderValue::from_static("close");
            refused.headers_mut().insert(header::CONNECTION, close);
        }
        refused
    } else if let Some(refusal) = shared.access.check(&request) {
        Response::text(refusal.status, refusal.why).into_response()
    } else {
        next.run(request).await
    };
    http::add_safety_headers(response.headers_mut());
    response
}

async fn index(State(s): App) -> Response {
    s.answer(View::Index).await
}

async fn conferences(State(s): App) -> Response {
    s.answer(View::Conferences).await
}

async fn conference(State(s): App, Path(name): Path<String>) -> Response {
    s.answer(View::Page(name)).await
}

/// `/api/<name>/status|summary|queue|attempts|rounds|importance|tree`.
async fn api(State(s): App, Path((name, what)): Path<(String, String)>, r: Request) -> Response {
    let mut query = http::query(r.uri());
    let (since, whole) = (query.remove("since"), query.remove("whole"));
    s.answer(View::Api {
        name,
        what,
        since,
        whole,
    })
    .await
}

/// `/api/<name>/diff|note|ancestry/<commit>`.
async fn commit(
    State(s): App,
    Path((name, what, commit)): Path<(String, String, String)>,
) -> Response {
    s.answer(View::Commit { name, what, commit }).await
}

/// `POST /api/<name>/steer|answer|stop`: its body read within the idle bound, at most
/// [`MAX_BODY`].
async fn action(
    State(s): App,
    Path((name, what)): Path<(String, String)>,
    request: Request,
) -> Response {
    let read = axum::body::to_bytes(request.into_body(), MAX_BODY);
    let body = match tokio::time::timeout(super::conn::IDLE_TIMEOUT, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            return Response::text(400, "an action's body is JSON of at most 64 KiB");
        }
        Err(_) => return Response::text(408, "the request's body did not arrive in time"),
    };
    let git_dir = s.git_dir.clone();
    blocking(move || match known_conference(&git_dir, &name) {
        Some(name) => actions::act(&git_dir, &name, &what, &body).unwrap_or_else(not_found),
        None => not_found(),
    })
    .await
    .unwrap_or_else(|| Response::text(500, "internal error"))
}

/// `/api/<name>/events`: each event recorded from now on, as the seed's JSON line (`event:
/// conference`, `id:` the number of events in the log after it); `event: reload` when this
/// stream fell behind and the page should read the endpoints again. It ends, cleanly, when
/// the server stops.
async fn events(State(s): App, Path(name): Path<String>) -> axum::response::Response {
    let git_dir = s.git_dir.clone();
    let known = blocking(move || known_conference(&git_dir, &name))
        .await
        .flatten();
    let Some(name) = known else {
        return not_found().into_response();
    };
    let following = Following {
        updates: s.updates.subscribe(),
        stop: s.stop.clone(),
        name,
        connected: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(following, Following::next));
    let mut response = body.into_response();
    let kind = HeaderValue::from_static("text/event-stream");
    response.headers_mut().insert(header::CONTENT_TYPE, kind);
    response
}

/// An open stream of one conference's events.
struct Following {
    updates: broadcast::Receiver<Arc<watch::Update>>,
    stop: tokio::sync::watch::Receiver<bool>,
    name: String,
    connected: bool,
}

impl Following {
    /// The stream's next piece: `: connected` first, then the events of each update.
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Following)> {
        if !self.connected {
            self.connected = true;
            return Some((Ok(Bytes::from_static(b": connected\n\n")), self));
        }
        loop {
            let update = tokio::select! {
                update = self.updates.recv() => update,
                _ = self.stop.wait_for(|stop| *stop) => return None,
            };
            let text = match update {
                Ok(update) if update.name == self.name => events_text(&update),
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => event_text(0, "reload", "{}"),
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            if !text.is_empty() {
                return Some((Ok(Bytes::from(text)), self));
            }
        }
    }
}

/// An update's events, each numbered by the events in the log after it.
fn events_text(update: &watch::Update) -> String {
    let first = update.events.saturating_sub(update.lines.len() as u64);
    let mut text = String::new();
    for (i, line) in update.lines.iter().enumerate() {
        let data = serde_json::to_string(line).unwrap_or_default();
        text.push_str(&event_text(first + i as u64 + 1, "conference", &data));
    }
    text
}

/// One Server-Sent Event (`data` is one line of JSON).
fn event_text(id: u64, kind: &str, data: &str) -> String {
    format!("id: {id}\nevent: {kind}\ndata: {data}\n\n")
}
