//! A sub-agent's holds as its parent's paused call carries them
//! (docs/reference.md §16): the [`SurfacedHold`] in the call's interrupt
//! data, and the nested calls it stands for ([`answerable`]). Plain data
//! over [`Part`]s, below the tools, middleware and review that read it;
//! `agent::subagent` re-exports both.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Part;
use super::metadata::{self, REF_SEPARATOR, SUBAGENT};

/// A child's hold as its parent's paused call carries it (the interrupt
/// data under [`SUBAGENT`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SurfacedHold {
    /// The child agent.
    pub agent: String,
    /// The child's session.
    pub session_id: String,
    /// The child's paused snapshot (the one a nested answer resumes).
    pub snapshot_id: String,
    /// The child's paused tool-request parts, as in its snapshot (each may
    /// carry a surfaced hold of its own, for deeper levels).
    pub interrupts: Vec<Part>,
}

impl SurfacedHold {
    /// The surfaced hold a paused request part carries, if it is one.
    pub fn of(part: &Part) -> Option<SurfacedHold> {
        // Decoded from the part's own JSON, borrowed: nothing is copied
        // first (a hold carries its child's whole paused request).
        SurfacedHold::deserialize(surfaced(part)?).ok()
    }

    /// Whether `part` carries a surfaced hold (without decoding it).
    pub fn is_surfaced(part: &Part) -> bool {
        surfaced(part).is_some()
    }

    /// The interrupt data that carries this hold.
    pub(crate) fn into_data(self) -> Map<String, Value> {
        let mut data = Map::new();
        if let Ok(v) = serde_json::to_value(self) {
            data.insert(SUBAGENT.to_owned(), v);
        }
        data
    }
}

/// The surfaced hold's JSON in a paused request part's interrupt data.
fn surfaced(part: &Part) -> Option<&Value> {
    if !part.is_interrupt() {
        return None;
    }
    metadata::marker_object(part.metadata.as_ref(), metadata::INTERRUPT)?.get(SUBAGENT)
}

/// The calls a paused request part stands for, each as a part a directive
/// can be built from at the root: the part itself for a call of its own;
/// for a sub-agent call that surfaced its child's holds, those holds (at
/// any depth), each with its compound ref (`OUTER/INNER`), as listings
/// show them. Restarting or responding to one of them answers that nested
/// call through the root's session (docs/reference.md §16.3).
pub fn answerable(part: &Part) -> Vec<Part> {
    let Some(hold) = SurfacedHold::of(part) else {
        return vec![part.clone()];
    };
    let prefix = part.ref_segment().unwrap_or_default();
    let mut out = Vec::new();
    for inner in &hold.interrupts {
        let Some(own) = inner.ref_segment() else { continue };
        let compound = format!("{prefix}{REF_SEPARATOR}{own}");
        let mut named = inner.clone();
        if let Some(r) = named.as_tool_request_mut() {
            r.reference = Some(compound);
        }
        out.extend(answerable(&named));
    }
    out
}
