//! The clock, injected: live sites answer "as of now", and tests fix "now".

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current time in Unix seconds.
pub trait Clock: Send + Sync + 'static {
    /// Now, in Unix seconds.
    fn now(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }
}

/// A clock that says what it is told (tests).
#[derive(Debug, Clone, Default)]
pub struct FixedClock(Arc<AtomicI64>);

impl FixedClock {
    /// A clock stopped at `now`.
    pub fn at(now: i64) -> Self {
        Self(Arc::new(AtomicI64::new(now)))
    }

    /// Moves the clock to `now`.
    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::Relaxed);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The passes of a background task: one every `interval` (a late pass delays the next
/// rather than bunching them up) until `shutdown` completes. The executor, the webhook
/// deliverer and the demo all run this way.
pub struct Every {
    timer: tokio::time::Interval,
    shutdown: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl Every {
    /// Passes every `interval` until `shutdown` completes.
    pub fn new(
        interval: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Self {
        let mut timer = tokio::time::interval(interval);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            timer,
            shutdown: Box::pin(shutdown),
        }
    }

    /// Waits for the next pass: true when it is due, false once `shutdown` completed.
    pub async fn next(&mut self) -> bool {
        tokio::select! {
            () = &mut self.shutdown => false,
            _ = self.timer.tick() => true,
        }
    }
}
