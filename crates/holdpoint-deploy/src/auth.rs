//! Who may call the server: the file's `[[auth.api_keys]]`, `[auth.jwt]`
//! and the page's sign-in, plus the operator key of the command line, onto
//! a [`ServerBuilder`].

use holdpoint_server::ServerBuilder;

use crate::config::Config;
use crate::error::DeployError;

/// `builder` with the file's API keys, JWT verifier (its keys fetched once
/// now; a warning when none could be) and page sign-in, plus `operator_key`
/// (principal `operator`, the [`OPERATOR_ROLE`](holdpoint_server::OPERATOR_ROLE):
/// it may also see and steer the notification pipe) unless the file lists
/// that key already. With no credentials at all the server allows
/// anonymous callers (the caller has checked it listens on loopback only).
/// Also says whether callers must authenticate.
pub async fn authenticate(
    mut builder: ServerBuilder,
    config: Option<&Config>,
    operator_key: Option<&str>,
) -> Result<(ServerBuilder, bool), DeployError> {
    let mut keys = config.map(Config::api_keys).unwrap_or_default();
    if let Some(key) = operator_key
        && !keys.contains(key)
    {
        keys = keys.key_with_roles(key, "operator", [holdpoint_server::OPERATOR_ROLE]);
    }
    let authenticated = !keys.is_empty() || config.is_some_and(|c| c.jwt().is_some());
    if !keys.is_empty() {
        builder = builder.api_keys(keys);
    }
    if let Some(c) = config {
        let jwt = c.jwt_verifier().map_err(|source| DeployError::Jwt {
            file: c.file().to_owned(),
            source,
        })?;
        if let Some(jwt) = jwt {
            if jwt.refresh_keys().await == 0 {
                eprintln!("warning: no JWT keys could be fetched yet; they are fetched again when a token arrives");
            }
            builder = builder.jwt(jwt);
        }
        // `[auth.jwt] page_client_id`: the approval page signs people in.
        if let Some(login) = c.page_login() {
            builder = builder.page_login(login);
        }
    }
    if !authenticated {
        builder = builder.allow_anonymous(true);
    }
    Ok((builder, authenticated))
}
