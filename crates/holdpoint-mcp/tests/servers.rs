//! Against real MCP servers started by the tests: the reference server
//! `@modelcontextprotocol/server-everything` (npm) over stdio and over
//! Streamable HTTP, and a small server written with the official Python
//! SDK (`tests/data/stateless_server.py`) for the stateless
//! `input_required` flow.
//!
//! Where the servers are: `HOLDPOINT_MCP_EVERYTHING` (the package's
//! `dist/index.js`, default under `/var/tmp/holdpoint-npm`, as
//! `.ci/run` installs it) and `HOLDPOINT_MCP_PYTHON` (a Python with `mcp`
//! installed, default `/var/tmp/holdpoint-py/bin/python`). A test whose
//! server is missing is skipped with a message, and fails when `CI` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::session::{InMemoryStore, SessionStore};
use holdpoint::tool::{ToolCall, ToolContext, ToolOutcome};
use holdpoint::{FinishReason, Part, Resume, Role, ScriptedModel, ScriptedTurn, Tool};
use holdpoint_mcp::{McpServer, ServerConfig};
use serde_json::{Value, json};

const EVERYTHING_DEFAULT: &str =
    "/var/tmp/holdpoint-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const PYTHON_DEFAULT: &str = "/var/tmp/holdpoint-py/bin/python";

fn missing(what: &str, hint: &str) -> Option<PathBuf> {
    if std::env::var_os("CI").is_some() {
        panic!("{what} is not installed ({hint}); CI must run these tests");
    }
    eprintln!("skipped: {what} is not installed ({hint})");
    None
}

fn everything() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var("HOLDPOINT_MCP_EVERYTHING").unwrap_or_else(|_| EVERYTHING_DEFAULT.into()));
    if path.exists() {
        Some(path)
    } else {
        missing(
            "@modelcontextprotocol/server-everything",
            "npm install --prefix /var/tmp/holdpoint-npm @modelcontextprotocol/server-everything, or set HOLDPOINT_MCP_EVERYTHING",
        )
    }
}

fn python() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var("HOLDPOINT_MCP_PYTHON").unwrap_or_else(|_| PYTHON_DEFAULT.into()));
    let ok = path.exists()
        && std::process::Command::new(&path)
            .args(["-c", "import mcp.server.mcpserver"])
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        Some(path)
    } else {
        missing(
            "a Python with the `mcp` package",
            "python3 -m venv /var/tmp/holdpoint-py && /var/tmp/holdpoint-py/bin/pip install mcp, or set HOLDPOINT_MCP_PYTHON",
        )
    }
}

fn stdio_config(bin: &std::path::Path) -> ServerConfig {
    ServerConfig::stdio(
        "everything",
        "node",
        [bin.to_string_lossy().into_owned(), "stdio".into()],
    )
}

/// Waits (bounded) until the server lists `tool`; the everything server
/// registers its capability-dependent tools after the handshake and says
/// so with `notifications/tools/list_changed`.
async fn wait_for_tool(server: &McpServer, tool: &str) {
    let mut changed = server.tools_changed();
    for _ in 0..50 {
        if server.tool_names().iter().any(|t| t == tool) {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), changed.changed()).await;
        let _ = server.refresh_tools().await;
    }
    panic!("{} never listed {tool}: {:?}", server.name(), server.tool_names());
}

fn tool(server: &McpServer, name: &str) -> Arc<dyn Tool> {
    server
        .tools()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// The output of the last tool response the model was sent.
fn last_tool_output(model: &ScriptedModel) -> Value {
    let requests = model.requests();
    let request = requests.last().expect("the model was called");
    request
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.content.iter())
        .find_map(|p| p.as_tool_response().and_then(|r| r.output.clone()))
        .expect("a tool response")
}

fn agent(model: &ScriptedModel, tools: Vec<Arc<dyn Tool>>, store: Arc<dyn SessionStore>) -> Agent {
    Agent::builder("mcp")
        .model(Arc::new(model.clone()))
        .tools(tools)
        .store(store)
        .build()
        .unwrap()
}

async fn answer(agent: &Agent, paused: &AgentOutput, resume: Value) -> AgentOutput {
    let parts = paused.interrupts();
    assert_eq!(parts.len(), 1, "one paused call in {paused:?}");
    let restart: Part = parts[0].restart(Some(resume)).unwrap();
    agent
        .run(
            AgentInput::resume(Resume::from_parts(vec![restart])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn stdio_tools_carry_server_tool_and_annotations() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    let echo = tool(&server, "everything_echo");
    let def = echo.definition();
    let mcp = &def.metadata.as_ref().unwrap()["mcp"];
    assert_eq!(mcp["server"], json!("everything"));
    assert_eq!(mcp["tool"], json!("echo"));
    assert_eq!(mcp["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(mcp["annotations"]["destructiveHint"], json!(false));
    assert_eq!(def.input_schema.as_ref().unwrap()["required"], json!(["message"]));
    let status = server.status().await;
    assert_eq!(status.status, "connected");
    assert_eq!(status.transport, "stdio");
    assert!(status.tools.contains(&"everything_echo".to_owned()), "{status:?}");
    assert!(status.pid.is_some());
}

#[tokio::test]
async fn echo_runs_through_an_agent_and_bad_arguments_never_reach_the_server() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::tool_call(
        "everything_echo",
        json!({"message": "hold the line"}),
    ));
    model.push(ScriptedTurn::text("done"));
    let a = agent(&model, server.tools(), Arc::new(InMemoryStore::new()));
    let out = a.run_text("echo it").await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert_eq!(last_tool_output(&model), json!("Echo: hold the line"));

    model.push(ScriptedTurn::tool_call("everything_echo", json!({"message": 5})));
    model.push(ScriptedTurn::text("done"));
    a.run_text("echo a number").await.unwrap();
    let failed = last_tool_output(&model);
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("/message"), "{failed}");
}

/// The everything server in Streamable HTTP mode on a free loopback port.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
}

impl HttpServer {
    async fn start(bin: &std::path::Path) -> HttpServer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = tokio::process::Command::new("node")
            .arg(bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return HttpServer {
                    child,
                    url: format!("http://127.0.0.1:{port}/mcp"),
                };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the everything server did not listen on port {port}");
    }
}

#[tokio::test]
async fn streamable_http_lists_calls_and_elicits() {
    let Some(bin) = everything() else { return };
    let mut http = HttpServer::start(&bin).await;
    let mut config = ServerConfig::http("web", http.url.clone());
    config.headers.insert("x-holdpoint-test".into(), "1".into());
    let server = McpServer::connect(config).await.unwrap();
    assert_eq!(server.status().await.transport, "http");
    let echo = tool(&server, "web_echo");
    let out = echo
        .call(ToolCall {
            input: json!({"message": "over http"}),
            context: ToolContext::new("web_echo"),
        })
        .await
        .unwrap();
    assert_eq!(out, ToolOutcome::output(json!("Echo: over http")));

    wait_for_tool(&server, "trigger-elicitation-request").await;
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::tool_call("web_trigger-elicitation-request", json!({})));
    let a = agent(&model, server.tools(), Arc::new(InMemoryStore::new()));
    let paused = a.run_text("ask me").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted, "{paused:?}");
    model.push(ScriptedTurn::text("thanks"));
    let done = answer(&a, &paused, json!({"action": "accept", "content": {"name": "Grace"}})).await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let output = last_tool_output(&model);
    assert!(output.as_str().unwrap_or_default().contains("Name: Grace"), "{output}");
    let _ = http.child.kill().await;
}

#[tokio::test]
async fn elicitation_is_a_hold_answered_by_accept_decline_and_cancel() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    wait_for_tool(&server, "trigger-elicitation-request").await;
    let model = ScriptedModel::new("m");
    let a = agent(&model, server.tools(), Arc::new(InMemoryStore::new()));
    let name = "everything_trigger-elicitation-request";

    for (resume, expect) in [
        (
            json!({"action": "accept", "content": {"name": "Ada", "integer": 7}}),
            "Name: Ada",
        ),
        (json!({"action": "decline"}), "declined"),
        (json!({"action": "cancel"}), "cancelled"),
    ] {
        model.push(ScriptedTurn::tool_call(name, json!({})));
        let paused = a.run_text("ask me").await.unwrap();
        assert_eq!(paused.finish_reason, FinishReason::Interrupted, "{paused:?}");
        let data = paused.interrupts()[0].interrupt_data().unwrap();
        assert_eq!(
            data["message"],
            json!("Please provide inputs for the following fields:")
        );
        assert_eq!(data["mcp"]["type"], json!("elicitation"));
        assert_eq!(data["mcp"]["mode"], json!("form"));
        assert_eq!(data["mcp"]["server"], json!("everything"));
        assert_eq!(data["mcp"]["requestedSchema"]["required"], json!(["name"]));
        assert_eq!(server.held_calls(), 1);

        model.push(ScriptedTurn::text("ok"));
        let done = answer(&a, &paused, resume).await;
        assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
        let output = last_tool_output(&model);
        assert!(
            output.as_str().unwrap_or_default().contains(expect),
            "{expect}: {output}"
        );
        assert_eq!(server.held_calls(), 0);
    }
}

#[tokio::test]
async fn content_that_breaks_the_requested_schema_asks_again() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    wait_for_tool(&server, "trigger-elicitation-request").await;
    let model = ScriptedModel::new("m");
    let a = agent(&model, server.tools(), Arc::new(InMemoryStore::new()));
    model.push(ScriptedTurn::tool_call(
        "everything_trigger-elicitation-request",
        json!({}),
    ));
    let paused = a.run_text("ask me").await.unwrap();
    // `integer` must be at most 100, and `name` is required.
    let again = answer(&a, &paused, json!({"action": "accept", "content": {"integer": 1000}})).await;
    assert_eq!(again.finish_reason, FinishReason::Interrupted, "{again:?}");
    let data = again.interrupts()[0].interrupt_data().unwrap();
    let error = data["error"].as_str().unwrap_or_default();
    assert!(error.contains("name") || error.contains("integer"), "{data:?}");
    assert_eq!(server.held_calls(), 1, "the question stays open");
    model.push(ScriptedTurn::text("ok"));
    let done = answer(&a, &again, json!({"action": "accept", "content": {"name": "Ada"}})).await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert!(
        last_tool_output(&model)
            .as_str()
            .unwrap_or_default()
            .contains("Name: Ada")
    );
}

#[tokio::test]
async fn a_held_call_whose_process_is_gone_is_in_doubt_and_never_rerun() {
    let Some(bin) = everything() else { return };
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let model = ScriptedModel::new("m");
    let paused = {
        let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
        wait_for_tool(&server, "trigger-elicitation-request").await;
        let a = agent(&model, server.tools(), Arc::clone(&store));
        model.push(ScriptedTurn::tool_call(
            "everything_trigger-elicitation-request",
            json!({}),
        ));
        let paused = a.run_text("ask me").await.unwrap();
        server.close().await;
        paused
    };
    // A new process: a new connection, no held calls.
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    wait_for_tool(&server, "trigger-elicitation-request").await;
    let a = agent(&model, server.tools(), store);
    model.push(ScriptedTurn::text("sorry"));
    let done = answer(&a, &paused, json!({"action": "accept", "content": {"name": "Ada"}})).await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let output = last_tool_output(&model);
    let error = output["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("no longer open") && error.contains("not run again"),
        "{output}"
    );
}

#[tokio::test]
async fn a_server_killed_mid_call_is_a_tool_failure_and_is_restarted() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    let first_pid = server.pid().await.unwrap();
    let long = tool(&server, "everything_trigger-long-running-operation");
    let call = tokio::spawn(async move {
        long.call(ToolCall {
            input: json!({"duration": 60, "steps": 60}),
            context: ToolContext::new("everything_trigger-long-running-operation"),
        })
        .await
    });
    for _ in 0..100 {
        if server.open_calls() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.open_calls(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", &first_pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Bounded: a hang fails the test instead of blocking it.
    let out = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call hung")
        .unwrap()
        .unwrap();
    let ToolOutcome::Failed(message) = out else {
        panic!("expected a tool failure, got {out:?}")
    };
    assert!(message.contains("closed the connection"), "{message}");
    assert_eq!(server.open_calls(), 0);

    // The next call starts the server again.
    let echo = tool(&server, "everything_echo");
    let out = echo
        .call(ToolCall {
            input: json!({"message": "back"}),
            context: ToolContext::new("everything_echo"),
        })
        .await
        .unwrap();
    assert_eq!(out, ToolOutcome::output(json!("Echo: back")));
    assert_ne!(server.pid().await, Some(first_pid));
    assert_eq!(server.status().await.restarts, 0, "a successful call resets the count");
}

#[tokio::test]
async fn restarts_are_bounded() {
    // `false` exits at once: every connection attempt fails.
    let mut config = ServerConfig::stdio("broken", "false", Vec::<String>::new());
    config.max_restarts = Some(2);
    let server = McpServer::new(config).unwrap();
    let mut errors = Vec::new();
    for _ in 0..4 {
        errors.push(server.reconnect().await.unwrap_err().to_string());
    }
    assert!(!errors[2].contains("gave up"), "{errors:?}");
    assert!(errors[3].contains("gave up after 2 restarts"), "{errors:?}");
    assert_eq!(server.status().await.status, "failed");
}

#[test]
fn configuration_is_checked() {
    let stdio = ServerConfig::stdio("s", "node", ["x"]);
    assert_eq!(stdio.transport().unwrap().kind(), "stdio");
    let mut both = stdio.clone();
    both.url = Some("http://127.0.0.1:1/mcp".into());
    assert!(both.transport().unwrap_err().to_string().contains("not both"));
    let mut headers = ServerConfig::stdio("s", "node", ["x"]);
    headers.headers.insert("x".into(), "y".into());
    assert!(headers.transport().is_err());
    assert!(ServerConfig::http("h", "ftp://x").transport().is_err());
    let mut auth = ServerConfig::http("h", "http://127.0.0.1:1/mcp");
    auth.headers.insert("Authorization".into(), "Bearer x".into());
    assert!(auth.transport().unwrap_err().to_string().contains("bearer_token"));
    let mut named = ServerConfig::http("my server", "http://127.0.0.1:1/mcp");
    assert_eq!(named.tool_name("get.thing"), "my_server_get_thing");
    named.tool_names = Some("mcp-{tool}".into());
    assert_eq!(named.tool_name("echo"), "mcp-echo");
    let parsed: ServerConfig =
        serde_json::from_value(json!({"name": "e", "command": "node", "args": ["a"], "agents": ["bank"]})).unwrap();
    assert!(parsed.serves("bank") && !parsed.serves("other"));
    assert!(serde_json::from_value::<ServerConfig>(json!({"name": "e", "comand": "node"})).is_err());
}

fn stateless_config(python: &std::path::Path, log: &std::path::Path) -> ServerConfig {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/stateless_server.py");
    let mut config = ServerConfig::stdio("stateless", python.to_string_lossy().into_owned(), [script]);
    config
        .env
        .insert("HOLDPOINT_MCP_LOG".into(), log.to_string_lossy().into_owned().into());
    config.env.insert(
        "HOLDPOINT_MCP_STATE_KEY".into(),
        "holdpoint-test-key-0123456789abcdef".into(),
    );
    config
}

#[tokio::test]
async fn stateless_input_required_resumes_after_both_restart() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bookings.log");
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let model = ScriptedModel::new("m");

    let paused = {
        let server = McpServer::connect(stateless_config(&python, &log)).await.unwrap();
        let a = agent(&model, server.tools(), Arc::clone(&store));
        model.push(ScriptedTurn::tool_call(
            "stateless_book_table",
            json!({"restaurant": "Noma"}),
        ));
        let paused = a.run_text("book it").await.unwrap();
        assert_eq!(paused.finish_reason, FinishReason::Interrupted, "{paused:?}");
        let data = paused.interrupts()[0].interrupt_data().unwrap();
        assert_eq!(data["mcp"]["type"], json!("inputRequired"));
        assert_eq!(data["message"], json!("How many people for Noma?"));
        assert!(data["mcp"]["requestState"].is_string(), "{data:?}");
        assert_eq!(
            data["mcp"]["inputRequests"]["party"]["method"],
            json!("elicitation/create")
        );
        server.close().await;
        paused
    };
    assert!(!log.exists(), "nothing was booked yet");

    // Both restart: a new server process, a new agent on the same store.
    let server = McpServer::connect(stateless_config(&python, &log)).await.unwrap();
    let a = agent(&model, server.tools(), store);
    // More than the schema's maximum: asked again, nothing sent.
    let again = answer(&a, &paused, json!({"action": "accept", "content": {"people": 40}})).await;
    assert_eq!(again.finish_reason, FinishReason::Interrupted, "{again:?}");
    let data = again.interrupts()[0].interrupt_data().unwrap();
    assert!(
        data["error"].as_str().unwrap_or_default().contains("people"),
        "{data:?}"
    );
    assert!(!log.exists());

    model.push(ScriptedTurn::text("booked"));
    let done = answer(
        &a,
        &again,
        json!({"responses": {"party": {"action": "accept", "content": {"people": 4}}}}),
    )
    .await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(last_tool_output(&model), json!({"restaurant": "Noma", "people": 4}));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "Noma:4\n", "booked once");
}

/// Counts how often the generate loop really calls the tool it wraps.
struct Counted {
    inner: Arc<dyn Tool>,
    runs: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait::async_trait]
impl Tool for Counted {
    fn definition(&self) -> &holdpoint::model::ToolDefinition {
        self.inner.definition()
    }
    async fn call(&self, call: ToolCall) -> holdpoint::Result<ToolOutcome> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.call(call).await
    }
    fn check_output(&self, output: &Value) -> holdpoint::Result<()> {
        self.inner.check_output(output)
    }
}

fn gated_agent(model: &ScriptedModel, tools: Vec<Arc<dyn Tool>>, allowed: Vec<String>) -> Agent {
    Agent::builder("gated")
        .model(Arc::new(model.clone()))
        .tools(tools)
        .middleware(holdpoint::middleware::ToolApproval::allow(allowed).into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

async fn decide(agent: &Agent, paused: &AgentOutput, approve: bool) -> AgentOutput {
    let hold = holdpoint::middleware::ToolApproval::interrupted(&paused.interrupts()[0]).expect("an approval hold");
    let part = if approve {
        hold.approve(Some("ok"))
    } else {
        hold.deny(Some("no"))
    }
    .unwrap();
    agent
        .run(
            AgentInput::resume(Resume::from_parts(vec![part])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn an_mcp_tool_held_by_the_gate_runs_once_when_approved_and_never_when_denied() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let echo: Arc<dyn Tool> = Arc::new(Counted {
        inner: tool(&server, "everything_echo"),
        runs: Arc::clone(&runs),
    });
    let model = ScriptedModel::new("m");
    let a = gated_agent(&model, vec![echo], Vec::new());

    model.push(ScriptedTurn::tool_call(
        "everything_echo",
        json!({"message": "approved"}),
    ));
    let paused = a.run_text("echo").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
    model.push(ScriptedTurn::text("done"));
    decide(&a, &paused, true).await;
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(last_tool_output(&model), json!("Echo: approved"));

    model.push(ScriptedTurn::tool_call("everything_echo", json!({"message": "denied"})));
    let paused = a.run_text("echo").await.unwrap();
    model.push(ScriptedTurn::text("done"));
    decide(&a, &paused, false).await;
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a denied call never runs"
    );
    assert!(
        last_tool_output(&model)["error"]
            .as_str()
            .unwrap_or_default()
            .contains("denied")
    );

    // The audit names the MCP server and its own name of the tool.
    let audit = a
        .decisions()
        .audit(holdpoint::session::AuditQuery::default())
        .await
        .unwrap();
    let mut decisions: Vec<&str> = audit.iter().map(|r| r.decision.as_str()).collect();
    decisions.sort_unstable();
    assert_eq!(decisions, ["approve", "deny"]);
    for r in &audit {
        assert_eq!(r.tool, "everything_echo");
        let origin = r.mcp.as_ref().expect("an MCP origin on the record");
        assert_eq!((origin.server.as_str(), origin.tool.as_str()), ("everything", "echo"));
    }
}

#[tokio::test]
async fn a_destructive_tool_is_held_by_its_annotation() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bookings.log");
    let server = McpServer::connect(stateless_config(&python, &log)).await.unwrap();
    let tools = server.tools();
    let cancel = tools.iter().find(|t| t.name() == "stateless_cancel_booking").unwrap();
    assert!(holdpoint_mcp::may_destroy(cancel.definition()));
    assert_eq!(holdpoint_mcp::hint(cancel.definition(), "destructiveHint"), Some(true));
    // Hold every tool that may destroy: allow the others.
    let allowed: Vec<String> = tools
        .iter()
        .filter(|t| !holdpoint_mcp::may_destroy(t.definition()))
        .map(|t| t.name().to_owned())
        .collect();
    assert!(!allowed.contains(&"stateless_cancel_booking".to_owned()));
    let model = ScriptedModel::new("m");
    let a = gated_agent(&model, tools, allowed);

    model.push(ScriptedTurn::tool_call(
        "stateless_cancel_booking",
        json!({"restaurant": "Noma"}),
    ));
    let paused = a.run_text("cancel").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    model.push(ScriptedTurn::text("kept"));
    decide(&a, &paused, false).await;
    assert!(!log.exists(), "denied: never ran");

    model.push(ScriptedTurn::tool_call(
        "stateless_cancel_booking",
        json!({"restaurant": "Noma"}),
    ));
    let paused = a.run_text("cancel").await.unwrap();
    model.push(ScriptedTurn::text("cancelled"));
    decide(&a, &paused, true).await;
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "cancelled:Noma\n",
        "approved: ran once"
    );
    assert_eq!(last_tool_output(&model), json!({"result": "Cancelled Noma"}));
}

#[tokio::test]
async fn a_url_mode_question_is_answered_without_content() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    wait_for_tool(&server, "trigger-url-elicitation").await;
    let model = ScriptedModel::new("m");
    let a = agent(&model, server.tools(), Arc::new(InMemoryStore::new()));
    model.push(ScriptedTurn::tool_call(
        "everything_trigger-url-elicitation",
        json!({"url": "https://example.com/connect", "message": "Sign in on the page"}),
    ));
    let paused = a.run_text("connect").await.unwrap();
    let data = paused.interrupts()[0].interrupt_data().unwrap();
    assert_eq!(data["message"], json!("Sign in on the page"));
    assert_eq!(data["mcp"]["mode"], json!("url"));
    assert_eq!(data["mcp"]["url"], json!("https://example.com/connect"));
    assert!(data["mcp"].get("requestedSchema").is_none(), "{data:?}");
    // A secret typed into Holdpoint is refused: the question is asked again.
    let again = answer(
        &a,
        &paused,
        json!({"action": "accept", "content": {"password": "hunter2"}}),
    )
    .await;
    assert_eq!(again.finish_reason, FinishReason::Interrupted);
    let data = again.interrupts()[0].interrupt_data().unwrap();
    assert!(
        data["error"].as_str().unwrap_or_default().contains("no content"),
        "{data:?}"
    );
    // `holdpoint approve`'s answer: accept, nothing else.
    model.push(ScriptedTurn::text("connected"));
    let done = answer(&a, &again, json!({"approved": true})).await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let output = last_tool_output(&model);
    assert!(
        output
            .as_str()
            .unwrap_or_default()
            .contains("completed the URL elicitation"),
        "{output}"
    );
}

#[tokio::test]
async fn a_question_while_several_calls_are_open_is_never_routed_to_a_guess() {
    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    wait_for_tool(&server, "trigger-elicitation-request").await;
    let long = tool(&server, "everything_trigger-long-running-operation");
    let running = tokio::spawn(async move {
        long.call(ToolCall {
            input: json!({"duration": 6, "steps": 3}),
            context: ToolContext::new("everything_trigger-long-running-operation"),
        })
        .await
    });
    for _ in 0..100 {
        if server.open_calls() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another call asks a question while the first is still open: nobody can
    // tell whose it is, so the server is told cancel and nothing is held.
    let ask = tool(&server, "everything_trigger-elicitation-request");
    let out = ask
        .call(ToolCall {
            input: json!({}),
            context: ToolContext::new("everything_trigger-elicitation-request"),
        })
        .await
        .unwrap();
    let ToolOutcome::Output { output, .. } = out else {
        panic!("expected the server's answer, got {out:?}")
    };
    assert!(output.as_str().unwrap_or_default().contains("cancelled"), "{output}");
    assert_eq!(server.held_calls(), 0);
    let done = running.await.unwrap().unwrap();
    assert!(matches!(done, ToolOutcome::Output { .. }), "{done:?}");
}

/// A grant on an MCP tool (docs/reference.md §10.9): an approver's grant to
/// alice lets alice's next call of the server's tool run without a hold,
/// audited with the grant and the MCP origin; bob's call of the same tool is
/// still held, and a grant narrowed by a condition holds what it does not match.
#[tokio::test]
async fn a_grant_on_an_mcp_tool_covers_its_principal_and_nobody_else() {
    use holdpoint::agent::{Answer, Answered, RunOptions};
    use holdpoint::approval::{GrantRequest, GrantScope, Policy, RuleSpec};
    use holdpoint::session::AuditQuery;
    use std::sync::atomic::Ordering::SeqCst;

    let Some(bin) = everything() else { return };
    let server = McpServer::connect(stdio_config(&bin)).await.unwrap();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let echo: Arc<dyn Tool> = Arc::new(Counted {
        inner: tool(&server, "everything_echo"),
        runs: Arc::clone(&runs),
    });
    let model = ScriptedModel::from_fn("scripted/echo", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        Some(ScriptedTurn::tool_call(
            "everything_echo",
            json!({"message": last.text()}),
        ))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("echoes".into()),
        tool: Some("everything_echo".into()),
        approvers: vec!["ops".into()],
        ..RuleSpec::default()
    }])
    .unwrap();
    let agent = Agent::builder("mcp-granted")
        .model(Arc::new(model))
        .tools([echo])
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let ask = |owner: &'static str, text: &'static str| {
        let agent = agent.clone();
        async move {
            agent
                .run_with(
                    AgentInput::text(text),
                    RunOptions::new(AgentInit::new()).principal(owner),
                )
                .await
                .unwrap()
        }
    };
    let olga = {
        let mut m = serde_json::Map::new();
        m.insert("principal".into(), json!("olga"));
        m.insert("roles".into(), json!(["ops"]));
        m
    };

    let first = ask("alice", "hello").await;
    assert_eq!(first.finish_reason, FinishReason::Interrupted, "the rule holds it");
    let grant = GrantRequest {
        scope: GrantScope::Principal,
        when: Some("input.message.startsWith('hel')".into()),
        ttl: None,
        uses: None,
    };
    let answered = agent
        .decisions()
        .answer(Answer::approve(first.snapshot_id.clone().unwrap()).grant(grant), olga)
        .await
        .unwrap();
    let Answered::Granted { grant, .. } = answered else {
        panic!("an approval with a grant grants")
    };
    assert_eq!(runs.load(SeqCst), 1);

    let again = ask("alice", "help").await;
    assert_eq!(again.finish_reason, FinishReason::Stop, "the grant stands in for alice");
    assert_eq!(runs.load(SeqCst), 2);
    let other = ask("alice", "bye").await;
    assert_eq!(
        other.finish_reason,
        FinishReason::Interrupted,
        "outside the grant's condition"
    );
    let bob = ask("bob", "hello").await;
    assert_eq!(bob.finish_reason, FinishReason::Interrupted, "not bob's grant");
    assert_eq!(runs.load(SeqCst), 2, "nothing ran without a decision");

    let trail = agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let used: Vec<_> = trail.iter().filter(|r| r.grant.is_some()).collect();
    assert_eq!(used.len(), 1, "{trail:#?}");
    assert_eq!(used[0].grant.as_ref().map(|g| g.id.as_str()), Some(grant.id.as_str()));
    assert_eq!(used[0].principal.as_deref(), Some("alice"));
    let origin = used[0].mcp.as_ref().expect("the MCP origin on the grant's record");
    assert_eq!((origin.server.as_str(), origin.tool.as_str()), ("everything", "echo"));
}
