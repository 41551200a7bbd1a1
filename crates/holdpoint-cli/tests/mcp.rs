//! `holdpoint mcp list`, and an MCP server's question (elicitation)
//! answered with `holdpoint answer` / `holdpoint deny` over HTTP, against the
//! reference server `@modelcontextprotocol/server-everything` (see
//! crates/holdpoint-mcp/tests/servers.rs for where it is looked for).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use holdpoint::agent::Agent;
use holdpoint::{Role, ScriptedModel, ScriptedTurn};
use holdpoint_mcp::{McpServer, ServerConfig};
use serde_json::{Value, json};

const EVERYTHING_DEFAULT: &str =
    "/var/tmp/holdpoint-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

fn everything() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var("HOLDPOINT_MCP_EVERYTHING").unwrap_or_else(|_| EVERYTHING_DEFAULT.into()));
    if path.exists() {
        return Some(path);
    }
    let hint = "npm install --prefix /var/tmp/holdpoint-npm @modelcontextprotocol/server-everything, or set HOLDPOINT_MCP_EVERYTHING";
    if std::env::var_os("CI").is_some() {
        panic!("@modelcontextprotocol/server-everything is not installed ({hint})");
    }
    eprintln!("skipped: @modelcontextprotocol/server-everything is not installed ({hint})");
    None
}

fn holdpoint(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(args)
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_SERVER")
        .env_remove("HOLDPOINT_API_KEY")
        .env_remove("HOLDPOINT_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mcp_list_shows_each_servers_status_and_tools() {
    let Some(bin) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("holdpoint.toml");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[mcp.servers]]\nname = \"everything\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n[[mcp.servers]]\nname = \"broken\"\ncommand = \"false\"\nmax_restarts = 0\n",
        bin.display().to_string()
    );
    std::fs::write(&file, config).unwrap();
    let path = file.to_string_lossy().into_owned();

    let (ok, out, err) = holdpoint(&["mcp", "list", "--config", &path, "--json"]);
    assert!(ok, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list[0]["name"], "everything");
    assert_eq!(list[0]["status"], "connected", "{list}");
    assert_eq!(list[0]["transport"], "stdio");
    assert!(
        list[0]["tools"].as_array().unwrap().contains(&json!("everything_echo")),
        "{list}"
    );
    assert_eq!(list[1]["name"], "broken");
    assert_eq!(list[1]["status"], "failed", "{list}");

    let (ok, table, err) = holdpoint(&["mcp", "list", "--config", &path]);
    assert!(ok, "{err}");
    assert!(
        table.starts_with("SERVER") && table.contains("everything_echo") && table.contains("failed"),
        "{table}"
    );

    std::fs::write(&file, "[[mcp.servers]]\nname = \"x\"\n").unwrap();
    let (ok, _, err) = holdpoint(&["mcp", "list", "--config", &path]);
    assert!(!ok && err.contains("`command`"), "{err}");

    // The file is read as `serve --config` reads it: a mistake outside
    // `[[mcp.servers]]` is refused too, by file, line and key.
    std::fs::write(&file, "[server]\naddr = \"127.0.0.1:0\"\n").unwrap();
    let (ok, _, err) = holdpoint(&["mcp", "list", "--config", &path]);
    assert!(
        !ok && err.contains(&format!("{path}:2:1: `server.addr`: unknown key")),
        "{err}"
    );
    // `--config` is global: before the command too; without it, one line.
    std::fs::write(&file, "").unwrap();
    let (ok, out, err) = holdpoint(&["--config", &path, "mcp", "list", "--json"]);
    assert!(ok && out.trim() == "[]", "{out}{err}");
    let (ok, _, err) = holdpoint(&["mcp", "list"]);
    assert!(!ok && err.contains("--config FILE"), "{err}");
}

fn last_tool_output(model: &ScriptedModel) -> Value {
    let requests = model.requests();
    requests
        .last()
        .unwrap()
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.content.iter())
        .find_map(|p| p.as_tool_response().and_then(|r| r.output.clone()))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_is_answered_with_holdpoint_answer_and_deny_over_http() {
    let Some(bin) = everything() else { return };
    let mcp = McpServer::connect(ServerConfig::stdio(
        "everything",
        "node",
        [bin.to_string_lossy().into_owned(), "stdio".into()],
    ))
    .await
    .unwrap();
    let mut changed = mcp.tools_changed();
    for _ in 0..50 {
        if mcp.tool_names().iter().any(|t| t == "trigger-elicitation-request") {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), changed.changed()).await;
    }
    let model = ScriptedModel::new("m");
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let agent = Agent::builder("asker")
        .model(Arc::new(model.clone()))
        .tools(mcp.tools())
        .store(store)
        .build()
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .api_keys(holdpoint_server::auth::ApiKeys::new().key("k-operator-0123456789", "ops"))
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let key = ["--server", base.as_str(), "--api-key", "k-operator-0123456789"];

    let cases: [(&[&str], &str); 3] = [
        (
            &["answer", "--action", "accept", "--content", r#"{"name": "Ada"}"#],
            "Name: Ada",
        ),
        (&["deny", "--reason", "no"], "declined"),
        (&["answer", "--action", "cancel"], "cancelled"),
    ];
    for (command, expect) in cases {
        model.push(ScriptedTurn::tool_call(
            "everything_trigger-elicitation-request",
            json!({}),
        ));
        let turn: Value = reqwest::Client::new()
            .post(format!("{base}/agents/asker"))
            .header("X-API-Key", "k-operator-0123456789")
            .json(&json!({"data": {"message": {"role": "user", "content": [{"text": "ask me"}]}}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
        let mut args: Vec<&str> = key.to_vec();
        args.extend(["pending", "--json"]);
        let (ok, out, err) = tokio::task::block_in_place(|| holdpoint(&args));
        assert!(ok, "{err}");
        let pending: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(pending.as_array().unwrap().len(), 1, "{pending}");
        assert_eq!(pending[0]["interrupt"]["mcp"]["type"], "elicitation");
        let (snapshot, reference) = (
            pending[0]["snapshotId"].as_str().unwrap().to_owned(),
            pending[0]["ref"].as_str().unwrap().to_owned(),
        );

        model.push(ScriptedTurn::text("ok"));
        let mut args: Vec<&str> = key.to_vec();
        args.push(command[0]);
        args.extend([snapshot.as_str(), reference.as_str()]);
        args.extend(&command[1..]);
        let (ok, out, err) = tokio::task::block_in_place(|| holdpoint(&args));
        assert!(ok && out.contains("ended: stop"), "{command:?}: {out} {err}");
        let output = last_tool_output(&model);
        assert!(
            output.as_str().unwrap_or_default().contains(expect),
            "{expect}: {output}"
        );
    }
}
