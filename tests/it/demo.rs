//! The demo driver (`qbets serve --demo`), driven by an injected real clock: after the
//! pre-roll every demo queue has `ok` bounds as of the simulated now, and a tick of
//! real time moves simulated time by the speed-up and the bounds with it.

use std::sync::Arc;

use qbets::engine::{JobShape, Status};
use qbets::plan::lifecycle::{OnFailure, ReservationState, RunMode};
use qbets::plan::varq::Mode;
use qbets::service::demo::{Demo, DemoOptions};
use qbets::service::reservations::{Executor, Submitters, new_uid};
use qbets::service::{FixedClock, Predictors};
use qbets::store::{
    NewReservation, PlanFields, ReservationRequest, SiteScope, Store, StoreTask, with_store,
};
use qbets::submit::{DemoScheduler, Submitter};

use crate::support::{TEST_NOW, TestDb};

struct Drive;

impl StoreTask for Drive {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let real = FixedClock::at(TEST_NOW);
        let predictors = Predictors::new().with_clock(Arc::new(real.clone()));
        let opts = DemoOptions {
            preroll_s: 10 * 86_400,
            speedup: 300.0,
            ..DemoOptions::default()
        };
        let mut demo = Demo::new(&store, &predictors, opts, Arc::new(real.clone()))
            .await
            .unwrap();
        assert_eq!(demo.sim_now(), TEST_NOW - 10 * 86_400);
        let mut seen = 0;
        let records = demo
            .preroll(&store, &predictors, |done| seen = done)
            .await
            .unwrap();
        assert_eq!(seen, 10 * 86_400);
        assert!(records > 1_000, "{records} records in ten simulated days");
        assert_eq!(demo.sim_now(), TEST_NOW, "the pre-roll catches up with now");

        let shape = JobShape {
            nodes: 8,
            walltime_s: 1_800,
        };
        let mut before = Vec::new();
        for q in ["express", "normal", "low"] {
            let (a, as_of) = predictors.bound("demo", q, shape, 0.95, 0.95).unwrap();
            assert_eq!(
                as_of, TEST_NOW,
                "the demo site speaks for its simulated now"
            );
            assert_eq!(a.status, Status::Ok, "queue {q}: {a:?}");
            before.push(a);
        }
        let (state, _) = predictors.state("demo", "normal").unwrap();
        assert!(state.observed > 100, "{state:?}");

        // A minute of real time is five simulated hours.
        let first = demo.tick(&store, &predictors).await.unwrap();
        assert_eq!(
            first.sim_now, TEST_NOW,
            "the first tick starts the live phase"
        );
        real.set(TEST_NOW + 60);
        let step = demo.tick(&store, &predictors).await.unwrap();
        assert_eq!(step.sim_now, TEST_NOW + 60 * 300);
        assert!(step.records > 0);
        let mut moved = 0;
        for (q, b) in ["express", "normal", "low"].iter().zip(&before) {
            let (a, as_of) = predictors.bound("demo", q, shape, 0.95, 0.95).unwrap();
            assert_eq!(as_of, TEST_NOW + 60 * 300);
            moved += usize::from(a.bound_s != b.bound_s || a.history != b.history);
        }
        assert!(moved > 0, "five simulated hours of jobs move some bound");
        // What the predictors learnt is in the store: a rebuild agrees.
        let (rebuilt, _) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        let rebuilt = rebuilt.with_clock(Arc::new(FixedClock::at(TEST_NOW + 60 * 300)));
        let site = store.site("demo").await.unwrap().unwrap();
        rebuilt.set_site_clock(&site, Arc::new(FixedClock::at(TEST_NOW + 60 * 300)));
        let (st, _) = predictors.state("demo", "normal").unwrap();
        let (rst, _) = rebuilt.state("demo", "normal").unwrap();
        assert_eq!((st.observed, st.pending), (rst.observed, rst.pending));
    }
}

#[tokio::test]
async fn the_demo_site_has_moving_bounds_within_its_preroll() {
    let db = TestDb::fresh().await;
    with_store(db.url(), Drive).await.unwrap();
}

/// A demo site that takes reservations, after its pre-roll and first live step, with an
/// executor for it on its clock.
struct ReservingDemo<S: Store> {
    demo: Demo,
    predictors: Arc<Predictors>,
    submitters: Arc<Submitters>,
    executor: Executor<S>,
}

async fn reserving_demo<S: Store>(store: &S, real: &FixedClock, speedup: f64) -> ReservingDemo<S> {
    let predictors = Arc::new(Predictors::new().with_clock(Arc::new(real.clone())));
    let opts = DemoOptions {
        preroll_s: 2 * 86_400,
        speedup,
        ..DemoOptions::default()
    };
    let mut demo = Demo::new(store, &predictors, opts, Arc::new(real.clone()))
        .await
        .unwrap();
    let scheduler = DemoScheduler::default();
    demo.take_reservations(scheduler.clone());
    demo.preroll(store, &predictors, |_| {}).await.unwrap();
    demo.tick(store, &predictors).await.unwrap();
    let mut submitters = Submitters::new();
    submitters.insert("demo", Submitter::Demo(scheduler));
    let submitters = Arc::new(submitters);
    let executor = Executor::new(store.clone(), submitters.clone(), demo.clock(), "test-demo")
        .with_predictors(predictors.clone())
        .with_scope(SiteScope::Only("demo".into()));
    ReservingDemo {
        demo,
        predictors,
        submitters,
        executor,
    }
}

/// A reservation on the demo site runs its whole managed flow on the demo's own
/// simulated machine, by the demo's clock: the demo's executor submits it when due, the
/// job enters the machine beside the model's and is stored like them, starts, holds its
/// nodes past `start_at`, and the reservation succeeds. An executor for the other sites
/// leaves it alone.
struct Reserve;

impl StoreTask for Reserve {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let real = FixedClock::at(TEST_NOW);
        let ReservingDemo {
            mut demo,
            predictors,
            submitters,
            executor,
        } = reserving_demo(&store, &real, 60.0).await;
        // The other sites' executor runs by the real clock, which the demo's is ahead of.
        let others = Executor::new(store.clone(), submitters, Arc::new(real.clone()), "test")
            .with_scope(SiteScope::Except("demo".into()));

        // Due now (by the demo's clock), to hold 4 express nodes 20 minutes later.
        let now = demo.sim_now();
        let start_at = now + 1_200;
        let r = store
            .insert_reservation(&planned(now, start_at))
            .await
            .unwrap();
        let reread = || async { store.reservation(&r.request.uid).await.unwrap().unwrap() };

        assert_eq!(others.tick().await.unwrap().submitted, 0);
        let report = executor.tick().await.unwrap();
        assert_eq!(report.submitted, 1, "{report:?}");
        let submitted = reread().await;
        assert_eq!(submitted.state, ReservationState::Submitted);
        let job_id = submitted.remote_job_id.clone().unwrap();

        // Real seconds go by; each moves the demo a simulated minute.
        let mut states = vec![submitted.state];
        let mut t = TEST_NOW;
        while !reread().await.state.is_final() && t < TEST_NOW + 3_600 {
            t += 1;
            real.set(t);
            demo.tick(&store, &predictors).await.unwrap();
            others.tick().await.unwrap();
            executor.tick().await.unwrap();
            let s = reread().await.state;
            if states.last() != Some(&s) {
                states.push(s);
            }
        }
        assert_eq!(
            states,
            [
                ReservationState::Submitted,
                ReservationState::Started,
                ReservationState::Succeeded
            ],
            "{:?}",
            reread().await
        );
        let done = reread().await;
        assert!(done.started_at.is_some_and(|s| s <= start_at), "{done:?}");
        // The job is the demo site's like any other: stored with the shape submitted.
        let site = store.site("demo").await.unwrap().unwrap();
        let job = store.job(site.id, &job_id).await.unwrap().unwrap();
        assert_eq!(job.nodes, Some(4));
        assert_eq!(job.walltime_s, Some(1_800));
        assert_eq!(job.start_time, done.started_at);
    }
}

#[tokio::test]
async fn a_demo_reservation_runs_on_the_demo_machine_by_its_clock() {
    // Both backends: claiming by site scope is SQL of each.
    with_store(TestDb::sqlite().url(), Reserve).await.unwrap();
    let db = TestDb::fresh().await;
    with_store(db.url(), Reserve).await.unwrap();
}

/// A reservation for 4 express nodes of the demo site at `start_at`, planned to be
/// submitted at `submit_at` (times of the demo's clock).
fn planned(submit_at: i64, start_at: i64) -> NewReservation {
    NewReservation {
        request: ReservationRequest {
            uid: new_uid("r"),
            owner: "alice".into(),
            site: "demo".into(),
            queue: "express".into(),
            nodes: 4,
            walltime_s: 600,
            start_at,
            min_probability: 0.5,
            confidence: 0.95,
            mode: Mode::Latest,
            step_s: 300,
            command: "true".into(),
            run_mode: RunMode::Hold,
            on_failure: OnFailure::Cancel,
            webhook: None,
        },
        state: ReservationState::Planned,
        plan: Some(PlanFields {
            submit_at,
            advertised_walltime_s: 1_800,
            probability: 0.9,
        }),
        at_risk: false,
        coallocation: None,
        reason: "planned by the test".into(),
        created_at: submit_at,
        idempotency_key: None,
    }
}

/// A live step of the demo spans minutes of simulated time; a plan that submits a
/// minute before its start, both inside one step, is still submitted at its time:
/// the step stops there and runs the demo's executor. An executor looking at the
/// demo's clock only between steps (as the demo's was before) finds the start passed.
struct SteppedReserve;

impl StoreTask for SteppedReserve {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let real = FixedClock::at(TEST_NOW);
        let ReservingDemo {
            mut demo,
            predictors,
            executor,
            ..
        } = reserving_demo(&store, &real, 300.0).await;

        // Two reservations, each due 100 s into the next step and starting 60 s later.
        let now = demo.sim_now();
        let inside = store
            .insert_reservation(&planned(now + 100, now + 160))
            .await
            .unwrap();
        let reread = |uid: String| {
            let store = store.clone();
            async move { store.reservation(&uid).await.unwrap().unwrap() }
        };
        assert_eq!(
            executor.next_submission(now).await.unwrap(),
            Some(now + 100)
        );
        real.set(TEST_NOW + 1);
        let step = demo
            .tick_with(&store, &predictors, Some(&executor))
            .await
            .unwrap();
        assert_eq!(step.sim_now, now + 300, "one real second is 300 simulated");
        let r = reread(inside.request.uid.clone()).await;
        assert_ne!(r.state, ReservationState::Failed, "{r:?}");
        assert_eq!(
            r.submitted_at,
            Some(now + 100),
            "submitted at its plan's time: {r:?}"
        );
        assert!(r.remote_job_id.is_some(), "{r:?}");

        // The same plan, the executor run only after the step.
        let now = demo.sim_now();
        let outside = store
            .insert_reservation(&planned(now + 100, now + 160))
            .await
            .unwrap();
        real.set(TEST_NOW + 2);
        demo.tick(&store, &predictors).await.unwrap();
        executor.tick().await.unwrap();
        let r = reread(outside.request.uid.clone()).await;
        assert_eq!(r.state, ReservationState::Failed, "{r:?}");
        assert_eq!(r.submitted_at, None, "{r:?}");
    }
}

#[tokio::test]
async fn a_demo_reservation_due_inside_a_step_is_submitted_at_its_time() {
    with_store(TestDb::sqlite().url(), SteppedReserve)
        .await
        .unwrap();
}

/// The demo under another scheduling policy: the same workload gives other waits, so
/// other bounds (FCFS lets nothing pass the head job; EASY backfills around it); a
/// policy for moldable jobs is refused by name.
struct UnderPolicy(qbets::sim::Policy);

impl StoreTask for UnderPolicy {
    type Output = Vec<Option<u64>>;
    async fn run<S: Store>(self, store: S) -> Vec<Option<u64>> {
        let real = FixedClock::at(TEST_NOW);
        let predictors = Predictors::new().with_clock(Arc::new(real.clone()));
        let opts = DemoOptions {
            preroll_s: 4 * 86_400,
            policy: self.0,
            ..DemoOptions::default()
        };
        let mut demo = Demo::new(&store, &predictors, opts, Arc::new(real.clone()))
            .await
            .unwrap();
        demo.preroll(&store, &predictors, |_| {}).await.unwrap();
        let site = store.site("demo").await.unwrap().unwrap();
        assert!(
            site.description.contains(&match self.0 {
                qbets::sim::Policy::Fcfs => "FCFS".to_string(),
                _ => "EASY".to_string(),
            }),
            "{}",
            site.description
        );
        let shape = JobShape {
            nodes: 32,
            walltime_s: 7_200,
        };
        ["express", "normal", "low"]
            .iter()
            .map(|q| {
                predictors
                    .bound("demo", q, shape, 0.95, 0.95)
                    .unwrap()
                    .0
                    .bound_s
            })
            .collect()
    }
}

#[tokio::test]
async fn the_demo_runs_under_the_policy_asked_for() {
    use qbets::service::demo::demo_policy;
    use qbets::sim::Policy;
    let easy = with_store(TestDb::sqlite().url(), UnderPolicy(Policy::Easy))
        .await
        .unwrap();
    let fcfs = with_store(TestDb::sqlite().url(), UnderPolicy(Policy::Fcfs))
        .await
        .unwrap();
    assert!(
        easy.iter().chain(&fcfs).all(Option::is_some),
        "{easy:?} {fcfs:?}"
    );
    assert_ne!(easy, fcfs, "the policy changes the bounds");
    assert!(demo_policy(Policy::parse("los:20").unwrap()).is_ok());
    assert!(demo_policy(Policy::Conservative).is_ok());
    let refused = demo_policy(Policy::parse("cirne-berman").unwrap()).unwrap_err();
    assert!(refused.contains("rigid"), "{refused}");
}
