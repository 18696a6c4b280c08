//! The client against the live local Slurm (`scripts/local-slurm start`; scripts/test
//! starts it and exports its `env`): submit, list, get and cancel real jobs, and check
//! everything read against `scontrol show job`. Fails, never skips, when the cluster's
//! environment is missing. Waits are polls with deadlines.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use qbets::sources::slurm_rest::{
    ApiVersion, ApiVersionSetting, ClientConfig, JobState, JobSubmission, SlurmJob,
    SlurmRestClient, SlurmRestError, Token, TokenSource,
};

use super::scontrol;
use crate::sensors::required;

/// How long the cluster may take to run the test's jobs; generous, as other tests may
/// share the cluster.
const DEADLINE: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);

fn config() -> ClientConfig {
    let version = std::env::var("SLURMRESTD_API_VERSION").unwrap_or_else(|_| "v0.0.38".into());
    ClientConfig {
        url: required("SLURMRESTD_URL"),
        api_version: version.parse().expect("SLURMRESTD_API_VERSION"),
        user: std::env::var("SLURMRESTD_USER").unwrap_or_else(|_| "root".into()),
        token_env: Some("SLURM_JWT".into()),
        token_file: None,
        timeout_s: 30,
        connect_timeout_s: 5,
    }
}

/// A name prefix no other run shares, so this test reads only its own jobs.
fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("qbets-it-{}-{nanos}", std::process::id())
}

/// `scontrol show job -o` for every job Slurm holds, by munge (not the REST token), in UTC.
async fn scontrol_jobs() -> BTreeMap<u64, scontrol::ScontrolJob> {
    scontrol::parse(&scontrol::run(&["show", "job", "-o"]).await)
        .into_iter()
        .map(|j| (j.job_id(), j))
        .collect()
}

/// Polls the job list until `done` holds for `ids`, calling `seen` on every listing.
async fn poll_until(
    client: &SlurmRestClient,
    ids: &BTreeSet<u64>,
    what: &str,
    mut seen: impl FnMut(&[&SlurmJob]),
    done: impl Fn(&SlurmJob) -> bool,
) -> Vec<SlurmJob> {
    let start = Instant::now();
    loop {
        let list = client
            .list_jobs()
            .await
            .unwrap_or_else(|e| panic!("list jobs: {e}"));
        assert!(list.rejected.is_empty(), "{:?}", list.rejected);
        let mine: Vec<&SlurmJob> = list
            .jobs
            .iter()
            .filter(|j| ids.contains(&j.job_id))
            .collect();
        seen(&mine);
        if mine.len() == ids.len() && mine.iter().all(|j| done(j)) {
            return mine.into_iter().cloned().collect();
        }
        let states: Vec<String> = mine
            .iter()
            .map(|j| format!("{}:{}", j.job_id, j.state))
            .collect();
        assert!(
            start.elapsed() < DEADLINE,
            "jobs not {what} after {DEADLINE:?}: {states:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_speaks_the_newest_version_the_local_slurm_serves() {
    let client = SlurmRestClient::new(&ClientConfig {
        api_version: ApiVersionSetting::Auto,
        ..config()
    })
    .unwrap();
    assert_eq!(client.api_version(), None, "not asked yet");
    let list = client
        .list_jobs()
        .await
        .unwrap_or_else(|e| panic!("list jobs: {e}"));
    assert!(list.rejected.is_empty(), "{:?}", list.rejected);
    // `scripts/local-slurm env` exports the newest version its Slurm serves.
    let newest: ApiVersion = required("SLURMRESTD_API_VERSION").parse().unwrap();
    assert_eq!(client.api_version(), Some(newest));
    let note = client.version_note().unwrap();
    assert!(
        note.starts_with(&format!("slurmrestd API {newest} (auto, from ")),
        "{note}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_submitted_through_the_client_queue_run_and_read_as_scontrol_says() {
    let _node = crate::support::share_slurm_node().await;
    let client = SlurmRestClient::new(&config()).unwrap();
    client
        .ping()
        .await
        .unwrap_or_else(|e| panic!("slurmrestd: {e}"));
    let tag = run_tag();

    // A dozen 4-CPU jobs on a 16-CPU node: at most four run at once, the rest queue.
    let mut asked = BTreeMap::new();
    for i in 0..12u64 {
        let (partition, limit_s) = if i % 2 == 0 {
            ("debug", 90 + 60 * (i % 3))
        } else {
            ("long", 600 + 61 * i)
        };
        let sub = JobSubmission {
            name: format!("{tag}-{i}"),
            partition: Some(partition.into()),
            nodes: 1,
            time_limit_s: limit_s,
            script: "#!/bin/sh\nsleep 8\n".into(),
            working_dir: "/tmp".into(),
            environment: vec![("QBETS_IT_RUN".into(), tag.clone())],
            cpus_per_task: Some(4),
        };
        let id = client
            .submit(&sub)
            .await
            .unwrap_or_else(|e| panic!("submit {i}: {e}"))
            .job_id;
        asked.insert(id, sub);
    }
    let ids: BTreeSet<u64> = asked.keys().copied().collect();

    let mut seen_pending = BTreeSet::new();
    let finished = poll_until(
        &client,
        &ids,
        "completed",
        |jobs| {
            seen_pending.extend(
                jobs.iter()
                    .filter(|j| j.state.is_pending())
                    .map(|j| j.job_id),
            )
        },
        |j| j.state == JobState::Completed,
    )
    .await;
    assert!(!seen_pending.is_empty(), "a queue formed");

    // Each job is what was asked for, and reads as scontrol says.
    let sc = scontrol_jobs().await;
    for job in &finished {
        let sub = &asked[&job.job_id];
        assert_eq!(job.name, sub.name);
        assert_eq!(Some(job.partition.as_str()), sub.partition.as_deref());
        assert_eq!(
            job.time_limit_s,
            Some(sub.time_limit_s.div_ceil(60) * 60),
            "limits are whole minutes, rounded up"
        );
        assert_eq!(
            (job.node_count, job.cpus, job.user.as_str()),
            (Some(1), Some(4), config().user.as_str())
        );
        scontrol::assert_agrees(job, &sc[&job.job_id]);
    }

    // The queue: no more than four ran at once, so at least eight waited for a
    // predecessor's eight-second sleep to end.
    let mut edges: Vec<(i64, i32)> = finished
        .iter()
        .flat_map(|j| [(j.start_time.unwrap(), 1), (j.end_time.unwrap(), -1)])
        .collect();
    edges.sort_by_key(|&(t, d)| (t, d)); // an end and a start in the same second: end first
    let most = edges
        .iter()
        .scan(0, |n, &(_, d)| {
            *n += d;
            Some(*n)
        })
        .max()
        .unwrap();
    assert!(most <= 4, "{most} of the 4-CPU jobs ran at once on 16 CPUs");
    let waited = finished.iter().filter(|j| j.wait_s().unwrap() >= 2).count();
    assert!(waited >= 8, "only {waited} jobs waited: {finished:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_is_cancelled_and_unknown_jobs_and_bad_tokens_are_told_apart() {
    let cfg = config();
    let client = SlurmRestClient::new(&cfg).unwrap();
    let tag = run_tag();
    let sub = JobSubmission {
        name: format!("{tag}-cancel"),
        partition: Some("long".into()),
        nodes: 1,
        time_limit_s: 1800,
        script: "#!/bin/sh\nsleep 600\n".into(),
        working_dir: "/tmp".into(),
        environment: vec![],
        cpus_per_task: None,
    };
    let id = client.submit(&sub).await.unwrap().job_id;
    let _cancel = scontrol::CancelOnDrop(vec![id]);
    let ids = BTreeSet::from([id]);
    poll_until(
        &client,
        &ids,
        "running",
        |_| {},
        |j| j.state == JobState::Running,
    )
    .await;

    client
        .cancel(id)
        .await
        .unwrap_or_else(|e| panic!("cancel {id}: {e}"));
    let ended = poll_until(
        &client,
        &ids,
        "cancelled and cleaned up",
        |_| {},
        |j| j.state == JobState::Cancelled && !j.state_flags.iter().any(|f| f == "COMPLETING"),
    )
    .await;
    let job = &ended[0];
    assert!(
        job.start_time.is_some() && job.end_time >= job.start_time,
        "it ran, then was cancelled: {job:?}"
    );
    let one = client
        .job(id)
        .await
        .unwrap()
        .expect("the cancelled job is still known");
    assert_eq!(
        (one.state, one.start_time, one.end_time),
        (JobState::Cancelled, job.start_time, job.end_time)
    );
    scontrol::assert_agrees(job, &scontrol_jobs().await[&id]);

    // Slurm's job ids stay below 0x03FFFFFF: this one cannot exist.
    assert_eq!(client.job(67_000_000).await.unwrap(), None);

    let forged = SlurmRestClient::with_token(
        &cfg.url,
        cfg.api_version,
        &cfg.user,
        TokenSource::Fixed(Token::new(
            "eyJhbGciOiJIUzI1NiJ9.e30.not-signed-by-this-cluster",
        )),
        Duration::from_secs(30),
        Duration::from_secs(5),
    )
    .unwrap();
    let e = forged.list_jobs().await.unwrap_err();
    if cfg.api_version == ApiVersion::V0_0_38.into() {
        // Slurm 22.05 reports a rejected token only as an unspecified error, the same -1
        // a down slurmctld gives, so it counts as worth a retry.
        assert!(
            matches!(&e, SlurmRestError::Slurm { errors, .. } if errors[0].number == Some(-1)),
            "{e:?}"
        );
        assert!(e.is_transient(), "{e}");
    } else {
        assert!(matches!(e, SlurmRestError::AuthRejected { .. }), "{e:?}");
        assert!(!e.is_transient(), "{e}");
    }
}
