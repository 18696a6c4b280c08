//! Bad input cannot amplify, and queues are not unbounded (issue 22): a push's answer
//! lists the first N refused records' reasons and counts the rest; the rejects kept
//! per request and per site are bounded (the rest counted, in the answer and the
//! site's ingest health); a site's queues are capped, records naming a new queue past
//! the cap kept aside with the reason. Run on each backend (SQLite always; PostgreSQL
//! when `TEST_DATABASE_URL` is set).

use serde_json::{Value, json};

use super::support::{TEST_NOW, TestApp, TestDb, postgres_url};
use qbets::config::Config;
use qbets::store::Scope;

fn bounded(c: &mut Config) {
    c.ingest.max_reasons_in_answer = 5;
    c.ingest.max_rejects_per_request = 10;
    c.ingest.max_rejects_per_site = 25;
    c.ingest.max_queues_per_site = 3;
}

async fn site(app: &TestApp) -> String {
    let admin = app.token("ops", Scope::Admin).await;
    let r = app
        .json("PUT", "/v1/sites/hpc", Some(&admin), &json!({}))
        .await;
    assert!(r.status.is_success(), "{}", r.text());
    app.token("sensor", Scope::Ingest).await
}

async fn story(app: TestApp) {
    let ingest = site(&app).await;
    // Two hundred records, each bad in its own way (an unknown field), as an array
    // and as NDJSON.
    let bad =
        |push: usize| -> Vec<Value> { (0..200).map(|i| json!({"push": push, "n": i})).collect() };
    let mut pushes = Vec::new();
    for p in 0..4 {
        let r = if p % 2 == 0 {
            app.json("POST", "/v1/sites/hpc/jobs", Some(&ingest), &json!(bad(p)))
                .await
        } else {
            let lines: Vec<String> = bad(p).iter().map(Value::to_string).collect();
            app.raw(
                "POST",
                "/v1/sites/hpc/jobs",
                Some(&ingest),
                "application/x-ndjson",
                lines.join("\n"),
            )
            .await
        };
        assert_eq!(r.status, 200, "{}", r.text());
        pushes.push(r.json());
    }
    for (p, out) in pushes.iter().enumerate() {
        assert_eq!(out["received"], 200, "{out}");
        assert_eq!(out["rejected"], 200, "{out}");
        // The first five records' reasons, the rest counted.
        let listed: std::collections::BTreeSet<u64> = out["rejects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["record"].as_u64().unwrap())
            .collect();
        assert_eq!(listed.len(), 5, "{out}");
        assert_eq!(out["rejects_unlisted"], 195, "{out}");
        // Ten kept per push, until the site keeps twenty-five.
        let kept = [10, 10, 5, 0][p];
        assert_eq!(out["rejects_unkept"], 200 - kept, "push {p}: {out}");
    }
    let kept = app
        .get("/v1/sites/hpc/rejects?limit=10000", None)
        .await
        .json();
    assert_eq!(kept["rejects"].as_array().unwrap().len(), 25, "{kept}");
    // Every refused record is counted in the site's ingest health.
    let health = app.get("/v1/sites/hpc/ingest", None).await.json();
    let push = health["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "push")
        .unwrap_or_else(|| panic!("{health}"));
    assert_eq!(push["rejected"], 800, "{health}");

    // Queues: three at most; a record naming a fourth is kept aside with the reason.
    let t = qbets::service::format_unix(TEST_NOW - 600);
    let job = |id: u32, queue: &str| json!({"job_id": id.to_string(), "queue": queue, "submit": t, "state": "pending"});
    let jobs = json!([
        job(1, "q0"),
        job(2, "q1"),
        job(3, "q2"),
        job(4, "q3"),
        job(5, "q4"),
        job(6, "q1")
    ]);
    let out = app
        .json("POST", "/v1/sites/hpc/jobs", Some(&ingest), &jobs)
        .await
        .json();
    assert_eq!(
        (&out["changed"], &out["rejected"]),
        (&json!(4), &json!(2)),
        "{out}"
    );
    let queues = app.get("/v1/sites/hpc/queues", None).await.json();
    let names: Vec<&str> = queues["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("{queues}"))
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{queues}");
    // The site's rejects are full, so the queue refusals are counted, not kept; with
    // room they are kept with the reason (see the next test).
    assert_eq!(out["rejects_unkept"], 2, "{out}");
}

async fn queue_story(app: TestApp) {
    let ingest = site(&app).await;
    let t = qbets::service::format_unix(TEST_NOW - 600);
    let job = |id: u32, queue: &str| json!({"job_id": id.to_string(), "queue": queue, "submit": t, "state": "pending"});
    let jobs = json!([
        job(1, "q0"),
        job(2, "q1"),
        job(3, "q2"),
        job(4, "q3"),
        job(5, "q0")
    ]);
    let out = app
        .json("POST", "/v1/sites/hpc/jobs", Some(&ingest), &jobs)
        .await
        .json();
    assert_eq!(
        (&out["changed"], &out["rejected"]),
        (&json!(4), &json!(1)),
        "{out}"
    );
    let kept = app.get("/v1/sites/hpc/rejects", None).await.json();
    let reasons: Vec<&str> = kept["rejects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 1, "{kept}");
    assert!(
        reasons[0].contains("\"q3\"") && reasons[0].contains("ingest.max_queues_per_site"),
        "{kept}"
    );
    // A known queue still takes records.
    let out = app
        .json(
            "POST",
            "/v1/sites/hpc/jobs",
            Some(&ingest),
            &json!([job(7, "q2")]),
        )
        .await
        .json();
    assert_eq!(
        (&out["changed"], &out["rejected"]),
        (&json!(1), &json!(0)),
        "{out}"
    );
    // An administrator creating queues is held to the same bound.
    let admin = app.token("ops2", Scope::Admin).await;
    let body = json!({"queues": [{"name": "q1"}, {"name": "q9"}]});
    let p = app
        .json("PUT", "/v1/sites/hpc", Some(&admin), &body)
        .await
        .invalid(&["queues"]);
    assert!(p["detail"].as_str().unwrap().contains("at most 3"), "{p}");
    let body = json!({"queues": [{"name": "q1", "max_nodes": 8}]});
    let r = app.json("PUT", "/v1/sites/hpc", Some(&admin), &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn bad_input_is_bounded_on_sqlite() {
    story(TestApp::on(TestDb::sqlite()).adjusted(bounded).await).await;
}

#[tokio::test]
async fn bad_input_is_bounded_on_postgres() {
    let Some(url) = postgres_url() else {
        return;
    };
    story(
        TestApp::on(TestDb::postgres(&url).await)
            .adjusted(bounded)
            .await,
    )
    .await;
}

#[tokio::test]
async fn queues_past_the_cap_are_kept_aside_on_sqlite() {
    queue_story(TestApp::on(TestDb::sqlite()).adjusted(bounded).await).await;
}

#[tokio::test]
async fn queues_past_the_cap_are_kept_aside_on_postgres() {
    let Some(url) = postgres_url() else {
        return;
    };
    queue_story(
        TestApp::on(TestDb::postgres(&url).await)
            .adjusted(bounded)
            .await,
    )
    .await;
}
