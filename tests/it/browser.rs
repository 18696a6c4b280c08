//! The dashboard in a real browser: headless Chromium, driven through chromedriver,
//! against a running server. It checks what a person would look for, and saves a
//! screenshot of every page (laptop and phone widths) under `target/screenshots/`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::reservations::SITE;
use crate::reservations::api::app_with_history;
use crate::support::{TEST_NOW, TestApp};
use crate::webdriver::{Driver, http_client, screenshot_dir};
use qbets::plan::lifecycle::{ReservationState, RunMode};
use qbets::plan::varq::Mode;
use qbets::store::{
    NewReservation, PlanFields, ReservationRequest, Scope, Store, StoreTask, Transition, with_store,
};

const WAIT: Duration = Duration::from_secs(30);

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// A live site "demo" with two queues and 1600 started jobs, large ones waiting longer.
async fn seeded_app() -> TestApp {
    let app = TestApp::new().await;
    let admin = app.token("ops", Scope::Admin).await;
    let res = app
        .json(
            "PUT",
            "/v1/sites/demo",
            Some(&admin),
            &json!({"description": "browser test", "queues": [
                {"name": "express", "max_walltime": "01:00:00", "max_nodes": 32},
                {"name": "normal", "max_walltime": "2-00:00:00"}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    // Enough for the normal queue to be clustered (every 1000 waits) at least once.
    let n = 1_600;
    let jobs: Vec<_> = (0..n)
        .map(|i| {
            let submit = TEST_NOW - 6_000 - (n - i) * 600;
            // Large jobs wait far longer than small ones: the queues cluster by nodes.
            let nodes = 1 + i % 16;
            let wait = if nodes <= 8 {
                30 + (i * 7919) % 300
            } else {
                2_000 + (i * 7919) % 3_000
            };
            json!({"job_id": i.to_string(), "queue": if i % 3 == 0 { "express" } else { "normal" },
                   "submit": iso(submit), "start": iso(submit + wait),
                   "nodes": nodes, "walltime": 600 + (i % 10) * 600, "state": "running"})
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/sites/demo/jobs",
            Some(&admin),
            &json!({ "jobs": jobs }),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    app
}

async fn api(base: &str, path: &str) -> Value {
    let res = http_client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{path}: {}", res.status());
    res.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_headless_chromium() {
    let app = seeded_app().await;
    let base = app.listen().await;
    let shots = screenshot_dir();
    let driver = Driver::start().await;
    let s = driver.session(1280, 1000).await;

    // Overview: every queue of the site, as the API lists them.
    s.goto(&format!("{base}/ui/")).await;
    let shown = s
        .wait_for(
            "the overview's queues",
            WAIT,
            r#"return [...document.querySelectorAll('[data-site="demo"] tr[data-queue]')]
                 .map(r => r.dataset.queue)"#,
        )
        .await;
    let listed: Vec<Value> = api(&base, "/v1/sites/demo/queues").await["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].clone())
        .collect();
    assert_eq!(shown, Value::Array(listed));
    // Every bound shown is the API's for that shape and quantile.
    let cells = s
        .wait_for(
            "the overview's bounds",
            WAIT,
            r#"const c = [...document.querySelectorAll('[data-site="demo"] tr[data-queue] td[data-quantile]')];
               return c.some(td => td.dataset.boundS) && c.map(td => [td.closest('tr').dataset.queue,
                 td.dataset.nodes, td.dataset.walltimeS, td.dataset.quantile, td.dataset.boundS || null])"#,
        )
        .await;
    let cells = cells.as_array().unwrap();
    assert!(cells.len() >= 12, "{cells:?}");
    for cell in cells {
        let [queue, nodes, walltime_s, quantile, shown] = cell.as_array().unwrap().as_slice()
        else {
            panic!("{cell}")
        };
        let answer = api(
            &base,
            &format!(
                "/v1/sites/demo/queues/{}/bound?nodes={}&walltime={}&quantile={}&confidence=0.95",
                queue.as_str().unwrap(),
                nodes.as_str().unwrap(),
                walltime_s.as_str().unwrap(),
                quantile.as_str().unwrap()
            ),
        )
        .await;
        let want = answer["bound_s"]
            .as_i64()
            .map(|b| Value::String(b.to_string()));
        assert_eq!(shown, &want.unwrap_or(Value::Null), "{cell} vs {answer}");
    }

    // Ingest health: each source of the site, with the API's counts.
    let sources = s
        .wait_for(
            "the ingest health table",
            WAIT,
            r#"return [...document.querySelectorAll('[data-site="demo"] tr[data-source]')]
                 .map(r => [r.dataset.source, r.cells[4].innerText.replace(/\D/g, '')])"#,
        )
        .await;
    let health = api(&base, "/v1/sites/demo/ingest").await;
    let want: Vec<Value> = health["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| json!([h["source"], h["accepted"].to_string()]))
        .collect();
    assert_eq!(sources, Value::Array(want));
    s.screenshot_page(&shots.join("overview.png")).await;

    // Queue page: the waits chart draws the jobs the API returns.
    s.goto(&format!("{base}/ui/queue.html?site=demo&queue=normal"))
        .await;
    let points = s
        .wait_for(
            "the waits chart",
            WAIT,
            r#"const m = document.getElementById('waits-meta');
               return document.querySelector('#waits-chart canvas') && m.dataset.points"#,
        )
        .await;
    assert!(
        points.as_str().unwrap().parse::<i64>().unwrap() > 100,
        "{points}"
    );
    // A bound line per cluster, labelled and coloured as the clusters table's rows.
    let lines = s
        .wait_for(
            "a bound line per cluster",
            WAIT,
            r#"const rows = [...document.querySelectorAll('#clusters tbody tr')]
                 .map(r => [r.cells[0].innerText.trim(), r.querySelector('.swatch') && getComputedStyle(r.querySelector('.swatch')).backgroundColor]);
               const legend = [...document.querySelectorAll('#waits-chart .u-legend .u-series')]
                 .map(s => [s.querySelector('.u-label').innerText, getComputedStyle(s.querySelector('.u-marker')).borderColor])
                 .filter(([l]) => l.startsWith('0.95 bound'));
               return rows.length > 0 && legend.length > 0 && { rows, legend }"#,
        )
        .await;
    let rows = lines["rows"].as_array().unwrap();
    let clusters = api(&base, "/v1/sites/demo/queues/normal/clusters").await;
    assert!(
        rows.len() >= 2 && rows.len() == clusters["clusters"].as_array().unwrap().len(),
        "{lines} against {clusters}"
    );
    let want: Vec<Value> = rows
        .iter()
        .map(|r| json!([format!("0.95 bound, {}", r[0].as_str().unwrap()), r[1]]))
        .collect();
    assert_eq!(lines["legend"], Value::Array(want), "{lines}");
    // Without hovering, the legend gives each dot series' count and each bound line's
    // latest level, not a row of dashes.
    let rest = s
        .eval(
            r#"return [...document.querySelectorAll('#waits-chart .u-legend .u-series')]
                 .map(x => [x.querySelector('.u-label').innerText, x.querySelector('.u-value').innerText])"#,
            json!([]),
        )
        .await;
    let points: usize = points.as_str().unwrap().parse().unwrap();
    let mut counted = 0;
    for row in rest.as_array().unwrap() {
        let (label, value) = (row[0].as_str().unwrap(), row[1].as_str().unwrap());
        if label.starts_with("0.95 bound") {
            assert!(value.starts_with("now "), "{rest}");
        } else if label.starts_with("wait") {
            counted += value.trim_end_matches(" jobs").parse::<usize>().unwrap();
        }
    }
    assert_eq!(counted, points, "every dot counted once: {rest}");
    s.screenshot_page(&shots.join("queue.png")).await;

    // The "my job" form refuses a bad shape before asking, naming the field.
    s.fill("#nodes", "0").await;
    s.click("#ask").await;
    let refused = s
        .wait_for(
            "the form's refusal",
            WAIT,
            r#"const a = document.getElementById('myjob-error');
               return !a.hidden && document.getElementById('nodes').getAttribute('aria-invalid') === 'true'
                 && a.innerText"#,
        )
        .await;
    assert!(refused.as_str().unwrap().contains("nodes"), "{refused}");

    // Asked properly, it shows the API's bounds and deadline probability.
    s.fill("#nodes", "4").await;
    s.fill("#walltime", "01:30:00").await;
    s.fill("#deadline", "00:45:00").await;
    s.click("#ask").await;
    let shown = s
        .wait_for(
            "the my-job answers",
            WAIT,
            r#"const a = [...document.querySelectorAll('#answers [data-quantile]')];
               const p = document.querySelector('#answers [data-probability]');
               return a.length === 3 && p && document.getElementById('myjob-error').hidden
                 && { bounds: a.map(x => [x.dataset.quantile, x.dataset.status, x.dataset.boundS]),
                      probability: [p.dataset.status, p.dataset.probability] }"#,
        )
        .await;
    let shape = "/v1/sites/demo/queues/normal/bound?nodes=4&walltime=01:30:00&confidence=0.95";
    let mut want = Vec::new();
    for q in ["0.5", "0.75", "0.95"] {
        let b = api(&base, &format!("{shape}&quantile={q}")).await;
        want.push(json!([
            q,
            b["status"],
            b["bound_s"]
                .as_i64()
                .map_or(String::new(), |v| v.to_string())
        ]));
    }
    assert_eq!(shown["bounds"], Value::Array(want));
    assert_eq!(shown["bounds"][2][1], "ok", "the 0.95 bound has history");
    let text = http_client()
        .get(format!(
            "{base}/v1/sites/demo/queues/normal/deadline?nodes=4&walltime=01:30:00&deadline=00:45:00&confidence=0.95"
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let d: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(shown["probability"][0], d["status"]);
    // serde_json's default float parsing may be one ulp off; compare the digits the
    // server sent, each read with std's correctly rounded parser, with the page's.
    let digits = text
        .split("\"probability\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .unwrap_or_else(|| panic!("no probability in {text}"));
    let sent: f64 = digits.parse().unwrap();
    let shown_p: f64 = shown["probability"][1].as_str().unwrap().parse().unwrap();
    assert_eq!(shown_p.to_bits(), sent.to_bits(), "{shown_p} vs {text}");
    assert_eq!(
        s.eval(
            "return document.getElementById('myjob-limits') === null",
            json!([])
        )
        .await,
        json!(true),
        "4 nodes for 1 h 30 min is within normal's limits"
    );
    let page = s.eval("return document.body.innerText", json!([])).await;
    for junk in ["null", "undefined", "NaN"] {
        assert!(
            !page.as_str().unwrap().contains(junk),
            "{junk} shown: {page}"
        );
    }
    s.screenshot_page(&shots.join("queue.png")).await;

    // A walltime beyond the queue's limit (2 days here) is answered with a warning
    // that the scheduler would refuse the job.
    s.fill("#walltime", "3-00:00:00").await;
    s.click("#ask").await;
    let warned = s
        .wait_for(
            "the limits warning",
            WAIT,
            r#"const w = document.getElementById('myjob-limits'); return w && w.innerText"#,
        )
        .await;
    assert!(warned.as_str().unwrap().contains("at most 2 d"), "{warned}");

    // The clusters table: each cluster's history and bound, readable. (The demo
    // re-clusters as it runs, so the rows are not compared with a later API call.)
    let rows = s
        .wait_for(
            "the clusters table",
            WAIT,
            r#"const r = [...document.querySelectorAll('#clusters tbody tr')];
               return r.length && r.map(x => [x.cells[2].innerText, x.cells[3].innerText])"#,
        )
        .await;
    for row in rows.as_array().unwrap() {
        let history = row[0]
            .as_str()
            .unwrap()
            .replace([',', '.', '\u{a0}', ' '], "");
        assert!(history.parse::<u64>().is_ok(), "{rows}");
        let bound = row[1].as_str().unwrap();
        assert!(
            bound == "too little history"
                || bound.ends_with(" s")
                || bound.contains("min")
                || bound.contains(" h")
                || bound.contains(" d"),
            "{rows}"
        );
    }

    // "My job" by its id: a pending job's outlook, as the API gives it, from an address
    // that names the job (as a user would bookmark or be sent it).
    let admin = app.token("ops-job", Scope::Admin).await;
    let res = app
        .json(
            "POST",
            "/v1/sites/demo/jobs",
            Some(&admin),
            &json!({"jobs": [{"job_id": "waiting-1", "queue": "normal", "submit": iso(TEST_NOW - 120),
                              "nodes": 4, "walltime": 3_600, "state": "pending"}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    s.goto(&format!(
        "{base}/ui/queue.html?site=demo&queue=normal&job=waiting-1"
    ))
    .await;
    let pending = s
        .wait_for(
            "the pending job's outlook",
            WAIT,
            r#"const a = document.querySelector('#job-answers [data-remaining-s]');
               const p = document.querySelector('#job-answers [data-probability]');
               const w = document.querySelector('#job-answers [data-waited-s]');
               return a && p && w && document.getElementById('jobid').value === 'waiting-1'
                 && [a.dataset.status, a.dataset.remainingS, p.dataset.probability, w.dataset.waitedS,
                     document.querySelector('#job-answers [data-state]').dataset.state]"#,
        )
        .await;
    let job = api(
        &base,
        "/v1/sites/demo/jobs/waiting-1?confidence=0.95&deadline=01:00:00",
    )
    .await;
    let p = &job["pending"];
    assert_eq!(pending[0], p["status"], "{pending} vs {job}");
    assert_eq!(pending[0], "ok", "the job's cluster has history: {job}");
    assert_eq!(pending[1], p["bound_s"].to_string(), "{pending} vs {job}");
    assert_eq!(pending[3], p["waited_s"].to_string(), "{pending} vs {job}");
    assert_eq!(pending[4], "pending", "{pending}");
    let shown_p: f64 = pending[2].as_str().unwrap().parse().unwrap();
    assert!(
        (shown_p - p["probability"].as_f64().unwrap()).abs() < 1e-12,
        "{pending} vs {job}"
    );
    s.screenshot_page(&shots.join("queue-job.png")).await;

    // A started job: its wait and whether it kept its bound at submission.
    s.fill("#jobid", "1").await;
    s.click("#lookup").await;
    let started = s
        .wait_for(
            "the started job's answer",
            WAIT,
            r#"const w = document.querySelector('#job-answers [data-wait-s]');
               const b = document.querySelector('#job-answers [data-bound-at-submission-s]');
               return w && b && !document.querySelector('#job-answers [data-remaining-s]')
                 && location.search.includes('job=1') && [w.dataset.waitS, b.dataset.within]"#,
        )
        .await;
    let job = api(&base, "/v1/sites/demo/jobs/1").await;
    assert_eq!(started[0], job["wait_s"].to_string(), "{started} vs {job}");
    let within = match &job["within_bound"] {
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    };
    assert_eq!(started[1], within.as_str(), "{started} vs {job}");

    // An id the site never reported: the API's 404, said in place, the field marked.
    s.fill("#jobid", "no-such-job").await;
    s.click("#lookup").await;
    let missing = s
        .wait_for(
            "the unknown job's refusal",
            WAIT,
            r#"const a = document.getElementById('jobid-error');
               return !a.hidden && document.getElementById('jobid').getAttribute('aria-invalid') === 'true'
                 && document.getElementById('jobid-out').children.length === 0 && a.innerText"#,
        )
        .await;
    assert!(
        missing.as_str().unwrap().contains("no-such-job"),
        "{missing}"
    );

    // Opened without naming a queue, the page says so instead of asking for "/".
    s.goto(&format!("{base}/ui/queue.html")).await;
    let alone = s
        .wait_for(
            "the page without a queue",
            WAIT,
            r#"const a = document.getElementById('error');
               return !a.hidden && [document.getElementById('summary').innerText, a.innerText]"#,
        )
        .await;
    assert_eq!(alone[0], "No queue chosen.", "{alone}");

    // The same pages at a phone's width.
    s.resize(412, 915).await;
    s.goto(&format!("{base}/ui/")).await;
    s.wait_for(
        "the overview at phone width",
        WAIT,
        r#"return document.querySelector('[data-site="demo"] tr[data-queue]')"#,
    )
    .await;
    s.screenshot_page(&shots.join("overview-phone.png")).await;
    s.goto(&format!("{base}/ui/queue.html?site=demo&queue=normal"))
        .await;
    s.wait_for(
        "the waits chart at phone width",
        WAIT,
        "return document.querySelector('#waits-chart canvas')",
    )
    .await;
    s.screenshot_page(&shots.join("queue-phone.png")).await;

    s.resize(1280, 1000).await;
    s.goto(&format!("{base}/ui/reservations.html")).await;
    // A planned reservation draws its probability trajectory with the chosen point.
    let drawn = plan_in_the_form(&s, "demo", "normal", "00:30:00", "0.5").await;
    assert!(drawn[0].as_i64().unwrap() > 1, "{drawn}");
    assert!(
        drawn[1].as_i64().unwrap() >= TEST_NOW,
        "submit at or after now: {drawn}"
    );
    s.screenshot_page(&shots.join("reservations.png")).await;
    s.quit().await;
}

/// Plans one node for `walltime` at `site`/`queue` with probability at least `p` in
/// the reservations page's form; returns the trajectory's point count and the chosen
/// submission time, once the plan is shown and can be made.
async fn plan_in_the_form(
    s: &crate::webdriver::Session<'_>,
    site: &str,
    queue: &str,
    walltime: &str,
    p: &str,
) -> Value {
    s.wait_for(
        "the site's queues in the form",
        WAIT,
        &format!(
            r#"const s = document.getElementById('site');
               if (s.value !== '{site}') {{ s.value = '{site}'; s.dispatchEvent(new Event('change')); return false; }}
               return document.querySelector('#queue option[value="{queue}"]')"#
        ),
    )
    .await;
    s.eval(
        "const q = document.getElementById('queue'); q.value = arguments[0]; return q.value",
        json!([queue]),
    )
    .await;
    s.fill("#nodes", "1").await;
    s.fill("#walltime", walltime).await;
    s.fill("#min_probability", p).await;
    s.click("#plan-button").await;
    let planned = s
        .wait_for(
            "the plan and its trajectory",
            WAIT,
            r#"const c = document.getElementById('trajectory');
               const a = document.getElementById('plan-answers');
               const e = document.getElementById('plan-error');
               if (!e.hidden) return 'refused: ' + e.innerText;
               return a && c.querySelector('canvas') && !document.getElementById('create-button').disabled
                 && [Number(c.dataset.points), Number(a.dataset.submitAt)]"#,
        )
        .await;
    assert!(planned.is_array(), "{planned}");
    planned
}

/// `qbets serve --demo` on its own SQLite file, killed on drop.
struct DemoServer {
    child: std::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn demo_server() -> DemoServer {
    let dir = tempfile::tempdir().unwrap();
    let port = crate::webdriver::free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_qbets"))
        .args(["serve", "--demo", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--database-url")
        .arg(format!("sqlite://{}", dir.path().join("demo.db").display()))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("qbets serve --demo starts");
    let server = DemoServer {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(res) = http_client()
            .get(format!("{}/v1/sites/demo/queues", server.base))
            .send()
            .await
            && res.status().is_success()
            && let Ok(v) = res.json::<Value>().await
            && v["queues"].as_array().is_some_and(|q| !q.is_empty())
        {
            return server;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the demo site did not appear in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_lists_the_demo_sites_queues() {
    let server = demo_server().await;
    let driver = Driver::start().await;
    let s = driver.session(1280, 1000).await;
    s.goto(&format!("{}/ui/", server.base)).await;
    let shown = s
        .wait_for(
            "the demo's queues",
            WAIT,
            r#"return [...document.querySelectorAll('[data-site="demo"] tr[data-queue]')]
                 .map(r => r.dataset.queue)"#,
        )
        .await;
    let listed: Vec<Value> = api(&server.base, "/v1/sites/demo/queues").await["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].clone())
        .collect();
    assert_eq!(shown, Value::Array(listed));
    let shots = screenshot_dir();
    s.screenshot_page(&shots.join("overview-demo.png")).await;

    // The demo's queue page, a shape asked in its form.
    s.goto(&format!(
        "{}/ui/queue.html?site=demo&queue=normal",
        server.base
    ))
    .await;
    s.wait_for(
        "the demo queue's chart",
        WAIT,
        "return document.querySelector('#waits-chart canvas')",
    )
    .await;
    s.fill("#nodes", "8").await;
    s.click("#ask").await;
    let answered = s
        .wait_for(
            "the demo queue's answers",
            WAIT,
            r#"const a = [...document.querySelectorAll('#answers [data-quantile]')];
               return a.length === 3 && a.map(x => x.dataset.status)"#,
        )
        .await;
    assert_eq!(answered, json!(["ok", "ok", "ok"]), "the demo has history");
    s.screenshot_page(&shots.join("queue-demo.png")).await;

    // And a plan on its reservations page.
    s.goto(&format!("{}/ui/reservations.html", server.base))
        .await;
    let drawn = plan_in_the_form(&s, "demo", "normal", "00:30:00", "0.5").await;
    assert!(drawn[0].as_i64().unwrap() > 1, "{drawn}");
    s.screenshot_page(&shots.join("reservations-demo.png"))
        .await;
    s.quit().await;

    // `QBETS_UPDATE_DOCS=1` makes these the documentation's screenshots.
    if std::env::var_os("QBETS_UPDATE_DOCS").is_some_and(|v| v == "1") {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        for (shot, doc) in [
            ("overview-demo.png", "dashboard-overview.png"),
            ("queue-demo.png", "dashboard-queue.png"),
            ("reservations-demo.png", "dashboard-reservations.png"),
        ] {
            std::fs::copy(shots.join(shot), docs.join(doc)).unwrap();
        }
    }
}

/// Three finished reservations at `local/debug` (two succeeded, planned at 0.9 and 0.8;
/// one failed, at 0.7), as the executor would have left them, for the calibration table;
/// and one that failed before it could be submitted (the service down), which tested no
/// prediction and is not counted.
struct SeedFinished;

impl StoreTask for SeedFinished {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        for (i, (p, state)) in [
            (0.9, ReservationState::Succeeded),
            (0.8, ReservationState::Succeeded),
            (0.7, ReservationState::Failed),
            (0.1, ReservationState::Failed),
        ]
        .into_iter()
        .enumerate()
        {
            let start_at = TEST_NOW - 86_400 + i as i64 * 3600;
            store
                .insert_reservation(&NewReservation {
                    request: ReservationRequest {
                        uid: format!("r-finished-{i}"),
                        owner: "bob".into(),
                        site: SITE.into(),
                        queue: "debug".into(),
                        nodes: 1,
                        walltime_s: 300,
                        start_at,
                        min_probability: 0.5,
                        confidence: 0.95,
                        mode: Mode::Latest,
                        step_s: 30,
                        command: "hostname".into(),
                        run_mode: RunMode::Hold,
                        on_failure: Default::default(),
                        webhook: None,
                    },
                    state: ReservationState::Planned,
                    plan: Some(PlanFields {
                        submit_at: start_at - 600,
                        advertised_walltime_s: 900,
                        probability: p,
                    }),
                    at_risk: false,
                    coallocation: None,
                    reason: "planned before the test".into(),
                    created_at: start_at - 3600,
                    idempotency_key: None,
                })
                .await
                .unwrap();
            let id = store
                .reservation(&format!("r-finished-{i}"))
                .await
                .unwrap()
                .unwrap()
                .id;
            let mut path = vec![ReservationState::Planned];
            if p > 0.5 {
                path.push(ReservationState::Submitted);
                if state == ReservationState::Succeeded {
                    path.push(ReservationState::Started);
                }
            }
            path.push(state);
            for step in path.windows(2) {
                let t = Transition {
                    submitted_at: (step[1] == ReservationState::Submitted)
                        .then_some(start_at - 600),
                    remote_job_id: (step[1] == ReservationState::Submitted).then(|| format!("{i}")),
                    ..Transition::new(step[0], step[1], start_at, "finished before the test")
                };
                assert!(store.transition_reservation(id, &t).await.unwrap());
            }
        }
    }
}

/// With a token, a person plans a reservation at the local Slurm site, makes it,
/// follows it, finds it in their list and cancels it; the calibration table shows the
/// finished reservations' figures as the API gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_is_made_followed_and_cancelled_in_the_browser() {
    let (app, _) = app_with_history().await;
    with_store(&app.config.database_url, SeedFinished)
        .await
        .unwrap();
    let token = app.token("alice", Scope::Reserve).await;
    let base = app.listen().await;
    let shots = screenshot_dir();
    let driver = Driver::start().await;
    let s = driver.session(1280, 1100).await;
    s.goto(&format!("{base}/ui/reservations.html")).await;
    s.wait_for(
        "the invitation to set a token",
        WAIT,
        r#"return document.getElementById('mine').innerText.includes('Set a token')"#,
    )
    .await;

    // Calibration: the finished reservations per queue, as the API counts them.
    let shown = s
        .wait_for(
            "the calibration table",
            WAIT,
            r#"return [...document.querySelectorAll('#calibration tbody tr')]
                 .map(r => [...r.cells].map(c => c.innerText.trim()))"#,
        )
        .await;
    let cal = api(&base, "/v1/calibration").await;
    let want: Vec<Value> = cal["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            json!([
                format!(
                    "{}/{}",
                    q["site"].as_str().unwrap(),
                    q["queue"].as_str().unwrap()
                ),
                q["finished"].to_string(),
                format!(
                    "{:.1} %",
                    q["mean_predicted_probability"].as_f64().unwrap() * 100.0
                ),
                format!("{:.1} %", q["achieved_fraction"].as_f64().unwrap() * 100.0),
            ])
        })
        .collect();
    assert_eq!(shown, Value::Array(want));
    assert_eq!(shown, json!([["local/debug", "3", "80.0 %", "66.7 %"]]));

    // The token, given in the header's box, is used at once: the list is empty.
    s.click("details.token-box summary").await;
    s.fill("#token", &token).await;
    s.click("form.token button[type=submit]").await;
    s.wait_for(
        "the empty list of the token's reservations",
        WAIT,
        r#"return document.getElementById('mine').innerText.includes('None yet')"#,
    )
    .await;

    // A plan is made only as planned: changing the form after planning asks for a new
    // plan before anything can be made.
    plan_in_the_form(&s, SITE, "debug", "00:05:00", "0.6").await;
    s.fill("#nodes", "2").await;
    let disabled = s
        .eval(
            "return document.getElementById('create-button').disabled",
            json!([]),
        )
        .await;
    assert_eq!(
        disabled,
        json!(true),
        "a changed form still offered the old plan"
    );

    // Plan at local/debug, then make it.
    let planned = plan_in_the_form(&s, SITE, "debug", "00:05:00", "0.6").await;
    let submit_at = planned[1].as_i64().unwrap();
    s.fill("#command", "hostname -s").await;
    s.eval(
        "document.getElementById('on_failure').value = 'keep'",
        json!([]),
    )
    .await;
    s.click("#create-button").await;
    let made = s
        .wait_for(
            "the new reservation's card",
            WAIT,
            r#"const c = document.querySelector('#followed [data-reservation]');
               const e = document.getElementById('create-error');
               if (!e.hidden) return 'refused: ' + e.innerText;
               return c && [c.dataset.reservation, c.querySelector('[data-state]').dataset.state]"#,
        )
        .await;
    let id = made[0]
        .as_str()
        .unwrap_or_else(|| panic!("not made: {made}"))
        .to_string();
    assert_eq!(made[1], "planned", "{made}");
    // One reservation per plan: the button is off until the next plan.
    let disabled = s
        .eval(
            "return document.getElementById('create-button').disabled",
            json!([]),
        )
        .await;
    assert_eq!(disabled, json!(true), "the plan could be made twice");
    let reservation = format!("/v1/reservations/{id}");
    let res = app.get(&reservation, Some(&token)).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let r = res.json();
    assert_eq!(r["owner"], "alice");
    assert_eq!(
        (r["site"].as_str(), r["queue"].as_str()),
        (Some(SITE), Some("debug"))
    );
    assert_eq!(r["command"], "hostname -s");
    assert_eq!(r["on_failure"], "keep", "as chosen in the form");
    assert_eq!(r["nodes"], 1);
    assert_eq!(r["walltime_s"], 300);
    assert_eq!(r["min_probability"], 0.6);
    assert_eq!(
        qbets::http::params::timestamp(r["plan"]["submit_at"].as_str().unwrap()).unwrap(),
        submit_at,
        "the plan shown is the plan stored: {r}"
    );

    // The token's list shows it.
    let listed = s
        .wait_for(
            "the reservation in the token's list",
            WAIT,
            r#"return [...document.querySelectorAll('#mine a[data-reservation]')].map(a => a.dataset.reservation)"#,
        )
        .await;
    assert_eq!(listed, json!([id]));
    s.screenshot_page(&shots.join("reservations-made.png"))
        .await;

    // Cancelled from its card: the card, the list and the API agree.
    s.click("#followed button.secondary").await;
    s.wait_for(
        "the cancelled state on the card",
        WAIT,
        r#"const b = document.querySelector('#followed [data-state]');
           return b && b.dataset.state === 'cancelled'"#,
    )
    .await;
    let res = app.get(&reservation, Some(&token)).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let r = res.json();
    assert_eq!(r["state"], "cancelled", "{r}");
    let states: Vec<&str> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["planned", "cancelled"], "{r}");
    s.wait_for(
        "the cancelled state in the list",
        WAIT,
        r#"return document.querySelector('#mine [data-state="cancelled"]')"#,
    )
    .await;
    s.screenshot_page(&shots.join("reservations-cancelled.png"))
        .await;
    s.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn which_shape_waits_less_in_the_browser() {
    let app = crate::advice::advice_app().await;
    let base = app.listen().await;
    let shots = screenshot_dir();
    let driver = Driver::start().await;
    let s = driver.session(1280, 1000).await;
    s.goto(&format!("{base}/ui/advice.html")).await;
    // The page is in the navigation, marked as the current one.
    s.wait_for(
        "the navigation",
        WAIT,
        r#"const a = document.querySelector('nav a[href="/ui/advice.html"]');
           return a && a.getAttribute('aria-current') === 'page'"#,
    )
    .await;
    s.wait_for(
        "the sites in the form",
        WAIT,
        r#"const s = document.getElementById('site');
           if (!s.querySelector('option[value="hpc"]')) return false;
           s.value = 'hpc'; return true"#,
    )
    .await;
    s.fill("#queue", "batch").await;
    s.fill("#shapes", "1x01:00:00, 4x00:30:00, 256x300").await;
    s.click("#advise-button").await;
    let shown = s
        .wait_for(
            "the ranked rows",
            WAIT,
            r#"const e = document.getElementById('advice-error');
               if (!e.hidden) return 'refused: ' + e.innerText;
               const rows = [...document.querySelectorAll('#advice-table tbody tr')];
               return rows.map(r => [...r.cells].slice(0, 5).map(c => c.textContent))"#,
        )
        .await;
    let body = json!({"site": "hpc", "queue": "batch", "candidates": [
        {"nodes": 1, "walltime": "01:00:00"}, {"nodes": 4, "walltime": "00:30:00"},
        {"nodes": 256, "walltime": 300}]});
    let api = app.json("POST", "/v1/advice", None, &body).await.json();
    let want: Vec<Value> = api["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!([
                r["rank"]
                    .as_u64()
                    .map_or("unranked".to_string(), |k| k.to_string()),
                r["nodes"].to_string(),
                r["walltime"],
                r["site"],
                r["queue"]
            ])
        })
        .collect();
    assert_eq!(shown, Value::Array(want), "{api}");
    assert_eq!(shown[0][0], "1");
    assert_eq!(
        shown[2][0], "unranked",
        "the shape beyond the queue's limits is unranked"
    );
    s.screenshot_page(&shots.join("advice-1280.png")).await;
    s.quit().await;
}
