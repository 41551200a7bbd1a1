//! `POST /agents/{name}`: one turn, answered as JSON or streamed as SSE.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;

use crate::auth::Caller;
use crate::envelope::{ApiJson, ApiPath, ApiQuery, RunRequest, reply};
use crate::error::ApiError;
use crate::metrics::TurnMeta;
use crate::state::AppState;
use crate::turns::{self, claim_conflict};

#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunQuery {
    #[serde(default)]
    stream: Option<String>,
}

/// `?stream=true` or `Accept: text/event-stream`.
fn wants_stream(query: &RunQuery, headers: &HeaderMap) -> Result<bool, ApiError> {
    if let Some(v) = &query.stream {
        return match v.as_str() {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(ApiError::invalid(format!(
                "query parameter `stream` must be true or false, got {other:?}"
            ))),
        };
    }
    Ok(headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream")))
}

/// Runs one turn: `{"data": AgentInput, "init": AgentInit?}` →
/// `{"result": AgentOutput}` (a failed turn is still 200; a resume that
/// lost the exactly-once claim is 409), or SSE frames when streaming.
pub(crate) async fn run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<RunQuery>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<RunRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    let stream = wants_stream(&query, &headers)?;
    // Reject a malformed input before anything starts.
    request.data.validate()?;
    let init = request.init.unwrap_or_default();
    let meta = TurnMeta {
        agent: agent.name().to_owned(),
    };
    if stream {
        let conn = agent
            .connect_with(holdpoint::agent::RunOptions::new(init).context(caller.request_context()))
            .await?;
        let events = turns::drive(&state, agent, conn, request.data, meta);
        let frames = turns::frames(events)
            .map(|frame| Ok::<_, std::convert::Infallible>(Event::default().data(frame.to_string())));
        let mut response = Sse::new(frames)
            .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
            .into_response();
        response
            .headers_mut()
            .insert("x-accel-buffering", HeaderValue::from_static("no"));
        return Ok(response);
    }
    let out = turns::run_once(&state, agent, request.data, init, caller.request_context(), meta).await?;
    if let Some(err) = claim_conflict(&out) {
        return Ok(ApiError::from(err.clone()).into_response());
    }
    Ok(reply(out).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_selection() {
        let none = HeaderMap::new();
        let q = |s: &str| RunQuery {
            stream: Some(s.to_owned()),
        };
        assert!(!wants_stream(&RunQuery::default(), &none).unwrap());
        assert!(wants_stream(&q("true"), &none).unwrap());
        assert!(!wants_stream(&q("false"), &none).unwrap());
        assert!(wants_stream(&q("maybe"), &none).is_err());
        let mut sse = HeaderMap::new();
        sse.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        assert!(wants_stream(&RunQuery::default(), &sse).unwrap());
    }
}
