//! OpenID Connect sign-in for the approval page: the issuer and the page's
//! public client id, checked so the issuer's origin can go into the page's
//! Content-Security-Policy (docs/reference.md §12.9).

use serde::Serialize;

/// Why a [`PageLogin`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// The issuer is not an `http://` or `https://` URL with a host.
    #[error("the sign-in issuer {0:?} is not an http(s) URL with a host")]
    BadIssuer(String),
    /// The client id is empty.
    #[error("the sign-in client id is empty")]
    NoClientId,
}

/// OpenID Connect sign-in for the approval page: the issuer (its discovery
/// document and token endpoint must be on the issuer's origin, which the
/// page's Content-Security-Policy then allows), the page's client id
/// (registered with the issuer for the page's URL as redirect URI, public,
/// PKCE), and the scopes asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageLogin {
    issuer: String,
    client_id: String,
    scope: String,
    #[serde(skip)]
    origin: String,
}

impl PageLogin {
    /// Sign-in against `issuer` as the public client `client_id`, asking
    /// for `openid profile`.
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>) -> Result<Self, LoginError> {
        let issuer = issuer.into();
        let client_id = client_id.into();
        if client_id.trim().is_empty() {
            return Err(LoginError::NoClientId);
        }
        let origin = origin_of(&issuer).ok_or_else(|| LoginError::BadIssuer(issuer.clone()))?;
        Ok(PageLogin {
            issuer: issuer.trim_end_matches('/').to_owned(),
            client_id,
            scope: "openid profile".into(),
            origin,
        })
    }

    /// The scopes to ask for instead (space-separated; `openid` is added
    /// when missing).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        let scope = scope.into();
        self.scope = if scope.split_whitespace().any(|s| s == "openid") {
            scope
        } else {
            format!("openid {scope}").trim().to_owned()
        };
        self
    }

    /// The issuer's origin (`scheme://host[:port]`), for the page's
    /// Content-Security-Policy.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }
}

/// `scheme://host[:port]` of an http(s) URL whose host part holds only
/// characters a CSP source may (no spaces, quotes, `;` or `,`).
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next()?;
    let ok = !host.is_empty()
        && !host.contains('@')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    ok.then(|| format!("{scheme}://{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_of_issuers() {
        let login = PageLogin::new("https://login.example/realms/x/", "holdpoint").unwrap();
        assert_eq!(login.origin(), "https://login.example");
        assert_eq!(login.issuer, "https://login.example/realms/x");
        assert_eq!(
            PageLogin::new("http://127.0.0.1:9000", "p").unwrap().origin(),
            "http://127.0.0.1:9000"
        );
        for bad in [
            "login.example",
            "ftp://x",
            "https://",
            "https://a b",
            "https://x;script-src *",
            "https://u@x",
        ] {
            assert_eq!(
                PageLogin::new(bad, "p"),
                Err(LoginError::BadIssuer(bad.into())),
                "{bad}"
            );
        }
        assert_eq!(PageLogin::new("https://x", " "), Err(LoginError::NoClientId));
        assert_eq!(
            PageLogin::new("https://x", "p").unwrap().scope("email").scope,
            "openid email"
        );
    }
}
