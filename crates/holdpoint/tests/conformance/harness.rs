//! The harness agents, tools and programmable model that the conformance
//! scenarios name (docs/reference.md §14).

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint::agent::{Agent, Turn};
use holdpoint::session::{Artifact, SessionStore};
use holdpoint::tool::{DynamicTool, Tool, ToolContext, ToolError};
use holdpoint::{Error, ScriptedModel};
use serde_json::{Value, json};

/// Makes a fresh store for one scenario (shared by its server-managed agents).
pub type StoreFactory =
    Arc<dyn Fn(usize) -> futures::future::BoxFuture<'static, Result<Arc<dyn SessionStore>, String>> + Send + Sync>;

fn draft7_any() -> Value {
    json!({"$schema": "http://json-schema.org/draft-07/schema#"})
}

/// `testTool`: `{}` → "tool called".
pub fn test_tool() -> Arc<dyn Tool> {
    DynamicTool::new("testTool", "description", draft7_any(), |_ctx, _input| async move {
        Ok(json!("tool called"))
    })
    .with_output_schema(draft7_any())
    .into_tool()
}

/// `interruptTool`: `{query}` → `{answer}`; always pauses.
pub fn interrupt_tool() -> Arc<dyn Tool> {
    DynamicTool::new(
        "interruptTool",
        "An interrupt tool",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        |ctx: ToolContext, _input| async move { Err(ctx.interrupt(json!({}))) },
    )
    .with_output_schema(json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}))
    .into_tool()
}

/// `restartTool`: `{action}` → `{result}`; pauses unless restarted.
pub fn restart_tool() -> Arc<dyn Tool> {
    DynamicTool::new(
        "restartTool",
        "A tool that requires confirmation",
        json!({"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]}),
        |ctx: ToolContext, input: Value| async move {
            if ctx.is_resumed() {
                let action = input["action"].as_str().unwrap_or_default().to_owned();
                Ok(json!({"result": format!("done: {action}")}))
            } else {
                Err(ctx.interrupt(json!({"message": "confirm?"})))
            }
        },
    )
    .with_output_schema(json!({"type": "object", "properties": {"result": {"type": "string"}}}))
    .into_tool()
}

/// `flakyTool`: fails its first call with UNAVAILABLE, then "tool recovered".
pub fn flaky_tool() -> Arc<dyn Tool> {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    DynamicTool::new("flakyTool", "A flaky tool", draft7_any(), move |_ctx, _input| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            if n == 0 {
                Err(ToolError::Error("flaky tool failed".into()))
            } else {
                Ok(json!("tool recovered"))
            }
        }
    })
    .into_tool()
}

fn counter_turn(turn: Turn) -> futures::future::Ready<holdpoint::Result<()>> {
    let next = turn.custom().get("counter").and_then(Value::as_i64).unwrap_or(0) + 1;
    turn.update_custom(|_| json!({ "counter": next }));
    turn.reply_text("done");
    futures::future::ready(Ok(()))
}

/// Builds every harness agent over one programmable model.
pub fn agents(model: &ScriptedModel, store: Arc<dyn SessionStore>) -> holdpoint::Result<HashMap<String, Agent>> {
    let stores = || Arc::clone(&store);
    let model: Arc<dyn holdpoint::Model> = Arc::new(model.clone());
    let config = json!({"temperature": 1});
    let prompt = |name: &str| Agent::builder(name).model(Arc::clone(&model)).config(config.clone());
    let mut agents = HashMap::new();
    let mut add = |agent: Agent| {
        agents.insert(agent.name().to_owned(), agent);
    };
    add(prompt("promptAgent").build()?);
    add(prompt("promptAgentWithStore").store(stores()).build()?);
    add(prompt("promptAgentWithTools").tools([test_tool()]).build()?);
    add(prompt("promptAgentWithInterrupt")
        .tools([interrupt_tool()])
        .store(stores())
        .build()?);
    add(prompt("promptAgentWithRestartTool")
        .tools([restart_tool()])
        .store(stores())
        .build()?);
    add(prompt("promptAgentWithToolsAndStore")
        .tools([test_tool(), flaky_tool()])
        .store(stores())
        .build()?);

    add(Agent::custom("customAgentBlocking", |_turn: Turn| async move {
        futures::future::pending::<()>().await;
        Ok(())
    })
    .store(stores())
    .build()?);
    // Records each turn with an "ack" reply; the turn whose message is
    // "block" waits until it is cancelled (an abort drops it).
    add(Agent::custom("customAgentAbortable", |turn: Turn| async move {
        let blocks = turn.input().message.as_ref().is_some_and(|m| m.text() == "block");
        if blocks {
            futures::future::pending::<()>().await;
        }
        turn.reply_text("ack");
        Ok(())
    })
    .store(stores())
    .build()?);
    add(Agent::custom("customAgentFailing", |_turn: Turn| async move {
        Err(Error::Internal("intentional failure".into()))
    })
    .store(stores())
    .build()?);
    add(Agent::custom("customAgentWithArtifacts", |turn: Turn| async move {
        turn.add_artifact(Artifact::text("doc1", "v1"));
        turn.add_artifact(Artifact::text("doc1", "v2"));
        turn.add_artifact(Artifact::text("doc2", "other"));
        turn.reply_text("done");
        Ok(())
    })
    .build()?);
    add(Agent::custom("customAgentWithCustomState", counter_turn).build()?);
    add(
        Agent::custom("customAgentWithMultiCustomState", |turn: Turn| async move {
            turn.update_custom(|_| json!({"counter": 1, "status": "working"}));
            turn.update_custom(|prev| {
                let mut next = prev.clone();
                next["counter"] = json!(2);
                next
            });
            turn.update_custom(|prev| {
                let mut next = prev.clone();
                next["status"] = json!("done");
                next
            });
            turn.reply_text("done");
            Ok(())
        })
        .build()?,
    );
    add(Agent::custom("customAgentWithArtifactsStore", |turn: Turn| async move {
        let n = turn.artifacts().len() + 1;
        turn.add_artifact(Artifact::text(format!("doc{n}"), format!("content{n}")));
        turn.reply_text("done");
        Ok(())
    })
    .store(stores())
    .build()?);
    add(Agent::custom("customAgentWithCustomStateStore", counter_turn)
        .store(stores())
        .build()?);
    Ok(agents)
}
