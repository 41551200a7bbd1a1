//! `POST /agents/{name}/answer`: one person's approval or denial of one
//! paused call (docs/reference.md §10.7), checked against the approval rule
//! that governs it.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use holdpoint::agent::{AgentOutput, Answer, Answered};
use holdpoint::approval::Grant;
use holdpoint::session::HoldApproval;
use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::envelope::{ApiJson, ApiPath, reply};
use crate::error::ApiError;
use crate::state::AppState;

/// `{"data": Answer}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerRequest {
    data: Answer,
}

/// What an answer did: `decided` false with the approvals so far (the
/// quorum is not met), or true with the resumed turn's output.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct AnswerResult {
    decided: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    counted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quorum: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approvals: Option<Vec<HoldApproval>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<AgentOutput>,
    /// The standing grant the approval created (docs/reference.md §10.9).
    #[serde(skip_serializing_if = "Option::is_none")]
    grant: Option<Grant>,
}

/// `{"data": {"snapshotId", "ref"?, "tool"?, "decision": "approve"|"deny",
/// "reason"?, "grant"?: {"scope": "session"|"principal"|"tool", "when"?,
/// "ttl"?, "uses"?}}}` → `{"result": {"decided": false, "counted", "quorum",
/// "approvals": [{tool, ref, actor, at}]}}` while the quorum is not met,
/// `{"result": {"decided": true, "output": AgentOutput, "grant"?}}` once
/// decided (with the grant an approval asked for).
/// 403 naming the rule for an answer it refuses (nothing changes), 404 for
/// a hold the caller may not see, 409 when another answer decided it.
pub(crate) async fn answer(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<AnswerRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    if request.data.snapshot_id.is_empty() {
        return Err(ApiError::invalid("answer needs data.snapshotId"));
    }
    let context = caller.request_context();
    let guard = state.turns().begin();
    // The answer runs in a task of its own: a client that disconnects
    // does not cancel a resume half way.
    let answered = tokio::spawn(async move {
        let out = agent.decisions().answer(request.data, context).await;
        drop(guard);
        out
    })
    .await
    .map_err(|e| ApiError::new(holdpoint::Status::Internal, format!("the answer stopped: {e}")))??;
    let result = match answered {
        Answered::Recorded { call, counted } => AnswerResult {
            decided: false,
            counted: Some(counted),
            quorum: call.rule.as_ref().map(|r| r.quorum),
            approvals: Some(call.approvals),
            output: None,
            grant: None,
        },
        Answered::Resumed(out) => AnswerResult {
            decided: true,
            counted: None,
            quorum: None,
            approvals: None,
            output: Some(crate::routes::agents::masked(*out)),
            grant: None,
        },
        Answered::Granted { output, grant } => AnswerResult {
            decided: true,
            counted: None,
            quorum: None,
            approvals: None,
            output: Some(crate::routes::agents::masked(*output)),
            grant: Some(*grant),
        },
    };
    Ok(reply(result).into_response())
}
