//! The run: holds created, answered, replicas killed, PostgreSQL
//! restarted, calls in doubt settled, then the ledger check.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Row;
use tokio::sync::Mutex as AsyncMutex;

use crate::infra::{self, Postgres, Replica};
use crate::{Args, Error};

const OPERATOR_KEY: &str = "k-operator-cluster-0123456789";
const CUSTOMERS: usize = 3;
const APPROVERS: usize = 5;
/// The approver who answers through the `holdpoint` CLI.
const CLI_APPROVER: usize = 4;
/// A resume's claim lapses this long after its replica died (the default lease, and a margin).
const LEASE: Duration = Duration::from_secs(65);

fn customer_key(i: usize) -> String {
    format!("k-cust-{i}-0123456789")
}

fn approver_key(i: usize) -> String {
    format!("k-appr-{i}-0123456789")
}

fn config(store: &str, hook: SocketAddr) -> String {
    let mut s = format!("[server]\nstore = \"{store}\"\n\n");
    for i in 0..CUSTOMERS {
        s += &format!(
            "[[auth.api_keys]]\nprincipal = \"cust-{i}\"\nkey = \"{}\"\nroles = [\"customer\"]\n\n",
            customer_key(i)
        );
    }
    for i in 0..APPROVERS {
        s += &format!(
            "[[auth.api_keys]]\nprincipal = \"appr-{i}\"\nkey = \"{}\"\nroles = [\"finance\", \"ops\"]\n\n",
            approver_key(i)
        );
    }
    s += r#"[[approval.rules]]
name = "large"
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount > 10000.0"
approvers = ["finance"]
quorum = 2
self_approval = false

[[approval.rules]]
name = "small"
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount <= 10000.0"
approvers = ["ops"]
self_approval = false

"#;
    s += &format!(
        "[[notify.webhooks]]\nurl = \"http://{hook}/hook\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nroles = [\"finance\"]\n"
    );
    s
}

/// The hold number an account was made for: `c{n}` or `c{n}r{attempt}`.
fn hold_number(account: &str) -> Option<usize> {
    let rest = account.strip_prefix('c')?;
    rest.split('r').next()?.parse().ok()
}

/// Whether the approvers approve (else deny) the transfer to `account`:
/// every tenth is denied.
fn approves(account: &str) -> bool {
    hold_number(account).is_none_or(|n| n % 10 != 9)
}

/// The account named in a sub-agent call's input text ("Transfer $N to ACCOUNT").
fn account_in_text(text: &str) -> Option<String> {
    text.split(" to ").nth(1)?.split_whitespace().next().map(str::to_owned)
}

#[derive(Default)]
struct Stats {
    create_ok: AtomicUsize,
    create_uncertain: AtomicUsize,
    answers: Mutex<BTreeMap<String, usize>>,
    cli_answers: AtomicUsize,
}

impl Stats {
    fn answer(&self, outcome: &str) {
        if let Ok(mut a) = self.answers.lock() {
            *a.entry(outcome.to_owned()).or_default() += 1;
        }
    }
}

struct Shared {
    proxy: String,
    http: reqwest::Client,
    holdpoint: PathBuf,
    confirmed: Mutex<HashSet<String>>,
    seen: Mutex<HashSet<String>>,
    stats: Stats,
    created: AtomicUsize,
    stop_approvers: AtomicBool,
}

/// Runs the whole scenario and returns the summary.
pub async fn run(args: Args) -> Result<Value, Error> {
    let started = Instant::now();
    let work = match &args.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("holdpoint-cluster-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work)?;
    let banking = args.banking.clone().unwrap_or_default();
    for bin in [&banking, args.holdpoint.as_ref().unwrap_or(&banking)] {
        if !bin.exists() {
            return Err(Error::Setup(format!(
                "{} not found: cargo build -p banking -p holdpoint-cli",
                bin.display()
            )));
        }
    }
    let pg = Postgres::start(
        args.pg_script
            .as_deref()
            .unwrap_or(std::path::Path::new("scripts/postgres.sh")),
    )?;
    let (hook_addr, hooks) = infra::start_hooks().await?;
    let cfg_path = work.join("cluster.toml");
    std::fs::write(&cfg_path, config(&pg.url, hook_addr))?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(60))
        .build()?;

    // The replicas, each on a fixed port so a restart comes back at the same address.
    let mut replicas = Vec::new();
    for r in 0..args.replicas {
        let addr: SocketAddr = format!("127.0.0.1:{}", infra::free_port()?)
            .parse()
            .map_err(|_| Error::Setup("bad address".into()))?;
        let data = work.join(format!("replica-{r}"));
        std::fs::create_dir_all(&data)?;
        let cli = vec![
            "serve".to_owned(),
            "--config".to_owned(),
            cfg_path.display().to_string(),
            "--addr".to_owned(),
            addr.to_string(),
            "--model".to_owned(),
            "scripted".to_owned(),
            "--api-key".to_owned(),
            OPERATOR_KEY.to_owned(),
            "--data-dir".to_owned(),
            data.display().to_string(),
        ];
        let env = vec![("BANKING_LEDGER_URL".to_owned(), pg.url.clone())];
        let mut replica = Replica::new(&banking, addr, cli, env, work.join(format!("replica-{r}.log")));
        replica.start(&http).await?;
        replicas.push(replica);
    }
    let proxy = infra::start_proxy(replicas.iter().map(|r| r.addr).collect()).await?;
    let shared = Arc::new(Shared {
        proxy: format!("http://{proxy}"),
        http: http.clone(),
        holdpoint: args.holdpoint.clone().unwrap_or_default(),
        confirmed: Mutex::new(HashSet::new()),
        seen: Mutex::new(HashSet::new()),
        stats: Stats::default(),
        created: AtomicUsize::new(0),
        stop_approvers: AtomicBool::new(false),
    });

    // Approvers, creators and the chaos, all at once.
    let mut approvers = Vec::new();
    for k in 0..APPROVERS {
        approvers.push(tokio::spawn(approver(Arc::clone(&shared), k)));
    }
    let next = Arc::new(AtomicUsize::new(0));
    let mut creators = Vec::new();
    for c in 0..args.creators {
        creators.push(tokio::spawn(creator(
            Arc::clone(&shared),
            Arc::clone(&next),
            args.holds,
            c,
        )));
    }
    let replicas = Arc::new(AsyncMutex::new(replicas));
    let chaos = chaos(&args, &shared, &replicas, &pg, &http).await?;
    for c in creators {
        let _ = c.await;
    }
    let created_at = started.elapsed();

    // Drain: answer until the inbox stays empty.
    let operator = |path: &str| {
        http.get(format!("{}{path}", shared.proxy))
            .header("x-api-key", approver_key(0))
            .send()
    };
    let mut empty_polls = 0;
    while empty_polls < 5 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let total = match operator("/inbox?limit=1").await {
            Ok(r) => r.json::<Value>().await.ok().and_then(|b| b["result"]["total"].as_u64()),
            Err(_) => None,
        };
        empty_polls = if total == Some(0) { empty_polls + 1 } else { 0 };
    }
    shared.stop_approvers.store(true, Ordering::SeqCst);
    for a in approvers {
        let _ = a.await;
    }
    let drained_at = started.elapsed();

    // Calls in doubt: wait out the leases of the last kills, then settle
    // each against the ledger.
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&pg.url)
        .await?;
    let since_last_kill = chaos.last_kill.map(|t| t.elapsed()).unwrap_or(LEASE);
    if since_last_kill < LEASE {
        tokio::time::sleep(LEASE - since_last_kill).await;
    }
    let settled = settle(&shared, &db).await?;

    // Webhooks: wait for the outbox to drain (bounded).
    let outbox_deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM holdpoint_outbox WHERE state = 'pending'")
            .fetch_one(&db)
            .await?;
        if pending == 0 || Instant::now() > outbox_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let check = check(&shared, &db, &hooks).await?;
    let answers = shared.stats.answers.lock().map(|a| a.clone()).unwrap_or_default();
    let clean = check["clean"] == json!(true) && settled["failed"] == json!(0);
    let summary = json!({
        "clean": clean,
        "holdsRequested": args.holds,
        "replicas": args.replicas,
        "approvers": APPROVERS,
        "kills": chaos.kills,
        "restarts": chaos.restarts,
        "postgresRestarts": chaos.pg_restarts,
        "createdConfirmed": shared.stats.create_ok.load(Ordering::SeqCst),
        "createUncertain": shared.stats.create_uncertain.load(Ordering::SeqCst),
        "answers": answers,
        "cliAnswers": shared.stats.cli_answers.load(Ordering::SeqCst),
        "inDoubt": settled,
        "ledger": check,
        "seconds": {
            "create": created_at.as_secs_f64(),
            "drained": drained_at.as_secs_f64(),
            "total": started.elapsed().as_secs_f64(),
        },
        "workDir": work.display().to_string(),
    });
    // Stop the replicas before PostgreSQL (dropped last).
    let mut replicas = replicas.lock().await;
    for r in replicas.iter_mut() {
        let _ = r.kill().await;
    }
    drop(pg);
    Ok(summary)
}

async fn creator(shared: Arc<Shared>, next: Arc<AtomicUsize>, holds: usize, c: usize) {
    loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= holds {
            return;
        }
        let agent = if i % 4 == 3 { "supportAgent" } else { "bankingAgent" };
        let amount = if i.is_multiple_of(3) {
            20_000 + i % 997
        } else {
            50 + i % 9_000
        };
        for attempt in 0..8 {
            let account = if attempt == 0 {
                format!("c{i}")
            } else {
                format!("c{i}r{attempt}")
            };
            let body = json!({"data": {"message": {"role": "user", "content": [{"text": format!("Transfer ${amount} to {account}")}]}}});
            let sent = shared
                .http
                .post(format!("{}/agents/{agent}", shared.proxy))
                .header("x-api-key", customer_key(c % CUSTOMERS))
                .json(&body)
                .send()
                .await;
            let ok = match sent {
                Ok(r) if r.status().is_success() => r
                    .json::<Value>()
                    .await
                    .is_ok_and(|b| b["result"]["finishReason"] == json!("interrupted")),
                _ => false,
            };
            if ok {
                shared.stats.create_ok.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut s) = shared.confirmed.lock() {
                    s.insert(account);
                }
                break;
            }
            // Unknown whether it was saved: a new account from here on, and
            // the approvers will find this one in the inbox if it exists.
            shared.stats.create_uncertain.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        shared.created.fetch_add(1, Ordering::SeqCst);
    }
}

async fn approver(shared: Arc<Shared>, k: usize) {
    let key = approver_key(k);
    let mut done: HashSet<String> = HashSet::new();
    while !shared.stop_approvers.load(Ordering::SeqCst) {
        let page = shared
            .http
            .get(format!("{}/inbox?limit=200&mine=true", shared.proxy))
            .header("x-api-key", &key)
            .send()
            .await;
        let items = match page {
            Ok(r) if r.status().is_success() => r
                .json::<Value>()
                .await
                .ok()
                .and_then(|b| b["result"]["items"].as_array().cloned())
                .unwrap_or_default(),
            _ => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let open: Vec<&Value> = items.iter().filter(|it| !done.contains(&item_key(it))).collect();
        let mine: Vec<&Value> = open
            .iter()
            .copied()
            .filter(|it| {
                let n = it["input"]["toAccount"].as_str().and_then(hold_number).unwrap_or(0);
                let quorum = it["rule"]["quorum"].as_u64().unwrap_or(1);
                n % APPROVERS == k || (quorum > 1 && (n + 1) % APPROVERS == k)
            })
            .collect();
        let batch: Vec<&Value> = if mine.is_empty() {
            open.into_iter().take(5).collect()
        } else {
            mine.into_iter().take(20).collect()
        };
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        for item in batch {
            let Some(account) = item["input"]["toAccount"].as_str() else {
                continue;
            };
            if let Ok(mut s) = shared.seen.lock() {
                s.insert(account.to_owned());
            }
            let outcome = if k == CLI_APPROVER {
                answer_cli(&shared, &key, item, approves(account)).await
            } else {
                answer_http(&shared, &key, item, approves(account)).await
            };
            shared.stats.answer(&outcome);
            if outcome != "error" {
                done.insert(item_key(item));
            }
        }
    }
}

fn item_key(item: &Value) -> String {
    format!(
        "{}/{}",
        item["snapshotId"].as_str().unwrap_or(""),
        item["ref"].as_str().unwrap_or("")
    )
}

async fn answer_http(shared: &Shared, key: &str, item: &Value, approve: bool) -> String {
    let agent = item["agent"].as_str().unwrap_or("bankingAgent");
    let mut data = json!({
        "snapshotId": item["snapshotId"],
        "ref": item["ref"],
        "decision": if approve { "approve" } else { "deny" },
    });
    if !approve {
        data["reason"] = json!("cluster run: declined");
    }
    let sent = shared
        .http
        .post(format!("{}/agents/{agent}/answer", shared.proxy))
        .header("x-api-key", key)
        .json(&json!({ "data": data }))
        .send()
        .await;
    match sent {
        Ok(r) => {
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            match status {
                200 if body["result"]["decided"] == json!(true) => "decided".into(),
                200 => "counted".into(),
                500..=599 => "error".into(),
                other => format!("http{other}"),
            }
        }
        Err(_) => "error".into(),
    }
}

async fn answer_cli(shared: &Shared, key: &str, item: &Value, approve: bool) -> String {
    let agent = item["agent"].as_str().unwrap_or("bankingAgent").to_owned();
    let mut cmd = tokio::process::Command::new(&shared.holdpoint);
    cmd.args(["--server", &shared.proxy, "--api-key", key, "--agent", &agent])
        .arg(if approve { "approve" } else { "deny" })
        .arg(item["snapshotId"].as_str().unwrap_or(""))
        .arg(item["ref"].as_str().unwrap_or(""))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if !approve {
        cmd.args(["--reason", "cluster run: declined"]);
    }
    shared.stats.cli_answers.fetch_add(1, Ordering::SeqCst);
    match cmd.output().await {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("the resumed turn ended") {
                "decided".into()
            } else {
                "counted".into()
            }
        }
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
            if err.contains("not waiting")
                || err.contains("already")
                || err.contains("not found")
                || err.contains("taken")
                || err.contains("409")
                || err.contains("404")
            {
                "cliRefused".into()
            } else {
                "error".into()
            }
        }
        Err(_) => "error".into(),
    }
}

/// What the chaos did.
struct Chaos {
    kills: usize,
    restarts: usize,
    pg_restarts: usize,
    last_kill: Option<Instant>,
}

/// Kills a random running replica each time another `holds / (kills + 1)`
/// holds are created (keeping at least one up), restarts it after a random
/// pause, and restarts PostgreSQL once halfway.
async fn chaos(
    args: &Args,
    shared: &Shared,
    replicas: &Arc<AsyncMutex<Vec<Replica>>>,
    pg: &Postgres,
    http: &reqwest::Client,
) -> Result<Chaos, Error> {
    let mut rng = args.seed.max(1);
    let mut rand = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    };
    let mut out = Chaos {
        kills: 0,
        restarts: 0,
        pg_restarts: 0,
        last_kill: None,
    };
    let step = (args.holds / (args.kills + 1)).max(1);
    let mut pending_restarts: Vec<(usize, Instant)> = Vec::new();
    loop {
        let created = shared.created.load(Ordering::SeqCst);
        let all_created = created >= args.holds;
        if args.pg_restart && out.pg_restarts == 0 && (created >= args.holds / 2 || all_created) {
            pg.restart_immediate()?;
            out.pg_restarts += 1;
        }
        if out.kills < args.kills && (created >= step * (out.kills + 1) || all_created) {
            let mut reps = replicas.lock().await;
            let up: Vec<usize> = (0..reps.len()).filter(|i| reps[*i].is_up()).collect();
            if up.len() >= 2 {
                let victim = up[rand(up.len() as u64) as usize];
                reps[victim].kill().await?;
                out.kills += 1;
                out.last_kill = Some(Instant::now());
                let pause = Duration::from_millis(300 + rand(2_700));
                pending_restarts.push((victim, Instant::now() + pause));
            }
        }
        let now = Instant::now();
        let due: Vec<usize> = pending_restarts
            .iter()
            .filter(|(_, at)| *at <= now)
            .map(|(i, _)| *i)
            .collect();
        pending_restarts.retain(|(_, at)| *at > now);
        for victim in due {
            let mut reps = replicas.lock().await;
            reps[victim].start(http).await?;
            out.restarts += 1;
        }
        if all_created
            && out.kills >= args.kills
            && pending_restarts.is_empty()
            && (out.pg_restarts > 0 || !args.pg_restart)
        {
            return Ok(out);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lists the calls in doubt of both agents as the operator and settles each
/// against the ledger: `respond` when the transfer is in it (it ran),
/// `restart` with the same decision when it is not (it did not).
async fn settle(shared: &Shared, db: &sqlx::PgPool) -> Result<Value, Error> {
    let mut listed = 0;
    let mut settled_respond = 0;
    let mut settled_restart = 0;
    let mut failed = 0;
    let mut refused: Vec<Value> = Vec::new();
    let mut calls: Vec<Value> = Vec::new();
    for round in 0..6 {
        let mut any = false;
        for agent in ["supportAgent", "bankingAgent"] {
            let r = shared
                .http
                .get(format!("{}/agents/{agent}/inDoubt?limit=1000", shared.proxy))
                .header("x-api-key", OPERATOR_KEY)
                .send()
                .await?;
            let body: Value = r.json().await?;
            let items = body["result"].as_array().cloned().unwrap_or_default();
            for item in items {
                any = true;
                if round == 0
                    || !calls
                        .iter()
                        .any(|c| c["snapshotId"] == item["snapshotId"] && c["ref"] == item["ref"])
                {
                    listed += 1;
                }
                calls.push(json!({"agent": agent, "snapshotId": item["snapshotId"], "ref": item["ref"]}));
                let part = item.get("part").cloned().unwrap_or(Value::Null);
                let request = &part["toolRequest"];
                let tool = request["name"].as_str().unwrap_or("").to_owned();
                let account = request["input"]["toAccount"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| request["input"]["input"].as_str().and_then(account_in_text))
                    .unwrap_or_default();
                if let Ok(mut s) = shared.seen.lock() {
                    s.insert(account.clone());
                }
                let ran: i64 = sqlx::query_scalar("SELECT count(*) FROM banking_ledger WHERE to_account = $1")
                    .bind(&account)
                    .fetch_one(db)
                    .await
                    .unwrap_or(0);
                let approve = approves(&account);
                let resume = if ran > 0 || !approve {
                    let output = if tool == "transferMoney" {
                        if ran > 0 {
                            json!({"success": true, "transactionId": "txn-123"})
                        } else {
                            json!({"success": false})
                        }
                    } else if ran > 0 {
                        json!("Done: txn-123")
                    } else {
                        json!("The transfer was not made.")
                    };
                    json!({"respond": [{"toolResponse": {"name": tool, "ref": request["ref"], "output": output}}]})
                } else {
                    let mut p = part.clone();
                    p["metadata"] = json!({"resumed": {"approved": true}});
                    json!({"restart": [p]})
                };
                let is_respond = resume.get("respond").is_some();
                let r = shared
                    .http
                    .post(format!("{}/agents/{agent}/settle", shared.proxy))
                    .header("x-api-key", OPERATOR_KEY)
                    .json(&json!({"data": {"snapshotId": item["snapshotId"], "resume": resume}}))
                    .send()
                    .await?;
                let status = r.status().as_u16();
                let body: Value = r.json().await.unwrap_or(Value::Null);
                if status == 200 {
                    if is_respond {
                        settled_respond += 1;
                    } else {
                        settled_restart += 1;
                    }
                } else {
                    refused.push(json!({"agent": agent, "status": status, "error": body["error"]}));
                }
            }
        }
        if !any {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // Whatever is still listed after the rounds was not settled.
    for agent in ["supportAgent", "bankingAgent"] {
        let r = shared
            .http
            .get(format!("{}/agents/{agent}/inDoubt?limit=1000", shared.proxy))
            .header("x-api-key", OPERATOR_KEY)
            .send()
            .await?;
        let body: Value = r.json().await?;
        failed += body["result"].as_array().map(Vec::len).unwrap_or(0);
    }
    Ok(json!({
        "listed": listed,
        "settledRespond": settled_respond,
        "settledRestart": settled_restart,
        "refused": refused,
        "failed": failed,
        "calls": calls,
    }))
}

/// The ledger check.
async fn check(shared: &Shared, db: &sqlx::PgPool, hooks: &Arc<Mutex<infra::Hooks>>) -> Result<Value, Error> {
    // Executions by account.
    let rows = sqlx::query("SELECT to_account, count(*) AS n FROM banking_ledger GROUP BY to_account")
        .fetch_all(db)
        .await
        .unwrap_or_default();
    let mut runs: HashMap<String, i64> = HashMap::new();
    for row in rows {
        runs.insert(row.try_get("to_account")?, row.try_get("n")?);
    }
    let confirmed = shared.confirmed.lock().map(|s| s.clone()).unwrap_or_default();
    let seen = shared.seen.lock().map(|s| s.clone()).unwrap_or_default();
    let holds: HashSet<&String> = confirmed.iter().chain(seen.iter()).collect();
    let approved: Vec<&&String> = holds.iter().filter(|a| approves(a)).collect();
    let denied = holds.len() - approved.len();
    let executed_once = approved.iter().filter(|a| runs.get(***a) == Some(&1)).count();
    let lost: Vec<&&&String> = approved.iter().filter(|a| !runs.contains_key(***a)).collect();
    let duplicates: Vec<(&String, &i64)> = runs.iter().filter(|(_, n)| **n > 1).collect();
    let ran_denied = holds.iter().filter(|a| !approves(a) && runs.contains_key(**a)).count();
    let unknown_runs = runs.keys().filter(|a| !holds.contains(a)).count();
    let executions: i64 = runs.values().sum();

    // Sessions: the latest snapshot of each.
    let latest = sqlx::query(
        "SELECT DISTINCT ON (session_id) session_id, coalesce(agent, '') AS agent, status,
                coalesce(finish_reason, '') AS finish_reason, resumed_at_ns IS NULL AS unanswered
         FROM holdpoint_snapshots ORDER BY session_id, created_at_ns DESC, snapshot_id DESC",
    )
    .fetch_all(db)
    .await?;
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    let mut stuck: usize = 0;
    let mut waiting: usize = 0;
    for row in &latest {
        let agent: String = row.try_get("agent")?;
        let status: String = row.try_get("status")?;
        let finish: String = row.try_get("finish_reason")?;
        let unanswered: bool = row.try_get("unanswered")?;
        *states.entry(format!("{agent}:{status}:{finish}")).or_default() += 1;
        match (status.as_str(), finish.as_str()) {
            ("completed", "stop") => {}
            ("completed", "interrupted") if unanswered => waiting += 1,
            _ => stuck += 1,
        }
    }
    // A waiting session is fine only while its hold is answerable: the inbox lists it.
    let inbox: Value = shared
        .http
        .get(format!("{}/inbox?limit=1", shared.proxy))
        .header("x-api-key", approver_key(0))
        .send()
        .await?
        .json()
        .await?;
    let answerable = inbox["result"]["total"].as_u64().unwrap_or(0) as usize;
    // Foreground children's holds surface at their root: a child waiting
    // under an answered root is not listed, so count roots only.
    let waiting_unanswerable = waiting.saturating_sub(answerable);

    // Webhooks: every delivered outbox row reached the receiver under its id.
    let outbox = sqlx::query("SELECT event_id, state FROM holdpoint_outbox")
        .fetch_all(db)
        .await?;
    let mut outbox_states: BTreeMap<String, usize> = BTreeMap::new();
    let hooks = hooks
        .lock()
        .map_err(|_| Error::Setup("the webhook receiver panicked".into()))?;
    let mut delivered_missing = 0;
    for row in &outbox {
        let id: String = row.try_get("event_id")?;
        let state: String = row.try_get("state")?;
        if state == "delivered" && hooks.seen.get(&id).is_none_or(|h| h.accepted == 0) {
            delivered_missing += 1;
        }
        *outbox_states.entry(state).or_default() += 1;
    }
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for rec in hooks.seen.values() {
        *kinds.entry(rec.kind.clone()).or_default() += 1;
    }
    let redelivered = hooks.seen.values().filter(|h| h.requests > 1).count();
    let changed = hooks.seen.values().filter(|h| h.changed).count();
    let never_accepted = hooks.seen.values().filter(|h| h.accepted == 0).count();
    let undelivered =
        outbox_states.get("pending").copied().unwrap_or(0) + outbox_states.get("dead").copied().unwrap_or(0);

    let clean = lost.is_empty()
        && duplicates.is_empty()
        && ran_denied == 0
        && stuck == 0
        && waiting_unanswerable == 0
        && delivered_missing == 0
        && changed == 0
        && never_accepted == 0
        && undelivered == 0;
    Ok(json!({
        "clean": clean,
        "holds": holds.len(),
        "approved": approved.len(),
        "denied": denied,
        "executions": executions,
        "executedOnce": executed_once,
        "duplicates": duplicates.len(),
        "duplicateAccounts": duplicates.iter().take(20).map(|(a, n)| json!({"account": a, "runs": n})).collect::<Vec<_>>(),
        "lost": lost.len(),
        "lostAccounts": lost.iter().take(20).map(|a| json!(a)).collect::<Vec<_>>(),
        "ranAfterDenial": ran_denied,
        "runsOfUnknownHolds": unknown_runs,
        "sessions": latest.len(),
        "sessionStates": states,
        "stuckSessions": stuck,
        "waitingUnanswerable": waiting_unanswerable,
        "webhooks": {
            "outboxRows": outbox.len(),
            "outboxStates": outbox_states,
            "idsReceived": hooks.seen.len(),
            "byType": kinds,
            "redeliveredIds": redelivered,
            "idsWithChangedPayload": changed,
            "idsNeverAccepted": never_accepted,
            "deliveredButNotReceived": delivered_missing,
            "withoutId": hooks.without_id,
        },
    }))
}
