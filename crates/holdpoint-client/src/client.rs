//! One server: base URL, credentials, and the HTTP plumbing every call shares.

use std::time::Duration;

use holdpoint::{ErrorBody, Status};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ClientError, Result};

/// How a request proves who sends it.
#[derive(Clone)]
pub(crate) enum Credential {
    None,
    ApiKey(String),
    Bearer(String),
}

/// Where a server puts an agent's routes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Layout {
    /// `holdpoint-server`: `/agents/{name}`, `/agents/{name}/getSnapshot`,
    /// `/agents/{name}/abort`, `/agents/{name}/waitForSnapshot`,
    /// `/agents/{name}/connect`, `/agents/{name}/pending`.
    #[default]
    Holdpoint,
    /// Genkit JS (`expressHandler`, `startFlowServer`): `{prefix}/{name}`
    /// for the agent and, as Genkit's `remoteAgent` expects,
    /// `{prefix}/{name}/getSnapshot` and `{prefix}/{name}/abort` for its
    /// `getSnapshotDataAction` and `abortAgentAction`. There is no
    /// WebSocket, `waitForSnapshot` (the client polls) or pending list.
    Genkit {
        /// The path before the agent's name, e.g. `""` or `"/api"`.
        prefix: String,
    },
}

/// A server that serves agents (`holdpoint-server`, `holdpoint serve`,
/// `banking serve`). Cheap to clone; clones share one connection pool.
#[derive(Clone)]
pub struct Client {
    pub(crate) base: String,
    pub(crate) credential: Credential,
    pub(crate) http: reqwest::Client,
    pub(crate) layout: Layout,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let credential = match self.credential {
            Credential::None => "none",
            Credential::ApiKey(_) => "api key",
            Credential::Bearer(_) => "bearer token",
        };
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("credential", &credential)
            .field("layout", &self.layout)
            .finish()
    }
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:8080`),
    /// anonymous until [`api_key`](Self::api_key) or [`bearer`](Self::bearer).
    pub fn new(base: impl Into<String>) -> Self {
        let base = base.into().trim_end_matches('/').to_owned();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Client {
            base,
            credential: Credential::None,
            http,
            layout: Layout::Holdpoint,
        }
    }

    /// Uses `layout` for the agents' routes (default [`Layout::Holdpoint`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Sends `key` as `X-API-Key`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.credential = Credential::ApiKey(key.into());
        self
    }

    /// Sends `token` as `Authorization: Bearer`.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.credential = Credential::Bearer(token.into());
        self
    }

    /// The names of the agents the server offers this caller: the
    /// `result` list of `holdpoint-server` (`[{"name": …}, …]`), or a bare
    /// list or `{"agents": […]}` of names or objects with a `name`.
    pub async fn agents(&self) -> Result<Vec<String>> {
        let body: Value = self.get("/agents").await?;
        let listed = body.get("result").unwrap_or(&body);
        let names = listed
            .as_array()
            .or_else(|| listed.get("agents").and_then(Value::as_array))
            .ok_or_else(|| ClientError::protocol(&self.url("/agents"), "expected a list of agents"))?
            .iter()
            .filter_map(|a| a.get("name").and_then(Value::as_str).or_else(|| a.as_str()))
            .map(str::to_owned)
            .collect();
        Ok(names)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn authorise(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.credential {
            Credential::None => request,
            Credential::ApiKey(key) => request.header("X-API-Key", key),
            Credential::Bearer(token) => request.bearer_auth(token),
        }
    }

    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = self.url(path);
        let response = self
            .authorise(self.http.get(&url))
            .send()
            .await
            .map_err(|e| ClientError::transport(&url, e))?;
        decode(&url, response).await
    }

    /// GETs `path` with the query `pairs` (an empty value is left out) and
    /// decodes the `result` of the answer.
    pub(crate) async fn get_result<T: DeserializeOwned>(&self, path: &str, pairs: &[(&str, String)]) -> Result<T> {
        let url = self.url_with(path, pairs)?;
        let response = self
            .authorise(self.http.get(url.clone()))
            .send()
            .await
            .map_err(|e| ClientError::transport(url.as_str(), e))?;
        result_of(url.as_str(), response).await
    }

    /// DELETEs `path` and decodes the `result` of the answer.
    pub(crate) async fn delete_result<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = self.url(path);
        let response = self
            .authorise(self.http.delete(&url))
            .send()
            .await
            .map_err(|e| ClientError::transport(&url, e))?;
        result_of(&url, response).await
    }

    /// The URL of `path` with the query `pairs`, percent-encoded; pairs
    /// with an empty value are left out.
    pub(crate) fn url_with(&self, path: &str, pairs: &[(&str, String)]) -> Result<reqwest::Url> {
        let text = self.url(path);
        let mut url = reqwest::Url::parse(&text).map_err(|e| ClientError::protocol(&text, e.to_string()))?;
        let kept: Vec<&(&str, String)> = pairs.iter().filter(|(_, v)| !v.is_empty()).collect();
        if !kept.is_empty() {
            let mut query = url.query_pairs_mut();
            for (key, value) in kept {
                query.append_pair(key, value);
            }
        }
        Ok(url)
    }

    /// POSTs `body` and decodes the `result` of the answer.
    pub(crate) async fn call<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        let url = self.url(path);
        let response = self
            .authorise(self.http.post(&url).json(body))
            .send()
            .await
            .map_err(|e| ClientError::transport(&url, e))?;
        result_of(&url, response).await
    }
}

/// Reads a `{"result": …}` answer, turning an error status into
/// [`ClientError::Server`].
async fn result_of<T: DeserializeOwned>(url: &str, response: reqwest::Response) -> Result<T> {
    let envelope: Value = decode(url, response).await?;
    let result = match envelope {
        Value::Object(mut map) => map.remove("result"),
        _ => None,
    }
    .ok_or_else(|| ClientError::protocol(url, "the answer has no `result`"))?;
    serde_json::from_value(result).map_err(|e| ClientError::protocol(url, e.to_string()))
}

/// Reads a JSON answer, turning an error status into [`ClientError::Server`].
pub(crate) async fn decode<T: DeserializeOwned>(url: &str, response: reqwest::Response) -> Result<T> {
    let http = response.status();
    let bytes = response.bytes().await.map_err(|e| ClientError::transport(url, e))?;
    if !http.is_success() {
        return Err(server_error(url, http.as_u16(), &bytes));
    }
    serde_json::from_slice(&bytes).map_err(|e| ClientError::protocol(url, format!("not the JSON expected: {e}")))
}

/// The error of an error answer: the body's `{"error": {status, message}}`
/// when it has one, else the HTTP status alone.
pub(crate) fn server_error(url: &str, http: u16, body: &[u8]) -> ClientError {
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: ErrorBody,
    }
    // Genkit JS answers an error as the body itself (`getCallableJSON`).
    let parsed = serde_json::from_slice::<Envelope>(body)
        .map(|e| e.error)
        .or_else(|_| serde_json::from_slice::<ErrorBody>(body));
    match parsed {
        Ok(error) => ClientError::Server {
            http,
            status: error.status,
            message: error.message,
        },
        Err(_) => ClientError::Server {
            http,
            status: status_of_http(http),
            message: format!(
                "{url} answered HTTP {http}: {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ),
        },
    }
}

fn status_of_http(http: u16) -> Status {
    match http {
        400 => Status::InvalidArgument,
        401 => Status::Unauthenticated,
        403 => Status::PermissionDenied,
        404 => Status::NotFound,
        409 => Status::Aborted,
        429 => Status::ResourceExhausted,
        503 => Status::Unavailable,
        _ => Status::Internal,
    }
}
