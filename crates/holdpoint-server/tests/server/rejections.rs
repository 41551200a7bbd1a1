//! Requests the server refuses: each gets a JSON error naming the problem,
//! none crashes the process, none changes the store.

use std::sync::Arc;

use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::support::*;

/// A fixture with one paused transfer, whose snapshot id is returned.
async fn paused(f: &Fixture) -> (String, Value) {
    let (code, body) = f
        .server
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    (out["snapshotId"].as_str().unwrap().to_owned(), paused_part(&out))
}

#[tokio::test]
async fn malformed_bodies_are_400s_that_name_the_problem() {
    let f = fixture(false).await;
    let (snapshot, part) = paused(&f).await;
    let before = dump(f.store.as_ref()).await;
    let s = &f.server;
    let path = "/agents/bankingAgent";
    let cases: Vec<(&[u8], &str)> = vec![
        (b"{\"data\": ", "not valid JSON"),
        (b"not json at all", "not valid JSON"),
        (b"{\"data\": {}} {}", "not valid JSON"),
        (b"[1, 2]", "invalid type"),
        (b"{}", "missing field `data`"),
        (b"{\"data\": {\"detach\": \"yes\"}}", "data.detach"),
        (
            b"{\"data\": {}, \"init\": {\"sesionId\": \"x\"}}",
            "unknown field `sesionId`",
        ),
        (b"{\"data\": {}, \"extra\": 1}", "unknown field `extra`"),
        (b"{\"data\": {\"mesage\": {}}}", "unknown field `mesage`"),
        (
            b"{\"data\": {\"message\": {\"role\": \"bot\", \"content\": []}}}",
            "data.message.role",
        ),
        (b"{\"data\": {\"message\": {\"role\": \"user\"}}}", "content"),
        (
            b"{\"data\": {\"message\": {\"role\": \"user\", \"content\": [{\"text\": \"a\", \"data\": 1}]}}}",
            "data.message.content",
        ),
        (
            b"{\"data\": {\"message\": {\"role\": \"model\", \"content\": [{\"text\": \"hi\"}]}}}",
            "role user",
        ),
        (b"{\"data\": {\"resume\": {}}}", "at least one directive"),
        (b"{\"data\": {\"resume\": {\"restart\": 5}}}", "data.resume.restart"),
        (b"\xff\xfe{}", "not valid JSON"),
    ];
    for (body, want) in cases {
        let got = s.post_raw(path, "application/json", body.to_vec()).await;
        assert_error(&got, 400, "INVALID_ARGUMENT", want);
    }
    // Nesting deeper than the parser allows is refused, not a stack overflow.
    let deep = format!("{{\"data\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    let got = s.post_raw(path, "application/json", deep.into_bytes()).await;
    assert_error(&got, 400, "INVALID_ARGUMENT", "");
    // A message and a resume together.
    let both = json!({"data": {"message": user("x")["message"], "resume": {"restart": [restart(&part, json!({"approved": true}))]}},
                      "init": {"snapshotId": snapshot}});
    assert_error(&s.post(path, both, None).await, 400, "INVALID_ARGUMENT", "not both");
    // The wrong content type (a cross-site form could send this).
    let form = s
        .post_raw(
            path,
            "text/plain",
            br#"{"data": {"message": {"role": "user", "content": [{"text": "x"}]}}}"#.to_vec(),
        )
        .await;
    assert_error(&form, 415, "INVALID_ARGUMENT", "application/json");
    let empty = s.post_raw(path, "application/json", Vec::new()).await;
    assert_error(&empty, 400, "INVALID_ARGUMENT", "empty");
    // An empty input is well formed (it continues the conversation); a new
    // one has nothing to continue: a failed turn that wrote nothing.
    let (code, body) = s.post(path, json!({"data": {}}), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "failed", "{body:#}");
    assert_eq!(body["result"]["error"]["status"], "INVALID_ARGUMENT", "{body:#}");
    assert_eq!(dump(f.store.as_ref()).await, before, "rejected requests change nothing");
}

#[tokio::test]
async fn routes_methods_and_companions() {
    let f = fixture(false).await;
    let s = &f.server;
    assert_error(&s.get("/nowhere", None).await, 404, "NOT_FOUND", "/nowhere");
    assert_error(
        &s.get("/agents/bankingAgent", None).await,
        405,
        "INVALID_ARGUMENT",
        "GET",
    );
    let init_on_snapshot = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": "x"}, "init": {}}),
            None,
        )
        .await;
    assert_error(&init_on_snapshot, 400, "INVALID_ARGUMENT", "unknown field `init`");
    let abort_without_id = s.post("/agents/bankingAgent/abort", json!({"data": {}}), None).await;
    assert_error(&abort_without_id, 400, "INVALID_ARGUMENT", "snapshotId");
    let bad_stream = s
        .post("/agents/bankingAgent?stream=perhaps", json!({"data": user("hi")}), None)
        .await;
    assert_error(&bad_stream, 400, "INVALID_ARGUMENT", "stream");
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let store = memory();
    let server = TestServer::start(
        Server::builder()
            .agent(bank(store.clone()))
            .body_limit(2048)
            .build()
            .unwrap(),
    )
    .await;
    let big = json!({"data": user(&"x".repeat(4096))});
    let got = server.post("/agents/bankingAgent", big.clone(), None).await;
    assert_error(&got, 413, "RESOURCE_EXHAUSTED", "2048");
    // Without a Content-Length (chunked), the limit holds while reading.
    let bytes = serde_json::to_vec(&big).unwrap();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = bytes.chunks(512).map(|c| Ok(c.to_vec())).collect();
    let r = server
        .client
        .post(server.url("/agents/bankingAgent"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_error(&read(r).await, 413, "RESOURCE_EXHAUSTED", "2048");
    assert!(store.is_empty());
    // Just under the limit is fine.
    let small = server
        .post("/agents/bankingAgent", json!({"data": user("hello")}), None)
        .await;
    assert_eq!(small.0, 200);
}

#[tokio::test]
async fn rejected_resumes_change_nothing() {
    let f = fixture(false).await;
    let (snapshot, part) = paused(&f).await;
    let s = &f.server;
    let before = dump(f.store.as_ref()).await;
    let resume =
        |directive: Value| json!({"data": {"resume": {"restart": [directive]}}, "init": {"snapshotId": snapshot}});

    // Modified input without declaring it: a failed turn (200), nothing written.
    let mut changed = restart(&part, json!({"approved": true}));
    changed["toolRequest"]["input"]["amount"] = json!(5_000_000);
    let (code, body) = s.post("/agents/bankingAgent", resume(changed), None).await;
    assert_eq!(code, 200);
    assert_eq!(body["result"]["finishReason"], "failed");
    assert!(
        body["result"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("modified"),
        "{body:#}"
    );
    // Resume data that is not an object.
    let bad_data = restart(&part, json!("yes"));
    let (code, body) = s.post("/agents/bankingAgent", resume(bad_data), None).await;
    assert!(
        code == 400 || body["result"]["finishReason"] == "failed",
        "{code} {body:#}"
    );
    // A respond for a tool that never paused.
    let stray = json!({"toolResponse": {"name": "getBalance", "ref": "0", "output": 1}});
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": {"resume": {"respond": [stray]}}, "init": {"snapshotId": snapshot}}),
            None,
        )
        .await;
    assert!(
        code == 400 || body["result"]["finishReason"] == "failed",
        "{code} {body:#}"
    );
    assert_eq!(dump(f.store.as_ref()).await, before, "rejected resumes change nothing");

    // The real approval works afterwards: nothing was claimed by the rejects.
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            resume(restart(&part, json!({"approved": true}))),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop");
    // And the claim conflict of a second approval writes nothing either.
    let after = dump(f.store.as_ref()).await;
    let again = s
        .post(
            "/agents/bankingAgent",
            resume(restart(&part, json!({"approved": true}))),
            None,
        )
        .await;
    assert_error(&again, 409, "ABORTED", "already resumed");
    assert_eq!(dump(f.store.as_ref()).await, after);
}

/// Deterministic pseudo-random bytes (xorshift), so failures replay.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[tokio::test]
async fn mutated_requests_never_crash_the_server_or_change_sessions_when_refused() {
    let f = fixture(false).await;
    let (snapshot, part) = paused(&f).await;
    let s = Arc::new(f.server);
    let seeds = [
        json!({"data": {"resume": {"restart": [restart(&part, json!({"approved": false}))]}}, "init": {"snapshotId": snapshot}}),
        json!({"data": user("hello"), "init": {"sessionId": "fuzz"}}),
        json!({"data": {"snapshotId": snapshot}}),
    ];
    let paths = [
        "/agents/bankingAgent",
        "/agents/bankingAgent",
        "/agents/bankingAgent/getSnapshot",
    ];
    let alphabet: &[u8] = b"{}[]\":,0123456789truefalsnul \\\x00\xff";
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut refused = 0;
    for round in 0..300 {
        let which = round % seeds.len();
        let mut bytes = serde_json::to_vec(&seeds[which]).unwrap();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = alphabet[rng.below(alphabet.len())],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        let before = dump(f.store.as_ref()).await;
        let (code, body) = s.post_raw(paths[which], "application/json", bytes.clone()).await;
        assert!(
            code.as_u16() < 500,
            "{code} for {:?}: {body:#}",
            String::from_utf8_lossy(&bytes)
        );
        if code != 200 {
            refused += 1;
            assert!(body["error"]["status"].is_string(), "{body:#}");
            assert_eq!(
                dump(f.store.as_ref()).await,
                before,
                "a refused request changed the store: {:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    assert!(refused > 100, "most mutations should be refused ({refused})");
    let (code, health) = s.get("/healthz", None).await;
    assert_eq!(code, 200, "{health}");
}
