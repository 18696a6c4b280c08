//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document
//! and the interactive documentation (RapiDoc, embedded — no CDN).
//! These are public whatever `http.public_reads` says: probes and scrapers carry no
//! tokens, and they reveal nothing about jobs.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ApiResult, Problem};
use crate::service::AppState;
use crate::store::Store;

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/healthz", get(get_health))
        .route("/readyz", get(get_ready::<S>))
        .route("/metrics", get(get_metrics::<S>))
        .route("/openapi.json", get(get_openapi))
        .route("/docs", get(docs_page))
        .route("/docs/rapidoc-min.js", get(docs_script))
}

/// A status answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Status {
    /// `ok` or `ready`.
    pub status: String,
    /// For readiness: the store's backend (`sqlite` or `postgres`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
}

/// Liveness: the process answers.
#[utoipa::path(
    get, path = "/healthz", tag = "operations", operation_id = "get_health",
    responses((status = 200, description = "The process is alive", body = Status))
)]
pub async fn get_health() -> axum::Json<Status> {
    axum::Json(Status {
        status: "ok".into(),
        backend: None,
    })
}

/// Readiness: the store answers.
#[utoipa::path(
    get, path = "/readyz", tag = "operations", operation_id = "get_ready",
    responses(
        (status = 200, description = "The store is reachable", body = Status),
        (status = 503, description = "The store is unreachable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_ready<S: Store>(
    State(state): State<AppState<S>>,
) -> ApiResult<axum::Json<Status>> {
    // Within the configured ready timeout, and at once while the store is away.
    if let Some(why) = state.gate.away() {
        return Err(ApiError::Unavailable(why));
    }
    state
        .gate
        .check(&state.store)
        .await
        .map_err(ApiError::Unavailable)?;
    Ok(axum::Json(Status {
        status: "ready".into(),
        backend: Some(state.store.backend().into()),
    }))
}

/// Prometheus metrics (text exposition format).
#[utoipa::path(
    get, path = "/metrics", tag = "operations", operation_id = "get_metrics",
    responses(
        (status = 200, description = "Metrics in Prometheus text format: HTTP requests; per site and queue the bound for the configured shapes, pending jobs, up or maybe down and calibration; per source its health and ingest lag (left out, with qbets_store_up 0, while the store is away)", body = String, content_type = "text/plain"),
    )
)]
pub async fn get_metrics<S: Store>(State(state): State<AppState<S>>) -> impl IntoResponse {
    let text = crate::service::metrics::scrape(
        &state.metrics,
        &state.predictors,
        &state.store,
        &state.config.metrics.shapes,
        state.clock.now(),
    )
    .await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}

/// This API's OpenAPI document.
#[utoipa::path(
    get, path = "/openapi.json", tag = "operations", operation_id = "get_openapi",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object))
)]
pub async fn get_openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        super::openapi_json(),
    )
}

const DOCS_PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>qbets API</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <script type="module" src="/docs/rapidoc-min.js"></script>
</head>
<body>
  <rapi-doc spec-url="/openapi.json" render-style="read" theme="light"
            regular-font="system-ui, sans-serif" mono-font="monospace"
            show-header="false" allow-spec-url-load="false" allow-spec-file-load="false"
            schema-description-expanded="true"></rapi-doc>
</body>
</html>
"#;

/// The interactive documentation page.
pub async fn docs_page() -> Html<&'static str> {
    Html(DOCS_PAGE)
}

/// RapiDoc 9.3.8, vendored under `static/vendor/rapidoc` (MIT).
pub async fn docs_script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../static/vendor/rapidoc/rapidoc-min.js"),
    )
}
