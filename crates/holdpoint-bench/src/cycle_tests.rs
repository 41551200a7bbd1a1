//! The bench's own cycles checked: a quorum cycle and an MCP cycle run
//! end to end on the memory store.

use std::sync::Arc;

use holdpoint::session::{AuditDecision, AuditQuery, InMemoryStore, SessionStore};

use crate::cycle::*;
use crate::drive::{Answerers, Driver};

fn store() -> Arc<dyn SessionStore> {
    Arc::new(InMemoryStore::new())
}

#[tokio::test]
async fn a_quorum_cycle_records_one_approval_then_resumes_on_the_second() {
    let (agent, tool) = setup_with_quorum(store()).unwrap();
    let driver = Driver::Answered(Answerers::new(agent.clone(), vec!["olga", "pete"], "Done: txn-123"));
    let paused = driver.pause().await.unwrap();
    let session = paused.session_id.clone();
    driver.approve(&tool, paused).await.unwrap();
    let trail = agent
        .decisions()
        .audit(AuditQuery {
            session_id: Some(session),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let mut approvers: Vec<(Option<String>, AuditDecision)> =
        trail.iter().map(|r| (r.actor.clone(), r.decision)).collect();
    approvers.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        approvers,
        [
            (Some("olga".into()), AuditDecision::Approve),
            (Some("pete".into()), AuditDecision::Approve)
        ]
    );

    // One approver is short of the quorum: the cycle's check fails.
    let short = Driver::Answered(Answerers::new(agent, vec!["olga"], "Done: txn-123"));
    let paused = short.pause().await.unwrap();
    let err = short.approve(&tool, paused).await.unwrap_err();
    assert!(err.to_string().contains("the last approval resumes"), "{err}");
}

#[tokio::test]
async fn an_mcp_cycle_holds_the_echo_and_reports_it_after_the_approval() {
    let path = std::env::var("HOLDPOINT_MCP_EVERYTHING").unwrap_or_else(|_| EVERYTHING_JS.into());
    if !std::path::Path::new(&path).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "@modelcontextprotocol/server-everything is not installed at {path}"
        );
        eprintln!("skipped: @modelcontextprotocol/server-everything is not installed at {path}");
        return;
    }
    let (agent, _server) = setup_mcp(store(), &path).await.unwrap();
    let driver = Driver::Answered(Answerers::new(agent, vec!["olga"], format!("Done: Echo: {ECHOED}")));
    let tool = transfer_tool().unwrap();
    for _ in 0..2 {
        let paused = driver.pause().await.unwrap();
        assert_eq!(paused.part.as_tool_request().unwrap().name, "everything_echo");
        assert_eq!(paused.part.interrupted_by(), Some(holdpoint::approval::RULE_GATE));
        driver.approve(&tool, paused).await.unwrap();
    }
}
