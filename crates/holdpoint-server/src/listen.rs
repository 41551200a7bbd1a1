//! The accept loop: HTTP/1.1 connections served by hyper, each bounded in
//! time and all bounded in number.
//!
//! - At most [`ConnectionLimits::max_connections`] connections are open at
//!   once (a WebSocket counts until it closes); past that the loop stops
//!   accepting and new connections wait in the listener's backlog. The
//!   bound is lowered to what the process's file-descriptor limit allows
//!   (the soft `RLIMIT_NOFILE`, less the descriptors open when serving
//!   starts, less a reserve for stores, logs and outbound calls; see
//!   [`descriptor_budget`]), so connections never use the last descriptors.
//! - One client (an IPv4 address, an IPv6 /64) holds at most
//!   [`ConnectionLimits::max_per_client`] of them (default: the bound less
//!   a quarter of it, at most [`ROOM_FOR_OTHERS`] places: a reverse proxy,
//!   whose address every connection has, is not limited before the server
//!   is nearly full); a connection past that is closed as soon as it is
//!   accepted, so one client's idle or half-sent connections neither take
//!   the last places nor fill the backlog in front of everyone else.
//! - A failing `accept` (out of descriptors: `EMFILE`, `ENFILE`) is retried
//!   after a pause that doubles from 10 ms up to 1 s, never in a spin.
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

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
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
    /// The most connections of one client (`None`: the bound in force,
    /// after the descriptor limit lowered it, less
    /// [`room_for_others`]; at least 1).
    pub max_per_client: Option<usize>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_per_client: None,
        }
    }
}

/// The descriptors kept free of connections, at least: for the stores'
/// files, logs, outbound model and webhook calls, the runtime.
const MIN_RESERVE: usize = 32;

/// How many connections the descriptor limit leaves room for: the soft
/// `RLIMIT_NOFILE` less the descriptors open now less a reserve (an eighth
/// of the limit, at least [`MIN_RESERVE`]). `None` where the limit or the
/// open descriptors cannot be read (no `/proc`) or there is no limit.
fn descriptor_budget() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let soft = soft_nofile(&limits)?;
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some(soft.saturating_sub(open + (soft / 8).max(MIN_RESERVE)))
}

/// The soft limit on open files in the text of `/proc/self/limits`
/// (`None` for "unlimited" or when absent).
fn soft_nofile(limits: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// The most places one client cannot take by default.
const ROOM_FOR_OTHERS: usize = 64;

/// The places of a bound of `max` kept from any one client by default: a
/// quarter, at most [`ROOM_FOR_OTHERS`] (none under a bound of 4).
fn room_for_others(max: usize) -> usize {
    (max / 4).min(ROOM_FOR_OTHERS)
}

/// Who a connection is, for the per-client bound: the IPv4 address, or
/// the IPv6 /64 (one host commonly holds a whole /64).
fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
        v4 => v4,
    }
}

/// The open connections of each client. Invariant: a client's count is the
/// number of live [`ClientPlace`]s for it, and a client with none has no
/// entry (the map holds only clients with open connections).
#[derive(Default)]
struct Clients {
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more connection of `client`, or `None` when it has
    /// `max` open already.
    fn admit(self: &Arc<Self>, client: IpAddr, max: usize) -> Option<ClientPlace> {
        let mut open = self.lock();
        let count = open.entry(client).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(ClientPlace {
            clients: Arc::clone(self),
            client,
        })
    }
}

/// One connection's place among its client's; given back on drop.
struct ClientPlace {
    clients: Arc<Clients>,
    client: IpAddr,
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let mut open = self.clients.lock();
        if let Some(count) = open.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

/// The pause before the next `accept` after a failure: doubling from
/// [`Backoff::FIRST`] to [`Backoff::MAX`], back to the first after a
/// success.
struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    fn pause(&mut self) -> Duration {
        let now = self.next;
        self.next = (now * 2).min(Self::MAX);
        now
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
    _client: ClientPlace,
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
    let mut max = limits.max_connections.max(1);
    if let Some(budget) = descriptor_budget()
        && budget < max
    {
        max = budget.max(1);
        tracing::warn!(
            max_connections = max,
            "the file-descriptor limit (ulimit -n) leaves room for fewer connections than configured"
        );
    }
    let per_client = limits
        .max_per_client
        .unwrap_or(max - room_for_others(max))
        .clamp(1, max);
    let places = Arc::new(Semaphore::new(max));
    let clients = Arc::new(Clients::default());
    let mut backoff = Backoff::new();
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
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => {
                    backoff.reset();
                    accepted
                }
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors (EMFILE, ENFILE), say: the
                    // connection stays in the backlog; pause, then retry.
                    let pause = backoff.pause();
                    tracing::warn!(error = %e, retry_in = ?pause, "accepting a connection failed");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(pause) => continue,
                    }
                }
            },
        };
        let Some(place) = clients.admit(client_of(peer.ip()), per_client) else {
            // Closed at once: its descriptor and its permit are free again.
            tracing::debug!(client = %peer.ip(), per_client, "too many connections from one client; closing");
            continue;
        };
        tokio::spawn(connection(
            stream,
            permit,
            place,
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
    place: ClientPlace,
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
        _client: place,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_descriptor_limit_is_read() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max processes             63304                63304                processes \n\
                    Max open files            128                  4096                 files     \n";
        assert_eq!(soft_nofile(text), Some(128));
        assert_eq!(soft_nofile("Max open files  unlimited  unlimited  files\n"), None);
        assert_eq!(soft_nofile(""), None);
    }

    #[test]
    fn one_client_leaves_room_for_others() {
        assert_eq!(room_for_others(1), 0);
        assert_eq!(room_for_others(2), 0, "a tiny bound is all anyone's");
        assert_eq!(room_for_others(80), 20);
        assert_eq!(room_for_others(1024), ROOM_FOR_OTHERS);
    }

    #[test]
    fn clients_are_addresses_and_v6_prefixes() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(client_of(ip("127.0.0.2")), ip("127.0.0.2"));
        assert_eq!(client_of(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(client_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(client_of(ip("2001:db8:1:2:bbbb::9")), client_of(ip("2001:db8:1:2::1")));
    }

    #[test]
    fn a_client_holds_at_most_its_share_and_gives_it_back() {
        let clients = Arc::new(Clients::default());
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = clients.admit(a, 2).unwrap();
        let _second = clients.admit(a, 2).unwrap();
        assert!(clients.admit(a, 2).is_none(), "a third is refused");
        assert!(clients.admit(b, 2).is_some(), "another client is not");
        drop(first);
        let third = clients.admit(a, 2);
        assert!(third.is_some(), "a closed connection frees its place");
        drop(third);
        drop(_second);
        assert!(clients.lock().is_empty(), "no entry for a client with nothing open");
    }

    #[test]
    fn the_accept_pause_doubles_to_a_ceiling_and_resets() {
        let mut b = Backoff::new();
        let pauses: Vec<Duration> = (0..9).map(|_| b.pause()).collect();
        assert_eq!(pauses[0], Duration::from_millis(10));
        assert_eq!(pauses[1], Duration::from_millis(20));
        assert_eq!(pauses[8], Duration::from_secs(1));
        b.reset();
        assert_eq!(b.pause(), Backoff::FIRST);
    }
}
