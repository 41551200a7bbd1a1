//! [`Known`]: the rows this handle's writer wrote last, as stored.
//!
//! A claim usually follows the save of the row it claims, through the same
//! handle. The writer remembers the stored JSON of the rows it committed,
//! and claims such a row by compare-and-set — runs the claim on the
//! remembered text and writes only where the row still holds exactly that
//! text (`UPDATE … WHERE data = ?`) — in one round trip to the database,
//! instead of reading the row first. Where the row changed (another handle
//! or process wrote it), nothing is written and the claim runs the usual
//! way, on the row as read. The remembered text is only ever a guess that
//! SQLite checks under the write lock: it decides nothing on its own.

use std::collections::HashMap;

/// The most rows remembered; past it, the memory starts over (a row it
/// forgot is simply read).
const CAPACITY: usize = 1024;

/// Stored JSON of rows the writer committed, by snapshot id.
#[derive(Default)]
pub(crate) struct Known {
    rows: HashMap<String, String>,
}

impl Known {
    /// The stored JSON of row `id`, as this writer last committed it.
    pub fn get(&self, id: &str) -> Option<&str> {
        self.rows.get(id).map(String::as_str)
    }

    /// Remembers that row `id` now holds `data` (committed).
    pub fn record(&mut self, id: &str, data: String) {
        if self.rows.len() >= CAPACITY && !self.rows.contains_key(id) {
            self.rows.clear();
        }
        self.rows.insert(id.to_owned(), data);
    }

    /// Forgets everything (after a batch whose outcome is not known).
    pub fn clear(&mut self) {
        self.rows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_text_and_starts_over_when_full() {
        let mut known = Known::default();
        known.record("a", "1".into());
        known.record("a", "2".into());
        assert_eq!(known.get("a"), Some("2"));
        for i in 0..CAPACITY {
            known.record(&format!("r{i}"), String::new());
        }
        assert!(known.rows.len() <= CAPACITY);
        known.clear();
        assert_eq!(known.get("a"), None);
    }
}
