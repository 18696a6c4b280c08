//! Shared test helpers: a fresh database per test (an SQLite file in a temporary
//! directory, or a new PostgreSQL database created from `TEST_DATABASE_URL` and dropped
//! afterwards) and [`TestApp`], the router built on it and called in-process.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::Connection;

/// A database that exists for one test.
pub enum TestDb {
    Sqlite {
        _dir: tempfile::TempDir,
        url: String,
    },
    Postgres {
        admin_url: String,
        name: String,
        url: String,
    },
}

impl TestDb {
    /// The URL the store opens.
    pub fn url(&self) -> &str {
        match self {
            TestDb::Sqlite { url, .. } | TestDb::Postgres { url, .. } => url,
        }
    }

    /// PostgreSQL when `TEST_DATABASE_URL` is set (scripts/test sets it), SQLite otherwise.
    pub async fn fresh() -> TestDb {
        match postgres_url() {
            Some(url) => TestDb::postgres(&url).await,
            None => TestDb::sqlite(),
        }
    }

    /// A new SQLite file in its own temporary directory.
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().join("qbets.db").display());
        TestDb::Sqlite { _dir: dir, url }
    }

    /// A new, empty PostgreSQL database on the server `admin_url` points to. Panics (the
    /// test fails) when the server cannot be reached: a PostgreSQL test never skips
    /// once it has been asked to run.
    pub async fn postgres(admin_url: &str) -> TestDb {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "qbets_test_{}_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        );
        let mut conn = sqlx::PgConnection::connect(admin_url)
            .await
            .unwrap_or_else(|e| panic!("TEST_DATABASE_URL={admin_url} is unreachable: {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        conn.close().await.ok();
        let url = with_database(admin_url, &name);
        TestDb::Postgres {
            admin_url: admin_url.to_string(),
            name,
            url,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let TestDb::Postgres {
            admin_url, name, ..
        } = self
        {
            // Drop runs outside async; a short-lived runtime on its own thread does the
            // clean-up whatever runtime (if any) the test is on.
            let (admin_url, name) = (admin_url.clone(), name.clone());
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                        let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                            .execute(&mut conn)
                            .await;
                    }
                });
            })
            .join();
        }
    }
}

/// `TEST_DATABASE_URL`, when set and not empty.
pub fn postgres_url() -> Option<String> {
    std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|s| !s.is_empty())
}

/// The local Slurm's one 16-CPU node. Tests that fill it with queues of their own share
/// it; a test whose outcome rests on when its own job starts (a reservation's deadline)
/// has it alone, so no other test's queue runs ahead of its job. Fair: a test waiting to
/// have the node alone is not overtaken by later sharers.
static SLURM_NODE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// For a test that fills the local Slurm's node with a queue of its own.
pub async fn share_slurm_node() -> tokio::sync::RwLockReadGuard<'static, ()> {
    SLURM_NODE.read().await
}

/// For a test whose job must start on time on the local Slurm's node.
pub async fn own_slurm_node() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    SLURM_NODE.write().await
}

/// The same server URL naming another database (query string kept).
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let authority_end = base[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(base.len());
    format!("{}/{db}{query}", &base[..authority_end])
}

#[test]
fn database_names_are_swapped_in_urls() {
    assert_eq!(
        with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
        "postgres://postgres@127.0.0.1:5432/x"
    );
    assert_eq!(
        with_database("postgres://u:p@h?sslmode=disable", "x"),
        "postgres://u:p@h/x?sslmode=disable"
    );
}

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use qbets::config::Config;
use qbets::service::import::ImportSummary;
use qbets::service::reservations::Submitters;
use qbets::service::{AppState, FixedClock, Predictors, tokens};
use qbets::store::{Scope, Store, StoreTask, with_store, with_store_options};
use tower::ServiceExt;

/// The application built in-process on a fresh database, with a fixed clock.
pub struct TestApp {
    router: Router,
    pub config: Config,
    pub clock: FixedClock,
    webhook_secret: Option<qbets::notify::WebhookSecret>,
    _db: TestDb,
}

/// "Now" for live sites in tests: 2024-05-01T12:00:00Z.
pub const TEST_NOW: i64 = 1_714_564_800;

struct BuildRouter {
    config: Config,
    clock: FixedClock,
    webhook_secret: Option<qbets::notify::WebhookSecret>,
}

impl StoreTask for BuildRouter {
    type Output = Router;
    async fn run<S: Store>(self, store: S) -> Router {
        let (predictors, _) = Predictors::rebuild(&store, |_| {}).await.unwrap();
        let submitters = Arc::new(Submitters::from_config(&self.config.sites).unwrap());
        let state = AppState::new(store, self.config, predictors, Arc::new(self.clock))
            .with_submitters(submitters)
            .with_webhook_secret(self.webhook_secret);
        qbets::http::router(state)
    }
}

struct CreateToken(String, Scope);

impl StoreTask for CreateToken {
    type Output = String;
    async fn run<S: Store>(self, store: S) -> String {
        let (secret, _) = tokens::create(&store, &self.0, self.1).await.unwrap();
        secret.expose().to_string()
    }
}

impl TestApp {
    /// The default configuration on a fresh database.
    pub async fn new() -> Self {
        Self::with_config(|_| {}).await
    }

    /// A configuration adjusted by `adjust`, on a fresh database.
    pub async fn with_config(adjust: impl FnOnce(&mut Config)) -> Self {
        Self::on(TestDb::fresh().await).adjusted(adjust).await
    }

    /// The default configuration on `db` (to run one story on each backend).
    pub fn on(db: TestDb) -> PendingApp {
        PendingApp {
            db,
            webhook_secret: None,
        }
    }
}

/// A database waiting for its configuration (see [`TestApp::on`]).
pub struct PendingApp {
    db: TestDb,
    webhook_secret: Option<qbets::notify::WebhookSecret>,
}

impl PendingApp {
    /// The app signs reservation webhooks with this secret (as `webhook_secret_env`
    /// would give it), so reservations may name a webhook.
    pub fn with_webhook_secret(mut self, secret: qbets::notify::WebhookSecret) -> Self {
        self.webhook_secret = Some(secret);
        self
    }

    /// Builds the application with the configuration adjusted by `adjust`.
    pub async fn adjusted(self, adjust: impl FnOnce(&mut Config)) -> TestApp {
        let db = self.db;
        let mut config = Config {
            database_url: db.url().to_string(),
            ..Config::default()
        };
        adjust(&mut config);
        let clock = FixedClock::at(TEST_NOW);
        let router = with_store_options(
            &config.database_url,
            config.store.options(),
            BuildRouter {
                config: config.clone(),
                clock: clock.clone(),
                webhook_secret: self.webhook_secret.clone(),
            },
        )
        .await
        .unwrap();
        TestApp {
            router,
            config,
            clock,
            webhook_secret: self.webhook_secret,
            _db: db,
        }
    }
}

impl TestApp {
    /// Builds the application again on the same database and clock, as a restarted
    /// server would (the predictors are rebuilt from the store, e.g. after an import).
    pub async fn restart(&mut self) {
        self.router = with_store_options(
            &self.config.database_url,
            self.config.store.options(),
            BuildRouter {
                config: self.config.clone(),
                clock: self.clock.clone(),
                webhook_secret: self.webhook_secret.clone(),
            },
        )
        .await
        .unwrap();
    }

    /// Creates a token of `scope` and returns its secret.
    pub async fn token(&self, name: &str, scope: Scope) -> String {
        with_store(&self.config.database_url, CreateToken(name.into(), scope))
            .await
            .unwrap()
    }

    /// Imports a trace through the command line's function.
    pub async fn import(&self, site: &str, file: &Path) -> ImportSummary {
        qbets::cli::import::import_file(&self.config, site, file)
            .await
            .unwrap()
    }

    /// Serves the application on a loopback port (for a real browser, or real sockets)
    /// until the test's runtime ends, as `qbets serve` does (its connection limits
    /// included); returns its base URL.
    pub async fn listen(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = self.router.clone();
        let limits = qbets::http::server::Limits::from_config(&self.config.http);
        tokio::spawn(async move {
            qbets::http::server::serve(listener, router, limits, std::future::pending()).await
        });
        url
    }

    /// Sends a request to the application.
    pub async fn send(&self, req: Request<Body>) -> TestResponse {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        TestResponse {
            status,
            headers,
            body,
        }
    }

    /// `GET uri`, with a bearer token when given.
    pub async fn get(&self, uri: &str, token: Option<&str>) -> TestResponse {
        let mut req = Request::get(uri);
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        self.send(req.body(Body::empty()).unwrap()).await
    }

    /// A JSON request with `method`, with a bearer token when given.
    pub async fn json(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        body: &serde_json::Value,
    ) -> TestResponse {
        self.raw(method, uri, token, "application/json", body.to_string())
            .await
    }

    /// A request with any content type and body text.
    pub async fn raw(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        content_type: &str,
        body: String,
    ) -> TestResponse {
        self.with_headers(
            method,
            uri,
            token,
            &[(header::CONTENT_TYPE.as_str(), content_type)],
            body,
        )
        .await
    }

    /// A request with these headers (and a bearer token when given).
    pub async fn with_headers(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: String,
    ) -> TestResponse {
        let mut req = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        self.send(req.body(Body::from(body)).unwrap()).await
    }
}

/// A response, read whole.
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl TestResponse {
    /// The body as JSON (panics with the body text when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts an RFC 9457 problem with this status and returns it.
    pub fn problem(&self, status: u16) -> serde_json::Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text());
        assert_eq!(
            self.headers[header::CONTENT_TYPE],
            "application/problem+json",
            "body: {}",
            self.text()
        );
        let p = self.json();
        assert_eq!(p["status"], status);
        assert!(p["type"].is_string() && p["title"].is_string() && p["detail"].is_string());
        p
    }

    /// Asserts a 400 problem naming exactly `fields` and returns it.
    pub fn invalid(&self, fields: &[&str]) -> serde_json::Value {
        let p = self.problem(400);
        let named: Vec<&str> = p["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("no errors list: {p}"))
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert_eq!(named, fields, "{p}");
        p.clone()
    }
}
