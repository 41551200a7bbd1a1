//! Batched `get_latest_snapshot`: the reads queued while earlier batches
//! are in flight share one statement ([`LATEST`]), so one round trip and
//! one executor run on the server for all of them (see [`crate::batch`]).
//!
//! A batch is one statement, so it reads one committed state, taken after
//! every read of the batch was asked for: each read sees every write that
//! returned before it was asked. When the server rejects a batch (say a
//! session id PostgreSQL cannot hold), each read is retried on its own, so
//! only the one at fault fails.

use holdpoint::session::Snapshot;
use holdpoint::{Error, Result};
use holdpoint_store_sql::row;
use sqlx::PgPool;
use tokio::sync::oneshot;

use crate::batch::Batcher;
use crate::error::store_error;

/// The most reads one statement carries.
const MAX_BATCH: usize = 128;

/// For each session id of `$1`, the row with the greatest `created_at`,
/// ties by greatest id, with the session's (1-based) position. `LIMIT 1`
/// keeps the lateral subquery a lookup in `holdpoint_snapshots_latest` per
/// session, whatever the table's statistics say.
const LATEST: &str = "SELECT u.n, l.snapshot_id, l.data \
     FROM unnest($1::text[]) WITH ORDINALITY AS u(session_id, n) \
     CROSS JOIN LATERAL ( \
        SELECT s.snapshot_id, s.data::text AS data FROM holdpoint_snapshots s \
         WHERE s.session_id = u.session_id COLLATE \"C\" \
         ORDER BY s.created_at_ns DESC, s.snapshot_id DESC LIMIT 1 \
     ) l";

/// A stored row: its id and its document.
type Found = Option<(String, String)>;

struct Job {
    session_id: String,
    reply: oneshot::Sender<Result<Found>>,
}

/// The batched reads of one store handle.
pub(crate) struct LatestReader {
    batcher: Batcher<Job>,
}

impl LatestReader {
    /// A reader through `pool` with at most `slots` statements in flight.
    pub fn new(pool: PgPool, slots: usize) -> Self {
        LatestReader {
            batcher: Batcher::new(pool, slots, MAX_BATCH, |pool, batch| {
                Box::pin(async move { flush(&pool, batch).await })
            }),
        }
    }

    /// The session's row with the greatest `created_at`, ties by greatest
    /// id, as a reader sees it now.
    pub async fn latest(&self, session_id: &str) -> Result<Option<Snapshot>> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            session_id: session_id.to_owned(),
            reply,
        };
        let stopped = || {
            Error::Unavailable(format!(
                "postgres store: read latest snapshot of session {session_id}: the reader stopped (its runtime \
                 shut down); retry later"
            ))
        };
        if self.batcher.send(job).is_err() {
            return Err(stopped());
        }
        let found = answer.await.map_err(|_| stopped())??;
        found
            .map(|(id, data)| row::decode(&id, &data).map(Snapshot::as_read))
            .transpose()
    }
}

/// Reads `batch` and answers each caller.
async fn flush(pool: &PgPool, batch: Vec<Job>) {
    let ids: Vec<&str> = batch.iter().map(|job| job.session_id.as_str()).collect();
    match read(pool, &ids).await {
        Ok(mut found) => {
            for (job, found) in batch.into_iter().zip(found.iter_mut()) {
                let _ = job.reply.send(Ok(found.take()));
            }
        }
        Err(sqlx::Error::Database(_)) if batch.len() > 1 => {
            for job in batch {
                let answer = read(pool, &[job.session_id.as_str()])
                    .await
                    .map(|mut found| found.pop().flatten())
                    .map_err(|e| store_error(&what(&job.session_id), e));
                let _ = job.reply.send(answer);
            }
        }
        Err(err) => {
            let err = match batch.as_slice() {
                [job] => store_error(&what(&job.session_id), err),
                _ => store_error(&format!("read the latest snapshots of {} sessions", batch.len()), err),
            };
            for job in batch {
                let _ = job.reply.send(Err(err.clone()));
            }
        }
    }
}

fn what(session_id: &str) -> String {
    format!("read latest snapshot of session {session_id}")
}

/// Runs [`LATEST`] for `ids`: what was found for each, in order.
async fn read(pool: &PgPool, ids: &[&str]) -> std::result::Result<Vec<Found>, sqlx::Error> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(LATEST).bind(ids).fetch_all(pool).await?;
    let mut found: Vec<Found> = vec![None; ids.len()];
    for (n, id, data) in rows {
        if let Some(slot) = usize::try_from(n - 1).ok().and_then(|i| found.get_mut(i)) {
            *slot = Some((id, data));
        }
    }
    Ok(found)
}
