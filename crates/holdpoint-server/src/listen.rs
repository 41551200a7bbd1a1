//! The accept loop: HTTP/1.1 connections served by hyper, each bounded in
//! time and all bounded in number.
//!
//! - At most [`ConnectionLimits::max_connections`] connections are open at
//!   once (a WebSocket counts until it closes); past that the loop stops
//!   accepting and new connections wait in the listener's backlog.
//! - A request head must arrive whole within
//!   [`ConnectionLimits::header_read_timeout`] of its first byte — and a new
//!   connection's first head within that time of the accept — or the
//!   connection is closed (a slowloris client holds nothing for long).
//! - A keep-alive connection with no request in flight and no bytes either
//!   way for [`ConnectionLimits::idle_timeout`] is closed.
//! - A request in flight is never cut by these timers: its body has the
//!   request timeout ([`ServerBuilder::request_timeout`](crate::ServerBuilder::request_timeout)),
//!   and its response runs as long as the handler streams it.
//!
//! On shutdown the loop stops accepting, asks every connection to close
//! after its current response, and returns when they all did.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// How long a request head may take, how long an idle connection stays,
/// and how many connections may be open (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// What a connection's timers watch, updated by its IO and its requests.
struct ActivityState {
    /// Requests whose response is not written whole yet.
    in_flight: usize,
    /// When the head being read began (its first byte, or the accept for
    /// a connection's first request); `None` between requests.
    head_since: Option<Instant>,
    /// The last byte read or written, or request begun or answered.
    last: Instant,
}

struct Activity {
    state: Mutex<ActivityState>,
    /// Woken when a head begins, so its deadline replaces the idle one.
    head_began: Notify,
}

/// What a connection's timer found when it fired.
enum Expired {
    Head,
    Idle,
}

impl Activity {
    fn new() -> Self {
        let now = Instant::now();
        Activity {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                head_since: Some(now),
                last: now,
            }),
            head_began: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) {
        let now = Instant::now();
        let mut s = self.lock();
        s.last = now;
        if s.in_flight == 0 && s.head_since.is_none() {
            s.head_since = Some(now);
            drop(s);
            self.head_began.notify_one();
        }
    }

    fn wrote(&self) {
        self.lock().last = Instant::now();
    }

    /// A request's head was read: it is in flight until the returned guard
    /// drops (with the response body, once written).
    fn begin(self: &Arc<Self>) -> InFlight {
        let mut s = self.lock();
        s.in_flight += 1;
        s.head_since = None;
        s.last = Instant::now();
        InFlight {
            activity: Arc::clone(self),
        }
    }

    /// When to look again, and what would have expired by then.
    fn next_check(&self, limits: &ConnectionLimits) -> (Instant, Option<Expired>) {
        let now = Instant::now();
        let s = self.lock();
        let (at, what) = match s.head_since {
            Some(since) => (since + limits.header_read_timeout, Expired::Head),
            None if s.in_flight == 0 => (s.last + limits.idle_timeout, Expired::Idle),
            // A request in flight: look again later (the in-flight guard
            // refreshes `last` when it ends).
            None => return (now + limits.idle_timeout, None),
        };
        if at <= now { (now, Some(what)) } else { (at, None) }
    }
}

/// Held while a request is in flight.
struct InFlight {
    activity: Arc<Activity>,
}

/// A response body holding its request's [`InFlight`] until hyper has
/// written it and drops it: a streamed response keeps its connection busy,
/// so neither timer cuts it.
struct Answering {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for Answering {
    type Data = bytes::Bytes;
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

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.activity.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.last = Instant::now();
    }
}

/// A connection's socket, reporting its traffic to the connection's timers
/// and holding the connection's place among the open ones until it closes
/// (after an upgrade too: the WebSocket owns it then).
struct Tracked {
    stream: TcpStream,
    activity: Arc<Activity>,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Whether an accept error concerns only the connection being accepted.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets every
/// connection finish its current response and returns when all closed.
pub(crate) async fn serve_connections<F>(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let places = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (close_tx, close_rx) = watch::channel(false);
    // Every connection task holds a sender; `recv` ends when all are gone.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&places).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors, say: wait a moment rather
                    // than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        tokio::spawn(connection(
            stream,
            permit,
            app.clone(),
            limits,
            close_rx.clone(),
            open_tx.clone(),
        ));
    }
    drop(listener);
    close_tx.send_replace(true);
    drop(open_tx);
    let _ = open_rx.recv().await;
    Ok(())
}

/// Serves one connection until it closes, its timers expire or the server
/// closes.
async fn connection(
    stream: TcpStream,
    permit: OwnedSemaphorePermit,
    app: Router,
    limits: ConnectionLimits,
    mut close: watch::Receiver<bool>,
    _open: mpsc::Sender<()>,
) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "could not set TCP_NODELAY");
    }
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        stream,
        activity: Arc::clone(&activity),
        _permit: permit,
    });
    let requests = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = requests.begin();
        let app = app.clone();
        async move {
            let response = app.oneshot(request.map(axum::body::Body::new)).await;
            response.map(|r| {
                r.map(|body| Answering {
                    body,
                    _in_flight: in_flight,
                })
            })
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    // The timers here replace hyper's own header timer, which would also
    // bound the idle time between requests.
    http.header_read_timeout(None);
    let conn = http.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        let (at, expired) = activity.next_check(&limits);
        match expired {
            Some(Expired::Head) => {
                tracing::debug!("request head not received in time; closing the connection");
                return;
            }
            Some(Expired::Idle) if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            // Asked to close already: the connection ends after its
            // response; look again when the idle time passed once more.
            Some(Expired::Idle) | None => {}
        }
        let at = if expired.is_some() {
            at + limits.idle_timeout
        } else {
            at
        };
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = close.changed(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            () = activity.head_began.notified() => {}
            () = tokio::time::sleep_until(at) => {}
        }
    }
}
