//! The Prometheus registry of one running service: request counts and latency by route
//! and status (recorded by the HTTP layer), and gauges the predictors add in part 2.
//! One registry per [`crate::service::AppState`], not a global, so tests in one process
//! do not see each other's counts.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of one HTTP request: the route template (never the raw path, whose site and
/// queue names would make the label set unbounded), method and status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP method.
    pub method: String,
    /// The matched route template, `unmatched` when none matched.
    pub route: String,
    /// HTTP status code of the answer.
    pub status: u16,
}

fn latency_histogram() -> Histogram {
    // 100 µs … ~3.3 s in factors of two: loopback `bound` answers sit in the first
    // buckets, slow store queries in the last.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// The service's metrics.
pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with the HTTP metrics registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("qbets");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "http_requests",
            "HTTP requests answered, by route, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by route, method and status",
            latency.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            requests,
            latency,
        }
    }

    /// Records one answered request.
    pub fn observe_request(&self, labels: RequestLabels, seconds: f64) {
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(seconds);
    }

    /// Lets other parts (the predictors) register their own metrics.
    pub fn with_registry<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut registry)
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_and_timed_by_route_and_status() {
        let m = Metrics::new();
        let labels = RequestLabels {
            method: "GET".into(),
            route: "/v1/sites".into(),
            status: 200,
        };
        m.observe_request(labels.clone(), 0.002);
        m.observe_request(labels, 0.004);
        let text = m.render();
        assert!(
            text.contains(
                "qbets_http_requests_total{method=\"GET\",route=\"/v1/sites\",status=\"200\"} 2"
            ),
            "{text}"
        );
        assert!(text.contains("qbets_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/sites\",status=\"200\"} 2"), "{text}");
    }
}
