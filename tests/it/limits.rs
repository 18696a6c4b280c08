//! Issue 22, items 1 and 2: a job the queue cannot run gets no number. A queue's limits
//! (`max_nodes`, `max_walltime`, `total_nodes`) come from `PUT /v1/sites/{site}`,
//! `[[sites.queues]]`, slurmrestd's partitions or an SWF header, are stored (they
//! survive a restart), and a job beyond them answers `exceeds_limits` with the limit
//! named — in GET and POST bounds and deadlines — while a VARQ plan or a reservation
//! beyond them is refused with a 422 naming the limit before anything is submitted.
//! Run on SQLite and on PostgreSQL.

use serde_json::{Value, json};

use super::reservations::history;
use super::support::{TEST_NOW, TestApp, TestDb, postgres_url};
use qbets::config::QueueConfig;
use qbets::service::Predictors;
use qbets::service::ingest::{learn_limits, state_limits};
use qbets::sources::QueueLimitsSeen;
use qbets::store::{NewSite, Scope, SiteKind, Store, StoreTask, with_store};

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// A live site `hpc` whose queue `batch` gives a job at most 64 nodes and an hour, on
/// 128 nodes in all, with 300 jobs of history; `open` has no known limits.
async fn app_on(db: TestDb) -> (TestApp, String) {
    let app = TestApp::on(db).adjusted(|_| {}).await;
    let admin = app.token("admin", Scope::Admin).await;
    let r = app
        .json(
            "PUT",
            "/v1/sites/hpc",
            Some(&admin),
            &json!({"queues": [
                {"name": "batch", "max_nodes": 64, "max_walltime": "01:00:00", "total_nodes": 128},
                {"name": "open"}
            ]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for queue in ["batch", "open"] {
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
                "/v1/sites/hpc/jobs",
                Some(&admin),
                &json!({ "jobs": jobs }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    (app, admin)
}

fn assert_exceeds(v: &Value, limit: &str, value: i64) {
    assert_eq!(v["status"], "exceeds_limits", "{v}");
    assert_eq!(v["limit"]["name"], limit, "{v}");
    assert_eq!(v["limit"]["value"], value, "{v}");
    assert!(
        v["limit"]["detail"].as_str().unwrap().contains(limit),
        "{v}"
    );
    for number in ["bound_s", "bound", "probability", "cluster"] {
        assert!(v[number].is_null(), "no {number}: {v}");
    }
}

async fn story(mut app: TestApp, admin: String) {
    // Within the limits: a number.
    let ok = app
        .get(
            "/v1/sites/hpc/queues/batch/bound?nodes=1&walltime=600",
            None,
        )
        .await
        .json();
    assert_eq!(ok["status"], "ok", "{ok}");
    assert!(ok["bound_s"].is_u64(), "{ok}");
    assert!(ok.get("limit").is_none(), "{ok}");

    // Beyond them: no number, the limit named.
    for _ in 0..2 {
        let v = app
            .get(
                "/v1/sites/hpc/queues/batch/bound?nodes=100&walltime=600",
                None,
            )
            .await
            .json();
        assert_exceeds(&v, "max_nodes", 64);
        let v = app
            .get(
                "/v1/sites/hpc/queues/batch/bound?nodes=1&walltime=02:00:00",
                None,
            )
            .await
            .json();
        assert_exceeds(&v, "max_walltime", 3_600);
        let v = app
            .get(
                "/v1/sites/hpc/queues/batch/deadline?nodes=65&walltime=600&deadline=3600",
                None,
            )
            .await
            .json();
        assert_exceeds(&v, "max_nodes", 64);
        // The stored limits survive a restart (the predictors are rebuilt from the store).
        app.restart().await;
    }

    // POST /v1/bounds: per query.
    let out = app
        .json(
            "POST",
            "/v1/bounds",
            None,
            &json!({"queries": [
                {"site": "hpc", "queue": "batch", "nodes": 1, "walltime": 600},
                {"site": "hpc", "queue": "batch", "nodes": 100, "walltime": 600},
                {"site": "hpc", "queue": "open", "nodes": 100, "walltime": 600}
            ]}),
        )
        .await
        .json();
    let r = &out["results"];
    assert_eq!(r[0]["bound"]["status"], "ok", "{out}");
    assert_exceeds(&r[1]["bound"], "max_nodes", 64);
    assert_ne!(
        r[2]["bound"]["status"], "exceeds_limits",
        "no known limit: {out}"
    );

    // GET /v1/bounds: the queue is listed, after the numbers, without one.
    let all = app
        .get("/v1/bounds?nodes=100&walltime=600", None)
        .await
        .json();
    let b = all["bounds"].as_array().unwrap();
    assert_eq!(b.len(), 2, "{all}");
    assert_eq!(
        (&b[0]["queue"], &b[1]["queue"]),
        (&json!("open"), &json!("batch")),
        "{all}"
    );
    assert_exceeds(&b[1], "max_nodes", 64);

    // total_nodes, when tighter than max_nodes, is the one named.
    let r = app
        .json(
            "PUT",
            "/v1/sites/hpc",
            Some(&admin),
            &json!({"queues": [{"name": "batch", "total_nodes": 32}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = app
        .get(
            "/v1/sites/hpc/queues/batch/bound?nodes=40&walltime=600",
            None,
        )
        .await
        .json();
    assert_exceeds(&v, "total_nodes", 32);
    let q = app.get("/v1/sites/hpc/queues", None).await.json();
    let batch = q["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "batch")
        .unwrap()
        .clone();
    assert_eq!(
        (&batch["max_nodes"], &batch["total_nodes"]),
        (&json!(64), &json!(32)),
        "{q}"
    );

    // A VARQ plan beyond the limits: 422 naming the limit (nothing is planned).
    let plan = |nodes: i64, walltime: &str| {
        json!({"site": "hpc", "queue": "batch", "nodes": nodes, "walltime": walltime,
               "start_at": iso(TEST_NOW + 7_200), "min_probability": 0.5})
    };
    let p = app
        .json("POST", "/v1/plans/varq", None, &plan(40, "00:05:00"))
        .await
        .problem(422);
    assert_eq!(p["type"], "urn:qbets:problem:exceeds-limits", "{p}");
    assert_eq!(p["errors"][0]["field"], "nodes", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("total_nodes"), "{p}");
    let p = app
        .json("POST", "/v1/plans/varq", None, &plan(1, "02:00:00"))
        .await
        .problem(422);
    assert_eq!(p["errors"][0]["field"], "walltime", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("max_walltime"),
        "{p}"
    );
    // A reservation likewise, before the site's submit target is even looked at (this
    // site has none: within the limits the refusal would be a 409).
    let reserve = app.token("alice", Scope::Reserve).await;
    let mut body = plan(40, "00:05:00");
    body["command"] = json!("true");
    let p = app
        .json("POST", "/v1/reservations", Some(&reserve), &body)
        .await
        .problem(422);
    assert_eq!(p["type"], "urn:qbets:problem:exceeds-limits", "{p}");
    let mut body = plan(1, "00:05:00");
    body["command"] = json!("true");
    app.json("POST", "/v1/reservations", Some(&reserve), &body)
        .await
        .problem(409);
    let list = app.get("/v1/reservations", Some(&reserve)).await.json();
    assert_eq!(
        list["reservations"].as_array().map(Vec::len),
        Some(0),
        "{list}"
    );
}

#[tokio::test]
async fn jobs_beyond_a_queues_limits_get_no_number_on_sqlite() {
    let (app, admin) = app_on(TestDb::sqlite()).await;
    story(app, admin).await;
}

#[tokio::test]
async fn jobs_beyond_a_queues_limits_get_no_number_on_postgres() {
    let Some(url) = postgres_url() else {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL half of this story did not run");
        return;
    };
    let (app, admin) = app_on(TestDb::postgres(&url).await).await;
    story(app, admin).await;
}

/// Limits stated in `[[sites.queues]]` win over those a source learns; the rest are
/// learnt, stored, and given to the predictors.
struct LearnStory;

impl StoreTask for LearnStory {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let site = store
            .upsert_site(&NewSite {
                name: "cluster".into(),
                kind: SiteKind::Live,
                description: String::new(),
                time_zone: None,
            })
            .await
            .unwrap();
        let predictors = Predictors::new();
        let stated = vec![QueueConfig {
            name: "debug".into(),
            max_nodes: Some(4),
            max_walltime_s: None,
            total_nodes: None,
        }];
        state_limits(&store, &predictors, &site, &stated)
            .await
            .unwrap();
        let seen = [
            QueueLimitsSeen {
                queue: "debug".into(),
                max_nodes: Some(Some(16)),
                max_walltime_s: Some(Some(3_600)),
                total_nodes: Some(Some(32)),
            },
            QueueLimitsSeen {
                queue: "long".into(),
                max_nodes: Some(None),
                max_walltime_s: Some(Some(86_400)),
                total_nodes: Some(Some(32)),
            },
        ];
        learn_limits(&store, &predictors, &site, &seen, &stated)
            .await
            .unwrap();
        let debug = store.queue(site.id, "debug").await.unwrap().unwrap();
        assert_eq!(
            (debug.max_nodes, debug.max_walltime_s, debug.total_nodes),
            (Some(4), Some(3_600), Some(32)),
            "the stated max_nodes wins; the rest is learnt"
        );
        let long = store.queue(site.id, "long").await.unwrap().unwrap();
        assert_eq!(
            (long.max_nodes, long.max_walltime_s, long.total_nodes),
            (None, Some(86_400), Some(32)),
            "a partition not yet seen in a record becomes a queue"
        );
        let l = predictors.limits("cluster", "debug").unwrap();
        let shape = |nodes, walltime_s| qbets::engine::JobShape { nodes, walltime_s };
        assert_eq!(
            l.exceeded(shape(5, 60)).unwrap().limit.as_str(),
            "max_nodes"
        );
        assert!(l.admits(shape(4, 3_600)));
        assert_eq!(
            l.exceeded(shape(1, 3_601)).unwrap().limit.as_str(),
            "max_walltime"
        );

        // The partitions are read again: debug's time limit was lifted (Slurm now says
        // unlimited) and long lost its machine size. What was learnt goes; what the
        // configuration states stays.
        let lifted = [
            QueueLimitsSeen {
                queue: "debug".into(),
                max_nodes: Some(None),
                max_walltime_s: Some(None),
                total_nodes: Some(Some(32)),
            },
            QueueLimitsSeen {
                queue: "long".into(),
                max_nodes: Some(None),
                max_walltime_s: Some(Some(86_400)),
                total_nodes: Some(None),
            },
        ];
        learn_limits(&store, &predictors, &site, &lifted, &stated)
            .await
            .unwrap();
        let debug = store.queue(site.id, "debug").await.unwrap().unwrap();
        assert_eq!(
            (debug.max_nodes, debug.max_walltime_s, debug.total_nodes),
            (Some(4), None, Some(32)),
            "a lifted limit is cleared; the stated one stays"
        );
        let long = store.queue(site.id, "long").await.unwrap().unwrap();
        assert_eq!(
            (long.max_nodes, long.max_walltime_s, long.total_nodes),
            (None, Some(86_400), None)
        );
        // A read that does not carry a field leaves what was learnt.
        let silent = [QueueLimitsSeen {
            queue: "long".into(),
            max_nodes: None,
            max_walltime_s: None,
            total_nodes: Some(Some(64)),
        }];
        learn_limits(&store, &predictors, &site, &silent, &stated)
            .await
            .unwrap();
        let long = store.queue(site.id, "long").await.unwrap().unwrap();
        assert_eq!(
            (long.max_nodes, long.max_walltime_s, long.total_nodes),
            (None, Some(86_400), Some(64))
        );
        let l = predictors.limits("cluster", "debug").unwrap();
        assert!(l.admits(shape(4, 100_000)), "the predictors follow");
        assert_eq!(
            l.exceeded(shape(5, 60)).unwrap().limit.as_str(),
            "max_nodes"
        );
    }
}

#[tokio::test]
async fn stated_limits_win_over_learnt_ones_on_sqlite() {
    let db = TestDb::sqlite();
    with_store(db.url(), LearnStory).await.unwrap();
}

#[tokio::test]
async fn stated_limits_win_over_learnt_ones_on_postgres() {
    let Some(url) = postgres_url() else {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL half of this story did not run");
        return;
    };
    let db = TestDb::postgres(&url).await;
    with_store(db.url(), LearnStory).await.unwrap();
}

/// An SWF header's MaxProcs becomes each imported queue's `total_nodes`.
#[tokio::test]
async fn an_swf_headers_machine_size_limits_its_queues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sized.swf");
    let trace = super::http_api::TRACE.replace(
        "; Queue: 1 express",
        "; MaxProcs: 16\n; MaxNodes: 4\n; Queue: 1 express",
    );
    std::fs::write(&path, trace).unwrap();
    let mut app = TestApp::new().await;
    let summary = app.import("sized", &path).await;
    assert!(
        summary.notes.iter().any(|n| n.contains("16 processors")),
        "{:?}",
        summary.notes
    );
    app.restart().await;
    let q = app.get("/v1/sites/sized/queues", None).await.json();
    for queue in q["queues"].as_array().unwrap() {
        assert_eq!(queue["total_nodes"], 16, "{q}");
    }
    let v = app
        .get(
            "/v1/sites/sized/queues/express/bound?nodes=17&walltime=600",
            None,
        )
        .await
        .json();
    assert_exceeds(&v, "total_nodes", 16);
}
