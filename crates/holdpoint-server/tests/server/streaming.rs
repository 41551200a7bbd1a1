//! Server-sent events: `message` frames, then `result` or `error`.

use serde_json::{Value, json};

use crate::support::*;

/// The JSON of every `data:` line of an event stream.
pub fn sse_frames(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|line| line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")))
        .map(|data| serde_json::from_str(data.trim()).unwrap_or_else(|_| panic!("bad frame {data:?}")))
        .collect()
}

async fn stream(s: &TestServer, path: &str, body: Value, accept_header: bool) -> (u16, String, Vec<Value>) {
    let url = if accept_header {
        s.url(path)
    } else {
        s.url(&format!("{path}?stream=true"))
    };
    let mut req = s.client.post(url).json(&body);
    if accept_header {
        req = req.header("accept", "text/event-stream");
    }
    let r = req.send().await.unwrap();
    let code = r.status().as_u16();
    let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
    let text = r.text().await.unwrap();
    let frames = if ct.starts_with("text/event-stream") {
        sse_frames(&text)
    } else {
        vec![serde_json::from_str(&text).unwrap()]
    };
    (code, ct, frames)
}

#[tokio::test]
async fn an_interrupted_turn_streams_its_hold_then_the_result() {
    let f = fixture(false).await;
    for accept in [false, true] {
        let (code, ct, frames) = stream(
            &f.server,
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            accept,
        )
        .await;
        assert_eq!(code, 200);
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        let (last, chunks) = frames.split_last().unwrap();
        let out = &last["result"];
        assert_eq!(out["finishReason"], "interrupted", "{frames:#?}");
        assert!(chunks.iter().all(|c| c.get("message").is_some()), "{frames:#?}");
        let (end, before_end) = chunks.split_last().unwrap();
        assert_eq!(end["message"]["turnEnd"]["finishReason"], "interrupted");
        assert_eq!(end["message"]["turnEnd"]["snapshotId"], out["snapshotId"]);
        let hold = &before_end.last().unwrap()["message"]["modelChunk"];
        assert_eq!(hold["role"], "tool", "{frames:#?}");
        assert_eq!(hold["content"][0]["toolRequest"]["name"], "transferMoney");
        assert!(hold["content"][0]["metadata"]["interrupt"].is_object());
    }
}

#[tokio::test]
async fn a_lost_claim_ends_the_stream_with_an_error_frame() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    let out = &body["result"];
    let resume = json!({
        "data": {"resume": {"restart": [restart(&paused_part(out), json!({"approved": true}))]}},
        "init": {"snapshotId": out["snapshotId"]},
    });
    let (_, _, frames) = stream(s, "/agents/bankingAgent", resume.clone(), false).await;
    assert_eq!(frames.last().unwrap()["result"]["finishReason"], "stop", "{frames:#?}");
    let (code, _, frames) = stream(s, "/agents/bankingAgent", resume, false).await;
    assert_eq!(code, 200);
    let last = frames.last().unwrap();
    assert_eq!(last["error"]["status"], "ABORTED", "{frames:#?}");
    assert!(last["error"]["message"].as_str().unwrap().contains("already resumed"));
}

#[tokio::test]
async fn init_errors_are_plain_http_errors_even_when_streaming() {
    let f = fixture(false).await;
    let (code, ct, frames) = stream(
        &f.server,
        "/agents/bankingAgent",
        json!({"data": user("hi"), "init": {"snapshotId": "missing"}}),
        true,
    )
    .await;
    assert_eq!(code, 404);
    assert!(ct.starts_with("application/json"), "{ct}");
    assert_eq!(frames[0]["error"]["status"], "NOT_FOUND");
}

#[tokio::test]
async fn a_failed_turn_streams_a_failed_result() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post("/agents/bankingAgent", json!({"data": user("Transfer $5 to x")}), None)
        .await;
    let bogus =
        json!({"toolRequest": {"name": "transferMoney", "ref": "nope", "input": {}}, "metadata": {"resumed": true}});
    let (code, _, frames) = stream(
        s,
        "/agents/bankingAgent",
        json!({"data": {"resume": {"restart": [bogus]}}, "init": {"snapshotId": body["result"]["snapshotId"]}}),
        false,
    )
    .await;
    assert_eq!(code, 200);
    let (last, chunks) = frames.split_last().unwrap();
    assert_eq!(last["result"]["finishReason"], "failed", "{frames:#?}");
    assert_eq!(chunks.last().unwrap()["message"]["turnEnd"]["finishReason"], "failed");
}

#[tokio::test]
async fn model_chunks_stream_before_the_result() {
    let f = fixture(false).await;
    let (_, _, frames) = stream(
        &f.server,
        "/agents/bankingAgent",
        json!({"data": user("what is my balance")}),
        false,
    )
    .await;
    let last = frames.last().unwrap();
    assert_eq!(last["result"]["finishReason"], "stop", "{frames:#?}");
    assert!(
        last["result"]["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("balance")
    );
    assert!(
        frames.len() >= 2,
        "at least a turnEnd chunk and the result: {frames:#?}"
    );
}
