//! Issue 22, item 9: the smaller things a new user and a hostile tester found — each
//! test here failed before its fix.

use axum::body::Body;
use axum::http::Request;
use serde_json::json;

use super::support::{TEST_NOW, TestApp};
use qbets::store::Scope;

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

#[tokio::test]
async fn a_403_names_the_scope_needed_without_saying_admin_twice() {
    let app = TestApp::new().await;
    let read = app.token("viewer", Scope::Read).await;
    let p = app
        .json("PUT", "/v1/sites/x", Some(&read), &json!({"queues": []}))
        .await
        .problem(403);
    assert_eq!(p["detail"], "this needs a token with scope admin", "{p}");
    let p = app
        .json("POST", "/v1/sites/x/jobs", Some(&read), &json!([]))
        .await
        .problem(403);
    assert_eq!(
        p["detail"], "this needs a token with scope ingest (or admin)",
        "{p}"
    );
}

#[tokio::test]
async fn two_authorization_headers_are_refused() {
    let app = TestApp::with_config(|c| c.http.public_reads = false).await;
    let read = app.token("viewer", Scope::Read).await;
    let bearer = format!("Bearer {read}");
    let r = app
        .with_headers(
            "GET",
            "/v1/sites",
            None,
            &[
                ("authorization", &bearer),
                ("authorization", "Bearer qbets_forged"),
            ],
            String::new(),
        )
        .await;
    let p = r.problem(400);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("more than one Authorization"),
        "{p}"
    );
    // One is fine.
    let r = app
        .with_headers(
            "GET",
            "/v1/sites",
            None,
            &[("authorization", &bearer)],
            String::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_preflight_gets_nothing_when_no_origin_is_configured() {
    let app = TestApp::with_config(|c| c.http.cors_origins = Vec::new()).await;
    let res = app
        .send(
            Request::builder()
                .method("OPTIONS")
                .uri("/v1/reservations")
                .header("origin", "https://portal.example")
                .header("access-control-request-method", "POST")
                .header("access-control-request-headers", "authorization")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    for h in [
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
    ] {
        assert!(res.headers.get(h).is_none(), "{h}: {:?}", res.headers);
    }
}

#[tokio::test]
async fn a_key_repeated_inside_a_record_and_a_job_repeated_in_a_batch_are_reported() {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    app.json(
        "PUT",
        "/v1/sites/hpc",
        Some(&admin),
        &json!({"queues": [{"name": "batch"}]}),
    )
    .await;
    let t = TEST_NOW - 3_600;
    // serde_json's tree keeps the last of a repeated key: written by hand.
    let body = format!(
        r#"[{{"job_id": "1", "queue": "batch", "submit": "{s}", "state": "pending", "state": "completed"}},
            {{"job_id": "2", "queue": "batch", "submit": "{s}", "state": "pending"}},
            {{"job_id": "3", "queue": "batch", "submit": "{s}", "state": "pending"}},
            {{"job_id": "2", "queue": "batch", "submit": "{s}", "start": "{st}", "state": "running"}}]"#,
        s = iso(t),
        st = iso(t + 60)
    );
    let out = app
        .raw(
            "POST",
            "/v1/sites/hpc/jobs",
            Some(&admin),
            "application/json",
            body,
        )
        .await
        .json();
    assert_eq!(
        (&out["received"], &out["rejected"]),
        (&json!(4), &json!(1)),
        "{out}"
    );
    assert_eq!(out["rejects"][0]["field"], "[0].state", "{out}");
    assert_eq!(
        out["rejects"][0]["reason"], "is given more than once",
        "{out}"
    );
    assert_eq!(
        out["superseded"],
        json!([{"record": 1, "job_id": "2", "by": 3}]),
        "{out}"
    );
    assert_eq!(out["changed"], 2, "jobs 2 (its last record) and 3: {out}");
}

/// Revokes a token as `qbets token revoke` does.
struct Revoke(&'static str, bool);

impl qbets::store::StoreTask for Revoke {
    type Output = bool;
    async fn run<S: qbets::store::Store>(self, store: S) -> bool {
        store.delete_token(self.0, self.1).await.unwrap()
    }
}

#[tokio::test]
async fn a_new_token_given_a_revoked_tokens_name_does_not_inherit_its_reservations() {
    let (app, _admin) = super::reservations::api::app_with_history().await;
    let reserve = |who: &'static str| app.token(who, Scope::Reserve);
    let body = json!({"site": super::reservations::SITE, "queue": "debug", "nodes": 1,
                      "walltime": "00:05:00", "start_at": iso(TEST_NOW + 3_600),
                      "min_probability": 0.5, "command": "hostname"});
    let make = |token: String| {
        let (app, body) = (&app, &body);
        async move {
            let r = app
                .json("POST", "/v1/reservations", Some(&token), body)
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
            r.json()["id"].as_str().unwrap().to_string()
        }
    };
    let url = app.config.database_url.clone();

    // Revoked: the new "alice" sees nothing of the old one's.
    let old = reserve("alice").await;
    let id = make(old).await;
    assert!(
        qbets::store::with_store(&url, Revoke("alice", false))
            .await
            .unwrap()
    );
    let new = reserve("alice").await;
    app.get(&format!("/v1/reservations/{id}"), Some(&new))
        .await
        .problem(404);
    let list = app.get("/v1/reservations", Some(&new)).await.json();
    assert_eq!(list["reservations"].as_array().unwrap().len(), 0, "{list}");

    // Replaced with the admin's leave (`--keep-reservations`): the successor sees them.
    let id = make(new).await;
    assert!(
        qbets::store::with_store(&url, Revoke("alice", true))
            .await
            .unwrap()
    );
    let successor = reserve("alice").await;
    let r = app
        .get(&format!("/v1/reservations/{id}"), Some(&successor))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The reservations whose remote clean-up is still to be done.
struct Cleanups;

impl qbets::store::StoreTask for Cleanups {
    type Output = usize;
    async fn run<S: qbets::store::Store>(self, store: S) -> usize {
        store.remote_cleanups().await.unwrap().len()
    }
}

#[tokio::test]
async fn a_reservation_never_submitted_leaves_no_clean_up_to_retry() {
    // A submit target nobody answers at (the discard port): cancelling a reservation
    // that never reached it must not leave a remote job to look for, for ever.
    let mut site = super::reservations::local_site();
    if let Some(qbets::submit::SubmitConfig::SlurmRest(s)) = site.submit.as_mut() {
        s.url = "http://127.0.0.1:9".into();
        s.timeout_s = 2;
    }
    let app = TestApp::on(super::support::TestDb::fresh().await)
        .adjusted(|c| c.sites = vec![site])
        .await;
    let admin = app.token("admin", Scope::Admin).await;
    let site = super::reservations::SITE;
    app.json(
        "PUT",
        &format!("/v1/sites/{site}"),
        Some(&admin),
        &json!({"queues": [{"name": "debug"}]}),
    )
    .await;
    let jobs: Vec<serde_json::Value> = super::reservations::history(TEST_NOW, 300)
        .into_iter()
        .enumerate()
        .map(|(i, (submit, start))| {
            json!({"job_id": format!("{i}"), "queue": "debug", "submit": iso(submit),
                   "start": iso(start), "end": iso(start + 100), "nodes": 1,
                   "walltime": 600, "state": "completed"})
        })
        .collect();
    let r = app
        .json(
            "POST",
            &format!("/v1/sites/{site}/jobs"),
            Some(&admin),
            &json!({ "jobs": jobs }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let alice = app.token("alice", Scope::Reserve).await;
    let body = json!({"site": site, "queue": "debug", "nodes": 1, "walltime": "00:05:00",
                      "start_at": iso(TEST_NOW + 3_600), "min_probability": 0.5,
                      "command": "hostname"});
    let r = app
        .json("POST", "/v1/reservations", Some(&alice), &body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let r = app
        .json(
            "DELETE",
            &format!("/v1/reservations/{id}"),
            Some(&alice),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "cancelled");
    let url = app.config.database_url.clone();
    assert_eq!(qbets::store::with_store(&url, Cleanups).await.unwrap(), 0);
}
