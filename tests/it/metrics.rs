//! `/metrics` per site and queue (issue 25): a pushed live site with a history, pending
//! jobs and a queue limit; the scrape's bound equals the bound endpoint's answer for the
//! shape, the pending count and the calibration are the site's, a shape beyond the
//! queue's limit has a status and no number, the push source's health is there — and
//! every metric the Grafana dashboard in `contrib/grafana/` queries is exported.

use std::collections::BTreeSet;

use serde_json::json;

use qbets::store::Scope;

use crate::support::{TEST_NOW, TestApp};

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// The value of the sample `name{labels}` (labels as written, in order).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Every sample name in an exposition.
fn names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn queues_and_sources_are_exported_and_the_dashboard_queries_only_them() {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let res = app
        .json(
            "PUT",
            "/v1/sites/m",
            Some(&admin),
            &json!({"queues": [{"name": "batch", "max_nodes": 4}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    // 150 jobs, one every ten minutes, each waiting 1 to 5 minutes: a history with
    // bounds, and promises made to the later ones at their submission.
    let first = TEST_NOW - 150 * 600 - 3_600;
    let mut jobs = Vec::new();
    for i in 0..150i64 {
        let submit = first + i * 600;
        let start = submit + 60 + (i * 37) % 240;
        jobs.push(
            json!({"job_id": format!("{i}"), "queue": "batch", "submit": iso(submit),
            "start": iso(start), "end": iso(start + 100), "nodes": 1, "walltime": 3600,
            "state": "completed"}),
        );
    }
    for i in 0..3 {
        jobs.push(json!({"job_id": format!("p{i}"), "queue": "batch",
            "submit": iso(TEST_NOW - 100 + i), "nodes": 1, "walltime": 600, "state": "pending"}));
    }
    let out = app
        .json(
            "POST",
            "/v1/sites/m/jobs",
            Some(&admin),
            &json!({ "jobs": jobs }),
        )
        .await;
    assert_eq!(out.status, 200, "{}", out.text());

    let text = app.get("/metrics", None).await.text();
    let q = r#"site="m",queue="batch""#;
    let bound = app
        .get("/v1/sites/m/queues/batch/bound?nodes=1&walltime=3600", None)
        .await
        .json();
    assert_eq!(bound["status"], "ok", "{bound}");
    assert_eq!(
        sample(
            &text,
            &format!(r#"qbets_queue_bound_seconds{{{q},nodes="1",walltime_s="3600"}}"#)
        ),
        bound["bound_s"].as_f64(),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"qbets_queue_bound_status{{{q},nodes="1",walltime_s="3600",status="ok"}}"#)
        ),
        Some(1.0)
    );
    // Eight nodes on a queue of at most four: a status, no number.
    assert_eq!(
        sample(
            &text,
            &format!(
                r#"qbets_queue_bound_status{{{q},nodes="8",walltime_s="3600",status="exceeds_limits"}}"#
            )
        ),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains(&format!(r#"qbets_queue_bound_seconds{{{q},nodes="8""#)));
    assert_eq!(
        sample(&text, &format!("qbets_queue_pending_jobs{{{q}}}")),
        Some(3.0)
    );
    assert_eq!(sample(&text, &format!("qbets_queue_up{{{q}}}")), Some(1.0));
    // Calibration: every started job promised a bound counts once, in the share and in
    // the histogram, and the kept ones are those at or below 1 in it.
    let recent = sample(&text, &format!("qbets_queue_promises_recent{{{q}}}")).unwrap();
    assert!((80.0..=150.0).contains(&recent), "{recent}");
    assert_eq!(
        sample(&text, &format!("qbets_queue_wait_to_bound_count{{{q}}}")),
        Some(recent)
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"qbets_queue_wait_to_bound_bucket{{{q},le="+Inf"}}"#)
        ),
        Some(recent)
    );
    let kept = sample(&text, &format!("qbets_queue_promises_kept_ratio{{{q}}}")).unwrap();
    assert!((0.5..=1.0).contains(&kept), "{kept}");
    assert_eq!(
        sample(
            &text,
            &format!(r#"qbets_queue_wait_to_bound_bucket{{{q},le="1"}}"#)
        ),
        Some((kept * recent).round())
    );
    assert_eq!(sample(&text, "qbets_store_up"), Some(1.0));
    assert_eq!(sample(&text, "qbets_metrics_queues_left_out"), Some(0.0));
    let pushed = r#"site="m",source="push""#;
    assert_eq!(
        sample(
            &text,
            &format!("qbets_source_consecutive_failures{{{pushed}}}")
        ),
        Some(0.0),
        "{text}"
    );
    assert!(text.contains("qbets_source_ingest_lag_seconds{"), "{text}");

    // Every metric the dashboard asks for is in the scrape.
    let exported = names(&text);
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("contrib/grafana/qbets-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut queried = BTreeSet::new();
    let mut exprs = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"].as_str() {
            exprs.push(q.to_string());
        }
    }
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("qbets_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            queried.insert(name);
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    let missing: Vec<_> = queried.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, not exported"
    );
}
