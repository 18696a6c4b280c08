//! Reservation webhooks (issue 25 item 5) against a real local receiver (an axum
//! server on 127.0.0.1): a reservation driven through its states by the executor (on
//! the demo's simulated scheduler) and a cancel delivers each change once, in order,
//! signed; a receiver that is down, then answers 503, gets the events once it is back,
//! the attempts counted and the backoff kept by the injected clock; a bad URL is a 400
//! naming `webhook`, and a server with no signing secret refuses a webhook with a 422.
//! On SQLite and on PostgreSQL (`TEST_DATABASE_URL`).

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use qbets::notify::{Deliverer, DeliveryReport, WebhookSecret};
use qbets::plan::lifecycle::{OnFailure, ReservationState, RunMode};
use qbets::plan::varq::Mode;
use qbets::service::FixedClock;
use qbets::service::reservations::{Executor, Submitters, cancel, new_uid};
use qbets::store::{
    NewReservation, PlanFields, Replanned, Reservation, ReservationRequest, Scope, Store,
    StoreTask, Transition, WebhookOutcome, with_store,
};
use qbets::submit::{DemoScheduler, Submitter};
use serde_json::{Value, json};

use crate::support::{TEST_NOW, TestApp, TestDb};

const SECRET: &str = "a-test-secret-of-32-bytes-length";
const SITE: &str = "hooks";

/// What the receiver was sent.
#[derive(Debug, Clone)]
struct Got {
    path: String,
    event_id: String,
    signature: String,
    body: String,
}

/// A local webhook receiver answering with the status it is set to.
#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    status: Arc<AtomicU16>,
}

async fn take(
    State(r): State<Receiver>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    r.got.lock().unwrap().push(Got {
        path: uri.path().to_string(),
        event_id: header("qbets-event-id"),
        signature: header("qbets-signature"),
        body,
    });
    StatusCode::from_u16(r.status.load(Ordering::SeqCst)).unwrap()
}

impl Receiver {
    fn new() -> Self {
        Self {
            got: Arc::default(),
            status: Arc::new(AtomicU16::new(200)),
        }
    }

    /// Serves on `listener` from now on.
    fn serve(&self, listener: tokio::net::TcpListener) {
        let app = axum::Router::new()
            .fallback(axum::routing::post(take))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
    }

    fn set_status(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

/// A planned reservation at the test site, owned by alice, naming `webhook`.
async fn seed<S: Store>(
    store: &S,
    webhook: &str,
    submit_at: i64,
    start_at: i64,
    created_at: i64,
) -> Reservation {
    store
        .insert_reservation(&NewReservation {
            request: ReservationRequest {
                uid: new_uid("r"),
                owner: "alice".into(),
                site: SITE.into(),
                queue: "q".into(),
                nodes: 1,
                walltime_s: 60,
                start_at,
                min_probability: 0.5,
                confidence: 0.95,
                mode: Mode::Latest,
                step_s: 30,
                command: "true".into(),
                run_mode: RunMode::Hold,
                on_failure: OnFailure::Cancel,
                webhook: Some(webhook.into()),
            },
            state: ReservationState::Planned,
            plan: Some(PlanFields {
                submit_at,
                advertised_walltime_s: 60 + (start_at - submit_at),
                probability: 0.9,
            }),
            at_risk: false,
            coallocation: None,
            reason: "planned by the test".into(),
            created_at,
            idempotency_key: None,
        })
        .await
        .unwrap()
}

/// Drives one reservation through at_risk, submitted, started and succeeded (the
/// executor, on the demo's scheduler) and cancels another, delivering as it goes.
struct Drive {
    url: String,
    clock: FixedClock,
}

impl StoreTask for Drive {
    type Output = (String, String);
    async fn run<S: Store>(self, store: S) -> (String, String) {
        let clock = self.clock;
        let t = TEST_NOW;
        let scheduler = DemoScheduler::default();
        let mut submitters = Submitters::new();
        submitters.insert(SITE, Submitter::Demo(scheduler.clone()));
        let submitters = Arc::new(submitters);
        let executor = Executor::new(
            store.clone(),
            submitters.clone(),
            Arc::new(clock.clone()),
            "exec",
        );
        let secret = WebhookSecret::new(SECRET).unwrap();
        let deliverer = Deliverer::new(store.clone(), Arc::new(clock.clone()), secret, "hooks-1")
            .unwrap()
            .allow_private(true);

        let a = seed(&store, &format!("{}/a", self.url), t + 100, t + 300, t).await;
        let b = seed(&store, &format!("{}/b", self.url), t + 1000, t + 2000, t).await;
        // Nothing changed yet: nothing to send.
        assert_eq!(deliverer.tick().await.unwrap(), DeliveryReport::default());

        // A re-plan finds no time meeting P: at risk (told once, not at every re-plan).
        for at in [t + 10, t + 20] {
            let replanned = Replanned {
                plan: a.plan.unwrap(),
                at_risk: true,
                at,
                event: (at == t + 10).then(|| "at risk (test)".into()),
            };
            assert!(store.replan_reservation(a.id, &replanned).await.unwrap());
        }
        // B is cancelled by its owner.
        clock.set(t + 30);
        cancel(&store, &submitters, &b, t + 30, "cancelled by the test")
            .await
            .unwrap();
        let report = deliverer.tick().await.unwrap();
        assert_eq!(report.delivered, 2, "{report:?}");

        // A is submitted at its time, starts, and holds its node at start_at.
        clock.set(t + 100);
        assert_eq!(executor.tick().await.unwrap().submitted, 1);
        assert_eq!(deliverer.tick().await.unwrap().delivered, 1);
        let job: i64 = store
            .reservation(&a.request.uid)
            .await
            .unwrap()
            .unwrap()
            .remote_job_id
            .unwrap()
            .parse()
            .unwrap();
        scheduler.started(job, t + 150);
        clock.set(t + 150);
        executor.tick().await.unwrap();
        assert_eq!(deliverer.tick().await.unwrap().delivered, 1);
        for now in t + 300..t + 310 {
            clock.set(now);
            executor.tick().await.unwrap();
        }
        let done = store.reservation(&a.request.uid).await.unwrap().unwrap();
        assert_eq!(done.state, ReservationState::Succeeded, "{done:?}");
        assert_eq!(deliverer.tick().await.unwrap().delivered, 1);
        // Sent once: nothing is left.
        clock.set(t + 4000);
        assert_eq!(deliverer.tick().await.unwrap(), DeliveryReport::default());
        (a.request.uid, b.request.uid)
    }
}

async fn delivers_each_change_once_in_order_signed(db: TestDb) {
    let secret = WebhookSecret::new(SECRET).unwrap();
    // The receiver listens on loopback, which a server sends to only when told so.
    let app = TestApp::on(db)
        .with_webhook_secret(secret.clone())
        .adjusted(|c| c.reservations.webhook_allow_private = true)
        .await;
    let alice = app.token("alice", Scope::Reserve).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let receiver = Receiver::new();
    receiver.serve(listener);

    let (a, b) = with_store(
        &app.config.database_url,
        Drive {
            url,
            clock: app.clock.clone(),
        },
    )
    .await
    .unwrap();

    let got = receiver.got();
    let mut ids = std::collections::HashSet::new();
    for g in &got {
        assert!(secret.verify(&g.signature, &g.body), "{g:?}");
        // Tampered, the signature no longer holds.
        assert!(!secret.verify(&g.signature, &g.body.replace("hooks", "other")));
        assert!(ids.insert(g.event_id.clone()), "sent twice: {g:?}");
    }
    let of = |path: &str| -> Vec<Value> {
        got.iter()
            .filter(|g| g.path == path)
            .map(|g| serde_json::from_str(&g.body).unwrap())
            .collect()
    };
    let states = |events: &[Value]| -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| {
                (
                    e["previous_state"].as_str().unwrap().to_string(),
                    e["state"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let a_events = of("/a");
    assert_eq!(
        states(&a_events),
        [
            ("planned".to_string(), "at_risk".to_string()),
            ("planned".into(), "submitted".into()),
            ("submitted".into(), "started".into()),
            ("started".into(), "succeeded".into()),
        ]
    );
    assert_eq!(
        a_events[0],
        json!({
            "type": "reservation.state_changed",
            "reservation": a,
            "site": SITE,
            "queue": "q",
            "state": "at_risk",
            "previous_state": "planned",
            "at": "2024-05-01T12:00:10Z",
            "url": format!("/v1/reservations/{a}"),
        })
    );
    let b_events = of("/b");
    assert_eq!(
        states(&b_events),
        [("planned".to_string(), "cancelled".to_string())]
    );
    assert_eq!(b_events[0]["reservation"], b.as_str());

    // The reservation's view shows its webhook and how each event went.
    let view = app
        .get(&format!("/v1/reservations/{a}"), Some(&alice))
        .await
        .json();
    assert!(view["webhook"].as_str().unwrap().ends_with("/a"), "{view}");
    let deliveries = view["webhook_deliveries"].as_array().unwrap();
    let shown: Vec<(&str, &str, i64)> = deliveries
        .iter()
        .map(|d| {
            (
                d["state"].as_str().unwrap(),
                d["status"].as_str().unwrap(),
                d["attempts"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("at_risk", "delivered", 1),
            ("submitted", "delivered", 1),
            ("started", "delivered", 1),
            ("succeeded", "delivered", 1),
        ],
        "{view}"
    );
    assert!(deliveries.iter().all(|d| d["delivered_at"].is_string()
        && d["next_attempt_at"].is_null()
        && d["last_error"].is_null()));
}

#[tokio::test]
async fn each_state_change_is_delivered_once_in_order_and_signed() {
    delivers_each_change_once_in_order_signed(TestDb::sqlite()).await;
    delivers_each_change_once_in_order_signed(TestDb::fresh().await).await;
}

/// A receiver that is not listening, then answers 503, then takes the events.
struct Down {
    port: u16,
    receiver: Receiver,
}

impl StoreTask for Down {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let t = TEST_NOW;
        let clock = FixedClock::at(t);
        let url = format!("http://127.0.0.1:{}/hook", self.port);
        let secret = WebhookSecret::new(SECRET).unwrap();
        let d = Deliverer::new(store.clone(), Arc::new(clock.clone()), secret, "d")
            .unwrap()
            .allow_private(true);
        let r = seed(&store, &url, t, t + 600, t).await;
        for (from, to, at) in [
            (ReservationState::Planned, ReservationState::Submitted, t),
            (
                ReservationState::Submitted,
                ReservationState::Started,
                t + 1,
            ),
        ] {
            let tr = Transition::new(from, to, at, "by the test");
            assert!(store.transition_reservation(r.id, &tr).await.unwrap());
        }
        let rows = || async { store.webhook_deliveries(r.id).await.unwrap() };

        // Nobody listens: the first event fails, the second waits behind it.
        clock.set(t + 1);
        let report = d.tick().await.unwrap();
        assert_eq!((report.delivered, report.failed), (0, 1), "{report:?}");
        let now = rows().await;
        assert_eq!((now[0].attempts, now[0].next_attempt_at), (1, t + 11));
        assert!(now[0].last_error.is_some(), "{now:?}");
        assert_eq!(now[1].attempts, 0);
        // Not before its time (10 s after the first attempt).
        clock.set(t + 10);
        assert_eq!(d.tick().await.unwrap(), DeliveryReport::default());

        // Back, but answering 503: the second attempt fails, the next one 20 s later.
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        self.receiver.set_status(503);
        self.receiver.serve(listener);
        clock.set(t + 11);
        assert_eq!(d.tick().await.unwrap().failed, 1);
        let now = rows().await;
        assert_eq!((now[0].attempts, now[0].next_attempt_at), (2, t + 31));
        assert!(
            now[0].last_error.as_deref().unwrap().contains("503"),
            "{now:?}"
        );
        clock.set(t + 30);
        assert_eq!(d.tick().await.unwrap(), DeliveryReport::default());
        assert_eq!(self.receiver.got().len(), 1);

        // Taking them now: both, in order.
        self.receiver.set_status(204);
        clock.set(t + 31);
        assert_eq!(d.tick().await.unwrap().delivered, 2);
        let got = self.receiver.got();
        let states: Vec<String> = got
            .iter()
            .map(|g| serde_json::from_str::<Value>(&g.body).unwrap()["state"].to_string())
            .collect();
        assert_eq!(states, ["\"submitted\"", "\"submitted\"", "\"started\""]);
        // The same event (id and body) on every attempt.
        assert_eq!(got[0].event_id, got[1].event_id);
        assert_eq!(got[0].body, got[1].body);
        let now = rows().await;
        assert_eq!(
            now.iter()
                .map(|w| (w.attempts, w.delivered_at))
                .collect::<Vec<_>>(),
            [(3, Some(t + 31)), (1, Some(t + 31))]
        );

        // A row is leased to one deliverer at a time: another finds nothing while the
        // lease lasts (60 s), and takes over a dead one's row after it.
        let tr = Transition::new(
            ReservationState::Started,
            ReservationState::Failed,
            t + 40,
            "by the test",
        );
        assert!(store.transition_reservation(r.id, &tr).await.unwrap());
        let claimed = store
            .claim_webhooks(t + 40, "one", t + 100, 10)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        assert!(
            store
                .claim_webhooks(t + 41, "two", t + 101, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let late = WebhookOutcome::Delivered { at: t + 42 };
        assert!(
            !store
                .record_webhook(claimed[0].id, "two", &late)
                .await
                .unwrap()
        );
        let taken = store
            .claim_webhooks(t + 101, "two", t + 161, 10)
            .await
            .unwrap();
        assert_eq!(taken.len(), 1);

        // Given up 24 h after the change.
        clock.set(t + 40 + 86_400);
        let gone = WebhookOutcome::Failed {
            at: t + 102,
            error: "x".into(),
            next_attempt_at: t + 40 + 86_400,
            give_up: false,
        };
        assert!(
            store
                .record_webhook(taken[0].id, "two", &gone)
                .await
                .unwrap()
        );
        self.receiver.set_status(500);
        let report = d.tick().await.unwrap();
        assert_eq!(report.gave_up, 1, "{report:?}");
        let last = rows().await.pop().unwrap();
        assert!(
            last.gave_up_at.is_some() && last.delivered_at.is_none(),
            "{last:?}"
        );
    }
}

async fn a_receiver_down_for_a_while(db: TestDb) {
    // A port nobody listens on (yet).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let down = Down {
        port,
        receiver: Receiver::new(),
    };
    with_store(db.url(), down).await.unwrap();
}

#[tokio::test]
async fn a_receiver_that_is_down_for_a_while_gets_the_events_when_back() {
    a_receiver_down_for_a_while(TestDb::sqlite()).await;
    a_receiver_down_for_a_while(TestDb::fresh().await).await;
}

/// A deliverer not allowed non-public addresses sends nothing to one, even when the
/// row got into the store (a URL stored before the setting changed): the attempt fails
/// with the reason, and the receiver on loopback hears nothing.
struct Guarded {
    receiver: Receiver,
}

impl StoreTask for Guarded {
    type Output = ();
    async fn run<S: Store>(self, store: S) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        self.receiver.serve(listener);
        let t = TEST_NOW;
        let clock = FixedClock::at(t);
        let secret = WebhookSecret::new(SECRET).unwrap();
        let d = Deliverer::new(store.clone(), Arc::new(clock.clone()), secret, "d").unwrap();
        let r = seed(&store, &url, t, t + 600, t).await;
        let tr = Transition::new(
            ReservationState::Planned,
            ReservationState::Submitted,
            t,
            "by the test",
        );
        assert!(store.transition_reservation(r.id, &tr).await.unwrap());
        clock.set(t + 1);
        let report = d.tick().await.unwrap();
        assert_eq!((report.delivered, report.failed), (0, 1), "{report:?}");
        let rows = store.webhook_deliveries(r.id).await.unwrap();
        let error = rows[0].last_error.clone().unwrap_or_default();
        assert!(error.contains("webhook_allow_private"), "{rows:?}");
        assert!(self.receiver.got().is_empty());
    }
}

#[tokio::test]
async fn no_webhook_is_sent_to_a_private_address_unless_allowed() {
    let guarded = Guarded {
        receiver: Receiver::new(),
    };
    with_store(TestDb::sqlite().url(), guarded).await.unwrap();
}

fn reservation(webhook: &str) -> Value {
    json!({
        "site": "nowhere", "queue": "debug", "nodes": 1, "walltime": "00:02:00",
        "start_at": "2024-05-01T13:00:00Z", "min_probability": 0.5,
        "command": "true", "webhook": webhook,
    })
}

fn coallocation(webhook: &str) -> Value {
    json!({
        "reservations": [{"nodes": 1, "walltime": 300, "start_at": "2024-05-01T13:00:00Z",
                          "command": "hostname"}],
        "candidates": [{"site": "nowhere", "queue": "debug"}],
        "webhook": webhook,
    })
}

#[tokio::test]
async fn a_bad_webhook_url_is_refused_naming_the_field() {
    let app = TestApp::on(TestDb::sqlite())
        .with_webhook_secret(WebhookSecret::new(SECRET).unwrap())
        .adjusted(|_| {})
        .await;
    let alice = app.token("alice", Scope::Reserve).await;
    let long = format!("https://example.org/{}", "a".repeat(2100));
    for bad in [
        "ftp://example.org/hook",
        "example.org/hook",
        "http://",
        "https://user:pw@example.org/",
        long.as_str(),
    ] {
        let r = app
            .json("POST", "/v1/reservations", Some(&alice), &reservation(bad))
            .await;
        r.invalid(&["webhook"]);
        app.json(
            "POST",
            "/v1/coallocations",
            Some(&alice),
            &coallocation(bad),
        )
        .await
        .invalid(&["webhook"]);
    }
    // The server's own network, by default: well-formed, but no probing it through
    // webhooks (422, the field named).
    for private in [
        "http://127.0.0.1:6379/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8080/",
        "http://localhost/hook",
    ] {
        let r = app
            .json(
                "POST",
                "/v1/reservations",
                Some(&alice),
                &reservation(private),
            )
            .await;
        let p = r.problem(422);
        assert_eq!(p["errors"][0]["field"], "webhook", "{private}: {p}");
        let p = app
            .json(
                "POST",
                "/v1/coallocations",
                Some(&alice),
                &coallocation(private),
            )
            .await
            .problem(422);
        assert_eq!(p["errors"][0]["field"], "webhook", "{private}: {p}");
    }
    // A good one passes the checks (and meets the unknown site).
    let r = app
        .json(
            "POST",
            "/v1/reservations",
            Some(&alice),
            &reservation("https://example.org/hook"),
        )
        .await;
    r.problem(404);
}

#[tokio::test]
async fn a_webhook_without_a_signing_secret_is_refused_with_422() {
    let app = TestApp::new().await;
    let alice = app.token("alice", Scope::Reserve).await;
    let r = app
        .json(
            "POST",
            "/v1/reservations",
            Some(&alice),
            &reservation("https://example.org/hook"),
        )
        .await;
    let p = r.problem(422);
    assert_eq!(p["errors"][0]["field"], "webhook", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("webhook_secret_env"),
        "{p}"
    );
    let p = app
        .json(
            "POST",
            "/v1/coallocations",
            Some(&alice),
            &coallocation("https://example.org/hook"),
        )
        .await
        .problem(422);
    assert_eq!(p["errors"][0]["field"], "webhook", "{p}");
    // Without a webhook the same request goes on (to the unknown site).
    let mut plain = reservation("x");
    plain.as_object_mut().unwrap().remove("webhook");
    app.json("POST", "/v1/reservations", Some(&alice), &plain)
        .await
        .problem(404);
}
