//! Whether the store is away, so that requests fail fast while it is (issue 22): without
//! this every request waited the pool's whole acquire timeout before its 503.
//!
//! A check pings the store within `ready_timeout` (`/readyz` runs one; so does any
//! request the store failed as unavailable, in the background). A failed check marks
//! the store away: requests that need it are answered 503 at once, and a prober checks
//! again every second until one passes. A busy store (SQLite locked a moment) passes
//! the check and is never marked away.
//!
//! May import: the store trait, tokio, tracing.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::store::Store;

/// How often a store marked away is checked again.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The store's reachability, shared by every request (see the module's description).
#[derive(Debug)]
pub struct StoreGate {
    away: AtomicBool,
    probing: AtomicBool,
    /// Why the last failed check failed.
    reason: Mutex<String>,
    ready_timeout: Duration,
}

impl StoreGate {
    /// A gate whose checks wait `ready_timeout` for the store.
    pub fn new(ready_timeout: Duration) -> Self {
        Self {
            away: AtomicBool::new(false),
            probing: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
            ready_timeout,
        }
    }

    /// Whether the last check failed (and none has passed since): why, if so.
    pub fn away(&self) -> Option<String> {
        self.away
            .load(Ordering::Acquire)
            .then(|| self.reason.lock().expect("reason").clone())
    }

    /// Pings the store within the ready timeout; a failure marks it away (and starts
    /// the prober), a success marks it back.
    pub async fn check<S: Store>(self: &std::sync::Arc<Self>, store: &S) -> Result<(), String> {
        match tokio::time::timeout(self.ready_timeout, store.ping()).await {
            Ok(Ok(())) => {
                if self.away.swap(false, Ordering::AcqRel) {
                    tracing::info!("the store answers again");
                }
                Ok(())
            }
            Ok(Err(e)) => Err(self.mark_away(store, e.to_string())),
            Err(_) => Err(self.mark_away(
                store,
                format!(
                    "the store did not answer within {} ms",
                    self.ready_timeout.as_millis()
                ),
            )),
        }
    }

    /// A request found the store unavailable: checks it in the background (unless the
    /// store is already marked away).
    pub fn suspect<S: Store>(self: &std::sync::Arc<Self>, store: &S) {
        if self.away.load(Ordering::Acquire) || self.probing.load(Ordering::Acquire) {
            return;
        }
        let (gate, store) = (self.clone(), store.clone());
        tokio::spawn(async move {
            let _ = gate.check(&store).await;
        });
    }

    fn mark_away<S: Store>(self: &std::sync::Arc<Self>, store: &S, reason: String) -> String {
        *self.reason.lock().expect("reason") = reason.clone();
        if !self.away.swap(true, Ordering::AcqRel) {
            tracing::warn!(error = %reason, "the store is away; answering 503 until it is back");
        }
        if !self.probing.swap(true, Ordering::AcqRel) {
            let (gate, store) = (self.clone(), store.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(PROBE_EVERY).await;
                    if gate.check(&store).await.is_ok() {
                        break;
                    }
                }
                gate.probing.store(false, Ordering::Release);
            });
        }
        reason
    }
}
