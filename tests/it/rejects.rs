//! Records kept aside are kept once each, on both backends: the same bad record
//! received again — a file read again from its start (a lost cursor, a re-import), a
//! slurmrestd poll repeated after a restart — adds nothing, while bad lines at the same
//! line number of two PBS daily files are both kept (line numbers restart each day).

use std::time::Duration;

use qbets::config::IngestConfig;
use qbets::service::Predictors;
use qbets::service::ingest::ingest;
use qbets::sources::pbs::PbsFollower;
use qbets::sources::{JobRecord, RecordReject, Source};
use qbets::store::{JobState, NewSite, SiteKind, Store, StoreTask, with_store};

use crate::support::TestDb;

const NOW: i64 = 1_704_153_600;

fn pbs_start(id: u32, qtime: i64) -> String {
    format!(
        "01/01/2024 00:00:00;S;{id}.pbs;user=u queue=workq qtime={qtime} start={} \
         Resource_List.nodect=1 Resource_List.walltime=00:30:00\n",
        qtime + 60
    )
}

struct Story;

impl StoreTask for Story {
    type Output = ();

    async fn run<S: Store>(self, store: S) {
        let site = store
            .upsert_site(&NewSite {
                name: "torque".into(),
                kind: SiteKind::Live,
                description: String::new(),
                time_zone: None,
            })
            .await
            .unwrap();
        let predictors = Predictors::new();
        let dir = tempfile::tempdir().unwrap();
        let t = 1_704_067_200;
        for (day, bad) in [
            ("20240101", "garbage of day one"),
            ("20240102", "garbage of day two"),
        ] {
            std::fs::write(
                dir.path().join(day),
                [pbs_start(1, t), format!("{bad}\n")].concat(),
            )
            .unwrap();
        }
        let mut follower = PbsFollower {
            dir: dir.path().to_path_buf(),
            interval: Duration::from_secs(1),
        };
        // Read everything twice from the start: the second pass is a lost cursor.
        for pass in 0..2 {
            let mut cursor = None;
            let mut polls = 0;
            loop {
                let batch = follower.poll(cursor, NOW).await.unwrap();
                ingest(
                    &store,
                    &predictors,
                    &site,
                    "pbs",
                    &batch.records,
                    &batch.rejects,
                    0,
                    &IngestConfig::default(),
                    NOW,
                )
                .await
                .unwrap();
                cursor = batch.cursor;
                polls += 1;
                assert!(polls < 10, "pass {pass}: the follower never finished");
                if !batch.more && cursor.as_deref().is_some_and(|c| c.contains("20240102")) {
                    break;
                }
            }
        }
        let kept = store.rejects(site.id, 0, 100).await.unwrap();
        let raws: Vec<&str> = kept.iter().map(|r| r.raw.as_str()).collect();
        assert_eq!(kept.len(), 2, "{raws:?}");
        assert!(
            raws[0].starts_with("20240101:2: garbage of day one"),
            "{raws:?}"
        );
        assert!(
            raws[1].starts_with("20240102:2: garbage of day two"),
            "{raws:?}"
        );
        assert!(kept.iter().all(|r| r.line == Some(2)));

        // A record without a line (a slurmrestd job that cannot be read), reported by
        // a poll and again by the first poll after a restart; and another one.
        let bad = |raw: &str| RecordReject {
            line: None,
            raw: raw.into(),
            reason: "job_state: unknown".into(),
        };
        let report = async |raw: &str| {
            let out = ingest(
                &store,
                &predictors,
                &site,
                "slurm",
                &[],
                &[bad(raw)],
                0,
                &IngestConfig::default(),
                NOW,
            )
            .await
            .unwrap();
            (out.rejected, out.rejects_new)
        };
        // Each report names the record; only the first counts it as new.
        assert_eq!(report("job 7: {\"job_state\":\"?\"}").await, (1, 1));
        assert_eq!(report("job 7: {\"job_state\":\"?\"}").await, (1, 0));
        assert_eq!(report("job 8: {\"job_state\":\"?\"}").await, (1, 1));
        let kept = store.rejects(site.id, 0, 100).await.unwrap();
        let slurm: Vec<&str> = kept
            .iter()
            .filter(|r| r.source == "slurm")
            .map(|r| r.raw.as_str())
            .collect();
        assert_eq!(
            slurm,
            [
                "job 7: {\"job_state\":\"?\"}",
                "job 8: {\"job_state\":\"?\"}"
            ]
        );

        // A record of a scheduler whose clock runs a day ahead: kept aside with why,
        // not stored; ten minutes ahead is clock skew, stored.
        let ahead = |id: &str, start: i64| JobRecord {
            user: None,
            job_id: id.into(),
            queue: "workq".into(),
            submit_time: NOW - 60,
            start_time: Some(start),
            end_time: None,
            nodes: Some(1),
            walltime_s: Some(600),
            state: JobState::Running,
        };
        let out = ingest(
            &store,
            &predictors,
            &site,
            "slurm",
            &[ahead("9", NOW + 86_400), ahead("10", NOW + 600)],
            &[],
            0,
            &IngestConfig::default(),
            NOW,
        )
        .await
        .unwrap();
        assert_eq!((out.valid, out.rejected), (1, 1), "{out:?}");
        let kept = store.rejects(site.id, 0, 100).await.unwrap();
        let last = kept.last().unwrap();
        assert!(
            last.reason
                .contains("start 2024-01-03T00:00:00Z is later than the service's clock"),
            "{last:?}"
        );
        let stored = qbets::store::stream_jobs(
            &store,
            store.queue(site.id, "workq").await.unwrap().unwrap().id,
            100,
        );
        let ids: Vec<String> = futures_util::TryStreamExt::try_collect::<Vec<_>>(stored)
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.job_id)
            .collect();
        assert!(
            ids.contains(&"10".to_string()) && !ids.contains(&"9".to_string()),
            "{ids:?}"
        );
    }
}

#[tokio::test]
async fn a_bad_record_is_kept_once_and_same_numbered_lines_of_two_files_both() {
    let db = TestDb::fresh().await;
    with_store(db.url(), Story).await.unwrap();
}
