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

/// Whether the local slurmrestd serves `version` (a `ping` it does not know is a 404).
async fn serves(version: ApiVersion) -> bool {
    let cfg = ClientConfig {
        api_version: qbets::sources::slurm_rest::ApiVersionSetting::Fixed(version),
        ..config()
    };
    SlurmRestClient::new(&cfg).unwrap().ping().await.is_ok()
}

/// Issue 22: a reservation's placeholder job runs with the nodes, CPUs and time it asked
/// for. Slurm 22.05 ran `"nodes": [2, 2]` on one node; what Slurm took is read back with
/// `scontrol show job` for each API version the client speaks that the local slurmrestd
/// serves. The cluster has one node, so a 2-node job is refused at submission (before
/// the fix it was taken, and ran on one node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placeholder_jobs_ask_slurm_for_their_nodes_cpus_and_time_in_every_served_version() {
    use qbets::submit::{RemoteRequest, RunMode, SlurmRestSubmitConfig, SlurmSubmitter};
    let _node = crate::support::share_slurm_node().await;
    let base = config();
    let mut tried = Vec::new();
    for version in ApiVersion::ALL {
        if !serves(version).await {
            continue;
        }
        tried.push(version);
        let submitter = SlurmSubmitter::new(&SlurmRestSubmitConfig {
            url: base.url.clone(),
            api_version: qbets::sources::slurm_rest::ApiVersionSetting::Fixed(version),
            user: base.user.clone(),
            token_env: Some("SLURM_JWT".into()),
            token_file: None,
            timeout_s: 30,
            working_dir: "/tmp".into(),
            cpus_per_task: Some(2),
        })
        .unwrap();
        let request = |nodes: u32, time_limit_s: u64| RemoteRequest {
            reservation: format!("{}-{version}-{nodes}", run_tag()),
            queue: "long".into(),
            nodes,
            time_limit_s,
            start_at: 0,
            command: "sleep 1".into(),
            mode: RunMode::BestEffort,
        };
        let mut cancel = scontrol::CancelOnDrop(Vec::new());

        // One node, two CPUs, 105.5 minutes: read back as asked (minutes rounded up).
        let id = submitter
            .submit(&request(1, 6_330))
            .await
            .unwrap_or_else(|e| panic!("{version}: submit: {e}"));
        cancel.0.push(id);
        let shown = scontrol_jobs().await;
        let sc = &shown[&id];
        // `1-1` (a range) while pending, `1` once running.
        let first = |key: &str| -> u32 {
            let v = sc.get(key);
            v.split('-')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{key}={v}"))
        };
        assert_eq!(first("NumNodes"), 1, "{version}: job {id} NumNodes");
        assert_eq!(
            sc.time_limit_s(),
            Some(106 * 60),
            "{version}: job {id} TimeLimit={}",
            sc.get("TimeLimit")
        );
        assert_eq!(first("NumCPUs"), 2, "{version}: job {id} NumCPUs");
        submitter.cancel(id).await.unwrap();

        // Two nodes on a one-node partition: Slurm refuses it for good. Were the count
        // lost (`[2, 2]` on v0.0.38), it would be taken and run on one node.
        match submitter.submit(&request(2, 600)).await {
            Err(e) => {
                assert!(!e.is_transient(), "{version}: {e}");
                assert!(e.to_string().contains("partition"), "{version}: {e}");
            }
            Ok(id) => {
                // Slurm 26.05 takes it and leaves it pending (NumNodes=2-2): the count
                // is kept, which is what this checks. On one node it must never run.
                cancel.0.push(id);
                let sc = &scontrol_jobs().await[&id];
                let nodes: u64 = sc
                    .get("NumNodes")
                    .split('-')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                assert!(
                    nodes == 2 && sc.get("JobState") == "PENDING",
                    "{version}: a 2-node job was taken as NumNodes={} ({})",
                    sc.get("NumNodes"),
                    sc.get("JobState")
                );
            }
        }
    }
    assert!(
        !tried.is_empty(),
        "the local slurmrestd serves none of {:?}",
        ApiVersion::ALL
    );
    eprintln!("placeholder submissions checked for {tried:?}");
}

/// Issue 22: the poller reads the partitions' limits (slurmrestd's MaxTime, MaxNodes,
/// TotalNodes) with the job list; the local Slurm's `debug` allows an hour and `long` a
/// day, on its one node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poller_learns_the_partitions_limits() {
    use qbets::sources::Source;
    use qbets::sources::slurm_poll::SlurmRestPoller;
    let mut poller = SlurmRestPoller::new(&config(), Duration::from_secs(15)).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let batch = poller.poll(None, now).await.unwrap();
    let of = |name: &str| {
        batch
            .limits
            .iter()
            .find(|l| l.queue == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", batch.limits))
            .clone()
    };
    let (debug, long) = (of("debug"), of("long"));
    assert_eq!(
        (debug.max_nodes, debug.max_walltime_s, debug.total_nodes),
        (Some(None), Some(Some(3_600)), Some(Some(1)))
    );
    assert_eq!(
        (long.max_nodes, long.max_walltime_s, long.total_nodes),
        (Some(None), Some(Some(86_400)), Some(Some(1)))
    );
    // Read again only after a while.
    let again = poller.poll(None, now + 15).await.unwrap();
    assert!(again.limits.is_empty(), "{:?}", again.limits);
}
