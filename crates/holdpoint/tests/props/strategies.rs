//! Strategies for the wire types. Optional JSON fields (`input`, `output`,
//! `state`, …) are generated as absent or non-null: on the wire `null` and
//! absence are the same, and they decode as absent.

use chrono::{DateTime, TimeZone, Utc};
use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::message::{Media, Metadata, PartKind, Resource, ToolRequest, ToolResponse, metadata};
use holdpoint::session::{Artifact, SessionState, Snapshot, SnapshotStatus};
use holdpoint::{ErrorBody, FinishReason, Message, Part, Resume, Role, Status};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Keys that are not interrupt markers (those carry rules of their own).
fn plain_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}",
        Just("pendingOutput".to_owned()),
        Just("replacedInput".to_owned()),
        Just("interruptedBy".to_owned()),
        Just("expiresAt".to_owned()),
        any::<String>(),
    ]
    .prop_filter("not a marker key", |k| {
        ![
            metadata::INTERRUPT,
            metadata::RESUMED,
            metadata::INTERRUPT_RESPONSE,
            metadata::RESOLVED_INTERRUPT,
        ]
        .contains(&k.as_str())
    })
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        (-1.0e6f64..1.0e6).prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
    ]
}

/// Any JSON value, a few levels deep.
pub fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((plain_key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn non_null_json() -> impl Strategy<Value = Value> {
    json().prop_filter("not null", |v| !v.is_null())
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec((plain_key(), json()), 0..4).prop_map(|kv| kv.into_iter().collect())
}

/// A marker value: absent, null, false, true or an object.
fn marker() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => Just(Some(Value::Bool(false))),
        1 => Just(Some(Value::Bool(true))),
        2 => object().prop_map(|m| Some(Value::Object(m))),
    ]
}

/// Part metadata that the decoder accepts.
pub fn metadata() -> impl Strategy<Value = Metadata> {
    (object(), marker(), marker(), marker(), marker()).prop_map(|(mut m, a, b, c, d)| {
        for (key, value) in [
            (metadata::INTERRUPT, a),
            (metadata::RESUMED, b),
            (metadata::INTERRUPT_RESPONSE, c),
            (metadata::RESOLVED_INTERRUPT, d),
        ] {
            if let Some(v) = value {
                m.insert(key.to_owned(), v);
            }
        }
        m
    })
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z][a-zA-Z0-9_]{0,8}", any::<String>()]
}

fn leaf_kind() -> impl Strategy<Value = PartKind> {
    prop_oneof![
        any::<String>().prop_map(PartKind::Text),
        any::<String>().prop_map(PartKind::Reasoning),
        json().prop_map(PartKind::Data),
        json().prop_map(PartKind::Custom),
        (proptest::option::of(any::<String>()), any::<String>())
            .prop_map(|(content_type, url)| PartKind::Media(Media { content_type, url })),
        any::<String>().prop_map(|uri| PartKind::Resource(Resource { uri })),
        (
            name(),
            proptest::option::of(any::<String>()),
            proptest::option::of(non_null_json())
        )
            .prop_map(|(name, reference, input)| PartKind::ToolRequest(ToolRequest { name, reference, input })),
    ]
}

fn leaf_part() -> impl Strategy<Value = Part> {
    (leaf_kind(), proptest::option::of(metadata())).prop_map(|(kind, metadata)| Part { kind, metadata })
}

/// Any part (a tool response may hold parts of its own).
pub fn part() -> impl Strategy<Value = Part> {
    let response = (
        name(),
        proptest::option::of(any::<String>()),
        proptest::option::of(non_null_json()),
        proptest::option::of(proptest::collection::vec(leaf_part(), 0..3)),
        proptest::option::of(metadata()),
    )
        .prop_map(|(name, reference, output, content, metadata)| Part {
            kind: PartKind::ToolResponse(ToolResponse {
                name,
                reference,
                output,
                content,
            }),
            metadata,
        });
    prop_oneof![4 => leaf_part(), 1 => response]
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::User),
        Just(Role::Model),
        Just(Role::Tool),
        Just(Role::System)
    ]
}

/// Any message.
pub fn message() -> impl Strategy<Value = Message> {
    (
        role(),
        proptest::collection::vec(part(), 0..4),
        proptest::option::of(object()),
    )
        .prop_map(|(role, content, metadata)| Message {
            role,
            content,
            metadata,
        })
}

/// Any resume (directive parts of any kind; validation is not decoding).
pub fn resume() -> impl Strategy<Value = Resume> {
    (
        proptest::collection::vec(part(), 0..3),
        proptest::collection::vec(part(), 0..3),
    )
        .prop_map(|(restart, respond)| Resume {
            metadata: None,
            restart,
            respond,
        })
}

/// Any agent input.
pub fn agent_input() -> impl Strategy<Value = AgentInput> {
    (
        proptest::option::of(message()),
        proptest::option::of(resume()),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(message, resume, detach)| AgentInput {
            message,
            resume,
            detach,
        })
}

/// Any agent init.
pub fn agent_init() -> impl Strategy<Value = AgentInit> {
    (
        proptest::option::of(any::<String>()),
        proptest::option::of(any::<String>()),
        proptest::option::of(non_null_json()),
    )
        .prop_map(|(session_id, snapshot_id, state)| AgentInit {
            session_id,
            snapshot_id,
            state,
        })
}

fn artifact() -> impl Strategy<Value = Artifact> {
    (
        proptest::option::of(any::<String>()),
        proptest::collection::vec(part(), 0..3),
        proptest::option::of(object()),
    )
        .prop_map(|(name, parts, metadata)| Artifact { name, parts, metadata })
}

/// Any session state (the client-held blob).
pub fn session_state() -> impl Strategy<Value = SessionState> {
    (
        any::<String>(),
        proptest::collection::vec(message(), 0..4),
        proptest::collection::vec(artifact(), 0..3),
        json(),
    )
        .prop_map(|(session_id, messages, artifacts, custom)| SessionState {
            session_id,
            messages,
            artifacts,
            custom,
        })
}

/// A time anywhere chrono can represent, to the nanosecond.
pub fn time() -> impl Strategy<Value = DateTime<Utc>> {
    let min = DateTime::<Utc>::MIN_UTC.timestamp();
    let max = DateTime::<Utc>::MAX_UTC.timestamp();
    prop_oneof![
        (min..=max, 0u32..1_000_000_000),
        (0i64..4_102_444_800, 0u32..1_000_000_000),
    ]
    .prop_filter_map("representable", |(s, n)| Utc.timestamp_opt(s, n).single())
}

fn snapshot_status() -> impl Strategy<Value = SnapshotStatus> {
    prop_oneof![
        Just(SnapshotStatus::Pending),
        Just(SnapshotStatus::Aborting),
        Just(SnapshotStatus::Completed),
        Just(SnapshotStatus::Failed),
        Just(SnapshotStatus::Aborted),
        Just(SnapshotStatus::Expired),
    ]
}

fn finish_reason() -> impl Strategy<Value = FinishReason> {
    prop_oneof![
        Just(FinishReason::Stop),
        Just(FinishReason::Length),
        Just(FinishReason::Blocked),
        Just(FinishReason::Interrupted),
        Just(FinishReason::Other),
        Just(FinishReason::Unknown),
        Just(FinishReason::Aborted),
        Just(FinishReason::Failed),
        Just(FinishReason::Detached),
    ]
}

fn error_body() -> impl Strategy<Value = ErrorBody> {
    let status = prop_oneof![
        Just(Status::InvalidArgument),
        Just(Status::NotFound),
        Just(Status::FailedPrecondition),
        Just(Status::Aborted),
        Just(Status::PermissionDenied),
        Just(Status::Internal),
        Just(Status::Unavailable),
    ];
    (status, any::<String>()).prop_map(|(status, message)| ErrorBody { status, message })
}

/// Any snapshot.
pub fn snapshot() -> impl Strategy<Value = Snapshot> {
    let ids = (any::<String>(), any::<String>(), proptest::option::of(any::<String>()));
    let times = (
        time(),
        time(),
        proptest::option::of(time()),
        proptest::option::of(time()),
        proptest::option::of(time()),
    );
    let outcome = (
        snapshot_status(),
        proptest::option::of(finish_reason()),
        proptest::option::of(error_body()),
        proptest::option::of(session_state()),
    );
    let owner = (
        proptest::option::of(any::<String>()),
        proptest::option::of(any::<String>()),
        proptest::option::of(object()),
    );
    (ids, times, outcome, owner).prop_map(
        |(
            (snapshot_id, session_id, parent_id),
            (created_at, updated_at, heartbeat_at, resumed_at, resume_lease_until),
            (status, finish_reason, error, state),
            (agent, owner, metadata),
        )| Snapshot {
            snapshot_id,
            session_id,
            parent_id,
            created_at,
            updated_at,
            heartbeat_at,
            status,
            finish_reason,
            error,
            state,
            resumed_at,
            resume_lease_until,
            agent,
            owner,
            metadata,
            approvals: Vec::new(),
        },
    )
}
