//! [`Chain`]: SQL statements sent to the connection as one query.
//!
//! sqlx runs a SQLite connection on its own worker thread, and every query
//! is a round trip to it (two thread wake-ups). A write needs only the
//! answers of its reads, so the writer queues its statements here and sends
//! them together with the next statement whose answer it needs: a claim is
//! `BEGIN IMMEDIATE; SELECT` then `UPSERT; INSERT audit…; COMMIT` — two
//! round trips instead of five or more. SQLite runs the statements of one
//! query in order and stops at the first that fails.
//!
//! Parameters are positional (`?`): sqlx binds each statement of a query
//! from where the previous one stopped in the one argument list, so values
//! are bound in the order their `?` appear. (Numbered `?N` parameters do not
//! work across statements: sqlx counts a statement's unused lower numbers
//! as positional ones and stops binding.)

use holdpoint::session::row::{AuditColumns, Columns};
use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, AssertSqlSafe, Encode, Sqlite, SqliteConnection, Type};

/// Statements waiting to be sent, with their arguments.
#[derive(Default)]
pub(crate) struct Chain {
    sql: String,
    args: SqliteArguments,
    /// Whether the chain holds a write (one op's writes at most are chained,
    /// or up to [`MAX_FRESH`] fresh rows, so the chain's text takes only a
    /// few shapes and its prepared statements stay in sqlx's statement
    /// cache).
    writes: bool,
    /// How many of the queued writes are fresh rows, when all of them are.
    fresh: usize,
    /// Whether anything was sent since the chain was created.
    sent: bool,
}

/// The most parameters one chain binds before it is sent (SQLite allows
/// 32,766 per statement since 3.32; each statement of a chain binds its own).
const MAX_ARGS: usize = 8_000;

/// The most fresh rows one chain carries.
pub(crate) const MAX_FRESH: usize = 16;

impl Chain {
    /// Queues a statement without parameters (`BEGIN IMMEDIATE`, `COMMIT`).
    pub fn push(&mut self, sql: &str) {
        self.sql.push_str(sql);
        self.sql.push_str(";\n");
    }

    /// Whether the chain holds a write not sent yet.
    pub fn has_writes(&self) -> bool {
        self.writes
    }

    /// Whether some of the chain was sent already (so a transaction it
    /// began may be open).
    pub fn sent(&self) -> bool {
        self.sent
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.sql.is_empty()
    }

    /// How many fresh rows ([`upsert_fresh`](Self::upsert_fresh)) are
    /// queued, when they are all the chain's writes; 0 otherwise.
    pub fn fresh_rows(&self) -> usize {
        self.fresh
    }

    /// Whether a fresh row can join the queued writes: the chain holds no
    /// write, or only fewer than [`MAX_FRESH`] fresh rows.
    pub fn takes_fresh(&self) -> bool {
        !self.is_full() && (!self.writes || (self.fresh > 0 && self.fresh < MAX_FRESH))
    }

    /// Queues the write of a row under a freshly minted id (no other write
    /// of the batch can touch it, so fresh rows may share a round trip).
    pub fn upsert_fresh(&mut self, cols: &Columns) -> Result<(), sqlx::Error> {
        let fresh = if self.writes && self.fresh == 0 {
            0
        } else {
            self.fresh + 1
        };
        self.upsert(cols)?;
        self.fresh = fresh;
        Ok(())
    }

    /// Whether the chain should be sent before more is added.
    pub fn is_full(&self) -> bool {
        self.args.len() >= MAX_ARGS
    }

    /// Binds `value` to the next `?`.
    fn bind<'t, T: Encode<'t, Sqlite> + Type<Sqlite>>(&mut self, value: T) -> Result<(), sqlx::Error> {
        self.args.add(value).map_err(sqlx::Error::Encode)
    }

    /// Queues the write of a prepared row (insert, or replace the row with its id).
    pub fn upsert(&mut self, cols: &Columns) -> Result<(), sqlx::Error> {
        self.bind(cols.snapshot_id.as_str())?;
        self.bind_row(cols)?;
        self.sql.push_str(
            "INSERT INTO holdpoint_snapshots \
               (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, \
                resumed_at_ns, status, finish_reason, agent, owner, data) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (snapshot_id) DO UPDATE SET \
               session_id = excluded.session_id, parent_id = excluded.parent_id, \
               created_at_ns = excluded.created_at_ns, updated_at_ns = excluded.updated_at_ns, \
               heartbeat_at_ns = excluded.heartbeat_at_ns, resumed_at_ns = excluded.resumed_at_ns, \
               status = excluded.status, finish_reason = excluded.finish_reason, \
               agent = excluded.agent, owner = excluded.owner, data = excluded.data;\n",
        );
        self.writes = true;
        self.fresh = 0;
        Ok(())
    }

    /// Queues the append of prepared audit rows, in order.
    pub fn audit(&mut self, records: &[AuditColumns]) -> Result<(), sqlx::Error> {
        self.audit_rows(records, "VALUES (?, ?, ?, ?, ?, ?, ?);\n")
    }

    /// Queues the compare-and-set write of a prepared row: it replaces row
    /// `cols.snapshot_id` only where the row still holds exactly `old`, and
    /// returns one row (`1`) when it did.
    pub fn replace_if(&mut self, cols: &Columns, old: &str) -> Result<(), sqlx::Error> {
        self.bind_row(cols)?;
        self.bind(cols.snapshot_id.as_str())?;
        self.bind(old)?;
        self.sql.push_str(
            "UPDATE holdpoint_snapshots SET \
               session_id = ?, parent_id = ?, created_at_ns = ?, updated_at_ns = ?, \
               heartbeat_at_ns = ?, resumed_at_ns = ?, status = ?, finish_reason = ?, \
               agent = ?, owner = ?, data = ? \
             WHERE snapshot_id = ? AND data = ? RETURNING 1;\n",
        );
        self.writes = true;
        self.fresh = 0;
        Ok(())
    }

    /// Queues the append of prepared audit rows, in order, each only if the
    /// statement before it changed a row: queued after
    /// [`replace_if`](Self::replace_if), they are written only with it.
    pub fn audit_if_changed(&mut self, records: &[AuditColumns]) -> Result<(), sqlx::Error> {
        self.audit_rows(records, "SELECT ?, ?, ?, ?, ?, ?, ? WHERE changes() = 1;\n")
    }

    /// Queues one `INSERT INTO holdpoint_audit (…) <values>` per record,
    /// `values` taking the record's seven columns in order.
    fn audit_rows(&mut self, records: &[AuditColumns], values: &str) -> Result<(), sqlx::Error> {
        for cols in records {
            self.bind(cols.record_id.as_str())?;
            self.bind(cols.at_ns)?;
            self.bind(cols.principal.as_deref())?;
            self.bind(cols.agent.as_deref())?;
            self.bind(cols.session_id.as_str())?;
            self.bind(cols.snapshot_id.as_str())?;
            self.bind(cols.data.as_str())?;
            self.sql.push_str(
                "INSERT INTO holdpoint_audit (record_id, at_ns, principal, agent, session_id, snapshot_id, data) ",
            );
            self.sql.push_str(values);
            self.writes = true;
            self.fresh = 0;
        }
        Ok(())
    }

    /// Binds a row's columns after its id, in table order (`session_id`
    /// … `data`).
    fn bind_row(&mut self, cols: &Columns) -> Result<(), sqlx::Error> {
        self.bind(cols.session_id.as_str())?;
        self.bind(cols.parent_id.as_deref())?;
        self.bind(cols.created_at_ns)?;
        self.bind(cols.updated_at_ns)?;
        self.bind(cols.heartbeat_at_ns)?;
        self.bind(cols.resumed_at_ns)?;
        self.bind(cols.status)?;
        self.bind(cols.finish_reason.as_deref())?;
        self.bind(cols.agent.as_deref())?;
        self.bind(cols.owner.as_deref())?;
        self.bind(cols.data.as_str())
    }

    /// Sends the chain, running every statement, and tells whether any
    /// statement returned a row (a [`replace_if`](Self::replace_if) that
    /// wrote); the chain is empty afterwards.
    pub async fn execute_returning(&mut self, conn: &mut SqliteConnection) -> Result<bool, sqlx::Error> {
        let (sql, args) = self.take();
        // `fetch_all`, not `fetch_optional`: the statements after the one
        // returning a row must run too.
        let rows: Vec<i64> = sqlx::query_scalar_with(AssertSqlSafe(sql), args)
            .fetch_all(&mut *conn)
            .await?;
        Ok(!rows.is_empty())
    }

    /// Sends the chain; it is empty afterwards, whatever the outcome.
    pub async fn execute(&mut self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        if self.is_empty() {
            return Ok(());
        }
        let (sql, args) = self.take();
        sqlx::query_with(AssertSqlSafe(sql), args)
            .execute(&mut *conn)
            .await
            .map(|_| ())
    }

    /// Sends the chain followed by a read of row `id`'s stored JSON, and
    /// returns what the read found; the chain is empty afterwards.
    pub async fn read_data(&mut self, conn: &mut SqliteConnection, id: &str) -> Result<Option<String>, sqlx::Error> {
        self.bind(id)?;
        self.sql
            .push_str("SELECT data FROM holdpoint_snapshots WHERE snapshot_id = ?;\n");
        let (sql, args) = self.take();
        sqlx::query_scalar_with(AssertSqlSafe(sql), args)
            .fetch_optional(&mut *conn)
            .await
    }

    fn take(&mut self) -> (String, SqliteArguments) {
        self.writes = false;
        self.fresh = 0;
        self.sent = true;
        (std::mem::take(&mut self.sql), std::mem::take(&mut self.args))
    }
}
