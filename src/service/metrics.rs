//! The Prometheus registry of one running service: request counts and latency by route
//! and status (recorded by the HTTP layer); and, read at each scrape, what the queues
//! and sources say now ([`scrape`]): per site and queue the bound for the configured
//! shapes, pending jobs and bursts, up or maybe down, calibration (the share of recent
//! jobs that started within the bound they were given, and a histogram of wait / bound),
//! and per source its health and ingest lag. One registry per
//! [`crate::service::AppState`], not a global, so tests in one process do not see each
//! other's counts.
//!
//! Label sets are bounded: sites and queues are few by construction (each site's queues
//! are capped, `ingest.max_queues_per_site`) and at most [`MAX_QUEUE_SERIES`] queues are
//! written (the rest counted in `qbets_metrics_queues_left_out`); shapes at most
//! [`crate::config::MetricsConfig::MAX_SHAPES`]; no job, user or raw path is a label.

use std::fmt::Write as _;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::config::MetricsShape;
use crate::engine::{JobShape, Status};
use crate::store::{Store, StoreResult};

use super::Predictors;

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

    /// The Prometheus text exposition of every registered metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

/// Most queues written per scrape: with the default two shapes a queue is about 25
/// series, so 1000 queues stay near 25 000 — a few times what one Prometheus target
/// usually carries, and far more queues than a site runs.
pub const MAX_QUEUE_SERIES: usize = 1000;

/// The whole `/metrics` answer: the registry's metrics, then the queues' and sources'
/// as they stand at the scrape. The store away does not stop a scrape (that is when it
/// is wanted most): the sources' series are left out and `qbets_store_up` says 0.
pub async fn scrape<S: Store>(
    metrics: &Metrics,
    predictors: &Predictors,
    store: &S,
    shapes: &[MetricsShape],
    now: i64,
) -> String {
    let sources = source_states(store).await;
    let mut text = metrics.render();
    let mut more = queue_series(predictors, shapes);
    family(
        &mut more,
        "qbets_store_up",
        "gauge",
        "1 when the store answered this scrape, 0 when it is away",
    );
    let _ = writeln!(more, "qbets_store_up {}", u8::from(sources.is_ok()));
    if let Ok(sources) = &sources {
        more.push_str(&source_series(sources, now));
    }
    // The registry's encoder ends with OpenMetrics' `# EOF`: ours go before it.
    match text.rfind("# EOF") {
        Some(i) => text.insert_str(i, &more),
        None => text.push_str(&more),
    }
    text
}

/// Every site's sources' states.
async fn source_states<S: Store>(
    store: &S,
) -> StoreResult<Vec<(String, crate::store::SourceState)>> {
    let mut sources = Vec::new();
    for summary in store.sites().await? {
        for st in store.source_states(summary.site.id).await? {
            sources.push((summary.site.name.clone(), st));
        }
    }
    Ok(sources)
}

/// One family's header.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value, escaped as the exposition format asks (names are checked to
/// `[A-Za-z0-9._-]` on the way in; this keeps the output valid whatever they hold).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A number as the exposition format writes it.
fn num(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else {
        format!("{v}")
    }
}

/// Per site and queue: bounds, pending jobs, state, calibration.
fn queue_series(predictors: &Predictors, shapes: &[MetricsShape]) -> String {
    let queues = predictors.queues();
    let left_out = queues.len().saturating_sub(MAX_QUEUE_SERIES);
    let [
        mut bound,
        mut status,
        mut pending,
        mut bursts,
        mut up,
        mut kept,
        mut recent,
        mut hist,
    ] = std::array::from_fn::<String, 8, _>(|_| String::new());
    for (site, queue) in queues.iter().take(MAX_QUEUE_SERIES) {
        let l = format!("site=\"{}\",queue=\"{}\"", esc(site), esc(queue));
        let limits = predictors.limits(site, queue).unwrap_or_default();
        let seen = predictors.with_predictor(site, queue, |p, at| {
            let answers: Vec<_> = shapes
                .iter()
                .map(|s| {
                    let shape = JobShape {
                        nodes: s.nodes,
                        walltime_s: s.walltime_s,
                    };
                    if limits.exceeded(shape).is_some() {
                        return (*s, None, "exceeds_limits");
                    }
                    let a = p.bound(at, shape, 0.95, 0.95);
                    (*s, a.bound_s, a.status.name())
                })
                .collect();
            (answers, p.state(at), p.calibration().clone())
        });
        let Some((answers, state, calibration)) = seen else {
            continue;
        };
        for (s, b, why) in answers {
            let sl = format!("{l},nodes=\"{}\",walltime_s=\"{}\"", s.nodes, s.walltime_s);
            if let Some(b) = b {
                let _ = writeln!(&mut bound, "qbets_queue_bound_seconds{{{sl}}} {b}");
            }
            let _ = writeln!(
                &mut status,
                "qbets_queue_bound_status{{{sl},status=\"{why}\"}} 1"
            );
        }
        let _ = writeln!(
            &mut pending,
            "qbets_queue_pending_jobs{{{l}}} {}",
            state.pending
        );
        let _ = writeln!(
            &mut bursts,
            "qbets_queue_bursts_pending{{{l}}} {}",
            state.bursts.len()
        );
        let is_up = u8::from(state.status != Status::MaybeDown);
        let _ = writeln!(&mut up, "qbets_queue_up{{{l}}} {is_up}");
        if let Some((share, n)) = calibration.kept_share() {
            let _ = writeln!(&mut kept, "qbets_queue_promises_kept_ratio{{{l}}} {share}");
            let _ = writeln!(&mut recent, "qbets_queue_promises_recent{{{l}}} {n}");
        }
        let (buckets, sum) = calibration.histogram();
        for (le, c) in &buckets {
            let _ = writeln!(
                &mut hist,
                "qbets_queue_wait_to_bound_bucket{{{l},le=\"{}\"}} {c}",
                num(*le)
            );
        }
        let total = buckets.last().map_or(0, |b| b.1);
        let _ = writeln!(&mut hist, "qbets_queue_wait_to_bound_sum{{{l}}} {sum}");
        let _ = writeln!(&mut hist, "qbets_queue_wait_to_bound_count{{{l}}} {total}");
    }
    let mut out = String::new();
    for (name, kind, help, body) in [
        (
            "qbets_queue_bound_seconds",
            "gauge",
            "Upper 0.95-confidence bound on the 0.95 quantile of the wait of a job of the shape submitted now (absent without a number: see qbets_queue_bound_status)",
            &*bound,
        ),
        (
            "qbets_queue_bound_status",
            "gauge",
            "Why a shape's bound is or is not given: ok, insufficient_history, maybe_down or exceeds_limits (1 for the status that holds)",
            &*status,
        ),
        (
            "qbets_queue_pending_jobs",
            "gauge",
            "Jobs submitted and not yet started",
            &*pending,
        ),
        (
            "qbets_queue_bursts_pending",
            "gauge",
            "Users with a burst (at least 20 jobs) pending",
            &*bursts,
        ),
        (
            "qbets_queue_up",
            "gauge",
            "1 when the queue is up, 0 when availability inference says it may be down",
            &*up,
        ),
        (
            "qbets_queue_promises_kept_ratio",
            "gauge",
            "Share of the recent jobs given a bound at submission (0.95/0.95) that started within it",
            &*kept,
        ),
        (
            "qbets_queue_promises_recent",
            "gauge",
            "How many recent jobs that share is over (at most 1000)",
            &*recent,
        ),
        (
            "qbets_queue_wait_to_bound",
            "histogram",
            "Wait divided by the bound given at submission, of the jobs that started",
            &*hist,
        ),
    ] {
        family(&mut out, name, kind, help);
        out.push_str(body);
    }
    family(
        &mut out,
        "qbets_metrics_queues_left_out",
        "gauge",
        "Queues not written in this scrape (beyond the cap)",
    );
    let _ = writeln!(out, "qbets_metrics_queues_left_out {left_out}");
    out
}

/// Per source: health and ingest lag.
fn source_series(sources: &[(String, crate::store::SourceState)], now: i64) -> String {
    let mut failures = String::new();
    let mut success = String::new();
    let mut lag = String::new();
    let mut records = String::new();
    for (site, st) in sources {
        let l = format!("site=\"{}\",source=\"{}\"", esc(site), esc(&st.source));
        let _ = writeln!(
            failures,
            "qbets_source_consecutive_failures{{{l}}} {}",
            st.consecutive_failures
        );
        if let Some(t) = st.last_success_at {
            let _ = writeln!(
                success,
                "qbets_source_last_success_timestamp_seconds{{{l}}} {t}"
            );
            let _ = writeln!(
                lag,
                "qbets_source_ingest_lag_seconds{{{l}}} {}",
                (now - t).max(0)
            );
        }
        let _ = writeln!(
            records,
            "qbets_source_records{{{l},outcome=\"accepted\"}} {}",
            st.accepted
        );
        let _ = writeln!(
            records,
            "qbets_source_records{{{l},outcome=\"rejected\"}} {}",
            st.rejected
        );
    }
    let mut out = String::new();
    for (name, help, body) in [
        (
            "qbets_source_consecutive_failures",
            "Polls failed in a row (0 when the last one succeeded)",
            &failures,
        ),
        (
            "qbets_source_last_success_timestamp_seconds",
            "When the source last polled successfully (Unix seconds)",
            &success,
        ),
        (
            "qbets_source_ingest_lag_seconds",
            "Seconds since the source last polled successfully",
            &lag,
        ),
    ] {
        family(&mut out, name, "gauge", help);
        out.push_str(body);
    }
    family(
        &mut out,
        "qbets_source_records",
        "gauge",
        "Records the source handed in, accepted or rejected (kept aside with the reason)",
    );
    out.push_str(&records);
    out
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
