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
                        let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
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
