//! The REST API: axum routes under `/v1`, operations endpoints, the OpenAPI document
//! (utoipa), request metrics, body limit, CORS and problem+json errors.
//!
//! Each resource file exposes its router; [`router`] merges them and adds the layers.
//! This is the only module that knows axum, tower and utoipa. May import: the service
//! layer and the store's trait and domain types (never SQL).

pub mod advice;
pub mod auth;
pub mod bounds;
pub mod dashboard;
pub mod error;
pub mod ingest;
pub mod jobs;
pub mod ops;
pub mod params;
pub mod reservations;
pub mod server;
pub mod sites;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Response as OaResponse};

use crate::service::AppState;
use crate::service::metrics::RequestLabels;
use crate::store::Store;
use error::{ApiError, FieldError, Problem};

/// The OpenAPI description of every route.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "qbets",
        description = "Bounds on batch-queue waits (QBETS) for HPC machines. Durations are \
            seconds (walltimes also `[D-]HH:MM:SS`), times RFC 3339 UTC, errors RFC 9457 \
            problem+json. Every answer says the instant it speaks for (`as_of`).",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    paths(
        sites::list_sites,
        sites::put_site,
        sites::list_queues,
        sites::list_waits,
        ingest::post_jobs,
        ingest::list_rejects,
        ingest::get_ingest,
        bounds::get_bound,
        bounds::get_deadline,
        bounds::list_clusters,
        bounds::list_bounds,
        bounds::post_bounds,
        advice::post_advice,
        jobs::get_job,
        reservations::post_varq_plan,
        reservations::post_covarq_plan,
        reservations::post_reservation,
        reservations::list_reservations,
        reservations::get_reservation,
        reservations::delete_reservation,
        reservations::post_coallocation,
        reservations::get_coallocation,
        reservations::get_calibration,
        ops::get_health,
        ops::get_ready,
        ops::get_metrics,
        ops::get_openapi,
    ),
    components(schemas(Problem, FieldError, ingest::JobIn, bounds::BoundQueryIn)),
    tags(
        (name = "sites", description = "Sites, queues and waits"),
        (name = "ingest", description = "Job records pushed by sites, records kept aside, sources' health"),
        (name = "predictions", description = "Bounds on queue waits, deadline probabilities, clusters"),
        (name = "reservations", description = "Virtual advance reservations (VARQ), co-allocations (CO-VARQ) and their calibration"),
        (name = "operations", description = "Health, readiness, metrics and this document"),
    ),
    modifiers(&Conventions)
)]
pub struct ApiDoc;

/// Adds what every operation shares: the bearer scheme, and problem+json answers for
/// any 4XX and 5XX (as crates.io lists its error schema on every path).
struct Conventions;

impl utoipa::Modify for Conventions {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A token made by `qbets token create`"))
                    .build(),
            ),
        );
        let problem = |what: &str| -> RefOr<OaResponse> {
            RefOr::T(
                utoipa::openapi::ResponseBuilder::new()
                    .description(what)
                    .content(
                        error::PROBLEM_JSON,
                        utoipa::openapi::ContentBuilder::new()
                            .schema(Some(utoipa::openapi::Ref::from_schema_name("Problem")))
                            .build(),
                    )
                    .build(),
            )
        };
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                let responses = &mut op.responses.responses;
                responses
                    .entry("4XX".into())
                    .or_insert_with(|| problem("The request was refused (problem+json)"));
                responses
                    .entry("5XX".into())
                    .or_insert_with(|| problem("The server failed (problem+json)"));
            }
        }
        add_links(doc);
    }
}

/// The links between operations (OpenAPI `links`): what a made reservation or
/// co-allocation can be asked for next, by its `id` from the answer — so that clients
/// and stateful fuzzers (schemathesis) follow create → get → delete.
fn add_links(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::link::LinkBuilder;
    let links: [(&str, &[(&str, &str)]); 2] = [
        (
            "/v1/reservations",
            &[
                ("GetReservation", "get_reservation"),
                ("DeleteReservation", "delete_reservation"),
            ],
        ),
        (
            "/v1/coallocations",
            &[("GetCoallocation", "get_coallocation")],
        ),
    ];
    for (path, targets) in links {
        let Some(op) = doc.paths.paths.get_mut(path).and_then(|i| i.post.as_mut()) else {
            continue;
        };
        // 201: made now; 200: the same request again (its Idempotency-Key).
        for status in ["200", "201"] {
            let Some(RefOr::T(response)) = op.responses.responses.get_mut(status) else {
                continue;
            };
            for (name, operation) in targets {
                response.links.insert(
                    (*name).to_string(),
                    RefOr::T(
                        LinkBuilder::new()
                            .operation_id(*operation)
                            .parameter("id", "$response.body#/id")
                            .build(),
                    ),
                );
            }
        }
    }
}

/// The OpenAPI document as pretty JSON (built once).
pub fn openapi_json() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut text = ApiDoc::openapi()
            .to_pretty_json()
            .expect("the OpenAPI document serialises");
        text.push('\n');
        text
    })
}

/// The whole application: every resource's routes with the shared layers.
pub fn router<S: Store>(state: AppState<S>) -> Router {
    let http = &state.config.http;
    Router::new()
        .merge(sites::router())
        .merge(ingest::router())
        .merge(bounds::router())
        .merge(advice::router())
        .merge(jobs::router())
        .merge(reservations::router())
        .merge(ops::router())
        .merge(dashboard::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(http.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            Duration::from_millis(http.body_timeout_ms),
            body_deadline,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            store_gate::<S>,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), track::<S>))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(cors(&http.cors_origins))
        .with_state(state)
}

/// Serves the application on `listener` until `shutdown` completes, under the
/// configuration's connection limits ([`server`]).
pub async fn serve<S: Store>(
    listener: tokio::net::TcpListener,
    state: AppState<S>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = server::Limits::from_config(&state.config.http);
    server::serve(listener, router(state), limits, shutdown).await
}

/// Answers requests that need the store 503 at once while it is away (see
/// [`crate::service::store_gate`]), and has the store checked when a request found it
/// unavailable. Every `/v1/` route needs the store; `/healthz`, `/metrics`, the
/// document and the dashboard's files do not (`/readyz` checks on its own).
async fn store_gate<S: Store>(
    State(state): State<AppState<S>>,
    req: Request,
    next: Next,
) -> Response {
    let needs_store = req.uri().path().starts_with("/v1/");
    if needs_store && let Some(why) = state.gate.away() {
        return ApiError::Unavailable(why).into_response();
    }
    let response = next.run(req).await;
    if response
        .extensions()
        .get::<error::StoreUnavailable>()
        .is_some()
    {
        state.gate.suspect(&state.store);
    }
    response
}

/// A request body that must arrive whole before its deadline: a client trickling it
/// cannot hold a connection (and a handler) for ever. Past the deadline the body fails
/// and the request is answered 408, closing the connection ([`body_deadline`]).
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timed_out: Arc<AtomicBool>,
}

impl http_body::Body for DeadlineBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.timed_out.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Gives each request body `timeout` to arrive (see [`DeadlineBody`]); a request whose
/// body ran out of time is answered 408 with `Connection: close`, whatever its handler
/// made of the failed body.
async fn body_deadline(State(timeout): State<Duration>, req: Request, next: Next) -> Response {
    let timed_out = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| {
        Body::new(DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timed_out: timed_out.clone(),
        })
    });
    let response = next.run(req).await;
    if !timed_out.load(Ordering::Acquire) {
        return response;
    }
    let mut response = ApiError::RequestTimeout(format!(
        "the request body did not arrive within {} ms",
        timeout.as_millis()
    ))
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::Internal("a handler panicked".into()).into_response()
}

/// CORS for the configured origins. With none (or none valid), nothing at all: not even
/// a preflight's allowed methods and headers, which would advertise the API to pages
/// that may not use it.
fn cors(origins: &[String]) -> CorsLayer {
    let list: Vec<HeaderValue> = origins
        .iter()
        .filter(|o| o.as_str() != "*")
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    let any = origins.iter().any(|o| o == "*");
    if !any && list.is_empty() {
        return CorsLayer::new();
    }
    let base = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("idempotency-key"),
        ]);
    if any {
        base.allow_origin(AllowOrigin::any())
    } else {
        base.allow_origin(AllowOrigin::list(list))
    }
}

/// A request method as a metrics label: the standard ones by name, any other (a client
/// may send any token as a method) as `other`, so that the label set stays bounded.
fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

/// Counts and times every request by route template and status, and logs it.
async fn track<S: Store>(State(state): State<AppState<S>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method()).to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let response = next.run(req).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    tracing::debug!(
        method = %method,
        route = %route,
        status,
        duration_ms = elapsed.as_secs_f64() * 1e3,
        "request"
    );
    state.metrics.observe_request(
        RequestLabels {
            method,
            route,
            status,
        },
        elapsed.as_secs_f64(),
    );
    response
}
