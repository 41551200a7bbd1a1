use super::*;

#[test]
fn provider_error_shapes() {
    let p = ProviderError::parse(r#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#);
    assert_eq!(p.message.as_deref(), Some("bad key"));
    let p = ProviderError::parse(r#"{"error":"model not found"}"#);
    assert_eq!(p.message.as_deref(), Some("model not found"));
    let p = ProviderError::parse(r#"{"detail":"nope"}"#);
    assert_eq!(p.message.as_deref(), Some("nope"));
    let p = ProviderError::parse("upstream connect error");
    assert_eq!(p.message.as_deref(), Some("upstream connect error"));
    let p = ProviderError::parse(
        r#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}"#,
    );
    assert!(p.api_key_invalid);
}

#[test]
fn statuses_follow_the_table() {
    assert_eq!(status_for(StatusCode::UNAUTHORIZED), Status::Unauthenticated);
    assert_eq!(status_for(StatusCode::FORBIDDEN), Status::PermissionDenied);
    assert_eq!(status_for(StatusCode::TOO_MANY_REQUESTS), Status::ResourceExhausted);
    assert_eq!(status_for(StatusCode::from_u16(529).unwrap()), Status::Unavailable);
    assert_eq!(status_for(StatusCode::BAD_REQUEST), Status::InvalidArgument);
}

#[test]
fn backoff_grows_and_is_capped() {
    let o = HttpOptions::default().backoff(Duration::from_millis(100), Duration::from_millis(350));
    assert!(o.backoff_for(0) >= Duration::from_millis(100));
    assert!(o.backoff_for(1) >= Duration::from_millis(200));
    assert_eq!(o.backoff_for(5), Duration::from_millis(350));
}

#[test]
fn retry_after_reads_seconds_and_ms() {
    let mut h = HeaderMap::new();
    h.insert(RETRY_AFTER, HeaderValue::from_static("2"));
    assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
    h.insert("retry-after-ms", HeaderValue::from_static("150"));
    assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
    assert_eq!(retry_after(&HeaderMap::new()), None);
}
