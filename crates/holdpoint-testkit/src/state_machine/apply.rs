//! One [`Op`] run against the store and the model, each answer compared.

use super::Op;
use super::model::{Model, Row, now_secs, set_marker};
use chrono::{Duration, Utc};
use futures::StreamExt;
use holdpoint::session::SessionStoreExt;
use holdpoint::session::{ResumeClaim, SessionState, SessionStore, Snapshot, SnapshotStatus};
use holdpoint::{ErrorBody, FinishReason, Status};

pub(super) async fn apply(m: &mut Model, store: &dyn SessionStore, op: &Op) -> Result<(), String> {
    match op {
        Op::Create {
            session,
            status,
            created,
            stale,
            fixed_id,
        } => {
            let session_id = m.session(*session);
            let now = now_secs();
            let mut row = Snapshot::new(SessionState::new(session_id.clone()));
            row.created_at = m.base + Duration::seconds(i64::from(*created));
            row.updated_at = now;
            row.status = *status;
            if *status == SnapshotStatus::Pending {
                row.heartbeat_at = Some(if *stale { now - Duration::minutes(10) } else { now });
            }
            let marker = m.next_marker();
            set_marker(&mut row, marker);
            let id = fixed_id.then(|| format!("{}-n{}", m.prefix, m.writes));
            let written = row.clone();
            let saved = store
                .save_snapshot(id.as_deref(), Box::new(move |_| Ok(Some(written))))
                .await
                .map_err(|e| format!("create: {e}"))?
                .ok_or("create wrote nothing")?;
            if let Some(id) = &id {
                check_eq!(saved.snapshot_id, *id, "the caller's id");
            }
            if saved.snapshot_id.is_empty() || m.rows.contains_key(&saved.snapshot_id) {
                return Err(format!("create: bad or reused id {:?}", saved.snapshot_id));
            }
            let mut model_row = Row::of(&row);
            model_row.id = saved.snapshot_id.clone();
            check_eq!(Row::of(&saved), model_row, "the row create returned");
            m.order.push(saved.snapshot_id.clone());
            m.rows.insert(saved.snapshot_id, model_row);
        }
        Op::Update {
            row,
            status,
            created,
            move_session,
        } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let marker = m.next_marker();
            let other = format!("{}-elsewhere", m.prefix);
            let base = m.base;
            let (status, created, move_session) = (*status, *created, *move_session);
            let result = store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| {
                        let mut next = existing
                            .cloned()
                            .ok_or_else(|| holdpoint::Error::NotFound("gone".into()))?;
                        if let Some(s) = status {
                            next.status = s;
                        }
                        if let Some(c) = created {
                            next.created_at = base + Duration::seconds(i64::from(c));
                        }
                        if move_session {
                            next.session_id = other;
                        }
                        set_marker(&mut next, marker);
                        Ok(Some(next))
                    }),
                )
                .await;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            if move_session {
                if result.is_ok() {
                    return Err("a save changed a row's session id".into());
                }
            } else {
                let saved = result
                    .map_err(|e| format!("update: {e}"))?
                    .ok_or("update wrote nothing")?;
                if let Some(s) = status {
                    model_row.status = s;
                }
                if let Some(c) = created {
                    model_row.created_at = base + Duration::seconds(i64::from(c));
                }
                model_row.marker = marker;
                check_eq!(Row::of(&saved), *model_row, "the row update returned");
            }
            m.compare_read(store, &id).await?;
        }
        Op::Skip { row } | Op::Fail { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let fail = matches!(op, Op::Fail { .. });
            let result = store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |_| {
                        if fail {
                            Err(holdpoint::Error::FailedPrecondition("refused".into()))
                        } else {
                            Ok(None)
                        }
                    }),
                )
                .await;
            match (fail, result) {
                (true, Err(e)) => check_eq!(e.status(), Status::FailedPrecondition, "a failed update's error"),
                (false, Ok(None)) => {}
                (_, other) => return Err(format!("skip/fail: unexpected {other:?}")),
            }
            m.compare_read(store, &id).await?;
        }
        Op::Claim { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let result = store.claim_resume(ResumeClaim::new(id.clone()), Vec::new()).await;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            match (model_row.resumed, result) {
                (false, Ok(())) => model_row.resumed = true,
                (true, Err(e)) => check_eq!(e.status(), Status::Aborted, "a second claim's error"),
                (was, other) => return Err(format!("claim (resumed before: {was}): {other:?}")),
            }
            m.compare_read(store, &id).await?;
        }
        Op::ClaimRace { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let claims = (0..4).map(|_| store.claim_resume(ResumeClaim::new(id.clone()), Vec::new()));
            let results = futures::future::join_all(claims).await;
            let wins = results.iter().filter(|r| r.is_ok()).count();
            if let Some(e) = results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .find(|e| e.status() != Status::Aborted)
            {
                return Err(format!("a losing claim failed with {e}"));
            }
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            check_eq!(wins, usize::from(!model_row.resumed), "winners of concurrent claims");
            model_row.resumed = true;
            m.compare_read(store, &id).await?;
        }
        Op::Abort { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let before = Utc::now();
            let previous = store.abort(&id).await.map_err(|e| format!("abort: {e}"))?;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            check_eq!(previous, Some(model_row.read_status(before)), "the status abort read");
            if model_row.status == SnapshotStatus::Pending {
                model_row.status = SnapshotStatus::Aborting;
            }
            m.compare_read(store, &id).await?;
        }
        Op::Heartbeat { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let at = now_secs();
            store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| {
                        Ok(existing.filter(|r| r.status == SnapshotStatus::Pending).map(|r| {
                            let mut next = r.clone();
                            next.heartbeat_at = Some(at);
                            next
                        }))
                    }),
                )
                .await
                .map_err(|e| format!("heartbeat: {e}"))?;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            if model_row.status == SnapshotStatus::Pending {
                model_row.heartbeat_at = Some(at);
            }
            m.compare_read(store, &id).await?;
        }
        Op::Finalize { row, failed } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let at = now_secs();
            let failed = *failed;
            let (status, finish) = if failed {
                (SnapshotStatus::Failed, FinishReason::Failed)
            } else {
                (SnapshotStatus::Completed, FinishReason::Stop)
            };
            let error = failed.then(|| ErrorBody {
                status: Status::Internal,
                message: "boom".into(),
            });
            let written_error = error.clone();
            store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| {
                        let Some(row) = existing else { return Ok(None) };
                        let mut next = row.clone();
                        next.updated_at = at;
                        next.heartbeat_at = Some(at);
                        if matches!(row.status, SnapshotStatus::Aborting | SnapshotStatus::Aborted) {
                            next.status = SnapshotStatus::Aborted;
                            next.finish_reason = Some(FinishReason::Aborted);
                            next.error = None;
                        } else {
                            next.status = status;
                            next.finish_reason = Some(finish);
                            next.error = written_error;
                        }
                        Ok(Some(next))
                    }),
                )
                .await
                .map_err(|e| format!("finalize: {e}"))?;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            model_row.heartbeat_at = Some(at);
            if matches!(model_row.status, SnapshotStatus::Aborting | SnapshotStatus::Aborted) {
                model_row.status = SnapshotStatus::Aborted;
                model_row.finish_reason = Some(FinishReason::Aborted);
                model_row.error = None;
            } else {
                model_row.status = status;
                model_row.finish_reason = Some(finish);
                model_row.error = error;
            }
            m.compare_read(store, &id).await?;
        }
        Op::Get { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            m.compare_read(store, &id).await?;
        }
        Op::Latest { session } => {
            let session_id = m.session(*session);
            let got = store
                .get_latest_snapshot(&session_id)
                .await
                .map_err(|e| format!("latest: {e}"))?;
            let want = m.latest(&session_id).map(|r| r.id.clone());
            check_eq!(got.map(|s| s.snapshot_id), want, "get_latest_snapshot({session_id})");
        }
        Op::Watch { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let mut statuses = store.watch_status(&id).await.map_err(|e| format!("watch: {e}"))?;
            let first = statuses.next().await;
            let model_row = m.rows.get(&id).ok_or("model lost a row")?;
            check_eq!(
                first,
                Some(model_row.read_status(Utc::now())),
                "the first watched status"
            );
        }
        Op::Missing => {
            let id = format!("{}-missing", m.prefix);
            if store.get_snapshot(&id).await.map_err(|e| e.to_string())?.is_some() {
                return Err("a missing id reads as present".into());
            }
            check_eq!(
                store.abort(&id).await.map_err(|e| e.to_string())?,
                None,
                "abort of a missing id"
            );
            match store.claim_resume(ResumeClaim::new(id.clone()), Vec::new()).await {
                Err(e) => check_eq!(e.status(), Status::NotFound, "claim of a missing id"),
                Ok(()) => return Err("claimed a missing id".into()),
            }
            let latest = store
                .get_latest_snapshot(&format!("{}-nobody", m.prefix))
                .await
                .map_err(|e| e.to_string())?;
            check_eq!(
                latest.map(|s| s.snapshot_id),
                None::<String>,
                "latest of an unknown session"
            );
        }
    }
    Ok(())
}
