//! The fill: copies of one real cycle's rows, written through the store API
//! in concurrent batches (SQLite and PostgreSQL share commits between
//! them, as under load).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use holdpoint::agent::Agent;
use holdpoint::session::{AuditQuery, AuditRecord, SessionStore, Snapshot, mint_id};

use crate::cycle;
use crate::drive;

/// How many approver roles the holds are spread over.
pub const ROLES: usize = 20;

/// Writers filling at once.
const WRITERS: usize = 32;

/// Audit records appended per call.
const AUDIT_BATCH: usize = 64;

/// The name of approver role `n`.
pub fn role(n: usize) -> String {
    format!("role-{n}")
}

/// The rows of one real cycle, per approver role: the hold as saved
/// (waiting), the same hold claimed, the finished turn, and its audit
/// records.
pub struct Templates {
    waiting: Vec<Snapshot>,
    claimed: Vec<Snapshot>,
    done: Vec<Snapshot>,
    audit: Vec<AuditRecord>,
    base: DateTime<Utc>,
}

fn session(i: usize) -> String {
    format!("fill-{i:07}")
}

fn with_role(row: &Snapshot, role: &str) -> Result<Snapshot, String> {
    let text = serde_json::to_string(row).map_err(|e| e.to_string())?;
    serde_json::from_str(&text.replace("\"finance\"", &format!("\"{role}\""))).map_err(|e| e.to_string())
}

impl Templates {
    /// Runs one cycle of the governed agent and keeps its rows.
    pub async fn capture(
        agent: &Agent,
        tool: &cycle::TransferTool,
        store: &Arc<dyn SessionStore>,
    ) -> Result<Self, String> {
        let err = |e: holdpoint::Error| e.to_string();
        let driver = drive::Driver::Direct(agent.clone());
        let paused = driver.pause().await.map_err(err)?;
        let id = paused.session_id.clone();
        let hold = store
            .get_latest_snapshot(&id)
            .await
            .map_err(err)?
            .ok_or("the paused session has no snapshot")?;
        driver.approve(tool, paused).await.map_err(err)?;
        let done = store
            .get_latest_snapshot(&id)
            .await
            .map_err(err)?
            .ok_or("the finished session has no snapshot")?;
        let claimed = store
            .get_snapshot(&hold.snapshot_id)
            .await
            .map_err(err)?
            .ok_or("the claimed hold is gone")?;
        let audit = store
            .capabilities()
            .audit()
            .map_err(err)?
            .list_audit(&AuditQuery {
                session_id: Some(id),
                ..AuditQuery::default()
            })
            .await
            .map_err(err)?;
        if !hold.is_waiting() || claimed.resumed_at.is_none() || audit.is_empty() {
            return Err("the captured cycle did not write a hold, a claim and an audit record".into());
        }
        let mut t = Templates {
            waiting: Vec::new(),
            claimed: Vec::new(),
            done: Vec::new(),
            audit,
            base: Utc::now() - Duration::days(40),
        };
        for r in 0..ROLES {
            let name = role(r);
            t.waiting.push(with_role(&hold, &name)?);
            t.claimed.push(with_role(&claimed, &name)?);
            t.done.push(with_role(&done, &name)?);
        }
        Ok(t)
    }

    /// A finished session among the first `n` (`k` picks which).
    pub fn finished_session(&self, k: usize) -> String {
        session(k - k % 10 + 1 + k % 9)
    }

    /// A stored snapshot id among the first `k + 1` sessions: the hold of
    /// session `k`, or its finished turn.
    pub fn snapshot_id(&self, k: usize) -> String {
        if !k.is_multiple_of(10) && !k.is_multiple_of(2) {
            format!("{}-d", session(k))
        } else {
            format!("{}-h", session(k))
        }
    }

    /// The rows of session `i`: its hold (waiting for one in ten, claimed
    /// otherwise), its finished turn and audit records when finished.
    fn rows(&self, i: usize) -> (Snapshot, Option<(Snapshot, Vec<AuditRecord>)>) {
        let id = session(i);
        let r = (i / 100) % ROLES;
        let agent = match (i / 10) % 10 {
            0 => "bankingAgent".to_owned(),
            a => format!("agent-{a}"),
        };
        let owner = format!("user-{}", (i * 7919) % 1000);
        let at = self.base + Duration::milliseconds(10 * i as i64);
        let waiting = i.is_multiple_of(10);
        let mut hold = if waiting { &self.waiting[r] } else { &self.claimed[r] }.clone();
        let hold_id = format!("{id}-h");
        let lease = hold.resume_lease_until.zip(hold.resumed_at).map(|(u, r)| u - r);
        hold.snapshot_id = hold_id.clone();
        hold.session_id = id.clone();
        if let Some(state) = hold.state.as_mut() {
            state.session_id = id.clone();
        }
        hold.agent = Some(agent.clone());
        hold.owner = Some(owner.clone());
        hold.created_at = at;
        hold.updated_at = at;
        if !waiting {
            hold.resumed_at = Some(at + Duration::milliseconds(1));
            hold.resume_lease_until = lease.map(|l| at + Duration::milliseconds(1) + l);
        }
        if waiting {
            return (hold, None);
        }
        let mut done = self.done[r].clone();
        done.snapshot_id = format!("{id}-d");
        done.session_id = id.clone();
        if let Some(state) = done.state.as_mut() {
            state.session_id = id.clone();
        }
        done.parent_id = Some(hold_id.clone());
        done.agent = Some(agent.clone());
        done.owner = Some(owner);
        done.created_at = at + Duration::milliseconds(2);
        done.updated_at = done.created_at;
        let audit = self
            .audit
            .iter()
            .map(|a| AuditRecord {
                id: mint_id(),
                at: at + Duration::milliseconds(1),
                agent: Some(agent.clone()),
                session_id: id.clone(),
                snapshot_id: hold_id.clone(),
                ..a.clone()
            })
            .collect();
        (hold, Some((done, audit)))
    }

    /// Writes sessions `from..to`, unless an earlier run filled this
    /// store that far (its last session's hold is there): then the run
    /// measures the store as it is.
    pub async fn fill(self: &Arc<Self>, store: &Arc<dyn SessionStore>, from: usize, to: usize) -> Result<(), String> {
        if to > from {
            let last = format!("{}-h", session(to - 1));
            if store.get_snapshot(&last).await.map_err(|e| e.to_string())?.is_some() {
                eprintln!("scale: {to} sessions are there already; not filling");
                return Ok(());
            }
        }
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let (store, templates) = (Arc::clone(store), Arc::clone(self));
            let trail = store.capabilities().audit().map_err(|e| e.to_string())?.clone();
            writers.push(tokio::spawn(async move {
                let mut audit = Vec::with_capacity(AUDIT_BATCH);
                let mut i = from + w;
                while i < to {
                    let (hold, done) = templates.rows(i);
                    let hold_id = hold.snapshot_id.clone();
                    store.insert_snapshot(&hold_id, hold).await?;
                    if let Some((done, records)) = done {
                        let done_id = done.snapshot_id.clone();
                        store.insert_snapshot(&done_id, done).await?;
                        audit.extend(records);
                        if audit.len() >= AUDIT_BATCH {
                            trail.append_audit(std::mem::take(&mut audit)).await?;
                        }
                    }
                    i += WRITERS;
                }
                trail.append_audit(audit).await
            }));
        }
        for w in writers {
            w.await
                .map_err(|e| format!("fill writer panicked: {e}"))?
                .map_err(|e| format!("fill: {e}"))?;
        }
        Ok(())
    }
}
