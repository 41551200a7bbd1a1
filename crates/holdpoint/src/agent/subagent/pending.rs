//! Listing nested holds (docs/reference.md §16.2): a paused call that
//! surfaces a child's holds is listed as those holds, at any depth, each
//! under its compound ref and with the path to it.

use super::{REF_SEPARATOR, SubagentStep, SurfacedHold, answerable};
use crate::agent::{AgentOutput, PendingApproval};
use crate::message::Part;

/// `entry` as listings show it: itself for a call of its own, else one
/// entry per hold its child (and the child's children) surfaced. A nested
/// entry keeps the root's agent, session and snapshot (where it is
/// answered); its `tool`, `input`, `interrupt` and `interruptedBy` are
/// the nested call's; its `ref` and its `part`'s ref are compound
/// (`OUTER/INNER`), so a directive built from the part answers it at the
/// root; `path` names each level.
pub(crate) fn expand(entry: PendingApproval) -> Vec<PendingApproval> {
    let reference = entry.reference.clone();
    expand_at(entry, reference)
}

/// [`expand`] of an entry whose call has the ref `own` (its listed ref
/// may be compound).
fn expand_at(entry: PendingApproval, own: Option<String>) -> Vec<PendingApproval> {
    let Some(hold) = SurfacedHold::of(&entry.part) else {
        return vec![entry];
    };
    let mut out = Vec::new();
    let prefix = entry.part.ref_segment().unwrap_or_default().to_owned();
    let step = SubagentStep {
        tool: entry.tool.clone(),
        reference: own,
        agent: hold.agent.clone(),
        session_id: hold.session_id.clone(),
        snapshot_id: hold.snapshot_id.clone(),
    };
    for inner in &hold.interrupts {
        let Some(req) = inner.as_tool_request() else { continue };
        let own = inner.ref_segment().unwrap_or_default();
        let compound = format!("{prefix}{REF_SEPARATOR}{own}");
        let mut part = inner.clone();
        if let Some(r) = part.as_tool_request_mut() {
            r.reference = Some(compound.clone());
        }
        let mut path = entry.path.clone();
        path.push(step.clone());
        let nested = PendingApproval {
            tool: req.name.clone(),
            reference: Some(compound),
            input: req.input.clone().unwrap_or(serde_json::Value::Null),
            interrupt: inner.interrupt_data().unwrap_or_default(),
            interrupted_by: inner.interrupted_by().map(str::to_owned),
            expires_at: inner.expires_at(),
            expired: inner.expires_at().is_some_and(|t| t <= chrono::Utc::now()),
            // The nested call's own rule and reply shape: approvals,
            // denials and quorum checks are about it, not the surfacing call.
            // Its partial approvals live on the child's snapshot and are
            // not listed here.
            rule: crate::approval::HoldRule::on(inner),
            approvals: Vec::new(),
            reply: crate::approval::ReplyShape::on(inner),
            preview: crate::review::Preview::on(inner),
            unapprovable: inner
                .meta(crate::message::metadata::UNAPPROVABLE)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
            part,
            path,
            ..entry.clone()
        };
        out.extend(expand_at(nested, req.reference.clone()));
    }
    out
}

impl AgentOutput {
    /// The paused calls to answer, as parts a directive can be built
    /// from: [`interrupts`](Self::interrupts) with each sub-agent call
    /// that surfaced its child's holds replaced by those holds under
    /// their compound refs ([`answerable`]). A typed tool's
    /// `interrupted`, [`ToolApproval::interrupted`](crate::middleware::ToolApproval::interrupted)
    /// and `restart` / `respond` work on them as on the root's own calls.
    pub fn holds(&self) -> Vec<Part> {
        self.interrupts().iter().flat_map(answerable).collect()
    }
}
