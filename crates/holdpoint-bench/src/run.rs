//! The measured loops: full approval cycles, or many sessions paused
//! first and then approved, on `concurrency` workers.

use std::time::{Duration, Instant};

use crate::cycle;
use crate::drive;
use crate::sys;

pub(crate) async fn run_cycles(
    agent: &drive::Driver,
    tool: &cycle::TransferTool,
    n: usize,
    concurrency: usize,
) -> holdpoint::Result<(Vec<Duration>, Vec<Duration>)> {
    let per_worker = n.div_ceil(concurrency.max(1));
    let mut workers = Vec::new();
    for w in 0..concurrency.max(1) {
        let agent = agent.clone();
        let tool = tool.clone();
        let count = per_worker.min(n.saturating_sub(w * per_worker));
        workers.push(tokio::spawn(async move {
            let mut cycles = Vec::with_capacity(count);
            let mut resumes = Vec::with_capacity(count);
            for _ in 0..count {
                let started = Instant::now();
                let paused = agent.pause().await?;
                resumes.push(agent.approve(&tool, paused).await?);
                cycles.push(started.elapsed());
            }
            Ok::<_, holdpoint::Error>((cycles, resumes))
        }));
    }
    let mut cycles = Vec::with_capacity(n);
    let mut resumes = Vec::with_capacity(n);
    for w in workers {
        let (c, r) = w
            .await
            .map_err(|e| holdpoint::Error::Internal(format!("worker panicked: {e}")))??;
        cycles.extend(c);
        resumes.extend(r);
    }
    Ok((cycles, resumes))
}

/// What the caller keeps of a paused session until it approves it.
enum Held {
    /// The session id only.
    Id(String),
    /// The paused part as the turn returned it.
    Part(Box<drive::Paused>),
}

pub(crate) async fn run_paused(
    agent: &drive::Driver,
    tool: &cycle::TransferTool,
    k: usize,
    concurrency: usize,
) -> holdpoint::Result<(Vec<Duration>, f64)> {
    // In process the caller keeps only the session ids (what a ticket or a
    // queue would hold) and reads each waiting call back when approving, so
    // the figure is what the agent and its store keep per paused session.
    // Over HTTP it keeps the paused part the response carried.
    let in_process = matches!(agent, drive::Driver::Direct(_));
    let before = sys::rss_bytes();
    let mut paused: Vec<Held> = Vec::with_capacity(k);
    for _ in 0..k {
        let p = agent.pause().await?;
        paused.push(if in_process {
            Held::Id(p.session_id)
        } else {
            Held::Part(Box::new(p))
        });
    }
    let after = sys::rss_bytes();
    let per_session = after.saturating_sub(before) as f64 / k.max(1) as f64;
    let chunks: Vec<Vec<Held>> = {
        let mut chunks: Vec<Vec<Held>> = (0..concurrency.max(1)).map(|_| Vec::new()).collect();
        for (i, p) in paused.into_iter().enumerate() {
            chunks[i % concurrency.max(1)].push(p);
        }
        chunks
    };
    let mut workers = Vec::new();
    for chunk in chunks {
        let agent = agent.clone();
        let tool = tool.clone();
        workers.push(tokio::spawn(async move {
            let mut times = Vec::with_capacity(chunk.len());
            for held in chunk {
                let p = match held {
                    Held::Part(p) => *p,
                    Held::Id(id) => agent
                        .reload(id)
                        .await?
                        .ok_or_else(|| holdpoint::Error::Internal("cannot read a paused call back".into()))?,
                };
                times.push(agent.approve(&tool, p).await?);
            }
            Ok::<_, holdpoint::Error>(times)
        }));
    }
    let mut resumes = Vec::with_capacity(k);
    for w in workers {
        resumes.extend(
            w.await
                .map_err(|e| holdpoint::Error::Internal(format!("worker panicked: {e}")))??,
        );
    }
    Ok((resumes, per_session))
}
