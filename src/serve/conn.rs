//! One connection, served by hyper within bounds that a page left open for days, and a port
//! open to a network, both need. HTTP/1.1 with keep-alive, or HTTP/2 when the client opens with
//! HTTP/2's preface (h2c with prior knowledge: there is no TLS, so no ALPN to ask with). A
//! request head must arrive whole, and no bigger than [`MAX_HEAD`], within [`IDLE_TIMEOUT`]
//! (hyper answers 431 to a bigger one and closes); a connection with no request in flight for
//! [`IDLE_TIMEOUT`] is closed, whatever it is doing (a head sent a byte at a time, an idle
//! keep-alive or HTTP/2 connection, nothing sent at all); a response the client stops reading
//! for [`WRITE_TIMEOUT`] is cut off. An open event stream is a request in flight, and costs
//! nothing while no event comes: the watch below sleeps without a timer then.
//!
//! On shutdown each connection finishes what is in flight and closes (HTTP/2: GOAWAY).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// The most a request's head (request line and headers; HTTP/2: its header list) may take.
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a connection may go without a request in flight (a head arriving included).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may wait for a client that does not read it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests one HTTP/2 connection may have in flight at once.
const MAX_STREAMS: u32 = 16;

pub type Builder = auto::Builder<TokioExecutor>;

/// hyper's settings for every connection.
pub fn builder() -> Builder {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEAD as u32);
    builder
}

/// Serves `stream` with `router` until the client closes it, a bound above is passed, or
/// `stop` turns true (then what is in flight finishes first).
pub async fn serve(
    builder: &Builder,
    stream: TcpStream,
    router: Router,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let service = TowerToHyperService::new(Tracked {
        router,
        activity: activity.clone(),
    });
    let connection = builder.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut stopping = false;
    loop {
        let deadline = activity.deadline();
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = activity.changed.notified() => {}
            _ = sleep_until(deadline) => {
                if activity.deadline().is_some_and(|d| d <= Instant::now()) {
                    // Dropped: the socket closes; nothing was in flight, or nothing was read.
                    return;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a connection is doing, for its watch: requests in flight (a response's body included),
/// since when none is, and since when a write waits for the client.
struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `start` to when the last request in flight ended.
    idle_since: AtomicU64,
    /// Milliseconds from `start` to the first write that found the client not reading, plus
    /// one; 0 while writes go through.
    blocked_since: AtomicU64,
    /// Woken when the connection becomes idle or a write starts waiting.
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            blocked_since: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// When the connection is to be closed if nothing changes; None while a request is in
    /// flight and its writes go through (an event stream waiting for the next event).
    fn deadline(&self) -> Option<Instant> {
        let at = |ms: u64, bound: Duration| self.start + Duration::from_millis(ms) + bound;
        let idle = (self.in_flight.load(Ordering::SeqCst) == 0)
            .then(|| at(self.idle_since.load(Ordering::SeqCst), IDLE_TIMEOUT));
        let blocked = match self.blocked_since.load(Ordering::SeqCst) {
            0 => None,
            since => Some(at(since - 1, WRITE_TIMEOUT)),
        };
        idle.into_iter().chain(blocked).min()
    }

    fn wrote(&self, blocked: bool) {
        if !blocked {
            self.blocked_since.store(0, Ordering::SeqCst);
        } else if self.blocked_since.load(Ordering::SeqCst) == 0 {
            self.blocked_since
                .store(self.now_ms() + 1, Ordering::SeqCst);
            self.changed.notify_one();
        }
    }
}

/// A request in flight, from its head read to its response's body sent (or dropped).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            activity
                .idle_since
                .store(activity.now_ms(), Ordering::SeqCst);
            activity.changed.notify_one();
        }
    }
}

/// The router, counting the requests in flight on its connection.
#[derive(Clone)]
struct Tracked {
    router: Router,
    activity: Arc<Activity>,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<B> tower_service::Service<axum::http::Request<B>> for Tracked
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let in_flight = InFlight::begin(&self.activity);
        let answer = tower_service::Service::call(&mut self.router, request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| {
                Body::new(Guarded {
                    body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A response's body, holding its request in flight until it is sent or dropped.
struct Guarded {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, telling its activity when a write finds the client not reading.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn noted<T>(&self, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        self.activity.wrote(poll.is_pending());
        poll
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.noted(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.noted(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_due_to_close_when_idle_or_when_its_client_stops_reading() {
        let activity = Arc::new(Activity::new());
        let start = activity.start;
        // Nothing in flight: idle from the start.
        assert_eq!(activity.deadline(), Some(start + IDLE_TIMEOUT));
        // A request in flight whose writes go through (an event stream): no deadline at all.
        let request = InFlight::begin(&activity);
        activity.wrote(false);
        assert_eq!(activity.deadline(), None);
        // Its client stops reading: the write bound, from the first write that waited.
        activity.wrote(true);
        let blocked = activity.deadline().expect("a deadline");
        assert!(blocked >= start + WRITE_TIMEOUT && blocked <= Instant::now() + WRITE_TIMEOUT);
        activity.wrote(true);
        assert_eq!(
            activity.deadline(),
            Some(blocked),
            "kept from the first wait"
        );
        activity.wrote(false);
        assert_eq!(activity.deadline(), None);
        // Sent: idle again, from then.
        drop(request);
        let idle = activity.deadline().expect("a deadline");
        assert!(idle >= start + IDLE_TIMEOUT && idle <= Instant::now() + IDLE_TIMEOUT);
    }
}
