//! The agent card: `GET /agents/{name}/.well-known/agent-card.json`, what
//! an A2A client reads to find the JSON-RPC endpoint, its protocol version
//! and the authentication it takes.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::PROTOCOL_VERSION;
use crate::auth::Caller;
use crate::envelope::ApiPath;
use crate::error::ApiError;
use crate::state::AppState;

/// The agent card: `GET /agents/{name}/.well-known/agent-card.json`.
pub(crate) async fn card(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .filter(|s| *s == "https")
        .unwrap_or("http");
    let description = agent
        .description()
        .map_or_else(|| format!("Holdpoint agent {name}"), str::to_owned);
    let card = json!({
        "name": name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{scheme}://{host}/agents/{name}/a2a"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "provider": {"organization": "Holdpoint", "url": format!("{scheme}://{host}/")},
        "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": false},
        "securitySchemes": {
            "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "x-api-key"}},
            "bearer": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}},
        },
        "securityRequirements": [
            {"schemes": {"apiKey": {"list": []}}},
            {"schemes": {"bearer": {"list": []}}},
        ],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": name,
            "name": name,
            "description": description,
            "tags": ["holdpoint", "human-in-the-loop"],
        }],
    });
    Ok(axum::Json(card).into_response())
}
