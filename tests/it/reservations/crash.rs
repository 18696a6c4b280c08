//! `kill -9` of a real `qbets serve` process, and two `qbets serve` replicas on one
//! PostgreSQL, against the local Slurm (fails, never skips, without it).
//!
//! A process is stopped at an exact point of the submission path with `QBETS_HALT_AT`
//! (`claimed`: the lease is taken and nothing was asked of Slurm; `submitted`: Slurm
//! accepted the job and the store has not recorded it); the test waits for the line the
//! process prints there, sends it SIGKILL, and starts a fresh `qbets serve` on the same
//! database. The claims last 30 s (`[reservations] lease_s`), so the restarted process
//! takes the reservation over after that; the test polls the store for the outcome.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use qbets::config::Config;
use qbets::plan::lifecycle::{ReservationState, RunMode};
use qbets::store::{Reservation, Store};
use qbets::submit::SubmitConfig;

use super::executor::{cleanup, real_now, reread, seed, slurm, submitters};
use super::local_site;
use crate::support::{TestDb, postgres_url};
use crate::webdriver::free_port;

/// Seconds a claim lasts in these tests.
const LEASE_S: u64 = 30;
/// How long a step may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(90);

/// A configuration file for `qbets serve` on `database_url` with the local Slurm as
/// site `local` (source and submit target), executor passes every second.
fn write_config(dir: &Path, database_url: &str) -> PathBuf {
    let mut site = local_site();
    if let Some(SubmitConfig::SlurmRest(s)) = site.submit.as_mut() {
        // A slow answer from a loaded slurmrestd must not pass for a lost submission
        // (the executor would give its lease back and adopt the job on the next pass);
        // the lease outlives three of these, as the configuration requires.
        s.timeout_s = LEASE_S / 3;
    }
    let mut config = Config {
        database_url: database_url.to_string(),
        sites: vec![site],
        ..Config::default()
    };
    config.reservations.tick_s = 1;
    config.reservations.lease_s = LEASE_S;
    config.log.filter = "info".into();
    let path = dir.join("qbets.toml");
    std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
    path
}

/// A `qbets serve` process; its stderr lines arrive on `lines`. Killed (SIGKILL) on drop.
struct Serve {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    name: &'static str,
}

impl Serve {
    fn start(
        name: &'static str,
        config: &Path,
        database_url: &str,
        halt_at: Option<&str>,
    ) -> Serve {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_qbets"));
        cmd.arg("serve")
            .arg("--config")
            .arg(config)
            .arg("--database-url")
            .arg(database_url)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", free_port()))
            .env_remove("QBETS_HALT_AT")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(point) = halt_at {
            cmd.env("QBETS_HALT_AT", point);
        }
        let mut child = cmd.spawn().expect("qbets serve starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Drain to the end, whether or not anyone still listens.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Serve {
            child,
            lines,
            seen: Vec::new(),
            name,
        }
    }

    /// Waits for a stderr line containing `needle`; fails the test after [`DEADLINE`]
    /// or when the process exits first.
    fn wait_for_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_secs(1))) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.seen.push(line.clone());
                    if hit {
                        return line;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!(
                    "{} exited before printing {needle:?}:\n{}",
                    self.name,
                    self.seen.join("\n")
                ),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            assert!(
                Instant::now() < deadline,
                "{} did not print {needle:?} within {DEADLINE:?}:\n{}",
                self.name,
                self.seen.join("\n")
            );
        }
    }

    /// `kill -9`, and checks that the process died of it.
    fn kill9(mut self) {
        use std::os::unix::process::ExitStatusExt;
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{}: {status:?}", self.name);
    }

    /// Every line printed so far (for failure messages).
    fn log(&mut self) -> String {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.seen.join("\n")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls the store until the reservation has left `planned`; its row then.
async fn wait_until_submitted<S: Store>(
    store: &S,
    r: &Reservation,
    serve: &mut Serve,
) -> Reservation {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = reread(store, r).await;
        if now.state != ReservationState::Planned {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{} still planned after {DEADLINE:?}: {now:?}\n{}",
            r.request.uid,
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What a kill and a restart left.
struct Outcome {
    /// The reservation as the restarted service recorded it.
    after: Reservation,
    /// Its events' reasons.
    events: Vec<String>,
    /// The remote jobs carrying its id when the first process had been killed.
    before: Vec<String>,
    /// The same once the restarted service had recorded it.
    remote: Vec<String>,
}

/// Kills a `qbets serve` at `halt_at` while it submits a due reservation, restarts it,
/// and says what the scheduler and the store hold.
async fn killed_at<S: Store>(store: S, url: String, halt_at: &'static str) -> Outcome {
    let subs = submitters();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let now = real_now();
    let r = seed(&store, now, now + 900, RunMode::Hold).await;

    let mut first = Serve::start("the first qbets serve", &config, &url, Some(halt_at));
    first.wait_for_line(&format!(
        "executor halted at {halt_at} (reservation {})",
        r.request.uid
    ));
    first.kill9();
    let halted = reread(&store, &r).await;
    assert_eq!(halted.state, ReservationState::Planned, "{halted:?}");
    assert!(
        halted.lease_owner.is_some(),
        "the dead process's claim stays: {halted:?}"
    );
    let before: Vec<String> = slurm(&subs)
        .find(&r.request.uid)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.job_id)
        .collect();

    let mut second = Serve::start("the restarted qbets serve", &config, &url, None);
    let after = wait_until_submitted(&store, &r, &mut second).await;
    let remote: Vec<String> = slurm(&subs)
        .find(&r.request.uid)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.job_id)
        .collect();
    second.kill9();
    cleanup(slurm(&subs), &r.request.uid).await;
    let events = store
        .reservation_events(r.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.reason)
        .collect();
    Outcome {
        after,
        events,
        before,
        remote,
    }
}

/// Adopted (or submitted), and followed in the same pass: its job may have started
/// already.
fn assert_submitted(after: &Reservation) {
    assert!(
        matches!(
            after.state,
            ReservationState::Submitted | ReservationState::Started
        ),
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_submission_and_its_record_then_restart_submits_no_second_job() {
    let db = TestDb::fresh().await;
    let url = db.url().to_string();
    let o = on_store!(db.url(), killed_at, url, "submitted");
    assert_eq!(
        o.before.len(),
        1,
        "the killed process had submitted one job: {:?}",
        o.before
    );
    assert_eq!(o.remote, o.before, "no second job after the restart");
    assert_submitted(&o.after);
    assert_eq!(o.after.remote_job_id.as_deref(), Some(o.before[0].as_str()));
    assert!(
        o.events
            .iter()
            .any(|e| e.contains("found already submitted")),
        "{:?}",
        o.events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_planning_and_submission_then_restart_submits_exactly_once() {
    let db = TestDb::fresh().await;
    let url = db.url().to_string();
    let o = on_store!(db.url(), killed_at, url, "claimed");
    assert!(
        o.before.is_empty(),
        "killed before asking Slurm: {:?}",
        o.before
    );
    assert_eq!(
        o.remote.len(),
        1,
        "one job after the restart: {:?}",
        o.remote
    );
    assert_submitted(&o.after);
    assert_eq!(o.after.remote_job_id.as_deref(), Some(o.remote[0].as_str()));
    assert!(
        o.events
            .iter()
            .any(|e| e.starts_with("submitted remote job")),
        "{:?}",
        o.events
    );
    assert!(
        !o.events
            .iter()
            .any(|e| e.contains("found already submitted")),
        "{:?}",
        o.events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_one_postgres_submit_each_reservation_once() {
    let admin =
        postgres_url().unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = TestDb::postgres(&admin).await;
    let store = qbets::store::PgStore::connect(db.url()).await.unwrap();
    store.migrate().await.unwrap();
    let subs = submitters();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), db.url());
    let now = real_now();
    let mut seeded = Vec::new();
    for _ in 0..8 {
        seeded.push(seed(&store, now, now + 900, RunMode::BestEffort).await);
    }
    // Both replicas start on the same due reservations and race for them.
    let mut one = Serve::start("replica one", &config, db.url(), None);
    let two = Serve::start("replica two", &config, db.url(), None);
    let mut recorded = Vec::new();
    for r in &seeded {
        recorded.push(wait_until_submitted(&store, r, &mut one).await);
    }
    one.kill9();
    two.kill9();
    for (r, after) in seeded.iter().zip(&recorded) {
        let remote = slurm(&subs).find(&r.request.uid).await.unwrap();
        assert_eq!(remote.len(), 1, "{}: {remote:?}", r.request.uid);
        assert_eq!(
            after.remote_job_id.as_deref(),
            Some(remote[0].job_id.as_str()),
            "{after:?}"
        );
        let events = store.reservation_events(r.id).await.unwrap();
        assert_eq!(
            events
                .iter()
                .filter(|e| e.state == ReservationState::Submitted)
                .count(),
            1,
            "{events:?}"
        );
        assert!(
            !events
                .iter()
                .any(|e| e.reason.contains("found already submitted")),
            "{events:?}"
        );
    }
    for r in &seeded {
        cleanup(slurm(&subs), &r.request.uid).await;
    }
}
