//! The dispatcher behind the group commit ([`crate::group`]) and the
//! batched reads ([`crate::latest`]): callers queue jobs; a task takes
//! whatever is queued (up to a maximum) as soon as one of its slots is
//! free, and hands the batch to a flush function running in a task of its
//! own. Under load the batches grow while every slot is busy; a lone job is
//! a batch of one.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use sqlx::PgPool;
use tokio::sync::{Semaphore, mpsc};

/// Runs one batch and answers its jobs.
pub(crate) type Flush<J> = fn(PgPool, Vec<J>) -> BoxFuture<'static, ()>;

/// The queue in front of one dispatcher.
pub(crate) struct Batcher<J> {
    pool: PgPool,
    slots: usize,
    max: usize,
    flush: Flush<J>,
    queue: Mutex<Option<mpsc::UnboundedSender<J>>>,
}

impl<J: Send + 'static> Batcher<J> {
    /// A batcher running at most `slots` batches of at most `max` jobs at
    /// once through `flush`. The dispatcher starts with the first job.
    pub fn new(pool: PgPool, slots: usize, max: usize, flush: Flush<J>) -> Self {
        Batcher {
            pool,
            slots: slots.max(1),
            max: max.max(1),
            flush,
            queue: Mutex::new(None),
        }
    }

    /// Queues `job`; gives it back when no dispatcher can be started (the
    /// runtime is shutting down).
    pub fn send(&self, job: J) -> Result<(), J> {
        let mut queue = lock(&self.queue);
        let job = match queue.as_ref().filter(|tx| !tx.is_closed()) {
            Some(tx) => match tx.send(job) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        // No dispatcher, or the last one is gone (its runtime shut down).
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(dispatch(
            rx,
            self.pool.clone(),
            Arc::new(Semaphore::new(self.slots)),
            self.max,
            self.flush,
        ));
        let sent = tx.send(job).map_err(|mpsc::error::SendError(job)| job);
        *queue = Some(tx);
        sent
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded value is replaced whole, so a poisoned lock is safe to use.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes batches off the queue, one per free slot, until every sender is
/// gone.
async fn dispatch<J: Send + 'static>(
    mut rx: mpsc::UnboundedReceiver<J>,
    pool: PgPool,
    slots: Arc<Semaphore>,
    max: usize,
    flush: Flush<J>,
) {
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < max {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let run = flush(pool.clone(), batch);
        tokio::spawn(async move {
            run.await;
            drop(slot);
        });
    }
}
