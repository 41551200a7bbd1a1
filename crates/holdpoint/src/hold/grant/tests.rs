use serde_json::json;

use super::*;

fn grant(scope: GrantScope) -> Grant {
    Grant {
        id: "g-1".into(),
        agent: "bank".into(),
        tool: "transfer".into(),
        scope,
        session_id: "s-1".into(),
        principal: Some("alice".into()),
        when: None,
        expires_at: None,
        uses_left: None,
        used: 0,
        granted_by: "olga".into(),
        granter_roles: vec!["finance".into()],
        created_at: Utc::now(),
        snapshot_id: "p-1".into(),
        rule: None,
        revoked_at: None,
        revoked_by: None,
    }
}

fn call<'a>(session_id: &'a str, principal: Option<&'a str>, variables: &'a Map<String, Value>) -> GrantCall<'a> {
    GrantCall {
        agent: "bank",
        tool: "transfer",
        session_id,
        principal,
        variables,
    }
}

#[test]
fn scopes_cover_what_they_name() {
    let vars = Map::new();
    let now = Utc::now();
    let session = grant(GrantScope::Session);
    assert!(session.covers(&call("s-1", Some("alice"), &vars), now));
    assert!(!session.covers(&call("s-2", Some("alice"), &vars), now));
    let principal = grant(GrantScope::Principal);
    assert!(principal.covers(&call("s-2", Some("alice"), &vars), now));
    assert!(!principal.covers(&call("s-1", Some("bob"), &vars), now));
    assert!(!principal.covers(&call("s-1", None, &vars), now));
    let tool = grant(GrantScope::Tool);
    assert!(tool.covers(&call("s-9", Some("bob"), &vars), now));
    let other_tool = GrantCall {
        tool: "balance",
        ..call("s-1", Some("alice"), &vars)
    };
    assert!(!tool.covers(&other_tool, now));
}

#[test]
fn conditions_expiry_uses_and_revocation_narrow_a_grant() {
    let now = Utc::now();
    let small = json!({"input": {"amount": 10}});
    let large = json!({"input": {"amount": 10_000}});
    let mut g = grant(GrantScope::Tool);
    g.when = Some("input.amount < 100".into());
    assert!(g.covers(&call("s", None, small.as_object().unwrap()), now));
    assert!(!g.covers(&call("s", None, large.as_object().unwrap()), now));
    g.when = Some("input.missing.deeper > 1".into());
    assert!(
        !g.covers(&call("s", None, small.as_object().unwrap()), now),
        "an evaluation error is no match"
    );

    let mut g = grant(GrantScope::Tool);
    g.expires_at = Some(now);
    assert!(!g.is_active(now), "expired at its deadline");
    let mut g = grant(GrantScope::Tool);
    g.uses_left = Some(1);
    let once = g.used_once(now).unwrap();
    assert_eq!((once.uses_left, once.used), (Some(0), 1));
    assert!(once.used_once(now).is_none(), "the last use is spent once");
    let revoked = g.revoked("olga", now).unwrap();
    assert!(!revoked.is_active(now));
    assert!(revoked.revoked("olga", now).is_none());
}

#[test]
fn ttls_parse_with_units_and_bad_ones_are_invalid() {
    assert_eq!(parse_ttl("1h").unwrap(), Duration::from_secs(3600));
    assert_eq!(parse_ttl("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_ttl("2d").unwrap(), Duration::from_secs(172_800));
    for bad in ["", "0s", "1", "h", "5 weeks", "400d", "1.5h"] {
        assert!(matches!(parse_ttl(bad), Err(Error::InvalidArgument(_))), "{bad:?}");
    }
    assert!(GrantScope::parse("forever").is_err());
}

#[test]
fn who_may_manage_a_grant_follows_who_may_answer() {
    let rule = HoldRule {
        rule: "large".into(),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        error: None,
        confirm: false,
        deny_reasons: Vec::new(),
        reason_required: false,
        redact: Vec::new(),
        require_preview: false,
    };
    let g = Grant {
        rule: Some(rule.clone()),
        ..grant(GrantScope::Session)
    };
    assert!(g.manageable_by(Some("olga"), &["finance".into()]));
    assert!(!g.manageable_by(Some("alice"), &[]), "the owner under no self-approval");
    assert!(!g.manageable_by(Some("mallory"), &["support".into()]));
    let own = Grant {
        rule: Some(HoldRule {
            self_approval: true,
            ..rule
        }),
        ..grant(GrantScope::Session)
    };
    assert!(own.manageable_by(Some("alice"), &[]));
    let plain = grant(GrantScope::Session);
    assert!(plain.manageable_by(Some("alice"), &[]));
    assert!(!plain.manageable_by(Some("bob"), &["finance".into()]));
}

#[test]
fn a_typed_ttl_keeps_the_wire_string() {
    use super::{GrantRequest, GrantScope, GrantTtl};
    let request = GrantRequest::new(GrantScope::Tool)
        .ttl(Duration::from_secs(90 * 60))
        .uses(3);
    let wire = serde_json::to_value(&request).unwrap();
    assert_eq!(wire, serde_json::json!({"scope": "tool", "ttl": "1h30m", "uses": 3}));
    let back: GrantRequest = serde_json::from_value(wire).unwrap();
    assert_eq!(back, request);
    assert_eq!(back.ttl.map(GrantTtl::as_duration), Some(Duration::from_secs(5400)));
    let two_days: GrantRequest = serde_json::from_value(serde_json::json!({"scope": "session", "ttl": "2d"})).unwrap();
    assert_eq!(two_days.ttl.unwrap().to_string(), "2d");
    // A bad lifetime does not decode, and says how to write one.
    let bad = serde_json::from_value::<GrantRequest>(serde_json::json!({"scope": "tool", "ttl": "forever"}))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("forever") && bad.contains("\"1h\""), "{bad}");
    assert!(GrantTtl::from(Duration::ZERO).checked().is_err());
    assert!(GrantTtl::from(Duration::from_secs(367 * 86_400)).checked().is_err());
    assert_eq!(GrantTtl::from(Duration::from_secs(59)).to_string(), "59s");
}
