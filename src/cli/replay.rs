//! `qbets replay`: replays an SWF trace through the QBETS engine, queue by queue, and
//! scores every method's bounds against the waits that followed (qbets.md §6, the
//! dissertation's Tables 4.1 and 4.2).
//!
//! May import: the engine, the SWF reader, the progress bar, std I/O.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::cli::progress;
use crate::engine::replay::{MethodScore, ReplayOptions, replay_on_machine};
use crate::engine::{
    Attribute, AvailRule, AvailScope, Config, Features, JobRecord, JobShape, Method,
};
use crate::trace::swf::{QueueField, SwfRecord, SwfTrace};

/// Malformed lines printed on stderr before the rest are only counted.
const BAD_LINES_SHOWN: usize = 20;

/// Arguments of `qbets replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// SWF trace, plain or gzipped.
    pub trace: PathBuf,
    /// Queue number to replay, or `all` to merge every queue into one. Default: every
    /// queue of the trace, each on its own. A trace without queues has one, `-1`
    /// (taken as a value: `--queue -1`).
    #[arg(long, allow_hyphen_values = true)]
    pub queue: Option<String>,
    /// Methods, comma-separated: bm, lognormal, loguniform, weibull.
    #[arg(
        long,
        default_value = "bm,lognormal,loguniform,weibull",
        value_delimiter = ','
    )]
    pub methods: Vec<Method>,
    /// `all`, `none`, or a list of trim, cluster, avail, censored.
    #[arg(long, default_value = "all")]
    pub features: Features,
    /// The quantile bounded.
    #[arg(long, default_value_t = 0.95)]
    pub quantile: f64,
    /// The confidence of the bound.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Attribute jobs are clustered by: walltime, nodes, node-seconds,
    /// walltime-then-nodes. Default: the engine's default.
    #[arg(long)]
    pub attribute: Option<Attribute>,
    /// Quantile of the availability series' bounds (qbets.md §4 fixes 0.95).
    /// Default: the engine's default.
    #[arg(long)]
    pub avail_quantile: Option<f64>,
    /// When a queue is called maybe down: `either` test (qbets.md §4 as written),
    /// `both` tests at once, or `time-while-waiting`. Default: the engine's default.
    #[arg(long)]
    pub avail_rule: Option<AvailRule>,
    /// Whose releases and arrivals availability inference counts: `queue` or
    /// `machine` (every queue of the trace). Default: the engine's default.
    #[arg(long)]
    pub avail_scope: Option<AvailScope>,
    /// The time test never fires on a release gap shorter than this, seconds.
    #[arg(long)]
    pub avail_min_gap: Option<u64>,
    /// Keep waits that overlapped a maybe-down period out of the history (qbets.md §4's
    /// rule; off by default, see EVALUATION.md).
    #[arg(long)]
    pub exclude_down_waits: bool,
    /// Experimental: also trim at a run of this many waits at or below the lower bound
    /// on the 0.95 quantile (the upper tail thinning; off by default, see EVALUATION.md).
    #[arg(long, value_name = "N")]
    pub tail_run: Option<u32>,
    /// Most clusters per level (engine default 10).
    #[arg(long, hide = true)]
    pub k_max: Option<usize>,
    /// Most observations kept per queue for re-clustering.
    #[arg(long, hide = true)]
    pub history_cap: Option<usize>,
    /// Most waits in one cluster's window.
    #[arg(long, hide = true)]
    pub window_cap: Option<usize>,
    /// Re-cluster after this many observations.
    #[arg(long, hide = true)]
    pub recluster_every: Option<usize>,
    /// Replay only queues with at least this many jobs (with a known wait).
    #[arg(long, default_value_t = 0)]
    pub min_jobs: usize,
    /// Write one CSV row per job and method to this file.
    #[arg(long)]
    pub predictions: Option<PathBuf>,
    /// Print one JSON document instead of tables.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print one Markdown table row per queue (as in EVALUATION.md) instead of tables.
    #[arg(long)]
    pub markdown: bool,
}

/// One queue's jobs, ready for the engine.
struct QueueJobs {
    /// `"1"`, `"all"`, …
    label: String,
    name: Option<String>,
    records: Vec<SwfRecord>,
    jobs: Vec<JobRecord>,
    /// Jobs of this queue dropped for an unknown or negative wait.
    dropped: usize,
}

/// One line of the JSON document: a queue and a method.
#[derive(Debug, Serialize)]
struct Row<'a> {
    queue: &'a str,
    queue_name: Option<&'a str>,
    /// The method's scores; with no job compared, the fraction, verdict and RMS are
    /// null (the text table's "-"), not a 0 that reads as a measurement.
    #[serde(flatten)]
    score: serde_json::Value,
    dropped_no_wait: usize,
    clusters: usize,
}

#[derive(Debug, Serialize)]
struct Document<'a> {
    trace: String,
    features: String,
    attribute: Attribute,
    quantile: f64,
    confidence: f64,
    malformed_lines: usize,
    results: Vec<Row<'a>>,
}

/// A method's scores as JSON, with what no compared job can measure left null.
fn score_json(s: &MethodScore) -> serde_json::Value {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    if s.compared == 0 {
        for field in [
            "correct_fraction",
            "is_correct",
            "rms_over_s",
            "accuracy_ratio",
        ] {
            v[field] = serde_json::Value::Null;
        }
    }
    v
}

/// Runs `qbets replay`.
pub fn run(args: Args) -> Result<()> {
    if !(args.quantile > 0.0 && args.quantile < 1.0) {
        bail!(
            "--quantile: {} is not strictly between 0 and 1",
            args.quantile
        );
    }
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        bail!(
            "--confidence: {} is not strictly between 0 and 1",
            args.confidence
        );
    }
    if args.methods.is_empty() {
        bail!("--methods: give at least one method");
    }
    // Each method once, in the order first given.
    let mut methods = args.methods.clone();
    let mut seen = std::collections::HashSet::new();
    methods.retain(|m| seen.insert(*m));
    let trace = read_trace(&args.trace)?;
    let queues = split_queues(&trace, args.queue.as_deref(), &args.trace)?;
    let mut config = Config {
        features: args.features,
        ..Config::default()
    };
    if let Some(v) = args.avail_quantile {
        config.avail_quantile = v;
    }
    if let Some(v) = args.avail_rule {
        config.avail_rule = v;
    }
    if let Some(v) = args.avail_scope {
        config.avail_scope = v;
    }
    if let Some(v) = args.avail_min_gap {
        config.avail_min_gap_s = v;
    }
    config.exclude_down_waits = args.exclude_down_waits;
    config.tail_run = args.tail_run;
    if let Some(v) = args.k_max {
        config.k_max = v;
    }
    if let Some(v) = args.history_cap {
        config.history_cap = v;
    }
    if let Some(v) = args.window_cap {
        config.window_cap = v;
    }
    if let Some(v) = args.recluster_every {
        config.recluster_every = v;
    }
    if let Some(a) = args.attribute {
        config.attribute = a;
    }
    // A setting out of range is named by the flag that set it.
    config.validate().map_err(|e| {
        let flag = match e.field {
            "avail_min_gap_s" => "avail-min-gap".to_string(),
            field => field.replace('_', "-"),
        };
        anyhow::anyhow!("--{flag}: {}", e.reason)
    })?;
    let opts = ReplayOptions {
        methods,
        quantile: args.quantile,
        confidence: args.confidence,
        config,
    };
    // Every queue of the trace, when one queue is replayed against the whole machine.
    let machine_wide = opts.config.features.avail && opts.config.avail_scope == AvailScope::Machine;
    let machine = if machine_wide && args.queue.is_some() {
        split_queues(&trace, None, &args.trace)?
    } else {
        Vec::new()
    };
    let machine = if machine.is_empty() {
        &queues
    } else {
        &machine
    };
    let mut csv = match &args.predictions {
        Some(p) => {
            let mut w = super::output::OutputFile::create(p)?;
            writeln!(
                w,
                "queue,job,submit,wait,nodes,walltime,method,prediction,status"
            )?;
            Some(w)
        }
        None => None,
    };
    let mut out = String::new();
    let mut all_scores = Vec::new();
    for q in queues
        .iter()
        .filter(|q| q.jobs.len() >= args.min_jobs.max(1))
    {
        let pb = progress::bar(2 * q.jobs.len() as u64, "events");
        pb.set_message(format!("queue {}", q.label));
        // Availability over the whole machine: the other queues' jobs feed it.
        let others: Vec<JobRecord> =
            if opts.config.avail_scope == AvailScope::Machine && q.label != "all" {
                machine
                    .iter()
                    .filter(|o| o.label != q.label)
                    .flat_map(|o| o.jobs.iter().copied())
                    .collect()
            } else {
                Vec::new()
            };
        let r = replay_on_machine(&q.jobs, &others, &opts, &mut |n| pb.set_position(n))?;
        pb.finish_and_clear();
        if let Some(w) = csv.as_mut() {
            write_predictions(w, q, &opts.methods, &r.predictions)?;
        }
        let clusters = r.predictors.first().map_or(0, |p| p.cluster_count());
        if args.markdown {
            markdown_row(&mut out, &args.trace, q, &r.scores, clusters);
        } else if !args.json {
            table(&mut out, q, &r.scores, clusters);
        }
        all_scores.push((q, r.scores, clusters));
    }
    if all_scores.is_empty() {
        bail!(
            "{}: no queue with at least {} job(s) with a known wait",
            args.trace.display(),
            args.min_jobs.max(1)
        );
    }
    if let Some(w) = csv {
        w.commit()?;
    }
    if args.json {
        let doc = Document {
            trace: args.trace.display().to_string(),
            features: args.features.to_string(),
            attribute: opts.config.attribute,
            quantile: args.quantile,
            confidence: args.confidence,
            malformed_lines: trace.bad.len(),
            results: all_scores
                .iter()
                .flat_map(|(q, scores, clusters)| {
                    scores.iter().map(move |s| Row {
                        queue: &q.label,
                        queue_name: q.name.as_deref(),
                        score: score_json(s),
                        dropped_no_wait: q.dropped,
                        clusters: *clusters,
                    })
                })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if args.markdown {
        print!("{out}");
    } else {
        print!(
            "{}: features {}, clustering by {}, q = {}, C = {}\n{out}",
            args.trace.display(),
            args.features,
            opts.config.attribute,
            args.quantile,
            args.confidence
        );
        if !trace.bad.is_empty() {
            println!("{} malformed line(s) skipped (see stderr)", trace.bad.len());
        }
    }
    Ok(())
}

/// Reads the trace, reporting malformed lines on stderr (the first few in full, all
/// counted) and refusing a trace without a single job. `qbets simulate` reads its
/// traces the same way.
pub(crate) fn read_trace(path: &Path) -> Result<SwfTrace> {
    let trace = progress::read_swf(path)?;
    for e in trace.bad.iter().take(BAD_LINES_SHOWN) {
        eprintln!("{}:{}: {} (line skipped)", path.display(), e.line, e.reason);
    }
    if trace.bad.len() > BAD_LINES_SHOWN {
        eprintln!(
            "{}: {} more malformed line(s) skipped",
            path.display(),
            trace.bad.len() - BAD_LINES_SHOWN
        );
    }
    if !trace.bad.is_empty() {
        eprintln!(
            "{}: {} malformed line(s) in total",
            path.display(),
            trace.bad.len()
        );
    }
    if trace.records.is_empty() {
        bail!("{}: no job lines in the trace", path.display());
    }
    Ok(trace)
}

fn shape(r: &SwfRecord) -> JobShape {
    JobShape {
        nodes: r.procs().map_or(0, |p| p as u64),
        walltime_s: r.requested_time().map_or(0, |t| t as u64),
    }
}

/// Splits the trace into the queues to replay (qbets.md §6: field 15, or 16 where 15 is
/// never set; jobs with an unknown or negative wait are dropped, cancelled jobs with a
/// wait are kept).
fn split_queues(trace: &SwfTrace, which: Option<&str>, path: &Path) -> Result<Vec<QueueJobs>> {
    let field = trace.queue_field();
    let mut by_queue: BTreeMap<i64, Vec<&SwfRecord>> = BTreeMap::new();
    for r in &trace.records {
        by_queue
            .entry(trace.queue_of(field, r))
            .or_default()
            .push(r);
    }
    let make = |label: String, name: Option<String>, recs: Vec<&SwfRecord>| {
        let total = recs.len();
        let records: Vec<SwfRecord> = recs
            .into_iter()
            .filter(|r| r.wait().is_some())
            .cloned()
            .collect();
        let jobs = records
            .iter()
            .map(|r| JobRecord {
                submit: r.submit,
                start: r.start(),
                shape: shape(r),
                user: u32::try_from(r.user).ok(),
            })
            .collect();
        QueueJobs {
            label,
            name,
            dropped: total - records.len(),
            records,
            jobs,
        }
    };
    let name_of = |n: i64| trace.queue_name(field, n).map(str::to_string);
    match which.map(str::trim) {
        None => Ok(by_queue
            .into_iter()
            .map(|(n, recs)| make(n.to_string(), name_of(n), recs))
            .collect()),
        Some("all") => Ok(vec![make(
            "all".into(),
            None,
            trace.records.iter().collect(),
        )]),
        Some(s) => {
            let n: i64 = s
                .parse()
                .with_context(|| format!("--queue: {s:?} is neither a queue number nor `all`"))?;
            match by_queue.remove(&n) {
                Some(recs) => Ok(vec![make(n.to_string(), name_of(n), recs)]),
                None => {
                    let have: Vec<String> = by_queue.keys().map(i64::to_string).collect();
                    let what = if field == QueueField::Partition {
                        "partition (field 16)"
                    } else {
                        "queue (field 15)"
                    };
                    bail!(
                        "{}: no {what} {n}; the trace has {}",
                        path.display(),
                        have.join(", ")
                    )
                }
            }
        }
    }
}

fn table(out: &mut String, q: &QueueJobs, scores: &[MethodScore], clusters: usize) {
    let name = q
        .name
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    let first = &scores[0];
    let _ = writeln!(
        out,
        "\nqueue {}{name}: {} jobs ({} dropped without a wait), {} cluster(s) at the end",
        q.label, first.jobs, q.dropped, clusters
    );
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>13} {:>8}",
        "method",
        "predicted",
        "no-hist",
        "down",
        "compared",
        "correct",
        "ok?",
        "rms_over_s",
        "accuracy"
    );
    for s in scores {
        let ratio = s
            .accuracy_ratio
            .map_or("-".to_string(), |r| format!("{r:.2}"));
        // Nothing scored (every job lacked a prediction): no fraction to speak of.
        let (frac, ok, rms) = if s.compared == 0 {
            ("-".to_string(), "-", "-".to_string())
        } else {
            (
                format!("{:.4}", s.correct_fraction),
                if s.is_correct { "yes" } else { "no" },
                format!("{:.0}", s.rms_over_s),
            )
        };
        let _ = writeln!(
            out,
            "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>13} {:>8}",
            s.method.short(),
            s.predicted,
            s.insufficient_history,
            s.maybe_down,
            s.compared,
            frac,
            ok,
            rms,
            ratio
        );
    }
}

/// `| trace | queue | jobs | predicted | down | clusters | correct × methods | accuracy × methods |`,
/// a correct method's figures in bold (as in the dissertation's tables).
fn markdown_row(
    out: &mut String,
    trace: &Path,
    q: &QueueJobs,
    scores: &[MethodScore],
    clusters: usize,
) {
    let name = trace
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .trim_end_matches(".swf.gz")
                .trim_end_matches(".swf")
                .to_string()
        })
        .unwrap_or_default();
    let label = match &q.name {
        Some(n) => format!("{} ({n})", q.label),
        None => q.label.clone(),
    };
    let bold = |s: &MethodScore, text: String| {
        if s.is_correct {
            format!("**{text}**")
        } else {
            text
        }
    };
    let first = &scores[0];
    let _ = write!(
        out,
        "| {name} | {label} | {} | {} | {} | {clusters} |",
        first.jobs, first.compared, first.maybe_down
    );
    for s in scores {
        let text = if s.compared == 0 {
            "–".to_string()
        } else {
            format!("{:.4}", s.correct_fraction)
        };
        let _ = write!(out, " {} |", bold(s, text));
    }
    for s in scores {
        let text = s
            .accuracy_ratio
            .map_or("–".to_string(), |r| format!("{r:.2}"));
        let _ = write!(out, " {} |", bold(s, text));
    }
    out.push('\n');
}

fn write_predictions(
    w: &mut impl Write,
    q: &QueueJobs,
    methods: &[Method],
    preds: &[Vec<crate::engine::replay::Prediction>],
) -> Result<()> {
    // Rows in submit order (ties in file order), as the replay walked them.
    let mut order: Vec<usize> = (0..q.jobs.len()).collect();
    order.sort_by_key(|&j| q.jobs[j].submit);
    for j in order {
        let r = &q.records[j];
        let s = &q.jobs[j].shape;
        for (m, method) in methods.iter().enumerate() {
            let p = preds[m][j];
            let bound = p.bound_s.map(|b| b.to_string()).unwrap_or_default();
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{}",
                q.label,
                r.job,
                r.submit,
                r.wait,
                s.nodes,
                s.walltime_s,
                method.short(),
                bound,
                p.status.name()
            )?;
        }
    }
    Ok(())
}
