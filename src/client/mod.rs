//! A client of a qbets server's REST API, for the users' command line (`qbets bound`,
//! `qbets rank`, `qbets reserve` …): the server's URL and token, one request at a time,
//! answers read into the server's own view types, refusals kept as the problem+json
//! the server sent (RFC 9457) so that the command line can name the field.
//!
//! May import: reqwest, rustls, serde, and the HTTP layer's *types* (never its router).
//! It is the only module besides `sources` and `submit` that speaks HTTP as a client.

use std::sync::Once;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Where a server is when neither `--server` nor `QBETS_URL` says.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The settings are wrong (a URL without a scheme, a token that is not a header).
    #[error("{0}")]
    Config(String),
    /// No connection, or no answer in time.
    #[error("cannot reach the qbets server at {url}: {reason}")]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered with an error status; `problem` is its problem+json body
    /// (or the body's text under `detail` when it was not one).
    #[error("{}", describe(*status, problem))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The body.
        problem: Value,
    },
    /// The server answered something this client cannot read.
    #[error("unexpected answer from {url}: {reason}")]
    Protocol {
        /// The URL asked.
        url: String,
        /// What was wrong with it.
        reason: String,
    },
}

/// One line for a refusal: the detail, and each offending field.
fn describe(status: u16, problem: &Value) -> String {
    let title = problem["title"].as_str().unwrap_or("refused");
    let detail = problem["detail"].as_str().unwrap_or("");
    let mut text = format!("the server refused the request ({status} {title})");
    let fields: Vec<String> = problem["errors"]
        .as_array()
        .map(|es| {
            es.iter()
                .map(|e| {
                    format!(
                        "{}: {}",
                        e["field"].as_str().unwrap_or("?"),
                        e["detail"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if fields.is_empty() {
        if !detail.is_empty() {
            text.push_str(": ");
            text.push_str(detail);
        }
    } else {
        text.push_str(": ");
        text.push_str(&fields.join("; "));
    }
    text
}

impl ClientError {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A qbets server.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// rustls needs one process-wide crypto provider (ring, as the Slurm client).
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The error chain of a reqwest error on one line (its `Display` alone says only
/// "error sending request").
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    text
}

/// Percent-encodes a path segment or query value (RFC 3986 unreserved characters kept).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Client {
    /// A client of the server at `url` (`http://` or `https://`), sending `token` as a
    /// bearer token when given, giving up on a request after `timeout`.
    pub fn new(url: &str, token: Option<String>, timeout: Duration) -> Result<Self, ClientError> {
        let base = url.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Config(format!(
                "the server URL {url:?} must start with http:// or https://"
            )));
        }
        let token = token
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        if let Some(t) = &token
            && !t.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(ClientError::Config(
                "QBETS_TOKEN holds characters a token cannot have (spaces or control characters)"
                    .into(),
            ));
        }
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("qbets-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {}", chain(&e))))?;
        Ok(Client { http, base, token })
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET path?query`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ClientError> {
        self.send(reqwest::Method::GET, path, query, None::<&()>, None)
            .await
    }

    /// `POST path` with a JSON body (and an `Idempotency-Key` when given).
    pub async fn post<T: DeserializeOwned, B: Serialize>(
        &self,
        path: &str,
        body: &B,
        idempotency_key: Option<&str>,
    ) -> Result<T, ClientError> {
        self.send(
            reqwest::Method::POST,
            path,
            &[],
            Some(body),
            idempotency_key,
        )
        .await
    }

    /// `DELETE path`.
    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(reqwest::Method::DELETE, path, &[], None::<&()>, None)
            .await
    }

    async fn send<T: DeserializeOwned, B: Serialize>(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
        idempotency_key: Option<&str>,
    ) -> Result<T, ClientError> {
        let mut url = format!("{}{path}", self.base);
        for (i, (k, v)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(k);
            url.push('=');
            url.push_str(&encode(v));
        }
        let mut req = self
            .http
            .request(method, &url)
            .header("accept", "application/json");
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req.send().await.map_err(|e| ClientError::Unreachable {
            url: self.base.clone(),
            reason: chain(&e),
        })?;
        let status = res.status();
        let text = res.text().await.map_err(|e| ClientError::Unreachable {
            url: self.base.clone(),
            reason: chain(&e),
        })?;
        if !status.is_success() {
            let problem = serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| {
                    serde_json::json!({
                        "title": status.canonical_reason().unwrap_or("error"),
                        "status": status.as_u16(),
                        "detail": text.chars().take(500).collect::<String>(),
                    })
                });
            return Err(ClientError::Refused {
                status: status.as_u16(),
                problem,
            });
        }
        serde_json::from_str(&text).map_err(|e| ClientError::Protocol {
            url,
            reason: format!("{e} (is {} a qbets server?)", self.base),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_each_field() {
        let p = serde_json::json!({"title": "Invalid parameters", "status": 400,
            "detail": "nodes: bad", "errors": [{"field": "nodes", "detail": "must be a whole number"}]});
        assert_eq!(
            describe(400, &p),
            "the server refused the request (400 Invalid parameters): nodes: must be a whole number"
        );
        let p = serde_json::json!({"title": "Not Found", "detail": "no site named \"x\""});
        assert_eq!(
            describe(404, &p),
            "the server refused the request (404 Not Found): no site named \"x\""
        );
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("2024-05-01T12:00:00Z"), "2024-05-01T12%3A00%3A00Z");
    }

    #[test]
    fn a_url_without_a_scheme_is_refused() {
        let e = Client::new("localhost:8080", None, Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("must start with http://"), "{e}");
    }
}
