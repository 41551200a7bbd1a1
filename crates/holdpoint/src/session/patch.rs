//! Custom-state changes as RFC 6902 JSON Patch: the first change of a turn
//! is a whole-document replace, later ones are diffs.

use serde_json::{Value, json};

/// Tracks the custom state of one turn and yields the patch of each change.
#[derive(Debug, Clone)]
pub struct PatchTracker {
    current: Value,
    sent_first: bool,
}

impl PatchTracker {
    /// Starts from the state at the beginning of the turn.
    pub fn new(start: Value) -> Self {
        PatchTracker {
            current: start,
            sent_first: false,
        }
    }

    /// Records the new state and returns the patch operations to emit
    /// (`None` when nothing changed).
    pub fn change(&mut self, next: &Value) -> Option<Value> {
        if self.sent_first && *next == self.current {
            return None;
        }
        let ops = if self.sent_first {
            serde_json::to_value(json_patch::diff(&self.current, next)).unwrap_or(Value::Array(Vec::new()))
        } else {
            json!([{ "op": "replace", "path": "", "value": next }])
        };
        self.sent_first = true;
        self.current = next.clone();
        Some(ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_replace_then_diffs() {
        let mut t = PatchTracker::new(Value::Null);
        assert_eq!(
            t.change(&json!({"counter": 1, "status": "working"})).unwrap(),
            json!([{"op": "replace", "path": "", "value": {"counter": 1, "status": "working"}}])
        );
        assert_eq!(
            t.change(&json!({"counter": 2, "status": "working"})).unwrap(),
            json!([{"op": "replace", "path": "/counter", "value": 2}])
        );
        assert!(t.change(&json!({"counter": 2, "status": "working"})).is_none());
    }
}
