//! The application state every request handler gets: the store, the configuration,
//! the live predictors, the metrics registry, the clock and the schedulers reservations
//! are submitted to.

use std::sync::Arc;

use crate::config::Config;
use crate::notify::WebhookSecret;
use crate::store::{Site, SiteKind, Store};

use super::reservations::Submitters;
use super::store_gate::StoreGate;
use super::{Clock, Predictors, metrics::Metrics};

/// Shared state of a running service. Cheap to clone (handles and `Arc`s).
pub struct AppState<S: Store> {
    /// The store, chosen at start-up.
    pub store: S,
    /// The configuration the service started with.
    pub config: Arc<Config>,
    /// The live predictors, one per (site, queue).
    pub predictors: Arc<Predictors>,
    /// The Prometheus registry of this service.
    pub metrics: Arc<Metrics>,
    /// Now, for live sites (fixed in tests).
    pub clock: Arc<dyn Clock>,
    /// The schedulers reservations are submitted to, by site.
    pub submitters: Arc<Submitters>,
    /// Whether the store is away (requests that need it then fail fast).
    pub gate: Arc<StoreGate>,
    /// The secret reservation webhooks are signed with; none: a reservation naming a
    /// webhook is refused.
    pub webhook_secret: Option<WebhookSecret>,
}

impl<S: Store> Clone for AppState<S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            config: self.config.clone(),
            predictors: self.predictors.clone(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            submitters: self.submitters.clone(),
            gate: self.gate.clone(),
            webhook_secret: self.webhook_secret.clone(),
        }
    }
}

impl<S: Store> AppState<S> {
    /// State for a service on `store`; the predictors answer live sites by `clock`.
    pub fn new(store: S, config: Config, predictors: Predictors, clock: Arc<dyn Clock>) -> Self {
        let ready_timeout = std::time::Duration::from_millis(config.store.ready_timeout_ms);
        Self {
            store,
            gate: Arc::new(StoreGate::new(ready_timeout)),
            config: Arc::new(config),
            predictors: Arc::new(predictors.with_clock(clock.clone())),
            metrics: Arc::new(Metrics::new()),
            clock,
            submitters: Arc::new(Submitters::new()),
            webhook_secret: None,
        }
    }

    /// The same state signing reservation webhooks with `secret`.
    pub fn with_webhook_secret(mut self, secret: Option<WebhookSecret>) -> Self {
        self.webhook_secret = secret;
        self
    }

    /// The same state with these schedulers to submit reservations to.
    pub fn with_submitters(mut self, submitters: Arc<Submitters>) -> Self {
        self.submitters = submitters;
        self
    }

    /// The instant a site's answers speak for: an archive's last record (so a 1996
    /// trace does not read as a machine down for 30 years), a live site's now.
    pub fn as_of(&self, site: &Site, last_event: Option<i64>) -> i64 {
        match site.kind {
            SiteKind::Archive => last_event.unwrap_or(site.created_at),
            // The site's own clock when it has one (the demo's simulated time).
            SiteKind::Live => self
                .predictors
                .as_of(&site.name)
                .unwrap_or_else(|| self.clock.now()),
        }
    }
}
