//! The users' command line (`qbets bound|deadline|job|rank|reserve|completions`): the
//! real binary run against a real server on a loopback port (the application on a fresh
//! database with its clock fixed, so answers are the API's own), checking what it
//! prints, that `--json` is the server's answer, and the exit codes scripts test.

use serde_json::{Value, json};

use crate::reservations::SITE;
use crate::reservations::api::app_with_history;
use crate::support::{TEST_NOW, TestApp};
use qbets::store::Scope;

/// What a run of the binary gave.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    fn expect(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "exit code\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs `qbets ARGS` against `server`, with `QBETS_TOKEN` set to `token` when given
/// (and unset otherwise).
async fn qbets(server: &str, token: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_qbets"));
    cmd.args(args)
        .env("QBETS_URL", server)
        .env_remove("QBETS_TOKEN")
        .kill_on_drop(true);
    if let Some(t) = token {
        cmd.env("QBETS_TOKEN", t);
    }
    let out = cmd.output().await.expect("qbets runs");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A served application with the `local` site's history, plus an empty queue.
async fn served() -> (TestApp, String, String) {
    let (app, admin) = app_with_history().await;
    let r = app
        .json(
            "PUT",
            &format!("/v1/sites/{SITE}"),
            Some(&admin),
            &json!({"queues": [{"name": "empty", "max_nodes": 4}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let base = app.listen().await;
    (app, admin, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_and_deadline_answer_as_the_api_does() {
    let (app, _, base) = served().await;
    // --json is the server's own answer.
    let run = qbets(
        &base,
        None,
        &[
            "bound",
            SITE,
            "debug",
            "--nodes",
            "1",
            "--walltime",
            "10m",
            "--json",
        ],
    )
    .await
    .expect(0);
    let api = app
        .get(
            "/v1/sites/local/queues/debug/bound?nodes=1&walltime=600",
            None,
        )
        .await
        .json();
    assert_eq!(run.json(), api);
    let bound_s = api["bound_s"]
        .as_u64()
        .expect("the debug queue has a bound");

    // The table, and the sentence a person reads.
    let run = qbets(
        &base,
        None,
        &["bound", SITE, "debug", "-N", "1", "-t", "00:10:00"],
    )
    .await
    .expect(0);
    let header = run.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("SITE   QUEUE  NODES  WALLTIME  BOUND"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(api["bound"].as_str().unwrap()),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "95% of jobs like this start within {} on debug (95% confidence).",
            qbets::cli::remote::human(bound_s)
        )),
        "{}",
        run.stdout
    );

    // A queue with no history answers without a number: exit 6.
    let run = qbets(
        &base,
        None,
        &["bound", SITE, "empty", "-N", "1", "-t", "600"],
    )
    .await
    .expect(6);
    assert!(
        run.stdout.contains("insufficient_history"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("No bound: too few jobs like this"),
        "{}",
        run.stdout
    );

    // Deadlines: relative to the site's present, or a time.
    let run = qbets(
        &base,
        None,
        &[
            "deadline", SITE, "debug", "-N", "1", "-t", "10m", "--by", "+2m", "--json",
        ],
    )
    .await
    .expect(0);
    let api = app
        .get(
            "/v1/sites/local/queues/debug/deadline?nodes=1&walltime=600&deadline=120",
            None,
        )
        .await
        .json();
    assert_eq!(run.json(), api);
    assert_eq!(api["deadline"], qbets::service::format_unix(TEST_NOW + 120));
    let at = qbets::service::format_unix(TEST_NOW + 120);
    let run = qbets(
        &base,
        None,
        &[
            "deadline", SITE, "debug", "-N", "1", "-t", "10m", "--by", &at,
        ],
    )
    .await
    .expect(0);
    assert!(
        run.stdout.contains("starts within 2 min (by "),
        "{}",
        run.stdout
    );

    // The server's refusal names the field: exit 4.
    let past = qbets::service::format_unix(TEST_NOW - 60);
    let run = qbets(
        &base,
        None,
        &[
            "deadline", SITE, "debug", "-N", "1", "-t", "10m", "--by", &past,
        ],
    )
    .await
    .expect(4);
    assert!(
        run.stderr.contains("deadline: is not after"),
        "{}",
        run.stderr
    );
    // An unknown site or queue: exit 4, said as the server says it.
    let run = qbets(
        &base,
        None,
        &["bound", "nowhere", "debug", "-N", "1", "-t", "10m"],
    )
    .await
    .expect(4);
    assert!(
        run.stderr.contains("no site named \"nowhere\""),
        "{}",
        run.stderr
    );
    // A value the command line itself refuses: clap's exit 2, naming the flag.
    let run = qbets(
        &base,
        None,
        &["bound", SITE, "debug", "-N", "0", "-t", "10m"],
    )
    .await
    .expect(2);
    assert!(run.stderr.contains("--nodes"), "{}", run.stderr);
    let run = qbets(
        &base,
        None,
        &["bound", SITE, "debug", "-N", "1", "-t", "10 minutes"],
    )
    .await
    .expect(2);
    assert!(run.stderr.contains("90m, 1h30m or 2d"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rank_orders_every_queue_as_the_api_does() {
    let (app, _, base) = served().await;
    let run = qbets(&base, None, &["rank", "-N", "1", "-t", "10m", "--json"])
        .await
        .expect(0);
    let api = app
        .get("/v1/bounds?nodes=1&walltime=600", None)
        .await
        .json();
    assert_eq!(run.json(), api);
    let order: Vec<&str> = api["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["queue"].as_str().unwrap())
        .collect();
    assert_eq!(order.len(), 3, "{api}");
    assert_eq!(
        order[2], "empty",
        "queues without a number come last: {api}"
    );

    let run = qbets(&base, None, &["rank", "-N", "1", "-t", "10m"])
        .await
        .expect(0);
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .skip(1)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][0], "1", "{}", run.stdout);
    assert_eq!(rows[1][0], "2", "{}", run.stdout);
    assert_eq!(rows[2][..3], ["—", "local", "empty"], "{}", run.stdout);
    for (row, queue) in rows.iter().zip(&order) {
        assert_eq!(row[2], *queue, "{}", run.stdout);
    }
    // A job no queue can run (the empty queue takes at most 4 nodes, debug 1 hour).
    let api = app
        .get("/v1/bounds?nodes=8&walltime=7200", None)
        .await
        .json();
    let answered = api["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["site"] == SITE && b["bound_s"].is_u64());
    let run = qbets(
        &base,
        None,
        &["rank", "--site", SITE, "-N", "8", "-t", "2h"],
    )
    .await
    .expect(if answered { 0 } else { 6 });
    assert!(run.stdout.contains("local  long"), "{}", run.stdout);
    assert!(
        !run.stdout.contains("empty") && !run.stdout.contains("debug"),
        "{}",
        run.stdout
    );
    let run = qbets(
        &base,
        None,
        &["rank", "--site", "nowhere", "-N", "1", "-t", "1h"],
    )
    .await
    .expect(4);
    assert!(run.stderr.contains("no site named"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_found_with_the_bound_it_was_given() {
    let (_app, _, base) = served().await;
    // The server's job endpoint answers (`GET /v1/sites/{site}/jobs/{job_id}`).
    let run = qbets(&base, None, &["job", SITE, "debug-299", "--json"])
        .await
        .expect(0);
    let v = run.json();
    assert_eq!(v["queue"], "debug");
    assert_eq!(v["job_id"], "debug-299");
    assert_eq!(v["wait_s"], (7 * 299) % 60);
    assert!(
        v["within_bound"].is_boolean() || v["within_bound"].is_null(),
        "{v}"
    );
    let run = qbets(&base, None, &["job", SITE, "long-3"]).await.expect(0);
    assert!(
        run.stdout.contains("long-3") && run.stdout.contains("queue"),
        "{}",
        run.stdout
    );
    let run = qbets(&base, None, &["job", SITE, "no-such-job"])
        .await
        .expect(4);
    assert!(
        run.stderr.contains("has no job \"no-such-job\""),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_are_planned_made_listed_followed_and_cancelled() {
    let (app, _, base) = served().await;
    let user = app.token("alice", Scope::Reserve).await;
    let reader = app.token("bob", Scope::Read).await;
    let request = [
        SITE, "debug", "-N", "1", "-t", "5m", "--start", "+10m", "-p", "0.5",
    ];

    // A plan: the same as the API's for the same request at the site's present.
    let mut args = vec!["reserve", "plan"];
    args.extend(request);
    args.push("--json");
    let run = qbets(&base, None, &args).await.expect(0);
    let api = app
        .json(
            "POST",
            "/v1/plans/varq",
            None,
            &json!({"site": SITE, "queue": "debug", "nodes": 1, "walltime": 300,
                    "start_at": qbets::service::format_unix(TEST_NOW + 600), "min_probability": 0.5}),
        )
        .await;
    assert_eq!(api.status, 200, "{}", api.text());
    assert_eq!(run.json(), api.json());
    args.pop();
    let run = qbets(&base, None, &args).await.expect(0);
    assert!(
        run.stdout.contains(&format!(
            "Submit at {}",
            api.json()["submit_at"].as_str().unwrap()
        )),
        "{}",
        run.stdout
    );

    // No plan meets a probability the queue cannot give: exit 6, with the best.
    let run = qbets(
        &base,
        None,
        &[
            "reserve", "plan", SITE, "debug", "-N", "1", "-t", "5m", "--start", "+10m", "-p",
            "0.999999",
        ],
    )
    .await
    .expect(6);
    assert!(
        run.stderr.contains("No plan meets the probability"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("the best is p = "), "{}", run.stderr);

    // Making one needs a token with the reserve scope: exit 5.
    let mut create = vec!["reserve", "create"];
    create.extend(request);
    create.extend(["--command", "hostname", "--json"]);
    let run = qbets(&base, None, &create).await.expect(5);
    assert!(run.stderr.contains("set QBETS_TOKEN"), "{}", run.stderr);
    qbets(&base, Some(&reader), &create).await.expect(5);
    // --webhook is sent: this server has no signing secret, so it refuses (exit 4).
    let mut hooked = create.clone();
    hooked.extend(["--webhook", "https://example.org/hooks/qbets"]);
    let run = qbets(&base, Some(&user), &hooked).await.expect(4);
    assert!(run.stderr.contains("webhook_secret_env"), "{}", run.stderr);
    let run = qbets(&base, Some(&user), &create).await.expect(0);
    let made = run.json();
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(made["state"], "planned");
    assert_eq!(made["owner"], "alice");
    assert_eq!(
        made["start_at"],
        qbets::service::format_unix(TEST_NOW + 600)
    );

    let run = qbets(&base, Some(&user), &["reserve", "list"])
        .await
        .expect(0);
    assert!(
        run.stdout.lines().nth(1).unwrap().starts_with(&id),
        "{}",
        run.stdout
    );
    let run = qbets(&base, Some(&user), &["reserve", "show", &id])
        .await
        .expect(0);
    assert!(run.stdout.contains("planned: submit at"), "{}", run.stdout);
    // Another token does not see it.
    let other = app.token("carol", Scope::Reserve).await;
    qbets(&base, Some(&other), &["reserve", "show", &id])
        .await
        .expect(4);

    let run = qbets(&base, Some(&user), &["reserve", "cancel", &id])
        .await
        .expect(0);
    assert_eq!(run.stdout.trim(), format!("reservation {id} is cancelled"));
    // Followed to its end: every event once, and the exit code says it was not met.
    let run = qbets(
        &base,
        Some(&user),
        &["reserve", "watch", &id, "--interval", "1"],
    )
    .await
    .expect(7);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(
        lines[0].contains("planned") && lines[1].contains("cancelled"),
        "{}",
        run.stdout
    );
    // Cancelling again is safe (it looks for a remote job once more).
    let run = qbets(&base, Some(&user), &["reserve", "cancel", &id])
        .await
        .expect(0);
    assert_eq!(run.stdout.trim(), format!("reservation {id} is cancelled"));
    // An id the token does not have: exit 4.
    qbets(&base, Some(&user), &["reserve", "watch", "r-no-such"])
        .await
        .expect(4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_there_is_exit_code_3() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}");
    let run = qbets(&base, None, &["rank", "-N", "1", "-t", "1h"])
        .await
        .expect(3);
    assert!(
        run.stderr
            .contains(&format!("cannot reach the qbets server at {base}")),
        "{}",
        run.stderr
    );
    // --server wins over QBETS_URL; a URL without a scheme is a usage error.
    let run = qbets(
        "http://127.0.0.1:1",
        None,
        &["rank", "-N", "1", "-t", "1h", "--server", "localhost:8080"],
    )
    .await
    .expect(2);
    assert!(
        run.stderr.contains("must start with http://"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_help_cover_the_users_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = qbets("http://unused", None, &["completions", shell])
            .await
            .expect(0);
        for word in ["bound", "deadline", "rank", "reserve", "walltime"] {
            assert!(run.stdout.contains(word), "{shell}: no {word}");
        }
    }
    let run = qbets("http://unused", None, &["--help"]).await.expect(0);
    assert!(
        run.stdout.contains("Exit codes of those commands:"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("QBETS_TOKEN"), "{}", run.stdout);
}

/// Runs `sbatch ARGS` on the local Slurm through the client configuration in `conf`
/// (munge, not the REST token), with these environment variables.
async fn sbatch(conf: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new("sbatch");
    cmd.args(args)
        .env("SLURM_CONF", conf)
        .env_remove("SLURM_JWT")
        .env_remove("QBETS_HINT")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.expect("sbatch runs");
    Run {
        code: out.status.code().expect("sbatch exited"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The qbets lines of sbatch's stderr.
fn hints(run: &Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("qbets:"))
        .collect()
}

/// `contrib/slurm/cli_filter.lua` on the local Slurm. Only this test's sbatch runs it:
/// they read a copy of the cluster's slurm.conf with `CliFilterPlugins=cli_filter/lua`
/// and the script beside it (client commands alone read that setting), so the shared
/// cluster and the other tests are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sbatch_hint_appears_and_never_stands_in_the_way() {
    let conf = crate::sensors::required("SLURM_CONF");
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("\nCliFilterPlugins=cli_filter/lua\n");
    let copy = dir.path().join("slurm.conf");
    std::fs::write(&copy, text).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/slurm/cli_filter.lua"),
        dir.path().join("cli_filter.lua"),
    )
    .unwrap();

    let (app, _, base) = served().await;
    let env = [("QBETS_URL", base.as_str()), ("QBETS_SITE", SITE)];
    // --test-only: Slurm runs the filter and checks the job, and queues nothing.
    let run = sbatch(
        &copy,
        &env,
        &[
            "--test-only",
            "-p",
            "debug",
            "-N",
            "1",
            "-t",
            "10",
            "--wrap",
            "true",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("to start at"), "{}", run.stderr);
    let bounds = app
        .get("/v1/bounds?nodes=1&walltime=600", None)
        .await
        .json();
    let bound = |queue: &str| {
        bounds["bounds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["queue"] == queue)
            .and_then(|b| b["bound_s"].as_u64())
            .unwrap_or_else(|| panic!("no bound for {queue}: {bounds}"))
    };
    let queues = app.get("/v1/sites/local/queues", None).await.json();
    let pending = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "debug")
        .unwrap()["pending"]
        .as_u64()
        .unwrap();
    let mut expected = format!(
        "qbets: 95% of jobs like this start within {} on `debug` ({pending} jobs waiting)",
        qbets::cli::remote::human(bound("debug"))
    );
    if bound("long") < bound("debug") {
        expected.push_str(&format!(
            "; `long` within {}",
            qbets::cli::remote::human(bound("long"))
        ));
    }
    assert_eq!(hints(&run), [expected.as_str()], "{}", run.stderr);

    // No partition named (and none configured as the default): the queue that waits
    // least, as the server ranks them.
    let best = bounds["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["site"] == SITE && b["bound_s"].is_u64())
        .unwrap();
    let run = sbatch(
        &copy,
        &env,
        &["--test-only", "-N", "1", "-t", "10", "--wrap", "true"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        hints(&run),
        [format!(
            "qbets: 95% of jobs like this start within {} on `{}`",
            qbets::cli::remote::human(best["bound_s"].as_u64().unwrap()),
            best["queue"].as_str().unwrap()
        )
        .as_str()],
        "{}",
        run.stderr
    );
    // Opted out: nothing.
    let mut quiet = env.to_vec();
    quiet.push(("QBETS_HINT", "0"));
    let run = sbatch(
        &copy,
        &quiet,
        &["--test-only", "-p", "long", "-t", "10", "--wrap", "true"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(hints(&run).is_empty(), "{}", run.stderr);

    // qbets slow: a server that takes the connection and never answers. The hint is
    // dropped after its timeout and the job is checked as before.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let slow = [
        ("QBETS_URL", silent_url.as_str()),
        ("QBETS_SITE", SITE),
        ("QBETS_HINT_TIMEOUT", "1"),
    ];
    let run = sbatch(
        &copy,
        &slow,
        &["--test-only", "-p", "debug", "-t", "10", "--wrap", "true"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("to start at"), "{}", run.stderr);
    assert!(hints(&run).is_empty(), "{}", run.stderr);
    drop(silent);

    // qbets stopped: a real submission goes through as it would without the filter.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let _node = crate::support::share_slurm_node().await;
    let env = [("QBETS_URL", down.as_str()), ("QBETS_SITE", SITE)];
    let run = sbatch(
        &copy,
        &env,
        &[
            "-p",
            "debug",
            "-t",
            "1",
            "-J",
            "qbets-cli-filter-test",
            "--wrap",
            "true",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id: u64 = run
        .stdout
        .trim()
        .strip_prefix("Submitted batch job ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let _cancel = crate::slurm::scontrol::CancelOnDrop(vec![id]);
    assert!(hints(&run).is_empty(), "{}", run.stderr);
    let shown = crate::slurm::scontrol::run(&["show", "job", "-o", &id.to_string()]).await;
    assert!(shown.contains("JobName=qbets-cli-filter-test"), "{shown}");
}

/// `qbets serve --demo` killed on drop.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The demo as the README runs it: `qbets serve --demo` in a directory (its own
/// ./qbets-demo.db), a token made for it with `qbets token create --demo` in the same
/// directory, and the users' commands against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_answers_the_command_line_and_takes_its_own_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let qbets_in_dir = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_qbets"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("DATABASE_URL")
            .env_remove("QBETS_CONFIG")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    // Before the demo has started there is no store of its own to put a token in.
    let early = qbets_in_dir(&[
        "token", "create", "--demo", "--name", "me", "--scope", "admin",
    ]);
    assert_eq!(early.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&early.stderr).contains("start `qbets serve --demo`"));

    let port = crate::webdriver::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let _server = Served(
        std::process::Command::new(env!("CARGO_BIN_EXE_qbets"))
            .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}")])
            .current_dir(dir.path())
            .env_remove("DATABASE_URL")
            .env_remove("QBETS_CONFIG")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Ready once the demo's queues answer (the pre-roll runs first).
    let mut tries = 0;
    let ranked = loop {
        let run = qbets(&base, None, &["rank", "-N", "8", "-t", "30m", "--json"]).await;
        if run.code == 0
            && run.json()["bounds"]
                .as_array()
                .is_some_and(|b| b.len() == 3)
        {
            break run.json();
        }
        tries += 1;
        assert!(tries < 600, "the demo did not answer: {}", run.stderr);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    for b in ranked["bounds"].as_array().unwrap() {
        assert_eq!(b["site"], "demo");
        assert_eq!(b["status"], "ok", "{b}");
    }
    assert!(dir.path().join("qbets-demo.db").exists());

    let made = qbets_in_dir(&[
        "token", "create", "--demo", "--name", "me", "--scope", "admin",
    ]);
    assert_eq!(
        made.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let token = String::from_utf8(made.stdout).unwrap().trim().to_string();
    let run = qbets(&base, Some(&token), &["reserve", "list", "--json"])
        .await
        .expect(0);
    assert_eq!(run.json()["reservations"], json!([]));
    // The reservations page's defaults (its first queue, express; 4 nodes, 30 min, two
    // hours after the site's present, p 0.75, a 300 s step) plan. (With its old default
    // walltime, 01:00:00, every submission time asked for more than express's 1 hour.)
    let defaults = |walltime: &'static str| {
        [
            "reserve", "plan", "demo", "express", "-N", "4", "-t", walltime, "--start", "+2h",
            "-p", "0.75", "--step", "300",
        ]
    };
    qbets(&base, None, &defaults("00:30:00")).await.expect(0);
    let run = qbets(&base, None, &defaults("01:00:00")).await.expect(6);
    assert!(run.stderr.contains("limits the walltime"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advise_ranks_shapes_as_the_api_does() {
    let app = crate::advice::advice_app().await;
    let base = app.listen().await;
    let run = qbets(
        &base,
        None,
        &[
            "advise", "--site", "hpc", "--queue", "batch", "--shape", "1x1h", "--shape", "4x30m",
            "--shape", "256x5m", "--json",
        ],
    )
    .await
    .expect(0);
    let body = json!({"site": "hpc", "queue": "batch", "candidates": [
        {"nodes": 1, "walltime": 3600}, {"nodes": 4, "walltime": 1800},
        {"nodes": 256, "walltime": 300}]});
    let api = app.json("POST", "/v1/advice", None, &body).await.json();
    assert_eq!(run.json(), api);
    assert_eq!(api["ranked"], 2, "{api}");

    // The table: ranks 1 and 2, then the shape beyond the queue's limits, unranked.
    let run = qbets(
        &base,
        None,
        &[
            "advise",
            "--site",
            "hpc",
            "--queue",
            "batch",
            "--shape",
            "1x1h",
            "--shape",
            "4x30m",
            "--shape",
            "256x5m",
            "--deadline",
            "+4h",
        ],
    )
    .await
    .expect(0);
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .skip(1)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let api_rows = api["rows"].as_array().unwrap();
    for (row, r) in rows.iter().zip(api_rows) {
        assert_eq!(row[1], r["nodes"].to_string(), "{}", run.stdout);
    }
    assert_eq!(rows[0][0], "1", "{}", run.stdout);
    assert_eq!(rows[1][0], "2", "{}", run.stdout);
    assert_eq!(rows[2][..2], ["—", "256"], "{}", run.stdout);
    assert!(run.stdout.contains("exceeds_limits"), "{}", run.stdout);
    assert!(run.stdout.contains("IN TIME"), "{}", run.stdout);

    // A moldable job: one row per size the speedup model gives.
    let run = qbets(
        &base,
        None,
        &[
            "advise",
            "--site",
            "hpc",
            "--queue",
            "batch",
            "--speedup",
            "downey:32:1",
            "--runtime",
            "2h",
            "--at",
            "16",
            "--nodes",
            "1..64",
            "--json",
        ],
    )
    .await
    .expect(0);
    assert_eq!(run.json()["rows"].as_array().unwrap().len(), 7);

    // No shape with a number (a queue without history): exit code 6.
    let run = qbets(
        &base,
        None,
        &[
            "advise", "--site", "hpc", "--queue", "empty", "--shape", "1x1h",
        ],
    )
    .await
    .expect(6);
    assert!(
        run.stdout.contains("No shape has a bound"),
        "{}",
        run.stdout
    );
    // Usage errors: 2; a site the server does not know: 4.
    qbets(&base, None, &["advise", "--shape", "4"])
        .await
        .expect(2);
    qbets(&base, None, &["advise"]).await.expect(2);
    qbets(
        &base,
        None,
        &["advise", "--shape", "1x1h", "--speedup", "simple"],
    )
    .await
    .expect(2);
    let run = qbets(
        &base,
        None,
        &["advise", "--site", "nowhere", "--shape", "1x1h"],
    )
    .await
    .expect(4);
    assert!(run.stderr.contains("no site named"), "{}", run.stderr);
}
