//! The executor against the live local Slurm (`scripts/local-slurm`; fails, never
//! skips, without it). A crash is simulated by dropping an executor with its state
//! persisted — a lease taken, a job submitted but not recorded — and starting another:
//! the scheduler must then hold exactly one job carrying the reservation's id. Two
//! executors on one PostgreSQL database race for the same reservations. The end-to-end
//! test runs the service's router and executor on the real clock against a busy queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt;
use qbets::plan::lifecycle::{OnFailure, ReservationState, RunMode};
use qbets::plan::varq::Mode;
use qbets::service::reservations::{
    CLEANUP_EVERY_S, Executor, LEASE_S, Submitters, cancel, new_uid,
};
use qbets::service::{AppState, FixedClock, Predictors, SystemClock, tokens};
use qbets::sources::slurm_rest::{ClientConfig, JobSubmission, SlurmRestClient};
use qbets::store::{
    NewCoallocation, NewJob, NewQueue, NewReservation, NewSite, PgStore, PlanFields, Reservation,
    ReservationRequest, Scope, SiteKind, SiteScope, Store, StoreTask, with_store,
};
use qbets::submit::{RemoteRequest, RemoteStatus, Submitter};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{SITE, history, local_site};
use crate::support::{TestDb, postgres_url};

const DEADLINE: Duration = Duration::from_secs(120);

pub(super) fn real_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub(super) fn submitters() -> Arc<Submitters> {
    assert!(
        std::env::var("SLURMRESTD_URL").is_ok(),
        "SLURMRESTD_URL is not set: eval \"$(scripts/local-slurm env)\" (scripts/test does)"
    );
    Arc::new(Submitters::from_config(&[local_site()]).unwrap())
}

/// A planned reservation on the local site's `debug` queue, due at `submit_at`.
pub(super) async fn seed<S: Store>(
    store: &S,
    submit_at: i64,
    start_at: i64,
    run_mode: RunMode,
) -> Reservation {
    seed_in(store, "debug", None, submit_at, start_at, run_mode, |_| {}).await
}

/// A planned reservation on a queue of the local site (a co-allocation's request when
/// `coallocation` is given), due at `submit_at`, its request as `ask` leaves it.
async fn seed_in<S: Store>(
    store: &S,
    queue: &str,
    coallocation: Option<(i64, i64)>,
    submit_at: i64,
    start_at: i64,
    run_mode: RunMode,
    ask: impl FnOnce(&mut ReservationRequest),
) -> Reservation {
    let site = store
        .upsert_site(&NewSite {
            name: SITE.into(),
            kind: SiteKind::Live,
            description: String::new(),
            time_zone: None,
        })
        .await
        .unwrap();
    store
        .upsert_queue(
            site.id,
            &NewQueue {
                name: queue.into(),
                max_walltime_s: None,
                max_nodes: None,
                total_nodes: None,
            },
        )
        .await
        .unwrap();
    let mut request = ReservationRequest {
        uid: new_uid("r"),
        owner: "alice".into(),
        site: SITE.into(),
        queue: queue.into(),
        nodes: 1,
        walltime_s: 60,
        start_at,
        min_probability: 0.5,
        confidence: 0.95,
        mode: Mode::Latest,
        step_s: 30,
        command: "sleep 1".into(),
        run_mode,
        on_failure: OnFailure::Cancel,
        webhook: None,
    };
    ask(&mut request);
    store
        .insert_reservation(&NewReservation {
            request,
            state: ReservationState::Planned,
            plan: Some(PlanFields {
                submit_at,
                advertised_walltime_s: 60 + (start_at - submit_at),
                probability: 0.9,
            }),
            at_risk: false,
            coallocation,
            reason: "planned by the test".into(),
            created_at: submit_at,
            idempotency_key: None,
        })
        .await
        .unwrap()
}

pub(super) async fn reread<S: Store>(store: &S, r: &Reservation) -> Reservation {
    store.reservation(&r.request.uid).await.unwrap().unwrap()
}

pub(super) fn slurm(subs: &Submitters) -> &Submitter {
    subs.get(SITE).unwrap()
}

/// Cancels whatever is left of a reservation at the scheduler, and waits until every
/// job carrying its id has ended and is reported in its final state.
pub(super) async fn cleanup(sub: &Submitter, uid: &str) -> Vec<RemoteStatus> {
    let start = Instant::now();
    loop {
        let jobs = sub.find(uid).await.unwrap();
        // Slurm 22.05 reports COMPLETING, not the final state, while epilogs run.
        if jobs
            .iter()
            .all(|j| j.ended_at.is_some() && j.state != "COMPLETING")
        {
            return jobs;
        }
        for j in jobs.iter().filter(|j| j.ended_at.is_none()) {
            sub.cancel(&j.job_id).await.unwrap();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "jobs of {uid} still alive: {jobs:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn crash_after_submission<S: Store>(store: S) {
    let subs = submitters();
    let now = real_now();
    let clock = FixedClock::at(now);
    let r = seed(&store, now, now + 900, RunMode::Hold).await;

    // Executor "a" claims the reservation, submits its job, and dies (kill -9) before
    // recording the submission: the lease and the remote job are all that remain.
    let claimed = store
        .claim_reservations(now, "a", now + LEASE_S, 8, &SiteScope::All)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let plan = r.plan.unwrap();
    let job = slurm(&subs)
        .submit(&RemoteRequest {
            reservation: r.request.uid.clone(),
            queue: r.request.queue.clone(),
            nodes: 1,
            time_limit_s: plan.advertised_walltime_s as u64,
            start_at: r.request.start_at,
            command: r.request.command.clone(),
            mode: r.request.run_mode,
        })
        .await
        .unwrap();

    // A restarted service respects the dead executor's lease while it lasts…
    let b = Executor::new(store.clone(), subs.clone(), Arc::new(clock.clone()), "b");
    let report = b.tick().await.unwrap();
    assert_eq!((report.submitted, report.adopted), (0, 0), "{report:?}");
    assert_eq!(reread(&store, &r).await.state, ReservationState::Planned);

    // …then takes it over, finds the job by the reservation id and records it.
    clock.set(now + LEASE_S + 1);
    let report = b.tick().await.unwrap();
    assert_eq!((report.submitted, report.adopted), (0, 1), "{report:?}");
    let after = reread(&store, &r).await;
    assert_eq!(after.remote_job_id.as_deref(), Some(job.as_str()));
    let report = b.tick().await.unwrap();
    assert_eq!((report.submitted, report.adopted), (0, 0));
    let remote = slurm(&subs).find(&r.request.uid).await.unwrap();
    assert_eq!(
        remote.len(),
        1,
        "exactly one job carries the id: {remote:?}"
    );
    assert_eq!(remote[0].job_id, job);
    // The pass that adopts the job also follows it: Slurm may have started it already
    // (nothing holds the job submitted by hand above back), and only then is it
    // Started.
    match after.state {
        ReservationState::Submitted => {}
        ReservationState::Started => assert!(remote[0].started_at.is_some(), "{remote:?}"),
        other => panic!("adopted job left the reservation {other:?}"),
    }

    // Cancel removes the remote job.
    let cancelled = cancel(&store, &subs, &after, now + LEASE_S + 2, "test")
        .await
        .unwrap();
    assert_eq!(cancelled.state, ReservationState::Cancelled);
    let ended = cleanup(slurm(&subs), &r.request.uid).await;
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].state, "CANCELLED");
    let events = store.reservation_events(r.id).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.reason.contains("found already submitted")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.reason == format!("remote job {job} cancelled"))
    );
}

/// A reservation due now (start_at 900 s later) that executor "e", on a clock fixed at
/// now, has submitted to the local Slurm.
async fn one_submitted<S: Store>(
    store: &S,
) -> (Arc<Submitters>, i64, FixedClock, Reservation, Executor<S>) {
    let subs = submitters();
    let now = real_now();
    let clock = FixedClock::at(now);
    let r = seed(store, now, now + 900, RunMode::Hold).await;
    let e = Executor::new(store.clone(), subs.clone(), Arc::new(clock.clone()), "e");
    assert_eq!(e.tick().await.unwrap().submitted, 1);
    (subs, now, clock, r, e)
}

/// A cancel made while the scheduler could not be reached leaves the remote job
/// marked; the executor's next pass, with the scheduler back, cancels it.
async fn unreachable_cancel<S: Store>(store: S) {
    let mut away = local_site();
    if let Some(qbets::submit::SubmitConfig::SlurmRest(s)) = &mut away.submit {
        s.url = "http://127.0.0.1:9".into();
    }
    let away = Arc::new(Submitters::from_config(&[away]).unwrap());
    let (subs, now, clock, r, e) = one_submitted(&store).await;
    let submitted = reread(&store, &r).await;
    let job = submitted.remote_job_id.clone().unwrap();

    let refused = cancel(&store, &away, &submitted, now + 1, "test").await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(reread(&store, &r).await.state, ReservationState::Cancelled);
    let marked: Vec<i64> = store
        .remote_cleanups()
        .await
        .unwrap()
        .iter()
        .map(|x| x.id)
        .collect();
    assert_eq!(marked, [r.id]);
    let alive = slurm(&subs).find(&r.request.uid).await.unwrap();
    assert!(alive.iter().any(|j| j.ended_at.is_none()), "{alive:?}");

    // Not asked again at every pass: once a minute.
    e.tick().await.unwrap();
    assert_eq!(store.remote_cleanups().await.unwrap().len(), 1);
    clock.set(now + CLEANUP_EVERY_S);
    let report = e.tick().await.unwrap();
    assert_eq!(report.errors, 0, "{report:?}");
    assert!(store.remote_cleanups().await.unwrap().is_empty());
    let ended = cleanup(slurm(&subs), &r.request.uid).await;
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].state, "CANCELLED");
    let events = store.reservation_events(r.id).await.unwrap();
    assert!(
        events
            .iter()
            .any(|ev| ev.reason == format!("remote job {job} cancelled")),
        "{events:?}"
    );
}

/// A submitted reservation whose site the configuration no longer names cannot be
/// followed: it ends in `error`, saying why, instead of waiting for ever.
async fn site_gone<S: Store>(store: S) {
    let (subs, now, clock, r, _) = one_submitted(&store).await;
    let none = Arc::new(Submitters::from_config(&[]).unwrap());
    let after = Executor::new(store.clone(), none, Arc::new(clock.clone()), "f");
    // Before start_at another replica may still follow it: left alone.
    after.tick().await.unwrap();
    assert!(!reread(&store, &r).await.state.is_final());
    clock.set(now + 900 + LEASE_S);
    after.tick().await.unwrap();
    let gone = reread(&store, &r).await;
    assert_eq!(gone.state, ReservationState::Error, "{gone:?}");
    let events = store.reservation_events(r.id).await.unwrap();
    assert!(
        events
            .last()
            .unwrap()
            .reason
            .contains("no submit target any more"),
        "{events:?}"
    );
    cleanup(slurm(&subs), &r.request.uid).await;
}

/// Reservations whose jobs start after `start_at` fail. The remote job of one is
/// cancelled (the default); that of one made with `on_failure: keep` is left to run its
/// command, late, to the end.
async fn failed_reservations<S: Store>(store: S) {
    let _node = crate::support::share_slurm_node().await;
    let subs = submitters();
    let now = real_now();
    // Due 100 s ago, the nodes wanted 10 s ago: whenever Slurm starts the jobs, it is late.
    let clock = FixedClock::at(now - 100);
    let seed_late = |on_failure: OnFailure| {
        seed_in(
            &store,
            "debug",
            None,
            now - 100,
            now - 10,
            RunMode::Hold,
            move |q| {
                q.on_failure = on_failure;
                q.command = "sleep 20".into();
            },
        )
    };
    let cancelled = seed_late(OnFailure::Cancel).await;
    let kept = seed_late(OnFailure::Keep).await;
    let e = Executor::new(store.clone(), subs.clone(), Arc::new(clock.clone()), "late");
    assert_eq!(e.tick().await.unwrap().submitted, 2);
    clock.set(now);
    e.tick().await.unwrap();
    let mut jobs = Vec::new();
    for r in [&cancelled, &kept] {
        let after = reread(&store, r).await;
        assert_eq!(after.state, ReservationState::Failed, "{after:?}");
        jobs.push(after.remote_job_id.clone().unwrap());
    }
    let reasons = |r: &Reservation| {
        let store = store.clone();
        let id = r.id;
        async move {
            let events = store.reservation_events(id).await.unwrap();
            events.into_iter().map(|e| e.reason).collect::<Vec<_>>()
        }
    };

    // The default: cancelled, and said so.
    let gone = cleanup(slurm(&subs), &cancelled.request.uid).await;
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].state, "CANCELLED", "{gone:?}");
    let said = reasons(&cancelled).await;
    assert!(
        said.contains(&format!("remote job {} cancelled", jobs[0])),
        "{said:?}"
    );

    // Kept: still there after the executor's next passes, then it runs to its end.
    clock.set(now + CLEANUP_EVERY_S);
    e.tick().await.unwrap();
    let said = reasons(&kept).await;
    assert!(
        said.iter()
            .any(|r| r.ends_with("; kept, as asked (on_failure: keep)")),
        "{said:?}"
    );
    assert!(!said.iter().any(|r| r.contains("cancelled")), "{said:?}");
    let start = Instant::now();
    let ended = loop {
        let jobs = slurm(&subs).find(&kept.request.uid).await.unwrap();
        if let [j] = jobs.as_slice()
            && j.ended_at.is_some()
            && j.state != "COMPLETING"
        {
            break j.clone();
        }
        assert!(start.elapsed() < DEADLINE, "{jobs:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        ended.state, "COMPLETED",
        "the command ran to its end: {ended:?}"
    );
    assert!(ended.started_at.unwrap() > kept.request.start_at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reservation_cancels_its_job_unless_asked_to_keep_it() {
    let db = TestDb::fresh().await;
    on_store!(db.url(), failed_reservations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_whose_site_is_no_longer_configured_ends_in_error() {
    let db = TestDb::fresh().await;
    on_store!(db.url(), site_gone);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_job_a_cancel_could_not_reach_is_cancelled_on_the_next_pass() {
    let db = TestDb::fresh().await;
    on_store!(db.url(), unreachable_cancel);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_submission_and_its_record_does_not_submit_twice() {
    let db = TestDb::fresh().await;
    on_store!(db.url(), crash_after_submission);
}

async fn crash_before_submission<S: Store>(store: S) {
    let subs = submitters();
    let now = real_now();
    let clock = FixedClock::at(now);
    // Held until start_at, its job is still there for the last pass to follow.
    let r = seed(&store, now, now + 900, RunMode::Hold).await;
    // "a" claims and dies before submitting.
    assert_eq!(
        store
            .claim_reservations(now, "a", now + LEASE_S, 8, &SiteScope::All)
            .await
            .unwrap()
            .len(),
        1
    );
    let b = Executor::new(store.clone(), subs.clone(), Arc::new(clock.clone()), "b");
    assert_eq!(b.tick().await.unwrap().submitted, 0);
    clock.set(now + LEASE_S + 1);
    let report = b.tick().await.unwrap();
    assert_eq!((report.submitted, report.adopted), (1, 0), "{report:?}");
    // Another restart finds nothing to do.
    let c = Executor::new(store.clone(), subs.clone(), Arc::new(clock.clone()), "c");
    let report = c.tick().await.unwrap();
    assert_eq!((report.submitted, report.adopted), (0, 0), "{report:?}");
    let after = reread(&store, &r).await;
    assert!(after.state.may_have_remote_job(), "{after:?}");
    let remote = slurm(&subs).find(&r.request.uid).await.unwrap();
    assert_eq!(remote.len(), 1, "{remote:?}");
    assert_eq!(
        after.remote_job_id.as_deref(),
        Some(remote[0].job_id.as_str())
    );
    cleanup(slurm(&subs), &r.request.uid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_submission_submits_exactly_once_after_the_lease() {
    let db = TestDb::fresh().await;
    on_store!(db.url(), crash_before_submission);
}

/// A claim leases no more reservations than asked for (each lease is dated from the
/// clock's time at its claim; a claim that took every due reservation at once gave the
/// last of them a lease that could run out before their submission).
async fn claims_take_what_is_asked<S: Store>(store: S) {
    let now = real_now();
    for _ in 0..3 {
        seed(&store, now, now + 900, RunMode::BestEffort).await;
    }
    let mut got = Vec::new();
    for limit in [1, 5, 5] {
        got.push(
            store
                .claim_reservations(now, "x", now + 60, limit, &SiteScope::All)
                .await
                .unwrap()
                .len(),
        );
    }
    assert_eq!(got, [1, 2, 0]);
}

#[tokio::test]
async fn a_claim_takes_no_more_than_asked_on_sqlite() {
    let db = TestDb::sqlite();
    on_store!(db.url(), claims_take_what_is_asked);
}

#[tokio::test]
async fn a_claim_takes_no_more_than_asked_on_postgres() {
    let admin =
        postgres_url().unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    on_store!(db.url(), claims_take_what_is_asked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_executors_on_one_postgres_submit_each_reservation_once() {
    let admin =
        postgres_url().unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    let one = PgStore::connect(db.url()).await.unwrap();
    one.migrate().await.unwrap();
    let two = PgStore::connect(db.url()).await.unwrap();
    let subs = submitters();
    let now = real_now();
    let clock = Arc::new(FixedClock::at(now));
    let mut seeded = Vec::new();
    for _ in 0..8 {
        seeded.push(seed(&one, now, now + 900, RunMode::BestEffort).await);
    }
    let a = Executor::new(one.clone(), subs.clone(), clock.clone(), "replica-1");
    let b = Executor::new(two.clone(), subs.clone(), clock.clone(), "replica-2");
    let mut submitted = (0, 0);
    for _ in 0..3 {
        let (ra, rb) = tokio::join!(a.tick(), b.tick());
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert_eq!(ra.adopted + rb.adopted, 0);
        submitted.0 += ra.submitted;
        submitted.1 += rb.submitted;
    }
    assert_eq!(submitted.0 + submitted.1, 8, "{submitted:?}");
    for r in &seeded {
        let after = reread(&two, r).await;
        assert!(
            after.state.may_have_remote_job() || after.state.is_final(),
            "{after:?}"
        );
        let remote = slurm(&subs).find(&r.request.uid).await.unwrap();
        assert_eq!(remote.len(), 1, "{}: {remote:?}", r.request.uid);
        assert_eq!(
            after.remote_job_id.as_deref(),
            Some(remote[0].job_id.as_str())
        );
        let events = two.reservation_events(r.id).await.unwrap();
        assert_eq!(
            events
                .iter()
                .filter(|e| e.state == ReservationState::Submitted)
                .count(),
            1
        );
    }
    for r in &seeded {
        cleanup(slurm(&subs), &r.request.uid).await;
    }
}

async fn redundant_requests<S: Store>(store: S) {
    let subs = submitters();
    let now = real_now();
    let clock = FixedClock::at(now);
    let c = store
        .insert_coallocation(
            &NewCoallocation {
                uid: new_uid("c"),
                owner: "alice".into(),
                p_all: 0.9,
                p_indep: 0.9,
                p_expected: 0.95,
                count: 1,
                created_at: now,
                idempotency: None,
            },
            &[],
        )
        .await
        .unwrap();
    let a = seed_in(
        &store,
        "debug",
        Some((c.id, 0)),
        now,
        now + 600,
        RunMode::Hold,
        |_| {},
    )
    .await;
    let b = seed_in(
        &store,
        "long",
        Some((c.id, 0)),
        now,
        now + 600,
        RunMode::Hold,
        |_| {},
    )
    .await;
    let e = Executor::new(store.clone(), subs.clone(), Arc::new(clock.clone()), "co");
    assert_eq!(e.tick().await.unwrap().submitted, 2);
    // As soon as one request holds its node, the other is cancelled.
    let start = Instant::now();
    let (won, lost) = loop {
        clock.set(real_now());
        e.tick().await.unwrap();
        let (ra, rb) = (reread(&store, &a).await, reread(&store, &b).await);
        match (ra.state, rb.state) {
            (ReservationState::Started, ReservationState::Cancelled) => break (ra, rb),
            (ReservationState::Cancelled, ReservationState::Started) => break (rb, ra),
            (x, y) => assert!(
                start.elapsed() < DEADLINE && !x.is_final() && !y.is_final(),
                "{x} / {y}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let events = store.reservation_events(lost.id).await.unwrap();
    assert!(
        events
            .iter()
            .any(|ev| ev.reason.contains("redundant") && ev.reason.contains(&won.request.uid)),
        "{events:?}"
    );
    let gone = cleanup(slurm(&subs), &lost.request.uid).await;
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].state, "CANCELLED");
    let alive = slurm(&subs).find(&won.request.uid).await.unwrap();
    assert!(alive[0].ended_at.is_none(), "{alive:?}");
    cleanup(slurm(&subs), &won.request.uid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coallocation_cancels_redundant_requests_once_one_started() {
    let db = TestDb::fresh().await;
    on_store!(db.url(), redundant_requests);
}

/// The service as `qbets serve` runs it, on the real clock: router and executor.
struct Service {
    subs: Arc<Submitters>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl StoreTask for Service {
    type Output = (Router, String, tokio::task::JoinHandle<()>);
    async fn run<S: Store>(self, store: S) -> Self::Output {
        let now = real_now();
        let site = store
            .upsert_site(&NewSite {
                name: SITE.into(),
                kind: SiteKind::Live,
                description: String::new(),
                time_zone: None,
            })
            .await
            .unwrap();
        let queue = store
            .upsert_queue(
                site.id,
                &NewQueue {
                    name: "debug".into(),
                    max_walltime_s: Some(3600),
                    max_nodes: None,
                    total_nodes: None,
                },
            )
            .await
            .unwrap();
        let jobs: Vec<NewJob> = history(now, 300)
            .into_iter()
            .enumerate()
            .map(|(i, (submit, start))| NewJob {
                user_key: None,
                site_id: site.id,
                queue_id: queue.id,
                job_id: format!("h{i}"),
                submit_time: submit,
                start_time: Some(start),
                end_time: Some(start + 100),
                nodes: Some(1),
                walltime_s: Some(600),
                state: qbets::store::JobState::Completed,
            })
            .collect();
        store.insert_jobs(&jobs).await.unwrap();
        let (secret, _) = tokens::create(&store, "alice", Scope::Reserve)
            .await
            .unwrap();
        let (predictors, _) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        let mut stop = self.stop;
        let executor = Executor::new(
            store.clone(),
            self.subs.clone(),
            Arc::new(SystemClock),
            "e2e",
        );
        let handle = tokio::spawn(executor.run(Duration::from_secs(1), async move {
            let _ = stop.wait_for(|s| *s).await;
        }));
        let config = qbets::config::Config {
            sites: vec![local_site()],
            ..Default::default()
        };
        let state = AppState::new(store, config, predictors, Arc::new(SystemClock))
            .with_submitters(self.subs);
        (
            qbets::http::router(state),
            secret.expose().to_string(),
            handle,
        )
    }
}

async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status().as_u16();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn unix(v: &Value) -> i64 {
    qbets::http::params::timestamp(v.as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_a_reservation_on_a_busy_queue_holds_its_node_at_start_at() {
    // No other test's queue may run ahead of the reservation's job.
    let _node = crate::support::own_slurm_node().await;
    let db = TestDb::fresh().await;
    let subs = submitters();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (router, token, executor) = with_store(
        db.url(),
        Service {
            subs: subs.clone(),
            stop: stop_rx,
        },
    )
    .await
    .unwrap();

    // Make the queue busy: four 4-CPU jobs fill the 16-CPU node for a minute.
    let client = SlurmRestClient::new(&ClientConfig {
        url: std::env::var("SLURMRESTD_URL").unwrap(),
        api_version: std::env::var("SLURMRESTD_API_VERSION")
            .unwrap_or_else(|_| "v0.0.38".into())
            .parse()
            .unwrap(),
        user: std::env::var("SLURMRESTD_USER").unwrap_or_else(|_| "root".into()),
        token_env: Some("SLURM_JWT".into()),
        token_file: None,
        timeout_s: 30,
        connect_timeout_s: 5,
    })
    .unwrap();
    let tag = new_uid("busy-");
    // Cancelled when the test ends, passed or failed.
    let mut busy = crate::slurm::scontrol::CancelOnDrop(Vec::new());
    for i in 0..4 {
        let job = client
            .submit(&JobSubmission {
                name: format!("qbets-it-{tag}-{i}"),
                partition: Some("debug".into()),
                nodes: 1,
                time_limit_s: 300,
                script: "#!/bin/sh\nsleep 60\n".into(),
                working_dir: "/tmp".into(),
                environment: vec![],
                cpus_per_task: Some(4),
            })
            .await
            .unwrap();
        busy.0.push(job.job_id);
    }

    // A reservation 100 s ahead, p ≥ 0.9: the history says a minute of lead is plenty.
    let start_at = real_now() + 100;
    let (status, made) = call(
        &router,
        "POST",
        "/v1/reservations",
        &token,
        Some(
            json!({"site": SITE, "queue": "debug", "nodes": 1, "walltime": 60,
                    "start_at": qbets::service::format_unix(start_at),
                    "min_probability": 0.9, "command": "sleep 600"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().unwrap().to_string();
    let submit_at = unix(&made["plan"]["submit_at"]);
    assert!(submit_at < start_at && submit_at > real_now() - 5, "{made}");
    let uri = format!("/v1/reservations/{id}");

    // Watch it: submitted at the planned time, started before start_at, then succeeded.
    let started = Instant::now();
    let mut seen_pending_at_submission = None;
    let view = loop {
        let (_, view) = call(&router, "GET", &uri, &token, None).await;
        if view["state"] == "submitted" && seen_pending_at_submission.is_none() {
            let job = view["remote_job_id"].as_str().unwrap();
            seen_pending_at_submission =
                Some(slurm(&subs).status(job).await.unwrap().unwrap().pending);
        }
        if ["succeeded", "failed", "error", "cancelled"].contains(&view["state"].as_str().unwrap())
        {
            break view;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "no outcome by now: {view}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(view["state"], "succeeded", "{view}");
    let submitted_at = unix(&view["submitted_at"]);
    // Re-planning may have moved the submission time: the last plan is the one kept.
    let submit_at = unix(&view["plan"]["submit_at"]);
    assert!(
        (submit_at..=submit_at + 10).contains(&submitted_at),
        "submitted at {submitted_at}, planned {submit_at}: {view}"
    );
    let job_started = unix(&view["started_at"]);
    assert!(job_started <= start_at, "{view}");
    let job_id = view["remote_job_id"].as_str().unwrap().to_string();
    let remote = slurm(&subs).status(&job_id).await.unwrap().unwrap();
    assert_eq!(
        remote.state, "RUNNING",
        "holding its node past start_at: {remote:?}"
    );
    let states: Vec<&str> = view["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["planned", "submitted", "started", "succeeded"],
        "{view}"
    );

    // Cancel removes the remote job; the outcome stays.
    let (status, after) = call(&router, "DELETE", &uri, &token, None).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["state"], "succeeded");
    let ended = cleanup(slurm(&subs), &id).await;
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].state, "CANCELLED");
    let (_, cal) = call(&router, "GET", "/v1/calibration", &token, None).await;
    assert_eq!(
        cal["queues"][0],
        json!({"site": SITE, "queue": "debug", "finished": 1, "succeeded": 1,
               "mean_predicted_probability": made["plan"]["probability"], "achieved_fraction": 1.0})
    );

    let _ = stop_tx.send(true);
    executor.await.unwrap();
    eprintln!(
        "e2e: planned submit {submit_at}, submitted {submitted_at}, started {job_started}, \
         start_at {start_at}; queue busy at submission: {seen_pending_at_submission:?}"
    );
}
