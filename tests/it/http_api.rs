//! The HTTP API in-process against a fresh database: archive sites from an imported
//! trace, waits windows, live ingest, problem+json errors, authentication, body limit,
//! and the operations endpoints.

use serde_json::json;

use crate::support::{TEST_NOW, TestApp};
use qbets::store::Scope;

/// 2000-01-01T00:00:00Z.
const T0: i64 = 946_684_800;

/// A small trace: two named queues, one unnamed, a job that never started, a
/// malformed line, a job number used twice.
pub(crate) const TRACE: &str = "\
; Version: 2.2
; Computer: Test Cluster
; Installation: Unit Test Centre
; UnixStartTime: 946684800
; TimeZoneString: Europe/Paris
; Queue: 1 express
; Queue: 2 normal
1 0 10 100 4 -1 -1 4 3600 -1 1 1 1 -1 1 -1 -1 -1
2 5 0 50 2 -1 -1 2 1800 -1 1 1 1 -1 1 -1 -1 -1
3 20 100 60 8 -1 -1 8 90000 -1 1 1 1 -1 2 -1 -1 -1
4 30 -1 -1 1 -1 -1 1 600 -1 5 1 1 -1 2 -1 -1 -1
5 40 x 10 1 -1 -1 1 60 -1 1 1 1 -1 1 -1 -1 -1
6 50 3 10 1 -1 -1 1 60 -1 1 1 1 -1 1 -1 -1 -1
7 55 1 10 1 -1 -1 1 60 -1 1 1 1 -1 3 -1 -1 -1
2 60 0 5 1 -1 -1 1 60 -1 1 1 1 -1 1 -1 -1 -1
";

fn write_trace(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("test.swf");
    std::fs::write(&path, TRACE).unwrap();
    path
}

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

#[tokio::test]
async fn an_imported_trace_reads_back_as_an_archive_site() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    let s = app.import("test", &write_trace(&dir)).await;
    assert_eq!((s.records, s.inserted, s.rejected), (7, 6, 2));
    assert_eq!(
        s.sample_rejects,
        vec![
            (
                12,
                "field 3 (wait time): \"x\" is not an integer".to_string()
            ),
            (15, "job number 2 already appears at line 9".to_string()),
        ]
    );

    let res = app.get("/v1/sites", None).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let sites = res.json();
    let site = &sites["sites"][0];
    assert_eq!(site["name"], "test");
    assert_eq!(site["kind"], "archive");
    assert_eq!(site["description"], "Unit Test Centre (Test Cluster)");
    assert_eq!(site["time_zone"], "Europe/Paris");
    assert_eq!(site["jobs"], 6);
    assert_eq!(site["queues"], 3);
    // An archive speaks for its last record (job 3's start), not for today.
    assert_eq!(site["as_of"], iso(T0 + 120));

    let queues = app.get("/v1/sites/test/queues", None).await.json();
    assert_eq!(queues["as_of"], iso(T0 + 120));
    let by_name: Vec<(String, i64, i64)> = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["name"].as_str().unwrap().to_string(),
                q["jobs"].as_i64().unwrap(),
                q["history_size"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_name,
        vec![
            ("3".to_string(), 1, 1),
            ("express".to_string(), 3, 3),
            ("normal".to_string(), 2, 1),
        ]
    );
    assert_eq!(queues["queues"][1]["last_release"], iso(T0 + 53));

    // Default window: the day before as_of. By start time; bound null until predicted.
    let waits = app
        .get("/v1/sites/test/queues/express/waits", None)
        .await
        .json();
    let jobs = waits["jobs"].as_array().unwrap();
    let ids: Vec<&str> = jobs.iter().map(|j| j["job_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["2", "1", "6"]);
    assert_eq!(jobs[1]["wait_s"], 10);
    assert_eq!(jobs[1]["submit"], iso(T0));
    assert_eq!(jobs[1]["start"], iso(T0 + 10));
    assert_eq!(jobs[1]["walltime_s"], 3600);
    assert_eq!(jobs[1]["walltime"], "01:00:00");
    assert_eq!(jobs[1]["nodes"], 4);
    assert!(jobs[1]["bound_s"].is_null());
    assert_eq!(waits["truncated"], false);

    let normal = app
        .get("/v1/sites/test/queues/normal/waits", None)
        .await
        .json();
    assert_eq!(normal["jobs"][0]["walltime"], "1-01:00:00");
    assert_eq!(
        normal["jobs"].as_array().unwrap().len(),
        1,
        "job 4 never started"
    );

    // An explicit window [since, until) and a limit.
    let uri = format!(
        "/v1/sites/test/queues/express/waits?since={}&until={}&limit=1",
        iso(T0 + 5),
        iso(T0 + 53)
    );
    let w = app.get(&uri, None).await.json();
    assert_eq!(w["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(w["jobs"][0]["job_id"], "2");
    assert_eq!(w["truncated"], true);
    let uri = format!(
        "/v1/sites/test/queues/express/waits?since={}&until={}",
        iso(T0 + 6),
        iso(T0 + 53)
    );
    let w = app.get(&uri, None).await.json();
    let ids: Vec<&str> = w["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1"], "since inclusive, until exclusive");
}

#[tokio::test]
async fn importing_twice_through_the_cli_changes_nothing() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = write_trace(&dir);
    let first = app.import("test", &path).await;
    let before = app.get("/v1/sites/test/queues", None).await.json();
    let second = app.import("test", &path).await;
    assert_eq!(second.records, first.records);
    assert_eq!(second.inserted, 0);
    assert_eq!(second.rejects_new, 0, "the rejected lines are kept once");
    assert_eq!(second.rejected, 2);
    assert_eq!(second.already_stored, first.inserted);
    let after = app.get("/v1/sites/test/queues", None).await.json();
    assert_eq!(before, after);

    // Another machine's trace into the same site would mix the two (and take its job
    // numbers for the first's): refused, naming both; a file with no job is refused
    // before any site is made.
    let other = dir.path().join("other.swf");
    std::fs::write(
        &other,
        TRACE
            .replace("Unit Test Centre", "Elsewhere")
            .replace("Europe/Paris", "UTC"),
    )
    .unwrap();
    let e = qbets::cli::import::import_file(&app.config, "test", &other)
        .await
        .unwrap_err();
    assert_eq!(
        format!("{e:#}"),
        "site \"test\" holds another trace (Unit Test Centre (Test Cluster), Europe/Paris); \
         this one is Elsewhere (Test Cluster), UTC: import it under another --site"
    );
    app.import("other", &other).await;
    let empty = dir.path().join("empty.swf");
    std::fs::write(&empty, "; Version: 2.2\nnot a job\n").unwrap();
    let e = qbets::cli::import::import_file(&app.config, "empty", &empty)
        .await
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("no job lines in the trace (1 line kept aside"),
        "{e:#}"
    );
    let sites = app.get("/v1/sites", None).await.json();
    let names: Vec<&str> = sites["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["other", "test"]);
}

#[tokio::test]
async fn bad_parameters_are_400s_naming_the_parameter() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    app.import("test", &write_trace(&dir)).await;
    let base = "/v1/sites/test/queues/express/waits";
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("limit=10001", "limit"),
        ("since=yesterday", "since"),
        ("until=2000-01-01", "until"),
        (
            "since=2000-01-01T00:00:00Z&since=2000-01-02T00:00:00Z",
            "since",
        ),
    ] {
        let res = app.get(&format!("{base}?{query}"), None).await;
        let p = res.invalid(&[field]);
        assert!(
            p["detail"].as_str().unwrap().starts_with(field),
            "{query}: {p}"
        );
    }
    // Every bad parameter at once.
    let res = app.get(&format!("{base}?limit=0&since=x"), None).await;
    res.invalid(&["since", "limit"]);
    // `since == until` is the empty window, not a mistake (issue 22), and so is one that
    // ends before it begins, or one that begins after the site's present: no job
    // started in them, which is what the answer says (the document's formats allow
    // them, and JSON Schema cannot order two parameters).
    for window in [
        "since=2000-01-01T00:00:00Z&until=2000-01-01T00:00:00Z",
        "since=2000-01-02T00:00:00Z&until=2000-01-01T00:00:00Z",
        "since=2999-01-01T00:00:00Z",
    ] {
        let empty = app.get(&format!("{base}?{window}"), None).await;
        assert_eq!(empty.status, 200, "{window}: {}", empty.text());
        let v = empty.json();
        assert_eq!(v["jobs"], serde_json::json!([]), "{window}: {v}");
        assert_eq!(v["truncated"], false, "{window}: {v}");
    }
}

#[tokio::test]
async fn unknown_sites_queues_and_routes_are_404s() {
    let app = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    app.import("test", &write_trace(&dir)).await;
    let p = app.get("/v1/sites/nope/queues", None).await.problem(404);
    assert!(p["detail"].as_str().unwrap().contains("\"nope\""), "{p}");
    let p = app
        .get("/v1/sites/test/queues/nope/waits", None)
        .await
        .problem(404);
    assert!(
        p["detail"].as_str().unwrap().contains("no queue named"),
        "{p}"
    );
    app.get("/v1/nothing", None).await.problem(404);
    app.raw("DELETE", "/v1/sites", None, "text/plain", String::new())
        .await
        .problem(405);
}

#[tokio::test]
async fn reads_can_require_tokens_and_writes_need_the_right_scope() {
    let app = TestApp::with_config(|c| c.http.public_reads = false).await;
    let read = app.token("reader", Scope::Read).await;
    let ingest = app.token("sensor", Scope::Ingest).await;
    let admin = app.token("ops", Scope::Admin).await;

    let res = app.get("/v1/sites", None).await;
    res.problem(401);
    assert_eq!(res.headers["www-authenticate"], "Bearer realm=\"qbets\"");
    assert_eq!(app.get("/v1/sites", Some(&read)).await.status, 200);
    assert_eq!(app.get("/v1/sites", Some(&ingest)).await.status, 200);
    // A token that is not ours, malformed or not, is refused, never ignored.
    let forged = format!("qbets_{}", "0".repeat(64));
    app.get("/v1/sites", Some(&forged)).await.problem(401);
    app.get("/v1/sites", Some("garbage")).await.problem(401);
    // Probes and scrapers need no token.
    assert_eq!(app.get("/healthz", None).await.status, 200);

    let site = json!({"description": "a live cluster", "queues": [{"name": "batch", "max_walltime": "2-00:00:00", "max_nodes": 64}]});
    app.json("PUT", "/v1/sites/live1", None, &site)
        .await
        .problem(401);
    let p = app
        .json("PUT", "/v1/sites/live1", Some(&ingest), &site)
        .await
        .problem(403);
    assert!(p["detail"].as_str().unwrap().contains("admin"), "{p}");
    let res = app
        .json("PUT", "/v1/sites/live1", Some(&admin), &site)
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let q = &res.json()["queues"][0];
    assert_eq!(
        (q["max_walltime_s"].as_i64(), q["max_nodes"].as_i64()),
        (Some(172_800), Some(64))
    );
    assert_eq!(q["max_walltime"], "2-00:00:00");
    // A second PUT updates what it gives and keeps what it leaves out.
    let described = async || {
        let sites = app.get("/v1/sites", Some(&read)).await.json();
        let s = sites["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "live1")
            .unwrap()
            .clone();
        (s["description"].clone(), s["time_zone"].clone())
    };
    assert_eq!(described().await, (json!("a live cluster"), json!(null)));
    let again = json!({"description": "the new cluster", "time_zone": "Europe/Paris"});
    for body in [again, json!({})] {
        assert_eq!(
            app.json("PUT", "/v1/sites/live1", Some(&admin), &body)
                .await
                .status,
            200
        );
        assert_eq!(
            described().await,
            (json!("the new cluster"), json!("Europe/Paris"))
        );
    }

    let jobs = json!({"jobs": [{"job_id": "1", "queue": "batch", "submit": iso(TEST_NOW - 60), "state": "pending"}]});
    app.json("POST", "/v1/sites/live1/jobs", Some(&read), &jobs)
        .await
        .problem(403);
    let res = app
        .json("POST", "/v1/sites/live1/jobs", Some(&ingest), &jobs)
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let res = app
        .json("POST", "/v1/sites/live1/jobs", Some(&admin), &jobs)
        .await;
    assert_eq!(
        res.json()["changed"],
        0,
        "admin implies ingest; same news twice"
    );
}

#[tokio::test]
async fn a_job_that_starts_in_another_queue_leaves_the_one_it_waited_in() {
    // Slurm names the first of a pending job's partitions, and the one it runs in once
    // it runs: the job waited in `debug`, and its wait is `long`'s.
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    app.json(
        "PUT",
        "/v1/sites/live1",
        Some(&admin),
        &json!({"queues": [{"name": "debug"}, {"name": "long"}]}),
    )
    .await;
    let submit = TEST_NOW - 600;
    let push = |queue: &str, start: Option<i64>, state: &str| {
        json!({"jobs": [{"job_id": "7", "queue": queue, "submit": iso(submit),
                         "start": start.map(iso), "nodes": 1, "walltime": 600, "state": state}]})
    };
    let queue = |queues: &serde_json::Value, name: &str| {
        queues["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .cloned()
            .unwrap()
    };
    app.json(
        "POST",
        "/v1/sites/live1/jobs",
        Some(&admin),
        &push("debug", None, "pending"),
    )
    .await;
    let queues = app.get("/v1/sites/live1/queues", None).await.json();
    assert_eq!(queue(&queues, "debug")["pending"], 1, "{queues}");
    let out = app
        .json(
            "POST",
            "/v1/sites/live1/jobs",
            Some(&admin),
            &push("long", Some(submit + 300), "running"),
        )
        .await
        .json();
    assert_eq!(out["changed"], 1, "{out}");
    let queues = app.get("/v1/sites/live1/queues", None).await.json();
    assert_eq!(queue(&queues, "debug")["pending"], 0, "{queues}");
    assert_eq!(queue(&queues, "long")["history_size"], 1, "{queues}");
}

#[tokio::test]
async fn live_ingest_updates_jobs_and_answers_as_of_now() {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let res = app
        .json(
            "PUT",
            "/v1/sites/live1",
            Some(&admin),
            &json!({"queues": [{"name": "batch"}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let submit = TEST_NOW - 600;
    let pending = json!({"jobs": [
        {"job_id": "10", "queue": "batch", "submit": iso(submit), "nodes": 2, "walltime": "30:00", "state": "pending"},
        {"job_id": "11", "queue": "debug", "submit": iso(submit), "nodes": 1, "walltime": 600, "state": "pending"},
    ]});
    let out = app
        .json("POST", "/v1/sites/live1/jobs", Some(&admin), &pending)
        .await
        .json();
    assert_eq!(
        (out["received"].as_i64(), out["changed"].as_i64()),
        (Some(2), Some(2))
    );
    let started = json!({"jobs": [
        {"job_id": "10", "queue": "batch", "submit": iso(submit), "start": iso(submit + 240), "nodes": 2, "walltime": "30:00", "state": "running"},
        {"job_id": "11", "queue": "debug", "submit": iso(submit), "nodes": 1, "walltime": 600, "state": "pending"},
    ]});
    let out = app
        .json("POST", "/v1/sites/live1/jobs", Some(&admin), &started)
        .await
        .json();
    assert_eq!(out["changed"], 1, "only job 10 has news");

    let w = app
        .get("/v1/sites/live1/queues/batch/waits", None)
        .await
        .json();
    assert_eq!(w["as_of"], iso(TEST_NOW), "a live site speaks for now");
    assert_eq!(w["jobs"][0]["wait_s"], 240);
    assert_eq!(w["jobs"][0]["walltime_s"], 1800);
    assert_eq!(w["jobs"][0]["state"], "running");
    app.clock.set(TEST_NOW + 3_600);
    let q = app.get("/v1/sites/live1/queues", None).await.json();
    assert_eq!(
        q["as_of"],
        iso(TEST_NOW + 3_600),
        "the injected clock moves as_of"
    );
    let queues = app.get("/v1/sites/live1/queues", None).await.json();
    let names: Vec<&str> = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["batch", "debug"],
        "queues are created as records name them"
    );

    // A bad record is kept aside with every bad field named; the good ones are stored.
    let bad = json!({"jobs": [
        {"job_id": "12", "queue": "batch", "submit": iso(submit), "state": "pending"},
        {"job_id": "13", "queue": "batch", "submit": iso(submit), "start": iso(submit - 1), "walltime": "soon", "nodes": 0, "state": "running"},
    ]});
    let out = app
        .json("POST", "/v1/sites/live1/jobs", Some(&admin), &bad)
        .await
        .json();
    assert_eq!(
        (out["changed"].as_i64(), out["rejected"].as_i64()),
        (Some(1), Some(1)),
        "{out}"
    );
    let mut fields: Vec<&str> = out["rejects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["record"], 1);
            r["field"].as_str().unwrap()
        })
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        ["jobs[1].nodes", "jobs[1].start", "jobs[1].walltime"]
    );
    let w = app
        .get("/v1/sites/live1/queues/batch/waits", None)
        .await
        .json();
    assert_eq!(w["jobs"].as_array().unwrap().len(), 1);
    let q = app.get("/v1/sites/live1/queues", None).await.json();
    assert_eq!(
        q["queues"][0]["jobs"], 2,
        "job 12 was written, job 13 was not"
    );
    let rejects = app.get("/v1/sites/live1/rejects", None).await.json();
    assert_eq!(rejects["rejects"].as_array().unwrap().len(), 1, "{rejects}");
    assert!(
        rejects["rejects"][0]["raw"]
            .as_str()
            .unwrap()
            .contains("\"13\""),
        "{rejects}"
    );

    // A record serde cannot read is kept aside too, with serde's reason and the field
    // at fault: a value of the wrong type, an unknown state, a missing or unknown field.
    let ok = json!({"job_id": "20", "queue": "batch", "submit": iso(submit), "state": "pending"});
    let with = |key: &str, value: serde_json::Value| {
        let mut r = ok.clone();
        r[key] = value;
        r
    };
    let mut missing = ok.clone();
    missing.as_object_mut().unwrap().remove("state");
    let out = app
        .json(
            "POST",
            "/v1/sites/live1/jobs",
            Some(&admin),
            &json!({"jobs": [
                with("job_id", json!(5)),
                with("state", json!("done")),
                missing,
                with("partition", json!("batch")),
            ]}),
        )
        .await
        .json();
    assert_eq!(out["rejected"], 4, "{out}");
    let faults: Vec<(&str, &str)> = out["rejects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["field"].as_str().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(faults[0].0, "jobs[0].job_id", "{out}");
    assert!(
        faults[0].1.starts_with("invalid type: integer `5`"),
        "{out}"
    );
    assert_eq!(faults[1].0, "jobs[1].state", "{out}");
    assert!(faults[1].1.starts_with("unknown variant `done`"), "{out}");
    assert_eq!(faults[2], ("jobs[2].state", "is required"), "{out}");
    assert_eq!(faults[3].0, "jobs[3].partition", "{out}");
    assert!(
        faults[3].1.starts_with("unknown field `partition`"),
        "{out}"
    );
    // A record that ended before it was submitted (and never started) is named in the
    // answer like any other, not only counted.
    let mut ended_early = with("state", json!("cancelled"));
    ended_early["job_id"] = json!("21");
    ended_early["end"] = json!(iso(submit - 60));
    let out = app
        .json(
            "POST",
            "/v1/sites/live1/jobs",
            Some(&admin),
            &json!({"jobs": [ended_early]}),
        )
        .await
        .json();
    assert_eq!(
        (
            &out["rejected"],
            &out["rejects"][0]["field"],
            &out["rejects"][0]["reason"]
        ),
        (
            &json!(1),
            &json!("jobs[0].end"),
            &json!("must not be before submit")
        ),
        "{out}"
    );
    // Body errors: bad JSON, a wrong media type, an unknown site.
    app.raw(
        "POST",
        "/v1/sites/live1/jobs",
        Some(&admin),
        "application/json",
        "{".into(),
    )
    .await
    .problem(400);
    app.raw(
        "POST",
        "/v1/sites/live1/jobs",
        Some(&admin),
        "text/plain",
        "{}".into(),
    )
    .await
    .problem(415);
    // `jobs` twice: a map would keep the second list and lose the first's records.
    let p = app
        .raw(
            "POST",
            "/v1/sites/live1/jobs",
            Some(&admin),
            "application/json",
            r#"{"jobs": [{"job_id": "40", "queue": "batch", "submit": 1, "state": "pending"}], "jobs": []}"#.into(),
        )
        .await
        .invalid(&["jobs"]);
    assert!(p.to_string().contains("more than once"), "{p}");
    app.json("POST", "/v1/sites/nope/jobs", Some(&admin), &started)
        .await
        .problem(404);
    app.json("PUT", "/v1/sites/bad%20name", Some(&admin), &json!({}))
        .await
        .invalid(&["site"]);
}

#[tokio::test]
async fn archives_take_no_live_records() {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let dir = tempfile::tempdir().unwrap();
    app.import("test", &write_trace(&dir)).await;
    let jobs = json!({"jobs": [{"job_id": "99", "queue": "express", "submit": iso(T0), "state": "pending"}]});
    app.json("POST", "/v1/sites/test/jobs", Some(&admin), &jobs)
        .await
        .problem(409);
    let before = app.get("/v1/sites", None).await.json();
    app.json(
        "PUT",
        "/v1/sites/test",
        Some(&admin),
        &json!({"description": "not an archive", "time_zone": "UTC"}),
    )
    .await
    .problem(409);
    assert_eq!(
        app.get("/v1/sites", None).await.json(),
        before,
        "a refused PUT changes nothing"
    );
}

#[tokio::test]
async fn oversize_bodies_are_413() {
    let app = TestApp::with_config(|c| c.http.max_body_bytes = 1024).await;
    let admin = app.token("ops", Scope::Admin).await;
    app.json("PUT", "/v1/sites/live1", Some(&admin), &json!({}))
        .await;
    let many: Vec<_> = (0..100)
        .map(|i| json!({"job_id": i.to_string(), "queue": "q", "submit": iso(TEST_NOW), "state": "pending"}))
        .collect();
    app.json(
        "POST",
        "/v1/sites/live1/jobs",
        Some(&admin),
        &json!({"jobs": many}),
    )
    .await
    .problem(413);
}

#[tokio::test]
async fn operations_endpoints_answer() {
    let app = TestApp::new().await;
    assert_eq!(app.get("/healthz", None).await.json()["status"], "ok");
    let ready = app.get("/readyz", None).await.json();
    assert_eq!(ready["status"], "ready");
    let backend = if crate::support::postgres_url().is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(ready["backend"], backend);

    app.get("/v1/sites", None).await;
    app.get("/v1/sites/nope/queues", None).await;
    // A made-up method is counted as `other`: clients cannot grow the label set.
    for method in ["FOO1", "FOO2"] {
        let r = app
            .send(
                axum::http::Request::builder()
                    .method(method)
                    .uri("/healthz")
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, 405);
    }
    let metrics = app.get("/metrics", None).await;
    assert!(
        metrics.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = metrics.text();
    assert!(
        text.contains(
            r#"qbets_http_requests_total{method="GET",route="/v1/sites",status="200"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"route="/v1/sites/{site}/queues",status="404"} 1"#),
        "routes are templates, not raw paths: {text}"
    );
    assert!(
        text.contains(
            r#"qbets_http_requests_total{method="other",route="/healthz",status="405"} 2"#
        ),
        "{text}"
    );
    assert!(!text.contains("FOO1"), "{text}");

    let docs = app.get("/docs", None).await;
    assert_eq!(docs.status, 200);
    assert!(docs.text().contains("<rapi-doc spec-url=\"/openapi.json\""));
    let script = app.get("/docs/rapidoc-min.js", None).await;
    assert_eq!(script.status, 200);
    assert!(
        script.body.len() > 100_000,
        "the vendored RapiDoc is served"
    );
    let doc = app.get("/openapi.json", None).await.json();
    assert_eq!(doc["info"]["title"], "qbets");
}

#[tokio::test]
async fn cors_answers_only_configured_origins() {
    let app =
        TestApp::with_config(|c| c.http.cors_origins = vec!["https://portal.example".into()]).await;
    let preflight = |origin: &'static str| {
        axum::http::Request::builder()
            .method("OPTIONS")
            .uri("/v1/sites")
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let res = app.send(preflight("https://portal.example")).await;
    assert_eq!(
        res.headers["access-control-allow-origin"],
        "https://portal.example"
    );
    let res = app.send(preflight("https://evil.example")).await;
    assert!(res.headers.get("access-control-allow-origin").is_none());
    // A portal may send its token and an Idempotency-Key with a reservation.
    let res = app
        .send(
            axum::http::Request::builder()
                .method("OPTIONS")
                .uri("/v1/reservations")
                .header("origin", "https://portal.example")
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization,content-type,idempotency-key",
                )
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    let allowed = res.headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in ["authorization", "content-type", "idempotency-key"] {
        assert!(allowed.contains(h), "{allowed}");
    }

    let closed = TestApp::new().await;
    let res = closed.send(preflight("https://portal.example")).await;
    assert!(
        res.headers.get("access-control-allow-origin").is_none(),
        "no origins by default"
    );
}

#[tokio::test]
async fn text_a_backend_cannot_hold_is_a_client_error() {
    // PostgreSQL text cannot hold NUL; SQLite can. Either way: never a 5xx.
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let res = app.get("/v1/sites/a%00b/queues", None).await;
    assert!(
        res.status.is_client_error(),
        "{} {}",
        res.status,
        res.text()
    );
    res.problem(res.status.as_u16());
    let res = app
        .json(
            "PUT",
            "/v1/sites/live1",
            Some(&admin),
            &json!({"description": "nul\u{0}here"}),
        )
        .await;
    assert!(res.status.as_u16() < 500, "{} {}", res.status, res.text());
    let res = app
        .json("POST", "/v1/sites/live1/jobs", Some(&admin), &json!({"jobs": [{"job_id": "a\u{0}", "queue": "q", "submit": iso(TEST_NOW), "state": "pending"}]}))
        .await;
    assert!(res.status.as_u16() < 500, "{} {}", res.status, res.text());
}

#[tokio::test]
async fn bodies_must_be_json_objects() {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    // serde would read `[]` as a site with every field defaulted; the schema says object.
    let p = app
        .raw(
            "PUT",
            "/v1/sites/live1",
            Some(&admin),
            "application/json",
            " []".into(),
        )
        .await
        .problem(400);
    assert!(p["detail"].as_str().unwrap().contains("JSON object"), "{p}");
    // A push may be an array of records; each must be an object, and one that is not
    // is kept aside, not read as a record of field values.
    app.json(
        "PUT",
        "/v1/sites/live1",
        Some(&admin),
        &serde_json::json!({}),
    )
    .await;
    let res = app
        .raw(
            "POST",
            "/v1/sites/live1/jobs",
            Some(&admin),
            "application/json",
            "[[\"7\", \"batch\"]]".into(),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let out = res.json();
    assert_eq!(out["rejected"], 1);
    assert_eq!(
        (&out["rejects"][0]["field"], &out["rejects"][0]["reason"]),
        (&json!(null), &json!("a record must be a JSON object")),
        "{out}"
    );
    // Nested too: a queue written as an array of its field values.
    let p = app
        .json(
            "PUT",
            "/v1/sites/live1",
            Some(&admin),
            &json!({"queues": [["batch"]]}),
        )
        .await
        .problem(400);
    assert_eq!(p["errors"][0]["field"], "queues[0]", "{p}");
    // A required field left out is named where it is missing, at any depth.
    let p = app
        .json(
            "PUT",
            "/v1/sites/live1",
            Some(&admin),
            &json!({"queues": [{"name": "batch"}, {"max_nodes": 4}]}),
        )
        .await
        .problem(400);
    assert_eq!(
        p["errors"],
        json!([{"field": "queues[1].name", "detail": "is required"}]),
        "{p}"
    );
    let res = app
        .raw(
            "PUT",
            "/v1/sites/live1",
            Some(&admin),
            "application/problem+json; charset=utf-8",
            "{}".into(),
        )
        .await;
    assert_eq!(
        res.status,
        200,
        "+json media types are JSON: {}",
        res.text()
    );
}

/// A job's own answer, users and the state (issue 21): pushed records carry users; a
/// pending job's answer counts its own user's jobs ahead and bounds the rest of its
/// wait; no answer shows a user.
#[tokio::test]
async fn a_pending_jobs_answer_counts_its_own_jobs_ahead_and_names_nobody() {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let put = json!({"queues": [{"name": "batch"}]});
    let res = app.json("PUT", "/v1/sites/u1", Some(&admin), &put).await;
    assert_eq!(res.status, 200, "{}", res.text());
    // 200 finished jobs of ten users (waits 60–260 s), then an array of 30 tasks of
    // "alice" still pending, and one pending job of "bob".
    let t0 = TEST_NOW - 200 * 400 - 7_200;
    let mut jobs: Vec<serde_json::Value> = (0..200)
        .map(|k| {
            let submit = t0 + k * 400;
            let start = submit + 60 + (k * 37) % 200;
            json!({"job_id": format!("h{k}"), "queue": "batch", "submit": iso(submit),
                   "start": iso(start), "end": iso(start + 300), "nodes": 1,
                   "walltime": 3600, "state": "completed", "user": format!("user{}", k % 10)})
        })
        .collect();
    let array_at = TEST_NOW - 1_800;
    for k in 0..30 {
        jobs.push(
            json!({"job_id": format!("a{k}"), "queue": "batch", "submit": iso(array_at),
                         "nodes": 1, "walltime": 3600, "state": "pending", "user": "alice"}),
        );
    }
    jobs.push(
        json!({"job_id": "b1", "queue": "batch", "submit": iso(array_at + 60),
                     "nodes": 1, "walltime": 3600, "state": "pending", "user": "bob"}),
    );
    let out = app
        .json(
            "POST",
            "/v1/sites/u1/jobs",
            Some(&admin),
            &json!({"jobs": jobs}),
        )
        .await;
    assert_eq!(out.status, 200, "{}", out.text());
    assert_eq!(out.json()["rejected"], 0, "{}", out.text());

    // The queue lists its pending jobs and the one burst, without names.
    let q = app.get("/v1/sites/u1/queues", None).await;
    let text = q.text();
    assert!(!text.contains("alice") && !text.contains("bob"), "{text}");
    let batch = &q.json()["queues"][0];
    assert_eq!(batch["pending"], 31, "{batch}");
    assert_eq!(batch["users_pending"], 2, "{batch}");
    assert_eq!(batch["bursts_pending"], json!([30]), "{batch}");

    // The last task of the array waits behind 29 of its own; bob's job behind none.
    let last = app
        .get("/v1/sites/u1/jobs/a29?deadline=01:00:00", None)
        .await;
    assert_eq!(last.status, 200, "{}", last.text());
    assert!(!last.text().contains("alice"), "{}", last.text());
    let last = last.json();
    assert_eq!(last["state"], "pending");
    assert_eq!(last["pending"]["own_ahead"], 29, "{last}");
    assert_eq!(last["pending"]["waited_s"], 1_800, "{last}");
    let bob = app.get("/v1/sites/u1/jobs/b1", None).await.json();
    assert_eq!(bob["pending"]["own_ahead"], 0, "{bob}");
    assert_eq!(bob["pending"]["waited_s"], 1_740, "{bob}");
    // Every past job waited less than bob has: no evidence for the rest of his wait.
    assert_eq!(bob["pending"]["status"], "insufficient_history", "{bob}");
    assert!(bob["pending"]["bound_s"].is_null(), "{bob}");
    // A finished job: its wait and whether it kept within its bound at submission.
    let done = app.get("/v1/sites/u1/jobs/h199", None).await.json();
    assert_eq!(done["pending"], serde_json::Value::Null, "{done}");
    assert_eq!(done["wait_s"], 60 + (199 * 37) % 200, "{done}");
    let unknown = app.get("/v1/sites/u1/jobs/nope", None).await;
    assert_eq!(unknown.status, 404, "{}", unknown.text());

    // A bound for a job behind one's own: the state says what answered it.
    let b = app
        .get(
            "/v1/sites/u1/queues/batch/bound?nodes=1&walltime=3600&own_ahead=30",
            None,
        )
        .await;
    assert_eq!(b.status, 200, "{}", b.text());
    let b = b.json();
    assert_eq!(b["state"]["own_ahead"], 30, "{b}");
    assert_eq!(b["state"]["jobs_ahead"], 31, "{b}");
    assert_eq!(b["state"]["depth_class"], json!([16, 31]), "{b}");
    let bad = app
        .get(
            "/v1/sites/u1/queues/batch/bound?nodes=1&walltime=3600&own_ahead=-1",
            None,
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("own_ahead"), "{}", bad.text());
    let list = app
        .get("/v1/bounds?nodes=1&walltime=3600&own_ahead=3", None)
        .await;
    assert_eq!(list.status, 400, "{}", list.text());
}
