//! The claim step of a turn (docs/reference.md §7): the exactly-once claim a resume,
//! a settlement or an abandoning message makes before anything runs.
//!
//! Invariant: when [`claim`] fails, nothing was claimed and no audit
//! record was written; when it succeeds with a stored claim, the returned
//! [`Hold`] is the only way the turn's outcome gets written (see
//! `hold.rs`).

use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

use super::super::audit::{self, AuditContext};
use super::super::hold::Hold;
use super::super::io::AgentInput;
use super::super::load::{Holds, Session, TurnKind};
use super::super::{AgentDef, principal_of};

use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::hold::actor_of;
use crate::session::{ResumeClaim, SessionStore, Snapshot};

/// What a turn claimed before its tools run: `claimed` once the store
/// recorded a claim on the paused snapshot (or on client-held state), and
/// the hold on a stored claim.
#[derive(Default)]
pub(super) struct Claimed {
    pub claimed: bool,
    pub hold: Option<Box<Hold>>,
    /// The child snapshots the nested answers were checked against, for
    /// the sub-agent calls this resume restarts to start from.
    pub nested: Vec<Snapshot>,
}

impl Claimed {
    fn held(hold: Hold) -> Claimed {
        Claimed {
            claimed: true,
            hold: Some(Box::new(hold)),
            nested: Vec::new(),
        }
    }

    /// The id a detached run's pending row takes: the paused snapshot's
    /// successor when the turn holds a stored claim (its outcome would
    /// take that id), else a fresh one.
    pub fn successor(&self) -> Option<String> {
        self.hold.as_ref().map(|h| h.successor().to_owned())
    }
}

/// The exactly-once step of the turn `input` starts on `session`, by its
/// [`TurnKind`]. Fails with what the caller should hear; nothing was
/// claimed then.
pub(super) async fn claim(
    def: &AgentDef,
    session: &Session,
    input: &AgentInput,
    context: &Map<String, Value>,
) -> Result<Claimed> {
    let kind = TurnKind::of(session, input, def.store.is_some())?;
    match (kind, input.resume.as_ref()) {
        (TurnKind::Fresh, _) => Ok(Claimed::default()),
        (TurnKind::Abandon, _) => abandon_holds(def, session, context).await,
        (TurnKind::Resume | TurnKind::Settle, Some(resume)) => claim_resume(def, session, resume, kind, context).await,
        // `TurnKind::of` gives a resume kind only to an input with one.
        (TurnKind::Resume | TurnKind::Settle, None) => Ok(Claimed::default()),
    }
}

/// The audit context of a turn on `session`'s stored snapshot `id`.
fn audit_context<'a>(
    def: &'a AgentDef,
    session: &'a Session,
    id: &'a str,
    context: &'a Map<String, Value>,
) -> AuditContext<'a> {
    AuditContext {
        principal: principal_of(context),
        actor: actor_of(context),
        agent: &def.name,
        session_id: &session.state.session_id,
        snapshot_id: id,
    }
}

/// A resume (or a settlement): checks it against the history, audits its
/// decisions and claims the paused snapshot, or the client-held state
/// when state claims are recorded (docs/reference.md §9).
async fn claim_resume(
    def: &AgentDef,
    session: &Session,
    resume: &Resume,
    kind: TurnKind,
    context: &Map<String, Value>,
) -> Result<Claimed> {
    // The one decision path: every answer is decoded, validated and
    // authorised, at every level, before anything is claimed.
    let nested = {
        let purpose = match kind {
            TurnKind::Settle => super::super::decide::Purpose::Settle,
            _ => super::super::decide::Purpose::Resume,
        };
        super::super::decide::check(def, session, resume, purpose, context).await?
    };
    if let (Some(store), Some(id)) = (&def.store, &session.snapshot_id) {
        let mut claimed = claim_snapshot(def, store, session, id, resume, kind, context).await?;
        claimed.nested = nested;
        return Ok(claimed);
    }
    if let (Some(claims), Some(key)) = (&def.claims, &session.state_claim) {
        let span = tracing::info_span!("resume_decision", state_claim = %key);
        super::super::state_claim::claim(claims, key, &def.name, &session.state.session_id)
            .instrument(span)
            .await?;
    }
    Ok(Claimed::default())
}

/// Claims the stored paused snapshot `id` for a resume: refused when the
/// session went on past it, or when the store already holds a claim (a
/// settlement instead takes over a lapsed one).
async fn claim_snapshot(
    def: &AgentDef,
    store: &Arc<dyn SessionStore>,
    session: &Session,
    id: &str,
    resume: &Resume,
    kind: TurnKind,
    context: &Map<String, Value>,
) -> Result<Claimed> {
    let settles = kind == TurnKind::Settle;
    // A sub-agent call resumed by its parent names the child snapshot its
    // parent's paused (trusted) snapshot holds: the session cannot have
    // gone on past it but through that parent, and an abandonment claims
    // it, which the claim below finds.
    if !def.nesting.resumed_by_parent(context) {
        check_not_left_behind(store.as_ref(), session, id).await?;
    }
    let ctx = audit_context(def, session, id, context);
    let mut records = audit::records(&ctx, &session.state.messages, resume);
    for r in &mut records {
        r.settles = settles;
        r.mcp = def.mcp_origin(&r.tool);
    }
    let waited_ms = session
        .saved_at
        .map(|t| (chrono::Utc::now() - t).num_milliseconds())
        .unwrap_or(0);
    let span = tracing::info_span!(
        "resume_decision",
        snapshot_id = %id,
        decisions = records.len(),
        waited_ms,
        settles
    );
    for r in &records {
        tracing::info!(
            parent: &span,
            tool = %r.tool,
            r#ref = r.reference.as_deref().unwrap_or(""),
            decision = r.decision.as_str(),
            principal = r.principal.as_deref().unwrap_or(""),
            "interrupt answered"
        );
    }
    let mut claim = ResumeClaim::new(id.to_owned()).lease(def.resume_lease);
    if settles {
        claim = claim.takeover();
    }
    let hold = Hold::new(Arc::clone(store), &claim, def.resume_lease);
    if let Err(refused) = store.claim_resume(claim, records).instrument(span).await {
        let sid = &session.state.session_id;
        return Err(audit::explain_refused(def.capabilities.audit.as_deref(), &def.name, sid, id, refused).await);
    }
    Ok(Claimed::held(hold))
}

/// Refuses to answer open paused calls of a snapshot not known to be its
/// session's latest when the session went on without answering them (a
/// branch from an earlier snapshot, or rows written before new messages
/// abandoned paused calls): answering now would fork it.
async fn check_not_left_behind(store: &dyn SessionStore, session: &Session, id: &str) -> Result<()> {
    if session.holds != Holds::Open || session.latest {
        return Ok(());
    }
    let Some(latest) = store.get_latest_snapshot(&session.state.session_id).await? else {
        return Ok(());
    };
    if latest.snapshot_id == id {
        return Ok(());
    }
    // A concurrent resume or new message may have claimed it since it was
    // read and written its outcome: then the claim that follows fails and
    // says so ("already resumed", or the abandonment), instead of this
    // calling it left behind.
    let claimed = store.get_snapshot(id).await?.is_some_and(|s| s.resumed_at.is_some());
    if claimed {
        return Ok(());
    }
    Err(Error::Aborted(format!(
        "snapshot {id} was left behind: its session went on (snapshot {} follows it) without answering its paused calls, so they can no longer be answered",
        latest.snapshot_id
    )))
}

/// A new message on a session whose stored snapshot ends interrupted
/// *abandons* the paused calls. It claims the snapshot as a resume would
/// (so of a new message and a concurrent approval exactly one wins; the
/// other is refused with `ABORTED`) and records an `abandon` audit
/// decision per paused call; a later resume of that snapshot is refused.
/// A snapshot whose calls were closed before it was read (answered, or
/// abandoned) may be branched from once the claim's outcome is written;
/// while the claiming turn still runs (it is the session's latest) the
/// message is refused, unless that turn was an abandoning message whose
/// claim lapsed (its process died): then this message takes the claim
/// over.
async fn abandon_holds(def: &AgentDef, session: &Session, context: &Map<String, Value>) -> Result<Claimed> {
    let (Some(store), Some(id)) = (&def.store, &session.snapshot_id) else {
        return Ok(Claimed::default());
    };
    match session.holds {
        Holds::None => Ok(Claimed::default()),
        Holds::Claimed | Holds::InDoubt => take_over_abandoning(def, store, session, id).await,
        Holds::Open => abandon_open(def, store, session, id, context).await,
    }
}

/// Claims open paused calls for a new message, auditing each `abandoned`.
async fn abandon_open(
    def: &AgentDef,
    store: &Arc<dyn SessionStore>,
    session: &Session,
    id: &str,
    context: &Map<String, Value>,
) -> Result<Claimed> {
    let ctx = audit_context(def, session, id, context);
    let records = audit::abandoned(&ctx, &session.state.messages);
    let span = tracing::info_span!("abandon_holds", snapshot_id = %id, calls = records.len());
    for r in &records {
        tracing::info!(
            parent: &span,
            tool = %r.tool,
            r#ref = r.reference.as_deref().unwrap_or(""),
            "paused call abandoned by a new message"
        );
    }
    let claim = ResumeClaim::new(id.to_owned()).lease(def.resume_lease);
    let hold = Hold::new(Arc::clone(store), &claim, def.resume_lease);
    if let Err(refused) = store.claim_resume(claim, records).instrument(span).await {
        let sid = &session.state.session_id;
        return Err(audit::explain_refused(def.capabilities.audit.as_deref(), &def.name, sid, id, refused).await);
    }
    // Nesting hook: what runs below the calls abandoned here goes too.
    let history = &session.state.messages;
    def.nesting
        .abandon_below(store.as_ref(), history, context, def.resume_lease)
        .await;
    Ok(Claimed::held(hold))
}

/// A new message on a snapshot whose calls were closed before it was read.
/// Nothing to claim when the session went on past it (a branch). While
/// it is the session's latest its claiming turn still runs: refused, but
/// for an abandoning turn whose process died (its claim lapsed and nothing
/// follows), which would leave the session stuck (its calls are not in
/// doubt: they never run, so nobody settles them). The message takes that
/// claim over, so that a frozen turn waking up later writes nothing (see
/// [`Hold`]).
async fn take_over_abandoning(
    def: &AgentDef,
    store: &Arc<dyn SessionStore>,
    session: &Session,
    id: &str,
) -> Result<Claimed> {
    let sid = &session.state.session_id;
    let Some(latest) = store.get_latest_snapshot(sid).await?.filter(|l| l.snapshot_id == id) else {
        return Ok(Claimed::default());
    };
    let abandoned = audit::abandoned_at(def.capabilities.audit.as_deref(), &def.name, sid, id).await;
    if abandoned.is_some() && latest.resume_lapsed(chrono::Utc::now()) {
        let claim = ResumeClaim::new(id.to_owned()).lease(def.resume_lease).takeover();
        let hold = Hold::new(Arc::clone(store), &claim, def.resume_lease);
        store.claim_resume(claim, Vec::new()).await?;
        return Ok(Claimed::held(hold));
    }
    let refused = Error::AlreadyResumed(id.to_owned());
    Err(audit::explain_refused(def.capabilities.audit.as_deref(), &def.name, sid, id, refused).await)
}
