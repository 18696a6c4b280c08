//! Reservation webhooks (issue 25 item 5): the deliverer that POSTs a reservation's
//! state changes to the URL it names, from the store's transactional outbox.
//!
//! The store writes an outbox row in the same transaction as each state change
//! ([`Store::transition_reservation`], and a re-plan that puts a reservation at risk),
//! so every change committed is sent and none that was not. [`Deliverer::tick`] claims
//! due rows with a lease ([`LEASE_S`], so two servers on one database never send the
//! same row at once), POSTs each body signed with HMAC-SHA256
//! (`Qbets-Signature: t=<unix>,v1=<hex of hmac(secret, "<t>.<body>")>`, as Stripe
//! does) and its `Qbets-Event-Id`, and records the outcome: a 2xx is delivered;
//! anything else is tried again after 10 s, 20 s, 40 s … at most an hour apart, and
//! given up 24 h after the change (logged and recorded). A reservation's events go in
//! order: a later one waits while an earlier one is undelivered.
//!
//! May import: the store (generic over [`Store`]), the service's clock and HMAC,
//! reqwest (the only HTTP client outside `src/sources`, `src/submit`, `src/client`),
//! tokio, tracing, futures-util. No SQL, no axum.

use std::sync::{Arc, Once};
use std::time::Duration;

use crate::service::Clock;
use crate::service::tokens::to_hex;
use crate::service::users::hmac_sha256;
use crate::store::{Store, StoreError, WebhookDelivery, WebhookOutcome};

/// Seconds a deliverer's claim on an outbox row lasts: far longer than one attempt.
pub const LEASE_S: i64 = 60;
/// Seconds one POST may take.
pub const TIMEOUT_S: u64 = 10;
/// The first retry's delay; each later one doubles it.
pub const FIRST_RETRY_S: i64 = 10;
/// The longest delay between two attempts.
pub const MAX_RETRY_S: i64 = 3600;
/// Seconds after the change when the deliverer stops trying.
pub const GIVE_UP_AFTER_S: i64 = 24 * 3600;
/// Rows claimed per round.
const CLAIM_BATCH: i64 = 32;
/// Longest webhook URL taken.
pub const MAX_URL_LEN: usize = 2048;
/// Shortest secret taken, bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "Qbets-Signature";
/// The event id header (the outbox row's id; the same on every attempt).
pub const EVENT_ID_HEADER: &str = "Qbets-Event-Id";

/// The secret webhooks are signed with. Never shown in `Debug` output.
#[derive(Clone)]
pub struct WebhookSecret(Arc<[u8]>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

impl WebhookSecret {
    /// A secret of these bytes (at least [`MIN_SECRET_LEN`]).
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, String> {
        let bytes = bytes.as_ref();
        if bytes.len() < MIN_SECRET_LEN {
            return Err(format!(
                "the webhook secret must be at least {MIN_SECRET_LEN} bytes, got {}",
                bytes.len()
            ));
        }
        Ok(Self(Arc::from(bytes)))
    }

    /// The secret in environment variable `var` (`[reservations] webhook_secret_env`).
    pub fn from_env(var: &str) -> Result<Self, String> {
        let value = std::env::var(var).map_err(|_| {
            format!("[reservations] webhook_secret_env names {var:?}, which is not set")
        })?;
        Self::new(value.trim()).map_err(|e| format!("{var}: {e}"))
    }

    /// The `Qbets-Signature` value for `body` sent at Unix time `t`.
    pub fn sign(&self, t: i64, body: &str) -> String {
        format!("t={t},v1={}", self.digest(t, body))
    }

    fn digest(&self, t: i64, body: &str) -> String {
        to_hex(&hmac_sha256(&self.0, format!("{t}.{body}").as_bytes()))
    }

    /// Whether `header` is a valid signature of `body` (what a receiver checks; it
    /// should also refuse a `t` far from its own clock, against replays).
    pub fn verify(&self, header: &str, body: &str) -> bool {
        let mut t = None;
        let mut v1 = None;
        for part in header.split(',') {
            match part.trim().split_once('=') {
                Some(("t", v)) => t = v.parse::<i64>().ok(),
                Some(("v1", v)) => v1 = Some(v),
                _ => {}
            }
        }
        match (t, v1) {
            (Some(t), Some(v1)) => {
                use subtle::ConstantTimeEq;
                bool::from(self.digest(t, body).as_bytes().ct_eq(v1.as_bytes()))
            }
            _ => false,
        }
    }
}

/// Whether `ip` is outside the public internet: loopback, private (RFC 1918, unique
/// local), link-local (cloud metadata services live there), shared (RFC 6598),
/// unspecified, broadcast, multicast or "this network"; an IPv4-mapped IPv6 address as
/// its IPv4 one.
pub fn is_non_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(a) => {
            let [o0, o1, ..] = a.octets();
            a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast()
                || a.is_multicast()
                || o0 == 0
                || (o0 == 100 && (o1 & 0xc0) == 64)
        }
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => is_non_public(IpAddr::V4(v4)),
            None => {
                let s0 = a.segments()[0];
                a.is_loopback()
                    || a.is_unspecified()
                    || a.is_multicast()
                    || (s0 & 0xfe00) == 0xfc00
                    || (s0 & 0xffc0) == 0xfe80
            }
        },
    }
}

const NON_PUBLIC: &str = "names a loopback, private or link-local address, which this \
                          server does not send to ([reservations] webhook_allow_private)";

/// Checks a webhook URL: `http` or `https`, a host, at most [`MAX_URL_LEN`] characters,
/// no user name or password in it, and — unless `allow_private` — no host that names a
/// non-public address ([`is_non_public`]) or `localhost`.
pub fn check_url(url: &str, allow_private: bool) -> Result<(), String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("must be at most {MAX_URL_LEN} characters"));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "must be an http or https URL, not {:?}",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not carry a user name or password".into());
    }
    if !allow_private {
        let host = parsed.host_str().unwrap_or_default();
        let named = match host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
        {
            Ok(ip) => is_non_public(ip),
            Err(_) => {
                let d = host.trim_end_matches('.').to_ascii_lowercase();
                d == "localhost" || d.ends_with(".localhost")
            }
        };
        if named {
            return Err(NON_PUBLIC.into());
        }
    }
    Ok(())
}

/// The URL without its query and fragment, for logs (a receiver may put a token there).
fn for_logs(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "(not a URL)".into(),
    }
}

/// Seconds to wait after the `attempts`-th failed attempt: 10, 20, 40 … at most 3600.
pub fn retry_delay_s(attempts: i64) -> i64 {
    let doublings = attempts.saturating_sub(1).clamp(0, 20) as u32;
    FIRST_RETRY_S
        .saturating_mul(1_i64 << doublings)
        .min(MAX_RETRY_S)
}

/// What one pass of the deliverer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Events the receivers took.
    pub delivered: usize,
    /// Attempts that failed (to be tried again).
    pub failed: usize,
    /// Events given up.
    pub gave_up: usize,
}

/// The deliverer: claims due outbox rows and POSTs them.
pub struct Deliverer<S: Store> {
    store: S,
    clock: Arc<dyn Clock>,
    secret: WebhookSecret,
    http: reqwest::Client,
    id: String,
    /// Whether non-public addresses may be sent to (`webhook_allow_private`).
    allow_private: bool,
}

/// The webhook client's settings.
fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(TIMEOUT_S))
        .connect_timeout(Duration::from_secs(TIMEOUT_S))
        // A receiver's redirect is its failure to answer, not a new address.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("qbets/", env!("CARGO_PKG_VERSION")))
}

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another part of the process installed one first: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl<S: Store> Deliverer<S> {
    /// A deliverer named `id` (its lease name, unique among replicas).
    pub fn new(
        store: S,
        clock: Arc<dyn Clock>,
        secret: WebhookSecret,
        id: impl Into<String>,
    ) -> Result<Self, String> {
        install_crypto_provider();
        let http = client_builder()
            .build()
            .map_err(|e| format!("webhook HTTP client: {e}"))?;
        Ok(Self {
            store,
            clock,
            secret,
            http,
            id: id.into(),
            allow_private: false,
        })
    }

    /// The same deliverer, sending to non-public addresses too (`webhook_allow_private`).
    pub fn allow_private(mut self, allow: bool) -> Self {
        self.allow_private = allow;
        self
    }

    /// The client for one row: the shared one where any address may be reached, or
    /// one pinned to the addresses its host resolves to once they are checked public,
    /// so that a name cannot resolve to a public address for the check and a private
    /// one for the connection.
    async fn client_for(&self, url: &str) -> Result<reqwest::Client, String> {
        if self.allow_private {
            return Ok(self.http.clone());
        }
        check_url(url, false)?;
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
        let host = parsed.host_str().unwrap_or_default();
        if host.starts_with('[') || host.parse::<std::net::IpAddr>().is_ok() {
            // An address, checked above.
            return Ok(self.http.clone());
        }
        let port = parsed.port_or_known_default().unwrap_or(80);
        let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("{host} resolves to no address"));
        }
        if addrs.iter().any(|a| is_non_public(a.ip())) {
            return Err(format!(
                "{host} resolves to a loopback, private or link-local address, which this server does not send to ([reservations] webhook_allow_private)"
            ));
        }
        client_builder()
            .resolve_to_addrs(host, &addrs)
            .build()
            .map_err(|e| format!("webhook HTTP client: {e}"))
    }

    /// Runs passes every `interval` until `shutdown` completes.
    pub async fn run(
        self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let mut every = crate::service::Every::new(interval, shutdown);
        while every.next().await {
            match self.tick().await {
                Ok(report) if report != DeliveryReport::default() => {
                    tracing::debug!(deliverer = %self.id, ?report, "webhooks tick");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(deliverer = %self.id, error = %e, "webhooks tick failed"),
            }
        }
    }

    /// One pass: sends every due row, round after round while receivers take them (a
    /// reservation's next event becomes due once the one before it is delivered).
    pub async fn tick(&self) -> Result<DeliveryReport, StoreError> {
        let mut report = DeliveryReport::default();
        for _ in 0..16 {
            let now = self.clock.now();
            let rows = self
                .store
                .claim_webhooks(now, &self.id, now + LEASE_S, CLAIM_BATCH)
                .await?;
            if rows.is_empty() {
                break;
            }
            let sent =
                futures_util::future::join_all(rows.iter().map(|row| self.attempt(row))).await;
            let mut any_delivered = false;
            let mut failed = None;
            for (row, result) in rows.iter().zip(sent) {
                let at = self.clock.now();
                let outcome = match result {
                    Ok(()) => {
                        report.delivered += 1;
                        any_delivered = true;
                        WebhookOutcome::Delivered { at }
                    }
                    Err(error) => {
                        let attempts = row.attempts + 1;
                        let next_attempt_at = at + retry_delay_s(attempts);
                        let give_up = next_attempt_at > row.created_at + GIVE_UP_AFTER_S;
                        if give_up {
                            report.gave_up += 1;
                            tracing::warn!(event_id = row.id, url = %for_logs(&row.url), attempts, %error,
                                "webhook given up after 24 h");
                        } else {
                            report.failed += 1;
                            tracing::info!(event_id = row.id, url = %for_logs(&row.url), attempts,
                                retry_in_s = next_attempt_at - at, %error, "webhook attempt failed");
                        }
                        WebhookOutcome::Failed {
                            at,
                            error,
                            next_attempt_at,
                            give_up,
                        }
                    }
                };
                // Every outcome of the round is recorded, whatever befalls one: a row
                // sent but not recorded is sent again once its lease runs out.
                match self.store.record_webhook(row.id, &self.id, &outcome).await {
                    Ok(true) => {}
                    Ok(false) => tracing::warn!(event_id = row.id, deliverer = %self.id,
                        "webhook outcome not recorded: the lease was taken over (the event may be sent twice)"),
                    Err(e) => {
                        tracing::warn!(event_id = row.id, error = %e, "webhook outcome not recorded");
                        failed.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if !any_delivered {
                break;
            }
        }
        Ok(report)
    }

    /// One POST of a row; why it failed, if it did.
    async fn attempt(&self, row: &WebhookDelivery) -> Result<(), String> {
        let http = self.client_for(&row.url).await?;
        let t = self.clock.now();
        let response = http
            .post(&row.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, self.secret.sign(t, &row.body))
            .header(EVENT_ID_HEADER, row.id.to_string())
            .body(row.body.clone())
            .send()
            .await
            .map_err(|e| {
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    text.push_str(": ");
                    text.push_str(&s.to_string());
                    source = s.source();
                }
                text
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the receiver answered {status}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_with_a_host() {
        assert!(check_url("https://example.org/hook?x=1", false).is_ok());
        assert!(check_url("http://127.0.0.1:9/", true).is_ok());
        for bad in [
            "ftp://example.org/",
            "example.org",
            "http://user:pw@example.org/",
            "",
        ] {
            assert!(check_url(bad, true).is_err(), "{bad}");
        }
        assert!(check_url(&format!("https://e.org/{}", "a".repeat(MAX_URL_LEN)), true).is_err());
    }

    #[test]
    fn non_public_addresses_are_refused_unless_allowed() {
        for private in [
            "http://127.0.0.1:9/",
            "http://10.0.0.5:6379/",
            "http://169.254.169.254/latest/meta-data/",
            "http://192.168.1.1/",
            "http://172.16.0.1/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:10.1.2.3]/",
            "http://localhost:8080/",
            "http://api.localhost./",
        ] {
            assert!(check_url(private, false).is_err(), "{private}");
            assert!(check_url(private, true).is_ok(), "{private}");
        }
        for public in [
            "http://93.184.216.34/",
            "http://[2606:4700::1]/",
            "https://hooks.example.org/",
            "http://172.32.0.1/",
            "http://100.128.0.1/",
        ] {
            assert!(check_url(public, false).is_ok(), "{public}");
        }
    }

    #[test]
    fn retries_double_from_ten_seconds_to_an_hour() {
        let delays: Vec<i64> = (1..=11).map(retry_delay_s).collect();
        assert_eq!(
            delays,
            [10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600]
        );
        assert_eq!(retry_delay_s(1000), 3600);
    }

    #[test]
    fn signatures_verify_and_refuse_tampering() {
        let s = WebhookSecret::new("0123456789abcdef").unwrap();
        let h = s.sign(1_700_000_000, "{\"a\":1}");
        assert!(h.starts_with("t=1700000000,v1="));
        assert!(s.verify(&h, "{\"a\":1}"));
        assert!(!s.verify(&h, "{\"a\":2}"));
        assert!(!s.verify(&h.replace("t=1700000000", "t=1700000001"), "{\"a\":1}"));
        assert!(WebhookSecret::new("short").is_err());
        assert_eq!(format!("{s:?}"), "WebhookSecret(..)");
    }
}
