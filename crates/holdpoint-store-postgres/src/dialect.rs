//! PostgreSQL's spelling of what the statements `holdpoint-store-sql`
//! builds leave to the dialect (see [`Dialect`]).

use holdpoint_store_sql::row::Dialect;

/// PostgreSQL: `$n` parameters, `strpos`, and `json_array_elements_text`
/// over a JSON array.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Postgres;

impl Dialect for Postgres {
    fn parameter(self, n: usize) -> String {
        format!("${n}")
    }

    fn contains(self, column: &str, needle: &str) -> String {
        format!("strpos({column}, {needle}) > 0")
    }

    fn contains_any(self, column: &str, needles: &str) -> String {
        format!(
            "EXISTS (SELECT 1 FROM json_array_elements_text({needles}::json) AS r(v) WHERE strpos({column}, r.v) > 0)"
        )
    }
}
