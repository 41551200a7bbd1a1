//! `[server]` with the command line over it: one precedence for every
//! binary that serves (`holdpoint serve`, `banking serve`).
//!
//! A flag given wins over the file's key, the file over the default:
//! `--addr` over `listen` (default [`DEFAULT_LISTEN`]), `--data-dir` over
//! `data_dir`, `--allowed-host` (any) over `allowed_hosts`;
//! `--metrics-open` opens metrics when either says so. The store has its
//! own chooser ([`choose_store`](crate::choose_store)): a binary serving
//! agents built already has no store to choose.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use holdpoint_server::ServerBuilder;

use crate::config::Config;
use crate::error::DeployError;

/// Where a server listens when neither `--addr` nor `[server] listen` says:
/// `127.0.0.1:8080`.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));

/// The flags of a `serve` command that stand for `[server]` keys, as given
/// (absent or empty: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFlags {
    /// `--addr IP:PORT`.
    pub addr: Option<String>,
    /// `--data-dir DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--metrics-open`.
    pub metrics_open: bool,
    /// `--allowed-host HOST`, repeated.
    pub allowed_hosts: Vec<String>,
}

/// What a server starts with: the flags over the file over the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Where the state-signing keys are kept (`None`: the server's default;
    /// a binary may put its own default here).
    pub data_dir: Option<PathBuf>,
    /// Serve `GET /metrics` without credentials.
    pub metrics_open: bool,
    /// Host names an anonymous server answers besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

impl Serving {
    /// `flags` over `config`'s `[server]` (see the module docs). Fails only
    /// for an `--addr` that is not `IP:PORT` (the file's `listen` was
    /// checked when it was loaded).
    pub fn resolve(flags: ServerFlags, config: Option<&Config>) -> Result<Self, DeployError> {
        let file = config.map(Config::server);
        let listen = match (&flags.addr, file.and_then(|f| f.listen)) {
            (Some(addr), _) => addr
                .parse()
                .map_err(|_| DeployError::Flag(format!("--addr {addr:?} is not IP:PORT, e.g. 127.0.0.1:8080")))?,
            (None, Some(listen)) => listen,
            (None, None) => DEFAULT_LISTEN,
        };
        let allowed_hosts = match (flags.allowed_hosts.is_empty(), file) {
            (true, Some(f)) => f.allowed_hosts.clone(),
            _ => flags.allowed_hosts,
        };
        Ok(Serving {
            listen,
            data_dir: flags.data_dir.or_else(|| file.and_then(|f| f.data_dir.clone())),
            metrics_open: flags.metrics_open || file.and_then(|f| f.metrics_open).unwrap_or(false),
            allowed_hosts,
        })
    }

    /// Refuses to serve anonymous callers beyond loopback: with no
    /// `operator_key` and no credentials in `config` (API keys or
    /// `[auth.jwt]`), `listen` must be a loopback address
    /// ([`authenticate`](crate::authenticate) then allows anonymous
    /// callers). Call it before binding.
    pub fn check_exposure(&self, operator_key: Option<&str>, config: Option<&Config>) -> Result<(), DeployError> {
        let authenticated = operator_key.is_some_and(|k| !k.is_empty()) || config.is_some_and(Config::has_auth);
        if authenticated || self.listen.ip().is_loopback() {
            return Ok(());
        }
        Err(DeployError::Exposed(self.listen))
    }

    /// `builder` with `/metrics` access, the allowed hosts (when any) and
    /// the data directory (when set). Where to listen is the caller's.
    pub fn apply(&self, mut builder: ServerBuilder) -> ServerBuilder {
        builder = builder.metrics_open(self.metrics_open);
        if !self.allowed_hosts.is_empty() {
            builder = builder.allowed_hosts(self.allowed_hosts.iter().cloned());
        }
        if let Some(dir) = &self.data_dir {
            builder = builder.data_dir(dir);
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "[server]\nlisten = \"127.0.0.1:9000\"\ndata_dir = \"/srv/hp\"\n\
                        metrics_open = true\nallowed_hosts = [\"hp.example\"]\n";

    #[test]
    fn a_flag_wins_over_the_file_which_wins_over_the_default() {
        let none = Serving::resolve(ServerFlags::default(), None).unwrap();
        assert_eq!(none.listen, DEFAULT_LISTEN);
        assert_eq!(none.listen.to_string(), "127.0.0.1:8080");
        assert_eq!((none.data_dir, none.metrics_open), (None, false));
        let config = Config::parse(FILE, "holdpoint.toml").unwrap();
        let file = Serving::resolve(ServerFlags::default(), Some(&config)).unwrap();
        assert_eq!(file.listen.to_string(), "127.0.0.1:9000");
        assert_eq!(file.data_dir, Some("/srv/hp".into()));
        assert!(file.metrics_open);
        assert_eq!(file.allowed_hosts, ["hp.example"]);
        let flags = ServerFlags {
            addr: Some("127.0.0.1:0".into()),
            data_dir: Some("/tmp/d".into()),
            metrics_open: false,
            allowed_hosts: vec!["proxy.example".into()],
        };
        let both = Serving::resolve(flags, Some(&config)).unwrap();
        assert_eq!(both.listen.to_string(), "127.0.0.1:0");
        assert_eq!(both.data_dir, Some("/tmp/d".into()));
        assert!(both.metrics_open, "either opens metrics");
        assert_eq!(both.allowed_hosts, ["proxy.example"]);
    }

    #[test]
    fn anonymous_callers_are_served_on_loopback_only() {
        let at = |addr: &str| {
            let flags = ServerFlags {
                addr: Some(addr.into()),
                ..ServerFlags::default()
            };
            Serving::resolve(flags, None).unwrap()
        };
        assert!(at("127.0.0.1:0").check_exposure(None, None).is_ok());
        assert!(at("[::1]:0").check_exposure(Some(""), None).is_ok());
        let e = at("0.0.0.0:0").check_exposure(None, None).unwrap_err().to_string();
        assert!(e.starts_with("listening on 0.0.0.0:0 without --api-key"), "{e}");
        assert!(
            at("0.0.0.0:0").check_exposure(Some(""), None).is_err(),
            "an empty key is none"
        );
        assert!(at("0.0.0.0:0").check_exposure(Some("k-op"), None).is_ok());
        let keys = "[[auth.api_keys]]\nprincipal = \"a\"\nkey = \"k-a-0123456789\"\n";
        let config = Config::parse(keys, "holdpoint.toml").unwrap();
        assert!(at("0.0.0.0:0").check_exposure(None, Some(&config)).is_ok());
    }

    #[test]
    fn a_bad_addr_names_the_flag() {
        let flags = ServerFlags {
            addr: Some("localhost".into()),
            ..ServerFlags::default()
        };
        let e = Serving::resolve(flags, None).unwrap_err().to_string();
        assert_eq!(e, "--addr \"localhost\" is not IP:PORT, e.g. 127.0.0.1:8080");
    }
}
