//! The `slurmdb_rest` source against the real accounting of the local Slurm
//! (slurmrestd with its `openapi/slurmdbd` plugin over slurmdbd on MariaDB; scripts/test
//! runs this on Slurm 22.05, API v0.0.38, and again on Slurm 26.05, v0.0.45): a handful
//! of short jobs over both partitions and one cancelled while pending, read over REST
//! and by the real `sacct` command for the same window — the records are equal job for
//! job, users included — and the source, run by the service's poller into a store,
//! stores every job once with what slurmrestd reports, and the partitions' limits.
//!
//! Waits are polls with deadlines.

use std::collections::BTreeSet;
use std::time::Duration;

use qbets::sources::sacct::{SacctRunner, Windows};
use qbets::sources::slurm_poll::SlurmdbRestPoller;
use qbets::sources::slurm_rest::SlurmRestClient;
use qbets::sources::{JobRecord, Source};
use qbets::store::{JobState, Store, StoreTask, with_store};

use super::sensors::{
    Running, assert_matches_slurm_as, client_config, eventually, live_site, required, run_tag,
    state_of,
};
use super::support::TestDb;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The jobs of the run.
#[derive(Clone)]
struct Jobs {
    ids: BTreeSet<u64>,
    cancelled: u64,
    /// Reaching back this far covers them all.
    backfill_s: i64,
}

/// `ids`' records in a batch's, by job id.
fn mine(records: Vec<JobRecord>, ids: &BTreeSet<u64>) -> Vec<JobRecord> {
    let mut v: Vec<JobRecord> = records
        .into_iter()
        .filter(|r| r.job_id.parse::<u64>().is_ok_and(|id| ids.contains(&id)))
        .collect();
    v.sort_by_key(|r| r.job_id.parse::<u64>().unwrap());
    v
}

/// One window reaching back past the run's first submission; the real defaults'
/// day-long window and ten-minute overlap.
fn windows(backfill_s: i64) -> Windows {
    Windows {
        window_s: 86_400,
        overlap_s: 600,
        backfill_s,
    }
}

fn poller(backfill_s: i64) -> SlurmdbRestPoller {
    SlurmdbRestPoller::new(
        &client_config(&required("SLURMRESTD_URL")),
        Duration::from_millis(500),
        windows(backfill_s),
    )
    .unwrap()
}

struct Stored(Jobs);

impl StoreTask for Stored {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let jobs = self.0;
        let site = live_site(&store, "acct-rest").await;
        let running = Running::start(&store, &site, poller(jobs.backfill_s));
        eventually("the slurmdb_rest source stores every job, ended", || {
            let (store, site, ids) = (store.clone(), site.clone(), jobs.ids.clone());
            async move {
                let stored = super::sensors::stored_jobs(&store, &site).await;
                let ended = ids
                    .iter()
                    .filter(|id| {
                        stored
                            .get(&id.to_string())
                            .is_some_and(|(_, j)| j.end_time.is_some())
                    })
                    .count();
                if ended == ids.len() {
                    Ok(())
                } else {
                    Err(format!("{ended} of {} stored and ended", ids.len()))
                }
            }
        })
        .await;
        running.stop().await;
        let shared = SlurmRestClient::new(&client_config(&required("SLURMRESTD_URL"))).unwrap();
        let stored = assert_matches_slurm_as(&store, &site, &shared, &jobs.ids, |id| {
            if id == jobs.cancelled {
                JobState::Cancelled
            } else {
                JobState::Completed
            }
        })
        .await;
        assert_eq!(
            stored[&jobs.cancelled.to_string()].1.start_time,
            None,
            "cancelled while pending: never started"
        );
        // The partitions' limits come from the same slurmrestd.
        for p in shared.partitions().await.unwrap() {
            let q = store.queue(site.id, &p.name).await.unwrap();
            let q = q.unwrap_or_else(|| panic!("partition {} learnt as a queue", p.name));
            assert_eq!(
                (
                    Some(q.max_nodes),
                    Some(q.max_walltime_s),
                    Some(q.total_nodes)
                ),
                (p.max_nodes, p.max_time_s, p.total_nodes),
                "{}",
                p.name
            );
        }
        let health = state_of(&store, &site, "slurmdb_rest").await.unwrap();
        assert_eq!(health.consecutive_failures, 0, "{health:?}");
        assert!(
            health
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("v0.0.")),
            "the health names the API version: {health:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurmdb_rest_reads_the_accounting_as_sacct_does() {
    let _node = crate::support::share_slurm_node().await;
    let shared = super::sensors::pinged_client().await;
    let submitted_at = now();
    let tag = run_tag();
    let mut ids = super::sensors::submit_jobs(&shared, &tag, 6, 1).await;
    // One more needing the whole node: it waits, and is cancelled so.
    let cancelled = super::sensors::submit_cancelled_while_pending(&shared, &tag).await;
    ids.insert(cancelled);
    let backfill_s = now() - submitted_at + 120;

    // Both readers of the same window, once every job has ended in the accounting.
    let mut sacct = SacctRunner {
        command: vec!["sacct".into()],
        interval: Duration::from_secs(1),
        windows: windows(backfill_s),
        timeout: Duration::from_secs(30),
    };
    let mut rest = poller(backfill_s);
    let deadline = std::time::Instant::now() + super::sensors::DEADLINE;
    let (by_sacct, by_rest) = loop {
        let at = now();
        let a = sacct.poll(None, at).await.map_err(|e| e.0);
        let b = rest.poll(None, at).await.map_err(|e| e.0);
        let why = match (a, b) {
            (Ok(a), Ok(b)) => {
                let (a, b) = (mine(a.records, &ids), mine(b.records, &ids));
                let ended = |v: &[JobRecord]| {
                    v.len() == ids.len() && v.iter().all(|r| r.end_time.is_some())
                };
                if ended(&a) && ended(&b) {
                    break (a, b);
                }
                format!(
                    "sacct {} jobs, slurmdb {} of {}",
                    a.len(),
                    b.len(),
                    ids.len()
                )
            }
            (a, b) => format!("sacct {:?}, slurmdb {:?}", a.err(), b.err()),
        };
        assert!(
            std::time::Instant::now() < deadline,
            "both readers see every job ended: {why}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(by_rest, by_sacct, "job for job");
    assert!(by_rest.iter().all(|r| r.user.is_some()), "{by_rest:?}");
    let c = by_rest
        .iter()
        .find(|r| r.job_id == cancelled.to_string())
        .unwrap();
    assert_eq!((c.start_time, c.state), (None, JobState::Cancelled));

    let jobs = Jobs {
        ids,
        cancelled,
        backfill_s,
    };
    let sqlite = TestDb::sqlite();
    with_store(sqlite.url(), Stored(jobs.clone()))
        .await
        .unwrap();
    let other = TestDb::fresh().await;
    with_store(other.url(), Stored(jobs)).await.unwrap();
}
