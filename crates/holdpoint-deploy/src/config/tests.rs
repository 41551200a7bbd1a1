use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use holdpoint::session::OnExpire;
use holdpoint_mcp::Transport as McpTransport;
use holdpoint_notify::SmtpTls;
use holdpoint_secret::Secret;
use holdpoint_server::auth::AgentScope;

use super::*;

const FILE: &str = "deploy/holdpoint.toml";

const FULL: &str = r#"
public_url = "https://holdpoint.example"

[server]
listen = "127.0.0.1:8080"
store = "postgres://hp:db-password-1@db/hp"
metrics_open = true

[auth]
roles = ["cfo"]

[[auth.api_keys]]
principal = "alice"
key = "k-alice-0123456789"
roles = ["customer"]

[[auth.api_keys]]
principal = "fiona"
key = "k-fiona-0123456789"
roles = ["finance"]
agents = ["bankingAgent"]

[auth.jwt]
jwks_url = "http://127.0.0.1:9000/jwks.json"
issuer = "https://login.example"
audience = "holdpoint"
roles_claim = "roles"

[[approval.rules]]
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount > 10000"
approvers = ["finance"]
quorum = 2
self_approval = false
remind_after = "1h"
escalate_after = "4h"
escalate_to = ["cfo"]
expire_after = "24h"
on_expire = "deny"

[[approval.rules]]
tool = "closeAccount"
approvers = ["finance", "cfo"]

[[notify.webhooks]]
url = "http://127.0.0.1:9100/hook"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
events = ["hold.created", "hold.decided", "hold.expired", "hold.escalated"]

[notify.smtp]
host = "127.0.0.1"
port = 2525
from = "holdpoint@example.com"
tls = "none"
username = "mailer"
password = "smtp-password-1"

[[notify.email]]
to = ["finance@example.com"]
events = ["hold.created", "hold.escalated"]
roles = ["finance"]

[[notify.slack]]
webhook_url = "http://127.0.0.1:9100/slack/T000/B000/slack-token-1"

[[mcp.servers]]
name = "everything"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { API_TOKEN = "mcp-env-secret-1" }
agents = ["bankingAgent"]

[[mcp.servers]]
name = "remote"
url = "https://mcp.example/mcp"
headers = { Authorization = "Bearer mcp-header-secret-1" }
"#;

const SECRETS: [&str; 7] = [
    "k-alice-0123456789",
    "db-password-1",
    "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "smtp-password-1",
    "slack-token-1",
    "mcp-env-secret-1",
    "mcp-header-secret-1",
];

fn err(text: &str) -> ConfigError {
    Config::parse(text, FILE).expect_err("the configuration should be refused")
}

/// The error is at `line`, about `key`, of `kind`, and its text names the
/// file, the line and the key.
fn assert_at(e: &ConfigError, kind: ConfigErrorKind, line: usize, key: &str) {
    assert_eq!((e.kind, e.line, e.key.as_deref()), (kind, line, Some(key)), "{e}");
    let text = e.to_string();
    assert!(text.starts_with(&format!("{FILE}:{line}:")), "{text}");
    assert!(text.contains(&format!("`{key}`")), "{text}");
}

#[test]
fn every_section_parses_into_plain_data() {
    let c = Config::parse(FULL, FILE).unwrap();
    assert_eq!(c.public_url(), Some("https://holdpoint.example"));
    assert_eq!(c.server().listen, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!(c.server().metrics_open, Some(true));
    let store = c.server().store.as_ref().unwrap();
    assert_eq!(store.url().expose(), "postgres://hp:db-password-1@db/hp");
    assert_eq!(
        store.origin(),
        &StoreOrigin::File {
            file: FILE.into(),
            line: 6,
            column: 9
        }
    );
    assert_eq!(c.api_key_entries().len(), 2);
    assert_eq!(c.api_key_entries()[1].scope, AgentScope::only(["bankingAgent"]));
    assert_eq!(
        c.declared_roles().iter().map(String::as_str).collect::<Vec<_>>(),
        ["cfo", "customer", "finance"]
    );
    let jwt = c.jwt().unwrap();
    assert_eq!(jwt.keys, JwtKeys::JwksUrl("http://127.0.0.1:9000/jwks.json".into()));
    assert_eq!(jwt.issuer.as_deref(), Some("https://login.example"));
    assert_eq!(jwt.roles_claim.as_deref(), Some("roles"));
    assert!(c.jwt_verifier().unwrap().is_some());

    let policy = c.approval_policy();
    let rules = policy.rules();
    assert_eq!(rules.len(), 2);
    assert_eq!((rules[0].quorum, rules[0].self_approval), (2, false));
    assert_eq!((rules[1].quorum, rules[1].self_approval), (1, true));
    let timers = &c.approval_rules()[0].timers;
    assert_eq!(timers.remind_after, Some(Duration::from_secs(3_600)));
    assert_eq!(timers.escalate_after, Some(Duration::from_secs(4 * 3_600)));
    assert_eq!(timers.escalate_to, ["cfo"]);
    assert_eq!(timers.expire_after, Some(Duration::from_secs(24 * 3_600)));
    assert_eq!(timers.on_expire, OnExpire::Deny);

    let n = c.notify();
    assert_eq!(n.public_url.as_deref(), Some("https://holdpoint.example"));
    let key = n.webhooks[0].secret.expose().strip_prefix("whsec_").unwrap();
    assert_eq!(STANDARD.decode(key).unwrap().len(), 24);
    assert_eq!(n.webhooks[0].events.len(), 4);
    let smtp = n.smtp.as_ref().unwrap();
    assert_eq!((smtp.port, smtp.tls), (Some(2525), SmtpTls::None));
    assert_eq!(n.email[0].roles.len(), 1);
    assert_eq!(n.slack[0].events.len(), EVENTS.len());
    let mcp = c.mcp_servers();
    assert!(mcp[0].command.as_deref() == Some("npx") && mcp[0].args.len() == 2);
    assert!(matches!(mcp[0].transport(), Ok(McpTransport::Stdio { .. })));
    // The `Authorization` header is sent as MCP's bearer token.
    assert_eq!(
        mcp[1].bearer_token.as_ref().map(Secret::expose),
        Some("mcp-header-secret-1")
    );
    assert!(matches!(mcp[1].transport(), Ok(McpTransport::Http { .. })));
    assert_eq!(mcp[1].agents, None);
}

#[test]
fn secrets_never_appear_in_debug_output() {
    let c = Config::parse(FULL, FILE).unwrap();
    let debug = format!("{c:?} {:?} {:?}", c.api_keys(), c.jwt_verifier().unwrap());
    for secret in SECRETS {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
    assert!(debug.contains("Secret(***)"));
}

#[test]
fn unknown_keys_are_refused_where_they_are() {
    let e = err("[auth]\nrolez = []\n");
    assert_at(&e, ConfigErrorKind::UnknownKey, 2, "auth.rolez");
    assert!(e.message.contains("known: roles, api_keys, jwt"), "{e}");
    let e = err("[[auth.api_keys]]\nprincipal = \"a\"\nkey = \"k1\"\nrole = [\"x\"]\n");
    assert_at(&e, ConfigErrorKind::UnknownKey, 4, "auth.api_keys[0].role");
    let rule = "[[approval.rules]]\napprovers = [\"finance\"]\nquorom = 2\n";
    let e = err(&format!("[auth]\nroles = [\"finance\"]\n{rule}"));
    assert_at(&e, ConfigErrorKind::UnknownKey, 5, "approval.rules[0].quorom");
    let e = err("[notify.smtp]\nhost = \"h\"\nfrom = \"a@b\"\nstarttls = true\n");
    assert_at(&e, ConfigErrorKind::UnknownKey, 4, "notify.smtp.starttls");
    assert_at(&err("\n\nlisten = \"x\"\n"), ConfigErrorKind::UnknownKey, 3, "listen");
}

#[test]
fn duplicate_keys_tables_api_keys_and_principals_are_refused() {
    let e = err("[[auth.api_keys]]\nprincipal = \"a\"\nkey = \"k1\"\nkey = \"k2\"\n");
    assert_at(&e, ConfigErrorKind::DuplicateKey, 4, "auth.api_keys.key");
    let e = err("[auth.jwt]\njwks_url = \"http://x\"\n\n[auth.jwt]\naudience = \"a\"\n");
    assert_at(&e, ConfigErrorKind::DuplicateKey, 4, "auth.jwt");
    let keys = "[[auth.api_keys]]\nprincipal = \"a\"\nkey = \"same-key-1\"\n\
                [[auth.api_keys]]\nprincipal = \"b\"\nkey = \"same-key-1\"\n";
    let e = err(keys);
    assert_at(&e, ConfigErrorKind::DuplicateKey, 6, "auth.api_keys[1].key");
    assert!(!e.to_string().contains("same-key-1"), "{e}");
    let principals = "[[auth.api_keys]]\nprincipal = \"a\"\nkey = \"k1\"\n\
                      [[auth.api_keys]]\nprincipal = \"a\"\nkey = \"k2\"\n";
    assert_at(
        &err(principals),
        ConfigErrorKind::DuplicateKey,
        5,
        "auth.api_keys[1].principal",
    );
    let servers = "[[mcp.servers]]\nname = \"x\"\ncommand = \"c\"\n[[mcp.servers]]\nname = \"x\"\nurl = \"http://h\"\n";
    assert_at(&err(servers), ConfigErrorKind::DuplicateKey, 5, "mcp.servers[1].name");
}

#[test]
fn bad_cel_is_refused_at_its_when_key() {
    let text = "[auth]\nroles = [\"finance\"]\n\n[[approval.rules]]\napprovers = [\"finance\"]\n\n\
                [[approval.rules]]\ntool = \"transferMoney\"\nwhen = \"input.amount >\"\napprovers = [\"finance\"]\n";
    let e = err(text);
    assert_at(&e, ConfigErrorKind::Rule, 9, "approval.rules[1].when");
    assert!(e.message.contains("does not compile"), "{e}");
    let e = err("[auth]\nroles = [\"f\"]\n[[approval.rules]]\ntool = \"\"\napprovers = [\"f\"]\n");
    assert_at(&e, ConfigErrorKind::Rule, 4, "approval.rules[0].tool");
    let e = err("[auth]\nroles = [\"f\"]\n[[approval.rules]]\napprovers = [\"f\"]\nquorum = 0\n");
    assert_at(&e, ConfigErrorKind::Invalid, 5, "approval.rules[0].quorum");
}

#[test]
fn roles_must_be_declared_by_a_key_or_the_roles_list() {
    let key = "[[auth.api_keys]]\nprincipal = \"fiona\"\nkey = \"k1\"\nroles = [\"finance\"]\n";
    let rule = "[[approval.rules]]\napprovers = [\"finance\", \"fiance\"]\n";
    let e = err(&format!("{key}{rule}"));
    assert_at(&e, ConfigErrorKind::UnknownRole, 6, "approval.rules[0].approvers[1]");
    assert!(
        e.message.contains("\"fiance\"") && e.message.contains("declared: finance"),
        "{e}"
    );
    let escalate = "escalate_after = \"4h\"\nescalate_to = [\"cfo\"]\n";
    let rule = "[[approval.rules]]\napprovers = [\"finance\"]\n";
    let e = err(&format!("{key}{rule}{escalate}"));
    assert_at(&e, ConfigErrorKind::UnknownRole, 8, "approval.rules[0].escalate_to[0]");
    // `[auth] roles` declares roles only tokens carry.
    let ok = format!("[auth]\nroles = [\"cfo\"]\n{key}{rule}{escalate}");
    assert!(Config::parse(&ok, FILE).is_ok());
    let slack = "[[notify.slack]]\nwebhook_url = \"http://h/s\"\nroles = [\"ops\"]\n";
    assert_at(
        &err(&format!("{key}{slack}")),
        ConfigErrorKind::UnknownRole,
        7,
        "notify.slack[0].roles[0]",
    );
}

#[test]
fn urls_must_be_http() {
    let e = err("public_url = \"ftp://holdpoint.example\"\n");
    assert_at(&e, ConfigErrorKind::Url, 1, "public_url");
    let e = err("[[notify.slack]]\nwebhook_url = \"hooks.slack.com/services/T0/B0/tok-123\"\n");
    assert_at(&e, ConfigErrorKind::Url, 2, "notify.slack[0].webhook_url");
    assert!(!e.to_string().contains("tok-123"), "{e}");
    let e = err("[auth.jwt]\njwks_url = \"file:///etc/jwks.json\"\n");
    assert_at(&e, ConfigErrorKind::Url, 2, "auth.jwt.jwks_url");
    // With a JWKS URL the issuer is any string; for discovery it is a URL.
    let c = Config::parse(
        "[auth.jwt]\njwks_url = \"http://h/jwks\"\nissuer = \"holdpoint-tests\"\n",
        FILE,
    )
    .unwrap();
    assert_eq!(c.jwt().unwrap().issuer.as_deref(), Some("holdpoint-tests"));
    let e = err("[auth.jwt]\nissuer = \"holdpoint-tests\"\n");
    assert_at(&e, ConfigErrorKind::Url, 2, "auth.jwt.issuer");
    let e = err("[[mcp.servers]]\nname = \"m\"\nurl = \"ws://mcp\"\n");
    assert_at(&e, ConfigErrorKind::Url, 3, "mcp.servers[0].url");
}

#[test]
fn webhook_secrets_must_be_whsec_base64() {
    let hook = |secret: &str| format!("[[notify.webhooks]]\nurl = \"http://h/hook\"\n\nsecret = \"{secret}\"\n");
    for secret in [
        "whsec_not base64!!",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_c2hvcnQ=",
    ] {
        let e = err(&hook(secret));
        assert_at(&e, ConfigErrorKind::Secret, 4, "notify.webhooks[0].secret");
        assert!(!e.to_string().contains(secret.trim_start_matches("whsec_")), "{e}");
    }
}

/// Every event the core's outbox writes is a name a channel may list, in
/// each kind of channel: the constants one by one (so a constant missing
/// from the core's `EVENT_TYPES` shows here too) and the whole list, and a
/// channel that lists none takes every one of them.
#[test]
fn every_outbox_event_is_an_accepted_event_name() {
    use holdpoint::session::outbox::{
        EVENT_TYPES, HOLD_CREATED, HOLD_DECIDED, HOLD_ESCALATED, HOLD_EXPIRED, HOLD_IN_DOUBT, HOLD_PARTIALLY_APPROVED,
        HOLD_REMINDED,
    };
    let constants = [
        HOLD_CREATED,
        HOLD_PARTIALLY_APPROVED,
        HOLD_DECIDED,
        HOLD_REMINDED,
        HOLD_ESCALATED,
        HOLD_EXPIRED,
        HOLD_IN_DOUBT,
    ];
    assert_eq!(EVENTS, EVENT_TYPES);
    assert_eq!(EVENTS.len(), constants.len(), "{EVENTS:?}");
    let channels = |events: &str| {
        format!(
            "[[notify.webhooks]]\nurl = \"http://h/hook\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n{events}\n\
             [notify.smtp]\nhost = \"127.0.0.1\"\nfrom = \"holdpoint@example.com\"\n\
             [[notify.email]]\nto = [\"finance@example.com\"]\n{events}\n\
             [[notify.slack]]\nwebhook_url = \"http://h/slack\"\n{events}\n"
        )
    };
    let routings = |c: &Config| {
        let n = c.notify();
        [&n.webhooks[0].events, &n.email[0].events, &n.slack[0].events]
            .into_iter()
            .cloned()
            .collect::<Vec<_>>()
    };
    for event in constants.iter().chain(EVENT_TYPES) {
        let c = Config::parse(&channels(&format!("events = [\"{event}\"]")), FILE)
            .unwrap_or_else(|e| panic!("`{event}` is refused: {e}"));
        for routing in routings(&c) {
            assert_eq!(routing, [event.to_string()]);
        }
    }
    let quoted: Vec<String> = constants.iter().map(|e| format!("\"{e}\"")).collect();
    let every = Config::parse(&channels(&format!("events = [{}]", quoted.join(", "))), FILE).unwrap();
    // No `events` key: every event, `hold.reminded` included.
    let default = Config::parse(&channels(""), FILE).unwrap();
    for c in [&every, &default] {
        for routing in routings(c) {
            assert_eq!(routing.len(), constants.len(), "{routing:?}");
            assert!(routing.iter().any(|e| e == HOLD_REMINDED), "{routing:?}");
        }
    }
    let e = err(&channels("events = [\"hold.reminder\"]"));
    assert_at(&e, ConfigErrorKind::Invalid, 4, "notify.webhooks[0].events[0]");
    assert!(e.message.contains("hold.reminded"), "the known names are listed: {e}");
}

#[test]
fn bad_durations_and_values_are_refused() {
    let rule = |extra: &str| format!("[auth]\nroles = [\"f\"]\n[[approval.rules]]\napprovers = [\"f\"]\n{extra}\n");
    let e = err(&rule("expire_after = \"3 seconds\""));
    assert_at(&e, ConfigErrorKind::Duration, 5, "approval.rules[0].expire_after");
    let e = err(&rule("remind_after = \"0s\""));
    assert_at(&e, ConfigErrorKind::Duration, 5, "approval.rules[0].remind_after");
    let e = err(&rule("expire_after = \"3s\"\non_expire = \"allow\""));
    assert_at(&e, ConfigErrorKind::Invalid, 6, "approval.rules[0].on_expire");
    let e = err(&rule("on_expire = \"deny\""));
    assert_at(&e, ConfigErrorKind::Invalid, 5, "approval.rules[0].on_expire");
    let e = err(&rule("escalate_after = \"1h\""));
    assert_at(&e, ConfigErrorKind::Invalid, 5, "approval.rules[0].escalate_after");
    let e = err(&rule("quorum = \"two\""));
    assert_at(&e, ConfigErrorKind::Syntax, 5, "approval.rules[0].quorum");
    let e = err("[auth.jwt]\naudience = \"holdpoint\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 1, "auth.jwt");
    let e = err("[[notify.email]]\nto = [\"a@b\"]\n");
    assert_at(&e, ConfigErrorKind::Invalid, 1, "notify.email[0]");
    let e = err("[[mcp.servers]]\nname = \"m\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 1, "mcp.servers[0]");
    let e = err("[[auth.api_keys]]\nprincipal = \"jwt:x\"\nkey = \"k\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 2, "auth.api_keys[0].principal");
}

/// `[server] store` is checked by the URL parser that opens it, at its
/// line and key, and the URL (which may hold a password) is not quoted.
#[test]
fn a_bad_store_url_is_refused_at_its_line_and_key() {
    let e = err("[server]\nlisten = \"127.0.0.1:8080\"\nstore = \"redis://u:pw-4821@h\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 3, "server.store");
    assert!(e.message.contains("unsupported store URL scheme \"redis\""), "{e}");
    assert!(!e.to_string().contains("pw-4821"), "{e}");
    let e = err("\n[server]\nstore = \"sqlite:\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 3, "server.store");
    let e = err("[server]\nstore = \"sqlite:s.db?synchronous=sometimes\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 2, "server.store");
    for good in ["memory:", "sqlite:s.db?synchronous=normal", "postgres://hp@db/hp"] {
        let c = Config::parse(&format!("[server]\nstore = {good:?}\n"), FILE).unwrap();
        assert_eq!(c.server().store.as_ref().unwrap().url().expose(), good);
    }
}

#[test]
fn type_errors_do_not_quote_the_value() {
    let e = err("[[auth.api_keys]]\nprincipal = \"a\"\nkey = 73519024\n");
    assert_at(&e, ConfigErrorKind::Syntax, 3, "auth.api_keys[0].key");
    assert!(!e.to_string().contains("73519024"), "{e}");
    let e = err("[[auth.api_keys]]\nprincipal = \"a\"\n");
    assert_eq!(e.kind, ConfigErrorKind::Syntax);
    assert!(e.message.contains("missing key `key`"), "{e}");
    let e = err("[auth\n");
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Syntax, 1), "{e}");
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.toml");
    let e = Config::load(&path).unwrap_err();
    assert_eq!(e.kind, ConfigErrorKind::Io);
    assert!(e.to_string().starts_with(&path.display().to_string()), "{e}");
    std::fs::write(&path, "[auth]\nbogus = 1\n").unwrap();
    let e = Config::load(&path).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2:1: `auth.bogus`", path.display())),
        "{e}"
    );
}

#[tokio::test]
async fn each_key_of_the_file_authenticates_with_its_roles_and_scope() {
    use holdpoint_server::auth::ContextProvider;
    let c = Config::parse(FULL, FILE).unwrap();
    let keys = c.api_keys();
    let who = |key: &str| {
        let parts = axum::http::Request::builder()
            .header("x-api-key", key)
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let keys = keys.clone();
        async move { keys.authenticate(&parts).await.unwrap().unwrap() }
    };
    let alice = who("k-alice-0123456789").await;
    assert_eq!(alice.principal(), Some("alice"));
    assert_eq!(alice.request_context()["roles"], serde_json::json!(["customer"]));
    let fiona = who("k-fiona-0123456789").await;
    assert_eq!(fiona.principal(), Some("fiona"));
    assert_eq!(fiona.request_context()["roles"], serde_json::json!(["finance"]));
    assert!(fiona.check_agent("bankingAgent").is_ok() && fiona.check_agent("opsAgent").is_err());
}

#[test]
fn page_client_id_signs_the_page_in_at_the_issuer() {
    let c = Config::parse(
        "[auth.jwt]\nissuer = \"https://login.example/realm\"\npage_client_id = \"holdpoint-page\"\n",
        FILE,
    )
    .unwrap();
    let login = c.page_login().expect("a page sign-in");
    assert_eq!(
        serde_json::to_value(&login).unwrap(),
        serde_json::json!({"issuer": "https://login.example/realm", "clientId": "holdpoint-page", "scope": "openid profile"})
    );
    // The page signs in at the issuer, so it must be an http(s) URL.
    let e = err("[auth.jwt]\njwks_url = \"http://h/jwks\"\nissuer = \"holdpoint-tests\"\npage_client_id = \"p\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 4, "auth.jwt.page_client_id");
    let e = err("[auth.jwt]\njwks_url = \"http://h/jwks\"\npage_client_id = \"p\"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 3, "auth.jwt.page_client_id");
    let e = err("[auth.jwt]\nissuer = \"https://x\"\npage_client_id = \" \"\n");
    assert_at(&e, ConfigErrorKind::Invalid, 3, "auth.jwt.page_client_id");
    let none = Config::parse("[auth.jwt]\nissuer = \"https://x\"\n", FILE).unwrap();
    assert!(none.page_login().is_none());
}
