//! The `sacct` source against the real accounting of the local Slurm
//! (`scripts/local-slurm` runs slurmdbd on MariaDB; scripts/test starts it and exports
//! its `env`): two dozen short jobs over the `debug` and `long` partitions and one
//! cancelled while pending, read by the real `sacct` command into an SQLite and a
//! PostgreSQL store at once (PostgreSQL when `TEST_DATABASE_URL` is set, as for the
//! other store tests). Each job's submit, start, end, queue, nodes and walltime in the
//! store must equal what slurmrestd reports; the windows must advance from the durable
//! cursor in steps of at most `window_s - overlap_s`; a restart that reads every job
//! again adds nothing and doubles nothing.
//!
//! Waits are polls with deadlines.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbets::sources::sacct::{SacctRunner, Windows};
use qbets::sources::slurm_rest::SlurmRestClient;
use qbets::sources::{Batch, Source, SourceError};
use qbets::store::{JobState, Site, Store, StoreTask, with_store};

use super::sensors::{
    Running, assert_matches_slurm_as, client_config, eventually, live_site, progress, required,
    run_tag, state_of, stored_jobs, submit_jobs,
};
use super::support::TestDb;

/// One poll of the source as the poller made it.
#[derive(Debug, Clone)]
struct Poll {
    cursor_in: Option<i64>,
    now: i64,
    cursor_out: Option<i64>,
    more: bool,
    records: usize,
}

/// The real `sacct` source, with a log of its polls (the poller's cursors in and out).
struct Logged {
    inner: SacctRunner,
    log: Arc<Mutex<Vec<Poll>>>,
}

impl Source for Logged {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn interval(&self) -> Duration {
        self.inner.interval()
    }

    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }

    async fn poll(&mut self, cursor: Option<String>, now: i64) -> Result<Batch, SourceError> {
        let cursor_in = cursor.as_deref().map(|c| c.parse::<i64>().expect("cursor"));
        let batch = self.inner.poll(cursor, now).await?;
        self.log.lock().unwrap().push(Poll {
            cursor_in,
            now,
            cursor_out: batch.cursor.as_deref().map(|c| c.parse().expect("cursor")),
            more: batch.more,
            records: batch.records.len(),
        });
        Ok(batch)
    }
}

const WINDOW_S: i64 = 30;
const OVERLAP_S: i64 = 20;
const BACKFILL_S: i64 = 60;

fn runner(window_s: i64, overlap_s: i64) -> SacctRunner {
    SacctRunner {
        command: vec!["sacct".into()],
        interval: Duration::from_millis(1000),
        windows: Windows {
            window_s,
            overlap_s,
            backfill_s: BACKFILL_S,
        },
        timeout: Duration::from_secs(30),
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The jobs of one run: submitted once, read by every store.
#[derive(Clone)]
struct Jobs {
    ids: BTreeSet<u64>,
    cancelled: u64,
    submitted_at: i64,
}

/// Every job of `jobs` is stored once with the times, queue, nodes and walltime Slurm
/// reports; the cancelled one with no start.
async fn assert_matches_slurm<S: Store>(
    store: &S,
    site: &Site,
    shared: &SlurmRestClient,
    jobs: &Jobs,
) {
    let stored = assert_matches_slurm_as(store, site, shared, &jobs.ids, |id| {
        if id == jobs.cancelled {
            JobState::Cancelled
        } else {
            JobState::Completed
        }
    })
    .await;
    let c = &stored[&jobs.cancelled.to_string()].1;
    assert_eq!(
        (c.start_time, c.end_time.is_some()),
        (None, true),
        "cancelled while pending: never started, ended at the cancel"
    );
}

/// The windows a run of polls asked for advance from the cursor the previous poll left,
/// by at most `window - overlap` while catching up (`more`), and reach `now` at the end.
fn assert_incremental(log: &[Poll], first_cursor: Option<i64>, window: i64, overlap: i64) {
    assert!(!log.is_empty());
    assert_eq!(log[0].cursor_in, first_cursor, "{log:?}");
    let mut prev = first_cursor;
    for p in log {
        assert_eq!(
            p.cursor_in, prev,
            "each poll starts at the stored cursor: {log:?}"
        );
        let from = match p.cursor_in {
            Some(c) => c - overlap,
            None => p.now - BACKFILL_S,
        };
        let to = p.cursor_out.expect("every poll moves the cursor");
        assert_eq!(to, (from + window).min(p.now), "window of {p:?}");
        assert_eq!(p.more, to < p.now, "{p:?}");
        prev = Some(to);
    }
}

struct Both {
    jobs: Jobs,
    other_url: String,
}

impl StoreTask for Both {
    type Output = ();
    async fn run<S: Store>(self, first: S) {
        with_store(
            &self.other_url,
            Second {
                first,
                jobs: self.jobs,
            },
        )
        .await
        .unwrap();
    }
}

struct Second<A> {
    first: A,
    jobs: Jobs,
}

impl<A: Store> StoreTask for Second<A> {
    type Output = ();
    async fn run<S: Store>(self, second: S) {
        tokio::join!(
            sacct_story(&self.first, &self.jobs),
            sacct_story(&second, &self.jobs)
        );
    }
}

async fn sacct_story<S: Store>(store: &S, jobs: &Jobs) {
    let shared = SlurmRestClient::new(&client_config(&required("SLURMRESTD_URL"))).unwrap();
    let site = live_site(store, "acct").await;
    let mut all = jobs.ids.clone();
    all.insert(jobs.cancelled);

    // A first run from no cursor: the backlog since `now - backfill` is read in windows,
    // then the source follows the jobs as they wait, run and end.
    let log = Arc::new(Mutex::new(Vec::new()));
    let run = Running::start(
        store,
        &site,
        Logged {
            inner: runner(WINDOW_S, OVERLAP_S),
            log: log.clone(),
        },
    );
    let seen_running = eventually("every job recorded, and ended", || async {
        let p = progress(store, &site, &all).await;
        if p.2 == all.len() {
            Ok(p)
        } else {
            Err(format!("(stored, started, ended) = {p:?} of {}", all.len()))
        }
    })
    .await;
    assert_eq!(
        seen_running.1,
        jobs.ids.len(),
        "every job but the cancelled started"
    );
    run.stop().await;
    let log = log.lock().unwrap().clone();
    assert_incremental(&log, None, WINDOW_S, OVERLAP_S);
    let catch_up = log.iter().take_while(|p| p.more).count();
    assert!(
        catch_up >= 2,
        "the {BACKFILL_S} s backlog takes several {WINDOW_S} s windows: {log:?}"
    );
    assert!(log.iter().any(|p| p.records > 0), "{log:?}");
    assert_matches_slurm(store, &site, &shared, jobs).await;
    assert!(
        store.rejects(site.id, 0, 10).await.unwrap().is_empty(),
        "sacct's output reads whole"
    );
    let health = state_of(store, &site, "sacct").await.unwrap();
    assert_eq!(health.consecutive_failures, 0, "{health:?}");
    let cursor: i64 = health.cursor.clone().unwrap().parse().unwrap();
    assert_eq!(Some(cursor), log.last().unwrap().cursor_out);

    // A restart goes on from the durable cursor; reaching back over every job (a wider
    // overlap) reads them all again, and that adds nothing and doubles nothing.
    let mine = |all_stored: BTreeMap<String, (String, qbets::store::Job)>| {
        all_stored
            .into_iter()
            .filter(|(id, _)| id.parse().is_ok_and(|id: u64| all.contains(&id)))
            .collect::<BTreeMap<_, _>>()
    };
    let before = mine(stored_jobs(store, &site).await);
    let reach = now() - jobs.submitted_at + 30;
    let log2 = Arc::new(Mutex::new(Vec::new()));
    let run = Running::start(
        store,
        &site,
        Logged {
            inner: runner(2 * reach, reach),
            log: log2.clone(),
        },
    );
    eventually("the restarted source polls twice", || async {
        let n = log2.lock().unwrap().len();
        if n >= 2 {
            Ok(())
        } else {
            Err(format!("{n} polls"))
        }
    })
    .await;
    run.stop().await;
    let log2 = log2.lock().unwrap().clone();
    assert_incremental(&log2, Some(cursor), 2 * reach, reach);
    assert!(
        log2[0].records >= all.len(),
        "the first window after the restart covers every job: {log2:?}"
    );
    // stored_jobs fails on a job stored twice; the store's own ids show no re-insert.
    let after = mine(stored_jobs(store, &site).await);
    assert_eq!(after, before);
    assert!(store.rejects(site.id, 0, 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sacct_reads_the_real_accounting_window_by_window() {
    let _node = crate::support::share_slurm_node().await;
    let shared = super::sensors::pinged_client().await;
    let version = std::process::Command::new("sacct")
        .arg("--version")
        .output()
        .expect("sacct runs (scripts/local-slurm installs it)");
    assert!(version.status.success(), "{version:?}");

    let submitted_at = now();
    let tag = run_tag();
    let ids = submit_jobs(&shared, &tag, 24, 2).await;
    // One more behind them, needing the whole node: it waits, and is cancelled so.
    let cancelled = super::sensors::submit_cancelled_while_pending(&shared, &tag).await;
    let jobs = Jobs {
        ids,
        cancelled,
        submitted_at,
    };

    let sqlite = TestDb::sqlite();
    let other = TestDb::fresh().await;
    let started = std::time::Instant::now();
    with_store(
        sqlite.url(),
        Both {
            jobs,
            other_url: other.url().to_string(),
        },
    )
    .await
    .unwrap();
    eprintln!("sacct story on both stores: {:?}", started.elapsed());
}
