//! Serving with a graceful shutdown: stop accepting, let running turns
//! finish (bounded), lose nothing.
//!
//! [`serve`] closes the listener when its signal fires, lets open requests
//! finish, then waits for the turns in flight ([`Turns`](crate::Turns)) up
//! to the server's grace period
//! ([`ServerBuilder::shutdown_grace`](crate::ServerBuilder::shutdown_grace)).

use std::future::Future;
use std::io;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::server::Server;

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
/// run's snapshot then expires and reads as in doubt, docs/reference.md §8).
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
