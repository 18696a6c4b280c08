//! `qbets reserve plan|create|list|show|watch|cancel`: virtual advance reservations from
//! the terminal — when to submit so that nodes are held at a time, then a managed
//! reservation the server submits, follows and reports on.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use super::remote::{
    Failure, ServerArgs, Table, When, duration, exit, human, nodes, or_dash, percent, print_json,
    probability, run_command, when,
};
use crate::client::{Client, encode};
use crate::http::params::format_walltime;
use crate::http::reservations::{ReservationView, ReservationsOut, VarqPlanOut};
use crate::http::sites::SitesResponse;
use crate::plan::lifecycle::ReservationState;

/// `qbets reserve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReserveArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ReserveCommand,
}

/// What a reservation asks for.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestArgs {
    /// The site's name.
    pub site: String,
    /// The queue (partition).
    pub queue: String,
    /// Nodes to hold.
    #[arg(long, short = 'N', value_name = "N", value_parser = nodes)]
    pub nodes: i64,
    /// Work to do once they are held: seconds, [D-]HH:MM:SS, or 90m, 2h, 1d.
    #[arg(long, short = 't', value_name = "T", value_parser = duration)]
    pub walltime: i64,
    /// When they must be held: an RFC 3339 time, or a duration from now (+2h, 90m),
    /// now being the site's present.
    #[arg(long, value_name = "TIME", value_parser = when)]
    pub start: When,
    /// Least acceptable probability that they are, between 0 and 1.
    #[arg(long, short = 'p', value_name = "P", default_value = "0.9", value_parser = probability)]
    pub probability: f64,
    /// How sure that probability is, between 0 and 1 (default 0.95).
    #[arg(long, value_name = "C", value_parser = probability)]
    pub confidence: Option<f64>,
    /// `latest` (default: the last submission time meeting P, least overhead) or
    /// `max_probability`.
    #[arg(long, value_parser = ["latest", "max_probability"])]
    pub mode: Option<String>,
    /// Spacing of the candidate submission times (default 30 s).
    #[arg(long, value_name = "T", value_parser = duration)]
    pub step: Option<i64>,
}

/// What to do with reservations.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ReserveCommand {
    /// When to submit so that the nodes are held at --start with probability -p (no
    /// side effects).
    Plan {
        /// The request.
        #[command(flatten)]
        request: RequestArgs,
        /// The server.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Make a managed reservation: the server submits the job at the planned time and
    /// follows it (needs a token of scope reserve in QBETS_TOKEN).
    Create {
        /// The request.
        #[command(flatten)]
        request: RequestArgs,
        /// What to run on the nodes (by /bin/sh -c).
        #[arg(long, value_name = "COMMAND")]
        command: String,
        /// `hold` (default: keep the nodes until --start, then run) or `best_effort`
        /// (run as soon as the job starts).
        #[arg(long, value_parser = ["hold", "best_effort"])]
        run_mode: Option<String>,
        /// `cancel` (default) or `keep` the remote job when the reservation fails.
        #[arg(long, value_parser = ["cancel", "keep"])]
        on_failure: Option<String>,
        /// An http(s) URL the server POSTs each state change of the reservation to,
        /// signed (the server needs `[reservations] webhook_secret_env`).
        #[arg(long, value_name = "URL")]
        webhook: Option<String>,
        /// A key of your choosing: the same command run again with it makes no second
        /// reservation.
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
        /// Then follow it as `reserve watch` does.
        #[arg(long)]
        watch: bool,
        /// With --watch: seconds between looks.
        #[arg(long, value_name = "S", default_value_t = 10, requires = "watch",
              value_parser = clap::value_parser!(u64).range(1..=3600))]
        interval: u64,
        /// The server.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List your reservations, newest first.
    List {
        /// Most listed.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// The server.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One reservation with its events.
    Show {
        /// Its id.
        id: String,
        /// The server.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Follow a reservation until it ends, printing each event; the exit code says how
    /// it ended (0 succeeded, 7 otherwise).
    Watch {
        /// Its id.
        id: String,
        /// Seconds between looks.
        #[arg(long, value_name = "S", default_value_t = 10,
              value_parser = clap::value_parser!(u64).range(1..=3600))]
        interval: u64,
        /// The server.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Cancel a reservation (and its remote job).
    Cancel {
        /// Its id.
        id: String,
        /// The server.
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Runs `qbets reserve`.
pub fn run(args: ReserveArgs) -> anyhow::Result<ExitCode> {
    run_command(reserve(args))
}

async fn reserve(args: ReserveArgs) -> Result<u8, Failure> {
    match args.command {
        ReserveCommand::Plan { request, server } => {
            let client = server.client()?;
            let body = request_body(&client, &request).await?;
            let p: VarqPlanOut = client.post("/v1/plans/varq", &body, None).await?;
            if server.json {
                print_json(&p)?;
            } else {
                print_plan(&p, request.nodes);
            }
            Ok(exit::OK)
        }
        ReserveCommand::Create {
            request,
            command,
            run_mode,
            on_failure,
            webhook,
            idempotency_key,
            watch,
            interval,
            server,
        } => {
            let client = server.client()?;
            let mut body = request_body(&client, &request).await?;
            body["command"] = json!(command);
            if let Some(m) = run_mode {
                body["run_mode"] = json!(m);
            }
            if let Some(f) = on_failure {
                body["on_failure"] = json!(f);
            }
            if let Some(url) = webhook {
                body["webhook"] = json!(url);
            }
            let r: ReservationView = client
                .post("/v1/reservations", &body, idempotency_key.as_deref())
                .await?;
            if watch {
                if !server.json {
                    println!("reservation {} made; following it", r.id);
                }
                return follow(&client, &r.id, interval, server.json).await;
            }
            if server.json {
                print_json(&r)?;
            } else {
                print_reservation(&r);
            }
            Ok(exit::OK)
        }
        ReserveCommand::List { limit, server } => {
            let client = server.client()?;
            let l: ReservationsOut = client
                .get("/v1/reservations", &[("limit", limit.to_string())])
                .await?;
            if server.json {
                print_json(&l)?;
            } else {
                let mut t = Table::new(&[
                    "ID",
                    "SITE",
                    "QUEUE",
                    "NODES",
                    "WALLTIME",
                    "START AT",
                    "STATE",
                    "SUBMIT AT",
                    "P",
                ]);
                for r in &l.reservations {
                    t.row(vec![
                        r.id.clone(),
                        r.site.clone(),
                        r.queue.clone(),
                        r.nodes.to_string(),
                        format_walltime(r.walltime_s),
                        r.start_at.clone(),
                        state_text(r),
                        or_dash(r.plan.as_ref().map(|p| p.submit_at.clone())),
                        or_dash(r.plan.as_ref().map(|p| percent(p.probability))),
                    ]);
                }
                t.print();
                if l.truncated {
                    println!("(more: raise --limit)");
                }
            }
            Ok(exit::OK)
        }
        ReserveCommand::Show { id, server } => {
            let client = server.client()?;
            let r: ReservationView = client
                .get(&format!("/v1/reservations/{}", encode(&id)), &[])
                .await?;
            if server.json {
                print_json(&r)?;
            } else {
                print_reservation(&r);
            }
            Ok(exit::OK)
        }
        ReserveCommand::Watch {
            id,
            interval,
            server,
        } => {
            let client = server.client()?;
            follow(&client, &id, interval, server.json).await
        }
        ReserveCommand::Cancel { id, server } => {
            let client = server.client()?;
            let r: ReservationView = client
                .delete(&format!("/v1/reservations/{}", encode(&id)))
                .await?;
            if server.json {
                print_json(&r)?;
            } else {
                println!("reservation {} is {}", r.id, r.state.as_str());
            }
            Ok(exit::OK)
        }
    }
}

/// The site's present, as the server sees it (a demo's runs fast; an archive's is its
/// last record).
async fn site_now(client: &Client, site: &str) -> Result<i64, Failure> {
    let sites: SitesResponse = client.get("/v1/sites", &[]).await?;
    let s = sites.sites.iter().find(|s| s.name == site).ok_or_else(|| {
        Failure::new(
            exit::REFUSED,
            format!("the server has no site named {site:?}"),
        )
    })?;
    crate::http::params::timestamp(&s.as_of).map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("unexpected as_of from the server: {e}"),
        )
    })
}

/// The JSON of a VARQ request, a relative --start resolved against the site's present.
async fn request_body(client: &Client, r: &RequestArgs) -> Result<serde_json::Value, Failure> {
    let start_at = match r.start {
        When::At(t) => t,
        When::In(s) => site_now(client, &r.site).await? + s,
    };
    let mut body = json!({
        "site": r.site,
        "queue": r.queue,
        "nodes": r.nodes,
        "walltime": r.walltime,
        "start_at": crate::service::format_unix(start_at),
        "min_probability": r.probability,
    });
    if let Some(c) = r.confidence {
        body["confidence"] = json!(c);
    }
    if let Some(m) = &r.mode {
        body["mode"] = json!(m);
    }
    if let Some(s) = r.step {
        body["step"] = json!(s);
    }
    Ok(body)
}

fn print_plan(p: &VarqPlanOut, nodes: i64) {
    let mut t = Table::new(&[
        "SITE",
        "QUEUE",
        "START AT",
        "SUBMIT AT",
        "ASK FOR",
        "PROBABILITY",
        "OVERHEAD",
    ]);
    let lead = p
        .plan
        .advertised_walltime_s
        .saturating_sub(p.plan.required_node_s / u64::try_from(nodes.max(1)).unwrap_or(1));
    t.row(vec![
        p.site.clone(),
        p.queue.clone(),
        p.start_at.clone(),
        p.plan.submit_at.clone(),
        p.plan.advertised_walltime.clone(),
        percent(p.plan.probability),
        format!("{} node-h", p.plan.max_overhead_node_s.div_ceil(3_600)),
    ]);
    t.print();
    println!(
        "\nSubmit at {} asking for walltime {} ({} of it before the start): the nodes are \
         held at {} with probability {}.",
        p.plan.submit_at,
        p.plan.advertised_walltime,
        human(lead),
        p.start_at,
        percent(p.plan.probability)
    );
}

fn state_text(r: &ReservationView) -> String {
    if r.at_risk {
        format!("{} (at risk)", r.state.as_str())
    } else {
        r.state.as_str().to_string()
    }
}

fn print_reservation(r: &ReservationView) {
    let mut t = Table::new(&["FIELD", "VALUE"]);
    let rows: Vec<(&str, String)> = vec![
        ("id", r.id.clone()),
        ("state", state_text(r)),
        ("site", r.site.clone()),
        ("queue", r.queue.clone()),
        ("nodes", r.nodes.to_string()),
        ("walltime", format_walltime(r.walltime_s)),
        ("start at", r.start_at.clone()),
        ("min probability", percent(r.min_probability)),
        (
            "submit at",
            or_dash(r.plan.as_ref().map(|p| p.submit_at.clone())),
        ),
        (
            "ask for",
            or_dash(
                r.plan
                    .as_ref()
                    .map(|p| format_walltime(p.advertised_walltime_s)),
            ),
        ),
        (
            "probability",
            or_dash(r.plan.as_ref().map(|p| percent(p.probability))),
        ),
        ("remote job", or_dash(r.remote_job_id.clone())),
        ("command", r.command.clone()),
        ("webhook", or_dash(r.webhook.clone())),
    ];
    for (k, v) in rows {
        t.row(vec![k.to_string(), v]);
    }
    t.print();
    if let Some(events) = &r.events {
        println!();
        let mut t = Table::new(&["AT", "STATE", "WHAT HAPPENED"]);
        for e in events {
            t.row(vec![
                e.at.clone(),
                e.state.as_str().into(),
                e.reason.clone(),
            ]);
        }
        t.print();
    }
    if let Some(deliveries) = r.webhook_deliveries.as_ref().filter(|d| !d.is_empty()) {
        println!();
        let mut t = Table::new(&["EVENT", "STATE", "DELIVERY", "ATTEMPTS", "WHEN / ERROR"]);
        for d in deliveries {
            let when = d
                .delivered_at
                .clone()
                .or_else(|| d.gave_up_at.clone())
                .or_else(|| {
                    d.next_attempt_at.as_ref().map(|n| match &d.last_error {
                        Some(e) => format!("next {n}: {e}"),
                        None => format!("next {n}"),
                    })
                })
                .unwrap_or_default();
            t.row(vec![
                d.event_id.clone(),
                d.state.clone(),
                d.status.clone(),
                d.attempts.to_string(),
                when,
            ]);
        }
        t.print();
    }
}

/// Follows a reservation until it ends: each new event as a line (or a JSON object per
/// line with `--json`); the exit code says how it ended.
async fn follow(client: &Client, id: &str, interval: u64, json_lines: bool) -> Result<u8, Failure> {
    let path = format!("/v1/reservations/{}", encode(id));
    let mut shown = 0;
    loop {
        let r: ReservationView = client.get(&path, &[]).await?;
        let events = r.events.as_deref().unwrap_or_default();
        for e in events.iter().skip(shown) {
            if json_lines {
                println!("{}", serde_json::to_string(e).unwrap_or_default());
            } else {
                println!("{}  {:<10} {}", e.at, e.state.as_str(), e.reason);
            }
        }
        shown = shown.max(events.len());
        if r.state.is_final() {
            return Ok(if r.state == ReservationState::Succeeded {
                exit::OK
            } else {
                exit::NOT_MET
            });
        }
        tokio::time::sleep(Duration::from_secs(interval)).await;
    }
}
