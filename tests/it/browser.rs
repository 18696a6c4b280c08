//! The dashboard in a real browser: headless Chromium, driven through chromedriver,
//! against a running server. It checks what a person would look for, and saves a
//! screenshot of every page (laptop and phone widths) under `target/screenshots/`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TEST_NOW, TestApp};
use crate::webdriver::{Driver, http_client, screenshot_dir};
use qbets::store::Scope;

const WAIT: Duration = Duration::from_secs(30);

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// A live site "demo" with two queues and a few hundred started jobs.
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
    let n = 400;
    let jobs: Vec<_> = (0..n)
        .map(|i| {
            let submit = TEST_NOW - 6_000 - (n - i) * 600;
            let wait = 30 + (i * 7919) % 5000;
            json!({"job_id": i.to_string(), "queue": if i % 3 == 0 { "express" } else { "normal" },
                   "submit": iso(submit), "start": iso(submit + wait),
                   "nodes": 1 + i % 16, "walltime": 600 + (i % 10) * 600, "state": "running"})
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
    s.wait_for(
        "the reservation form's queues",
        WAIT,
        "return document.querySelector('#queue option')",
    )
    .await;
    s.screenshot_page(&shots.join("reservations.png")).await;
    s.quit().await;
}
