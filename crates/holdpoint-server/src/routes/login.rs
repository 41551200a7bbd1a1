//! `GET /auth/login`: how the approval page signs a person in with OpenID
//! Connect (docs/reference.md §12.9). The page runs the authorization code
//! flow with PKCE itself, against the issuer named here, and sends the
//! token it gets as its bearer credential; the server's providers verify
//! it like any other bearer token.

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use crate::envelope::reply;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /auth/login` → `{"result": {"issuer", "clientId", "scope"}}`; 404
/// when the server has no sign-in configured (API keys and tokens still work).
pub(crate) async fn login(State(state): State<AppState>) -> Result<Response, ApiError> {
    match state.page_login() {
        Some(login) => Ok(reply(login.clone()).into_response()),
        None => Err(ApiError::not_found("no sign-in provider is configured")),
    }
}
