//! Runs agent-format scenarios: send, getSnapshotData, abort and
//! waitUntilCompleted steps against the harness agents.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput, AgentStreamChunk};
use holdpoint::error::ErrorBody;
use holdpoint::session::{Snapshot, SnapshotStatus};
use holdpoint::{GenerateChunk, GenerateResponse, ScriptedModel, ScriptedTurn};
use serde_json::Value;

use crate::harness::{self, StoreFactory};
use crate::matcher::{contains, resolve, short};
use crate::report::Report;

/// Capabilities this harness implements (tests requiring others are
/// skipped): failed turns keep their last seam and an empty input goes on
/// from there; aborted runs keep their finished turns and resume.
pub const CAPABILITIES: &[&str] = &["resumable-failures", "resumable-aborts"];

struct Scenario {
    agents: HashMap<String, Agent>,
    model: ScriptedModel,
    captures: HashMap<String, Value>,
}

fn program(model: &ScriptedModel, step: &Value) -> Result<(), String> {
    let responses = step["modelResponses"].as_array().cloned().unwrap_or_default();
    let chunks = step["streamChunks"].as_array().cloned().unwrap_or_default();
    let mut turns = Vec::new();
    for i in 0..responses.len().max(chunks.len()) {
        let chunk_list: Vec<GenerateChunk> = match chunks.get(i) {
            Some(c) => serde_json::from_value(c.clone()).map_err(|e| format!("streamChunks[{i}]: {e}"))?,
            None => Vec::new(),
        };
        let Some(r) = responses.get(i) else { break };
        // `error: {status, message}` fails that model call.
        if let Some(error) = r.get("error") {
            let body: ErrorBody =
                serde_json::from_value(error.clone()).map_err(|e| format!("modelResponses[{i}].error: {e}"))?;
            let mut turn = ScriptedTurn::text("").with_chunks(chunk_list);
            turn.response = Err(body);
            turns.push(turn);
            continue;
        }
        let response: GenerateResponse =
            serde_json::from_value(r.clone()).map_err(|e| format!("modelResponses[{i}]: {e}"))?;
        turns.push(ScriptedTurn::response(response).with_chunks(chunk_list));
    }
    model.reset(turns);
    Ok(())
}

fn check_error(err: &holdpoint::Error, expected: &Value) -> Result<(), String> {
    if let Some(status) = expected["status"].as_str()
        && err.status().as_str() != status
    {
        return Err(format!("expected error status {status}, got {} ({err})", err.status()));
    }
    if let Some(msg) = expected["message"].as_str()
        && !err.to_string().contains(msg)
    {
        return Err(format!(
            "expected error message containing {msg:?}, got {:?}",
            err.to_string()
        ));
    }
    Ok(())
}

fn check_error_body(actual: &Value, expected: &Value, what: &str) -> Result<(), String> {
    if let Some(status) = expected.get("status").filter(|v| !v.is_null())
        && actual.get("status") != Some(status)
    {
        return Err(format!(
            "{what}.status: expected {status}, got {}",
            short(&actual["status"])
        ));
    }
    if let Some(msg) = expected["message"].as_str() {
        let got = actual["message"].as_str().unwrap_or_default();
        if !got.contains(msg) {
            return Err(format!("{what}.message: expected to contain {msg:?}, got {got:?}"));
        }
    }
    Ok(())
}

fn non_empty_str(v: &Value) -> bool {
    v.as_str().is_some_and(|s| !s.is_empty())
}

fn check_chunks(chunks: &[AgentStreamChunk], expected: &[Value]) -> Result<(), String> {
    // `turnStart` chunks are matched only by scenarios that name one: a
    // scenario written without them lists the rest of the stream.
    let names_turn_start = expected.iter().any(|e| e.get("turnStart").is_some());
    let actual: Vec<Value> = chunks
        .iter()
        .filter(|c| names_turn_start || c.turn_start.is_none())
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect();
    if actual.len() != expected.len() {
        return Err(format!(
            "expected {} chunks, got {}: {}",
            expected.len(),
            actual.len(),
            short(&Value::Array(actual))
        ));
    }
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        if let Some(te) = e.get("turnEnd") {
            let Some(ate) = a.get("turnEnd") else {
                return Err(format!("chunk[{i}]: expected turnEnd, got {}", short(a)));
            };
            if let Some(fr) = te.get("finishReason").filter(|v| !v.is_null())
                && ate.get("finishReason") != Some(fr)
            {
                return Err(format!(
                    "chunk[{i}].turnEnd.finishReason: expected {fr}, got {}",
                    short(ate)
                ));
            }
        } else {
            contains(a, e, &format!("chunk[{i}]"))?;
        }
    }
    Ok(())
}

fn check_output(out: &AgentOutput, exp: &Value) -> Result<(), String> {
    let actual = serde_json::to_value(out).map_err(|e| e.to_string())?;
    if let Some(m) = exp.get("message").filter(|v| !v.is_null()) {
        contains(&actual["message"], m, "output.message")?;
    }
    if exp["hasSnapshotId"].as_bool() == Some(true) && !non_empty_str(&actual["snapshotId"]) {
        return Err(format!("output.snapshotId: expected one, got {}", short(&actual)));
    }
    if exp["hasSessionId"].as_bool() == Some(true) {
        let sid = actual["state"].get("sessionId").unwrap_or(&actual["sessionId"]);
        if !non_empty_str(sid) {
            return Err(format!("output.state.sessionId: expected one, got {}", short(&actual)));
        }
    }
    if let Some(s) = exp.get("stateContains").filter(|v| !v.is_null()) {
        contains(&actual["state"], s, "output.state")?;
    }
    if let Some(a) = exp.get("artifactsContain").filter(|v| !v.is_null()) {
        contains(&actual["artifacts"], a, "output.artifacts")?;
    }
    if let Some(fr) = exp.get("finishReason").filter(|v| !v.is_null())
        && actual.get("finishReason") != Some(fr)
    {
        return Err(format!(
            "output.finishReason: expected {fr}, got {} (error: {})",
            short(&actual["finishReason"]),
            short(&actual["error"])
        ));
    }
    if let Some(e) = exp.get("errorContains").filter(|v| !v.is_null()) {
        check_error_body(&actual["error"], e, "output.error")?;
    }
    Ok(())
}

fn check_snapshot(snap: &Snapshot, exp: &Value) -> Result<(), String> {
    let actual = serde_json::to_value(snap).map_err(|e| e.to_string())?;
    if let Some(p) = exp.get("parentId").filter(|v| !v.is_null())
        && actual.get("parentId") != Some(p)
    {
        return Err(format!(
            "snapshot.parentId: expected {p}, got {}",
            short(&actual["parentId"])
        ));
    }
    for key in ["status", "finishReason"] {
        if let Some(v) = exp.get(key).filter(|v| !v.is_null())
            && actual.get(key) != Some(v)
        {
            return Err(format!("snapshot.{key}: expected {v}, got {}", short(&actual[key])));
        }
    }
    if exp["hasSessionId"].as_bool() == Some(true) && !non_empty_str(&actual["state"]["sessionId"]) {
        return Err(format!(
            "snapshot.state.sessionId: expected one, got {}",
            short(&actual)
        ));
    }
    if let Some(s) = exp.get("stateContains").filter(|v| !v.is_null()) {
        contains(&actual["state"], s, "snapshot.state")?;
    }
    if let Some(e) = exp.get("errorContains").filter(|v| !v.is_null()) {
        check_error_body(&actual["error"], e, "snapshot.error")?;
    }
    Ok(())
}

impl Scenario {
    async fn send(&mut self, agent: &Agent, step: &Value) -> Result<(), String> {
        program(&self.model, step)?;
        let expect_error = step.get("expectError").filter(|v| !v.is_null());
        let attempt = async {
            let init: AgentInit = serde_json::from_value(step.get("init").cloned().unwrap_or(Value::Null))
                .or_else(|_| serde_json::from_value(serde_json::json!({})))
                .map_err(|e| holdpoint::Error::InvalidArgument(e.to_string()))?;
            let init = match step.get("init") {
                Some(v) if !v.is_null() => serde_json::from_value(v.clone())
                    .map_err(|e| holdpoint::Error::InvalidArgument(format!("invalid init: {e}")))?,
                _ => init,
            };
            let conn = agent.connect(init).await?;
            for input in step["inputs"].as_array().cloned().unwrap_or_default() {
                let input: AgentInput = serde_json::from_value(input)
                    .map_err(|e| holdpoint::Error::InvalidArgument(format!("invalid input: {e}")))?;
                conn.send(input)?;
            }
            conn.close();
            let mut chunks = Vec::new();
            loop {
                let batch: Vec<AgentStreamChunk> = conn.receive().collect().await;
                if batch.is_empty() {
                    break;
                }
                chunks.extend(batch);
            }
            // The spec speaks the wire: a failed turn is a failed output.
            let out = conn.output().await.or_else(holdpoint::Error::into_failed_output)?;
            Ok::<_, holdpoint::Error>((chunks, out))
        };
        let (chunks, out) = match tokio::time::timeout(Duration::from_secs(20), attempt).await {
            Err(_) => return Err("send step timed out after 20 s".into()),
            Ok(Err(e)) => {
                return match expect_error {
                    Some(exp) => check_error(&e, exp),
                    None => Err(format!("send failed: {} {e}", e.status())),
                };
            }
            Ok(Ok(v)) => v,
        };
        if expect_error.is_some() {
            return Err(format!(
                "expected an error, got output {}",
                short(&serde_json::to_value(&out).unwrap_or_default())
            ));
        }
        if let Some(Value::Array(expected)) = step.get("expectChunks") {
            check_chunks(&chunks, expected)?;
        }
        if let Some(exp) = step.get("expectOutput").filter(|v| !v.is_null()) {
            check_output(&out, exp)?;
        }
        if let Some(name) = step["captureSnapshotId"].as_str() {
            let id = out.snapshot_id.clone().map(Value::String).unwrap_or(Value::Null);
            self.captures.insert(name.to_owned(), id);
        }
        if let Some(name) = step["captureState"].as_str() {
            self.captures
                .insert(name.to_owned(), out.state.clone().unwrap_or(Value::Null));
        }
        if let Some(name) = step["captureSessionId"].as_str() {
            let sid = out
                .state
                .as_ref()
                .and_then(|s| s.get("sessionId").cloned())
                .unwrap_or(Value::String(out.session_id.clone()));
            self.captures.insert(name.to_owned(), sid);
        }
        Ok(())
    }

    async fn get_snapshot(&self, agent: &Agent, step: &Value) -> Result<(), String> {
        let found = if let Some(id) = step["snapshotId"].as_str() {
            agent.snapshot(id, Access::Full).await
        } else if let Some(sid) = step["sessionId"].as_str() {
            agent.latest_snapshot(sid, Access::Full).await
        } else {
            return Err("getSnapshotData needs snapshotId or sessionId".into());
        };
        if let Some(msg) = step["expectError"].as_str() {
            return match found {
                Err(e) if e.to_string().contains(msg) => Ok(()),
                Err(e) => Err(format!("expected error containing {msg:?}, got {e}")),
                Ok(_) => Err(format!("expected error containing {msg:?}, got a snapshot")),
            };
        }
        let snap = found
            .map_err(|e| format!("getSnapshotData failed: {e}"))?
            .ok_or_else(|| "snapshot not found".to_string())?;
        match step.get("expectSnapshot").filter(|v| !v.is_null()) {
            Some(exp) => check_snapshot(&snap, exp),
            None => Ok(()),
        }
    }

    async fn abort(&self, agent: &Agent, step: &Value) -> Result<(), String> {
        let id = step["snapshotId"].as_str().ok_or("abort needs snapshotId")?;
        let previous = agent
            .abort(id, Access::Full)
            .await
            .map_err(|e| format!("abort failed: {e}"))?;
        if let Some(exp) = step.as_object().and_then(|m| m.get("expectPreviousStatus")) {
            let got = previous.map(|s| s.as_str().to_owned());
            let want = exp.as_str().map(str::to_owned);
            if got != want {
                return Err(format!("abort: expected previous status {want:?}, got {got:?}"));
            }
        }
        Ok(())
    }

    async fn wait_until_completed(&self, agent: &Agent, step: &Value) -> Result<(), String> {
        let id = step["snapshotId"]
            .as_str()
            .ok_or("waitUntilCompleted needs snapshotId")?;
        let timeout = Duration::from_millis(step["timeoutMs"].as_u64().unwrap_or(5000));
        let snap = agent
            .wait_for_snapshot(id, Access::Full, timeout)
            .await
            .map_err(|e| format!("waitForSnapshot failed: {e}"))?
            .ok_or_else(|| format!("snapshot {id} not found"))?;
        if matches!(snap.status, SnapshotStatus::Pending | SnapshotStatus::Aborting) {
            return Err(format!(
                "snapshot {id} did not settle within {} ms (now {})",
                timeout.as_millis(),
                snap.status.as_str()
            ));
        }
        match step.get("expectSnapshot").filter(|v| !v.is_null()) {
            Some(exp) => check_snapshot(&snap, exp),
            None => Ok(()),
        }
    }
}

async fn run_one(
    index: usize,
    test: &Value,
    known: &HashSet<String>,
    stores: &StoreFactory,
) -> Result<Option<String>, String> {
    for req in test["requires"].as_array().cloned().unwrap_or_default() {
        let req = req.as_str().unwrap_or_default().to_owned();
        if !known.contains(&req) {
            return Err(format!(
                "requires unknown capability {req:?} (not in the spec's capabilities list)"
            ));
        }
        if !CAPABILITIES.contains(&req.as_str()) {
            return Ok(Some(format!("requires {req}")));
        }
    }
    let model = ScriptedModel::new("programmableModel");
    let store = stores(index).await.map_err(|e| format!("store: {e}"))?;
    let agents = harness::agents(&model, store).map_err(|e| format!("harness: {e}"))?;
    let agent_name = test["agent"].as_str().ok_or("test names no agent")?;
    let agent = agents
        .get(agent_name)
        .cloned()
        .ok_or_else(|| format!("unknown harness agent {agent_name:?}"))?;
    let mut scenario = Scenario {
        agents,
        model,
        captures: HashMap::new(),
    };
    let steps = test
        .get("steps")
        .or_else(|| test.get("invocations"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, raw) in steps.iter().enumerate() {
        let step = resolve(raw, &scenario.captures).map_err(|e| format!("step {i}: {e}"))?;
        let kind = step["type"].as_str().unwrap_or_default().to_owned();
        let target = match step["agent"].as_str() {
            Some(name) => scenario
                .agents
                .get(name)
                .cloned()
                .ok_or(format!("unknown agent {name}"))?,
            None => agent.clone(),
        };
        let result = match kind.as_str() {
            "send" => scenario.send(&target, &step).await,
            "getSnapshotData" => scenario.get_snapshot(&target, &step).await,
            "abort" => scenario.abort(&target, &step).await,
            "waitUntilCompleted" => scenario.wait_until_completed(&target, &step).await,
            other => Err(format!("unknown step type {other:?}")),
        };
        result.map_err(|e| format!("step {i} ({kind}): {e}"))?;
    }
    Ok(None)
}

/// Runs every scenario of an agent-format document.
pub async fn run(doc: &Value, stores: &StoreFactory, report: &mut Report) {
    let known: HashSet<String> = doc["capabilities"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    for (index, test) in doc["tests"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let name = test["name"].as_str().unwrap_or("(unnamed)").to_owned();
        match run_one(index, &test, &known, stores).await {
            Ok(Some(why)) => report.skip(&name, &why),
            Ok(None) => report.record(&name, Ok(())),
            Err(e) => report.record(&name, Err(e)),
        }
    }
}
