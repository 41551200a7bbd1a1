//! `GET /inbox` and `GET /audit`: the approver's queue and the audit trail
//! across every agent the caller may use, filtered, sorted and paged on a
//! cursor, with the true total (docs/reference.md §12.8).
//!
//! Both walk every row the caller may see (up to [`SCAN_LIMIT`] per agent;
//! beyond it the answer says `truncated`, never a silent cap), filter and
//! sort them, and return one page. The cursor is the sort key of the last
//! item of a page: the next page starts strictly after it, so holds that
//! arrive or go between two pages neither repeat nor push others out.
//!
//! A cursor is authenticated: `payload.mac`, the MAC an HMAC-SHA256 with
//! the server's state-signing key over the payload and the listing's name,
//! so a cursor the server did not give (altered, made up, or from the other
//! listing) is answered 400 `INVALID_ARGUMENT` before anything is read.
//! Any key of the ring verifies, so cursors survive a key rotation.
//!
//! The cursor, the agents a listing reads and the page size are here;
//! each listing is in its own submodule ([`queue`], [`audit`]).
//!
//! A refresh costs what changed: `GET /inbox` answers with an `ETag` (a
//! hash of the page as it would be sent) and a request whose
//! `If-None-Match` names it is answered `304 Not Modified` with no body.
//! An item's `part` carries its `toolRequest` and the metadata not already
//! at the item's top level: the part's `interrupt`, `approvalRule` and
//! `approvalReply` are the item's `interrupt`, `rule` and `reply`, sent
//! once (docs/reference.md §12.8).

mod audit;
mod queue;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use holdpoint::agent::Agent;
use sha2::Sha256;

use crate::auth::Identity;
use crate::error::ApiError;
use crate::signing::{KeyRing, SigningKey};
use crate::state::AppState;

pub(crate) use audit::audit;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::Digest;

use crate::auth::Caller;
use crate::envelope::ApiQuery;

/// The part metadata an inbox item carries at its top level instead
/// (`interrupt`, `rule`, `reply`).
const LIFTED_META: [&str; 3] = [
    holdpoint::message::metadata::INTERRUPT,
    holdpoint::message::metadata::APPROVAL_RULE,
    holdpoint::message::metadata::APPROVAL_REPLY,
];

/// How large a page the inbox re-reads to hash and slim (far above any
/// page `max_list` allows).
const MAX_PAGE_BYTES: usize = 256 * 1024 * 1024;

/// `GET /inbox` with `ETag` / `If-None-Match` (304) and items that carry
/// each of `interrupt`, `rule` and `reply` once; see [`queue::inbox`] for
/// the listing itself.
pub(crate) async fn inbox(
    state: State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    query: ApiQuery<queue::InboxQuery>,
) -> Result<Response, ApiError> {
    let response = queue::inbox(state, caller, query).await?;
    Ok(conditional(response, &headers).await)
}

/// The listing `response`, its items slimmed, with its `ETag`; `304 Not
/// Modified` (no body) when `headers` name that tag in `If-None-Match`.
async fn conditional(response: Response, headers: &HeaderMap) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_PAGE_BYTES).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the inbox page could not be read").into_response();
    };
    let bytes = match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut page) => {
            slim(&mut page);
            serde_json::to_vec(&page).map_or(bytes, axum::body::Bytes::from)
        }
        Err(_) => bytes,
    };
    let digest = sha2::Sha256::digest(&bytes);
    let tag: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let etag = format!("\"{tag}\"");
    parts.headers.remove(header::CONTENT_LENGTH);
    if let Ok(value) = HeaderValue::from_str(&etag) {
        parts.headers.insert(header::ETAG, value);
    }
    // Revalidate every time; never shared.
    parts
        .headers
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    if matches_etag(headers, &etag) {
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers.remove(header::CONTENT_TYPE);
        return Response::from_parts(parts, Body::empty());
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Whether `If-None-Match` names `etag` (or is `*`); weak tags compare by
/// their opaque part.
fn matches_etag(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == etag)
}

/// Drops from each item's `part.metadata` what the item carries at its top
/// level (`interrupt`, `rule`, `reply`).
fn slim(page: &mut Value) {
    let Some(items) = page.pointer_mut("/result/items").and_then(Value::as_array_mut) else {
        return;
    };
    for item in items {
        if let Some(meta) = item.pointer_mut("/part/metadata").and_then(Value::as_object_mut) {
            for key in LIFTED_META {
                meta.remove(key);
            }
        }
    }
}

/// How many rows of one agent a listing reads at most before it answers
/// `truncated: true`.
pub(crate) const SCAN_LIMIT: usize = 100_000;

/// A page size when none is asked for.
const DEFAULT_PAGE: usize = 50;

/// Domain separation: these MACs authenticate listing cursors and nothing
/// else (the state MACs begin with another context).
const CURSOR_CONTEXT: &[u8] = b"holdpoint-cursor-v1\n";

/// The listing a cursor belongs to: one listing's cursor is invalid in the
/// other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Inbox,
    Audit,
}

impl Listing {
    fn name(self) -> &'static str {
        match self {
            Listing::Inbox => "inbox",
            Listing::Audit => "audit",
        }
    }
}

/// The MAC of a cursor's payload (its base64 text) for `listing`.
fn cursor_mac(key: &SigningKey, listing: Listing, payload: &str) -> Option<Hmac<Sha256>> {
    // HMAC accepts keys of any length: `new_from_slice` does not fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key.secret()).ok()?;
    mac.update(CURSOR_CONTEXT);
    mac.update(listing.name().as_bytes());
    mac.update(b"\n");
    mac.update(payload.as_bytes());
    Some(mac)
}

/// The cursor naming `key` in `listing`, signed with the ring's newest key.
fn encode_cursor(keys: &KeyRing, listing: Listing, key: &(i64, i64, String)) -> String {
    let payload = URL_SAFE_NO_PAD.encode(format!("{}\u{1e}{}\u{1e}{}", key.0, key.1, key.2));
    let mac = cursor_mac(keys.current(), listing, &payload)
        .map(|m| URL_SAFE_NO_PAD.encode(m.finalize().into_bytes()))
        // Unreachable; an empty MAC never verifies, so the cursor is refused.
        .unwrap_or_default();
    format!("{payload}.{mac}")
}

/// The position a listing's `cursor` names (`None`: from the start); 400
/// for a cursor this server did not give out for `listing`.
fn after_cursor(
    keys: &KeyRing,
    listing: Listing,
    cursor: Option<&str>,
) -> Result<Option<(i64, i64, String)>, ApiError> {
    cursor
        .filter(|c| !c.is_empty())
        .map(|c| decode_cursor(keys, listing, c))
        .transpose()
}

fn decode_cursor(keys: &KeyRing, listing: Listing, cursor: &str) -> Result<(i64, i64, String), ApiError> {
    let bad = || ApiError::invalid("cursor: invalid, not a cursor this listing gave out");
    // Base64url has no '.', so the split is unambiguous.
    let (payload, mac) = cursor.split_once('.').ok_or_else(bad)?;
    let given = URL_SAFE_NO_PAD.decode(mac).map_err(|_| bad())?;
    // Only a payload the server signed is parsed; the comparison is
    // constant-time (`verify_slice`).
    let genuine = keys
        .kids()
        .into_iter()
        .filter_map(|kid| keys.get(kid))
        .any(|key| cursor_mac(key, listing, payload).is_some_and(|m| m.verify_slice(&given).is_ok()));
    if !genuine {
        return Err(bad());
    }
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).map_err(|_| bad())?).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '\u{1e}');
    let expires = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let held = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let id = parts.next().ok_or_else(bad)?.to_owned();
    Ok((expires, held, id))
}

/// The agents of `caller` that `only` (an agent name, if any) selects:
/// 404 for an unknown one, 403 for one outside the caller's scope.
fn agents_of<'a>(state: &'a AppState, caller: &Identity, only: Option<&str>) -> Result<Vec<&'a Agent>, ApiError> {
    match only.filter(|a| !a.is_empty()) {
        Some(name) => Ok(vec![state.agent(caller, name)?]),
        None => Ok(state
            .agents()
            .values()
            .filter(|a| a.is_server_managed() && caller.scope.allows(a.name()))
            .collect()),
    }
}

fn page_size(state: &AppState, limit: Option<usize>) -> usize {
    limit.unwrap_or(DEFAULT_PAGE).clamp(1, state.limits().max_list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(secret: u8) -> KeyRing {
        KeyRing::new(vec![SigningKey::new(format!("k{secret}"), vec![secret; 32]).unwrap()]).unwrap()
    }

    #[test]
    fn a_cursor_decodes_only_where_it_was_given() {
        let keys = ring(1);
        let key = (7, -3, "opsAgent\u{1f}snap".to_owned());
        let cursor = encode_cursor(&keys, Listing::Audit, &key);
        assert_eq!(decode_cursor(&keys, Listing::Audit, &cursor).unwrap(), key);
        // The other listing, another server's key, a bare payload, a tampered one.
        assert!(decode_cursor(&keys, Listing::Inbox, &cursor).is_err());
        assert!(decode_cursor(&ring(2), Listing::Audit, &cursor).is_err());
        let (payload, mac) = cursor.split_once('.').unwrap();
        assert!(decode_cursor(&keys, Listing::Audit, payload).is_err());
        let forged = URL_SAFE_NO_PAD.encode("0\u{1e}0\u{1e}x");
        assert!(decode_cursor(&keys, Listing::Audit, &format!("{forged}.{mac}")).is_err());
        // A key rotated in: cursors of the old key still page.
        let rotated = KeyRing::new(vec![
            SigningKey::new("k1", vec![1; 32]).unwrap(),
            SigningKey::new("k9", vec![9; 32]).unwrap(),
        ])
        .unwrap();
        assert_eq!(decode_cursor(&rotated, Listing::Audit, &cursor).unwrap(), key);
    }
}
