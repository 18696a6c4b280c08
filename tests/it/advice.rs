//! `POST /v1/advice` ("which shape waits less") through the in-process application, on
//! a live site the test feeds: the ranking is the individual `GET …/bound` answers plus
//! the walltime; a shape a queue cannot run is unranked with `exceeds_limits`; a
//! moldable job's walltimes are the speedup model's; the deadline's probability is the
//! `GET …/deadline` answer at the deadline less the walltime; bad input is a problem
//! naming the field. Runs on SQLite, or PostgreSQL with `TEST_DATABASE_URL`.

use qbets::sim::mold::{Speedup, runtime_at};
use qbets::store::Scope;
use serde_json::{Value, json};

use crate::support::{TEST_NOW, TestApp};

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// A live site "hpc" with queue "batch" (at most 128 nodes) fed 240 jobs whose waits
/// grow with their nodes, and a queue "empty" without history.
pub async fn advice_app() -> TestApp {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let res = app
        .json(
            "PUT",
            "/v1/sites/hpc",
            Some(&admin),
            &json!({"queues": [{"name": "batch", "max_nodes": 128}, {"name": "empty"}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let jobs: Vec<Value> = (0..240i64)
        .map(|k| {
            let nodes = [1i64, 2, 4, 64, 128][(k % 5) as usize];
            let submit = TEST_NOW - 240_000 + 900 * k;
            let wait = (k * 53) % 600 + 10 * nodes;
            json!({"job_id": format!("j{k}"), "queue": "batch", "submit": iso(submit),
                   "start": iso(submit + wait), "nodes": nodes, "walltime": 3600,
                   "state": "running"})
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/sites/hpc/jobs",
            Some(&admin),
            &json!({"jobs": jobs}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    app
}

async fn advise(app: &TestApp, body: &Value) -> Value {
    let res = app.json("POST", "/v1/advice", None, body).await;
    assert_eq!(res.status, 200, "{}", res.text());
    res.json()
}

async fn bound(app: &TestApp, queue: &str, nodes: i64, walltime: i64) -> Value {
    let res = app
        .get(
            &format!("/v1/sites/hpc/queues/{queue}/bound?nodes={nodes}&walltime={walltime}"),
            None,
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    res.json()
}

#[tokio::test]
async fn shapes_rank_by_the_bound_plus_the_walltime() {
    let app = advice_app().await;
    let shapes = [
        (1i64, 7200i64),
        (4, 1800),
        (64, 600),
        (128, 300),
        (256, 300),
    ];
    let body = json!({
        "site": "hpc",
        "candidates": shapes.iter().map(|(n, w)| json!({"nodes": n, "walltime": w}))
            .collect::<Vec<_>>(),
    });
    let out = advise(&app, &body).await;
    let rows = out["rows"].as_array().unwrap();
    // Every shape on both queues of the site.
    assert_eq!(rows.len(), shapes.len() * 2, "{out}");
    assert_eq!(out["quantile"], 0.95);

    let mut ranked = Vec::new();
    let mut seen_unranked = false;
    for r in rows {
        let (queue, nodes, w) = (
            r["queue"].as_str().unwrap(),
            r["nodes"].as_i64().unwrap(),
            r["walltime_s"].as_i64().unwrap(),
        );
        let single = bound(&app, queue, nodes, w).await;
        assert_eq!(r["status"], single["status"], "{r}");
        assert_eq!(r["bound_s"], single["bound_s"], "{r}");
        assert_eq!(r["history_size"], single["history_size"], "{r}");
        match single["bound_s"].as_u64() {
            Some(b) => {
                assert!(
                    !seen_unranked,
                    "a row with a number after one without: {out}"
                );
                assert_eq!(r["finish_s"].as_u64(), Some(b + w as u64), "{r}");
                ranked.push((b + w as u64, nodes, r["rank"].as_u64().unwrap()));
            }
            None => {
                seen_unranked = true;
                assert!(r["rank"].is_null() && r["finish_s"].is_null(), "{r}");
                assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
            }
        }
    }
    // Best first: finish ascending, ties by fewer nodes, ranks 1, 2, ….
    assert!(ranked.len() >= 3, "{out}");
    for (i, pair) in ranked.windows(2).enumerate() {
        assert!((pair[0].0, pair[0].1) <= (pair[1].0, pair[1].1), "{out}");
        assert_eq!(pair[0].2, i as u64 + 1);
    }
    assert_eq!(out["ranked"].as_u64(), Some(ranked.len() as u64));

    // 256 nodes exceed batch's 128: there, unranked, with the limit named.
    let over = rows
        .iter()
        .find(|r| r["queue"] == "batch" && r["nodes"] == 256)
        .unwrap();
    assert_eq!(over["status"], "exceeds_limits", "{over}");
    assert!(
        over["rank"].is_null() && over["bound_s"].is_null(),
        "{over}"
    );
    assert_eq!(over["limit"]["name"], "max_nodes", "{over}");
    // The queue without history has no number for any shape.
    for r in rows.iter().filter(|r| r["queue"] == "empty") {
        assert_eq!(r["status"], "insufficient_history", "{r}");
    }
}

#[tokio::test]
async fn a_moldable_job_gets_the_speedup_models_walltimes() {
    let app = advice_app().await;
    let body = json!({
        "site": "hpc", "queue": "batch",
        "moldable": {"speedup": {"model": "downey", "a": 32.0, "sigma": 1.0},
                     "runtime": "02:00:00", "at": 16, "nodes": {"min": 1, "max": 64}},
    });
    let out = advise(&app, &body).await;
    let rows = out["rows"].as_array().unwrap();
    let mut nodes: Vec<i64> = rows.iter().map(|r| r["nodes"].as_i64().unwrap()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, vec![1, 2, 4, 8, 16, 32, 64], "{out}");
    let speedup = Speedup::Downey {
        a: 32.0,
        sigma: 1.0,
    };
    for r in rows {
        let n = r["nodes"].as_f64().unwrap();
        let want = runtime_at(speedup, 16.0, 7200.0, n).round().max(1.0) as i64;
        assert_eq!(r["walltime_s"].as_i64(), Some(want), "{r}");
        assert_eq!(r["queue"], "batch");
        // Each the same answer as asked alone.
        let single = bound(&app, "batch", n as i64, want).await;
        assert_eq!(r["bound_s"], single["bound_s"], "{r}");
    }
    assert_eq!(rows[0]["rank"], 1, "{out}");

    // The simple model too; a bad Downey curve is refused by the simulator's check.
    let simple = json!({"site": "hpc", "queue": "batch", "moldable": {
        "speedup": {"model": "simple"}, "runtime": 3600, "at": 8, "nodes": {"min": 4, "max": 16}}});
    let out = advise(&app, &simple).await;
    for r in out["rows"].as_array().unwrap() {
        let n = r["nodes"].as_f64().unwrap();
        let want = runtime_at(Speedup::Simple, 8.0, 3600.0, n).round().max(1.0) as i64;
        assert_eq!(r["walltime_s"].as_i64(), Some(want), "{r}");
    }
    let bad = json!({"moldable": {"speedup": {"model": "downey", "a": 0.5, "sigma": 1.0},
        "runtime": 3600, "at": 8, "nodes": {"min": 4, "max": 16}}});
    let res = app.json("POST", "/v1/advice", None, &bad).await;
    res.invalid(&["moldable.speedup"]);
}

#[tokio::test]
async fn the_deadline_probability_is_the_deadline_endpoints() {
    let app = advice_app().await;
    let body = json!({
        "site": "hpc", "queue": "batch", "deadline": "04:00:00",
        "candidates": [{"nodes": 1, "walltime": 3600}, {"nodes": 4, "walltime": "00:30:00"},
                       {"nodes": 2, "walltime": "05:00:00"}],
    });
    let out = advise(&app, &body).await;
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        let (n, w) = (
            r["nodes"].as_i64().unwrap(),
            r["walltime_s"].as_i64().unwrap(),
        );
        let d = &r["deadline"];
        if w >= 14_400 {
            // Five hours of walltime cannot finish within four.
            assert_eq!(d["status"], "too_late", "{r}");
            assert!(d["probability"].is_null(), "{r}");
            continue;
        }
        let single = app
            .get(
                &format!(
                    "/v1/sites/hpc/queues/batch/deadline?nodes={n}&walltime={w}&deadline={}",
                    14_400 - w
                ),
                None,
            )
            .await
            .json();
        assert_eq!(d["probability"], single["probability"], "{r} vs {single}");
        assert!(d["probability"].as_f64().is_some(), "{r}");
        assert_eq!(d["start_by"], iso(TEST_NOW + 14_400 - w));
    }
    // The same deadline as a time.
    let at = json!({"site": "hpc", "queue": "batch", "deadline": iso(TEST_NOW + 14_400),
                    "candidates": [{"nodes": 4, "walltime": 1800}]});
    let out2 = advise(&app, &at).await;
    let by_time = &out2["rows"][0]["deadline"];
    let by_span = rows.iter().find(|r| r["nodes"] == 4).unwrap();
    assert_eq!(by_time, &by_span["deadline"]);
}

#[tokio::test]
async fn bad_input_is_a_problem_naming_the_field() {
    let app = advice_app().await;
    let post = |body: Value| {
        let app = &app;
        async move { app.json("POST", "/v1/advice", None, &body).await }
    };
    let ok = json!({"nodes": 1, "walltime": 60});
    post(json!({"candidates": [ok, ok, ok, {"nodes": 0, "walltime": 60}]}))
        .await
        .invalid(&["candidates[3].nodes"]);
    post(json!({"candidates": [ok, {"nodes": 1, "walltime": "soon"}]}))
        .await
        .invalid(&["candidates[1].walltime"]);
    let p = post(json!({"candidates": [ok, {"nodes": "many", "walltime": 60}]}))
        .await
        .problem(400);
    assert_eq!(p["errors"][0]["field"], "candidates[1].nodes", "{p}");
    post(json!({"candidates": [ok], "quantile": 1.5, "deadline": "whenever"}))
        .await
        .invalid(&["quantile", "deadline"]);
    post(json!({})).await.invalid(&["candidates"]);
    post(json!({"candidates": []}))
        .await
        .invalid(&["candidates"]);
    let m = json!({"speedup": {"model": "simple"}, "runtime": 60, "at": 100,
                   "nodes": {"min": 1, "max": 64}});
    post(json!({"moldable": m})).await.invalid(&["moldable.at"]);
    post(json!({"candidates": [ok], "moldable": m}))
        .await
        .invalid(&["moldable"]);
    let many: Vec<Value> = (0..65).map(|_| ok.clone()).collect();
    let p = post(json!({"candidates": many})).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "candidates", "{p}");
    // Sixty-four is still fine.
    let res = post(json!({"site": "hpc", "queue": "batch", "candidates": &many[..64]})).await;
    assert_eq!(res.status, 200, "{}", res.text());
    // An unknown site or queue is a 404, as for GET …/bound.
    post(json!({"site": "nowhere", "candidates": [ok]}))
        .await
        .problem(404);
    post(json!({"site": "hpc", "queue": "nowhere", "candidates": [ok]}))
        .await
        .problem(404);
    // A queue no site has, asked of every site: a 404 too, not an empty answer.
    post(json!({"queue": "nowhere", "candidates": [ok]}))
        .await
        .problem(404);

    // Candidates times queues is what costs: past 1,000 pairs (64 shapes on 16 queues),
    // refused before anything is computed.
    let admin = app.token("ops-many", Scope::Admin).await;
    let queues: Vec<Value> = (0..16)
        .map(|i| json!({"name": format!("q{i:02}")}))
        .collect();
    let res = app
        .json(
            "PUT",
            "/v1/sites/wide",
            Some(&admin),
            &json!({ "queues": queues }),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let p = post(json!({"site": "wide", "candidates": &many[..64]}))
        .await
        .problem(422);
    assert_eq!(p["errors"][0]["field"], "candidates", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("1024"), "{p}");
    let res = post(json!({"site": "wide", "candidates": &many[..62]})).await;
    assert_eq!(res.status, 200, "992 pairs are fine: {}", res.text());
}
