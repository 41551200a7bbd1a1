//! Standing grants through a store (docs/reference.md §10.9): kept and
//! listed newest first, revoked at once, expired ones never used, and a
//! use spent by compare-and-set (with its audit record in the same step),
//! also across two handles; and a snapshot saved with its audit records
//! both or neither (a partial approval, §10.7).

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use futures::future::join_all;
use holdpoint::Error;
use holdpoint::approval::{Grant, GrantQuery, GrantRef, GrantScope};
use holdpoint::session::{AuditQuery, AuditRecord, SessionStore};

use super::capable::{audit, grants};
use super::{RACERS, approve_record, fresh_id, fresh_session, put, snapshot};

/// A `session` grant of `transfer` on agent `agent` with `uses` uses.
pub fn grant(agent: &str, uses: Option<u32>) -> Grant {
    Grant {
        id: fresh_id("grant"),
        agent: agent.to_owned(),
        tool: "transfer".into(),
        scope: GrantScope::Session,
        session_id: fresh_session(),
        principal: Some("alice".into()),
        when: Some("input.amount < 100".into()),
        expires_at: None,
        uses_left: uses,
        used: 0,
        granted_by: "olga".into(),
        granter_roles: vec!["finance".into()],
        created_at: Utc::now(),
        snapshot_id: fresh_id("held"),
        rule: None,
        revoked_at: None,
        revoked_by: None,
    }
}

/// The audit record of a use of `grant`.
fn use_record(grant: &Grant) -> AuditRecord {
    AuditRecord {
        agent: Some(grant.agent.clone()),
        grant: Some(GrantRef {
            id: grant.id.clone(),
            granted_by: grant.granted_by.clone(),
        }),
        ..approve_record(&grant.session_id, "")
    }
}

async fn uses_audited(store: &dyn SessionStore, grant: &Grant) -> usize {
    let trail = audit(store)
        .list_audit(&AuditQuery {
            session_id: Some(grant.session_id.clone()),
            limit: Some(1000),
            ..AuditQuery::default()
        })
        .await
        .expect("list_audit");
    trail
        .iter()
        .filter(|r| r.grant.as_ref().is_some_and(|g| g.id == grant.id))
        .count()
}

/// Grants are kept whole, listed newest first by agent and tool, and a
/// revoke is seen by the next read; a revoked grant is never used.
pub async fn grants_are_kept_listed_and_revoked(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let first = grant(&agent, Some(2));
    grants(&*store).insert_grant(first.clone()).await.expect("insert");
    let second = Grant {
        created_at: first.created_at + TimeDelta::seconds(1),
        ..grant(&agent, None)
    };
    grants(&*store).insert_grant(second.clone()).await.expect("insert");
    let err = grants(&*store)
        .insert_grant(first.clone())
        .await
        .expect_err("one id once");
    assert!(matches!(err, Error::AlreadyExists(_)), "{err}");
    assert_eq!(
        err.status(),
        holdpoint::Status::FailedPrecondition,
        "the wire status is unchanged"
    );
    assert_eq!(
        grants(&*store).get_grant(&first.id).await.expect("get"),
        Some(first.clone())
    );
    assert_eq!(grants(&*store).get_grant("no-such-grant").await.expect("get"), None);
    let query = GrantQuery {
        agent: Some(agent.clone()),
        ..GrantQuery::default()
    };
    let ids: Vec<String> = grants(&*store)
        .list_grants(&query)
        .await
        .expect("list")
        .into_iter()
        .map(|g| g.id)
        .collect();
    assert_eq!(ids, [second.id.clone(), first.id.clone()]);

    let at = Utc::now();
    let revoked = grants(&*store)
        .revoke_grant(&first.id, "pete", at)
        .await
        .expect("revoke")
        .expect("found");
    assert_eq!(revoked.revoked_by.as_deref(), Some("pete"));
    assert!(revoked.revoked_at.is_some());
    let again = grants(&*store)
        .revoke_grant(&first.id, "quinn", Utc::now())
        .await
        .expect("revoke")
        .expect("found");
    assert_eq!(
        again.revoked_by.as_deref(),
        Some("pete"),
        "a second revoke changes nothing"
    );
    assert_eq!(
        grants(&*store)
            .revoke_grant("no-such-grant", "pete", at)
            .await
            .expect("revoke"),
        None
    );
    let active = GrantQuery {
        active_at: Some(Utc::now()),
        ..query
    };
    let ids: Vec<String> = grants(&*store)
        .list_grants(&active)
        .await
        .expect("list")
        .into_iter()
        .map(|g| g.id)
        .collect();
    assert_eq!(ids, std::slice::from_ref(&second.id));
    let used = grants(&*store)
        .use_grant(&first.id, Utc::now(), vec![use_record(&first)])
        .await
        .expect("use");
    assert_eq!(used, None, "a revoked grant is not used");
    assert_eq!(uses_audited(store.as_ref(), &first).await, 0, "nothing audited");
}

/// An expired grant is never used nor listed as active; a use before its
/// deadline is.
pub async fn expired_grants_are_never_used(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let now = Utc::now();
    let lapsed = Grant {
        expires_at: Some(now - TimeDelta::seconds(1)),
        ..grant(&agent, None)
    };
    grants(&*store).insert_grant(lapsed.clone()).await.expect("insert");
    let used = grants(&*store)
        .use_grant(&lapsed.id, now, vec![use_record(&lapsed)])
        .await
        .expect("use");
    assert_eq!(used, None);
    assert_eq!(uses_audited(store.as_ref(), &lapsed).await, 0);
    let active = GrantQuery {
        agent: Some(agent.clone()),
        active_at: Some(now),
        ..GrantQuery::default()
    };
    assert!(grants(&*store).list_grants(&active).await.expect("list").is_empty());

    let live = Grant {
        expires_at: Some(now + TimeDelta::hours(1)),
        ..grant(&agent, None)
    };
    grants(&*store).insert_grant(live.clone()).await.expect("insert");
    let used = grants(&*store)
        .use_grant(&live.id, now, vec![use_record(&live)])
        .await
        .expect("use")
        .expect("used");
    assert_eq!((used.used, used.uses_left), (1, None));
    assert_eq!(uses_audited(store.as_ref(), &live).await, 1);
    let later = live.expires_at.expect("set") + TimeDelta::seconds(1);
    assert_eq!(
        grants(&*store)
            .use_grant(&live.id, later, Vec::new())
            .await
            .expect("use"),
        None
    );
}

/// Racing uses of a grant with 3 uses: exactly 3 are spent, each audited
/// once; the rest find it used up and write nothing.
pub async fn grant_uses_are_spent_once(store: Arc<dyn SessionStore>) {
    let g = grant(&fresh_id("agent"), Some(3));
    grants(&*store).insert_grant(g.clone()).await.expect("insert");
    let racers = (0..RACERS).map(|_| {
        let store = Arc::clone(&store);
        let g = g.clone();
        async move { grants(&*store).use_grant(&g.id, Utc::now(), vec![use_record(&g)]).await }
    });
    let results = join_all(racers).await;
    let spent: Vec<Grant> = results.into_iter().filter_map(|r| r.expect("use")).collect();
    assert_eq!(spent.len(), 3, "three uses");
    let mut left: Vec<Option<u32>> = spent.iter().map(|g| g.uses_left).collect();
    left.sort();
    assert_eq!(left, [Some(0), Some(1), Some(2)]);
    assert_eq!(uses_audited(store.as_ref(), &g).await, 3);
    let now = grants(&*store).get_grant(&g.id).await.expect("get").expect("found");
    assert_eq!((now.uses_left, now.used), (Some(0), 3));
}

/// Two handles race for the last use of a grant: one gets it.
pub async fn two_handles_spend_a_last_use_once(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let (grants_a, grants_b) = (grants(&*a), grants(&*b));
    for _ in 0..5 {
        let g = grant(&fresh_id("agent"), Some(1));
        grants_a.insert_grant(g.clone()).await.expect("insert");
        let (x, y) = tokio::join!(
            grants_a.use_grant(&g.id, Utc::now(), vec![use_record(&g)]),
            grants_b.use_grant(&g.id, Utc::now(), vec![use_record(&g)])
        );
        let won = usize::from(x.expect("use").is_some()) + usize::from(y.expect("use").is_some());
        assert_eq!(won, 1, "the last use is spent once");
        assert_eq!(uses_audited(a.as_ref(), &g).await, 1);
        let revoked = grants(&*b)
            .revoke_grant(&g.id, "pete", Utc::now())
            .await
            .expect("revoke")
            .expect("found");
        assert!(revoked.revoked_at.is_some());
        assert!(
            grants(&*a)
                .get_grant(&g.id)
                .await
                .expect("get")
                .expect("found")
                .revoked_at
                .is_some(),
            "seen at once"
        );
    }
}

/// A save with audit records writes both when the update writes a row,
/// and neither when it writes nothing or fails.
pub async fn audited_saves_write_both_or_neither(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let row = put(store.as_ref(), None, snapshot(&session)).await;
    let id = row.snapshot_id.clone();
    let count = |store: Arc<dyn SessionStore>, session: String| async move {
        audit(&*store)
            .list_audit(&AuditQuery {
                session_id: Some(session),
                ..AuditQuery::default()
            })
            .await
            .expect("list_audit")
            .len()
    };
    let written = audit(&*store)
        .save_snapshot_audited(
            &id,
            Box::new(|existing| Ok(existing.cloned())),
            vec![approve_record(&session, &id)],
        )
        .await
        .expect("save");
    assert!(written.is_some());
    assert_eq!(count(Arc::clone(&store), session.clone()).await, 1);
    let skipped = audit(&*store)
        .save_snapshot_audited(&id, Box::new(|_| Ok(None)), vec![approve_record(&session, &id)])
        .await
        .expect("save");
    assert!(skipped.is_none());
    let failed = audit(&*store)
        .save_snapshot_audited(
            &id,
            Box::new(|_| Err(Error::Aborted("refused".into()))),
            vec![approve_record(&session, &id)],
        )
        .await;
    assert!(failed.is_err());
    assert_eq!(count(store, session).await, 1, "nothing appended without the row");
}
