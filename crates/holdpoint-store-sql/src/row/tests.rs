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

/// A row owned by `owner` (no paused calls, so no roles in its document)
/// as a listing reads it, with `approvers` as its column.
fn listed(id: &str, owner: Option<&str>, approvers: Option<&str>) -> Listed {
    let mut row = Snapshot::new(SessionState::new(id));
    row.snapshot_id = id.into();
    row.owner = owner.map(str::to_owned);
    Listed {
        snapshot_id: id.into(),
        data: serde_json::to_string(&row).unwrap(),
        approvers: approvers.map(str::to_owned),
    }
}

#[test]
fn a_viewer_is_checked_on_every_listed_row() {
    let query = SnapshotQuery {
        viewer: Some(holdpoint::session::Viewer {
            principal: Some("olga".into()),
            roles: vec!["finance".into()],
        }),
        ..SnapshotQuery::default()
    };
    let finance = approvers_column(&["finance".into()]);
    let legal = approvers_column(&["legal".into()]);
    let rows = [
        // Recorded roles: checked from the column.
        listed("finance", Some("alice"), Some(&finance)),
        listed("legal", Some("alice"), Some(&legal)),
        listed("none", Some("alice"), Some("")),
        listed("near", Some("alice"), Some(&approvers_column(&["financ".into()]))),
        // Roles not recorded: checked on the document, which names none.
        listed("unset", Some("alice"), None),
        listed("too-many", Some("alice"), Some(APPROVERS_NOT_RECORDED)),
        // No owner, or the viewer's own: seen whatever the roles.
        listed("unowned", None, Some(&legal)),
        listed("own", Some("olga"), None),
    ];
    let seen: Vec<String> = decode_viewed(rows, &query)
        .unwrap()
        .into_iter()
        .map(|s| s.snapshot_id)
        .collect();
    assert_eq!(seen, ["finance", "unowned", "own"]);

    // Without a viewer every row passes; decode_listed checks the documents.
    let all = decode_viewed([listed("a", Some("alice"), Some(&legal))], &SnapshotQuery::default()).unwrap();
    assert_eq!(all.len(), 1);
    let plain = decode_listed(vec![("x".into(), listed("x", Some("alice"), None).data)], &query).unwrap();
    assert!(plain.is_empty());
}
