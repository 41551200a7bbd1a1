use futures::FutureExt;
use holdpoint::Status;
use holdpoint::model::FinishReason;
use holdpoint::session::{AuditDecision, SessionState, Snapshot};

use super::*;
use crate::row::{Columns, decode};

#[test]
fn a_claim_appended_to_a_document_decodes_as_the_claimed_row() {
    let mut row = Snapshot::new(SessionState::new("s"));
    row.snapshot_id = "id".into();
    row.finish_reason = Some(FinishReason::Interrupted);
    let data = Columns::of(&row).unwrap().data;
    let at = Utc::now();
    let until = at + chrono::Duration::seconds(60);
    let members = claim_members(at, until).unwrap();
    let claimed = with_claim_members(&data, &members).unwrap();
    let mut expected = row.clone();
    expected.resumed_at = Some(at);
    expected.resume_lease_until = Some(until);
    assert_eq!(decode("id", &claimed).unwrap(), expected);
    // A document that names a claim key, or is no object, is claimed whole.
    assert_eq!(with_claim_members(&claimed, &members), None);
    let mut leased = row;
    leased.resume_lease_until = Some(until);
    let leased = Columns::of(&leased).unwrap().data;
    assert_eq!(with_claim_members(&leased, &members), None);
    assert_eq!(with_claim_members("{}", &members), None);
    assert_eq!(with_claim_members("[1]", &members), None);
}

/// A transaction over one in-memory row that records the steps run.
struct Fake {
    row: Option<Snapshot>,
    in_place: InPlace,
    steps: Vec<String>,
}

impl Fake {
    fn new(in_place: InPlace) -> Self {
        let mut row = Snapshot::new(SessionState::new("s"));
        row.snapshot_id = "id".into();
        row.finish_reason = Some(FinishReason::Interrupted);
        Fake {
            row: (in_place != InPlace::Missing).then_some(row),
            in_place,
            steps: Vec::new(),
        }
    }
}

impl ClaimTx for Fake {
    type Error = Error;

    async fn claim_in_place(&mut self, first: &Arc<FirstClaim>) -> Result<InPlace> {
        self.steps
            .push(format!("in place {} ({} audit)", first.id, first.audit.len()));
        Ok(self.in_place)
    }

    async fn save(&mut self, id: &str, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        self.steps.push(format!("save {id}"));
        let next = update(self.row.as_ref())?;
        self.row = next.clone();
        Ok(next)
    }

    async fn append_audit(&mut self, rows: &[AuditColumns]) -> Result<()> {
        self.steps.push(format!("audit {}", rows.len()));
        Ok(())
    }

    async fn append_outbox(&mut self, rows: &[OutboxColumns]) -> Result<()> {
        self.steps.push(format!("outbox {}", rows.len()));
        Ok(())
    }
}

fn run(tx: &mut Fake, claim: ResumeClaim) -> Result<()> {
    let record = AuditRecord {
        id: "audit-1".into(),
        at: Utc::now(),
        principal: None,
        actor: None,
        agent: None,
        session_id: "s".into(),
        snapshot_id: "id".into(),
        tool: "transfer".into(),
        reference: None,
        input_hash: "0".repeat(64),
        input: None,
        original_input: None,
        original_input_hash: None,
        decision: AuditDecision::Approve,
        reason: None,
        held_by: None,
        settles: false,
        mcp: None,
        grant: None,
    };
    super::claim(tx, claim, &[record], Vec::new())
        .now_or_never()
        .expect("the fake never waits")
}

#[test]
fn a_first_claim_taken_in_place_writes_nothing_else() {
    let mut tx = Fake::new(InPlace::Taken);
    run(&mut tx, ResumeClaim::new("id")).unwrap();
    assert_eq!(tx.steps, ["in place id (1 audit)"]);
}

#[test]
fn a_refused_first_claim_is_aborted_or_not_found_and_writes_nothing() {
    for (found, status) in [
        (InPlace::Claimed, Status::Aborted),
        (InPlace::Missing, Status::NotFound),
    ] {
        let mut tx = Fake::new(found);
        let err = run(&mut tx, ResumeClaim::new("id")).unwrap_err();
        assert_eq!(err.status(), status, "{found:?}");
        assert_eq!(tx.steps, ["in place id (1 audit)"], "{found:?}");
    }
}

#[test]
fn a_document_that_cannot_take_the_claim_is_claimed_whole_then_recorded() {
    let mut tx = Fake::new(InPlace::Whole);
    run(&mut tx, ResumeClaim::new("id")).unwrap();
    assert_eq!(tx.steps, ["in place id (1 audit)", "save id", "audit 1", "outbox 0"]);
    assert!(tx.row.unwrap().resumed_at.is_some());
}

#[test]
fn a_takeover_takes_the_general_path_only() {
    // An unclaimed row cannot be taken over: the update refuses, and
    // nothing after it runs.
    let mut tx = Fake::new(InPlace::Taken);
    let err = run(&mut tx, ResumeClaim::new("id").takeover()).unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert_eq!(tx.steps, ["save id"]);
}
