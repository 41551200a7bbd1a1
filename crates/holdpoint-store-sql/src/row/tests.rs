use super::*;
use holdpoint::model::FinishReason;

#[test]
fn columns_copy_the_document() {
    let mut row = Snapshot::new(SessionState::new("s"));
    row.snapshot_id = "id".into();
    row.status = SnapshotStatus::Pending;
    row.finish_reason = Some(FinishReason::Interrupted);
    row.owner = Some("alice".into());
    let cols = Columns::of(&row).unwrap();
    assert_eq!(cols.status, "pending");
    assert_eq!(cols.finish_reason.as_deref(), Some("interrupted"));
    assert_eq!(cols.owner.as_deref(), Some("alice"));
    assert_eq!(cols.created_at_ns, row.created_at.timestamp_nanos_opt().unwrap());
    assert_eq!(cols.resumed_at_ns, None);
    assert_eq!(decode("id", &cols.data).unwrap(), row);
}

#[test]
fn stale_pending_columns_read_expired() {
    let old = (Utc::now() - chrono::Duration::seconds(90))
        .timestamp_nanos_opt()
        .unwrap();
    let now = Utc::now().timestamp_nanos_opt().unwrap();
    assert_eq!(read_status("x", "pending", old, None).unwrap(), SnapshotStatus::Expired);
    assert_eq!(
        read_status("x", "pending", old, Some(now)).unwrap(),
        SnapshotStatus::Pending
    );
    assert_eq!(
        read_status("x", "completed", old, None).unwrap(),
        SnapshotStatus::Completed
    );
    assert!(read_status("x", "bogus", old, None).is_err());
}

#[test]
fn far_dates_are_refused() {
    let mut row = Snapshot::new(SessionState::new("s"));
    row.created_at = DateTime::parse_from_rfc3339("3000-01-01T00:00:00Z").unwrap().to_utc();
    assert_eq!(
        Columns::of(&row).err().map(|e| e.status()),
        Some(holdpoint::Status::InvalidArgument)
    );
}
