//! Pushed records, rejects and the ingest health endpoint, told as one story run on
//! each backend (SQLite always; PostgreSQL when `TEST_DATABASE_URL` is set).

use serde_json::{Value, json};

use super::support::{TEST_NOW, TestApp, TestDb, postgres_url};
use qbets::store::Scope;

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

async fn push_story(app: TestApp) {
    let admin = app.token("ops", Scope::Admin).await;
    let ingest = app.token("sensor", Scope::Ingest).await;
    let read = app.token("viewer", Scope::Read).await;
    app.json(
        "PUT",
        "/v1/sites/hpc",
        Some(&admin),
        &json!({"queues": [{"name": "batch"}]}),
    )
    .await;
    let t = TEST_NOW - 3_600;

    // A bare JSON array; the ingest scope suffices, the read scope does not.
    let body = json!([
        {"job_id": "1", "queue": "batch", "submit": iso(t), "start": iso(t + 60), "nodes": 4, "walltime": "01:00:00", "state": "running"},
        {"job_id": "2", "queue": "batch", "submit": iso(t + 10), "state": "pending"},
        {"job_id": "3", "queue": "batch", "submit": iso(t + 20), "start": iso(t + 10), "state": "running"},
    ]);
    app.json("POST", "/v1/sites/hpc/jobs", Some(&read), &body)
        .await
        .problem(403);
    let out = app
        .json("POST", "/v1/sites/hpc/jobs", Some(&ingest), &body)
        .await
        .json();
    assert_eq!(
        (&out["received"], &out["changed"], &out["rejected"]),
        (&json!(3), &json!(2), &json!(1)),
        "{out}"
    );
    assert_eq!(out["rejects"][0]["field"], "[2].start", "{out}");

    // The same push again changes nothing.
    let again = app
        .json("POST", "/v1/sites/hpc/jobs", Some(&ingest), &body)
        .await
        .json();
    assert_eq!(again["changed"], 0, "{again}");

    // NDJSON: one record a line; a line that is not JSON is kept aside by its number.
    let ndjson = format!(
        "{}\n\n{{not json\n{}\n",
        json!({"job_id": "2", "queue": "batch", "submit": iso(t + 10), "start": iso(t + 300), "state": "running"}),
        json!({"job_id": "4", "queue": "express", "submit": iso(t + 30), "nodes": 1, "walltime": 600, "state": "pending"}),
    );
    let out = app
        .raw(
            "POST",
            "/v1/sites/hpc/jobs",
            Some(&ingest),
            "application/x-ndjson",
            ndjson,
        )
        .await
        .json();
    assert_eq!(
        (&out["received"], &out["changed"], &out["rejected"]),
        (&json!(3), &json!(2), &json!(1)),
        "{out}"
    );
    assert_eq!(
        out["rejects"][0]["record"], 3,
        "line numbers count from 1: {out}"
    );

    let w = app
        .get(
            "/v1/sites/hpc/queues/batch/waits?since=2000-01-01T00:00:00Z",
            None,
        )
        .await
        .json();
    let waits: Vec<(String, i64)> = w["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["job_id"].as_str().unwrap().to_string(),
                j["wait_s"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(waits, [("1".to_string(), 60), ("2".to_string(), 290)]);
    let queues = app.get("/v1/sites/hpc/queues", None).await.json();
    assert_eq!(
        queues["queues"][1]["name"], "express",
        "new queues are created"
    );

    // Rejects keep the raw text and the reason, oldest first.
    let r = app.get("/v1/sites/hpc/rejects", None).await.json();
    let rejects = r["rejects"].as_array().unwrap();
    assert_eq!(
        rejects.len(),
        2,
        "the bad record pushed twice is kept once: {r}"
    );
    assert!(rejects[0]["raw"].as_str().unwrap().contains("\"3\""), "{r}");
    assert!(
        rejects[0]["reason"]
            .as_str()
            .unwrap()
            .contains("must not be before submit"),
        "{r}"
    );
    assert_eq!(rejects[0]["source"], "push");
    assert!(rejects.iter().any(|x| x["raw"] == "{not json"), "{r}");
    assert_eq!(r["next"], Value::Null, "every reject fits the page: {r}");
    // Page by page with `after`: the same records, none twice, none left out.
    let first = app.get("/v1/sites/hpc/rejects?limit=1", None).await.json();
    assert_eq!(first["rejects"][0], rejects[0]);
    let next = first["next"].as_i64().unwrap();
    assert_eq!(next, rejects[0]["id"].as_i64().unwrap());
    let second = app
        .get(&format!("/v1/sites/hpc/rejects?limit=1&after={next}"), None)
        .await
        .json();
    assert_eq!(second["rejects"][0], rejects[1]);
    let after = second["next"].as_i64().unwrap();
    let third = app
        .get(
            &format!("/v1/sites/hpc/rejects?limit=1&after={after}"),
            None,
        )
        .await
        .json();
    assert_eq!(
        (third["rejects"].as_array().unwrap().len(), &third["next"]),
        (0, &Value::Null)
    );
    app.get("/v1/sites/hpc/rejects?limit=0", None)
        .await
        .invalid(&["limit"]);
    app.get("/v1/sites/hpc/rejects?after=-1", None)
        .await
        .invalid(&["after"]);
    app.get("/v1/sites/nowhere/rejects", None)
        .await
        .problem(404);

    // Health: the push source with its counts.
    app.clock.set(TEST_NOW + 30);
    let h = app.get("/v1/sites/hpc/ingest", None).await.json();
    let push = &h["sources"][0];
    assert_eq!(push["source"], "push", "{h}");
    assert_eq!(push["status"], "ok");
    assert_eq!(push["accepted"], 4, "2 + 0 + 2 changes: {h}");
    assert_eq!(
        push["rejected"], 2,
        "1 + 0 (the same record again) + 1: {h}"
    );
    assert_eq!(push["lag_s"], 30);
    assert_eq!(push["last_record"], iso(t + 300));
    app.get("/v1/sites/nowhere/ingest", None).await.problem(404);

    // Text a backend cannot hold (NUL, which PostgreSQL refuses) is a reject, not an
    // error of the whole push.
    let out = app
        .json(
            "POST",
            "/v1/sites/hpc/jobs",
            Some(&ingest),
            &json!([
                {"job_id": "a\u{0}", "queue": "batch", "submit": iso(t), "state": "pending"},
                {"job_id": "5", "queue": "batch", "submit": iso(t), "state": "pending", "note": "x\u{0}"},
            ]),
        )
        .await
        .json();
    assert_eq!(
        (&out["changed"], &out["rejected"]),
        (&json!(0), &json!(2)),
        "{out}"
    );

    // A time later than the service's clock allows (a scheduler's clock far ahead, a
    // date mistyped) is a reject naming the field; a little ahead is clock skew.
    let now = TEST_NOW + 30;
    let out = app
        .json(
            "POST",
            "/v1/sites/hpc/jobs",
            Some(&ingest),
            &json!({"jobs": [
                {"job_id": "6", "queue": "batch", "submit": iso(t), "start": "2099-01-01T00:00:00Z", "state": "running"},
                {"job_id": "7", "queue": "batch", "submit": iso(now + 601), "state": "pending"},
                {"job_id": "8", "queue": "batch", "submit": iso(t), "start": iso(now + 600), "state": "running"},
            ]}),
        )
        .await
        .json();
    assert_eq!(
        (&out["changed"], &out["rejected"]),
        (&json!(1), &json!(2)),
        "{out}"
    );
    assert_eq!(out["rejects"][0]["field"], "jobs[0].start", "{out}");
    assert_eq!(out["rejects"][1]["field"], "jobs[1].submit", "{out}");
    assert!(
        out["rejects"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("later than the service's clock"),
        "{out}"
    );
    let queues = app.get("/v1/sites/hpc/queues", None).await.json();
    assert_eq!(
        queues["queues"][0]["last_release"],
        iso(now + 600),
        "no release dated 2099: {queues}"
    );

    // Not a JSON body at all, or the wrong media type: refused as a whole.
    app.raw(
        "POST",
        "/v1/sites/hpc/jobs",
        Some(&ingest),
        "application/json",
        "[".into(),
    )
    .await
    .problem(400);
    app.raw(
        "POST",
        "/v1/sites/hpc/jobs",
        Some(&ingest),
        "text/csv",
        "a,b".into(),
    )
    .await
    .problem(415);
    app.json(
        "POST",
        "/v1/sites/hpc/jobs",
        Some(&ingest),
        &json!({"records": []}),
    )
    .await
    .invalid(&["records"]);
}

#[tokio::test]
async fn pushes_keep_bad_records_aside_on_sqlite() {
    push_story(TestApp::on(TestDb::sqlite()).adjusted(|_| {}).await).await;
}

#[tokio::test]
async fn pushes_keep_bad_records_aside_on_postgres() {
    // Runs when the suite has a PostgreSQL (scripts/test sets TEST_DATABASE_URL).
    let Some(url) = postgres_url() else {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL half of this story did not run");
        return;
    };
    push_story(
        TestApp::on(TestDb::postgres(&url).await)
            .adjusted(|_| {})
            .await,
    )
    .await;
}
