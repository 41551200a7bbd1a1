//! `POST /auth/session` and `POST /auth/signout`: the approval page's
//! sign-in that lasts across tabs (docs/reference.md §12.10). The page
//! hands the server the API key or OpenID Connect token it was given once;
//! the server verifies it with its providers and answers with an
//! `HttpOnly`, `SameSite=Strict` cookie ([`crate::auth::SessionCookies`])
//! that authenticates the page's later requests, so the page keeps no
//! credential of its own.

use axum::body::{Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{SessionCookies, check_same_origin, set_cookie};
use crate::envelope::reply;
use crate::error::ApiError;
use crate::state::AppState;

/// The body of `POST /auth/session`: the credential, unless it comes in the
/// request's `Authorization` or `X-API-Key` header.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionRequest {
    #[serde(default)]
    credential: Option<String>,
}

/// `response` with the session cookie cleared.
fn clearing(parts: &Parts, mut response: Response) -> Response {
    if let Some(clear) = set_cookie(parts, "", 0) {
        response.headers_mut().append(header::SET_COOKIE, clear);
    }
    response
}

/// The request's credential as the providers read it: the body's
/// `credential` as `Authorization: Bearer …`, else the request's headers.
fn with_credential(parts: &mut Parts, body: &Bytes) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let request: SessionRequest = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the body must be {{\"credential\": \"…\"}}: {e}")))?;
    if let Some(credential) = request.credential {
        let credential = credential.trim();
        if credential.is_empty() {
            return Err(ApiError::invalid("the credential is empty"));
        }
        let value = HeaderValue::from_str(&format!("Bearer {credential}"))
            .map_err(|_| ApiError::invalid("the credential holds characters no header may"))?;
        parts.headers.remove("x-api-key");
        parts.headers.insert(header::AUTHORIZATION, value);
    }
    Ok(())
}

async fn sign_in(state: &AppState, parts: &mut Parts, body: &Bytes) -> Result<Response, ApiError> {
    if parts.headers.contains_key(header::ORIGIN) {
        check_same_origin(parts)?;
    }
    with_credential(parts, body)?;
    let auth = state.authenticator();
    if auth.sessions().is_none() {
        return Err(ApiError::not_found("this server does not issue session cookies"));
    }
    let Some(identity) = auth.authenticate_credentials(parts).await? else {
        return Err(ApiError::unauthenticated(
            "send the API key or token to sign in with: {\"credential\": \"…\"} or an Authorization header",
        ));
    };
    let expires_at = SessionCookies::expiry_for(&identity);
    let max_age = expires_at - crate::auth::session_now();
    if max_age <= 0 {
        return Err(ApiError::unauthenticated("the token has expired"));
    }
    let value = auth.seal_session(parts, &identity, expires_at).await?;
    let cookie = set_cookie(parts, &value, max_age)
        .ok_or_else(|| ApiError::new(holdpoint::Status::Internal, "the session cookie could not be set"))?;
    let expires = chrono::DateTime::from_timestamp(expires_at, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    let mut response = reply(json!({
        "principal": identity.principal(),
        "roles": identity.roles,
        "expiresAt": expires,
    }))
    .into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /auth/session` (body `{"credential": "…"}`, or the credential in
/// `Authorization` / `X-API-Key`) → `{"result": {"principal", "roles",
/// "expiresAt"}}` and the session cookie; a refused credential clears any
/// cookie the browser held.
pub(crate) async fn create(State(state): State<AppState>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let body = match to_bytes(body, state.limits().body).await {
        Ok(body) => body,
        Err(_) => return ApiError::invalid("the body could not be read").into_response(),
    };
    match sign_in(&state, &mut parts, &body).await {
        Ok(response) => response,
        Err(err) => clearing(&parts, err.into_response()),
    }
}

/// `POST /auth/signout` → `{"result": {"signedOut": true}}` and the session
/// cookie cleared.
pub(crate) async fn sign_out(request: Request) -> Response {
    let (parts, _) = request.into_parts();
    if parts.headers.contains_key(header::ORIGIN)
        && let Err(err) = check_same_origin(&parts)
    {
        return ApiError::from(err).into_response();
    }
    let mut response = reply(json!({"signedOut": true})).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    clearing(&parts, response)
}
