//! `git conference serve`: the live page of a conference and its JSON endpoints, for the screen
//! people leave open beside a run.
//!
//! It sits between the engine and the command line: it reads conferences only through the
//! engine's read-only view (`Conference::view`) and the engine's readers of the state tree
//! ([`views`]), learns of new events from a watch that sleeps in the kernel between them
//! ([`watch`]), and guards every request ([`auth`]) before it is routed here. URL paths are never
//! file paths: the only names a URL may carry are existing conferences' and their attempts'
//! commits. Everything agents wrote reaches the page as JSON that the page inserts as text.

mod actions;
pub mod auth;
mod cache;
mod http;
pub mod views;
pub mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

use cache::AttemptsCache;
use http::{Request, Response};

/// The page: one self-contained file (no CDN, no build step), with the data of its first paint
/// put in place of `__INITIAL_JSON__`.
const PAGE: &str = include_str!("page.html");

/// How the server runs.
pub struct Options {
    /// The repository's git folder.
    pub git_dir: PathBuf,
    pub addr: SocketAddr,
    pub token: String,
    pub fetch: Option<watch::Fetch>,
}

/// What every connection shares.
struct Shared {
    git_dir: PathBuf,
    access: auth::Access,
    updates: broadcast::Sender<Arc<watch::Update>>,
    attempts: Arc<AttemptsCache>,
}

/// Blocks of this size or more are mapped on their own and unmapped when freed (128 KiB,
/// glibc's starting value, kept fixed).
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Serves until the process is stopped; `ready` gets the address listened on once requests are
/// taken (the port, when 0 was asked for).
pub fn run(options: Options, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    // The views of a big conference are megabytes built and dropped per request: with glibc's
    // moving threshold they soon come from the heap, whose freed pages stay resident.
    crate::os::fixed_mmap_threshold(MMAP_THRESHOLD);
    // Requests are answered on at most two blocking threads: each thread's reads use a malloc
    // arena of its own, and a page open for days must not spread its memory over many.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(2)
        .build()?;
    runtime.block_on(serve(options, ready))
}

async fn serve(options: Options, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    let listener = TcpListener::bind(options.addr).await.map_err(|e| {
        crate::error::usage(format!(
            "cannot listen on {}: {e} (choose another with --port, or --port 0 for any free one)",
            options.addr
        ))
    })?;
    let addr = listener.local_addr()?;
    let (updates, _) = broadcast::channel(64);
    watch::spawn(options.git_dir.clone(), options.fetch, updates.clone())?;
    let shared = Arc::new(Shared {
        git_dir: options.git_dir,
        access: auth::Access {
            token: options.token,
            addr,
        },
        updates,
        attempts: Arc::default(),
    });
    ready(addr);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move { handle(shared, stream).await });
    }
}

/// One connection: its request, checked, then answered (or streamed).
async fn handle(shared: Arc<Shared>, mut stream: TcpStream) {
    let Some(request) = http::read_request(&mut stream).await else {
        return;
    };
    if let Some(refusal) = shared.access.check(&request) {
        http::write_response(&mut stream, Response::text(refusal.status, refusal.why)).await;
        return;
    }
    let segments: Vec<String> = request.path.split('/').map(str::to_string).collect();
    if request.method == "GET"
        && segments.len() == 4
        && segments[1] == "api"
        && segments[3] == "events"
    {
        let name = segments[2].clone();
        let git_dir = shared.git_dir.clone();
        let known = tokio::task::spawn_blocking(move || known_conference(&git_dir, &name))
            .await
            .ok()
            .flatten();
        match known {
            Some(name) => stream_events(&shared, stream, &name).await,
            None => http::write_response(&mut stream, not_found()).await,
        }
        return;
    }
    let git_dir = shared.git_dir.clone();
    let cache = shared.attempts.clone();
    let response = tokio::task::spawn_blocking(move || {
        let response = answer(&git_dir, &request, &cache);
        // What answering read (a view of every attempt) is freed now: give the pages back.
        crate::os::release_free_heap();
        response
    })
    .await
    .unwrap_or_else(|_| Response::text(500, "internal error"));
    http::write_response(&mut stream, response).await;
}

/// `/api/<name>/events`: each event recorded from now on, as the seed's JSON line (`event:
/// conference`, `id:` the number of events in the log after it); `event: reload` when this
/// stream fell behind and the page should read the endpoints again.
async fn stream_events(shared: &Shared, mut stream: TcpStream, name: &str) {
    let mut updates = shared.updates.subscribe();
    if !http::start_events(&mut stream).await {
        return;
    }
    loop {
        let update = match updates.recv().await {
            Ok(u) => u,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                if !http::send_event(&mut stream, 0, "reload", "{}").await {
                    return;
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if update.name != name {
            continue;
        }
        let first = update.events.saturating_sub(update.lines.len() as u64);
        for (i, line) in update.lines.iter().enumerate() {
            let data = serde_json::to_string(line).unwrap_or_default();
            if !http::send_event(&mut stream, first + i as u64 + 1, "conference", &data).await {
                return;
            }
        }
    }
}

/// The conference a URL names, when the repository has it (the only use of a name from a URL).
fn known_conference(git_dir: &Path, name: &str) -> Option<String> {
    let repo = git2::Repository::open(git_dir).ok()?;
    crate::store::refs::conference_names(&repo)
        .ok()?
        .into_iter()
        .find(|n| n == name)
}

fn not_found() -> Response {
    Response::text(
        404,
        "not found: this server has the page (/), /c/<conference> and /api/… (see the README)",
    )
}

/// Answers a GET or an action's POST (or refuses anything else).
fn answer(git_dir: &Path, request: &Request, cache: &AttemptsCache) -> Response {
    if request.method == "POST" {
        let parts: Vec<&str> = request.path.split('/').skip(1).collect();
        if let ["api", name, what] = parts.as_slice() {
            if let Some(name) = known_conference(git_dir, name) {
                if let Some(response) = actions::act(git_dir, &name, what, &request.body) {
                    return response;
                }
            }
        }
        return not_found();
    }
    if request.method != "GET" {
        return Response::text(
            405,
            "only GET here (actions are POSTs to /api/<name>/steer, answer, stop)",
        );
    }
    match answer_get(git_dir, request, cache) {
        Ok(Some(r)) => r,
        Ok(None) => not_found(),
        Err(e) => Response::text(500, format!("{e:#}")),
    }
}

fn answer_get(
    git_dir: &Path,
    request: &Request,
    cache: &AttemptsCache,
) -> Result<Option<Response>> {
    let repo = git2::Repository::open(git_dir)?;
    let names = crate::store::refs::conference_names(&repo)?;
    let parts: Vec<&str> = request.path.split('/').skip(1).collect();
    let conference = |name: &str| names.iter().any(|n| n == name);
    Ok(Some(match parts.as_slice() {
        [""] => page(&json!({ "conferences": views::conferences_json(&repo, &names) }).to_string()),
        ["api", "conferences"] => Response::json(&views::conferences_json(&repo, &names)),
        ["c", name] if conference(name) => page(&conference_page(&repo, name, cache)?),
        ["api", name, what] if conference(name) => return api(&repo, name, what, request, cache),
        ["api", name, what, commit] if conference(name) => {
            return commit_view(&repo, name, what, commit, cache)
        }
        _ => return Ok(None),
    }))
}

/// `/api/<name>/status|summary|queue|attempts|rounds`.
fn api(
    repo: &git2::Repository,
    name: &str,
    what: &str,
    request: &Request,
    cache: &AttemptsCache,
) -> Result<Option<Response>> {
    let conf = crate::engine::Conference::view(repo.path(), name)?;
    let value = match what {
        "status" => views::status_json(repo, name, &conf)?,
        "summary" => views::summary_json(repo, &conf),
        "queue" => views::queue_json(&conf),
        "rounds" => views::rounds_json(&conf, &conf.state()),
        "importance" => views::importance_json(
            &conf,
            &cache.get(&conf, || views::attempts(&conf, &conf.state()))?,
        )?,
        "attempts" => {
            let since = match request.query.get("since").map(|s| s.parse::<usize>()) {
                None => 0,
                Some(Ok(n)) => n,
                Some(Err(_)) => {
                    return Ok(Some(Response::text(
                        400,
                        "since must be a number of attempts (?since=120)",
                    )))
                }
            };
            let all = cache.get(&conf, || views::attempts(&conf, &conf.state()))?;
            return Ok(Some(Response::json_text(views::attempts_text(&all, since))));
        }
        _ => return Ok(None),
    };
    Ok(Some(Response::json(&value)))
}

/// `/api/<name>/diff/<commit>` and `/api/<name>/note/<commit>`, for the conference's own
/// commits only.
fn commit_view(
    repo: &git2::Repository,
    name: &str,
    what: &str,
    hex: &str,
    cache: &AttemptsCache,
) -> Result<Option<Response>> {
    if what != "diff" && what != "note" {
        return Ok(None);
    }
    let conf = crate::engine::Conference::view(repo.path(), name)?;
    let st = conf.state();
    let all = cache.get(&conf, || views::attempts(&conf, &st))?;
    let Some(commit) = views::conference_commit(&all, &st, hex) else {
        return Ok(None);
    };
    Ok(Some(if what == "diff" {
        Response::text(200, views::diff_text(repo, commit)?)
    } else {
        Response::text(200, views::note_text(repo, commit)?.unwrap_or_default())
    }))
}

/// What a conference's page shows first, so its first paint needs no other request (JSON
/// text: the attempts are written straight from their records).
fn conference_page(repo: &git2::Repository, name: &str, cache: &AttemptsCache) -> Result<String> {
    let conf = crate::engine::Conference::view(repo.path(), name)?;
    let st = conf.state();
    let mut head = json!({
        "name": name,
        "status": views::status_json(repo, name, &conf)?,
        "summary": views::summary_json(repo, &conf),
        "rounds": views::rounds_json(&conf, &st),
    })
    .to_string();
    let all = cache.get(&conf, || views::attempts(&conf, &st))?;
    let attempts = views::attempts_text(&all, 0);
    head.pop(); // its closing brace
    Ok(format!("{head},\"attempts\":{attempts}}}"))
}

/// The page with `initial` (JSON text) in it, escaped for its script element.
fn page(initial: &str) -> Response {
    let nonce = auth::new_token().unwrap_or_else(|_| format!("{:x}", crate::clock::now_unix()));
    // The nonce first: only the page's own script element gets it, never data put in after.
    let html = PAGE
        .replace("<script>", &format!("<script nonce=\"{nonce}\">"))
        .replace("__INITIAL_JSON__", &views::script_json(initial));
    Response::html(html, nonce)
}
