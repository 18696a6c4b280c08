//! PostgreSQL down answers fast (issue 22): a real PostgreSQL reached through a TCP
//! proxy in the test, which the test cuts (every connection dropped, new ones held
//! unanswered, as a host gone behind a firewall) and restores. The pool's acquire
//! timeout is an hour, so an answer at all while the database is away shows that the
//! ready timeout (1 s here) and the store gate answered, not the pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use crate::support::{TestApp, TestDb, postgres_url};

/// Longest a test waits for what must happen: a guard against a hang, not a timing.
const GUARD: Duration = Duration::from_secs(60);

/// A TCP proxy to PostgreSQL that the test can cut and restore.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let flag = up.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                if !flag.load(Ordering::Acquire) {
                    // Away: the connection is held and never answered.
                    held.push(client);
                    continue;
                }
                let upstream = upstream.clone();
                // Only a cut after this connection arrived ends it (a clone starts
                // from what the original has seen, which is no cut at all).
                let mut cuts = cuts.clone();
                cuts.borrow_and_update();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Proxy { port, up, cut }
    }

    /// Drops every connection and holds new ones unanswered.
    fn cut(&self) {
        self.up.store(false, Ordering::Release);
        self.cut.send_modify(|n| *n += 1);
    }

    fn restore(&self) {
        self.up.store(true, Ordering::Release);
    }
}

/// `host:port` of a postgres:// URL.
fn host_port(url: &str) -> String {
    let after = url.split_once("://").unwrap().1;
    let authority = after.split(['/', '?']).next().unwrap();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:5432")
    }
}

#[tokio::test]
async fn postgres_away_answers_503_fast_and_recovers() {
    let admin =
        postgres_url().unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    let proxy = Proxy::start(host_port(db.url())).await;
    let proxied = db.url().replacen(
        &host_port(db.url()),
        &format!("127.0.0.1:{}", proxy.port),
        1,
    );
    let app = TestApp::on(db)
        .adjusted(|c| {
            c.database_url = proxied;
            c.store.acquire_timeout_ms = 3_600_000;
            c.store.ready_timeout_ms = 1_000;
        })
        .await;
    assert_eq!(app.get("/readyz", None).await.status, 200);
    assert_eq!(app.get("/v1/sites", None).await.status, 200);

    proxy.cut();
    let ready = tokio::time::timeout(GUARD, app.get("/readyz", None))
        .await
        .expect("/readyz waited on the pool");
    let p = ready.problem(503);
    assert_eq!(ready.headers["retry-after"], "1");
    assert!(p["detail"].is_string(), "{p}");
    // Requests that need the store are refused at once while it is away.
    for uri in ["/v1/sites", "/v1/bounds", "/v1/sites/x/queues"] {
        let r = tokio::time::timeout(GUARD, app.get(uri, None))
            .await
            .unwrap_or_else(|_| panic!("{uri} waited on the pool"));
        r.problem(503);
        assert_eq!(r.headers["retry-after"], "1", "{uri}");
    }
    // What needs no store still answers.
    assert_eq!(app.get("/healthz", None).await.status, 200);

    proxy.restore();
    tokio::time::timeout(GUARD, async {
        while app.get("/readyz", None).await.status != 200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the store never came back");
    assert_eq!(app.get("/v1/sites", None).await.status, 200);
}
