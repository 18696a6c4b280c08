//! `qbets simulate`: runs a trace or a workload model through the scheduler simulator,
//! writes the simulated schedule as SWF (so `qbets replay` can evaluate predictions on
//! it) and prints the standard metrics.
//!
//! May import: anything the subcommand needs; the simulation itself is `crate::sim`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, ValueEnum};

use crate::cli::progress;
use crate::sim::cirne::{ArrivalPattern, CirneModel, QueueSpec};
use crate::sim::metrics::{Metrics, metrics};
use crate::sim::run::{RunResult, run_jobs};
use crate::sim::swf_jobs::{self, SkipReason, jobs_from_trace, offered_load};
use crate::sim::varq_experiment::{
    VarqExperiment, run_varq_experiment, summarize as varq_summarize,
};
use crate::sim::{Policy, SimConfig, SimJob};
use crate::trace::swf::{self, SwfRecord, SwfTrace};

/// Workload models `--model` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Model {
    /// Cirne's rigid workload model (his Table 11).
    Cirne,
    /// The Lublin–Feitelson model with moldable jobs (Barsanti & Sodan's SCOJO-P
    /// experiments; see `--lublin-alpha`, `--speedup`, `--moldable`).
    Lublin,
}

/// Most jobs `--model` may generate.
const MAX_MODEL_JOBS: u64 = 10_000_000;

/// Arguments of `qbets simulate`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Scheduling policy: fcfs, easy, conservative, los, los:C or los:C:VARIANT
    /// (VARIANT: bypassed-first, selected-first, maxjobs, max-slowdown); for moldable
    /// jobs (--model lublin) also cirne-berman and scojo-p, optionally followed by
    /// :nonpredictive, :arrival-aware, :ideal=X (there easy is the paper's traditional
    /// baseline).
    #[arg(long, value_parser = Policy::parse, required_unless_present_any = ["experiment", "ts_algorithm"])]
    pub policy: Option<Policy>,
    /// Processors of the simulated machine (default for a trace: its MaxProcs header).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub processors: Option<u32>,
    /// Replay this SWF trace (plain or gzipped).
    #[arg(long, conflicts_with = "model", required_unless_present_any = ["model", "experiment"])]
    pub trace: Option<PathBuf>,
    /// Generate the workload from a model instead.
    #[arg(long, requires = "jobs")]
    pub model: Option<Model>,
    /// Number of jobs the model generates (1 to 10,000,000: ten times the longest
    /// archive trace; every job is held in memory).
    #[arg(long, conflicts_with = "trace", value_parser = clap::value_parser!(u64).range(1..=MAX_MODEL_JOBS))]
    pub jobs: Option<u64>,
    /// Seed of the model's random numbers (same seed, same workload, same output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Arrival pattern of Cirne's model: one of his four sites, or `random` to draw
    /// one from the seed as he does.
    #[arg(long, value_enum, default_value_t = ArrivalArg::Random, conflicts_with = "experiment")]
    pub arrival: ArrivalArg,
    /// Multiply arrival times (offsets from the first arrival) by this factor; below 1
    /// raises the load (Shmueli §4.1). For the model, it divides the arrival rate.
    #[arg(long, conflicts_with_all = ["offered_load", "experiment"], value_parser = load_scale)]
    pub load_scale: Option<f64>,
    /// Scale a trace's arrival times so that its offered load becomes this value
    /// (with --timeshare or --arrays, a model's too).
    #[arg(long, conflicts_with = "experiment", value_parser = offered)]
    pub offered_load: Option<f64>,
    /// With the model, spread jobs over the three-queue demo site (express ≤ 1 h and
    /// ≤ 64 processors, normal ≤ 18 h, low; served in that order).
    #[arg(long, requires = "model")]
    pub demo_queues: bool,
    /// With --model cirne, inject job arrays `MIN:MAX:FRACTION`: one user submits N
    /// tasks of one shape at one instant, N log-uniform in [MIN, MAX], array tasks a
    /// FRACTION of all jobs; the output's user field (SWF 12) says whose job is whose
    /// (e.g. `10:2000:0.3`).
    #[arg(long, requires = "model", conflicts_with = "experiment")]
    pub arrays: Option<crate::sim::arrays::ArraySpec>,
    /// With --arrays, serve the arrays' tasks after every other job (queue 2, ranked
    /// after queue 1): the fair share sites that take arrays run, under which one
    /// user's burst does not hold up everyone else's jobs. The replay of the output
    /// then sees two queues; give it `--queue` or rewrite field 15 to read one.
    #[arg(long, requires = "arrays", conflicts_with_all = ["priority", "demo_queues"])]
    pub arrays_last: bool,
    /// Queue priorities, e.g. `1=0,2=1,3=2`: lower ranks are served first.
    #[arg(long, conflicts_with_all = ["demo_queues", "experiment"], value_parser = parse_priorities)]
    pub priority: Option<BTreeMap<i32, i32>>,
    /// Where to write the simulated schedule (SWF); with `--experiment`, the per-run
    /// records (JSON lines); with `--varq-fraction`, the per-request records (JSON
    /// lines).
    #[arg(long, required_unless_present_any = ["experiment", "varq_fraction"])]
    pub out: Option<PathBuf>,
    /// Run the VARQ generality experiment (Nurmi §5.3.4): each job becomes, with this
    /// chance, a VARQ request for the next deadline (every `--varq-period` seconds),
    /// planned from a QBETS predictor fed by the simulated history.
    #[arg(long, requires = "varq_probability", conflicts_with = "experiment", value_parser = fraction)]
    pub varq_fraction: Option<f64>,
    /// Minimum success probability of the VARQ requests.
    #[arg(long, requires = "varq_fraction", value_parser = open_probability)]
    pub varq_probability: Option<f64>,
    /// Seconds between VARQ deadlines (the dissertation: six hours).
    #[arg(long, default_value_t = crate::sim::varq_experiment::DEFAULT_PERIOD_S,
          value_parser = clap::value_parser!(i64).range(1..=MAX_PERIOD_S))]
    pub varq_period: i64,
    /// Spacing of VARQ's candidate submission times, seconds.
    #[arg(long, default_value_t = crate::plan::varq::DEFAULT_STEP_S,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PERIOD_S as u64))]
    pub varq_step: u64,
    /// The attribute the experiment's QBETS predictor clusters jobs by (walltime,
    /// nodes, node-seconds, walltime-then-nodes); default: the product's.
    #[arg(long, requires = "varq_fraction")]
    pub varq_cluster_by: Option<crate::engine::Attribute>,
    /// Run an experiment instead of one simulation: `cirne-sa` is Cirne's Chapter 5
    /// (one moldable job per run in a model workload, conservative backfilling).
    #[arg(long, conflicts_with_all = ["trace", "model", "policy"])]
    pub experiment: Option<Experiment>,
    /// Runs of the experiment.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_RUNS))]
    pub runs: u64,
    /// Also run SAg in the experiment and count disagreements with SAcb.
    #[arg(long)]
    pub check_sag: bool,
    /// Print the metrics as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The Lublin model's settings.
    #[command(flatten)]
    pub mold: super::simulate_mold::MoldArgs,
    /// The time-shared machine's settings.
    #[command(flatten)]
    pub timeshare: super::simulate_timeshare::TimeshareArgs,
}

/// Experiments `--experiment` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// Cirne's Chapter 5: best, SA and user request.
    CirneSa,
}

/// `--arrival` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArrivalArg {
    /// Drawn from the seed among the four.
    Random,
    /// ANL SP2.
    Anl,
    /// CTC SP2.
    Ctc,
    /// KTH SP2.
    Kth,
    /// SDSC SP2.
    Sdsc,
}

/// Writes one JSON document per line, whole or not at all.
fn write_json_lines<T: serde::Serialize>(out: &Path, records: &[T]) -> Result<()> {
    super::output::write_whole(out, |w| {
        for r in records {
            serde_json::to_writer(&mut *w, r)?;
            writeln!(w)?;
        }
        Ok(())
    })
}

/// Longest VARQ deadline period or planning step: a year.
const MAX_PERIOD_S: i64 = 366 * 86_400;

/// Most runs of an experiment (each keeps a record in memory).
const MAX_RUNS: u64 = 1_000_000;

/// Widest arrival-time scaling: a millionfold either way (a trace's years then still
/// fit in seconds since 1970 many times over).
const LOAD_SCALE_RANGE: (f64, f64) = (1e-6, 1e6);

fn load_scale(s: &str) -> Result<f64, String> {
    let (lo, hi) = LOAD_SCALE_RANGE;
    super::number_where(
        s,
        |v| (lo..=hi).contains(&v),
        &format!("from {lo:e} to {hi:e}"),
    )
}

fn offered(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| v > 0.0 && v <= 100.0, "above 0 and at most 100")
}

fn fraction(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| (0.0..=1.0).contains(&v), "from 0 to 1")
}

fn open_probability(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| v > 0.0 && v < 1.0, "strictly between 0 and 1")
}

fn parse_priorities(s: &str) -> Result<BTreeMap<i32, i32>, String> {
    let mut m = BTreeMap::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (q, r) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected QUEUE=RANK"))?;
        let q = q
            .trim()
            .parse()
            .map_err(|_| format!("{q:?} is not a queue number"))?;
        let r = r
            .trim()
            .parse()
            .map_err(|_| format!("{r:?} is not a rank"))?;
        m.insert(q, r);
    }
    Ok(m)
}

/// Runs `qbets simulate`.
pub fn run(args: Args) -> Result<()> {
    // An output that cannot be written is found now, not after the simulation.
    if let Some(out) = &args.out {
        drop(super::output::OutputFile::create(out)?);
    }
    if args.arrays.is_some()
        && (args.model != Some(Model::Cirne) || args.timeshare.timeshare.is_some())
    {
        bail!(
            "--arrays injects job arrays into --model cirne's workload on the space-shared machine only"
        );
    }
    if let Some(alg) = args.timeshare.timeshare {
        return super::simulate_timeshare::run(&args, alg);
    }
    super::simulate_timeshare::refuse_without_timeshare(&args.timeshare)?;
    if let Some(Experiment::CirneSa) = args.experiment {
        super::simulate_mold::check_without_lublin(&args.mold, None)?;
        return run_sa_experiment(&args);
    }
    if args.offered_load.is_some() && args.trace.is_none() && args.arrays.is_none() {
        bail!("--offered-load needs --trace (or, for a model, --timeshare or --arrays)");
    }
    let Some(policy) = args.policy else {
        bail!("--policy is required");
    };
    let varq = args.varq_fraction.is_some();
    let out = match args.out.clone() {
        Some(out) => out,
        None if varq => PathBuf::new(),
        None => bail!("--out is required"),
    };
    if args.model == Some(Model::Lublin) {
        return run_lublin(&args, policy, &out);
    }
    super::simulate_mold::check_without_lublin(&args.mold, Some(policy))?;
    let mut header = vec![
        "Version: 2.2".to_string(),
        "Computer: qbets scheduler simulator".to_string(),
        format!("Note: simulated schedule; policy {policy}"),
    ];
    let mut priority = args.priority.clone().unwrap_or_default();
    let mut users = std::collections::HashMap::new();
    let (processors, jobs, originals, trace) = match (&args.trace, args.model) {
        (Some(path), _) => {
            let l = load_trace(path, &args, &mut header)?;
            (l.processors, l.jobs, l.originals, Some(l.trace))
        }
        (None, Some(Model::Cirne)) => {
            let Some(p) = args.processors else {
                bail!("--processors is required with --model");
            };
            let n = args.jobs.unwrap_or(0);
            let pattern = match args.arrival {
                ArrivalArg::Random => None,
                ArrivalArg::Anl => Some(ArrivalPattern::Anl),
                ArrivalArg::Ctc => Some(ArrivalPattern::Ctc),
                ArrivalArg::Kth => Some(ArrivalPattern::Kth),
                ArrivalArg::Sdsc => Some(ArrivalPattern::Sdsc),
            };
            let mut model = CirneModel::new(p, args.seed, pattern);
            if let Some(f) = args.load_scale {
                model.set_load_scale(f);
            }
            if args.demo_queues {
                let queues = QueueSpec::demo_site();
                for q in &queues {
                    header.push(format!("Queue: {} {}", q.number, q.name));
                }
                priority = QueueSpec::priorities(&queues);
                model.set_queues(queues).map_err(anyhow::Error::msg)?;
            }
            header.push(format!(
                "Source: model cirne, {n} jobs, seed {}, arrival pattern {}, load scale {}",
                args.seed,
                model.pattern().name(),
                args.load_scale.unwrap_or(1.0)
            ));
            header.push("UnixStartTime: 0".to_string());
            let mut jobs: Vec<SimJob> = model.take(n as usize).collect();
            if let Some(spec) = args.arrays {
                let mut w = crate::sim::arrays::inject(jobs, p, spec, args.seed);
                if let Some(target) = args.offered_load {
                    let f = crate::sim::arrays::scale_to_load(&mut w.jobs, p, target);
                    header.push(format!(
                        "Note: arrival times scaled by {f:.4} for an offered load of {target}"
                    ));
                }
                header.push(format!(
                    "Note: {} job arrays ({spec}) injected, {} array tasks of {} jobs; \
                     users 1-{} background, above them one per array",
                    w.arrays,
                    w.array_jobs,
                    w.jobs.len(),
                    crate::sim::arrays::BACKGROUND_USERS
                ));
                if args.arrays_last {
                    for j in &mut w.jobs {
                        let array = w
                            .users
                            .get(&j.id)
                            .is_some_and(|u| *u > crate::sim::arrays::BACKGROUND_USERS);
                        j.queue = if array { 2 } else { 1 };
                    }
                    priority = [(1, 0), (2, 1)].into_iter().collect();
                }
                users = w.users;
                jobs = w.jobs;
            }
            (p, jobs, Vec::new(), None)
        }
        (None, Some(Model::Lublin)) => unreachable!("handled above"),
        (None, None) => bail!("give --trace FILE or --model cirne|lublin"),
    };
    header.push(format!("MaxProcs: {processors}"));
    header.push(format!("MaxJobs: {}", jobs.len()));

    if policy == Policy::Conservative && !priority.is_empty() {
        // The simulator's conservative backfilling reserves in arrival order: a
        // high-priority arrival cannot pass the reservations already given, so ranks
        // would be honoured only by compression, not as a priority scheduler does.
        bail!(
            "--policy conservative cannot be combined with queue priorities \
             (--priority or --demo-queues): conservative backfilling reserves in arrival \
             order and would not honour the ranks; use --policy easy, fcfs or los"
        );
    }
    let cfg = SimConfig {
        processors,
        policy,
        priority,
    };
    if !cfg.priority.is_empty() {
        let p: Vec<String> = cfg
            .priority
            .iter()
            .map(|(q, r)| format!("{q}={r}"))
            .collect();
        header.push(format!("Note: queue priority ranks {}", p.join(",")));
    }
    if let (Some(fraction), Some(probability)) = (args.varq_fraction, args.varq_probability) {
        let source = match &args.trace {
            Some(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            None => format!("model cirne (seed {})", args.seed),
        };
        let mut exp = VarqExperiment::new(cfg, fraction, probability, args.seed);
        exp.period_s = args.varq_period;
        exp.step_s = args.varq_step;
        if let Some(a) = args.varq_cluster_by {
            exp.engine.attribute = a;
        }
        return run_varq(&exp, &jobs, &source, args.out.as_deref(), args.json);
    }
    let start = jobs.first().map_or(0, |j| j.submit);
    let pb = progress::bar(jobs.len() as u64, "jobs");
    pb.set_message("simulating");
    let total = jobs.len();
    let result = run_jobs(cfg, start, jobs, |n| pb.set_position(n));
    pb.finish_and_clear();
    if !result.refused.is_empty() {
        bail!(
            "the simulator refused {} jobs (first: job {}: {})",
            result.refused.len(),
            result.refused[0].0.id,
            result.refused[0].1
        );
    }
    write_schedule(&out, &header, &result, &originals, trace.as_ref(), &users)?;
    let m = metrics(&result.outcomes, processors);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        print_metrics(&m, &policy, processors, total);
    }
    Ok(())
}

/// A trace read and converted for the simulator.
pub(super) struct LoadedTrace {
    pub(super) processors: u32,
    pub(super) jobs: Vec<SimJob>,
    /// Job id → index of its record in `trace`, for the output.
    pub(super) originals: Vec<(i64, usize)>,
    pub(super) trace: SwfTrace,
    /// Records left out (reported on stderr).
    pub(super) left_out: usize,
}

/// Reads and converts a trace, adding what it says about the source to `header`.
pub(super) fn load_trace(
    path: &Path,
    args: &Args,
    header: &mut Vec<String>,
) -> Result<LoadedTrace> {
    let trace = crate::cli::replay::read_trace(path)?;
    let processors = match args
        .processors
        .or(trace.header.max_procs.and_then(|p| u32::try_from(p).ok()))
    {
        Some(p) if p > 0 => p,
        _ => bail!(
            "{}: no MaxProcs in the header; give --processors",
            path.display()
        ),
    };
    let natural = jobs_from_trace(&trace, processors, 1.0);
    let load0 = offered_load(&natural.jobs, processors);
    let scale = match (args.load_scale, args.offered_load) {
        (Some(f), _) => f,
        (None, Some(l)) => {
            let f = load0 / l;
            let (lo, hi) = LOAD_SCALE_RANGE;
            if !(lo..=hi).contains(&f) {
                bail!(
                    "--offered-load {l}: the trace's offered load is {load0:.3}, and reaching \
                     {l} would scale its arrival times by {f:e}, outside {lo:e} to {hi:e}"
                );
            }
            f
        }
        (None, None) => 1.0,
    };
    let converted = if scale == 1.0 {
        natural
    } else {
        jobs_from_trace(&trace, processors, scale)
    };
    let load = offered_load(&converted.jobs, processors);
    report_skipped(path, &converted.skipped, converted.requested_from_runtime);
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    header.push(format!(
        "Source: trace {name}, load scale {scale:.6} (offered load {load0:.3} -> {load:.3}), {} jobs left out",
        converted.skipped.len()
    ));
    if let Some(t) = trace.header.unix_start_time {
        header.push(format!("UnixStartTime: {t}"));
    }
    if let Some(z) = &trace.header.time_zone {
        header.push(format!("TimeZoneString: {z}"));
    }
    let field = trace.queue_field();
    let names = match field {
        swf::QueueField::Queue => &trace.header.queues,
        swf::QueueField::Partition => &trace.header.partitions,
    };
    for (n, name) in names {
        header.push(format!("Queue: {n} {name}"));
    }
    // Keep the original header, with its credits, as notes.
    for c in &trace.header.comments {
        header.push(format!("Original header | {c}"));
    }
    let originals = converted
        .jobs
        .iter()
        .zip(&converted.record_index)
        .map(|(j, &i)| (j.id, i))
        .collect();
    Ok(LoadedTrace {
        processors,
        left_out: converted.skipped.len(),
        jobs: converted.jobs,
        originals,
        trace,
    })
}

fn report_skipped(path: &Path, skipped: &[swf_jobs::Skipped], requested_from_runtime: usize) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in skipped {
        let k = match s.reason {
            SkipReason::TooLarge { .. } => "larger than the machine",
            SkipReason::UnknownProcs => "processors unknown",
            SkipReason::UnknownRuntime => "run time unknown",
            SkipReason::DuplicateJobNumber => "duplicate job number",
        };
        *counts.entry(k).or_default() += 1;
    }
    for (k, n) in &counts {
        eprintln!("{}: {n} jobs left out: {k}", path.display());
    }
    for s in skipped.iter().take(3) {
        eprintln!(
            "{}: line {}: job {}: {}",
            path.display(),
            s.line,
            s.job,
            s.reason
        );
    }
    if requested_from_runtime > 0 {
        eprintln!(
            "{}: {requested_from_runtime} jobs without a requested time use their run time",
            path.display()
        );
    }
}

fn write_schedule(
    out: &Path,
    header: &[String],
    result: &RunResult,
    originals: &[(i64, usize)],
    trace: Option<&SwfTrace>,
    users: &std::collections::HashMap<i64, u32>,
) -> Result<()> {
    let by_id: std::collections::HashMap<i64, usize> = originals.iter().copied().collect();
    let mut outcomes: Vec<_> = result.outcomes.iter().collect();
    // Submit order, as SWF files are written.
    outcomes.sort_by_key(|o| (o.job.submit, o.job.id));
    super::output::write_whole(out, |w| {
        swf::write_comments(&mut *w, header)?;
        for o in outcomes {
            let orig: Option<&SwfRecord> =
                trace.and_then(|t| by_id.get(&o.job.id).map(|&i| &t.records[i]));
            let mut r = swf_jobs::outcome_record(o, orig);
            if let Some(&u) = users.get(&o.job.id) {
                r.user = i64::from(u);
            }
            writeln!(w, "{r}")?;
        }
        Ok(())
    })
}

/// The Lublin model's run (`super::simulate_mold`), after refusing what does not go
/// with it.
fn run_lublin(args: &Args, policy: Policy, out: &Path) -> Result<()> {
    let Some(processors) = args.processors else {
        bail!("--processors is required with --model");
    };
    for (given, flag) in [
        (args.priority.is_some(), "--priority"),
        (args.demo_queues, "--demo-queues"),
        (args.varq_fraction.is_some(), "--varq-fraction"),
    ] {
        if given {
            bail!(
                "{flag} does not go with --model lublin: its jobs are ranked by run-time \
                 class (short, medium, long) with aging, as Barsanti & Sodan schedule them"
            );
        }
    }
    if policy == Policy::Conservative {
        bail!(
            "--policy conservative cannot schedule --model lublin: its jobs are ranked by \
             run-time class, and conservative backfilling reserves in arrival order and \
             would not honour the ranks; use easy (the traditional baseline), fcfs, los, \
             cirne-berman or scojo-p"
        );
    }
    super::simulate_mold::run(&super::simulate_mold::Setup {
        policy,
        processors,
        jobs: args.jobs.unwrap_or(0),
        seed: args.seed,
        load_scale: args.load_scale,
        mold: &args.mold,
        out,
        json: args.json,
    })
}

pub(crate) fn print_metrics(m: &Metrics, policy: &Policy, processors: u32, total: usize) {
    let h = |s: f64| format!("{s:.0} s ({:.2} h)", s / 3600.0);
    println!("policy {policy} on {processors} processors: {total} jobs simulated");
    println!(
        "  ran {} (killed at requested time {}, cancelled while running {}), cancelled while waiting {}",
        m.jobs, m.killed, m.cancelled_running, m.cancelled_waiting
    );
    if m.withdrawn > 0 {
        println!(
            "  withdrawn {} (never ran in the log, and would have started before their cancel time: run time unknown)",
            m.withdrawn
        );
    }
    println!("  mean wait           {}", h(m.mean_wait));
    println!("  geo-mean wait       {}", h(m.geo_wait));
    println!("  mean response       {}", h(m.mean_response));
    println!("  geo-mean response   {}", h(m.geo_response));
    println!(
        "  mean bounded slowdown (tau = 10 s)  {:.2}",
        m.mean_bounded_slowdown
    );
    println!("  utilization         {:.4}", m.utilization);
    println!("  makespan            {}", h(m.makespan as f64));
}

/// The VARQ generality experiment on `jobs`: Table 5.6's cell and Table 5.5's.
fn run_varq(
    exp: &VarqExperiment,
    jobs: &[SimJob],
    source: &str,
    out: Option<&Path>,
    json: bool,
) -> Result<()> {
    exp.validate().map_err(anyhow::Error::msg)?;
    let pb = progress::bar(jobs.len() as u64, "jobs");
    pb.set_message("varq");
    let run = run_varq_experiment(exp, jobs, |n| pb.set_position(n)).map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();
    if !run.refused.is_empty() {
        bail!(
            "the simulator refused {} jobs (first: job {}: {})",
            run.refused.len(),
            run.refused[0].0.id,
            run.refused[0].1
        );
    }
    if let Some(out) = out {
        write_json_lines(out, &run.records)?;
    }
    let s = varq_summarize(exp, jobs.len(), &run);
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "varq generality on {source}: policy {}, {} processors, seed {}",
        exp.sim.policy, exp.sim.processors, exp.seed
    );
    println!(
        "  deadlines every {} s, planning step {} s, confidence {}, predictor clusters by {}",
        exp.period_s, exp.step_s, exp.confidence, exp.engine.attribute
    );
    println!(
        "  {} jobs: {} VARQ requests (fraction {}), {} accepted, {} refused (ran as ordinary jobs)",
        s.jobs, s.requests, s.fraction, s.accepted, s.refused
    );
    println!("  fraction  P     pred.  act.   count   req. node-h  used node-h  ratio  worst");
    println!(
        "  {:<8}  {:<4}  {:.3}  {:.3}  {:>5}  {:>12.1}  {:>11.1}  {:>5.2}  {:>5.2}",
        s.fraction,
        s.probability,
        s.mean_predicted,
        s.achieved,
        s.accepted,
        s.required_node_h,
        s.used_node_h,
        s.ratio,
        s.worst_case_ratio
    );
    println!(
        "  succeeded {} of {} (binomial sd of the fraction {:.3}); mean lead {:.0} s",
        s.succeeded, s.accepted, s.binomial_sd, s.mean_lead_s
    );
    println!(
        "  mean wait of the other jobs {:.0} s; makespan {} s",
        s.mean_wait_others_s, s.makespan_s
    );
    Ok(())
}

fn run_sa_experiment(args: &Args) -> Result<()> {
    use crate::sim::experiment::{SaExperiment, SaRunRecord, sa_run, summarize};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    let cfg = SaExperiment {
        processors: args.processors.unwrap_or(500),
        jobs: args.jobs.unwrap_or(10_000) as usize,
        seed: args.seed,
        check_sag: args.check_sag,
    };
    if cfg.processors == 0 || cfg.jobs == 0 || args.runs == 0 {
        bail!("--processors, --jobs and --runs must be at least 1");
    }
    let pb = progress::bar(args.runs, "runs");
    pb.set_message("cirne-sa");
    let next = AtomicU64::new(0);
    let records = Mutex::new(Vec::with_capacity(args.runs as usize));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let run = next.fetch_add(1, Ordering::Relaxed);
                    if run >= args.runs {
                        break;
                    }
                    let r = sa_run(&cfg, run);
                    records
                        .lock()
                        .expect("no panics while holding the lock")
                        .push(r);
                    pb.inc(1);
                }
            });
        }
    });
    pb.finish_and_clear();
    let mut records: Vec<SaRunRecord> = records.into_inner().expect("threads joined");
    records.sort_by_key(|r| r.run);
    if let Some(out) = &args.out {
        write_json_lines(out, &records)?;
    }
    let s = summarize(&records);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "cirne-sa: {} runs, {} processors, {} jobs per workload, seed {}",
        s.runs, cfg.processors, cfg.jobs, cfg.seed
    );
    println!(
        "  geometric-mean turn-around: best {:.0} s, SA {:.0} s, user {:.0} s",
        s.best, s.sa, s.user
    );
    println!(
        "  better than the user's request: best {:.1}%, SA {:.1}% (same {:.1}%, worse {:.1}%)",
        100.0 * s.best_better,
        100.0 * s.sa_better,
        100.0 * s.sa_same,
        100.0 * s.sa_worse
    );
    println!("  runs with two requests: {:.1}%", 100.0 * s.v_two);
    if args.check_sag {
        println!("  SAg disagreed with SAcb in {} runs", s.sag_disagreements);
    }
    Ok(())
}
