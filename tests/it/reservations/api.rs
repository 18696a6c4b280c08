//! The reservation API in-process, on a fresh database, with the clock fixed: VARQ and
//! CO-VARQ plans computed from a queue's ingested history, refusals, validation,
//! ownership and cancel of planned reservations, calibration.

use qbets::store::Scope;
use serde_json::{Value, json};

use super::{SITE, history, local_site};
use crate::support::{TEST_NOW, TestApp, TestDb, TestResponse, postgres_url};

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

fn unix(v: &Value) -> i64 {
    qbets::http::params::timestamp(v.as_str().unwrap()).unwrap()
}

/// A live site `local` with queues `debug` and `long`, each with 300 jobs of history.
pub(crate) async fn app_with_history() -> (TestApp, String) {
    app_with_history_on(TestDb::fresh().await).await
}

/// [`app_with_history`] on this database.
async fn app_with_history_on(db: TestDb) -> (TestApp, String) {
    app_with_history_at(db, local_site()).await
}

/// [`app_with_history`] for this configuration of the site.
async fn app_with_history_at(db: TestDb, site: qbets::config::SiteConfig) -> (TestApp, String) {
    let app = TestApp::on(db).adjusted(|c| c.sites = vec![site]).await;
    let admin = app.token("admin", Scope::Admin).await;
    let r = app
        .json(
            "PUT",
            &format!("/v1/sites/{SITE}"),
            Some(&admin),
            &json!({"queues": [{"name": "debug", "max_walltime": "01:00:00"}, {"name": "long"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for queue in ["debug", "long"] {
        let jobs: Vec<Value> = history(TEST_NOW, 300)
            .into_iter()
            .enumerate()
            .map(|(i, (submit, start))| {
                json!({"job_id": format!("{queue}-{i}"), "queue": queue, "submit": iso(submit),
                       "start": iso(start), "end": iso(start + 100), "nodes": 1,
                       "walltime": 600, "state": "completed"})
            })
            .collect();
        let r = app
            .json(
                "POST",
                &format!("/v1/sites/{SITE}/jobs"),
                Some(&admin),
                &json!({ "jobs": jobs }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    (app, admin)
}

fn varq(start_at: i64, p: f64) -> Value {
    json!({"site": SITE, "queue": "debug", "nodes": 1, "walltime": "00:05:00",
           "start_at": iso(start_at), "min_probability": p})
}

#[tokio::test]
async fn varq_plans_follow_the_queue_history_and_refusals_name_the_best() {
    let (app, _) = app_with_history().await;
    let start_at = TEST_NOW + 600;
    let r = app
        .json("POST", "/v1/plans/varq", None, &varq(start_at, 0.9))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let plan = r.json();
    assert_eq!(unix(&plan["as_of"]), TEST_NOW);
    let submit_at = unix(&plan["submit_at"]);
    let p = plan["probability"].as_f64().unwrap();
    assert!((TEST_NOW..start_at).contains(&submit_at), "{plan}");
    assert!(p >= 0.9, "{plan}");
    let lead = (start_at - submit_at) as u64;
    assert_eq!(plan["advertised_walltime_s"], 300 + lead);
    assert_eq!(plan["max_overhead_node_s"], lead);
    assert_eq!(plan["required_node_s"], 300);
    // Every wait in the history is under a minute: a lead of a minute or more is
    // nearly certain, and `latest` takes the last time that still meets p.
    assert!((30..=120).contains(&lead), "lead {lead}: {plan}");
    let traj = plan["trajectory"].as_array().unwrap();
    assert_eq!(traj.len(), 20, "one point every 30 s from now to start_at");
    for t in traj {
        let at = unix(&t["submit_at"]);
        let tp = t["probability"].as_f64().unwrap();
        assert_eq!(t["status"], "ok");
        assert_eq!(t["lead_s"].as_i64().unwrap(), start_at - at);
        if at > submit_at {
            assert!(tp < 0.9, "a later point meets p: {t}");
        }
    }

    // max_probability: the highest point of the same trajectory.
    let mut body = varq(start_at, 0.5);
    body["mode"] = json!("max_probability");
    let best = app.json("POST", "/v1/plans/varq", None, &body).await.json();
    let top = traj
        .iter()
        .map(|t| t["probability"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(best["probability"].as_f64().unwrap(), top);

    // Unreachable: 422 naming the best probability and when.
    let r = app
        .json("POST", "/v1/plans/varq", None, &varq(start_at, 0.999_999))
        .await;
    let problem = r.problem(422);
    assert_eq!(problem["type"], "urn:qbets:problem:no-plan");
    assert_eq!(problem["best_probability"].as_f64().unwrap(), top);
    let when = unix(&problem["best_submit_at"]);
    assert!((TEST_NOW..start_at).contains(&when));

    // Bad fields, all at once; a past start_at; unknown queue.
    let r = app
        .json(
            "POST",
            "/v1/plans/varq",
            None,
            &json!({"site": SITE, "queue": "debug", "nodes": 0, "walltime": "bogus",
                    "start_at": iso(start_at), "min_probability": 1.5}),
        )
        .await;
    r.invalid(&["nodes", "walltime", "min_probability"]);
    let r = app
        .json("POST", "/v1/plans/varq", None, &varq(TEST_NOW - 1, 0.5))
        .await;
    r.invalid(&["start_at"]);
    let mut body = varq(start_at, 0.5);
    body["queue"] = json!("nope");
    app.json("POST", "/v1/plans/varq", None, &body)
        .await
        .problem(404);
    let mut body = varq(start_at, 0.5);
    body["surprise"] = json!(1);
    app.json("POST", "/v1/plans/varq", None, &body)
        .await
        .problem(400);
}

#[tokio::test]
async fn reservations_belong_to_their_token_and_cancel_while_planned() {
    let (app, admin) = app_with_history().await;
    let alice = app.token("alice", Scope::Reserve).await;
    let bob = app.token("bob", Scope::Reserve).await;
    let reader = app.token("reader", Scope::Read).await;
    let mut body = varq(TEST_NOW + 3600, 0.9);
    body["command"] = json!("hostname");
    app.json("POST", "/v1/reservations", None, &body)
        .await
        .problem(401);
    app.json("POST", "/v1/reservations", Some(&reader), &body)
        .await
        .problem(403);

    let r = app
        .json("POST", "/v1/reservations", Some(&alice), &body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let made = r.json();
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(made["state"], "planned");
    assert_eq!(made["owner"], "alice");
    assert_eq!(made["run_mode"], "hold");
    assert_eq!(
        made["on_failure"], "cancel",
        "the job of a failed reservation goes"
    );
    assert_eq!(made["at_risk"], false);
    assert!(made["plan"]["probability"].as_f64().unwrap() >= 0.9);
    assert_eq!(made["events"][0]["state"], "planned");

    // Bob sees nothing of Alice's.
    let uri = format!("/v1/reservations/{id}");
    app.get(&uri, Some(&bob)).await.problem(404);
    app.json("DELETE", &uri, Some(&bob), &json!({}))
        .await
        .problem(404);
    let list = app.get("/v1/reservations", Some(&bob)).await.json();
    assert_eq!(list["reservations"].as_array().unwrap().len(), 0);
    let list = app.get("/v1/reservations", Some(&alice)).await.json();
    assert_eq!(list["reservations"][0]["id"], id.as_str());
    assert_eq!(list["truncated"], false);
    let one = app.get(&uri, Some(&alice)).await.json();
    assert_eq!(one["plan"], made["plan"]);

    // Cancel while planned: no remote job to remove; a second cancel changes nothing
    // (it looks for a remote job to remove again, as after a scheduler that failed).
    let r = app.json("DELETE", &uri, Some(&alice), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let gone = r.json();
    assert_eq!(gone["state"], "cancelled");
    assert_eq!(gone["remote_job_id"], Value::Null);
    let events: Vec<&str> = gone["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["planned", "cancelled"]);
    let again = app.json("DELETE", &uri, Some(&alice), &json!({})).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.json()["events"], gone["events"]);

    // A site without a submit target takes no reservations; bad fields are named.
    app.json(
        "PUT",
        "/v1/sites/other",
        Some(&admin),
        &json!({"queues": [{"name": "q"}]}),
    )
    .await;
    let mut other = body.clone();
    other["site"] = json!("other");
    other["queue"] = json!("q");
    app.json("POST", "/v1/reservations", Some(&alice), &other)
        .await
        .problem(409);
    let mut bad = body.clone();
    bad["command"] = json!("  ");
    bad["run_mode"] = json!("sometimes");
    let p = app
        .json("POST", "/v1/reservations", Some(&alice), &bad)
        .await
        .problem(400);
    assert_eq!(p["errors"][0]["field"], "run_mode", "{p}");
    let mut bad = body.clone();
    bad["on_failure"] = json!("ignore");
    let p = app
        .json("POST", "/v1/reservations", Some(&alice), &bad)
        .await
        .problem(400);
    assert_eq!(p["errors"][0]["field"], "on_failure", "{p}");
    let mut keep = body.clone();
    keep["on_failure"] = json!("keep");
    let r = app
        .json("POST", "/v1/reservations", Some(&alice), &keep)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let kept = r.json()["id"].as_str().unwrap().to_string();
    let uri = format!("/v1/reservations/{kept}");
    assert_eq!(
        app.get(&uri, Some(&alice)).await.json()["on_failure"],
        "keep"
    );

    // A page at a time, newest first: `next` lists the older ones.
    let page = app
        .get("/v1/reservations?limit=1", Some(&alice))
        .await
        .json();
    assert_eq!(page["reservations"][0]["id"], kept.as_str(), "{page}");
    assert_eq!(
        (&page["truncated"], &page["next"]),
        (&json!(true), &json!(kept))
    );
    let older = app
        .get(
            &format!("/v1/reservations?limit=1&before={kept}"),
            Some(&alice),
        )
        .await
        .json();
    assert_eq!(older["reservations"][0]["id"], id.as_str(), "{older}");
    assert_eq!(
        (&older["truncated"], &older["next"]),
        (&json!(false), &Value::Null)
    );
    // Another's reservation is none of bob's: not found; an empty `before` is invalid.
    app.get(&format!("/v1/reservations?before={kept}"), Some(&bob))
        .await
        .problem(404);
    app.get("/v1/reservations?before=", Some(&bob))
        .await
        .invalid(&["before"]);
    app.get("/v1/reservations?limit=0", Some(&alice))
        .await
        .invalid(&["limit"]);
    let mut bad = body.clone();
    bad.as_object_mut().unwrap().remove("site");
    let p = app
        .json("POST", "/v1/reservations", Some(&alice), &bad)
        .await
        .problem(400);
    assert_eq!(
        p["errors"],
        json!([{"field": "site", "detail": "is required"}]),
        "{p}"
    );

    // Nothing has finished: calibration lists nothing yet.
    let cal = app.get("/v1/calibration", None).await.json();
    assert_eq!(cal["queues"], json!([]));
}

/// A queue that gives a job at most so many nodes cannot hold a larger request: VARQ
/// refuses it, saying so, and CO-VARQ leaves that queue out for it.
#[tokio::test]
async fn plans_keep_to_the_queue_node_limit() {
    let (app, admin) = app_with_history().await;
    let r = app
        .json(
            "PUT",
            &format!("/v1/sites/{SITE}"),
            Some(&admin),
            &json!({"queues": [{"name": "long", "max_nodes": 2}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let start_at = TEST_NOW + 1800;
    let mut body = varq(start_at, 0.5);
    body["queue"] = json!("long");
    body["nodes"] = json!(2);
    let r = app.json("POST", "/v1/plans/varq", None, &body).await;
    assert_eq!(r.status, 200, "within the limit: {}", r.text());
    body["nodes"] = json!(3);
    let p = app
        .json("POST", "/v1/plans/varq", None, &body)
        .await
        .problem(422);
    // Refused before any planning, the limit named (issue 22).
    assert_eq!(p["type"], "urn:qbets:problem:exceeds-limits", "{p}");
    assert_eq!(
        p["detail"], "queue \"long\" gives a job at most 2 nodes (max_nodes); 3 asked for",
        "{p}"
    );
    assert_eq!(p["errors"][0]["field"], "nodes", "{p}");
    assert_eq!(p["best_probability"], Value::Null, "{p}");

    // Both queues have the same history; only `debug` can take 3 nodes.
    let co = json!({
        "reservations": [{"nodes": 3, "walltime": 300, "start_at": iso(start_at)},
                         {"nodes": 1, "walltime": 300, "start_at": iso(start_at)}],
        "candidates": [{"site": SITE, "queue": "long"}, {"site": SITE, "queue": "debug"}],
        "p_all": 0.9,
    });
    let r = app.json("POST", "/v1/plans/covarq", None, &co).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let plan = r.json();
    let queues = |i: usize| -> Vec<String> {
        plan["reservations"][i]["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["queue"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(queues(0), ["debug"], "{plan}");
    assert_eq!(
        queues(1),
        ["long"],
        "1 node fits the first candidate: {plan}"
    );
}

#[tokio::test]
async fn covarq_plans_boost_each_reservation_to_p_indep() {
    let (app, alice_admin) = app_with_history().await;
    let _ = alice_admin;
    let body = json!({
        "reservations": [
            {"nodes": 1, "walltime": 300, "start_at": iso(TEST_NOW + 3600)},
            {"nodes": 1, "walltime": "00:10:00", "start_at": iso(TEST_NOW + 7200)},
        ],
        "candidates": [{"site": SITE, "queue": "debug"}, {"site": SITE, "queue": "long"}],
        "p_all": 0.999,
    });
    let r = app.json("POST", "/v1/plans/covarq", None, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let plan = r.json();
    let p_indep = plan["p_indep"].as_f64().unwrap();
    assert!((p_indep - 0.999f64.sqrt()).abs() < 1e-12);
    let mut product = 1.0;
    for (i, res) in plan["reservations"].as_array().unwrap().iter().enumerate() {
        assert_eq!(res["index"], i);
        let reqs = res["requests"].as_array().unwrap();
        let ps: Vec<f64> = reqs
            .iter()
            .map(|q| q["probability"].as_f64().unwrap())
            .collect();
        let p_i = res["probability"].as_f64().unwrap();
        assert!((p_i - (1.0 - ps.iter().map(|p| 1.0 - p).product::<f64>())).abs() < 1e-12);
        assert!(p_i >= p_indep, "{res}");
        assert!(ps.windows(2).all(|w| w[0] >= w[1]), "most likely first");
        // Stops as soon as P_indep is reached: without the last request it was not.
        let without_last = 1.0 - ps[..ps.len() - 1].iter().map(|p| 1.0 - p).product::<f64>();
        assert!(ps.len() == 1 || without_last < p_indep);
        product *= p_i;
    }
    assert!((plan["p_expected"].as_f64().unwrap() - product).abs() < 1e-12);

    // Asking more than every candidate together gives: 422 naming the reservation.
    let mut greedy = body.clone();
    greedy["p_all"] = json!(0.999_999_999);
    let p = app
        .json("POST", "/v1/plans/covarq", None, &greedy)
        .await
        .problem(422);
    assert_eq!(p["reservation"], 0);
    assert!(p["best_probability"].as_f64().unwrap() < 0.999_999_999);
    let mut bad = body.clone();
    bad["reservations"][1]["nodes"] = json!(0);
    bad["candidates"] = json!([]);
    app.json("POST", "/v1/plans/covarq", None, &bad)
        .await
        .invalid(&["candidates", "reservations[1].nodes"]);

    // One queue twice is not two independent chances (equation 6.1): refused.
    let mut twice = body.clone();
    twice["candidates"] = json!([
        {"site": SITE, "queue": "debug"}, {"site": SITE, "queue": "long"},
        {"site": SITE, "queue": "debug"}
    ]);
    app.json("POST", "/v1/plans/covarq", None, &twice)
        .await
        .invalid(&["candidates[2]"]);

    // A start no candidate can reach in time is the request's fault, named, not a 422.
    let mut past = body.clone();
    past["reservations"][1]["start_at"] = json!(iso(TEST_NOW - 60));
    app.json("POST", "/v1/plans/covarq", None, &past)
        .await
        .invalid(&["reservations[1].start_at"]);

    // So many candidate submission times that the plan would run for minutes: refused
    // by its step before any is computed.
    let mut huge = body.clone();
    huge["reservations"] = json!(
        (0..64)
            .map(|_| json!({"nodes": 1, "walltime": 300, "start_at": iso(TEST_NOW + 99_000)}))
            .collect::<Vec<_>>()
    );
    huge["step"] = json!(1);
    let p = app
        .json("POST", "/v1/plans/covarq", None, &huge)
        .await
        .invalid(&["step"]);
    assert!(p.to_string().contains("12672000"), "{p}");

    // The request's own fields are named once, however many reservations it lists.
    let mut unsure = body.clone();
    unsure["confidence"] = json!(2);
    unsure["step"] = json!("bogus");
    app.json("POST", "/v1/plans/covarq", None, &unsure)
        .await
        .invalid(&["confidence", "step"]);
}

#[tokio::test]
async fn coallocations_make_one_managed_reservation_per_request() {
    let (app, _) = app_with_history().await;
    let alice = app.token("alice", Scope::Reserve).await;
    let bob = app.token("bob", Scope::Reserve).await;
    let body = json!({
        "reservations": [{"nodes": 1, "walltime": 300, "start_at": iso(TEST_NOW + 3600),
                          "command": "hostname"}],
        "candidates": [{"site": SITE, "queue": "debug"}, {"site": SITE, "queue": "long"}],
        "p_all": 0.999,
    });
    let plan = app
        .json("POST", "/v1/plans/covarq", None, &body)
        .await
        .json();
    let planned = plan["reservations"][0]["requests"]
        .as_array()
        .unwrap()
        .clone();
    let r = app
        .json("POST", "/v1/coallocations", Some(&alice), &body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let made = r.json();
    assert_eq!(made["p_expected"], plan["p_expected"]);
    let requests = made["requests"].as_array().unwrap();
    assert_eq!(requests.len(), planned.len());
    for (got, want) in requests.iter().zip(&planned) {
        assert_eq!(got["state"], "planned");
        assert_eq!(got["owner"], "alice");
        assert_eq!(got["coallocation_index"], 0);
        assert_eq!(got["queue"], want["queue"]);
        assert_eq!(got["plan"]["submit_at"], want["submit_at"]);
        assert_eq!(got["mode"], "max_probability");
    }
    let uri = format!("/v1/coallocations/{}", made["id"].as_str().unwrap());
    assert_eq!(app.get(&uri, Some(&alice)).await.json(), made);
    app.get(&uri, Some(&bob)).await.problem(404);
    let mut bad = body.clone();
    bad["reservations"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    app.json("POST", "/v1/coallocations", Some(&alice), &bad)
        .await
        .invalid(&["reservations[0].command"]);
}

/// Moves every `start_at` in a request to `at`.
fn move_start_at(v: &mut Value, at: i64) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "start_at" {
                    *x = json!(iso(at));
                } else {
                    move_start_at(x, at);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| move_start_at(x, at)),
        _ => {}
    }
}

/// The request examples of the OpenAPI document are requests the API takes, so a
/// portal developer who copies one (changing only its times, which are fixed in the
/// document) gets an answer, not a field error.
#[tokio::test]
async fn the_openapi_request_examples_are_taken() {
    let (app, admin) = app_with_history().await;
    let alice = app.token("alice", Scope::Reserve).await;
    let doc: Value = serde_json::from_str(qbets::http::openapi_json()).unwrap();
    let mut taken = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (verb, op) in item.as_object().unwrap() {
            let Some(name) = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
            else {
                continue;
            };
            let Some(example) = doc["components"]["schemas"][name].get("example") else {
                continue;
            };
            let mut body = example.clone();
            move_start_at(&mut body, TEST_NOW + 3600);
            // The one path parameter among them: a new site's name.
            let uri = path.replace("{site}", "campus");
            let token = if verb == "put" { &admin } else { &alice };
            let r = app
                .json(&verb.to_uppercase(), &uri, Some(token), &body)
                .await;
            assert!(
                r.status == 200 || r.status == 201,
                "{verb} {path} with the example of {name}: {} {}",
                r.status,
                r.text()
            );
            if name == "BoundsIn" {
                for result in r.json()["results"].as_array().unwrap() {
                    assert_eq!(result["bound"]["status"], "ok", "{result}");
                }
            }
            taken.push(format!("{verb} {path}"));
        }
    }
    taken.sort();
    assert_eq!(
        taken,
        [
            "post /v1/advice",
            "post /v1/bounds",
            "post /v1/coallocations",
            "post /v1/plans/covarq",
            "post /v1/plans/varq",
            "post /v1/reservations",
            "put /v1/sites/{site}"
        ]
    );
}

/// `POST /v1/reservations` with this Idempotency-Key.
async fn post_keyed(app: &TestApp, token: &str, key: &str, body: &Value) -> TestResponse {
    post_keyed_to(app, "/v1/reservations", token, key, body).await
}

/// `POST uri` with this Idempotency-Key.
async fn post_keyed_to(
    app: &TestApp,
    uri: &str,
    token: &str,
    key: &str,
    body: &Value,
) -> TestResponse {
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", key),
    ];
    app.with_headers("POST", uri, Some(token), &headers, body.to_string())
        .await
}

/// Two POSTs to `uri` with one new key at once: one makes it (201), the other gets it
/// (200); both name the same id.
async fn post_keyed_twice_at_once(app: &TestApp, uri: &str, token: &str, key: &str, body: &Value) {
    let (a, b) = tokio::join!(
        post_keyed_to(app, uri, token, key, body),
        post_keyed_to(app, uri, token, key, body)
    );
    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 201], "{} / {}", a.text(), b.text());
    assert_eq!(a.json()["id"], b.json()["id"]);
}

/// A 409 for a key reused with other parameters names what the key made.
fn assert_names_made(p: &Value, made: &Value) {
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains(made["id"].as_str().unwrap()),
        "{p}"
    );
}

/// The ids of the token's reservations, newest first.
async fn reservation_ids(app: &TestApp, token: &str) -> Vec<String> {
    let list = app.get("/v1/reservations", Some(token)).await.json();
    list["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// A retried POST with an Idempotency-Key gets the reservation its key made, never a
/// second one: sequentially, concurrently, per token; other parameters under the same
/// key are a conflict, and a malformed key is a 400 naming the header.
async fn idempotency_story(db: TestDb) {
    let (app, _) = app_with_history_on(db).await;
    let alice = app.token("alice", Scope::Reserve).await;
    let bob = app.token("bob", Scope::Reserve).await;
    let mut body = varq(TEST_NOW + 3600, 0.9);
    body["command"] = json!("hostname");
    let first = post_keyed(&app, &alice, "job-42", &body).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let made = first.json();
    let (body_42, made_42) = (body.clone(), made.clone());
    // The retry (same key, same request) answers 200 with that reservation.
    let again = post_keyed(&app, &alice, "job-42", &body).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.json()["id"], made["id"]);
    assert_eq!(again.json()["plan"], made["plan"]);
    // The same key as a structured-field string is the same key.
    let quoted = post_keyed(&app, &alice, "\"job-42\"", &body).await;
    assert_eq!(quoted.json()["id"], made["id"], "{}", quoted.text());
    assert_eq!(
        reservation_ids(&app, &alice).await,
        [made["id"].as_str().unwrap()]
    );

    // Another request under a used key: a conflict naming the reservation it made.
    let mut other = body.clone();
    other["nodes"] = json!(2);
    let p = post_keyed(&app, &alice, "job-42", &other)
        .await
        .problem(409);
    assert_names_made(&p, &made);
    // Keys are per token: Bob's "job-42" is his own.
    let bobs = post_keyed(&app, &bob, "job-42", &body).await;
    assert_eq!(bobs.status, 201, "{}", bobs.text());
    assert_ne!(bobs.json()["id"], made["id"]);

    // Two requests with one new key at once: one reservation, both answers name it.
    post_keyed_twice_at_once(&app, "/v1/reservations", &alice, "job-43", &body).await;
    assert_eq!(reservation_ids(&app, &alice).await.len(), 2);

    // Without a key every POST makes one; a malformed key makes none.
    assert_eq!(
        app.json("POST", "/v1/reservations", Some(&alice), &body)
            .await
            .status,
        201
    );
    // (`""` — no key between the quotes — is the two-character key it reads as, which
    // the document's pattern allows; issue 22.)
    for bad in ["", "a b", &"k".repeat(256)] {
        let p = post_keyed(&app, &alice, bad, &body).await.problem(400);
        assert_eq!(p["errors"][0]["field"], "Idempotency-Key", "{bad:?}: {p}");
    }
    assert_eq!(reservation_ids(&app, &alice).await.len(), 3);

    // Co-allocations the same way; the parameters are compared as read, so a walltime
    // written another way is the same request.
    let co = |walltime: Value, p_all: f64| {
        json!({
            "reservations": [{"nodes": 1, "walltime": walltime, "start_at": iso(TEST_NOW + 3600),
                              "command": "hostname"}],
            "candidates": [{"site": SITE, "queue": "debug"}, {"site": SITE, "queue": "long"}],
            "p_all": p_all,
        })
    };
    let uri = "/v1/coallocations";
    let first = post_keyed_to(&app, uri, &alice, "co-1", &co(json!(300), 0.99)).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let made = first.json();
    let before = reservation_ids(&app, &alice).await.len();
    let again = post_keyed_to(&app, uri, &alice, "co-1", &co(json!("00:05:00"), 0.99)).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.json()["id"], made["id"]);
    assert_eq!(again.json()["requests"], made["requests"]);
    let p = post_keyed_to(&app, uri, &alice, "co-1", &co(json!(300), 0.9))
        .await
        .problem(409);
    assert_names_made(&p, &made);
    post_keyed_twice_at_once(&app, uri, &alice, "co-2", &co(json!(300), 0.99)).await;
    let members = made["requests"].as_array().unwrap().len();
    assert_eq!(
        reservation_ids(&app, &alice).await.len(),
        before + members,
        "the retries made no members, the concurrent pair one set"
    );

    // A retry that arrives after start_at still gets its reservation: the key is looked
    // up before anything is planned.
    app.clock.set(TEST_NOW + 7200);
    let late = post_keyed(&app, &alice, "job-42", &body_42).await;
    assert_eq!(late.status, 200, "{}", late.text());
    assert_eq!(late.json()["id"], made_42["id"]);
}

#[tokio::test]
async fn idempotency_keys_make_one_reservation_on_sqlite() {
    idempotency_story(TestDb::sqlite()).await;
}

#[tokio::test]
async fn idempotency_keys_make_one_reservation_on_postgres() {
    // Runs when the suite has a PostgreSQL (scripts/test sets TEST_DATABASE_URL).
    let Some(url) = postgres_url() else {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL half of this story did not run");
        return;
    };
    idempotency_story(TestDb::postgres(&url).await).await;
}

#[tokio::test]
async fn a_cancel_the_scheduler_cannot_carry_out_says_so_and_can_be_repeated() {
    // The site's submit target is a port nothing listens on: Slurm is unreachable.
    let mut site = local_site();
    if let Some(qbets::submit::SubmitConfig::SlurmRest(s)) = &mut site.submit {
        s.url = "http://127.0.0.1:9".into();
    }
    let (app, _) = app_with_history_at(TestDb::fresh().await, site).await;
    let alice = app.token("alice", Scope::Reserve).await;
    let mut body = varq(TEST_NOW + 3600, 0.9);
    body["command"] = json!("hostname");
    let r = app
        .json("POST", "/v1/reservations", Some(&alice), &body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let uid = r.json()["id"].as_str().unwrap().to_string();
    let uri = format!("/v1/reservations/{uid}");
    // An executor set out to submit it (and died before recording a job): Slurm may
    // hold one. (A reservation never set out to be submitted has no remote job to look
    // for: `smaller::a_reservation_never_submitted_leaves_no_clean_up_to_retry`.)
    struct Attempted(String);
    impl qbets::store::StoreTask for Attempted {
        type Output = ();
        async fn run<S: qbets::store::Store>(self, store: S) {
            let r = store.reservation(&self.0).await.unwrap().unwrap();
            store.mark_submit_attempt(r.id, TEST_NOW).await.unwrap();
        }
    }
    qbets::store::with_store(&app.config.database_url, Attempted(uid))
        .await
        .unwrap();
    // Cancelled here, but whether Slurm holds a job of it cannot be known: a 502 that
    // says so (not "the store is unreachable"), and the reservation is cancelled.
    for _ in 0..2 {
        let p = app
            .json("DELETE", &uri, Some(&alice), &json!({}))
            .await
            .problem(502);
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(
                "the reservation is cancelled, but its remote job could not be cancelled yet"
            ) && detail.ends_with("cancel again to retry"),
            "{p}"
        );
        let now = app.get(&uri, Some(&alice)).await.json();
        assert_eq!(now["state"], "cancelled", "{now}");
    }
}
