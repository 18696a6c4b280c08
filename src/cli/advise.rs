//! `qbets advise`: which shape of a job waits less — candidate shapes (`--shape 4x1h`)
//! or a moldable job (`--speedup downey:A:SIGMA --runtime 2h --at 16 --nodes 1..64`)
//! asked of a server's `POST /v1/advice`, ranked by the bound on the wait plus the
//! walltime; a table, or the server's JSON with `--json`.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::remote::{
    Failure, ServerArgs, Table, When, duration, exit, human, nodes, or_dash, percent, print_json,
    probability, run_command, when,
};
use crate::http::advice::AdviceOut;

/// `qbets advise`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Exit codes: 0 at least one shape has a bound (ranked); 6 none has \
    (too little history, queue may be down, or beyond every queue's limits); 2 the \
    command line is wrong; 1, 3, 4, 5 as for the other commands."
)]
pub struct AdviseArgs {
    /// A candidate shape, NODESxWALLTIME (4x1h, 16x20m, 2x01:30:00); repeat it. Not with
    /// --speedup.
    #[arg(long, value_name = "NxT", value_parser = shape, required_unless_present = "speedup",
          conflicts_with = "speedup")]
    pub shape: Vec<(i64, i64)>,
    /// A moldable job's speedup model: `simple`, or `downey:A:SIGMA` (A at least 1,
    /// SIGMA at least 0). Needs --runtime, --at and --nodes.
    #[arg(long, value_name = "MODEL", value_parser = speedup,
          requires = "runtime", requires = "at", requires = "nodes")]
    pub speedup: Option<Value>,
    /// The moldable job's run time at --at nodes: seconds, [D-]HH:MM:SS, or 90m, 2h.
    #[arg(long, value_name = "T", value_parser = duration, requires = "speedup")]
    pub runtime: Option<i64>,
    /// The node count --runtime is known at.
    #[arg(long, value_name = "N", value_parser = nodes, requires = "speedup")]
    pub at: Option<i64>,
    /// The node counts the moldable job may take, MIN..MAX (every power of two between
    /// them is tried, and both ends and --at).
    #[arg(long, value_name = "MIN..MAX", value_parser = node_range, requires = "speedup")]
    pub nodes: Option<(i64, i64)>,
    /// Only this site's queues (default: every site's).
    #[arg(long, value_name = "SITE")]
    pub site: Option<String>,
    /// Only queues of this name.
    #[arg(long, value_name = "QUEUE")]
    pub queue: Option<String>,
    /// When the job must have finished: an RFC 3339 time, or a duration from now (+4h,
    /// 90m), now being the site's present. Adds each shape's probability of starting in
    /// time.
    #[arg(long, value_name = "TIME", value_parser = when)]
    pub deadline: Option<When>,
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

/// `4x1h`: nodes, `x`, a walltime.
fn shape(text: &str) -> Result<(i64, i64), String> {
    let (n, t) = text
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("expected NODESxWALLTIME such as 4x1h, got {text:?}"))?;
    Ok((nodes(n)?, duration(t)?))
}

/// `simple` or `downey:A:SIGMA`, as the server's speedup object.
fn speedup(text: &str) -> Result<Value, String> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    match parts.as_slice() {
        ["simple"] => Ok(json!({"model": "simple"})),
        ["downey", a, sigma] => {
            let a = super::number_where(a, |v| v >= 1.0, "at least 1")?;
            let sigma = super::number_where(sigma, |v| v >= 0.0, "at least 0")?;
            Ok(json!({"model": "downey", "a": a, "sigma": sigma}))
        }
        _ => Err(format!("expected simple or downey:A:SIGMA, got {text:?}")),
    }
}

/// `MIN..MAX`.
fn node_range(text: &str) -> Result<(i64, i64), String> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| format!("expected MIN..MAX such as 1..64, got {text:?}"))?;
    let (lo, hi) = (nodes(lo)?, nodes(hi)?);
    if hi < lo {
        return Err(format!("MAX {hi} is below MIN {lo}"));
    }
    Ok((lo, hi))
}

/// The request body the arguments make.
fn body(args: &AdviseArgs) -> Value {
    let mut body = serde_json::Map::new();
    if let Some(s) = &args.speedup {
        let (min, max) = args.nodes.unwrap_or((1, 1));
        body.insert(
            "moldable".into(),
            json!({"speedup": s, "runtime": args.runtime, "at": args.at,
                   "nodes": {"min": min, "max": max}}),
        );
    } else {
        let list: Vec<Value> = args
            .shape
            .iter()
            .map(|(n, w)| json!({"nodes": n, "walltime": w}))
            .collect();
        body.insert("candidates".into(), Value::Array(list));
    }
    for (k, v) in [("site", &args.site), ("queue", &args.queue)] {
        if let Some(v) = v {
            body.insert(k.into(), json!(v));
        }
    }
    for (k, v) in [("quantile", args.quantile), ("confidence", args.confidence)] {
        if let Some(v) = v {
            body.insert(k.into(), json!(v));
        }
    }
    if let Some(d) = &args.deadline {
        let text = match d {
            When::In(s) => s.to_string(),
            When::At(t) => crate::service::format_unix(*t),
        };
        body.insert("deadline".into(), json!(text));
    }
    Value::Object(body)
}

/// Runs `qbets advise`.
pub fn run(args: AdviseArgs) -> anyhow::Result<ExitCode> {
    run_command(advise(args))
}

async fn advise(args: AdviseArgs) -> Result<u8, Failure> {
    let client = args.server.client()?;
    let out: AdviceOut = client.post("/v1/advice", &body(&args), None).await?;
    if args.server.json {
        print_json(&out)?;
    } else if out.rows.is_empty() {
        println!("No queue matched (check --site and --queue).");
    } else {
        let deadline = args.deadline.is_some();
        let mut header = vec![
            "RANK", "NODES", "WALLTIME", "SITE", "QUEUE", "WAIT", "FINISH", "STATUS",
        ];
        if deadline {
            header.push("IN TIME");
        }
        let mut t = Table::new(&header);
        for r in &out.rows {
            let mut row = vec![
                or_dash(r.rank),
                r.nodes.to_string(),
                r.walltime.clone(),
                r.site.clone(),
                r.queue.clone(),
                or_dash(r.bound_s.map(human)),
                or_dash(r.finish_s.map(human)),
                serde_json::to_value(r.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            ];
            if deadline {
                row.push(match &r.deadline {
                    Some(d) => match d.probability {
                        Some(p) => percent(p),
                        None => serde_json::to_value(d.status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                    },
                    None => "—".into(),
                });
            }
            t.row(row);
        }
        t.print();
        match out.rows.first().filter(|r| r.rank.is_some()) {
            Some(best) => println!(
                "\nBest: {} nodes for {} on {}/{}: finished within {} ({} of such jobs, {} \
                 confidence). Rows without a number (—) are not ranked.",
                best.nodes,
                best.walltime,
                best.site,
                best.queue,
                human(best.finish_s.unwrap_or(0)),
                percent(out.quantile),
                percent(out.confidence)
            ),
            None => println!(
                "\nNo shape has a bound: {}.",
                out.rows
                    .first()
                    .and_then(|r| r.reason.clone())
                    .unwrap_or_default()
            ),
        }
    }
    Ok(if out.ranked > 0 {
        exit::OK
    } else {
        exit::NO_ANSWER
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_speedups_and_ranges_parse() {
        assert_eq!(shape("4x1h"), Ok((4, 3600)));
        assert_eq!(shape("16x20m"), Ok((16, 1200)));
        assert_eq!(shape("2x01:30:00"), Ok((2, 5400)));
        for bad in ["4", "0x1h", "x1h", "4xsoon"] {
            assert!(shape(bad).is_err(), "{bad}");
        }
        assert_eq!(speedup("simple"), Ok(json!({"model": "simple"})));
        assert_eq!(
            speedup("downey:32:1.5"),
            Ok(json!({"model": "downey", "a": 32.0, "sigma": 1.5}))
        );
        assert!(speedup("downey:0.5:1").is_err());
        assert!(speedup("amdahl").is_err());
        assert_eq!(node_range("1..64"), Ok((1, 64)));
        assert!(node_range("64..1").is_err());
        assert!(node_range("1-64").is_err());
    }
}
