//! The prediction endpoints through the in-process application: `…/bound`,
//! `…/deadline`, `…/clusters`, the extended `…/queues` and `…/waits`, and
//! `/v1/bounds` (GET and POST). A live site fed through the ingest endpoint answers as
//! the engine does for the same jobs; an imported archive answers as of its last
//! record; bad parameters are 400s naming the field.

use std::collections::HashMap;

use qbets::engine::replay::{ReplayOptions, replay};
use qbets::engine::{Config, JobRecord, JobShape, QueuePredictor};
use qbets::store::Scope;
use serde_json::{Value, json};

use crate::support::{TEST_NOW, TestApp};

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// 240 jobs over ~2.5 days, all started before `TEST_NOW`, waits growing with the
/// nodes asked for (too few for re-clustering: one cluster).
fn history() -> Vec<(String, JobRecord)> {
    (0..240i64)
        .map(|k| {
            let nodes = [1u64, 2, 4, 64, 128][(k % 5) as usize];
            let submit = TEST_NOW - 240_000 + 900 * k;
            let wait = (k * 53) % 600 + 10 * nodes as i64;
            (
                format!("j{k}"),
                JobRecord {
                    submit,
                    start: Some(submit + wait),
                    shape: JobShape {
                        nodes,
                        walltime_s: 3600,
                    },
                    user: None,
                },
            )
        })
        .collect()
}

/// A live site "hpc" with queue "batch" (at most 128 nodes) fed [`history`].
async fn live_app() -> (TestApp, Vec<(String, JobRecord)>) {
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
    let jobs = history();
    let body = json!({"jobs": jobs.iter().map(|(id, j)| json!({
        "job_id": id, "queue": "batch", "submit": iso(j.submit),
        "start": iso(j.start.unwrap()), "nodes": j.shape.nodes,
        "walltime": j.shape.walltime_s, "state": "running",
    })).collect::<Vec<_>>()});
    let res = app
        .json("POST", "/v1/sites/hpc/jobs", Some(&admin), &body)
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    (app, jobs)
}

#[tokio::test]
async fn a_live_queue_answers_as_the_engine_does() {
    let (app, jobs) = live_app().await;
    let records: Vec<JobRecord> = jobs.iter().map(|(_, j)| *j).collect();
    let engine = QueuePredictor::from_jobs(Config::default(), &records).unwrap();

    for (nodes, walltime) in [(1, "01:00:00"), (4, "3600"), (128, "1-00:00:00")] {
        let shape = JobShape {
            nodes,
            walltime_s: qbets::http::params::walltime(walltime).unwrap() as u64,
        };
        let b = app
            .get(
                &format!("/v1/sites/hpc/queues/batch/bound?nodes={nodes}&walltime={walltime}"),
                None,
            )
            .await;
        assert_eq!(b.status, 200, "{}", b.text());
        let b = b.json();
        let want = engine.bound(TEST_NOW, shape, 0.95, 0.95);
        assert_eq!(b["status"], want.status.name());
        assert_eq!(b["bound_s"].as_u64(), want.bound_s);
        assert!(want.bound_s.is_some(), "{want:?}");
        assert_eq!(b["history_size"].as_u64(), Some(want.history as u64));
        assert_eq!(b["as_of"], iso(TEST_NOW), "a live site speaks for now");
        assert_eq!(b["quantile"], 0.95);
        assert_eq!(
            b["cluster"]["primary"]["lo"].as_u64(),
            Some(want.cluster.unwrap().primary.lo)
        );

        // The deadline at the bound is met with at least the quantile's probability.
        let d = app
            .get(
                &format!(
                    "/v1/sites/hpc/queues/batch/deadline?nodes={nodes}&walltime={walltime}&deadline={}",
                    want.bound_s.unwrap()
                ),
                None,
            )
            .await
            .json();
        let p = engine
            .probability(TEST_NOW, shape, want.bound_s.unwrap(), 0.95)
            .probability;
        assert_eq!(d["probability"].as_f64(), p);
        assert!(p.unwrap() > 0.9, "{d}");
        // The same deadline given as a time.
        let at = TEST_NOW + want.bound_s.unwrap() as i64;
        let d2 = app
            .get(
                &format!(
                    "/v1/sites/hpc/queues/batch/deadline?nodes={nodes}&walltime={walltime}&deadline={}",
                    iso(at)
                ),
                None,
            )
            .await
            .json();
        assert_eq!(d2["probability"], d["probability"]);
        assert_eq!(d2["deadline"], iso(at));
    }
    // A tighter quantile gives a smaller (or equal) bound.
    let b50 = app
        .get(
            "/v1/sites/hpc/queues/batch/bound?nodes=1&walltime=3600&quantile=0.5&confidence=0.9",
            None,
        )
        .await
        .json();
    let b95 = app
        .get(
            "/v1/sites/hpc/queues/batch/bound?nodes=1&walltime=3600",
            None,
        )
        .await
        .json();
    assert!(b50["bound_s"].as_u64().unwrap() <= b95["bound_s"].as_u64().unwrap());
    // A misspelt parameter is named, not ignored (the answer would be for q = 0.95).
    let p = app
        .get(
            "/v1/sites/hpc/queues/batch/bound?nodes=1&walltime=3600&quantil=0.5",
            None,
        )
        .await
        .problem(400);
    assert_eq!(p["errors"][0]["field"], "quantil", "{p}");
    assert_eq!(
        b50["bound_s"].as_u64(),
        engine
            .bound(
                TEST_NOW,
                JobShape {
                    nodes: 1,
                    walltime_s: 3600
                },
                0.5,
                0.9
            )
            .bound_s
    );

    // Clusters, and the queue list, say what the engine says.
    let c = app
        .get("/v1/sites/hpc/queues/batch/clusters", None)
        .await
        .json();
    let want = engine.clusters(TEST_NOW);
    assert_eq!(c["clusters"].as_array().unwrap().len(), want.len());
    assert!(!want.is_empty());
    for (got, w) in c["clusters"].as_array().unwrap().iter().zip(&want) {
        assert_eq!(got["history_size"].as_u64(), Some(w.n as u64));
        assert_eq!(got["bound_95_s"].as_u64(), w.bound_95_s);
        assert_eq!(got["range"]["primary"]["attribute"], "nodes");
    }
    let q = app.get("/v1/sites/hpc/queues", None).await.json();
    let batch = q["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "batch")
        .unwrap();
    assert_eq!(batch["state"], "up");
    assert_eq!(batch["since"], Value::Null);
    assert_eq!(batch["history_size"], 240);
    assert_eq!(batch["clusters"].as_array().unwrap().len(), want.len());
    // A queue with no jobs answers, without a number.
    let e = app
        .get("/v1/sites/hpc/queues/empty/bound?nodes=1&walltime=60", None)
        .await
        .json();
    assert_eq!(e["status"], "insufficient_history");
    assert_eq!(e["bound_s"], Value::Null);

    // Each job's wait comes with the bound predicted at its submission: the replay's.
    let r = replay(&records, &ReplayOptions::default(), &mut |_| {}).unwrap();
    let w = app
        .get(
            &format!(
                "/v1/sites/hpc/queues/batch/waits?since={}&limit=1000",
                iso(TEST_NOW - 300_000)
            ),
            None,
        )
        .await
        .json();
    let by_id: HashMap<&str, &Value> = w["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["job_id"].as_str().unwrap(), j))
        .collect();
    assert_eq!(by_id.len(), jobs.len());
    let mut numbers = 0;
    for (k, (id, _)) in jobs.iter().enumerate() {
        let want = r.predictions[0][k];
        assert_eq!(by_id[id.as_str()]["bound_s"].as_u64(), want.bound_s, "{id}");
        assert_eq!(by_id[id.as_str()]["bound_status"], want.status.name());
        numbers += usize::from(want.bound_s.is_some());
    }
    assert!(numbers > 100, "{numbers}");

    // A window starting after the site's present (the default end) is empty by
    // construction: answered so, with the window it was.
    let empty = app
        .get(
            &format!(
                "/v1/sites/hpc/queues/batch/waits?since={}",
                iso(TEST_NOW + 3600)
            ),
            None,
        )
        .await;
    assert_eq!(empty.status, 200, "{}", empty.text());
    let v = empty.json();
    assert_eq!(v["jobs"], serde_json::json!([]), "{v}");
    assert_eq!(v["until"], iso(TEST_NOW + 1), "{v}");
}

#[tokio::test]
async fn bounds_for_many_queues_at_once() {
    let (mut app, _) = live_app().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.swf");
    std::fs::write(&path, crate::http_api::TRACE).unwrap();
    app.import("test", &path).await;
    app.restart().await;

    // Every queue, best first: numbers first, smallest first; then the others.
    let all = app.get("/v1/bounds?nodes=4&walltime=1:00:00", None).await;
    assert_eq!(all.status, 200, "{}", all.text());
    let all = all.json();
    let rows = all["bounds"].as_array().unwrap();
    let names: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["site"].as_str().unwrap(),
                r["queue"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(names[0], "hpc/batch", "{all}");
    assert!(names[1..].is_sorted(), "{names:?}");
    for n in ["hpc/empty", "test/express", "test/normal"] {
        assert!(names.contains(&n.to_string()), "{names:?}");
    }
    assert_eq!(rows[0]["status"], "ok");
    assert!(rows[1..].iter().all(|r| r["bound_s"].is_null()));
    // The archive speaks for its last record, the live site for now.
    assert_eq!(rows[0]["as_of"], iso(TEST_NOW));
    let archive = rows.iter().find(|r| r["site"] == "test").unwrap();
    assert_eq!(archive["as_of"], iso(946_684_800 + 120));
    // A job beyond a queue's node limit gets no number there (issue 22): the queue is
    // listed with the limit named, after every queue with a number.
    let big = app
        .get("/v1/bounds?nodes=129&walltime=60", None)
        .await
        .json();
    let batch = big["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["queue"] == "batch")
        .unwrap_or_else(|| panic!("{big}"));
    assert_eq!(batch["status"], "exceeds_limits", "{big}");
    assert_eq!(batch["limit"]["name"], "max_nodes", "{big}");
    assert!(batch["bound_s"].is_null(), "{big}");

    // Many queries in one call; each gets its answer or its own problem.
    let res = app
        .json(
            "POST",
            "/v1/bounds",
            None,
            &json!({"queries": [
                {"site": "hpc", "queue": "batch", "nodes": 4, "walltime": "01:00:00"},
                {"site": "hpc", "queue": "batch", "nodes": 0, "walltime": 60, "quantile": 1.5},
                {"site": "nope", "queue": "batch", "nodes": 1, "walltime": 60},
                {"site": "test", "queue": "express", "nodes": 1, "walltime": 60, "confidence": 0.5},
            ]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let out = res.json();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["bound"]["bound_s"], rows[0]["bound_s"]);
    assert_eq!(results[0]["bound"]["status"], "ok");
    let fields: Vec<&str> = results[1]["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["queries[1].nodes", "queries[1].quantile"]);
    assert_eq!(results[1]["error"]["status"], 400);
    assert_eq!(results[2]["error"]["status"], 404);
    assert_eq!(results[3]["bound"]["confidence"], 0.5);
    assert_eq!(results[3]["bound"]["as_of"], iso(946_684_800 + 120));

    // A query that is not one (a field missing, a string for a number, an unknown
    // field, not an object) is that query's problem too; the others are answered.
    let out = app
        .json(
            "POST",
            "/v1/bounds",
            None,
            &json!({"queries": [
                {"site": "hpc"},
                {"site": "hpc", "queue": "batch", "nodes": "4", "walltime": 60},
                {"site": "hpc", "queue": "batch", "nodes": 4, "walltime": 60, "partition": "x"},
                7,
                {"site": "hpc", "queue": "batch", "nodes": 4, "walltime": "01:00:00"},
            ]}),
        )
        .await
        .json();
    let faults: Vec<Value> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["error"]["errors"][0]["field"].clone())
        .collect();
    assert_eq!(
        faults,
        [
            json!("queries[0].queue"),
            json!("queries[1].nodes"),
            json!("queries[2].partition"),
            json!("queries[3]"),
            Value::Null
        ],
        "{out}"
    );
    assert_eq!(out["results"][4]["bound"]["bound_s"], rows[0]["bound_s"]);

    // Too many queries, or a body of the wrong shape, is the whole call's problem.
    let many: Vec<Value> = (0..1001)
        .map(|_| json!({"site": "hpc", "queue": "batch", "nodes": 1, "walltime": 60}))
        .collect();
    app.json("POST", "/v1/bounds", None, &json!({ "queries": many }))
        .await
        .invalid(&["queries"]);
    app.json(
        "POST",
        "/v1/bounds",
        None,
        &json!({"queries": {"site": "hpc"}}),
    )
    .await
    .problem(400);
}

/// The `(site/queue, bound_s)` of a `GET /v1/bounds` answer's rows.
fn listed(v: &Value) -> Vec<(String, Option<u64>)> {
    v["bounds"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["site"].as_str().unwrap(),
                    r["queue"].as_str().unwrap()
                ),
                r["bound_s"].as_u64(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_bounds_list_filters_and_limits() {
    let (mut app, _) = live_app().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.swf");
    std::fs::write(&path, crate::http_api::TRACE).unwrap();
    app.import("test", &path).await;
    app.restart().await;
    let q = "/v1/bounds?nodes=4&walltime=3600";
    let all = app.get(q, None).await.json();
    let all_rows = listed(&all);
    assert_eq!(all_rows.len(), 5, "{all}");
    assert_eq!(all["truncated"], false, "{all}");

    // One site's queues, in the same order as in the whole list.
    let test = app.get(&format!("{q}&site=test"), None).await.json();
    let want: Vec<_> = all_rows
        .iter()
        .filter(|(n, _)| n.starts_with("test/"))
        .cloned()
        .collect();
    assert_eq!(listed(&test), want, "{test}");
    assert_eq!(want.len(), 3);
    // Queues of one name, and both filters at once.
    let batch = app.get(&format!("{q}&queue=batch"), None).await.json();
    assert_eq!(listed(&batch), all_rows[..1].to_vec(), "{batch}");
    let none = app
        .get(&format!("{q}&site=test&queue=batch"), None)
        .await
        .json();
    assert_eq!(listed(&none), vec![], "{none}");
    assert_eq!(
        listed(&app.get(&format!("{q}&site=nope"), None).await.json()),
        vec![]
    );

    // The best `limit`, saying whether more were left off.
    let best = app.get(&format!("{q}&limit=1"), None).await.json();
    assert_eq!(listed(&best), all_rows[..1].to_vec(), "{best}");
    assert_eq!(best["truncated"], true, "{best}");
    let whole = app.get(&format!("{q}&limit=5"), None).await.json();
    assert_eq!(listed(&whole), all_rows, "{whole}");
    assert_eq!(whole["truncated"], false, "{whole}");
}

#[tokio::test]
async fn a_listed_bound_follows_new_records_at_the_same_instant() {
    // The clock stands at TEST_NOW: answers asked again are the cached ones, until the
    // queue's predictor is handed more records.
    let (app, jobs) = live_app().await;
    let admin = app.token("more", Scope::Admin).await;
    let q = "/v1/bounds?nodes=1&walltime=3600&site=hpc&queue=batch";
    let shape = JobShape {
        nodes: 1,
        walltime_s: 3600,
    };
    let mut records: Vec<JobRecord> = jobs.iter().map(|(_, j)| *j).collect();
    let engine = QueuePredictor::from_jobs(Config::default(), &records).unwrap();
    let before = engine.bound(TEST_NOW, shape, 0.95, 0.95).bound_s;
    assert!(before.is_some());
    for _ in 0..2 {
        let v = app.get(q, None).await.json();
        assert_eq!(listed(&v), vec![("hpc/batch".to_string(), before)], "{v}");
    }

    // 100 more jobs of the same cluster, each having waited over two hours.
    let more: Vec<(String, JobRecord)> = (0..100i64)
        .map(|k| {
            let submit = TEST_NOW - 24_000 + 100 * k;
            (
                format!("late{k}"),
                JobRecord {
                    submit,
                    start: Some(submit + 8_000 + k),
                    shape,
                    user: None,
                },
            )
        })
        .collect();
    let body = json!({"jobs": more.iter().map(|(id, j)| json!({
        "job_id": id, "queue": "batch", "submit": iso(j.submit),
        "start": iso(j.start.unwrap()), "nodes": 1, "walltime": 3600, "state": "running",
    })).collect::<Vec<_>>()});
    let res = app
        .json("POST", "/v1/sites/hpc/jobs", Some(&admin), &body)
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    records.extend(more.iter().map(|(_, j)| *j));
    let engine = QueuePredictor::from_jobs(Config::default(), &records).unwrap();
    let after = engine.bound(TEST_NOW, shape, 0.95, 0.95).bound_s;
    assert_ne!(after, before, "the new waits must move the bound");
    let v = app.get(q, None).await.json();
    assert_eq!(listed(&v), vec![("hpc/batch".to_string(), after)], "{v}");
    // The one queue's own answer agrees.
    let one = app
        .get(
            "/v1/sites/hpc/queues/batch/bound?nodes=1&walltime=3600",
            None,
        )
        .await
        .json();
    assert_eq!(one["bound_s"].as_u64(), after, "{one}");
}

#[tokio::test]
async fn bad_prediction_parameters_are_400s_naming_the_field() {
    let (app, _) = live_app().await;
    let base = "/v1/sites/hpc/queues/batch";
    for (query, fields) in [
        ("bound?nodes=0&walltime=60", vec!["nodes"]),
        ("bound?walltime=60", vec!["nodes"]),
        ("bound?nodes=1", vec!["walltime"]),
        ("bound?nodes=1&walltime=1h", vec!["walltime"]),
        ("bound?nodes=1&walltime=60&quantile=1", vec!["quantile"]),
        ("bound?nodes=1&walltime=60&confidence=0", vec!["confidence"]),
        (
            "bound?nodes=-1&walltime=0&quantile=x",
            vec!["nodes", "walltime", "quantile"],
        ),
        ("deadline?nodes=1&walltime=60", vec!["deadline"]),
        (
            "deadline?nodes=1&walltime=60&deadline=soon",
            vec!["deadline"],
        ),
        (
            "deadline?nodes=1&walltime=60&deadline=2024-05-01T11:00:00Z",
            vec!["deadline"],
        ),
        (
            "deadline?nodes=1&walltime=60&deadline=60&confidence=2",
            vec!["confidence"],
        ),
    ] {
        let res = app.get(&format!("{base}/{query}"), None).await;
        res.invalid(&fields);
    }
    let past = app
        .get(
            &format!(
                "{base}/deadline?nodes=1&walltime=60&deadline={}",
                iso(TEST_NOW)
            ),
            None,
        )
        .await
        .invalid(&["deadline"]);
    assert!(
        past["detail"].as_str().unwrap().contains("speaks for"),
        "{past}"
    );
    app.get("/v1/bounds?nodes=1", None)
        .await
        .invalid(&["walltime"]);
    for bad in ["0", "10001", "-1", "all"] {
        app.get(&format!("/v1/bounds?nodes=1&walltime=60&limit={bad}"), None)
            .await
            .invalid(&["limit"]);
    }
    for uri in [
        "/v1/sites/nope/queues/batch/bound?nodes=1&walltime=60",
        "/v1/sites/hpc/queues/nope/bound?nodes=1&walltime=60",
        "/v1/sites/hpc/queues/nope/deadline?nodes=1&walltime=60&deadline=60",
        "/v1/sites/hpc/queues/nope/clusters",
    ] {
        app.get(uri, None).await.problem(404);
    }
}
