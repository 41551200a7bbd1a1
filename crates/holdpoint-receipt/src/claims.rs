//! The claims of a receipt.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::input_sha256;

/// What answered the hold before the call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// An approval (of a gate's or a rule's hold, or a tool's own question
    /// that declares a yes/no reply): the call runs with the input shown.
    Approve,
    /// A restart with a replaced input that ran without being held again
    /// (a tool's own question no rule covers): the receipt binds the new
    /// input, never the original.
    Edit,
    /// A standing grant let the call through (docs/reference.md §10.9).
    Grant,
    /// A tool's own question answered with resume data that is neither
    /// yes nor no (for example an MCP form's content).
    Restart,
}

impl Decision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Edit => "edit",
            Decision::Grant => "grant",
            Decision::Restart => "restart",
        }
    }
}

/// Someone who decided: the actor (or principal) and the roles they
/// answered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The actor's id (`operator` for the agent's own process).
    pub id: String,
    /// Their roles, as the request context carried them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

/// The quorum of a rule: how many distinct approvals it needs and how many
/// it had when the call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quorum {
    /// The approvals required.
    pub required: u32,
    /// The approvals reached.
    pub reached: u32,
}

/// What a receipt binds: everything but its time, expiry and id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// The snapshot that held the call (for a grant: the hold the grant
    /// was given on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// The held call's ref, when it has one.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The agent.
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// SHA-256 (hex) of the canonical JSON of the input that runs.
    pub input_sha256: String,
    /// The decision.
    pub decision: Decision,
    /// Who decided, in the order they did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actors: Vec<Actor>,
    /// The approval rule that governed the call, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The rule's quorum and the approvals reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<Quorum>,
    /// The standing grant that let the call through (decision `grant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

impl Subject {
    /// The subject of a call of `tool` on `agent` with `input`.
    pub fn new(agent: impl Into<String>, tool: impl Into<String>, input: &Value, decision: Decision) -> Self {
        Subject {
            snapshot_id: None,
            reference: None,
            agent: agent.into(),
            tool: tool.into(),
            input_sha256: input_sha256(input),
            decision,
            actors: Vec::new(),
            rule: None,
            quorum: None,
            grant: None,
        }
    }

    /// With the hold: the snapshot that held the call and its ref.
    pub fn hold(mut self, snapshot_id: impl Into<String>, reference: Option<&str>) -> Self {
        self.snapshot_id = Some(snapshot_id.into());
        self.reference = reference.map(str::to_owned);
        self
    }

    /// With one more actor.
    pub fn actor(mut self, id: impl Into<String>, roles: Vec<String>) -> Self {
        self.actors.push(Actor { id: id.into(), roles });
        self
    }

    /// With the rule and its quorum.
    pub fn rule(mut self, rule: impl Into<String>, quorum: Option<Quorum>) -> Self {
        self.rule = Some(rule.into());
        self.quorum = quorum;
        self
    }

    /// With the grant that let the call through.
    pub fn grant(mut self, grant: impl Into<String>) -> Self {
        self.grant = Some(grant.into());
        self
    }

    /// The hold's id as one string: `SNAPSHOT` or `SNAPSHOT#REF`.
    pub fn hold_id(&self) -> Option<String> {
        let snapshot = self.snapshot_id.as_deref()?;
        Some(match &self.reference {
            Some(r) => format!("{snapshot}#{r}"),
            None => snapshot.to_owned(),
        })
    }
}

/// A verified receipt: its subject and registered claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The issuer (`holdpoint`).
    pub iss: String,
    /// The receipt's unique id.
    pub jti: String,
    /// Issued at (unix seconds).
    pub iat: i64,
    /// Expires at (unix seconds).
    pub exp: i64,
    /// What it binds.
    #[serde(flatten)]
    pub subject: Subject,
}

/// The claims of a receipt as the payload carries them (for callers that
/// want the raw JSON).
impl Receipt {
    /// The claims as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
