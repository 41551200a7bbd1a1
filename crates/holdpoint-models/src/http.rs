//! The HTTP layer every provider shares: one reqwest client per model,
//! retries with backoff that honour `Retry-After`, and the mapping of HTTP
//! failures to [`Status`] with the provider's own message.
//!
//! | HTTP | status | retried |
//! |---|---|---|
//! | 400, 413, 422, other 4xx | `INVALID_ARGUMENT` | no |
//! | 401 (and Gemini's 400 `API_KEY_INVALID`) | `UNAUTHENTICATED` | no |
//! | 403 | `PERMISSION_DENIED` | no |
//! | 404 | `NOT_FOUND` | no |
//! | 408, timeouts | `DEADLINE_EXCEEDED` | no |
//! | 429 | `RESOURCE_EXHAUSTED` | yes |
//! | 5xx (and 529 "overloaded") | `UNAVAILABLE` | yes |
//! | connection refused/reset | `UNAVAILABLE` | yes |
//!
//! [`HttpOptions`] is always built (the registry takes it); the client
//! itself only with a provider that uses it.

use std::time::Duration;

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
use client_deps::*;

/// What the client needs, in one place so one `cfg` covers it.
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod client_deps {
    pub(super) use holdpoint::{Error, Result, Status};
    pub(super) use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
    pub(super) use reqwest::{Response, StatusCode};
    pub(super) use serde::Serialize;
    pub(super) use serde::de::DeserializeOwned;
    pub(super) use serde_json::Value;

    pub(super) use crate::key::ApiKey;
}

/// Timeouts and retry policy of a provider's HTTP calls.
///
/// ```
/// use std::time::Duration;
/// use holdpoint_models::HttpOptions;
/// let http = HttpOptions::default().timeout(Duration::from_secs(60)).max_retries(5);
/// assert_eq!(http.max_retries, 5);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Time allowed to open a connection (default 10 s).
    pub connect_timeout: Duration,
    /// Time allowed for a whole call, streamed body included (default 10 min;
    /// `None` for no limit).
    pub timeout: Option<Duration>,
    /// Longest silence allowed between two reads of the body (default 2 min;
    /// `None` for no limit). This is what catches a stalled stream.
    pub read_timeout: Option<Duration>,
    /// Retries after a 429, a 5xx or a refused connection (default 3).
    pub max_retries: u32,
    /// Wait before the first retry when the provider gives no `Retry-After`;
    /// doubled on each retry (default 1 s).
    pub initial_backoff: Duration,
    /// Longest wait between retries (default 30 s). A `Retry-After` asking
    /// for longer ends the retries at once, with the provider's error.
    pub max_backoff: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            timeout: Some(Duration::from_secs(600)),
            read_timeout: Some(Duration::from_secs(120)),
            max_retries: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl HttpOptions {
    /// Sets the whole-call timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the read (silence) timeout.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }

    /// Sets the number of retries.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Sets the first backoff and the longest wait.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    #[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
    fn backoff_for(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(16));
        let base = self.initial_backoff.saturating_mul(factor).min(self.max_backoff);
        // Up to 20% jitter, so that many clients do not retry in step.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let jitter = base.mul_f64(f64::from(nanos % 1000) / 5000.0);
        (base + jitter).min(self.max_backoff)
    }
}

/// A header to send on every call; `sensitive` ones are hidden from
/// reqwest's `Debug` output.
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
pub(crate) struct Header {
    pub name: &'static str,
    pub value: String,
    pub sensitive: bool,
}

/// One provider's HTTP client: base headers, retries, error mapping.
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
#[derive(Clone)]
pub(crate) struct HttpClient {
    provider: String,
    client: reqwest::Client,
    headers: HeaderMap,
    options: HttpOptions,
    key: Option<ApiKey>,
}

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("provider", &self.provider)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
impl HttpClient {
    /// A client for `provider` sending `headers` on every call. `key` is
    /// only used to scrub it from error messages.
    pub fn new(provider: &str, options: &HttpOptions, headers: Vec<Header>, key: Option<ApiKey>) -> Result<Self> {
        let mut map = HeaderMap::new();
        for h in headers {
            let mut value = HeaderValue::from_str(&h.value).map_err(|_| {
                Error::with_status(
                    Status::InvalidArgument,
                    format!(
                        "{provider}: the value of header {} has characters HTTP does not allow",
                        h.name
                    ),
                )
            })?;
            value.set_sensitive(h.sensitive);
            map.insert(HeaderName::from_static(h.name), value);
        }
        let mut builder = reqwest::Client::builder().connect_timeout(options.connect_timeout);
        if let Some(t) = options.timeout {
            builder = builder.timeout(t);
        }
        if let Some(t) = options.read_timeout {
            builder = builder.read_timeout(t);
        }
        let client = builder
            .build()
            .map_err(|e| Error::with_status(Status::Internal, format!("{provider}: cannot build HTTP client: {e}")))?;
        Ok(HttpClient {
            provider: provider.to_owned(),
            client,
            headers: map,
            options: options.clone(),
            key,
        })
    }

    /// The provider's name, for messages.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// `text` with the key scrubbed out.
    pub fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(k) => k.scrub(text),
            None => text.to_owned(),
        }
    }

    /// An error with `status` and a message prefixed by the provider name
    /// and scrubbed of the key.
    pub fn error(&self, status: Status, message: impl AsRef<str>) -> Error {
        Error::with_status(status, self.scrub(&format!("{}: {}", self.provider, message.as_ref())))
    }

    /// POSTs `body` as JSON, retrying 429s, 5xxs and refused connections;
    /// returns the first successful response.
    pub async fn post_json<T: Serialize>(&self, url: &str, body: &T) -> Result<Response> {
        let body = serde_json::to_vec(body)
            .map_err(|e| self.error(Status::Internal, format!("cannot encode request: {e}")))?;
        let mut attempt: u32 = 0;
        loop {
            tracing::debug!(target: "holdpoint_models::http", provider = %self.provider, attempt, "POST {url}");
            let sent = self
                .client
                .post(url)
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            let delay = match sent {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status();
                    let retry_after = retry_after(resp.headers());
                    let text = resp.text().await.unwrap_or_default();
                    let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
                    let delay = match retry_after {
                        Some(wait) if wait > self.options.max_backoff => None,
                        Some(wait) => Some(wait),
                        None => Some(self.options.backoff_for(attempt)),
                    };
                    match delay {
                        Some(delay) if retryable && attempt < self.options.max_retries => {
                            tracing::warn!(
                                target: "holdpoint_models::http",
                                provider = %self.provider,
                                status = status.as_u16(),
                                attempt,
                                delay_ms = delay.as_millis() as u64,
                                "provider call failed; retrying"
                            );
                            delay
                        }
                        _ => return Err(self.status_error(status, &text, attempt)),
                    }
                }
                Err(e) if e.is_connect() && attempt < self.options.max_retries => {
                    let delay = self.options.backoff_for(attempt);
                    tracing::warn!(
                        target: "holdpoint_models::http",
                        provider = %self.provider,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "cannot connect to provider; retrying"
                    );
                    delay
                }
                Err(e) => return Err(self.transport_error(&e)),
            };
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// Reads a whole JSON response body.
    pub async fn read_json<R: DeserializeOwned>(&self, resp: Response) -> Result<R> {
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(&e))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| self.error(Status::Internal, format!("malformed response body: {e}")))
    }

    /// Maps a reqwest failure (no HTTP status) to an error.
    pub fn transport_error(&self, e: &reqwest::Error) -> Error {
        if e.is_timeout() {
            self.error(Status::DeadlineExceeded, format!("request timed out: {e}"))
        } else if e.is_connect() {
            self.error(Status::Unavailable, format!("cannot connect: {e}"))
        } else {
            self.error(Status::Unavailable, format!("request failed: {e}"))
        }
    }

    /// Maps a non-success HTTP answer to an error carrying the provider's
    /// message.
    pub fn status_error(&self, status: StatusCode, body: &str, retries: u32) -> Error {
        let parsed = ProviderError::parse(body);
        let code = if parsed.api_key_invalid {
            Status::Unauthenticated
        } else {
            status_for(status)
        };
        let message = parsed
            .message
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("no message").to_owned());
        let retried = if retries > 0 {
            format!(" (after {retries} retries)")
        } else {
            String::new()
        };
        self.error(code, format!("HTTP {}{retried}: {message}", status.as_u16()))
    }
}

/// The status for an HTTP code.
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
pub(crate) fn status_for(status: StatusCode) -> Status {
    match status.as_u16() {
        401 => Status::Unauthenticated,
        403 => Status::PermissionDenied,
        404 => Status::NotFound,
        408 => Status::DeadlineExceeded,
        409 => Status::Aborted,
        429 => Status::ResourceExhausted,
        500..=599 => Status::Unavailable,
        _ => Status::InvalidArgument,
    }
}

/// What a provider said in an error body.
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
pub(crate) struct ProviderError {
    pub message: Option<String>,
    pub api_key_invalid: bool,
}

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
impl ProviderError {
    /// Reads `{"error": {"message": …}}` (Gemini, OpenAI, Anthropic),
    /// `{"error": "…"}` (Ollama), `{"message"|"detail": "…"}` (other
    /// compatible servers), or falls back to the body text.
    pub fn parse(body: &str) -> Self {
        let value: Option<Value> = serde_json::from_str(body).ok();
        let message = value.as_ref().and_then(|v| {
            let err = v.get("error");
            err.and_then(|e| e.get("message"))
                .or(err)
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let api_key_invalid = value
            .as_ref()
            .and_then(|v| v.pointer("/error/details"))
            .and_then(Value::as_array)
            .is_some_and(|details| {
                details
                    .iter()
                    .any(|d| d.get("reason").and_then(Value::as_str) == Some("API_KEY_INVALID"))
            });
        let message = message.or_else(|| {
            let text = body.trim();
            (!text.is_empty()).then(|| truncate(text, 300))
        });
        ProviderError {
            message,
            api_key_invalid,
        }
    }
}

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `Retry-After` in seconds (OpenAI also sends `retry-after-ms`).
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let secs = headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(all(test, any(feature = "gemini", feature = "openai", feature = "anthropic")))]
mod tests;
