//! `git conference serve`: the live page of a conference and its JSON endpoints, for the screen
//! people leave open beside a run.
//!
//! It sits between the engine and the command line: it reads conferences only through the
//! engine's read-only view (`Conference::view`) and the engine's readers of the state tree
//! ([`views`]), learns of new events from a watch that sleeps in the kernel between them
//! ([`watch`]), and guards every request ([`auth`]) before it is routed ([`routes`]). URL paths
//! are never file paths: the only names a URL may carry are existing conferences' and their
//! attempts' commits. Everything agents wrote reaches the page as JSON that the page inserts as
//! text. HTTP is hyper's, through axum's router, on this module's single-threaded tokio
//! runtime: keep-alive, HTTP/2 for a client that opens with it, compression, and the bounds of
//! each connection ([`conn`]); here, the bound on connections and the graceful stop.

mod actions;
pub mod auth;
mod cache;
mod conn;
mod http;
mod routes;
pub mod views;
pub mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, Semaphore};

use cache::AttemptsCache;
use http::Response;

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
    /// The conference whose page is opened first (`serve NAME`): its attempts are read as the
    /// server starts, not on the first load.
    pub first: Option<String>,
}

/// What every connection shares.
struct Shared {
    git_dir: PathBuf,
    access: auth::Access,
    updates: broadcast::Sender<Arc<watch::Update>>,
    attempts: Arc<AttemptsCache>,
    /// Turns true when the server stops: event streams end, connections close once what is in
    /// flight is sent.
    stop: tokio::sync::watch::Receiver<bool>,
}

/// Blocks of this size or more are mapped on their own and unmapped when freed (128 KiB,
/// glibc's starting value, kept fixed).
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// The most connections open at once: the next is accepted when one closes (an idle one closes
/// within [`conn::IDLE_TIMEOUT`]).
pub const MAX_CONNECTIONS: usize = 256;

/// How long, once the server is told to stop, the responses in flight have to finish.
const GRACE: Duration = Duration::from_secs(5);

/// Serves until Ctrl-C or SIGTERM, then lets what is in flight finish (within [`GRACE`]; a
/// second Ctrl-C ends it at once); `ready` gets the address listened on once requests are
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
    let served = runtime.block_on(serve(options, ready));
    // A view still being read when the grace ran out is not waited for.
    runtime.shutdown_background();
    served
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
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        git_dir: options.git_dir,
        access: auth::Access {
            token: options.token,
            addr,
        },
        updates,
        attempts: Arc::default(),
        stop: stopping.clone(),
    });
    let router = routes::router(shared.clone());
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    if let Some(name) = options.first {
        read_ahead(&shared, name).await;
    }
    ready(addr);
    tokio::select! {
        _ = accept(listener, router, places.clone(), stopping) => {}
        _ = stop_asked() => {}
    }
    // No new connection; every open one finishes what is in flight and closes, and gives its
    // place back.
    let _ = stop.send(true);
    tokio::select! {
        _ = places.acquire_many(MAX_CONNECTIONS as u32) => {}
        _ = tokio::time::sleep(GRACE) => {}
        _ = stop_asked() => {}
    }
    Ok(())
}

/// Accepts connections, at most [`MAX_CONNECTIONS`] open at once, each served on a task of its
/// own.
async fn accept(
    listener: TcpListener,
    router: axum::Router,
    places: Arc<Semaphore>,
    stopping: tokio::sync::watch::Receiver<bool>,
) {
    let builder = Arc::new(conn::builder());
    loop {
        let Ok(place) = places.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, or a connection reset before it was taken: try again soon,
            // without spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Events are small writes that must not wait for the last one's acknowledgement.
        let _ = stream.set_nodelay(true);
        let (builder, router, stopping) = (builder.clone(), router.clone(), stopping.clone());
        tokio::spawn(async move {
            conn::serve(&builder, stream, router, stopping).await;
            drop(place);
        });
    }
}

/// Ctrl-C or SIGTERM.
async fn stop_asked() {
    use tokio::signal::unix::{signal, SignalKind};
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}

/// Reads conference `name`'s attempts into the cache, with the text its page embeds of them,
/// before the address is printed, so that the first load of its page (`serve NAME --open`
/// opens it at once) finds them ready: at 10,000 attempts that is most of a cold first paint.
async fn read_ahead(shared: &Arc<Shared>, name: String) {
    let shared = shared.clone();
    blocking(move || {
        if let Ok(conf) = crate::engine::Conference::view(&shared.git_dir, &name) {
            let _ = shared
                .attempts
                .page_text(&conf, || views::attempts(&conf, &conf.state()));
        }
    })
    .await;
}

/// A GET of the views: which one, with what the URL named.
enum View {
    Index,
    Conferences,
    Page(String),
    /// `/api/<name>/<what>?since=&whole=`
    Api {
        name: String,
        what: String,
        since: Option<String>,
        whole: Option<String>,
    },
    /// `/api/<name>/<what>/<commit>`
    Commit {
        name: String,
        what: String,
        commit: String,
    },
}

impl Shared {
    /// Answers `view` on a blocking thread (the views read git), then gives the pages of what
    /// it read (a view of every attempt) back.
    async fn answer(self: &Arc<Self>, view: View) -> Response {
        let shared = self.clone();
        blocking(move || answer(&shared.git_dir, &view, &shared.attempts))
            .await
            .unwrap_or_else(|| Response::text(500, "internal error"))
    }
}

/// Runs `work` on one of the two blocking threads, and hands the heap's free pages back after.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(move || {
        let done = work();
        crate::os::release_free_heap();
        done
    })
    .await
    .ok()
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

/// Answers a GET of the views.
fn answer(git_dir: &Path, view: &View, cache: &AttemptsCache) -> Response {
    match answer_view(git_dir, view, cache) {
        Ok(Some(r)) => r,
        Ok(None) => not_found(),
        Err(e) => Response::text(500, format!("{e:#}")),
    }
}

fn answer_view(git_dir: &Path, view: &View, cache: &AttemptsCache) -> Result<Option<Response>> {
    let repo = git2::Repository::open(git_dir)?;
    let names = crate::store::refs::conference_names(&repo)?;
    let conference = |name: &str| names.iter().any(|n| n == name);
    Ok(Some(match view {
        View::Index => {
            let index = json!({ "conferences": views::conferences_json(&repo, &names) });
            page(&views::script_json(&index.to_string()))
        }
        View::Conferences => Response::json(&views::conferences_json(&repo, &names)),
        View::Page(name) if conference(name) => page(&conference_page(&repo, name, cache)?),
        View::Api {
            name,
            what,
            since,
            whole,
        } if conference(name) => {
            let query = Query {
                since: since.as_deref(),
                whole: whole.as_deref(),
            };
            return api(&repo, name, what, query, cache);
        }
        View::Commit { name, what, commit } if conference(name) => {
            return commit_view(&repo, name, what, commit, cache)
        }
        _ => return Ok(None),
    }))
}

/// What an endpoint's query may say: `since` (attempts), `whole` (tree).
struct Query<'a> {
    since: Option<&'a str>,
    whole: Option<&'a str>,
}

/// `/api/<name>/status|summary|queue|attempts|rounds|importance|tree`.
fn api(
    repo: &git2::Repository,
    name: &str,
    what: &str,
    query: Query,
    cache: &AttemptsCache,
) -> Result<Option<Response>> {
    let conf = crate::engine::Conference::view(repo.path(), name)?;
    let read = || views::attempts(&conf, &conf.state());
    let value = match what {
        "status" => views::status_json(repo, name, &conf)?,
        "summary" => views::summary_json(repo, &conf, &cache.get(&conf, read)?),
        "queue" => views::queue_json(&conf),
        "rounds" => views::rounds_json(&conf, &conf.state()),
        "importance" => views::importance_json(&conf, &cache.get(&conf, read)?)?,
        "tree" => {
            let whole = match query.whole {
                None | Some("0") => false,
                Some("1") => true,
                Some(_) => {
                    return Ok(Some(Response::text(
                        400,
                        "whole is 1 (every node) or 0 (folded to the alive branches and the path to best)",
                    )))
                }
            };
            views::tree_json(&conf, &cache.lineage(&conf, read)?, whole)
        }
        "attempts" => {
            let since = match query.since.map(|s| s.parse::<usize>()) {
                None => 0,
                Some(Ok(n)) => n,
                Some(Err(_)) => {
                    return Ok(Some(Response::text(
                        400,
                        "since must be a number of attempts (?since=120)",
                    )))
                }
            };
            let all = cache.get(&conf, read)?;
            return Ok(Some(Response::json_text(views::attempts_text(&all, since))));
        }
        _ => return Ok(None),
    };
    Ok(Some(Response::json(&value)))
}

/// `/api/<name>/diff/<commit>` and `/api/<name>/note/<commit>`, for the conference's own
/// commits only; `/api/<name>/ancestry/<commit>` for a node of its attempt tree.
fn commit_view(
    repo: &git2::Repository,
    name: &str,
    what: &str,
    hex: &str,
    cache: &AttemptsCache,
) -> Result<Option<Response>> {
    if !matches!(what, "diff" | "note" | "ancestry") {
        return Ok(None);
    }
    let conf = crate::engine::Conference::view(repo.path(), name)?;
    let st = conf.state();
    if what == "ancestry" {
        let nodes = cache.lineage(&conf, || views::attempts(&conf, &st))?;
        return Ok(views::ancestry_json(&nodes, hex).map(|v| Response::json(&v)));
    }
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

/// What a conference's page shows first, so its first paint needs no other request: JSON text
/// escaped for the page's script element (the attempts' part kept per events tip).
fn conference_page(repo: &git2::Repository, name: &str, cache: &AttemptsCache) -> Result<String> {
    let conf = crate::engine::Conference::view(repo.path(), name)?;
    let st = conf.state();
    let head = json!({
        "name": name,
        "status": views::status_json(repo, name, &conf)?,
        "summary": views::summary_json(repo, &conf, &cache.get(&conf, || views::attempts(&conf, &st))?),
        "rounds": views::rounds_json(&conf, &st),
    })
    .to_string();
    let attempts = cache.page_text(&conf, || views::attempts(&conf, &st))?;
    let mut initial = views::script_json(&head);
    initial.pop(); // its closing brace
    initial.reserve(attempts.len() + 16);
    initial.push_str(",\"attempt_columns\":");
    initial.push_str(&attempts);
    initial.push('}');
    Ok(initial)
}

/// The page with `initial` in it: JSON text already escaped for its script element
/// ([`views::script_json`]).
fn page(initial: &str) -> Response {
    let nonce = auth::new_token().unwrap_or_else(|_| format!("{:x}", crate::clock::now_unix()));
    // The nonce first: only the page's own script element gets it, never data put in after.
    let html = PAGE
        .replace("<script>", &format!("<script nonce=\"{nonce}\">"))
        .replace("__INITIAL_JSON__", initial);
    Response::html(html, nonce)
}
