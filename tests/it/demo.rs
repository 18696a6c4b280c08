//! The demo driver (`qbets serve --demo`), driven by an injected real clock: after the
//! pre-roll every demo queue has `ok` bounds as of the simulated now, and a tick of
//! real time moves simulated time by the speed-up and the bounds with it.

use std::sync::Arc;

use qbets::engine::{JobShape, Status};
use qbets::service::demo::{Demo, DemoOptions};
use qbets::service::{FixedClock, Predictors};
use qbets::store::{Store, StoreTask, with_store};

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
