//! The predictors' seam: a rebuild hands each (site, queue) slot every stored job, and
//! the ingest path hands it what changed.

use qbets::config::Config;
use qbets::service::Predictors;
use qbets::store::{Job, JobState, NewJob, Store, StoreTask, with_store};

use crate::support::TestDb;

struct Check;

impl StoreTask for Check {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (predictors, report) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        assert_eq!(report.jobs, 6, "every stored job, started or not");
        assert_eq!(report.queues, 3);
        assert_eq!(predictors.len(), 3);
        let express = predictors.slot("test", "express").unwrap();
        assert_eq!(express.jobs_seen, 3);
        // 2000-01-01T00:00:00Z + 53 s: job 6's start, the queue's last event.
        assert_eq!(express.last_event, Some(946_684_800 + 53));
        assert_eq!(predictors.slot("test", "normal").unwrap().jobs_seen, 2);
        assert!(predictors.slot("test", "nope").is_none());

        // What the ingest path hands over after an upsert.
        let site = store.site("test").await.unwrap().unwrap();
        let queue = store.queue(site.id, "express").await.unwrap().unwrap();
        let changed: Vec<Job> = store
            .upsert_jobs(&[NewJob {
                site_id: site.id,
                queue_id: queue.id,
                job_id: "100".into(),
                submit_time: 946_684_800 + 3_600,
                start_time: None,
                end_time: None,
                nodes: Some(1),
                walltime_s: Some(60),
                state: JobState::Pending,
            }])
            .await
            .unwrap();
        predictors.observe(&site, &queue, &changed);
        let express = predictors.slot("test", "express").unwrap();
        assert_eq!(express.jobs_seen, 4);
        assert_eq!(express.last_event, Some(946_684_800 + 3_600));
    }
}

#[tokio::test]
async fn a_rebuild_hands_every_stored_job_to_its_queue() {
    let db = TestDb::fresh().await;
    let config = Config {
        database_url: db.url().to_string(),
        ..Config::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.swf");
    std::fs::write(&path, crate::http_api::TRACE).unwrap();
    qbets::cli::import::import_file(&config, "test", &path)
        .await
        .unwrap();
    with_store(db.url(), Check).await.unwrap();
}
