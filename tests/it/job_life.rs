//! Issue 22, item 5: a job's life only goes forward (pending → running → ended). An
//! older record — a pending one of a job seen ended, a running one of an ended job, one
//! of an earlier submission — changes nothing and is counted as unchanged, whether it
//! is pushed or written by a source (both go through `Store::ingest_jobs`; the SQL of
//! `Store::upsert_jobs` says the same). Run on SQLite and on PostgreSQL.

use serde_json::json;

use super::support::{TEST_NOW, TestApp, TestDb, postgres_url};
use qbets::store::Scope;
use qbets::store::{
    Job, JobState, NewJob, NewQueue, NewSite, SiteKind, Store, StoreTask, with_store,
};

fn iso(t: i64) -> String {
    qbets::service::format_unix(t)
}

/// Every stored job of `site`/`queue`, in rebuild order.
struct Jobs(&'static str, &'static str);

impl StoreTask for Jobs {
    type Output = Vec<Job>;
    async fn run<S: Store>(self, store: S) -> Vec<Job> {
        let site = store.site(self.0).await.unwrap().expect("site");
        let queue = store.queue(site.id, self.1).await.unwrap().expect("queue");
        store.jobs_page(queue.id, None, 1_000).await.unwrap()
    }
}

async fn push_story(app: TestApp) {
    let admin = app.token("ops", Scope::Admin).await;
    let ingest = app.token("sensor", Scope::Ingest).await;
    app.json(
        "PUT",
        "/v1/sites/hpc",
        Some(&admin),
        &json!({"queues": [{"name": "batch"}]}),
    )
    .await;
    let t = TEST_NOW - 3_600;
    let push = |body: serde_json::Value| {
        let (app, ingest) = (&app, &ingest);
        async move {
            app.json("POST", "/v1/sites/hpc/jobs", Some(ingest), &body)
                .await
                .json()
        }
    };
    let ended = json!({"job_id": "1", "queue": "batch", "submit": iso(t), "start": iso(t + 60),
                       "end": iso(t + 600), "nodes": 4, "walltime": 3600, "state": "completed"});
    let out = push(json!([ended])).await;
    assert_eq!(out["changed"], 1, "{out}");

    // The same job as pending (an old poll, a sensor replaying its log): unchanged.
    let out =
        push(json!([{"job_id": "1", "queue": "batch", "submit": iso(t), "state": "pending"}]))
            .await;
    assert_eq!(
        (&out["received"], &out["changed"], &out["rejected"]),
        (&json!(1), &json!(0), &json!(0)),
        "{out}"
    );
    // As running (with its start): unchanged too.
    let out = push(json!([{"job_id": "1", "queue": "batch", "submit": iso(t), "start": iso(t + 60), "state": "running"}])).await;
    assert_eq!(out["changed"], 0, "{out}");
    // A record of an earlier submission under the same id: older news.
    let out = push(
        json!([{"job_id": "1", "queue": "batch", "submit": iso(t - 100), "state": "pending"}]),
    )
    .await;
    assert_eq!(out["changed"], 0, "{out}");

    let jobs = with_store(&app.config.database_url, Jobs("hpc", "batch"))
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    let j = &jobs[0];
    assert_eq!(
        (j.state, j.submit_time, j.start_time, j.end_time, j.wait_s()),
        (
            JobState::Completed,
            t,
            Some(t + 60),
            Some(t + 600),
            Some(60)
        ),
        "the job stays ended with its start and wait: {j:?}"
    );

    // Forward still moves: pending, then running, then cancelled.
    for (rec, state) in [
        (
            json!({"job_id": "2", "queue": "batch", "submit": iso(t), "state": "pending"}),
            JobState::Pending,
        ),
        (
            json!({"job_id": "2", "queue": "batch", "submit": iso(t), "start": iso(t + 5), "state": "running"}),
            JobState::Running,
        ),
        (
            json!({"job_id": "2", "queue": "batch", "submit": iso(t), "state": "pending"}),
            JobState::Running,
        ),
        (
            json!({"job_id": "2", "queue": "batch", "submit": iso(t), "end": iso(t + 50), "state": "cancelled"}),
            JobState::Cancelled,
        ),
    ] {
        push(json!([rec])).await;
        let jobs = with_store(&app.config.database_url, Jobs("hpc", "batch"))
            .await
            .unwrap();
        let j = jobs.iter().find(|j| j.job_id == "2").unwrap();
        assert_eq!(j.state, state, "after {rec}: {j:?}");
    }
    // A requeue (a later submit time) starts the job over: that is forward.
    let out = push(
        json!([{"job_id": "1", "queue": "batch", "submit": iso(t + 900), "state": "pending"}]),
    )
    .await;
    assert_eq!(out["changed"], 1, "{out}");
}

#[tokio::test]
async fn a_pushed_record_never_moves_a_job_backwards_on_sqlite() {
    push_story(TestApp::on(TestDb::sqlite()).adjusted(|_| {}).await).await;
}

#[tokio::test]
async fn a_pushed_record_never_moves_a_job_backwards_on_postgres() {
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

/// `upsert_jobs` (SQL) and `ingest_jobs` (worked out in Rust) agree.
struct UpsertStory;

impl StoreTask for UpsertStory {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let site = store
            .upsert_site(&NewSite {
                name: "s".into(),
                kind: SiteKind::Live,
                description: String::new(),
                time_zone: None,
            })
            .await
            .unwrap();
        let q = store
            .upsert_queue(
                site.id,
                &NewQueue {
                    name: "q".into(),
                    max_walltime_s: None,
                    max_nodes: None,
                    total_nodes: None,
                },
            )
            .await
            .unwrap();
        let rec = |id: &str, submit: i64, start: Option<i64>, end: Option<i64>, state| NewJob {
            user_key: None,
            site_id: site.id,
            queue_id: q.id,
            job_id: id.into(),
            submit_time: submit,
            start_time: start,
            end_time: end,
            nodes: Some(1),
            walltime_s: Some(60),
            state,
        };
        let done = rec("a", 100, Some(110), Some(200), JobState::Completed);
        assert_eq!(
            store
                .upsert_jobs(std::slice::from_ref(&done))
                .await
                .unwrap()
                .len(),
            1
        );
        for older in [
            rec("a", 100, None, None, JobState::Pending),
            rec("a", 100, Some(110), None, JobState::Running),
            rec("a", 100, None, None, JobState::Unknown),
            rec("a", 50, None, None, JobState::Pending),
        ] {
            assert!(
                store
                    .upsert_jobs(std::slice::from_ref(&older))
                    .await
                    .unwrap()
                    .is_empty(),
                "upsert {older:?}"
            );
            assert!(
                store
                    .ingest_jobs(std::slice::from_ref(&older), |_| Vec::new())
                    .await
                    .unwrap()
                    .is_empty(),
                "ingest {older:?}"
            );
        }
        let jobs = store.jobs_page(q.id, None, 10).await.unwrap();
        assert_eq!(
            (jobs[0].state, jobs[0].start_time, jobs[0].end_time),
            (JobState::Completed, Some(110), Some(200))
        );
        // Ended to ended (another end state) is news, on both paths.
        let failed = rec("a", 100, Some(110), Some(200), JobState::Failed);
        assert_eq!(
            store
                .upsert_jobs(std::slice::from_ref(&failed))
                .await
                .unwrap()
                .len(),
            1
        );
        let cancelled = rec("a", 100, Some(110), Some(200), JobState::Cancelled);
        assert_eq!(
            store
                .ingest_jobs(std::slice::from_ref(&cancelled), |_| Vec::new())
                .await
                .unwrap()
                .len(),
            1
        );
    }
}

#[tokio::test]
async fn stored_jobs_never_move_backwards_on_sqlite() {
    let db = TestDb::sqlite();
    with_store(db.url(), UpsertStory).await.unwrap();
}

#[tokio::test]
async fn stored_jobs_never_move_backwards_on_postgres() {
    let Some(url) = postgres_url() else {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL half of this story did not run");
        return;
    };
    let db = TestDb::postgres(&url).await;
    with_store(db.url(), UpsertStory).await.unwrap();
}
