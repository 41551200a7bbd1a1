//! Which `Host` a request may name, and which `Origin` may send it: the
//! guard against DNS rebinding of a server that trusts every caller.
//!
//! A server that serves anonymous callers answers anyone who can reach it,
//! and on loopback that includes a page of any web site: its script can
//! rebind the page's own host name to `127.0.0.1` and then talk to the
//! server as a same-origin page. Such requests name the attacker's host in
//! `Host`. So an anonymous server answers only requests whose `Host` is a
//! loopback name or address — `localhost`, a name under `.localhost`
//! (RFC 6761: they never leave the machine), an address in `127.0.0.0/8`
//! or `[::1]`, each with or without a port — plus the names given to
//! [`ServerBuilder::allowed_hosts`](crate::ServerBuilder::allowed_hosts);
//! others are answered 421 Misdirected Request. A request with an `Origin`
//! (a browser's cross-origin request or WebSocket upgrade) must come from
//! such a host too (else 403). Servers that authenticate every caller do
//! not check, unless given allowed hosts.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The hosts a server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostPolicy {
    /// Any `Host`, any `Origin` (servers that authenticate every caller).
    Any,
    /// Loopback names and addresses, and these host names (lower case,
    /// without a port).
    Loopback(Vec<String>),
}

impl HostPolicy {
    /// The policy of `allowed_hosts` entries: `*` allows any host.
    pub(crate) fn from_entries(entries: Vec<String>) -> Self {
        if entries.iter().any(|e| e.trim() == "*") {
            return HostPolicy::Any;
        }
        HostPolicy::Loopback(
            entries
                .into_iter()
                .map(|e| e.trim().to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
        )
    }

    /// Whether `authority` (`host`, `host:port`, `[v6]` or `[v6]:port`) is
    /// a host this policy answers.
    pub(crate) fn allows(&self, authority: &str) -> bool {
        match self {
            HostPolicy::Any => true,
            HostPolicy::Loopback(extra) => host_of(authority).is_some_and(|host| {
                let host = host.to_ascii_lowercase();
                is_loopback(&host) || extra.contains(&host)
            }),
        }
    }

    /// `Ok` when the request's host and origin pass.
    fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), ApiError> {
        if *self == HostPolicy::Any {
            return Ok(());
        }
        let host = uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| headers.get(header::HOST).and_then(|v| v.to_str().ok()));
        let Some(host) = host else {
            return Err(ApiError::invalid("the request names no Host").with_http(StatusCode::MISDIRECTED_REQUEST));
        };
        if !self.allows(host) {
            return Err(ApiError::permission_denied(format!(
                "this server answers requests for its loopback names only, not for host {host:?} (ServerBuilder::allowed_hosts adds names)"
            ))
            .with_http(StatusCode::MISDIRECTED_REQUEST));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let origin_host = origin.split_once("://").map(|(_, rest)| rest);
            if !origin_host.is_some_and(|h| !h.contains('/') && self.allows(h)) {
                return Err(ApiError::permission_denied(format!(
                    "requests from origin {origin:?} are not allowed"
                )));
            }
        }
        Ok(())
    }
}

/// The host of an authority, without its port (an IPv6 address keeps its
/// brackets); `None` when it is malformed (user info, an empty host, a
/// port that is not a number).
fn host_of(authority: &str) -> Option<&str> {
    if authority.contains('@') {
        return None;
    }
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, rest) = authority.split_at(end + 1);
        match rest {
            "" => (host, None),
            rest => (host, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) || host.is_empty() {
        return None;
    }
    Some(host)
}

/// Whether `host` (lower case, no port) names this machine whatever any DNS
/// server says.
fn is_loopback(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()));
    }
    host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses requests for hosts (and from origins) the server does not
/// answer; see the module docs.
pub(crate) async fn guard(State(policy): State<Arc<HostPolicy>>, request: Request, next: Next) -> Response {
    match policy.check(request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// Whether `authority` (`host`, `host:port`, `[v6]` or `[v6]:port`) names
/// a loopback host: `localhost`, a name under `.localhost`, an address in
/// `127.0.0.0/8` or `[::1]`.
pub fn is_loopback_authority(authority: &str) -> bool {
    HostPolicy::Loopback(Vec::new()).allows(authority)
}

/// `router` answering only requests for loopback hosts from loopback
/// origins (else 421 and 403, as an anonymous server answers), whatever
/// names a [`Server`](crate::Server) allows: the guard of a development
/// server bound to `127.0.0.1` (the Genkit reflection server of the
/// `holdpoint-reflection` crate). It is the outermost layer: no handler or
/// inner layer sees a request it refuses.
pub fn loopback_only(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new(HostPolicy::Loopback(Vec::new())),
        guard,
    ))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn loopback_names_and_addresses_with_or_without_a_port() {
        let p = HostPolicy::Loopback(Vec::new());
        for ok in [
            "localhost",
            "LOCALHOST:3400",
            "app.localhost:8080",
            "127.0.0.1",
            "127.0.0.1:3400",
            "127.8.9.10:1",
            "[::1]",
            "[::1]:3400",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(p.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:3400",
            "localhost.evil.example",
            "localhost.",
            "127.0.0.1.nip.io",
            "10.0.0.1",
            "0.0.0.0",
            "[::2]",
            "[::1",
            "::1",
            "127.0.0.1:",
            "127.0.0.1:x",
            "user@127.0.0.1",
            "",
        ] {
            assert!(!p.allows(refused), "{refused}");
        }
    }

    #[test]
    fn allowed_hosts_add_names_and_a_star_allows_any() {
        let p = HostPolicy::from_entries(vec!["Holdpoint.Internal".into()]);
        assert!(p.allows("holdpoint.internal:443"));
        assert!(p.allows("localhost"));
        assert!(!p.allows("other.internal"));
        assert_eq!(HostPolicy::from_entries(vec!["*".into()]), HostPolicy::Any);
    }

    #[test]
    fn origins_must_be_allowed_hosts_too() {
        let p = HostPolicy::Loopback(Vec::new());
        let uri: Uri = "/agents".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:3400"));
        assert!(p.check(&uri, &h).is_ok());
        h.insert(header::ORIGIN, HeaderValue::from_static("http://localhost:5173"));
        assert!(p.check(&uri, &h).is_ok());
        for bad in ["https://evil.example", "null", "http://127.0.0.1.evil.example"] {
            h.insert(header::ORIGIN, HeaderValue::from_static(bad));
            assert_eq!(
                p.check(&uri, &h).unwrap_err().http_status(),
                StatusCode::FORBIDDEN,
                "{bad}"
            );
        }
        h.remove(header::ORIGIN);
        h.insert(header::HOST, HeaderValue::from_static("rebound.example:3400"));
        assert_eq!(
            p.check(&uri, &h).unwrap_err().http_status(),
            StatusCode::MISDIRECTED_REQUEST
        );
        assert!(HostPolicy::Any.check(&uri, &h).is_ok());
    }
}
