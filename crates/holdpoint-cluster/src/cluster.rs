//! Bringing the cluster up and down: the private PostgreSQL, the webhook
//! receiver, the configuration, the replicas (each on a fixed port, so a
//! restart comes back at the same address) and the proxy in front.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;

use crate::infra::{self, Hooks, Postgres, Replica};
use crate::plan::{self, OPERATOR_KEY};
use crate::{Args, Error};

/// The running cluster.
pub struct Cluster {
    /// The store and the ledger's database.
    pub pg: Postgres,
    /// What the webhook receiver saw.
    pub hooks: Arc<Mutex<Hooks>>,
    /// The replicas, shared with the chaos.
    pub replicas: Arc<AsyncMutex<Vec<Replica>>>,
    /// The proxy's address.
    pub proxy: SocketAddr,
    /// The HTTP client (no idle connections kept: every request is balanced anew).
    pub http: reqwest::Client,
    /// Where the configuration and the replicas' logs and data are.
    pub work: PathBuf,
}

impl Cluster {
    /// Starts every part; the replicas are healthy when it returns.
    pub async fn start(args: &Args) -> Result<Cluster, Error> {
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
        let script = args
            .pg_script
            .clone()
            .unwrap_or_else(|| PathBuf::from("scripts/postgres.sh"));
        let pg = Postgres::start(&script)?;
        if args.pg_durable {
            pg.durable_commits().await?;
        }
        let (hook_addr, hooks) = infra::start_hooks().await?;
        let cfg_path = work.join("cluster.toml");
        std::fs::write(&cfg_path, plan::config(&pg.url, hook_addr))?;
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(60))
            .build()?;
        let mut replicas = Vec::new();
        for r in 0..args.replicas {
            let addr: SocketAddr = format!("127.0.0.1:{}", infra::free_port()?)
                .parse()
                .map_err(|_| Error::Setup("bad address".into()))?;
            let data = work.join(format!("replica-{r}"));
            std::fs::create_dir_all(&data)?;
            let cli = [
                "serve",
                "--config",
                &cfg_path.display().to_string(),
                "--addr",
                &addr.to_string(),
                "--model",
                "scripted",
                "--api-key",
                OPERATOR_KEY,
                "--data-dir",
                &data.display().to_string(),
            ]
            .map(str::to_owned)
            .to_vec();
            let env = vec![("BANKING_LEDGER_URL".to_owned(), pg.url.clone())];
            let mut replica = Replica::new(&banking, addr, cli, env, work.join(format!("replica-{r}.log")));
            replica.start(&http).await?;
            replicas.push(replica);
        }
        let proxy = infra::start_proxy(replicas.iter().map(|r| r.addr).collect()).await?;
        Ok(Cluster {
            pg,
            hooks,
            replicas: Arc::new(AsyncMutex::new(replicas)),
            proxy,
            http,
            work,
        })
    }

    /// Stops the replicas, then PostgreSQL (its folder is removed).
    pub async fn stop(self) {
        let mut replicas = self.replicas.lock().await;
        for r in replicas.iter_mut() {
            let _ = r.kill().await;
        }
        drop(replicas);
        drop(self.pg);
    }
}
