//! A whole turn from a request body `{"data": AgentInput, "init":
//! AgentInit}`: decoded, then run on a client-managed agent (the client
//! holds the state and sends it back in `init.state`) and on a
//! server-managed one whose store holds that state as an interrupted
//! snapshot. No input makes a turn panic; a resume that ran is never
//! claimed twice (the second answer is ABORTED); pending listings and the
//! audit trail read back whatever was stored.
#![no_main]

use std::sync::Arc;

use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::session::{AuditQuery, InMemoryStore, JsonStateCodec, SnapshotQuery, StateCodec};
use holdpoint::{FinishReason, Status};
use holdpoint_fuzz::harness::{agent, run_checked, runtime, seed};
use holdpoint_fuzz::round_trip;
use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    data: AgentInput,
    #[serde(default)]
    init: Option<AgentInit>,
}

fuzz_target!(|data: &[u8]| {
    let Some(envelope) = round_trip::<Envelope>(data) else {
        return;
    };
    let approval = data.len() % 2 == 1;
    let input = envelope.data;
    let init = envelope.init.unwrap_or_default();
    runtime().block_on(async move {
        let client = agent(None, approval);
        run_checked(&client, input.clone(), init.clone()).await;

        let store = InMemoryStore::new();
        let server = agent(Some(Arc::new(store.clone())), approval);
        run_checked(
            &server,
            input.clone(),
            AgentInit {
                state: None,
                ..init.clone()
            },
        )
        .await;

        let Some(state) = init.state.and_then(|s| JsonStateCodec.decode(s).ok()) else {
            return;
        };
        let Some(id) = seed(&store, state).await else { return };
        let first = run_checked(&server, input.clone(), AgentInit::snapshot(id.clone())).await;
        let _ = server.pending(SnapshotQuery::default()).await;
        let _ = server.audit(AuditQuery::default()).await;

        let resumed = input.resume.as_ref().is_some_and(|r| !r.is_empty()) && !input.is_detach();
        let ran = first.is_some_and(|o| o.finish_reason != FinishReason::Failed);
        if resumed && ran {
            let second = run_checked(&server, input, AgentInit::snapshot(id)).await;
            let status = second.and_then(|o| o.error).map(|e| e.status);
            assert_eq!(status, Some(Status::Aborted), "a resume ran twice");
        }
    });
});
