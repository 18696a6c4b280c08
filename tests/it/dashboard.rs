//! The dashboard's server side in-process: the embedded files are served with their
//! media types and revalidation headers, and the waits endpoint thins a long window
//! evenly so that a chart of 100k jobs downloads only the points it draws.

use axum::body::Body;
use axum::http::{Request, header};
use serde_json::json;

use crate::support::{TEST_NOW, TestApp};
use qbets::store::Scope;

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

#[tokio::test]
async fn pages_and_scripts_are_served_from_the_binary() {
    let app = TestApp::new().await;
    let root = app.get("/", None).await;
    assert!(root.status.is_redirection(), "{}", root.status);
    assert_eq!(root.headers[header::LOCATION], "/ui/");

    let index = app.get("/ui/", None).await;
    assert_eq!(index.status, 200);
    assert_eq!(
        index.headers[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    assert!(
        index
            .text()
            .contains("<script type=\"module\" src=\"/ui/overview.js\">")
    );
    let csp = index.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.contains("default-src 'self'"), "{csp}");

    for path in qbets::http::dashboard::asset_paths() {
        let res = app.get(&format!("/ui/{path}"), None).await;
        assert_eq!(res.status, 200, "/ui/{path}");
        assert!(!res.body.is_empty(), "/ui/{path}");
        let on_disk =
            std::fs::read(format!("{}/static/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert_eq!(res.body, on_disk, "/ui/{path} is the file in static/");
    }
    let js = app.get("/ui/vendor/uplot/uPlot.iife.min.js", None).await;
    assert_eq!(
        js.headers[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(js.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");

    // Revalidation: the ETag answers 304 with no body.
    let tag = js.headers[header::ETAG].to_str().unwrap().to_string();
    let again = app
        .send(
            Request::get("/ui/vendor/uplot/uPlot.iife.min.js")
                .header(header::IF_NONE_MATCH, &tag)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());

    let missing = app.get("/ui/nope.js", None).await;
    missing.problem(404);
    let escape = app.get("/ui/../Cargo.toml", None).await;
    assert_eq!(escape.status, 404, "only embedded files are served");
    // A path that is not UTF-8 once decoded: problem+json, as everywhere else.
    app.get("/ui/%FF", None).await.problem(400);
}

/// A live site whose queue `batch` has `n` started jobs, one a minute from
/// `TEST_NOW - n minutes`, job ids "0".."n-1".
async fn queue_with_jobs(app: &TestApp, n: i64) {
    let admin = app.token("ops", Scope::Admin).await;
    let res = app
        .json(
            "PUT",
            "/v1/sites/big",
            Some(&admin),
            &json!({"queues": [{"name": "batch"}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let first = TEST_NOW - n * 60;
    let jobs: Vec<_> = (0..n)
        .map(|i| {
            let start = first + i * 60;
            json!({"job_id": i.to_string(), "queue": "batch", "submit": iso(start - 30 - i % 7),
                   "start": iso(start), "nodes": 1, "walltime": 600, "state": "running"})
        })
        .collect();
    for chunk in jobs.chunks(500) {
        let res = app
            .json(
                "POST",
                "/v1/sites/big/jobs",
                Some(&admin),
                &json!({ "jobs": chunk }),
            )
            .await;
        assert_eq!(res.status, 200, "{}", res.text());
    }
}

fn job_ids(w: &serde_json::Value) -> Vec<i64> {
    w["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test]
async fn waits_thin_a_long_window_evenly() {
    let app = TestApp::new().await;
    let n = 1_000;
    queue_with_jobs(&app, n).await;
    let window = format!(
        "since={}&until={}",
        iso(TEST_NOW - n * 60 - 60),
        iso(TEST_NOW + 1)
    );

    for limit in [1_i64, 2, 10, 37, 999] {
        let w = app
            .get(
                &format!("/v1/sites/big/queues/batch/waits?{window}&limit={limit}&thin=true"),
                None,
            )
            .await;
        assert_eq!(w.status, 200, "{}", w.text());
        let w = w.json();
        assert_eq!(w["total"], n);
        assert_eq!(w["truncated"], true);
        // The j-th of `limit` points is the job at ceil(j·(n−1)/(limit−1)) by start:
        // first and last included, evenly spaced.
        let want: Vec<i64> = if limit == 1 {
            vec![0]
        } else {
            (0..limit)
                .map(|j| (j * (n - 1) + limit - 2) / (limit - 1))
                .collect()
        };
        assert_eq!(job_ids(&w), want, "limit {limit}");
    }

    // A window that fits is returned whole, thinned or not.
    let all = app
        .get(
            &format!("/v1/sites/big/queues/batch/waits?{window}&limit=1000&thin=true"),
            None,
        )
        .await
        .json();
    assert_eq!(all["truncated"], false);
    assert_eq!(job_ids(&all), (0..n).collect::<Vec<_>>());

    // Without `thin`, the first `limit` jobs, and no count.
    let first = app
        .get(
            &format!("/v1/sites/big/queues/batch/waits?{window}&limit=5"),
            None,
        )
        .await
        .json();
    assert_eq!(job_ids(&first), [0, 1, 2, 3, 4]);
    assert_eq!(first["truncated"], true);
    assert!(first["total"].is_null());

    app.get("/v1/sites/big/queues/batch/waits?thin=yes", None)
        .await
        .invalid(&["thin"]);
}
