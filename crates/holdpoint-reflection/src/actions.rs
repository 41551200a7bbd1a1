//! What the reflection API lists and runs: the agents with their companion
//! actions, their tools and their models, under Genkit's action keys
//! (`/agent/{name}`, `/agent-snapshot/{name}`, `/agent-abort/{name}`,
//! `/tool/{name}`, `/model/{name}`) and with Genkit's metadata
//! (docs/reference.md §18).
//!
//! Tools and models are found through the agents. Genkit's registry holds
//! one action per key, so when two agents have a tool (or a model) of the
//! same name, the one of the first agent by name is the one listed and run.

use std::sync::Arc;

use holdpoint::agent::Agent;
use holdpoint::model::Model;
use holdpoint::tool::Tool;
use serde_json::{Map, Value, json};

use super::Shared;

/// What an action key names.
#[derive(Clone)]
pub(crate) enum Target {
    /// A turn of an agent (`/agent/{name}`).
    Run(Agent),
    /// Reading a snapshot (`/agent-snapshot/{name}`).
    Snapshot(Agent),
    /// Aborting a snapshot (`/agent-abort/{name}`).
    Abort(Agent),
    /// Calling a tool once (`/tool/{name}`), through the approval gate of
    /// the agent it was found in (that agent has a tool of this name).
    Tool(Agent, Arc<dyn Tool>),
    /// Calling a model once (`/model/{name}`).
    Model(Arc<dyn Model>),
}

impl Target {
    /// The action's name and Genkit action type (`genkit:metadata:subtype`).
    pub(crate) fn name_and_type(&self) -> (String, &'static str) {
        match self {
            Target::Run(a) => (a.name().to_owned(), "agent"),
            Target::Snapshot(a) => (a.name().to_owned(), "agent-snapshot"),
            Target::Abort(a) => (a.name().to_owned(), "agent-abort"),
            Target::Tool(_, t) => (t.name().to_owned(), "tool"),
            Target::Model(m) => (m.name().to_owned(), "model"),
        }
    }
}

/// The tool named `name`, from the first agent (by name) that has one,
/// with that agent (whose approval gate a run goes through).
fn find_tool(s: &Shared, name: &str) -> Option<(Agent, Arc<dyn Tool>)> {
    s.agents.values().find_map(|a| {
        a.tools()
            .iter()
            .find(|t| t.name() == name)
            .map(|t| (a.clone(), Arc::clone(t)))
    })
}

/// The model named `name`, from the first agent (by name) that uses one.
fn find_model(s: &Shared, name: &str) -> Option<Arc<dyn Model>> {
    s.agents
        .values()
        .filter_map(Agent::model)
        .find(|m| m.name() == name)
        .cloned()
}

/// What `key` names, if anything. Model names may hold `/`
/// (`googleai/gemini-flash-latest`): everything after the type is the name.
pub(crate) fn target(s: &Shared, key: &str) -> Option<Target> {
    let (kind, name) = key.strip_prefix('/')?.split_once('/')?;
    match kind {
        "tool" => return find_tool(s, name).map(|(agent, tool)| Target::Tool(agent, tool)),
        "model" => return find_model(s, name).map(Target::Model),
        _ => {}
    }
    let agent = s.agents.get(name)?.clone();
    match kind {
        "agent" => Some(Target::Run(agent)),
        "agent-snapshot" if agent.is_server_managed() => Some(Target::Snapshot(agent)),
        "agent-abort" if agent.is_server_managed() => Some(Target::Abort(agent)),
        _ => None,
    }
}

/// Every action, by key, as `GET /api/actions` (and v2's `listActions`)
/// answers.
pub(crate) fn list(s: &Shared) -> Map<String, Value> {
    let mut all = Map::new();
    for agent in s.agents.values() {
        for (key, action) in agent_actions(agent) {
            all.insert(key, action);
        }
    }
    for agent in s.agents.values() {
        for tool in agent.tools() {
            let key = format!("/tool/{}", tool.name());
            if !all.contains_key(&key) {
                all.insert(key.clone(), tool_action(&key, tool.as_ref()));
            }
        }
        if let Some(model) = agent.model() {
            let key = format!("/model/{}", model.name());
            if !all.contains_key(&key) {
                all.insert(key.clone(), model_action(&key, model.name()));
            }
        }
    }
    all
}

/// Genkit's schemas of the agent wire, enough for the Dev UI's forms.
fn agent_schemas() -> (Value, Value, Value) {
    let input = json!({"type": "object", "properties": {
        "message": {"type": "object"},
        "resume": {"type": "object", "properties": {
            "respond": {"type": "array"}, "restart": {"type": "array"}}},
        "detach": {"type": "boolean"}}, "additionalProperties": false});
    let output = json!({"type": "object", "properties": {
        "sessionId": {"type": "string"}, "snapshotId": {"type": "string"},
        "state": {"type": "object"}, "message": {"type": "object"},
        "artifacts": {"type": "array"}, "finishReason": {"type": "string"},
        "error": {"type": "object"}}});
    let init = json!({"type": "object", "properties": {
        "snapshotId": {"type": "string"}, "sessionId": {"type": "string"},
        "state": {"type": "object"}}, "additionalProperties": false});
    (input, output, init)
}

fn agent_actions(agent: &Agent) -> Vec<(String, Value)> {
    let name = agent.name();
    let (input, output, init) = agent_schemas();
    let server = agent.is_server_managed();
    let mut main = json!({
        "key": format!("/agent/{name}"),
        "name": name,
        "inputSchema": input,
        "outputSchema": output,
        "metadata": {
            "type": "agent",
            "bidi": true,
            "initSchema": init,
            "agent": {
                "stateManagement": if server { "server" } else { "client" },
                "abortable": server,
            },
        },
    });
    // Absent rather than null: the CLI's schema takes a string or nothing.
    if let Some(description) = agent.description() {
        main["description"] = json!(description);
    }
    let mut out = vec![(format!("/agent/{name}"), main)];
    // Only server-managed agents have snapshots to read or abort.
    if server {
        let snapshot = json!({
            "key": format!("/agent-snapshot/{name}"),
            "name": name,
            "description": format!("Gets snapshot data for {name} by snapshotId or sessionId"),
            "inputSchema": {"type": "object", "properties": {
                "snapshotId": {"type": "string"}, "sessionId": {"type": "string"}}},
            "metadata": {"type": "agent-snapshot"},
        });
        let abort = json!({
            "key": format!("/agent-abort/{name}"),
            "name": name,
            "description": format!("Aborts {name} agent by snapshotId. Returns the snapshot id and its status before the abort."),
            "inputSchema": {"type": "object", "properties": {"snapshotId": {"type": "string"}},
                "required": ["snapshotId"]},
            "metadata": {"type": "agent-abort"},
        });
        out.push((format!("/agent-snapshot/{name}"), snapshot));
        out.push((format!("/agent-abort/{name}"), abort));
    }
    out
}

/// A tool as Genkit's `defineTool` registers it: its schemas, and its own
/// metadata with `type: "tool"`.
fn tool_action(key: &str, tool: &dyn Tool) -> Value {
    let def = tool.definition();
    let mut metadata = def.metadata.clone().unwrap_or_default();
    metadata.insert("type".into(), json!("tool"));
    let mut action = json!({
        "key": key,
        "name": def.name,
        "description": def.description,
        "metadata": metadata,
    });
    if let Some(schema) = &def.input_schema {
        action["inputSchema"] = schema.clone();
    }
    if let Some(schema) = &def.output_schema {
        action["outputSchema"] = schema.clone();
    }
    action
}

/// A model as Genkit's `defineModel` registers it: `GenerateRequest` in,
/// `GenerateResponse` out, and `metadata.model` (its `ModelInfo`). The
/// `supports` flags are what every Holdpoint agent asks of its model:
/// multi-turn history, tool calls and a system message.
fn model_action(key: &str, name: &str) -> Value {
    let message = json!({"type": "object", "properties": {
        "role": {"type": "string", "enum": ["system", "user", "model", "tool"]},
        "content": {"type": "array", "items": {"type": "object"}},
        "metadata": {"type": "object"}}, "required": ["role", "content"]});
    let input = json!({"type": "object", "properties": {
        "messages": {"type": "array", "items": message},
        "config": {},
        "tools": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "description": {"type": "string"},
            "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            "required": ["name", "description"]}},
        "toolChoice": {"type": "string", "enum": ["auto", "required", "none"]},
        "output": {"type": "object"}}, "required": ["messages"]});
    let output = json!({"type": "object", "properties": {
        "message": message,
        "finishReason": {"type": "string",
            "enum": ["stop", "length", "blocked", "interrupted", "other", "unknown"]},
        "finishMessage": {"type": "string"},
        "latencyMs": {"type": "number"},
        "usage": {"type": "object"},
        "custom": {},
        "request": {"type": "object"}}});
    json!({
        "key": key,
        "name": name,
        "description": name,
        "inputSchema": input,
        "outputSchema": output,
        "metadata": {
            "model": {
                "label": name,
                "supports": {"multiturn": true, "tools": true, "systemRole": true},
            },
        },
    })
}
