//! The live predictors: a rebuild from the store reaches the replay's final state on a
//! real trace (and records the replay's bound at every submission), and the ingest
//! path — jobs seen pending, then started — leaves a predictor in the state a rebuild
//! from the same stored jobs gives.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::TryStreamExt;
use qbets::config::Config;
use qbets::engine::replay::{ReplayOptions, replay};
use qbets::engine::{JobRecord, JobShape, Status};
use qbets::service::import::to_job;
use qbets::service::{FixedClock, Predictors};
use qbets::store::{
    Job, JobState, NewJob, NewQueue, NewSite, Queue, REBUILD_PAGE, Site, SiteKind, Store,
    StoreTask, stream_jobs, with_store,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
        // An archive answers as of its last record (the site's: job 3 started at
        // +120 s in queue "normal"), whatever the clock says.
        let (a, as_of) = predictors
            .bound("test", "express", JobShape::default(), 0.95, 0.95)
            .unwrap();
        assert_eq!((a.at, as_of), (946_684_800 + 120, 946_684_800 + 120));
        assert_eq!(a.status, Status::InsufficientHistory);
        // Every stored job with a start got its bound at submission.
        let site = store.site("test").await.unwrap().unwrap();
        let queue = store.queue(site.id, "express").await.unwrap().unwrap();
        let jobs: Vec<Job> = stream_jobs(&store, queue.id, 100)
            .try_collect()
            .await
            .unwrap();
        for j in &jobs {
            assert_eq!(
                j.bound_status.as_deref(),
                j.start_time.map(|_| "insufficient_history"),
                "{j:?}"
            );
        }
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

fn trace(name: &str) -> PathBuf {
    let dir = std::env::var_os("QBETS_TRACES")
        .expect("QBETS_TRACES must name the traces directory (scripts/test sets it)");
    let p = PathBuf::from(dir).join(name);
    assert!(p.is_file(), "missing trace {} (QBETS_TRACES)", p.display());
    p
}

/// What the service says about one imported queue, and the bounds it stored.
struct Service {
    site: &'static str,
    queue: String,
    shapes: Vec<JobShape>,
}

type Answers = (
    Vec<qbets::engine::BoundAnswer>,
    Vec<qbets::engine::ClusterInfo>,
    qbets::engine::QueueState,
    i64,
    Vec<(Option<i64>, Option<String>)>,
);

impl StoreTask for Service {
    type Output = Answers;
    async fn run<S: Store>(self, store: S) -> Answers {
        let (p, report) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        assert_eq!(report.bounds_recorded, report.jobs);
        let bounds = self
            .shapes
            .iter()
            .map(|&s| p.bound(self.site, &self.queue, s, 0.95, 0.95).unwrap().0)
            .collect();
        let (clusters, as_of) = p.clusters(self.site, &self.queue).unwrap();
        let (state, _) = p.state(self.site, &self.queue).unwrap();
        let site = store.site(self.site).await.unwrap().unwrap();
        let queue = store.queue(site.id, &self.queue).await.unwrap().unwrap();
        let stored: Vec<Job> = stream_jobs(&store, queue.id, REBUILD_PAGE)
            .try_collect()
            .await
            .unwrap();
        let stored = stored
            .into_iter()
            .map(|j| (j.bound_s, j.bound_status))
            .collect();
        (bounds, clusters, state, as_of, stored)
    }
}

/// Issue 4 item 2: one queue of SDSC Blue Horizon imported through the import path;
/// the rebuilt predictor answers as the replay's final predictor does for the same
/// jobs, at the archive's last record, and the bound stored for each job is the one
/// the replay predicted at its submission.
#[tokio::test]
async fn an_imported_trace_answers_as_the_replay_does() {
    let full = qbets::trace::swf::read_file(&trace("SDSC-BLUE-2000-4.2-cln.swf.gz")).unwrap();
    // Queue 4 ("low"): 18 414 jobs. Header kept, other queues' lines left out.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blue-low.swf");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for c in &full.header.comments {
        writeln!(out, ";{c}").unwrap();
    }
    let records: Vec<_> = full.records.iter().filter(|r| r.queue == 4).collect();
    for r in &records {
        writeln!(out, "{r}").unwrap();
    }
    out.into_inner().unwrap().sync_all().unwrap();

    let db = TestDb::fresh().await;
    let config = Config {
        database_url: db.url().to_string(),
        ..Config::default()
    };
    let summary = qbets::cli::import::import_file(&config, "blue", &path)
        .await
        .unwrap();
    assert_eq!(summary.queues.keys().collect::<Vec<_>>(), ["low"]);

    // The replay's input: the queue's jobs with a known wait (qbets.md §6), those the
    // import stored (it refuses what the schema would, and says so).
    let base = full.header.unix_start_time.unwrap_or(0);
    let jobs: Vec<JobRecord> = records
        .iter()
        .filter(|r| r.wait().is_some() && to_job(r, 1, 1, base).validate().is_ok())
        .map(|r| {
            let j = to_job(r, 1, 1, base);
            JobRecord {
                submit: j.submit_time,
                start: j.start_time,
                shape: JobShape {
                    nodes: j.nodes.map_or(0, |n| n as u64),
                    walltime_s: j.walltime_s.map_or(0, |w| w as u64),
                },
                // The trace's users (SWF field 12), as the import stores them.
                user: u32::try_from(r.user).ok(),
            }
        })
        .collect();
    assert!(jobs.len() > 18_000, "{}", jobs.len());
    let r = replay(&jobs, &ReplayOptions::default(), &mut |_| {}).unwrap();
    let replayed = &r.predictors[0];

    let shapes = vec![
        JobShape {
            nodes: 1,
            walltime_s: 600,
        },
        JobShape {
            nodes: 8,
            walltime_s: 3600,
        },
        JobShape {
            nodes: 64,
            walltime_s: 36_000,
        },
        JobShape {
            nodes: 1024,
            walltime_s: 129_600,
        },
    ];
    let (bounds, clusters, state, as_of, stored) = with_store(
        db.url(),
        Service {
            site: "blue",
            queue: "low".into(),
            shapes: shapes.clone(),
        },
    )
    .await
    .unwrap();
    let last = jobs
        .iter()
        .flat_map(|j| [Some(j.submit), j.start])
        .flatten()
        .max()
        .unwrap();
    assert_eq!(as_of, last, "an archive speaks for its last record");
    for (s, got) in shapes.iter().zip(&bounds) {
        let want = replayed.bound(as_of, *s, 0.95, 0.95);
        assert_eq!(got, &want, "shape {s:?}");
    }
    assert!(bounds.iter().any(|b| b.status == Status::Ok), "{bounds:?}");
    assert_eq!(clusters, replayed.clusters(as_of));
    assert!(clusters.len() > 1, "{clusters:?}");
    assert_eq!(state, replayed.state(as_of));

    // Stored jobs without a wait were never predicted; the others hold the replay's
    // prediction, in the same (submit, arrival) order.
    let predicted: Vec<_> = stored.iter().filter(|(_, s)| s.is_some()).collect();
    assert_eq!(predicted.len(), jobs.len());
    for (k, ((b, s), want)) in predicted.iter().zip(&r.predictions[0]).enumerate() {
        assert_eq!(s.as_deref(), Some(want.status.name()), "job {k}");
        assert_eq!(*b, want.bound_s.map(|v| v as i64), "job {k}");
    }
}

/// A live site of this name with one queue, `batch`, without limits.
async fn live_batch_queue<S: Store>(store: &S, name: &str) -> (Site, Queue) {
    batch_queue_of(store, name, SiteKind::Live).await
}

/// A site `name` of `kind` with a queue `batch`.
async fn batch_queue_of<S: Store>(store: &S, name: &str, kind: SiteKind) -> (Site, Queue) {
    let site = store
        .upsert_site(&NewSite {
            name: name.into(),
            kind,
            description: String::new(),
            time_zone: None,
        })
        .await
        .unwrap();
    let queue = store
        .upsert_queue(
            site.id,
            &NewQueue {
                name: "batch".into(),
                max_walltime_s: None,
                max_nodes: None,
                total_nodes: None,
            },
        )
        .await
        .unwrap();
    (site, queue)
}

/// A one-node, ten-minute job of `queue` as a live sensor reports it: pending until
/// it has a start, running after.
fn one_node(site: &Site, queue: &Queue, id: &str, submit: i64, start: Option<i64>) -> NewJob {
    NewJob {
        user_key: None,
        site_id: site.id,
        queue_id: queue.id,
        job_id: id.into(),
        submit_time: submit,
        start_time: start,
        end_time: None,
        nodes: Some(1),
        walltime_s: Some(600),
        state: if start.is_some() {
            JobState::Running
        } else {
            JobState::Pending
        },
    }
}

/// A live queue fed through the ingest path — each job first seen pending, its start
/// reported later, some reported twice, one cancelled while pending — ends in the
/// state a rebuild from the same stored jobs reaches, and every job has its bound at
/// submission stored once.
struct LiveFeed;

impl StoreTask for LiveFeed {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (site, queue) = live_batch_queue(&store, "live").await;
        let t0 = 1_700_000_000;
        let clock = FixedClock::at(t0);
        let live = Predictors::new().with_clock(Arc::new(clock.clone()));
        let job = |k: i64, start: Option<i64>, state: JobState| NewJob {
            user_key: None,
            site_id: site.id,
            queue_id: queue.id,
            job_id: format!("j{k}"),
            submit_time: t0 + 60 * k,
            start_time: start,
            end_time: None,
            nodes: Some(1 + k % 16),
            walltime_s: Some(600 * (1 + k % 5)),
            state,
        };
        // Waits 0..=299 s with a burst of long ones; job 150 is cancelled.
        let wait = |k: i64| {
            if (100..120).contains(&k) {
                5_000
            } else {
                (k * 37) % 300
            }
        };
        let n = 400;
        let mut started = vec![false; n as usize];
        for k in 0..n {
            let now = t0 + 60 * k;
            clock.set(now);
            let mut batch = vec![job(k, None, JobState::Pending)];
            for j in 0..k {
                let s = t0 + 60 * j + wait(j);
                if j == 150 {
                    if k == 160 {
                        batch.push(NewJob {
                            end_time: Some(now),
                            ..job(j, None, JobState::Cancelled)
                        });
                    }
                } else if !started[j as usize] && s <= now {
                    started[j as usize] = true;
                    batch.push(job(j, Some(s), JobState::Running));
                } else if started[j as usize] && j % 7 == 0 && k % 10 == 0 {
                    // A running job reported again, unchanged: nothing new.
                    batch.push(job(j, Some(s), JobState::Running));
                }
            }
            live.ingest(&store, &site, std::slice::from_ref(&queue), &batch)
                .await
                .unwrap();
        }
        let now = t0 + 60 * n;
        clock.set(now);
        let slot = live.slot("live", "batch").unwrap();
        let pending = started.iter().filter(|s| !**s).count() - 1; // job 150 left
        assert_eq!(slot.pending, pending);
        assert_eq!(
            (slot.rewinds, slot.rebuilds),
            (0, 0),
            "polls in order are fed as they come"
        );

        let (rebuilt, report) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        assert_eq!(report.bounds_recorded, 0, "every bound stored at ingest");
        let rebuilt = rebuilt.with_clock(Arc::new(clock.clone()));
        for s in [
            JobShape {
                nodes: 1,
                walltime_s: 600,
            },
            JobShape {
                nodes: 16,
                walltime_s: 3000,
            },
        ] {
            let a = live.bound("live", "batch", s, 0.95, 0.95).unwrap();
            assert_eq!(a, rebuilt.bound("live", "batch", s, 0.95, 0.95).unwrap());
            assert_eq!(a.1, now, "a live site speaks for now");
            assert_eq!(a.0.status, Status::Ok);
        }
        assert_eq!(
            live.clusters("live", "batch"),
            rebuilt.clusters("live", "batch")
        );
        let (state, _) = live.state("live", "batch").unwrap();
        assert_eq!(Some((state.clone(), now)), rebuilt.state("live", "batch"));
        assert_eq!(state.pending, pending);
        assert_eq!(
            state.observed,
            started.iter().filter(|s| **s).count() as u64
        );

        let jobs: Vec<Job> = stream_jobs(&store, queue.id, 1000)
            .try_collect()
            .await
            .unwrap();
        assert_eq!(jobs.len(), n as usize);
        assert!(jobs.iter().all(|j| j.bound_status.is_some()), "{jobs:?}");
        // The first jobs had no history; later ones got a number.
        assert_eq!(
            jobs[0].bound_status.as_deref(),
            Some("insufficient_history")
        );
        assert!(jobs[n as usize - 1].bound_s.is_some());
    }
}

#[tokio::test]
async fn live_ingest_matches_a_rebuild_from_the_same_jobs() {
    let db = TestDb::fresh().await;
    with_store(db.url(), LiveFeed).await.unwrap();
}

/// A job Slurm requeues comes back with a new submit time under the same id: the
/// ingest path takes it as a new arrival (its bound recorded at the new submission)
/// whose later start is a new wait — whether the sensor saw its first run or the
/// requeue happened between two polls — never as a late change of the first run.
struct Requeue;

impl StoreTask for Requeue {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (site, queue) = live_batch_queue(&store, "requeue").await;
        let t0 = 1_700_000_000;
        let clock = FixedClock::at(t0);
        let live = Predictors::new().with_clock(Arc::new(clock.clone()));
        let job = |id: &str, submit: i64, start: Option<i64>| {
            one_node(&site, &queue, id, t0 + submit, start.map(|s| t0 + s))
        };
        let poll = |at: i64, batch: Vec<NewJob>| {
            clock.set(t0 + at);
            let (live, store, site, queue) = (&live, &store, &site, &queue);
            async move {
                live.ingest(store, site, std::slice::from_ref(queue), &batch)
                    .await
                    .unwrap();
                let (state, _) = live.state("requeue", "batch").unwrap();
                (state.pending, state.observed)
            }
        };
        let stored = |id: &'static str| {
            let store = &store;
            async move {
                let jobs: Vec<Job> = stream_jobs(store, queue.id, 100)
                    .try_collect()
                    .await
                    .unwrap();
                let j = jobs.into_iter().find(|j| j.job_id == id).unwrap();
                (
                    j.submit_time - t0,
                    j.start_time.map(|s| s - t0),
                    j.bound_status.is_some(),
                )
            }
        };

        // a: seen pending, running, requeued (pending again), running again.
        // b: seen pending; its run and requeue fall between two polls.
        assert_eq!(
            poll(0, vec![job("a", 0, None), job("b", 5, None)]).await,
            (2, 0)
        );
        assert_eq!(poll(10, vec![job("a", 0, Some(10))]).await, (1, 1));
        assert_eq!(
            poll(100, vec![job("a", 100, None), job("b", 90, None)]).await,
            (2, 1),
            "both are pending again, as new submissions"
        );
        assert_eq!(stored("a").await, (100, None, true));
        assert_eq!(stored("b").await, (90, None, true));
        assert_eq!(
            poll(130, vec![job("a", 100, Some(130)), job("b", 90, Some(120))]).await,
            (0, 3),
            "a's two waits and b's second (its first run was never seen)"
        );
        assert_eq!(stored("a").await, (100, Some(130), true));
        // The same news again changes nothing.
        assert_eq!(
            poll(140, vec![job("a", 100, Some(130)), job("b", 90, Some(120))]).await,
            (0, 3)
        );
    }
}

#[tokio::test]
async fn a_requeued_job_is_a_new_arrival() {
    let db = TestDb::fresh().await;
    with_store(db.url(), Requeue).await.unwrap();
}

/// A query on a live site tests its pending jobs against their bounds only up to the
/// news stored: a job still pending at the last poll may have started since, and the
/// next poll says so. Counting it as waiting past its bound at the query's instant
/// would be a change point the replay of the same records never sees.
struct NoNewsNoExceedance;

impl StoreTask for NoNewsNoExceedance {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (site, queue) = live_batch_queue(&store, "quiet").await;
        let t0 = 1_700_000_000;
        let clock = FixedClock::at(t0);
        let live = Predictors::new().with_clock(Arc::new(clock.clone()));
        let job = |k: i64, start: Option<i64>| {
            one_node(&site, &queue, &format!("j{k}"), t0 + 60 * k, start)
        };
        // 200 jobs that each waited 20–50 s: a bound well under 5 minutes.
        let history: Vec<NewJob> = (0..200)
            .map(|k| job(k, Some(t0 + 60 * k + 20 + k % 31)))
            .collect();
        let polled = t0 + 60 * 200;
        clock.set(polled);
        live.ingest(&store, &site, std::slice::from_ref(&queue), &history)
            .await
            .unwrap();
        live.heard_until(&site, polled);
        let shape = JobShape {
            nodes: 1,
            walltime_s: 600,
        };
        let bound = live
            .bound("quiet", "batch", shape, 0.95, 0.95)
            .unwrap()
            .0
            .bound_s
            .unwrap();
        assert!(bound < 300, "{bound}");
        // Job 200 is seen pending at the next poll; then no news for an hour.
        let pending = job(200, None);
        let poll = pending.submit_time + 1;
        clock.set(poll);
        live.ingest(&store, &site, std::slice::from_ref(&queue), &[pending])
            .await
            .unwrap();
        live.heard_until(&site, poll);
        clock.set(poll + 3600);
        let (state, at) = live.state("quiet", "batch").unwrap();
        assert_eq!(at, poll + 3600, "the answer speaks for now");
        assert_eq!(
            (state.pending, state.censored),
            (1, 0),
            "no news, no exceedance"
        );
        // The next poll says it is still pending: now it has waited past its bound.
        live.heard_until(&site, poll + 3600);
        let (state, _) = live.state("quiet", "batch").unwrap();
        assert_eq!((state.pending, state.censored), (1, 1));
    }
}

#[tokio::test]
async fn a_query_does_not_count_a_wait_past_its_bound_before_the_news_that_could_end_it() {
    let db = TestDb::fresh().await;
    with_store(db.url(), NoNewsNoExceedance).await.unwrap();
}

/// How a sensor reports a job: at its start (a PBS `S` record: the submission comes with
/// the start), or at its end (an SGE accounting line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReportedAt {
    Start,
    End,
}

/// A live queue fed by a sensor that hears of a job only once it has started (or ended):
/// each poll names submissions made before starts already heard of. Such a batch cannot
/// be fed on top of what the predictor was told; it is wound back and handed the events
/// again in the replay's order (or built again from the store, when the news is later
/// than ever). It ends in the state a rebuild from the same stored jobs reaches, and
/// every job's bound at submission is the replay's of the stored jobs — not one
/// predicted with starts the replay would not have seen yet.
struct LateNews(ReportedAt);

impl StoreTask for LateNews {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let name = match self.0 {
            ReportedAt::Start => "pbs",
            ReportedAt::End => "sge",
        };
        let (site, queue) = live_batch_queue(&store, name).await;
        let t0 = 1_700_000_000;
        // 2,400 jobs of many shapes (re-clustered every 1,000 waits), waits growing with
        // the size, a burst of long waits from job 1,200 on.
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let mut next = move |m: u64| rng.random_range(0..m);
        let mut submit = t0;
        // Users: the burst is one user's (an array); the rest spread over seven.
        let user = |k: usize| if (1200..1300).contains(&k) { 99 } else { k % 7 };
        let jobs: Vec<(String, i64, i64, i64, i64, i64)> = (0..2400)
            .map(|k| {
                submit += 30 + next(120) as i64;
                let nodes = 1i64 << next(8);
                let walltime = [600, 3600, 14_400, 43_200][next(4) as usize];
                let burst = if (1200..1300).contains(&k) { 20_000 } else { 0 };
                let wait = burst + next(60 + 40 * nodes as u64) as i64;
                let run = 1 + next(walltime as u64) as i64;
                (
                    format!("{k}.server"),
                    submit,
                    submit + wait,
                    submit + wait + run,
                    nodes,
                    walltime,
                )
            })
            .collect();
        let clock = FixedClock::at(t0);
        let live = Predictors::new().with_clock(Arc::new(clock.clone()));
        let last = jobs.iter().map(|j| j.3).max().unwrap();
        let mut polled = t0;
        while polled < last {
            let now = polled + 900;
            let batch: Vec<NewJob> = jobs
                .iter()
                .filter(|j| {
                    let at = if self.0 == ReportedAt::Start {
                        j.2
                    } else {
                        j.3
                    };
                    polled < at && at <= now
                })
                .map(|(id, submit, start, end, nodes, walltime)| NewJob {
                    user_key: Some(format!(
                        "u{}",
                        user(id.trim_end_matches(".server").parse().unwrap())
                    )),
                    site_id: site.id,
                    queue_id: queue.id,
                    job_id: id.clone(),
                    submit_time: *submit,
                    start_time: Some(*start),
                    end_time: (self.0 == ReportedAt::End).then_some(*end),
                    nodes: Some(*nodes),
                    walltime_s: Some(*walltime),
                    state: match self.0 {
                        ReportedAt::Start => JobState::Running,
                        ReportedAt::End => JobState::Completed,
                    },
                })
                .collect();
            clock.set(now);
            live.ingest(&store, &site, std::slice::from_ref(&queue), &batch)
                .await
                .unwrap();
            live.heard_until(&site, now);
            polled = now;
        }
        let slot = live.slot(name, "batch").unwrap();
        // Wound back on most polls; built again from the store only when news came
        // later than ever before (the first late poll, the burst).
        assert!(slot.rewinds > 100, "{slot:?}");
        assert!((1..=6).contains(&slot.rebuilds), "{slot:?}");
        assert_eq!(slot.pending, 0);

        let (rebuilt, report) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        assert_eq!(report.bounds_recorded, 0, "every bound stored");
        let rebuilt = rebuilt.with_clock(Arc::new(clock.clone()));
        rebuilt.heard_until(&site, polled);
        for nodes in [1, 8, 128] {
            let s = JobShape {
                nodes,
                walltime_s: 3600,
            };
            let a = live.bound(name, "batch", s, 0.95, 0.95).unwrap();
            assert_eq!(a, rebuilt.bound(name, "batch", s, 0.95, 0.95).unwrap());
            assert_eq!(a.0.status, Status::Ok, "{a:?}");
        }
        let clusters = live.clusters(name, "batch").unwrap();
        assert!(clusters.0.len() > 1, "{clusters:?}");
        assert_eq!(Some(clusters), rebuilt.clusters(name, "batch"));
        assert_eq!(live.state(name, "batch"), rebuilt.state(name, "batch"));

        // Every job's bound at submission is the replay's, over the stored jobs in
        // rebuild order.
        let stored: Vec<Job> = stream_jobs(&store, queue.id, 1000)
            .try_collect()
            .await
            .unwrap();
        assert_eq!(stored.len(), jobs.len());
        let records: Vec<JobRecord> = stored
            .iter()
            .map(|j| JobRecord {
                submit: j.submit_time,
                start: j.start_time,
                shape: qbets::service::predictors::shape_of(j),
                // The same users as numbers: the engine only tells them apart.
                user: j.user_key.as_deref().map(|u| u[1..].parse().unwrap()),
            })
            .collect();
        assert!(records.iter().all(|r| r.user.is_some()));
        let r = replay(&records, &ReplayOptions::default(), &mut |_| {}).unwrap();
        for (j, want) in stored.iter().zip(&r.predictions[0]) {
            assert_eq!(j.bound_status.as_deref(), Some(want.status.name()), "{j:?}");
            assert_eq!(j.bound_s, want.bound_s.map(|v| v as i64), "{j:?}");
        }
        assert!(stored.iter().filter(|j| j.bound_s.is_some()).count() > 2000);
    }
}

#[tokio::test]
async fn jobs_heard_of_at_their_start_are_fed_in_the_replays_order() {
    let db = TestDb::fresh().await;
    with_store(db.url(), LateNews(ReportedAt::Start))
        .await
        .unwrap();
}

#[tokio::test]
async fn jobs_heard_of_at_their_end_are_fed_in_the_replays_order() {
    let db = TestDb::sqlite();
    with_store(db.url(), LateNews(ReportedAt::End))
        .await
        .unwrap();
}

/// A poll in which a job waiting in `debug` starts in `long` (Slurm names the first of
/// a pending job's partitions, and the one it runs in once it runs) while another job
/// starts in `debug` earlier: each queue is handed its part of the poll at once, in
/// order — neither is wound back nor built again.
struct MovedInOnePoll;

impl StoreTask for MovedInOnePoll {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (site, debug) = live_batch_queue(&store, "moves").await;
        let long = store
            .upsert_queue(
                site.id,
                &NewQueue {
                    name: "long".into(),
                    max_walltime_s: None,
                    max_nodes: None,
                    total_nodes: None,
                },
            )
            .await
            .unwrap();
        let t0 = 1_700_000_000;
        let live = Predictors::new().with_clock(Arc::new(FixedClock::at(t0 + 100)));
        let queues = [debug.clone(), long.clone()];
        let pending = [
            one_node(&site, &debug, "x", t0, None),
            one_node(&site, &debug, "y", t0 + 10, None),
        ];
        live.ingest(&store, &site, &queues, &pending).await.unwrap();
        let started = [
            one_node(&site, &long, "x", t0, Some(t0 + 90)),
            one_node(&site, &debug, "y", t0 + 10, Some(t0 + 50)),
        ];
        live.ingest(&store, &site, &queues, &started).await.unwrap();
        for q in ["batch", "long"] {
            let slot = live.slot("moves", q).unwrap();
            assert_eq!(
                (slot.rewinds, slot.rebuilds, slot.pending),
                (0, 0, 0),
                "{q}: {slot:?}"
            );
        }
        let (long_state, _) = live.state("moves", "long").unwrap();
        let (debug_state, _) = live.state("moves", "batch").unwrap();
        assert_eq!((debug_state.observed, long_state.observed), (1, 1));
    }
}

#[tokio::test]
async fn a_poll_that_moves_a_job_hands_each_queue_its_part_in_order() {
    let db = TestDb::sqlite();
    with_store(db.url(), MovedInOnePoll).await.unwrap();
}

/// The stored jobs of `queue` (of site `name`), after checking that the live predictor
/// holds them and no more at `now`: it waits for and has seen start what the store
/// does, and answers as a rebuild from the store.
async fn assert_holds_what_the_store_holds<S: Store>(
    store: &S,
    live: &Predictors,
    name: &str,
    queue: &Queue,
    now: i64,
) -> Vec<Job> {
    let jobs: Vec<Job> = stream_jobs(store, queue.id, 1000)
        .try_collect()
        .await
        .unwrap();
    let (rebuilt, report) = Predictors::rebuild(store, |_| {}).await.unwrap();
    assert_eq!(report.bounds_recorded, 0, "every bound stored at ingest");
    let rebuilt = rebuilt.with_clock(Arc::new(FixedClock::at(now)));
    let (state, at) = live.state(name, "batch").unwrap();
    assert_eq!(at, now);
    let started = jobs.iter().filter(|j| j.start_time.is_some()).count();
    assert_eq!(
        (state.observed, state.pending),
        (started as u64, jobs.len() - started),
        "the predictor holds what the store holds"
    );
    assert_eq!(Some((state, now)), rebuilt.state(name, "batch"));
    for s in [
        JobShape {
            nodes: 1,
            walltime_s: 600,
        },
        JobShape {
            nodes: 8,
            walltime_s: 3000,
        },
    ] {
        assert_eq!(
            live.bound(name, "batch", s, 0.95, 0.95).unwrap(),
            rebuilt.bound(name, "batch", s, 0.95, 0.95).unwrap()
        );
    }
    assert_eq!(
        live.clusters(name, "batch"),
        rebuilt.clusters(name, "batch")
    );
    jobs
}

/// Makes the store refuse to insert the job `job_id` (a trigger raises), so a batch
/// carrying it fails after the predictors were handed it; `None` lifts that.
async fn refuse_insert_of(url: &str, job_id: Option<&str>) {
    use sqlx::Connection;
    let sql = match (url.starts_with("sqlite:"), job_id) {
        (true, Some(id)) => format!(
            "CREATE TRIGGER refuse BEFORE INSERT ON jobs WHEN NEW.job_id = '{id}' \
             BEGIN SELECT RAISE(ABORT, 'refused for the test'); END;"
        ),
        (true, None) => "DROP TRIGGER refuse;".into(),
        (false, Some(id)) => format!(
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN \
               IF NEW.job_id = '{id}' THEN RAISE EXCEPTION 'refused for the test'; END IF; \
               RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER refuse BEFORE INSERT ON jobs \
               FOR EACH ROW EXECUTE FUNCTION refuse();"
        ),
        (false, None) => "DROP TRIGGER refuse ON jobs; DROP FUNCTION refuse();".into(),
    };
    if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut c)
            .await
            .unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut c)
            .await
            .unwrap();
    }
}

/// Batches the store did not take after the predictor was handed them — one the
/// source never sends again, one it sends again — leave no trace in the predictor: it
/// is built again from what the store holds before the next batch, and ends where a
/// rebuild from the stored jobs does.
struct UntakenBatches {
    url: String,
}

impl StoreTask for UntakenBatches {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (site, queue) = live_batch_queue(&store, "untaken").await;
        let t0 = 1_700_000_000;
        let clock = FixedClock::at(t0);
        let live = Predictors::new().with_clock(Arc::new(clock.clone()));
        let wait = |k: i64| (k * 37) % 300 + if k % 11 == 0 { 2_000 } else { 0 };
        let (n, lost, again) = (160i64, 60i64, 120i64);
        let mut reported = vec![false; n as usize];
        for k in 0..n {
            let now = t0 + 60 * k;
            clock.set(now);
            let mut batch = vec![one_node(&site, &queue, &format!("j{k}"), now, None)];
            for j in 0..k {
                let s = t0 + 60 * j + wait(j);
                if !reported[j as usize] && s <= now {
                    reported[j as usize] = true;
                    let submit = t0 + 60 * j;
                    batch.push(one_node(&site, &queue, &format!("j{j}"), submit, Some(s)));
                }
            }
            if k == lost || k == again {
                refuse_insert_of(&self.url, Some(&format!("j{k}"))).await;
                let refused = live
                    .ingest(&store, &site, std::slice::from_ref(&queue), &batch)
                    .await;
                assert!(refused.is_err(), "batch {k} was refused: {refused:?}");
                refuse_insert_of(&self.url, None).await;
                if k == lost {
                    // Never sent again: its starts are not heard of either.
                    continue;
                }
            }
            live.ingest(&store, &site, std::slice::from_ref(&queue), &batch)
                .await
                .unwrap();
        }
        let now = t0 + 60 * n;
        clock.set(now);
        let jobs = assert_holds_what_the_store_holds(&store, &live, "untaken", &queue, now).await;
        // The lost batch's new job came back with its start; the starts it carried
        // were never heard of again: those jobs are still waiting as far as anyone knows.
        assert_eq!(jobs.len(), n as usize);
        let slot = live.slot("untaken", "batch").unwrap();
        assert_eq!(
            (slot.rewinds, slot.rebuilds),
            (0, 3),
            "built again after each refused batch, and once the lost batch's job came \
             back late with its start"
        );
    }
}

#[tokio::test]
async fn batches_the_store_did_not_take_leave_no_trace_in_the_predictor_on_sqlite() {
    let db = TestDb::sqlite();
    let url = db.url().to_string();
    with_store(db.url(), UntakenBatches { url }).await.unwrap();
}

#[tokio::test]
async fn batches_the_store_did_not_take_leave_no_trace_in_the_predictor_on_postgres() {
    let admin = crate::support::postgres_url()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    let url = db.url().to_string();
    with_store(db.url(), UntakenBatches { url }).await.unwrap();
}

/// A batch the store refused leaves an archive's latest event — the instant its
/// answers speak for — where the stored jobs put it, not at a job it never held; sent
/// again and taken, the batch moves it on.
struct UntakenArchiveBatch {
    url: String,
}

impl StoreTask for UntakenArchiveBatch {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let (site, queue) = batch_queue_of(&store, "archive-untaken", SiteKind::Archive).await;
        let done = |id: &str, submit: i64, wait: i64| NewJob {
            end_time: Some(submit + wait + 300),
            state: JobState::Completed,
            ..one_node(&site, &queue, id, submit, Some(submit + wait))
        };
        let t0 = 1_600_000_000;
        let history: Vec<NewJob> = (0..80)
            .map(|k| done(&format!("j{k}"), t0 + 60 * k, (k * 41) % 500))
            .collect();
        let live = Predictors::new();
        let queues = std::slice::from_ref(&queue);
        live.ingest(&store, &site, queues, &history).await.unwrap();
        let held = store.site_last_event(site.id).await.unwrap();
        assert!(held.is_some());
        assert_eq!(live.as_of("archive-untaken"), held);

        let late = [done("late", t0 + 86_400, 120)];
        refuse_insert_of(&self.url, Some("late")).await;
        let refused = live.ingest(&store, &site, queues, &late).await;
        assert!(refused.is_err(), "the batch was refused: {refused:?}");
        refuse_insert_of(&self.url, None).await;
        assert_eq!(store.site_last_event(site.id).await.unwrap(), held);
        assert_eq!(
            live.as_of("archive-untaken"),
            held,
            "the archive speaks for the jobs stored, not for the one refused"
        );
        let (rebuilt, _) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        assert_eq!(
            live.state("archive-untaken", "batch"),
            rebuilt.state("archive-untaken", "batch")
        );

        live.ingest(&store, &site, queues, &late).await.unwrap();
        assert_eq!(live.as_of("archive-untaken"), Some(t0 + 86_400 + 120));
        assert_eq!(
            store.site_last_event(site.id).await.unwrap(),
            live.as_of("archive-untaken")
        );
    }
}

#[tokio::test]
async fn a_batch_the_store_did_not_take_leaves_an_archive_as_of_its_stored_jobs_on_sqlite() {
    let db = TestDb::sqlite();
    let url = db.url().to_string();
    with_store(db.url(), UntakenArchiveBatch { url })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_batch_the_store_did_not_take_leaves_an_archive_as_of_its_stored_jobs_on_postgres() {
    let admin = crate::support::postgres_url()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    let url = db.url().to_string();
    with_store(db.url(), UntakenArchiveBatch { url })
        .await
        .unwrap();
}

/// A push whose caller gives up while the store waits to write it (the HTTP handler's
/// future dropped mid-transaction, which rolls back) leaves no trace in the predictor
/// either: the table is locked by another session so that the write waits; the batch
/// is dropped once the predictor holds its new job, and never sent again.
#[tokio::test]
async fn a_batch_given_up_while_the_store_writes_it_leaves_no_trace_in_the_predictor() {
    use sqlx::Connection;
    let admin = crate::support::postgres_url()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    let store = qbets::store::PgStore::connect(db.url()).await.unwrap();
    store.migrate().await.unwrap();
    let (site, queue) = live_batch_queue(&store, "given-up").await;
    let t0 = 1_700_000_000;
    let clock = FixedClock::at(t0);
    let live = Predictors::new().with_clock(Arc::new(clock.clone()));
    let wait = |k: i64| (k * 53) % 400;
    let (n, given_up) = (90i64, 45i64);
    // Job 45 is never heard of again: only the predictor could remember it.
    let mut reported: Vec<bool> = (0..n).map(|k| k == given_up).collect();
    let pending = |live: &Predictors| live.state("given-up", "batch").map(|(s, _)| s.pending);
    for k in 0..n {
        let now = t0 + 60 * k;
        clock.set(now);
        let arrival = one_node(&site, &queue, &format!("j{k}"), now, None);
        if k == given_up {
            let before = pending(&live);
            let mut locker = sqlx::PgConnection::connect(db.url()).await.unwrap();
            sqlx::raw_sql("BEGIN; LOCK TABLE jobs IN SHARE MODE;")
                .execute(&mut locker)
                .await
                .unwrap();
            let batch = [arrival];
            let ingest = live.ingest(&store, &site, std::slice::from_ref(&queue), &batch);
            tokio::select! {
                done = ingest => panic!("the write went through a locked table: {done:?}"),
                () = async {
                    while pending(&live) == before {
                        tokio::task::yield_now().await;
                    }
                } => {}
            }
            sqlx::raw_sql("ROLLBACK;")
                .execute(&mut locker)
                .await
                .unwrap();
            continue;
        }
        let mut batch = vec![arrival];
        for j in 0..k {
            let s = t0 + 60 * j + wait(j);
            if !reported[j as usize] && s <= now {
                reported[j as usize] = true;
                batch.push(one_node(
                    &site,
                    &queue,
                    &format!("j{j}"),
                    t0 + 60 * j,
                    Some(s),
                ));
            }
        }
        live.ingest(&store, &site, std::slice::from_ref(&queue), &batch)
            .await
            .unwrap();
    }
    let now = t0 + 60 * n;
    clock.set(now);
    let jobs = assert_holds_what_the_store_holds(&store, &live, "given-up", &queue, now).await;
    assert_eq!(jobs.len(), n as usize - 1, "all but the job given up");
}
