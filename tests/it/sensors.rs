//! Background sources run by the shared poller against real schedulers and files:
//! - `slurm_rest` against the live local Slurm (`scripts/local-slurm`; scripts/test starts
//!   it and exports its `env`): a few dozen jobs over the `debug` and `long` partitions,
//!   each job's submit, start and walltime in the store checked against what Slurm
//!   reports; slurmrestd stopped mid-run (a private one on its own port, so the shared
//!   one is not disturbed) and restarted, then a private PostgreSQL restarted under the
//!   running ingest: nothing lost, nothing doubled.
//! - a running job requeued with `scontrol requeue`: stored as a new submission.
//! - PBS and SGE accounting files followed across a restart of the poller.
//!
//! Waits are polls with deadlines.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use qbets::service::ingest::{SourceTask, run_source};
use qbets::service::{Predictors, SystemClock};
use qbets::sources::pbs::PbsFollower;
use qbets::sources::sge::SgeFollower;
use qbets::sources::slurm_poll::SlurmRestPoller;
use qbets::sources::slurm_rest::{
    ApiVersionSetting, ClientConfig, JobSubmission, SlurmJob, SlurmRestClient,
};
use qbets::sources::{JobRecord, Source};
use qbets::store::{
    Job, JobState, NewSite, PgStore, Site, SiteKind, SourceState, Store, StoreTask, stream_jobs,
    with_store,
};
use tokio::sync::watch;

use super::support::TestDb;

pub(super) const DEADLINE: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(250);

pub(super) fn required(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: start the local Slurm and export its environment \
             (scripts/local-slurm start && eval \"$(scripts/local-slurm env)\"); scripts/test does both"
        )
    })
}

fn api_version() -> ApiVersionSetting {
    std::env::var("SLURMRESTD_API_VERSION")
        .unwrap_or_else(|_| "v0.0.38".into())
        .parse()
        .expect("SLURMRESTD_API_VERSION")
}

pub(super) fn client_config(url: &str) -> ClientConfig {
    ClientConfig {
        url: url.to_string(),
        api_version: api_version(),
        user: std::env::var("SLURMRESTD_USER").unwrap_or_else(|_| "root".into()),
        token_env: Some("SLURM_JWT".into()),
        token_file: None,
        timeout_s: 10,
        connect_timeout_s: 2,
    }
}

/// A live site of this name in `store`.
pub(super) async fn live_site<S: Store>(store: &S, name: &str) -> Site {
    store
        .upsert_site(&NewSite {
            name: name.into(),
            kind: SiteKind::Live,
            description: String::new(),
            time_zone: None,
        })
        .await
        .unwrap()
}

/// Every stored job of a site, by job id.
pub(super) async fn stored_jobs<S: Store>(
    store: &S,
    site: &Site,
) -> BTreeMap<String, (String, Job)> {
    let mut out = BTreeMap::new();
    for q in store.queue_stats(site.id).await.unwrap() {
        let jobs: Vec<Job> = stream_jobs(store, q.queue.id, 1000)
            .try_collect()
            .await
            .unwrap();
        for j in jobs {
            let prev = out.insert(j.job_id.clone(), (q.queue.name.clone(), j));
            assert!(prev.is_none(), "a job stored twice: {prev:?}");
        }
    }
    out
}

/// A poller running `source` for `site` in the background.
pub(super) struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub(super) fn start<S: Store, Src: Source>(store: &S, site: &Site, source: Src) -> Running {
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(run_source(
            SourceTask {
                store: store.clone(),
                predictors: Arc::new(Predictors::new()),
                clock: Arc::new(SystemClock),
                site: site.clone(),
                name: source.kind().to_string(),
                max_backoff: Duration::from_secs(2),
                shutdown,
                stated: Vec::new(),
            },
            source,
        ));
        Running { stop, task }
    }

    pub(super) async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the poller stops at shutdown")
            .unwrap();
    }
}

/// Polls `check` until it gives a value, failing at the deadline with `what`.
pub(super) async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(why) => assert!(
                start.elapsed() < DEADLINE,
                "{what} within {DEADLINE:?}: {why}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(super) async fn state_of<S: Store>(
    store: &S,
    site: &Site,
    source: &str,
) -> Option<SourceState> {
    store.source_state(site.id, source).await.ok().flatten()
}

// --- file followers -----------------------------------------------------------------

struct Followers;

impl StoreTask for Followers {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        pbs_story(&store).await;
        sge_story(&store).await;
    }
}

fn pbs_line(kind: char, id: u32, qtime: i64, start: i64, end: Option<i64>) -> String {
    let end = end
        .map(|e| format!(" end={e} Exit_status=0"))
        .unwrap_or_default();
    format!(
        "01/01/2024 00:00:00;{kind};{id}.pbs;user=u queue=workq qtime={qtime} start={start} \
         Resource_List.nodect=2 Resource_List.walltime=00:30:00{end}\n"
    )
}

async fn pbs_story<S: Store>(store: &S) {
    let dir = tempfile::tempdir().unwrap();
    let site = live_site(store, "torque").await;
    let t = 1_704_067_200;
    std::fs::write(
        dir.path().join("20240101"),
        [
            pbs_line('S', 1, t, t + 10, None),
            "01/01/2024 00:00:05;Q;2.pbs;queue=workq\n".into(),
            pbs_line('E', 1, t, t + 10, Some(t + 100)),
            "a line no PBS wrote\n".into(),
        ]
        .concat(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("20240102"),
        pbs_line('S', 2, t + 5, t + 200, None),
    )
    .unwrap();
    let follower = || PbsFollower {
        dir: dir.path().to_path_buf(),
        interval: Duration::from_millis(100),
    };
    let run = Running::start(store, &site, follower());
    let cursor_at = |file: &'static str, line: u64| {
        move |s: Option<SourceState>| -> Result<(), String> {
            let c = s
                .as_ref()
                .and_then(|s| s.cursor.clone())
                .unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&c).map_err(|e| format!("{c}: {e}"))?;
            if v["file"] == file && v["line"] == line {
                Ok(())
            } else {
                Err(c)
            }
        }
    };
    eventually("the PBS follower reads both days", || async {
        cursor_at("20240102", 1)(state_of(store, &site, "pbs_accounting").await)
    })
    .await;
    run.stop().await;
    let jobs = stored_jobs(store, &site).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let j1 = &jobs["1.pbs"].1;
    assert_eq!(
        (
            j1.submit_time,
            j1.start_time,
            j1.end_time,
            j1.nodes,
            j1.walltime_s
        ),
        (t, Some(t + 10), Some(t + 100), Some(2), Some(1800))
    );
    let rejects = store.rejects(site.id, 0, 10).await.unwrap();
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(rejects[0].line, Some(4));
    assert!(rejects[0].raw.contains("20240101:4"), "{rejects:?}");

    // A restart resumes where the cursor is: the day's file grew, a new day began.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("20240102"))
        .unwrap();
    std::io::Write::write_all(
        &mut f,
        pbs_line('E', 2, t + 5, t + 200, Some(t + 900)).as_bytes(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("20240103"),
        pbs_line('S', 3, t + 1000, t + 1000, None),
    )
    .unwrap();
    let run = Running::start(store, &site, follower());
    eventually("the PBS follower resumes", || async {
        cursor_at("20240103", 1)(state_of(store, &site, "pbs_accounting").await)
    })
    .await;
    run.stop().await;
    let jobs = stored_jobs(store, &site).await;
    assert_eq!(jobs.keys().collect::<Vec<_>>(), ["1.pbs", "2.pbs", "3.pbs"]);
    assert_eq!(jobs["2.pbs"].1.end_time, Some(t + 900));
    assert_eq!(
        store.rejects(site.id, 0, 10).await.unwrap().len(),
        1,
        "nothing read twice"
    );
    let health = state_of(store, &site, "pbs_accounting").await.unwrap();
    assert_eq!((health.rejected, health.consecutive_failures), (1, 0));
    assert_eq!(health.last_record_at, Some(t + 1000));
}

fn sge_line(id: u32, submit: i64, start: i64, end: i64) -> String {
    format!(
        "all.q:node01:users:alice:job:{id}:sge:0:{submit}:{start}:{end}:0:0:1:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:NONE:defaultdepartment:NONE:4:0:0:0:0:-l h_rt=600:0.000000:NONE:0.000000:0:0\n"
    )
}

async fn sge_story<S: Store>(store: &S) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("accounting");
    let site = live_site(store, "sge").await;
    let t = 1_704_067_200;
    std::fs::write(
        &path,
        format!(
            "# Version: 8.1.9\n{}{}bad:line\n",
            sge_line(1, t, t + 5, t + 50),
            sge_line(2, t, t + 60, t + 70)
        ),
    )
    .unwrap();
    let follower = || SgeFollower {
        path: path.clone(),
        interval: Duration::from_millis(100),
    };
    let run = Running::start(store, &site, follower());
    eventually("the SGE follower reads the file", || async {
        match state_of(store, &site, "sge_accounting").await {
            Some(s) if s.accepted == 2 && s.rejected == 1 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    run.stop().await;
    // A line half-written when the poller stopped is read whole after the restart.
    let line3 = sge_line(3, t + 100, t + 100, t + 160);
    let (head, tail) = line3.split_at(20);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, head.as_bytes()).unwrap();
    let run = Running::start(store, &site, follower());
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::io::Write::write_all(&mut f, tail.as_bytes()).unwrap();
    eventually("the SGE follower resumes", || async {
        match state_of(store, &site, "sge_accounting").await {
            Some(s) if s.accepted == 3 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    run.stop().await;
    let jobs = stored_jobs(store, &site).await;
    assert_eq!(jobs.keys().collect::<Vec<_>>(), ["1", "2", "3"]);
    let j3 = &jobs["3"].1;
    assert_eq!(
        (
            j3.submit_time,
            j3.start_time,
            j3.end_time,
            j3.nodes,
            j3.walltime_s
        ),
        (t + 100, Some(t + 100), Some(t + 160), Some(4), Some(600))
    );
    let rejects = store.rejects(site.id, 0, 10).await.unwrap();
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0].line, Some(4));
}

#[tokio::test]
async fn accounting_files_are_followed_across_restarts() {
    let db = TestDb::fresh().await;
    with_store(db.url(), Followers).await.unwrap();
}

// --- slurm_rest against the live local Slurm ------------------------------------------

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/local-slurm")
}

/// A slurmrestd of this test's own, on a free port, stopped when dropped.
struct PrivateRestd {
    port: u16,
}

impl PrivateRestd {
    fn start() -> PrivateRestd {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = PrivateRestd { port };
        r.up();
        r
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn run(&self, cmd: &str) {
        let out = std::process::Command::new(script())
            .args([cmd, &self.port.to_string()])
            .env_remove("SLURM_JWT")
            .output()
            .expect("scripts/local-slurm runs");
        assert!(
            out.status.success(),
            "local-slurm {cmd} {}: {}",
            self.port,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn up(&self) {
        self.run("restd-start");
    }

    fn down(&self) {
        self.run("restd-stop");
    }
}

impl Drop for PrivateRestd {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .args(["restd-stop", &self.port.to_string()])
            .output();
    }
}

pub(super) fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("qbets-sensors-{}-{nanos}", std::process::id())
}

/// Submits `n` 4-CPU jobs (at most four run at once on the 16-CPU node) over both
/// partitions through the shared slurmrestd; returns their ids.
/// A client of the local slurmrestd that has answered a ping.
pub(super) async fn pinged_client() -> SlurmRestClient {
    let client = SlurmRestClient::new(&client_config(&required("SLURMRESTD_URL"))).unwrap();
    client
        .ping()
        .await
        .unwrap_or_else(|e| panic!("slurmrestd: {e}"));
    client
}

/// One job needing the whole node behind the run's others, so that it waits, and
/// cancelled so: a job the accounting holds without a start.
pub(super) async fn submit_cancelled_while_pending(client: &SlurmRestClient, tag: &str) -> u64 {
    let id = client
        .submit(&JobSubmission {
            name: format!("{tag}-cancelled"),
            partition: Some("long".into()),
            nodes: 1,
            time_limit_s: 600,
            script: "#!/bin/sh\nsleep 1\n".into(),
            working_dir: "/tmp".into(),
            environment: vec![("QBETS_IT_RUN".into(), tag.to_string())],
            cpus_per_task: Some(16),
        })
        .await
        .expect("submit")
        .job_id;
    client.cancel(id).await.expect("cancel");
    id
}

pub(super) async fn submit_jobs(
    client: &SlurmRestClient,
    tag: &str,
    n: u64,
    sleep_s: u64,
) -> BTreeSet<u64> {
    let mut ids = BTreeSet::new();
    for i in 0..n {
        let (partition, limit_s) = if i % 2 == 0 {
            ("debug", 120 + 60 * (i % 5))
        } else {
            ("long", 3_600 + 60 * i)
        };
        let sub = JobSubmission {
            name: format!("{tag}-{i}"),
            partition: Some(partition.into()),
            nodes: 1,
            time_limit_s: limit_s,
            script: format!("#!/bin/sh\nsleep {sleep_s}\n"),
            working_dir: "/tmp".into(),
            environment: vec![("QBETS_IT_RUN".into(), tag.to_string())],
            cpus_per_task: Some(4),
        };
        let id = client
            .submit(&sub)
            .await
            .unwrap_or_else(|e| panic!("submit {i}: {e}"))
            .job_id;
        ids.insert(id);
    }
    ids
}

/// Slurm's own view of the jobs (through the shared slurmrestd).
pub(super) async fn slurm_view(
    client: &SlurmRestClient,
    ids: &BTreeSet<u64>,
) -> HashMap<u64, SlurmJob> {
    let list = client.list_jobs().await.expect("list jobs");
    list.jobs
        .into_iter()
        .filter(|j| ids.contains(&j.job_id))
        .map(|j| (j.job_id, j))
        .collect()
}

/// How many of `ids` the store holds, and how many of those have started / ended.
pub(super) async fn progress<S: Store>(
    store: &S,
    site: &Site,
    ids: &BTreeSet<u64>,
) -> (usize, usize, usize) {
    let jobs = stored_jobs(store, site).await;
    let mine: Vec<&Job> = ids
        .iter()
        .filter_map(|id| jobs.get(&id.to_string()).map(|(_, j)| j))
        .collect();
    (
        mine.len(),
        mine.iter().filter(|j| j.start_time.is_some()).count(),
        mine.iter().filter(|j| j.end_time.is_some()).count(),
    )
}

/// Every job is stored once, in the state `want` gives it, with the submit, start,
/// end, walltime, nodes and partition Slurm reports.
pub(super) async fn assert_matches_slurm_as<S: Store>(
    store: &S,
    site: &Site,
    client: &SlurmRestClient,
    ids: &BTreeSet<u64>,
    want: impl Fn(u64) -> JobState,
) -> BTreeMap<String, (String, Job)> {
    let truth = slurm_view(client, ids).await;
    assert_eq!(truth.len(), ids.len(), "Slurm still lists every job");
    let stored = stored_jobs(store, site).await;
    for id in ids {
        let s = &truth[id];
        let (queue, j) = stored
            .get(&id.to_string())
            .unwrap_or_else(|| panic!("job {id} was lost"));
        assert_eq!(queue, &s.partition, "job {id} queue");
        assert_eq!(Some(j.submit_time), s.submit_time, "job {id} submit");
        assert_eq!(j.start_time, s.start_time, "job {id} start");
        assert_eq!(j.end_time, s.end_time, "job {id} end");
        assert_eq!(
            j.walltime_s.map(|w| w as u64),
            s.time_limit_s,
            "job {id} walltime"
        );
        assert_eq!(j.nodes, s.node_count.map(i64::from), "job {id} nodes");
        assert_eq!(j.state, want(*id), "job {id}");
    }
    stored
}

/// Every job is stored once, finished, with what Slurm reports.
async fn assert_matches_slurm<S: Store>(
    store: &S,
    site: &Site,
    client: &SlurmRestClient,
    ids: &BTreeSet<u64>,
) {
    assert_matches_slurm_as(store, site, client, ids, |_| JobState::Completed).await;
}

struct SlurmOutage;

impl StoreTask for SlurmOutage {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        slurm_outage_story(&store).await;
    }
}

async fn slurm_outage_story<S: Store>(store: &S) {
    let shared = SlurmRestClient::new(&client_config(&required("SLURMRESTD_URL"))).unwrap();
    shared
        .ping()
        .await
        .unwrap_or_else(|e| panic!("slurmrestd: {e}"));
    let restd = PrivateRestd::start();
    let site = live_site(store, "slurm").await;
    // Two jobs stored as open that Slurm does not hold (they left it while the service
    // was away, longer than MinJobAge): the first whole listing closes them.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - 3600;
    let stale = |id: &str, start: Option<i64>| JobRecord {
        user: None,
        job_id: id.into(),
        queue: "debug".into(),
        submit_time: t,
        start_time: start,
        end_time: None,
        nodes: Some(1),
        walltime_s: Some(600),
        state: if start.is_some() {
            JobState::Running
        } else {
            JobState::Pending
        },
    };
    qbets::service::ingest::ingest(
        store,
        &Predictors::new(),
        &site,
        "earlier",
        &[stale("900000001", None), stale("900000002", Some(t + 60))],
        &[],
        0,
        &qbets::config::IngestConfig::default(),
        t + 120,
    )
    .await
    .unwrap();
    // `api_version = "auto"`: the source asks the daemon which versions it serves.
    let auto = ClientConfig {
        api_version: ApiVersionSetting::Auto,
        ..client_config(&restd.url())
    };
    let poller = SlurmRestPoller::new(&auto, Duration::from_millis(500)).unwrap();
    let run = Running::start(store, &site, poller);
    let closed = eventually("jobs Slurm no longer holds are closed", || async {
        let jobs = stored_jobs(store, &site).await;
        let (a, b) = (&jobs["900000001"].1, &jobs["900000002"].1);
        match (a.end_time, b.end_time) {
            (Some(_), Some(_)) => Ok((a.clone(), b.clone())),
            _ => Err(format!("{a:?} {b:?}")),
        }
    })
    .await;
    assert_eq!(
        (closed.0.state, closed.0.start_time),
        (JobState::Cancelled, None),
        "{closed:?}"
    );
    assert_eq!(
        (closed.1.state, closed.1.start_time),
        (JobState::Unknown, Some(t + 60)),
        "{closed:?}"
    );
    assert!(closed.0.end_time.unwrap() > t + 120, "{closed:?}");

    let tag = run_tag();
    let ids = submit_jobs(&shared, &tag, 30, 4).await;

    // A queue forms and the store sees it: pending jobs are recorded too.
    let (_, started, _) = eventually("the source records pending jobs", || async {
        let p = progress(store, &site, &ids).await;
        if p.0 == ids.len() && p.1 < ids.len() {
            Ok(p)
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await;
    assert!(started < ids.len(), "a queue formed");

    // Some have started: stop slurmrestd mid-run.
    eventually("some jobs start", || async {
        let p = progress(store, &site, &ids).await;
        if p.1 >= 4 {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await;
    restd.down();
    let down_at = progress(store, &site, &ids).await;
    let failing = eventually("the health shows the outage", || async {
        match state_of(store, &site, "slurm_rest").await {
            Some(s) if s.consecutive_failures > 0 => Ok(s),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let error = failing.last_error.clone().unwrap_or_default();
    assert!(error.contains("unreachable"), "{error}");
    // The HTTP health endpoint says so too.
    let app = health_app(store);
    let h = app.get("/v1/sites/slurm/ingest").await;
    assert_eq!(h["sources"][0]["status"], "failing", "{h}");
    assert!(
        h["sources"][0]["last_error"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{h}"
    );

    // Jobs go on starting and ending while the source is blind.
    eventually("Slurm moves on during the outage", || async {
        let started = slurm_view(&shared, &ids)
            .await
            .values()
            .filter(|j| j.start_time.is_some())
            .count();
        // Four more starts, or all of them when fewer were left (slow submissions).
        if started >= (down_at.1 + 4).min(ids.len()) {
            Ok(())
        } else {
            Err(format!("{started} started, {down_at:?} stored"))
        }
    })
    .await;
    restd.up();
    // A poll stores its jobs before it records its own success: wait for both.
    eventually(
        "the source catches up: every job finished in the store, the source healthy",
        || async {
            let p = progress(store, &site, &ids).await;
            let health = state_of(store, &site, "slurm_rest").await;
            match health {
                Some(h) if p.2 == ids.len() && h.consecutive_failures == 0 => Ok(()),
                h => Err(format!("{p:?} {h:?}")),
            }
        },
    )
    .await;
    let health = state_of(store, &site, "slurm_rest").await.unwrap();
    assert_eq!(health.consecutive_failures, 0, "{health:?}");
    assert!(health.last_error.is_some(), "the outage stays on record");
    // The health says which API version `auto` chose: the newest this Slurm serves (what
    // `scripts/local-slurm env` exports).
    let newest = required("SLURMRESTD_API_VERSION");
    let h = app.get("/v1/sites/slurm/ingest").await;
    let detail = h["sources"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(&format!("slurmrestd API {newest} (auto, from ")),
        "{h}"
    );
    assert!(detail.contains("offered by Slurm "), "{h}");
    assert_matches_slurm(store, &site, &shared, &ids).await;
    run.stop().await;
    assert!(store.rejects(site.id, 0, 10).await.unwrap().is_empty());
}

/// The HTTP API on `store`, called in-process.
struct HealthApp(axum::Router);

fn health_app<S: Store>(store: &S) -> HealthApp {
    let state = qbets::service::AppState::new(
        store.clone(),
        qbets::config::Config::default(),
        Predictors::new(),
        Arc::new(SystemClock),
    );
    HealthApp(qbets::http::router(state))
}

impl HealthApp {
    async fn get(&self, uri: &str) -> serde_json::Value {
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let res = self
            .0
            .clone()
            .oneshot(
                axum::http::Request::get(uri)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let body = res.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&body).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_rest_records_every_job_and_catches_up_after_slurmrestd_stops() {
    let _node = crate::support::share_slurm_node().await;
    let db = TestDb::fresh().await;
    with_store(db.url(), SlurmOutage).await.unwrap();
}

// --- a requeued job ------------------------------------------------------------------

struct Requeued;

impl StoreTask for Requeued {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        requeue_story(&store).await;
    }
}

/// `scontrol requeue` of a running job: Slurm puts it back in the queue with a new
/// submit time (held until its begin time, two minutes on), and the store follows —
/// the job pending again as a new submission, its first run's start gone, never a
/// start before its submission.
async fn requeue_story<S: Store>(store: &S) {
    let shared = SlurmRestClient::new(&client_config(&required("SLURMRESTD_URL"))).unwrap();
    let site = live_site(store, "slurm-requeue").await;
    let poller = SlurmRestPoller::new(
        &client_config(&required("SLURMRESTD_URL")),
        Duration::from_millis(500),
    )
    .unwrap();
    let run = Running::start(store, &site, poller);
    let ids = submit_jobs(&shared, &run_tag(), 1, 600).await;
    let id = *ids.first().unwrap();
    let _cancel = crate::slurm::scontrol::CancelOnDrop(vec![id]);
    let key = id.to_string();
    let stored = |want: &'static str, check: fn(&Job) -> bool| {
        let key = key.clone();
        let site = site.clone();
        async move {
            eventually(want, || async {
                match stored_jobs(store, &site).await.remove(&key) {
                    Some((_, j)) if check(&j) => Ok(j),
                    other => Err(format!("{other:?}")),
                }
            })
            .await
        }
    };
    let first = stored("the job is stored running", |j| j.start_time.is_some()).await;

    crate::slurm::scontrol::run(&["requeue", &key]).await;
    let again = eventually("Slurm lists the job pending, submitted anew", || async {
        match shared.job(id).await {
            Ok(Some(j)) if j.state.is_pending() && j.submit_time > Some(first.submit_time) => Ok(j),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let requeued = stored("the store has the new submission", |j| {
        j.state == JobState::Pending && j.start_time.is_none()
    })
    .await;
    assert_eq!(Some(requeued.submit_time), again.submit_time);
    assert_eq!((requeued.end_time, requeued.wait_s()), (None, None));
    assert_eq!(requeued.id, first.id, "the same job, not a second one");
    assert!(
        requeued.bound_status.is_some(),
        "a bound for the new submission: {requeued:?}"
    );

    shared.cancel(id).await.unwrap();
    let cancelled = stored("the store sees it cancelled", |j| {
        j.state == JobState::Cancelled
    })
    .await;
    assert_eq!(
        (cancelled.submit_time, cancelled.start_time),
        (requeued.submit_time, None)
    );
    run.stop().await;
    assert!(store.rejects(site.id, 0, 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_slurm_requeues_starts_over_in_the_store() {
    let _node = crate::support::share_slurm_node().await;
    let db = TestDb::fresh().await;
    with_store(db.url(), Requeued).await.unwrap();
}

// --- a PostgreSQL restart under a running ingest ---------------------------------------

/// A PostgreSQL server of this test's own (initdb in a temporary directory, run as the
/// `postgres` user on a free port), so restarting it disturbs no one.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    fn start() -> PrivatePostgres {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL's binaries under /usr/lib/postgresql")
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .filter(|p| p.join("initdb").exists())
            .max()
            .expect("an initdb under /usr/lib/postgresql/*/bin");
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = PrivatePostgres { dir, bin, port };
        let status = std::process::Command::new("chown")
            .args(["postgres:postgres", &pg.dir.path().display().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        pg.as_postgres(&format!(
            "{} -D {}/data -A trust -U postgres --no-sync >/dev/null",
            pg.bin.join("initdb").display(),
            pg.dir.path().display()
        ));
        pg.up();
        pg
    }

    fn as_postgres(&self, cmd: &str) {
        let out = std::process::Command::new("su")
            .args(["postgres", "-s", "/bin/sh", "-c", cmd])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn pg_ctl(&self, args: &str) {
        self.as_postgres(&format!(
            "{} -D {}/data -l {}/log -w {args}",
            self.bin.join("pg_ctl").display(),
            self.dir.path().display(),
            self.dir.path().display()
        ));
    }

    fn up(&self) {
        self.pg_ctl(&format!(
            "-o '-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off' start",
            self.port,
            self.dir.path().display()
        ));
    }

    fn down(&self) {
        self.pg_ctl("-m fast stop");
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = std::process::Command::new("su")
            .args([
                "postgres",
                "-s",
                "/bin/sh",
                "-c",
                &format!(
                    "{} -D {}/data -m immediate stop",
                    self.bin.join("pg_ctl").display(),
                    self.dir.path().display()
                ),
            ])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_rest_ingest_survives_a_postgresql_restart() {
    let _node = crate::support::share_slurm_node().await;
    let shared = SlurmRestClient::new(&client_config(&required("SLURMRESTD_URL"))).unwrap();
    shared
        .ping()
        .await
        .unwrap_or_else(|e| panic!("slurmrestd: {e}"));
    let pg = PrivatePostgres::start();
    let store = PgStore::connect(&pg.url()).await.unwrap();
    store.migrate().await.unwrap();
    let site = live_site(&store, "slurm").await;
    let poller = SlurmRestPoller::new(
        &client_config(&required("SLURMRESTD_URL")),
        Duration::from_millis(500),
    )
    .unwrap();
    let run = Running::start(&store, &site, poller);
    let ids = submit_jobs(&shared, &run_tag(), 20, 4).await;
    eventually("some jobs start", || async {
        let p = progress(&store, &site, &ids).await;
        if p.0 == ids.len() && p.1 >= 4 {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await;
    let before = progress(&store, &site, &ids).await;

    // PostgreSQL goes away under the running ingest while Slurm moves on, for longer
    // than the pool's 10 s wait for a connection (a shorter outage is absorbed by that
    // wait and is no failure at all).
    pg.down();
    let down_since = Instant::now();
    eventually("Slurm moves on while the store is down", || async {
        let started = slurm_view(&shared, &ids)
            .await
            .values()
            .filter(|j| j.start_time.is_some())
            .count();
        if started >= (before.1 + 4).min(ids.len())
            && down_since.elapsed() > Duration::from_secs(15)
        {
            Ok(())
        } else {
            Err(format!("{started} started"))
        }
    })
    .await;
    pg.up();
    // A poll stores its jobs before it records its own success: wait for both.
    eventually("the source catches up after the restart", || async {
        let p = progress(&store, &site, &ids).await;
        let health = state_of(&store, &site, "slurm_rest").await;
        match health {
            Some(h) if p.2 == ids.len() && h.consecutive_failures == 0 => Ok(()),
            h => Err(format!("{p:?} {h:?}")),
        }
    })
    .await;
    let health = state_of(&store, &site, "slurm_rest").await.unwrap();
    assert_eq!(health.consecutive_failures, 0, "{health:?}");
    assert!(
        health.last_error.as_deref().unwrap_or("").contains("store"),
        "the failure the store could not take is recorded once it is back: {health:?}"
    );
    assert_matches_slurm(&store, &site, &shared, &ids).await;
    run.stop().await;
}

// --- configured sources, as `qbets serve` starts them -----------------------------------

struct Configured;

impl StoreTask for Configured {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        use qbets::config::{
            PbsAccountingSource, SgeAccountingSource, SiteConfig, SourceConfig, SwfSource,
        };
        let dir = tempfile::tempdir().unwrap();
        let acct = dir.path().join("accounting");
        let t = 1_704_067_200;
        std::fs::write(&acct, sge_line(1, t, t + 5, t + 50)).unwrap();
        let trace = dir.path().join("t.swf");
        std::fs::write(&trace, super::http_api::TRACE).unwrap();
        let site = |name: &str, source| SiteConfig {
            user_key: Default::default(),
            user_key_secret_env: None,
            name: name.into(),
            description: String::new(),
            time_zone: None,
            source,
            submit: None,
            queues: Vec::new(),
        };
        let sites = vec![
            // A log directory that does not exist: this source fails, and only it.
            site(
                "broken",
                SourceConfig::PbsAccounting(PbsAccountingSource {
                    dir: dir.path().join("missing"),
                    interval_s: 1,
                }),
            ),
            site(
                "sge",
                SourceConfig::SgeAccounting(SgeAccountingSource {
                    path: acct.clone(),
                    interval_s: 1,
                }),
            ),
            site(
                "archive",
                SourceConfig::Swf(SwfSource {
                    path: trace.clone(),
                }),
            ),
        ];
        let predictors = Arc::new(Predictors::new());
        let start = || {
            qbets::service::ingest::spawn_sources(
                &store,
                predictors.clone(),
                Arc::new(SystemClock),
                &sites,
                1000,
            )
        };
        let running = start().await.unwrap();
        assert_eq!(running.len(), 3);
        let site_of = |name: &'static str| {
            let store = store.clone();
            async move { store.site(name).await.unwrap().expect(name) }
        };
        let broken = site_of("broken").await;
        let sge = site_of("sge").await;
        eventually(
            "the failing source is on record, the others work",
            || async {
                let b = state_of(&store, &broken, "pbs_accounting").await;
                let s = state_of(&store, &sge, "sge_accounting").await;
                let archive = store.site("archive").await.unwrap();
                let imported = match &archive {
                    Some(a) => state_of(&store, a, "swf").await.is_some(),
                    None => false,
                };
                match (&b, &s) {
                    (Some(b), Some(s))
                        if b.consecutive_failures > 0 && s.accepted == 1 && imported =>
                    {
                        Ok(b.last_error.clone().unwrap_or_default())
                    }
                    _ => Err(format!("{b:?} {s:?} imported={imported}")),
                }
            },
        )
        .await;
        let error = state_of(&store, &broken, "pbs_accounting")
            .await
            .unwrap()
            .last_error
            .unwrap();
        assert!(error.contains("missing"), "{error}");
        let archive = site_of("archive").await;
        assert_eq!(archive.kind, SiteKind::Archive);
        let jobs = stored_jobs(&store, &archive).await.len();
        assert!(jobs > 0);
        // The import went to the store directly; the predictors learnt it (before the
        // source was recorded as done), not only after a restart.
        let learnt: u64 = predictors
            .queues()
            .iter()
            .filter(|(s, _)| s == "archive")
            .map(|(s, q)| {
                let st = predictors.state(s, q).unwrap().0;
                st.observed + st.excluded_down
            })
            .sum();
        let started = stored_jobs(&store, &archive)
            .await
            .values()
            .filter(|(_, j)| j.start_time.is_some())
            .count() as u64;
        assert_eq!(learnt, started, "{:?}", predictors.queues());
        // The live source goes on: a new line is read while the broken one still fails.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&acct)
            .unwrap();
        std::io::Write::write_all(&mut f, sge_line(2, t, t + 9, t + 90).as_bytes()).unwrap();
        eventually("the working source reads on", || async {
            match state_of(&store, &sge, "sge_accounting").await {
                Some(s) if s.accepted == 2 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        running.stop().await;
        // A restart imports the unchanged trace no second time.
        let before = state_of(&store, &archive, "swf").await.unwrap();
        let running = start().await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        running.stop().await;
        let after = state_of(&store, &archive, "swf").await.unwrap();
        assert_eq!(before, after);
        assert_eq!(stored_jobs(&store, &archive).await.len(), jobs);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_source_does_not_stop_the_others() {
    let db = TestDb::fresh().await;
    with_store(db.url(), Configured).await.unwrap();
}
