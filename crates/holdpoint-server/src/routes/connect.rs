//! `GET /agents/{name}/connect`: a multi-turn connection over one WebSocket
//! (the protocol is described in the parent module).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use holdpoint::agent::{Agent, AgentInput, Connection};
use holdpoint::{ErrorBody, Status};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::auth::{Caller, Identity};
use crate::envelope::{ApiPath, ConnectInit, decode_json};
use crate::error::{ApiError, http_status};
use crate::metrics::Metrics;
use crate::routes::agents::claim_conflict;
use crate::state::AppState;

/// How long the client has to send its init message.
const INIT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WrappedInput {
    data: AgentInput,
}

/// A browser page of another site must not drive a connection with the
/// user's ambient credentials: when an `Origin` is sent, its host must be
/// the request's `Host`.
fn check_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let origin_host = origin.split_once("://").map(|(_, rest)| rest).unwrap_or(origin);
    if !host.is_empty() && origin_host.eq_ignore_ascii_case(host) {
        return Ok(());
    }
    Err(ApiError::permission_denied(format!(
        "WebSocket connections from origin {origin} are not allowed"
    )))
}

/// Upgrades to a WebSocket carrying one agent connection.
pub(crate) async fn connect(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    check_origin(&headers)?;
    let ws = ws.map_err(|e| {
        let code = e.status();
        ApiError::invalid(format!("expected a WebSocket upgrade: {}", e.body_text())).with_http(code)
    })?;
    let limit = state.limits().ws_message;
    Ok(ws
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| session(socket, state, agent, caller)))
}

type Outbox = mpsc::UnboundedSender<Message>;

fn send_json(out: &Outbox, value: &Value) {
    let _ = out.send(Message::Text(value.to_string().into()));
}

fn send_error(out: &Outbox, body: &ErrorBody) {
    send_json(out, &json!({ "error": body }));
}

fn close(out: &Outbox, code: u16, reason: &str) {
    let _ = out.send(Message::Close(Some(CloseFrame {
        code,
        reason: reason.to_owned().into(),
    })));
}

async fn session(socket: WebSocket, state: AppState, agent: Agent, caller: Identity) {
    let (mut sink, mut incoming) = socket.split();
    let (out, mut outbox) = mpsc::unbounded_channel::<Message>();
    let writer = tokio::spawn(async move {
        while let Some(message) = outbox.recv().await {
            let last = matches!(message, Message::Close(_));
            if sink.send(message).await.is_err() || last {
                break;
            }
        }
    });
    run(&mut incoming, &out, state, agent, caller).await;
    drop(out);
    let _ = writer.await;
}

/// The init message, or `None` when the client left or sent garbage (then
/// it has been told).
async fn read_init(
    incoming: &mut futures::stream::SplitStream<WebSocket>,
    out: &Outbox,
) -> Option<holdpoint::agent::AgentInit> {
    let first = tokio::time::timeout(INIT_TIMEOUT, async {
        loop {
            match incoming.next().await {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => return other,
            }
        }
    })
    .await;
    let text = match first {
        Err(_) => {
            send_error(
                out,
                &ErrorBody {
                    status: Status::DeadlineExceeded,
                    message: "no init message within 30 s".into(),
                },
            );
            close(out, 4408, "DEADLINE_EXCEEDED");
            return None;
        }
        Ok(Some(Ok(Message::Text(text)))) => text,
        Ok(Some(Ok(Message::Binary(_)))) => {
            let e = ApiError::invalid("messages must be JSON text, not binary");
            send_error(out, &e.body());
            close(out, 4400, "INVALID_ARGUMENT");
            return None;
        }
        Ok(_) => return None,
    };
    match decode_json::<ConnectInit>(text.as_bytes()) {
        Ok(init) => Some(init.init.unwrap_or_default()),
        Err(e) => {
            send_error(out, &e.body());
            close(out, 4400, "INVALID_ARGUMENT");
            None
        }
    }
}

// One per message, short-lived: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum Incoming {
    Input(Box<AgentInput>),
    Close,
}

fn parse_incoming(text: &str) -> Result<Incoming, ApiError> {
    let value: Value = decode_json(text.as_bytes())?;
    let Value::Object(map) = &value else {
        return Err(ApiError::invalid("each message must be a JSON object"));
    };
    if map.contains_key("close") {
        return match (map.len(), map.get("close")) {
            (1, Some(Value::Bool(true))) => Ok(Incoming::Close),
            _ => Err(ApiError::invalid(r#"a close message is exactly {"close": true}"#)),
        };
    }
    if map.contains_key("data") {
        return decode_json::<WrappedInput>(text.as_bytes()).map(|w| Incoming::Input(Box::new(w.data)));
    }
    decode_json::<AgentInput>(text.as_bytes()).map(|i| Incoming::Input(Box::new(i)))
}

/// Forwards every turn's chunks until the agent ends.
fn forward_chunks(conn: Arc<Connection>, out: Outbox, metrics: Metrics, agent: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let mut chunks = conn.receive();
            let mut any = false;
            while let Some(chunk) = chunks.next().await {
                any = true;
                if let Some(end) = &chunk.turn_end {
                    metrics.turn(&agent, end.finish_reason, None);
                }
                send_json(&out, &json!({ "message": chunk }));
            }
            if !any {
                return;
            }
        }
    })
}

/// Tells the client `e` and closes with its code.
fn fail(out: &Outbox, e: &ApiError) {
    send_error(out, &e.body());
    close(out, 4000 + e.http_status().as_u16(), e.status().as_str());
}

/// Opens the agent connection the init asks for, or `None` when it was
/// refused (then the client has been told).
async fn open(
    incoming: &mut futures::stream::SplitStream<WebSocket>,
    out: &Outbox,
    agent: &Agent,
    caller: &Identity,
) -> Option<Arc<Connection>> {
    let init = read_init(incoming, out).await?;
    match agent
        .connect_with(holdpoint::agent::RunOptions::new(init).context(caller.request_context()))
        .await
    {
        Ok(conn) => Some(Arc::new(conn)),
        Err(e) => {
            fail(out, &ApiError::from(e));
            None
        }
    }
}

/// Handles one text message: sends its input to the agent, or tells the
/// client why not. `Break` when the client closed or the connection has
/// ended.
fn handle_text(conn: &Connection, out: &Outbox, text: &str) -> ControlFlow<()> {
    match parse_incoming(text) {
        Ok(Incoming::Close) => return ControlFlow::Break(()),
        Ok(Incoming::Input(input)) => {
            if let Err(e) = conn.send(*input) {
                let ended = e.status() == Status::FailedPrecondition;
                send_error(out, &e.body());
                if ended {
                    return ControlFlow::Break(());
                }
            }
        }
        Err(e) => send_error(out, &e.body()),
    }
    ControlFlow::Continue(())
}

/// Answers the connection's output once the agent has finished, and
/// closes.
async fn answer(out: &Outbox, conn: &Connection) {
    // A failed turn is answered as Genkit's failed output.
    match conn.output().await.or_else(holdpoint::Error::into_failed_output) {
        Ok(output) => match claim_conflict(&output) {
            Some(err) => {
                send_error(out, err);
                close(out, 4000 + http_status(err.status).as_u16(), err.status.as_str());
            }
            None => {
                send_json(out, &json!({ "result": output }));
                close(out, 1000, "done");
            }
        },
        Err(e) => fail(out, &ApiError::from(e)),
    }
}

async fn run(
    incoming: &mut futures::stream::SplitStream<WebSocket>,
    out: &Outbox,
    state: AppState,
    agent: Agent,
    caller: Identity,
) {
    let Some(conn) = open(incoming, out, &agent, &caller).await else {
        return;
    };
    let guard = state.turns().begin();
    let mut closing = state.turns().closing();
    let mut forwarder = forward_chunks(
        Arc::clone(&conn),
        out.clone(),
        state.metrics().clone(),
        agent.name().to_owned(),
    );
    let mut forwarder_done = false;
    loop {
        tokio::select! {
            message = incoming.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    if handle_text(&conn, out, &text).is_break() {
                        break;
                    }
                }
                Some(Ok(Message::Binary(_))) => send_error(out, &ApiError::invalid("messages must be JSON text, not binary").body()),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => {
                    // The client left: the agent finishes what it has, in
                    // the background, still counted by the shutdown tracker.
                    conn.close();
                    tokio::spawn(async move {
                        let _ = forwarder.await;
                        let _ = conn.output().await;
                        drop(guard);
                    });
                    return;
                }
            },
            _ = &mut forwarder => {
                forwarder_done = true;
                break;
            }
            changed = closing.changed() => {
                if changed.is_err() || *closing.borrow() {
                    break;
                }
            }
        }
    }
    conn.close();
    if !forwarder_done {
        let _ = forwarder.await;
    }
    answer(out, &conn).await;
    drop(guard);
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn origins() {
        let mut h = HeaderMap::new();
        assert!(check_origin(&h).is_ok());
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:3400"));
        h.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:3400"));
        assert!(check_origin(&h).is_ok());
        h.insert(header::ORIGIN, HeaderValue::from_static("https://evil.example"));
        assert!(check_origin(&h).is_err());
    }

    #[test]
    fn incoming_messages() {
        assert!(matches!(parse_incoming(r#"{"close": true}"#), Ok(Incoming::Close)));
        assert!(matches!(
            parse_incoming(r#"{"message": {"role": "user", "content": [{"text": "hi"}]}}"#),
            Ok(Incoming::Input(_))
        ));
        assert!(matches!(
            parse_incoming(r#"{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}}"#),
            Ok(Incoming::Input(_))
        ));
        assert!(parse_incoming(r#"{"close": "soon"}"#).is_err());
        assert!(parse_incoming(r#"[1]"#).is_err());
        assert!(parse_incoming(r#"{"mesage": {}}"#).is_err());
    }
}
