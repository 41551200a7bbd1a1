//! SQLite's spelling of what the statements `holdpoint-store-sql` builds
//! leave to the dialect (see [`Dialect`]).

use holdpoint_store_sql::row::Dialect;

/// SQLite: `?n` parameters, `instr`, `json_each` over a JSON array, and
/// rows chosen by `rowid`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sqlite;

impl Dialect for Sqlite {
    fn parameter(self, n: usize) -> String {
        format!("?{n}")
    }

    fn contains(self, column: &str, needle: &str) -> String {
        format!("instr({column}, {needle}) > 0")
    }

    fn contains_any(self, column: &str, needles: &str) -> String {
        format!("EXISTS (SELECT 1 FROM json_each({needles}) r WHERE instr({column}, r.value) > 0)")
    }

    fn row_key(self) -> &'static str {
        // The table has a rowid: the chosen rows are read by it directly,
        // not through the primary key's index.
        "rowid"
    }
}
