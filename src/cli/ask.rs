//! `qbets bound`, `qbets deadline`, `qbets rank` and `qbets job`: the questions users
//! ask a qbets server from their terminal ("if I submit this, how long will it
//! wait?"), answered as a table, or the server's JSON with `--json`.

use std::process::ExitCode;

use serde_json::Value;

use super::remote::{
    Failure, ServerArgs, Table, When, duration, exit, human, nodes, or_dash, percent, print_json,
    probability, run_command, when,
};
use crate::client::{Client, ClientError, encode};
use crate::http::bounds::{AnswerStatus, BoundView, BoundsResponse, DeadlineView};
use crate::http::params::format_walltime;
use crate::http::sites::{QueuesResponse, WaitsResponse};

/// A job's shape.
#[derive(Debug, Clone, clap::Args)]
pub struct ShapeArgs {
    /// Nodes (or processors, as the site counts them) the job asks for.
    #[arg(long, short = 'N', value_name = "N", value_parser = nodes)]
    pub nodes: i64,
    /// Walltime the job asks for: seconds, [D-]HH:MM:SS, or 90m, 2h, 1d.
    #[arg(long, short = 't', value_name = "T", value_parser = duration)]
    pub walltime: i64,
}

impl ShapeArgs {
    fn query(&self) -> Vec<(&'static str, String)> {
        vec![
            ("nodes", self.nodes.to_string()),
            ("walltime", self.walltime.to_string()),
        ]
    }
}

/// `qbets bound`.
#[derive(Debug, Clone, clap::Args)]
pub struct BoundArgs {
    /// The site's name (`qbets rank` lists them all).
    pub site: String,
    /// The queue (partition).
    pub queue: String,
    /// The job.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// The share of such jobs the bound covers, between 0 and 1 (default 0.95).
    #[arg(long, value_name = "Q", value_parser = probability)]
    pub quantile: Option<f64>,
    /// How sure the bound is, between 0 and 1 (default 0.95).
    #[arg(long, value_name = "C", value_parser = probability)]
    pub confidence: Option<f64>,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `qbets deadline`.
#[derive(Debug, Clone, clap::Args)]
pub struct DeadlineArgs {
    /// The site's name.
    pub site: String,
    /// The queue (partition).
    pub queue: String,
    /// The job.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// When it must have started: an RFC 3339 time, or a duration from now (+4h, 90m,
    /// 04:00:00), now being the site's present.
    #[arg(long, value_name = "TIME", value_parser = when)]
    pub by: When,
    /// How sure the probability is, between 0 and 1 (default 0.95).
    #[arg(long, value_name = "C", value_parser = probability)]
    pub confidence: Option<f64>,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `qbets rank`.
#[derive(Debug, Clone, clap::Args)]
pub struct RankArgs {
    /// The job.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Only this site's queues.
    #[arg(long, value_name = "SITE")]
    pub site: Option<String>,
    /// The share of such jobs the bound covers, between 0 and 1 (default 0.95).
    #[arg(long, value_name = "Q", value_parser = probability)]
    pub quantile: Option<f64>,
    /// How sure the bound is, between 0 and 1 (default 0.95).
    #[arg(long, value_name = "C", value_parser = probability)]
    pub confidence: Option<f64>,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `qbets job`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// The site's name.
    pub site: String,
    /// The scheduler's job id.
    pub job_id: String,
    /// Where the server has no job endpoint: how many days back to look among the
    /// jobs that started.
    #[arg(long, value_name = "DAYS", default_value_t = 7,
          value_parser = clap::value_parser!(u32).range(1..=366))]
    pub days: u32,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

fn levels(q: Option<f64>, c: Option<f64>) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    if let Some(q) = q {
        v.push(("quantile", q.to_string()));
    }
    if let Some(c) = c {
        v.push(("confidence", c.to_string()));
    }
    v
}

fn status_name(s: AnswerStatus) -> &'static str {
    match s {
        AnswerStatus::Ok => "ok",
        AnswerStatus::InsufficientHistory => "insufficient_history",
        AnswerStatus::MaybeDown => "maybe_down",
        AnswerStatus::ExceedsLimits => "exceeds_limits",
    }
}

/// Why an answer has no number, for people.
fn no_number(s: AnswerStatus) -> &'static str {
    match s {
        AnswerStatus::Ok => "",
        AnswerStatus::InsufficientHistory => {
            "too few jobs like this have started there for a bound at these levels"
        }
        AnswerStatus::MaybeDown => {
            "the queue may be down (no job has started for unusually long); no bound until one does"
        }
        AnswerStatus::ExceedsLimits => "the job asks for more than the queue allows",
    }
}

/// Runs `qbets bound`.
pub fn bound(args: BoundArgs) -> anyhow::Result<ExitCode> {
    run_command(ask_bound(args))
}

async fn ask_bound(args: BoundArgs) -> Result<u8, Failure> {
    let client = args.server.client()?;
    let mut query = args.shape.query();
    query.extend(levels(args.quantile, args.confidence));
    let path = format!(
        "/v1/sites/{}/queues/{}/bound",
        encode(&args.site),
        encode(&args.queue)
    );
    let b: BoundView = client.get(&path, &query).await?;
    if args.server.json {
        print_json(&b)?;
    } else {
        let mut t = Table::new(&[
            "SITE", "QUEUE", "NODES", "WALLTIME", "BOUND", "STATUS", "HISTORY", "AS OF",
        ]);
        t.row(vec![
            b.site.clone(),
            b.queue.clone(),
            b.nodes.to_string(),
            format_walltime(b.walltime_s),
            or_dash(b.bound.clone()),
            status_name(b.status).into(),
            b.history_size.to_string(),
            b.as_of.clone(),
        ]);
        t.print();
        match b.bound_s {
            Some(s) => println!(
                "\n{} of jobs like this start within {} on {} ({} confidence).",
                percent(b.quantile),
                human(s),
                b.queue,
                percent(b.confidence)
            ),
            None => println!("\nNo bound: {}.", no_number(b.status)),
        }
    }
    Ok(if b.bound_s.is_some() {
        exit::OK
    } else {
        exit::NO_ANSWER
    })
}

/// Runs `qbets deadline`.
pub fn deadline(args: DeadlineArgs) -> anyhow::Result<ExitCode> {
    run_command(ask_deadline(args))
}

async fn ask_deadline(args: DeadlineArgs) -> Result<u8, Failure> {
    let client = args.server.client()?;
    let mut query = args.shape.query();
    query.push((
        "deadline",
        match args.by {
            When::In(s) => s.to_string(),
            When::At(t) => crate::service::format_unix(t),
        },
    ));
    query.extend(levels(None, args.confidence));
    let path = format!(
        "/v1/sites/{}/queues/{}/deadline",
        encode(&args.site),
        encode(&args.queue)
    );
    let d: DeadlineView = client.get(&path, &query).await?;
    if args.server.json {
        print_json(&d)?;
    } else {
        let mut t = Table::new(&[
            "SITE",
            "QUEUE",
            "NODES",
            "WALLTIME",
            "DEADLINE",
            "PROBABILITY",
            "STATUS",
            "HISTORY",
            "AS OF",
        ]);
        t.row(vec![
            d.site.clone(),
            d.queue.clone(),
            d.nodes.to_string(),
            format_walltime(d.walltime_s),
            d.deadline.clone(),
            or_dash(d.probability.map(percent)),
            status_name(d.status).into(),
            d.history_size.to_string(),
            d.as_of.clone(),
        ]);
        t.print();
        match d.probability {
            Some(p) => println!(
                "\nA job like this submitted now starts within {} (by {}) with probability at least {} ({} confidence).",
                human(d.deadline_s),
                d.deadline,
                percent(p),
                percent(d.confidence)
            ),
            None => println!("\nNo probability: {}.", no_number(d.status)),
        }
    }
    Ok(if d.probability.is_some() {
        exit::OK
    } else {
        exit::NO_ANSWER
    })
}

/// Runs `qbets rank`.
pub fn rank(args: RankArgs) -> anyhow::Result<ExitCode> {
    run_command(ask_rank(args))
}

async fn ask_rank(args: RankArgs) -> Result<u8, Failure> {
    let client = args.server.client()?;
    let mut query = args.shape.query();
    query.extend(levels(args.quantile, args.confidence));
    if let Some(site) = &args.site {
        // The server lists only that site's queues: no need to fetch every site's.
        query.push(("site", site.clone()));
    }
    let mut r: BoundsResponse = client.get("/v1/bounds", &query).await?;
    // A queue whose limits the job exceeds is no place to run it: not ranked.
    r.bounds.retain(|b| b.status != AnswerStatus::ExceedsLimits);
    if let Some(site) = &args.site {
        r.bounds.retain(|b| &b.site == site);
        if r.bounds.is_empty() {
            // Tell an unknown site from one whose queues cannot run the job.
            let _: QueuesResponse = client
                .get(&format!("/v1/sites/{}/queues", encode(site)), &[])
                .await?;
        }
    }
    let answered = r.bounds.iter().any(|b| b.bound_s.is_some());
    if args.server.json {
        print_json(&r)?;
    } else if r.bounds.is_empty() {
        println!(
            "No queue can run a job of {} nodes for {} (every known queue's limits are lower).",
            args.shape.nodes,
            format_walltime(args.shape.walltime)
        );
    } else {
        let mut t = Table::new(&[
            "RANK", "SITE", "QUEUE", "BOUND", "WITHIN", "STATUS", "HISTORY",
        ]);
        let mut rank = 0;
        for b in &r.bounds {
            let shown_rank = if b.bound_s.is_some() {
                rank += 1;
                rank.to_string()
            } else {
                "—".into()
            };
            t.row(vec![
                shown_rank,
                b.site.clone(),
                b.queue.clone(),
                or_dash(b.bound.clone()),
                or_dash(b.bound_s.map(human)),
                status_name(b.status).into(),
                b.history_size.to_string(),
            ]);
        }
        t.print();
        if let Some(b) = r.bounds.first() {
            println!(
                "\nBOUND: {} of jobs of {} nodes for {} start within it ({} confidence); \
                 queues without a number last (—).",
                percent(b.quantile),
                args.shape.nodes,
                format_walltime(args.shape.walltime),
                percent(b.confidence)
            );
        }
    }
    Ok(if answered { exit::OK } else { exit::NO_ANSWER })
}

/// Runs `qbets job`: the server's own answer for a job when it has one
/// (`GET /v1/sites/{site}/jobs/{job_id}`), else the job among those that started in the
/// last `--days` days (`…/queues/{queue}/waits`), with the bound it was given at
/// submission.
pub fn job(args: JobArgs) -> anyhow::Result<ExitCode> {
    run_command(ask_job(args))
}

async fn ask_job(args: JobArgs) -> Result<u8, Failure> {
    let client = args.server.client()?;
    let path = format!(
        "/v1/sites/{}/jobs/{}",
        encode(&args.site),
        encode(&args.job_id)
    );
    match client.get::<Value>(&path, &[]).await {
        Ok(v) => {
            if args.server.json {
                print_json(&v)?;
            } else {
                print_object(&v);
            }
            return Ok(exit::OK);
        }
        Err(e) if !is_missing_route(&e) => return Err(e.into()),
        Err(_) => {}
    }
    job_from_waits(&client, &args).await
}

/// Whether the server has no such route (an older server), as opposed to no such job.
fn is_missing_route(e: &ClientError) -> bool {
    match e {
        ClientError::Refused {
            status: 404,
            problem,
        } => problem["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("no route for")),
        _ => false,
    }
}

/// A JSON object as a two-column table (nested values as JSON).
fn print_object(v: &Value) {
    let mut t = Table::new(&["FIELD", "VALUE"]);
    if let Some(o) = v.as_object() {
        for (k, v) in o {
            let shown = match v {
                Value::Null => "—".to_string(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            t.row(vec![k.clone(), shown]);
        }
    }
    t.print();
}

async fn job_from_waits(client: &Client, args: &JobArgs) -> Result<u8, Failure> {
    let queues: QueuesResponse = client
        .get(&format!("/v1/sites/{}/queues", encode(&args.site)), &[])
        .await?;
    let as_of = crate::http::params::timestamp(&queues.as_of).map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("unexpected as_of from the server: {e}"),
        )
    })?;
    let since = crate::service::format_unix(as_of - i64::from(args.days) * 86_400);
    for q in &queues.queues {
        let path = format!(
            "/v1/sites/{}/queues/{}/waits",
            encode(&args.site),
            encode(&q.name)
        );
        // Page through the window by start time (the server gives at most 10000 a time).
        let mut from = since.clone();
        loop {
            let w: WaitsResponse = client
                .get(&path, &[("since", from.clone()), ("limit", "10000".into())])
                .await?;
            if let Some(j) = w.jobs.iter().find(|j| j.job_id == args.job_id) {
                let within = j.bound_s.map(|b| j.wait_s <= b);
                if args.server.json {
                    print_json(&serde_json::json!({
                        "site": args.site, "queue": q.name, "job": j, "within_bound": within,
                    }))?;
                } else {
                    let mut t = Table::new(&[
                        "SITE",
                        "QUEUE",
                        "JOB",
                        "NODES",
                        "WALLTIME",
                        "SUBMITTED",
                        "STARTED",
                        "WAITED",
                        "BOUND",
                        "STATE",
                    ]);
                    t.row(vec![
                        args.site.clone(),
                        q.name.clone(),
                        j.job_id.clone(),
                        or_dash(j.nodes),
                        or_dash(j.walltime.clone()),
                        j.submit.clone(),
                        j.start.clone(),
                        human(j.wait_s.max(0) as u64),
                        or_dash(j.bound_s.map(|b| human(b.max(0) as u64))),
                        j.state.as_str().into(),
                    ]);
                    t.print();
                    match within {
                        Some(true) => {
                            println!("\nIt started within the bound it was given at submission.")
                        }
                        Some(false) => println!(
                            "\nIt waited longer than the bound it was given at submission."
                        ),
                        None => println!(
                            "\nNo bound was given at its submission ({}).",
                            j.bound_status.as_deref().unwrap_or("not predicted")
                        ),
                    }
                }
                return Ok(exit::OK);
            }
            match (w.truncated, w.jobs.last()) {
                // The next page starts one second after the last job listed here (jobs
                // starting in the same second as the 10000th are rare and skipped).
                (true, Some(last)) => {
                    let t = crate::http::params::timestamp(&last.start).unwrap_or(as_of);
                    from = crate::service::format_unix(t + 1);
                }
                _ => break,
            }
        }
    }
    Err(Failure::new(
        exit::REFUSED,
        format!(
            "no job {:?} started at site {:?} in the last {} days; this server has no \
             GET /v1/sites/{{site}}/jobs/{{job_id}}, so pending jobs cannot be looked up",
            args.job_id, args.site, args.days
        ),
    ))
}
