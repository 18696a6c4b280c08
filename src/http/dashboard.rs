//! The browser dashboard: plain HTML, CSS and JavaScript modules from `static/`,
//! embedded in the binary at build time (no CDN, no build step), served under `/ui/`.
//!
//! The pages call the public API like any client; this module only hands out files.
//! Each file carries an `ETag` (a hash of its bytes) and `Cache-Control: no-cache`, so
//! a browser revalidates cheaply and never runs a stale script after an upgrade.

use std::sync::OnceLock;

use super::params::ApiPath;
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::error::ApiError;
use crate::service::AppState;
use crate::store::Store;

/// One embedded file: its path under `/ui/`, media type and bytes.
struct Asset {
    path: &'static str,
    media_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $media:expr) => {
        Asset {
            path: $path,
            media_type: $media,
            bytes: include_bytes!(concat!("../../static/", $path)),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file of the dashboard. The vendored chart library is uPlot (MIT), see
/// `static/vendor/uplot/README.md`.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("queue.html", HTML),
    asset!("reservations.html", HTML),
    asset!("advice.html", HTML),
    asset!("app.css", CSS),
    asset!("api.js", JS),
    asset!("overview.js", JS),
    asset!("queue.js", JS),
    asset!("reservations.js", JS),
    asset!("advice.js", JS),
    asset!("charts.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("vendor/uplot/uPlot.iife.min.js", JS),
    asset!("vendor/uplot/uPlot.min.css", CSS),
];

/// The pages may only load what this binary serves; uPlot sets inline styles.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The routes of the dashboard.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(index))
        .route("/ui/{*path}", get(file))
}

/// The names of the embedded files (for tests and the README).
pub fn asset_paths() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.path)
}

fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{:016x}\"", fnv1a(a.bytes)))
            .collect()
    })
}

/// FNV-1a, 64 bits: a stable content hash for ETags (not a security property).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(ApiPath(path): ApiPath<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.path == path) else {
        return ApiError::NotFound(format!("no dashboard file /ui/{path}")).into_response();
    };
    let asset = &ASSETS[i];
    let tag = &etags()[i];
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.media_type),
            )],
            asset.bytes,
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(tag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if asset.media_type == HTML {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_match_extensions() {
        for a in ASSETS {
            let want = match a.path.rsplit('.').next() {
                Some("html") => HTML,
                Some("js") => JS,
                Some("css") => CSS,
                Some("svg") => "image/svg+xml",
                other => panic!("unexpected extension {other:?} of {}", a.path),
            };
            assert_eq!(a.media_type, want, "{}", a.path);
        }
    }

    #[test]
    fn etags_differ_between_files() {
        let tags = etags();
        let mut sorted = tags.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), tags.len());
    }
}
