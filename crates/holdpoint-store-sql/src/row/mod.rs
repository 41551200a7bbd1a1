//! Snapshots and audit records as SQL table rows: the JSON document plus
//! the columns copied out of it for lookups, and the listing statements
//! built over those columns in the SQL both dialects share, with what each
//! spells its own way asked of the driver's [`Dialect`]. The SQL stores
//! (SQLite, PostgreSQL) share it, so they encode and select rows alike.

use chrono::{DateTime, Utc};

use holdpoint::session::{
    AuditQuery, AuditRecord, SessionState, Snapshot, SnapshotQuery, SnapshotStatus, SnapshotUpdate, WaitingCount,
    mint_id, prepare_row,
};
use holdpoint::{Error, Result};

/// A stored document that does not decode: a broken row, not bad input.
pub fn corrupt_row(what: &str, err: serde_json::Error) -> Error {
    Error::Internal(format!("stored {what} does not decode: {err}"))
}

/// The column values of one snapshot row.
pub struct Columns {
    /// `snapshotId`.
    pub snapshot_id: String,
    /// `sessionId`.
    pub session_id: String,
    /// `parentId`.
    pub parent_id: Option<String>,
    /// `createdAt`, nanoseconds since the epoch.
    pub created_at_ns: i64,
    /// `updatedAt`, nanoseconds since the epoch.
    pub updated_at_ns: i64,
    /// `heartbeatAt`, nanoseconds since the epoch.
    pub heartbeat_at_ns: Option<i64>,
    /// `resumedAt`, nanoseconds since the epoch.
    pub resumed_at_ns: Option<i64>,
    /// The status's wire name.
    pub status: &'static str,
    /// The finish reason's wire name.
    pub finish_reason: Option<String>,
    /// The agent that wrote it.
    pub agent: Option<String>,
    /// The owning principal.
    pub owner: Option<String>,
    /// The roles that approve its paused calls, as [`approvers_column`]
    /// encodes them (migration 0009).
    pub approvers: String,
    /// The whole snapshot as JSON.
    pub data: String,
}

impl Columns {
    /// The columns of `row`.
    pub fn of(row: &Snapshot) -> Result<Self> {
        let finish_reason = row
            .finish_reason
            .map(|r| match serde_json::to_value(r) {
                Ok(serde_json::Value::String(name)) => Ok(name),
                other => Err(Error::Internal(format!("finish reason {r:?} encodes as {other:?}"))),
            })
            .transpose()?;
        Ok(Columns {
            snapshot_id: row.snapshot_id.clone(),
            session_id: row.session_id.clone(),
            parent_id: row.parent_id.clone(),
            created_at_ns: nanos("createdAt", row.created_at)?,
            updated_at_ns: nanos("updatedAt", row.updated_at)?,
            heartbeat_at_ns: row.heartbeat_at.map(|t| nanos("heartbeatAt", t)).transpose()?,
            resumed_at_ns: row.resumed_at.map(|t| nanos("resumedAt", t)).transpose()?,
            status: row.status.as_str(),
            finish_reason,
            agent: row.agent.clone(),
            owner: row.owner.clone(),
            approvers: approvers_column(&row.hold_approvers()),
            data: serde_json::to_string(row)
                .map_err(|e| Error::Internal(format!("snapshot {} does not encode: {e}", row.snapshot_id)))?,
        })
    }
}

/// The longest `approvers` value a row keeps; a longer one is stored as
/// [`APPROVERS_NOT_RECORDED`], so that the index holding it never meets a
/// value too long for an index entry.
const MAX_APPROVERS: usize = 1024;

/// The `approvers` value of a row whose roles are not recorded (too many
/// to keep): a listing for a viewer always reads such a row and filters it
/// after decoding, as it does a row written before migration 0009 (`NULL`)
/// until the store fills those in on opening ([`approvers_backfill`]).
pub const APPROVERS_NOT_RECORDED: &str = "*";

/// The `approvers` column of a row whose paused calls these roles approve
/// ([`Snapshot::hold_approvers`]): every role as its JSON string, each
/// between two U+001F characters (`""` for none). JSON escapes U+001F
/// inside a string, so the column contains [`approver_needle`]`(r)`
/// exactly when `r` is one of the roles: a listing tests each of the
/// caller's roles with a plain substring search.
/// [`APPROVERS_NOT_RECORDED`] when it would exceed `MAX_APPROVERS` (1024) bytes.
pub fn approvers_column(roles: &[String]) -> String {
    let mut column = String::new();
    for role in roles {
        if column.is_empty() {
            column.push('\u{1f}');
        }
        column.push_str(&serde_json::Value::from(role.as_str()).to_string());
        column.push('\u{1f}');
    }
    if column.len() > MAX_APPROVERS {
        return APPROVERS_NOT_RECORDED.to_owned();
    }
    column
}

/// What an `approvers` column ([`approvers_column`]) contains when `role`
/// is one of its roles.
pub fn approver_needle(role: &str) -> String {
    format!("\u{1f}{}\u{1f}", serde_json::Value::from(role))
}

/// The most roles of a [`Viewer`](holdpoint::session::Viewer) bound one
/// parameter each; a caller with more is tested against one JSON array
/// (so the statement texts stay few for the stores' statement caches).
const MAX_ROLE_PARAMETERS: usize = 4;

/// The statement that reads up to its limit (the parameter `1`) waiting
/// rows whose `approvers` is `NULL`: those written before migration 0009,
/// which a store fills in when it opens, before it takes any work, so
/// that a viewer's listing reads them from the index like any other.
pub fn approvers_backfill(dialect: impl Dialect) -> String {
    format!(
        "SELECT s.snapshot_id, s.data FROM holdpoint_snapshots s \
         WHERE s.status = 'completed' AND s.finish_reason = 'interrupted' AND s.resumed_at_ns IS NULL \
           AND s.approvers IS NULL LIMIT {}",
        dialect.parameter(1)
    )
}

/// The `approvers` value of the stored row `id` whose document is `data`
/// (see [`approvers_backfill`]).
pub fn approvers_of_stored(id: &str, data: &str) -> Result<String> {
    Ok(approvers_column(&decode(id, data)?.hold_approvers()))
}

/// The row a save under a freshly minted id writes, and its columns
/// (`None` when `update` writes nothing). The id is recorded on the
/// current span (a store's `save_snapshot` span).
pub fn fresh_row(update: SnapshotUpdate) -> Result<Option<(Snapshot, Columns)>> {
    let id = mint_id();
    tracing::Span::current().record("snapshot_id", id.as_str());
    let Some(next) = update(None)? else {
        return Ok(None);
    };
    let row = prepare_row(&id, None, next)?;
    let cols = Columns::of(&row)?;
    Ok(Some((row, cols)))
}

/// The column values of one audit row.
pub struct AuditColumns {
    /// The record's id.
    pub record_id: String,
    /// When, nanoseconds since the epoch.
    pub at_ns: i64,
    /// The principal.
    pub principal: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The session.
    pub session_id: String,
    /// The snapshot.
    pub snapshot_id: String,
    /// The whole record as JSON.
    pub data: String,
}

impl AuditColumns {
    /// The columns of `record`.
    pub fn of(record: &AuditRecord) -> Result<Self> {
        Ok(AuditColumns {
            record_id: record.id.clone(),
            at_ns: nanos("at", record.at)?,
            principal: record.principal.clone(),
            agent: record.agent.clone(),
            session_id: record.session_id.clone(),
            snapshot_id: record.snapshot_id.clone(),
            data: serde_json::to_string(record)
                .map_err(|e| Error::Internal(format!("audit record {} does not encode: {e}", record.id)))?,
        })
    }
}

/// A timestamp as nanoseconds since the epoch (exact, and ordered like the
/// timestamps themselves).
fn nanos(field: &str, at: DateTime<Utc>) -> Result<i64> {
    at.timestamp_nanos_opt().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{field} {at} is outside the range a store can keep (years 1678 to 2261)"
        ))
    })
}

/// Decodes the `data` column of snapshot row `id`.
pub fn decode(id: &str, data: &str) -> Result<Snapshot> {
    serde_json::from_str(data).map_err(|e| corrupt_row(&format!("snapshot {id}"), e))
}

/// The `(snapshot_id, data)` rows a `list_snapshots` query selected,
/// decoded as read now, keeping those that pass `query`'s row filters
/// (the lease of `in_doubt_only` lives in the document), up to its limit.
/// A [`viewer`](SnapshotQuery::viewer) is checked on each decoded row
/// ([`Viewer::sees_row`](holdpoint::session::Viewer::sees_row)); see
/// [`decode_viewed`] for rows read with their `approvers` column.
pub fn decode_listed(rows: Vec<(String, String)>, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows = rows.into_iter().map(|(id, data)| Listed {
        snapshot_id: id,
        data,
        approvers: None,
    });
    decode_viewed(rows, query)
}

/// One row a `list_snapshots` statement selected, with its `approvers`
/// column when the statement read it (see [`decode_viewed`]).
pub struct Listed {
    /// `snapshotId`.
    pub snapshot_id: String,
    /// The whole snapshot as JSON.
    pub data: String,
    /// The `approvers` column as stored ([`approvers_column`]), or `None`
    /// when not read or not recorded.
    pub approvers: Option<String>,
}

/// [`decode_listed`] for rows read with their `approvers` column: a row
/// whose roles are recorded there ([`approvers_column`], kept by every
/// write from the same document) is checked against the
/// [`viewer`](SnapshotQuery::viewer) from that column and its owner,
/// without deriving its roles from the document again; a row without
/// them (`NULL`, [`APPROVERS_NOT_RECORDED`]) is checked on the decoded
/// document, as [`decode_listed`] checks every row. So a row the
/// statement let through that the viewer may not see is still dropped.
pub fn decode_viewed(rows: impl IntoIterator<Item = Listed>, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let viewed = query.viewer.as_ref().map(|viewer| {
        let needles: Vec<String> = viewer.roles.iter().map(|r| approver_needle(r)).collect();
        (
            viewer,
            needles,
            SnapshotQuery {
                viewer: None,
                ..query.clone()
            },
        )
    });
    let mut out = Vec::new();
    for row in rows {
        let snapshot = decode(&row.snapshot_id, &row.data)?.as_read();
        let recorded = row.approvers.as_deref().filter(|a| *a != APPROVERS_NOT_RECORDED);
        let passes = match (&viewed, recorded) {
            (Some((viewer, needles, unviewed)), Some(column)) => {
                unviewed.matches_row(&snapshot)
                    && (snapshot.owner.is_none()
                        || snapshot.owner == viewer.principal
                        || needles.iter().any(|n| column.contains(n.as_str())))
            }
            _ => query.matches_row(&snapshot),
        };
        if passes {
            out.push(snapshot);
        }
    }
    out.truncate(query.limit());
    Ok(out)
}

/// What a SQL dialect spells its own way in the statements built here.
/// Each driver implements it for its dialect (this crate names none), and
/// passes it to the builders ([`snapshot_listing`], [`audit_listing`],
/// [`waiting_count`], [`approvers_backfill`], the prune statements).
pub trait Dialect: Copy {
    /// The `n`th statement parameter, from 1 (`?1` in SQLite, `$1` in
    /// PostgreSQL).
    fn parameter(self, n: usize) -> String;

    /// A term true when the text in `column` contains the text `needle` (a
    /// parameter).
    fn contains(self, column: &str, needle: &str) -> String;

    /// A term true when the text in `column` contains any string of
    /// `needles`, a parameter holding them as a JSON array.
    fn contains_any(self, column: &str, needles: &str) -> String;

    /// The column that names a row of `holdpoint_snapshots` most cheaply:
    /// a viewer's listing chooses its rows by it ([`snapshot_listing`]).
    /// `snapshot_id` (the primary key) unless the dialect has a cheaper
    /// one (SQLite's `rowid`, which every index entry holds, so the chosen
    /// rows are read without a search of the primary key's index).
    fn row_key(self) -> &'static str {
        "snapshot_id"
    }
}

/// A listing statement of the SQL stores: its text, its text arguments (the
/// parameters `1..=args.len()`, in order) and its limit (the last
/// parameter).
///
/// Only the filters that are set become terms, each a plain `column =
/// <parameter>`, so the database can answer from the index that fits (the
/// session's, the agent's, the owner's, or the partial index of waiting
/// rows, whose condition the waiting filter repeats exactly) and stop at
/// the limit. `(<parameter> IS NULL OR column = <parameter>)` terms, by
/// contrast, keep SQLite and PostgreSQL's generic plans from using any
/// index: every listing scanned and sorted the whole table.
///
/// ```
/// use holdpoint::session::SnapshotQuery;
/// use holdpoint_store_sql::row::snapshot_listing;
/// # #[derive(Clone, Copy)]
/// # struct Numbered;
/// # impl holdpoint_store_sql::row::Dialect for Numbered {
/// #     fn parameter(self, n: usize) -> String { format!("${n}") }
/// #     fn contains(self, column: &str, needle: &str) -> String { format!("strpos({column}, {needle}) > 0") }
/// #     fn contains_any(self, _: &str, _: &str) -> String { unimplemented!() }
/// # }
///
/// // `Numbered` spells parameters `$1`, `$2`, … (as PostgreSQL's driver does).
/// let query = SnapshotQuery { agent: Some("teller".into()), ..Default::default() };
/// let listing = snapshot_listing(&query, "SELECT s.snapshot_id, s.data FROM holdpoint_snapshots s", Numbered);
/// assert!(listing.sql.contains("s.agent = $1"));
/// assert!(listing.sql.ends_with("LIMIT $2"));
/// assert_eq!(listing.args, ["teller"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The statement.
    pub sql: String,
    /// The filters' values, for the parameters `1..=args.len()`.
    pub args: Vec<String>,
    /// The limit, for parameter `args.len() + 1`.
    pub limit: i64,
}

impl Listing {
    fn new(select: &str) -> Self {
        Listing {
            sql: format!("{select} WHERE 1 = 1"),
            args: Vec::new(),
            limit: 0,
        }
    }

    /// Adds `AND <column> = <parameter>` for a filter that is set.
    fn equals(&mut self, column: &str, value: Option<&String>, dialect: impl Dialect) {
        if let Some(value) = value {
            self.args.push(value.clone());
            let parameter = dialect.parameter(self.args.len());
            self.sql.push_str(&format!(" AND {column} = {parameter}"));
        }
    }

    /// Ends with the order and the limit.
    fn finish(mut self, order: &str, limit: i64, dialect: impl Dialect) -> Self {
        self.limit = limit;
        let parameter = dialect.parameter(self.args.len() + 1);
        self.sql.push_str(&format!(" ORDER BY {order} LIMIT {parameter}"));
        self
    }
}

/// The `list_snapshots` statement for `query` over `select` (a `SELECT …
/// FROM holdpoint_snapshots s`), newest first. With `waiting_only` or
/// `in_doubt_only` (`waiting_only` wins), a row counts only if no row of
/// its session is newer; for `in_doubt_only` this selects the claimed rows,
/// and the claim's lease (inside the document) is checked after decoding
/// ([`decode_listed`]).
///
/// With a [`viewer`](SnapshotQuery::viewer), the rows are first chosen by
/// key alone (`s.snapshot_id IN (SELECT s.snapshot_id … LIMIT n)`, or the
/// dialect's [`row_key`](Dialect::row_key)), from the
/// partial index of waiting rows that holds the owner and the approvers
/// beside the agent and the order (migration 0009), so the rows the caller
/// may not see are skipped without reading them; then only the chosen rows
/// are read.
pub fn snapshot_listing(query: &SnapshotQuery, select: &str, dialect: impl Dialect) -> Listing {
    const ORDER: &str = "s.created_at_ns DESC, s.snapshot_id DESC";
    if query.viewer.is_none() {
        return snapshot_filter(query, select, dialect).finish(ORDER, list_limit(query), dialect);
    }
    let key = dialect.row_key();
    let inner = snapshot_filter(query, &format!("SELECT s.{key} FROM holdpoint_snapshots s"), dialect);
    let limit = dialect.parameter(inner.args.len() + 1);
    Listing {
        sql: format!(
            "{select} WHERE s.{key} IN ({} ORDER BY {ORDER} LIMIT {limit}) ORDER BY {ORDER} LIMIT {limit}",
            inner.sql
        ),
        args: inner.args,
        limit: list_limit(query),
    }
}

/// The terms of [`snapshot_listing`], without order and limit.
fn snapshot_filter(query: &SnapshotQuery, select: &str, dialect: impl Dialect) -> Listing {
    let mut listing = Listing::new(select);
    listing.equals("s.agent", query.agent.as_ref(), dialect);
    listing.equals("s.session_id", query.session_id.as_ref(), dialect);
    listing.equals("s.owner", query.owner.as_ref(), dialect);
    if query.waiting_only || query.in_doubt_only {
        // The waiting rows' partial index has exactly this condition.
        listing
            .sql
            .push_str(" AND s.status = 'completed' AND s.finish_reason = 'interrupted'");
        listing.sql.push_str(if query.waiting_only {
            " AND s.resumed_at_ns IS NULL"
        } else {
            " AND s.resumed_at_ns IS NOT NULL"
        });
        listing.sql.push_str(
            " AND NOT EXISTS (SELECT 1 FROM holdpoint_snapshots t WHERE t.session_id = s.session_id \
               AND (t.created_at_ns > s.created_at_ns \
                    OR (t.created_at_ns = s.created_at_ns AND t.snapshot_id > s.snapshot_id))",
        );
        if !query.waiting_only {
            // A detached resume's unfinished pending row does not hide the
            // snapshot it resumed (see `SnapshotQuery::in_doubt_only`).
            listing
                .sql
                .push_str(" AND NOT (t.parent_id = s.snapshot_id AND t.status IN ('pending', 'aborting'))");
        }
        listing.sql.push(')');
    }
    if let Some(viewer) = &query.viewer {
        listing.sql.push_str(" AND (s.owner IS NULL");
        if let Some(principal) = &viewer.principal {
            listing.args.push(principal.clone());
            let parameter = dialect.parameter(listing.args.len());
            listing.sql.push_str(&format!(" OR s.owner = {parameter}"));
        }
        if !viewer.roles.is_empty() {
            listing.sql.push_str(" OR s.approvers IS NULL OR s.approvers = '*'");
        }
        if (1..=MAX_ROLE_PARAMETERS).contains(&viewer.roles.len()) {
            // One substring test per role, each its own parameter: what
            // SQLite runs fastest (a JSON array of needles, parsed again
            // for every row it tests, cost it seven times as much).
            for role in &viewer.roles {
                listing.args.push(approver_needle(role));
                let parameter = dialect.parameter(listing.args.len());
                listing.sql.push_str(" OR ");
                listing.sql.push_str(&dialect.contains("s.approvers", &parameter));
            }
        } else if !viewer.roles.is_empty() {
            // More roles: one JSON array of needles, one statement text
            // whatever their number.
            let needles: Vec<String> = viewer.roles.iter().map(|r| approver_needle(r)).collect();
            listing.args.push(serde_json::Value::from(needles).to_string());
            let parameter = dialect.parameter(listing.args.len());
            listing.sql.push_str(" OR ");
            listing.sql.push_str(&dialect.contains_any("s.approvers", &parameter));
        }
        listing.sql.push(')');
    }
    listing
}

/// The statement behind
/// [`SnapshotListing::count_waiting`](holdpoint::session::SnapshotListing::count_waiting) in
/// the SQL stores: one row of `count(*)` and `min(s.created_at_ns)` over
/// the sessions waiting for an answer (of `agent`, when given), with the
/// terms of a `waiting_only` listing, so it reads the partial index of
/// waiting rows and decodes nothing. Its [`Listing::limit`] is unused (the
/// statement has no `LIMIT`).
///
/// ```
/// use holdpoint_store_sql::row::waiting_count;
/// # #[derive(Clone, Copy)]
/// # struct Numbered;
/// # impl holdpoint_store_sql::row::Dialect for Numbered {
/// #     fn parameter(self, n: usize) -> String { format!("${n}") }
/// #     fn contains(self, column: &str, needle: &str) -> String { format!("strpos({column}, {needle}) > 0") }
/// #     fn contains_any(self, _: &str, _: &str) -> String { unimplemented!() }
/// # }
///
/// let count = waiting_count(Some("teller"), Numbered);
/// assert!(count.sql.starts_with("SELECT count(*), min(s.created_at_ns) FROM holdpoint_snapshots s"));
/// assert!(count.sql.contains("s.agent = $1"));
/// assert!(!count.sql.contains("LIMIT"));
/// assert_eq!(count.args, ["teller"]);
/// ```
pub fn waiting_count(agent: Option<&str>, dialect: impl Dialect) -> Listing {
    let query = SnapshotQuery {
        agent: agent.map(str::to_owned),
        waiting_only: true,
        ..SnapshotQuery::default()
    };
    snapshot_filter(
        &query,
        "SELECT count(*), min(s.created_at_ns) FROM holdpoint_snapshots s",
        dialect,
    )
}

/// The [`WaitingCount`] of a [`waiting_count`] row.
pub fn waiting_counted(count: i64, oldest_ns: Option<i64>) -> WaitingCount {
    WaitingCount {
        count: u64::try_from(count).unwrap_or(0),
        oldest: oldest_ns.map(DateTime::from_timestamp_nanos),
    }
}

/// The `list_audit` statement for `query` over `select` (a `SELECT seq, …
/// FROM holdpoint_audit`), newest first.
pub fn audit_listing(query: &AuditQuery, select: &str, dialect: impl Dialect) -> Listing {
    let mut listing = Listing::new(select);
    listing.equals("agent", query.agent.as_ref(), dialect);
    listing.equals("session_id", query.session_id.as_ref(), dialect);
    listing.equals("principal", query.principal.as_ref(), dialect);
    listing.finish("seq DESC", sql_limit(query.limit()), dialect)
}

/// The SQL `LIMIT` of a `list_snapshots` query: none for `in_doubt_only`,
/// whose lease is checked after decoding (see [`decode_listed`]).
pub fn list_limit(query: &SnapshotQuery) -> i64 {
    if query.in_doubt_only {
        i64::MAX
    } else {
        sql_limit(query.limit())
    }
}

/// A listing limit as an SQL `LIMIT` value (saturating).
pub fn sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Decodes the `data` column of audit row `seq`.
pub fn decode_audit(seq: i64, data: &str) -> Result<AuditRecord> {
    serde_json::from_str(data).map_err(|e| corrupt_row(&format!("audit row {seq}"), e))
}

/// The status a reader sees for a row with these columns (see
/// [`Snapshot::read_status`]), without decoding the whole document.
pub fn read_status(id: &str, status: &str, updated_at_ns: i64, heartbeat_at_ns: Option<i64>) -> Result<SnapshotStatus> {
    let status: SnapshotStatus = serde_json::from_value(serde_json::Value::String(status.to_owned()))
        .map_err(|e| corrupt_row(&format!("status of snapshot {id}"), e))?;
    let mut probe = Snapshot::new(SessionState::default());
    probe.status = status;
    probe.updated_at = DateTime::from_timestamp_nanos(updated_at_ns);
    probe.heartbeat_at = heartbeat_at_ns.map(DateTime::from_timestamp_nanos);
    Ok(probe.read_status(Utc::now()))
}

#[cfg(test)]
mod tests;
