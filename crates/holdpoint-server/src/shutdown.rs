//! Serving with a graceful shutdown: stop accepting, let running turns
//! finish (bounded), lose nothing.
//!
//! Every turn the server starts holds a [`Turns`] guard until the agent has
//! written its result, even when the caller went away mid-turn, and a
//! detached run holds one until its snapshot settles. [`serve`] waits for
//! the guards after the listener closed, up to the server's grace period
//! ([`ServerBuilder::shutdown_grace`](crate::ServerBuilder::shutdown_grace)).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot, watch};

use crate::server::Server;

struct TurnsInner {
    running: AtomicUsize,
    idle: Notify,
    closing: watch::Sender<bool>,
}

/// Counts the turns in flight and tells long-lived connections when the
/// server is closing.
#[derive(Clone)]
pub struct Turns {
    inner: Arc<TurnsInner>,
}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turns")
            .field("running", &self.running())
            .field("closing", &self.is_closing())
            .finish()
    }
}

impl Default for Turns {
    fn default() -> Self {
        Turns {
            inner: Arc::new(TurnsInner {
                running: AtomicUsize::new(0),
                idle: Notify::new(),
                closing: watch::channel(false).0,
            }),
        }
    }
}

/// Held while a turn runs; dropping it marks the turn finished.
#[derive(Debug)]
pub(crate) struct TurnGuard {
    turns: Turns,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if self.turns.inner.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.turns.inner.idle.notify_waiters();
        }
    }
}

impl Turns {
    pub(crate) fn begin(&self) -> TurnGuard {
        self.inner.running.fetch_add(1, Ordering::SeqCst);
        TurnGuard { turns: self.clone() }
    }

    /// How many turns are in flight.
    pub fn running(&self) -> usize {
        self.inner.running.load(Ordering::SeqCst)
    }

    /// Whether shutdown has begun.
    pub fn is_closing(&self) -> bool {
        *self.inner.closing.borrow()
    }

    /// Begins shutdown: `/healthz` answers 503 and WebSocket connections
    /// finish their current turn, send their output and close.
    pub fn close(&self) {
        self.inner.closing.send_replace(true);
    }

    pub(crate) fn closing(&self) -> watch::Receiver<bool> {
        self.inner.closing.subscribe()
    }

    /// Waits until no turn is in flight, at most `timeout`. Returns whether
    /// it got there.
    pub async fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.running() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.running() == 0;
            }
        }
    }
}

/// Serves `server`'s router on `listener` until `signal` resolves, then shuts
/// down gracefully (see [`serve_app`]).
pub async fn serve<F>(listener: TcpListener, server: &Server, signal: F) -> io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    serve_app(listener, server.router(), server, signal).await
}

/// Serves `app` (which mounts `server`'s router, perhaps among other routes)
/// over HTTP/1.1 with the server's connection limits (header read and idle
/// timeouts, a bound on open connections: see
/// [`ServerBuilder::header_read_timeout`](crate::ServerBuilder::header_read_timeout))
/// until `signal` resolves. Then it stops accepting connections, lets
/// requests and turns in flight finish, and returns — after at most the
/// server's grace period; whatever still runs then is dropped (a detached
/// run's snapshot then expires and reads as in doubt, SPEC §9.3).
///
/// ```no_run
/// # async fn demo(server: holdpoint_server::Server) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3400").await?;
/// holdpoint_server::serve(listener, &server, holdpoint_server::shutdown_signal()).await
/// # }
/// # let _ = demo;
/// ```
pub async fn serve_app<F>(listener: TcpListener, app: Router, server: &Server, signal: F) -> io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let turns = server.turns().clone();
    let grace = server.shutdown_grace();
    let (fired_tx, fired_rx) = oneshot::channel::<()>();
    let closing = turns.clone();
    let signal = async move {
        signal.await;
        tracing::info!(running = closing.running(), "shutting down: no new connections");
        closing.close();
        let _ = fired_tx.send(());
    };
    let serving = crate::listen::serve_connections(listener, app, server.connection_limits(), signal);
    tokio::pin!(serving);
    let started = tokio::select! {
        result = &mut serving => {
            result?;
            None
        }
        Ok(()) = fired_rx => Some(tokio::time::Instant::now()),
    };
    let started = match started {
        Some(at) => {
            // The signal fired: give open requests the grace period.
            if tokio::time::timeout(grace, &mut serving).await.is_err() {
                tracing::warn!("grace period over with requests still open; dropping them");
            }
            at
        }
        None => tokio::time::Instant::now(),
    };
    let left = grace.saturating_sub(started.elapsed());
    if !turns.wait_idle(left).await {
        tracing::warn!(running = turns.running(), "grace period over with turns still running");
    }
    tracing::info!("shut down");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_guards() {
        let turns = Turns::default();
        assert!(turns.wait_idle(Duration::from_millis(1)).await);
        let guard = turns.begin();
        assert!(!turns.wait_idle(Duration::from_millis(20)).await);
        let t = turns.clone();
        let waiter = tokio::spawn(async move { t.wait_idle(Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(guard);
        assert!(waiter.await.unwrap());
        assert_eq!(turns.running(), 0);
    }
}
