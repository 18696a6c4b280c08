//! `qbets simulate --timeshare gs|fcs|ics|local|fcfs`: a trace or a workload model run
//! on the time-shared machine of `crate::sim::timeshare` (Frachtenberg's thesis), with
//! the thesis's §5.4 metrics printed and the schedule written as SWF.
//!
//! The simulator runs on the thesis's compressed clock (§4.6: the workload's times
//! divided by `--compress`, 100 by default), where its measured constants (T = 0.2 s,
//! the 1.42 s launch overhead, 10 μs messages) hold; the metrics are printed on that
//! clock, the SWF file is written back in the workload's own seconds.
//!
//! May import: anything the subcommand needs; the simulation itself is `crate::sim`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, ValueEnum};

use super::progress;
use super::simulate::{Args, ArrivalArg, Model, load_trace};
use crate::sim::SimJob;
use crate::sim::cirne::{ArrivalPattern, CirneModel};
use crate::sim::lublin::LublinModel;
use crate::sim::swf_jobs::offered_load;
use crate::sim::timeshare::params::SHORT_WORK_UNCOMPRESSED_S;
use crate::sim::timeshare::{
    Admission, Algorithm, Imbalance, Params, Skip, TsMetrics, TsOutcome, WorkloadDraws,
    from_sim_jobs, ts_metrics,
};
use crate::trace::swf::{self, SwfRecord, SwfTrace};

/// The time-sharing flags of `qbets simulate`.
#[derive(Debug, ClapArgs)]
pub struct TimeshareArgs {
    /// Run a time-shared machine instead of a space-shared one (Frachtenberg's
    /// thesis): gang scheduling, Flexible CoScheduling, implicit coscheduling, local
    /// scheduling or FCFS batch (MPL 1). Each job gets a synthetic application drawn
    /// from --seed (thesis §4.6: granularity, variance, pattern).
    #[arg(long = "timeshare", id = "ts_algorithm", value_enum, conflicts_with_all = [
        "policy", "experiment", "varq_fraction", "varq_probability", "varq_period",
        "varq_step", "varq_cluster_by", "priority", "demo_queues", "runs", "check_sag",
    ])]
    pub timeshare: Option<TsAlgorithm>,
    /// Multiprogramming level: rows of the Ousterhout matrix, most processes per PE
    /// (default 4, the thesis's; fcfs is MPL 1 and takes no other).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_MPL as i64))]
    pub mpl: Option<u32>,
    /// Timeslice T, seconds on the compressed clock (default 0.2).
    #[arg(long, value_parser = timeslice)]
    pub timeslice: Option<f64>,
    /// Divide the workload's arrival and run times by this (default 100, thesis §4.6).
    #[arg(long, value_parser = compression)]
    pub compress: Option<f64>,
    /// Seconds (compressed clock) added to every job's run time for its launch
    /// (default 1.42, thesis Table 5.1).
    #[arg(long, value_parser = seconds)]
    pub launch_overhead: Option<f64>,
    /// The local OS quantum of the desynchronisation model, seconds on the compressed
    /// clock (default: the fitted value, see EVALUATION.md).
    #[arg(long, value_parser = seconds)]
    pub q_local: Option<f64>,
    /// Imbalance stretch of a coscheduled job: fitted to the thesis's Table 5.3
    /// (default) or analytic (order statistics of uniform compute times).
    #[arg(long, value_enum)]
    pub imbalance: Option<ImbalanceArg>,
    /// Admission from the queue: fcfs (strict, the default) or any-fit (a later job
    /// that fits may pass a head that does not).
    #[arg(long, value_enum)]
    pub admission: Option<AdmissionArg>,
}

/// `--timeshare` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TsAlgorithm {
    /// Gang scheduling with relaxed alternate scheduling.
    Gs,
    /// Flexible CoScheduling.
    Fcs,
    /// Implicit coscheduling (spin-block).
    Ics,
    /// Local scheduling (each PE's OS alone).
    Local,
    /// FCFS batch: MPL 1.
    Fcfs,
}

impl From<TsAlgorithm> for Algorithm {
    fn from(a: TsAlgorithm) -> Algorithm {
        match a {
            TsAlgorithm::Gs => Algorithm::Gs,
            TsAlgorithm::Fcs => Algorithm::Fcs,
            TsAlgorithm::Ics => Algorithm::Ics,
            TsAlgorithm::Local => Algorithm::Local,
            TsAlgorithm::Fcfs => Algorithm::Fcfs,
        }
    }
}

/// `--imbalance` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImbalanceArg {
    /// Fitted to Table 5.3.
    Fitted,
    /// Order statistics of uniforms.
    Analytic,
}

/// `--admission` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AdmissionArg {
    /// Strict FCFS.
    Fcfs,
    /// Any job that fits.
    AnyFit,
}

/// Most rows of the matrix: Fig. 5.1 goes to 8; past 64 processes per PE, memory (the
/// limit on multiprogramming of the thesis's §2.1) rules time sharing out anywhere.
const MAX_MPL: u32 = 64;

/// The shortest timeslice: the simulation takes a step per timeslice, and at 1 ms the
/// thesis's workload (≈10^4 compressed seconds) already takes 10^7 of them.
const MIN_TIMESLICE_S: f64 = 1e-3;

/// The longest timeslice, launch overhead or quantum: an hour of the compressed clock
/// (100 hours of the workload's) is no longer time sharing.
const MAX_SECONDS: f64 = 3600.0;

fn timeslice(s: &str) -> Result<f64, String> {
    super::number_where(
        s,
        |v| (MIN_TIMESLICE_S..=MAX_SECONDS).contains(&v),
        &format!("from {MIN_TIMESLICE_S} to {MAX_SECONDS} seconds"),
    )
}

fn seconds(s: &str) -> Result<f64, String> {
    super::number_where(
        s,
        |v| (0.0..=MAX_SECONDS).contains(&v),
        &format!("from 0 to {MAX_SECONDS} seconds"),
    )
}

/// Compression as wide as `--load-scale`'s scaling: a millionfold either way.
fn compression(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| (1e-6..=1e6).contains(&v), "from 1e-6 to 1e6")
}

/// Refuses the time-sharing flags without `--timeshare` (clap's `requires` cannot say
/// it: it lets a required argument be missing when it conflicts with one given, and
/// `--timeshare` conflicts with `--policy`).
pub fn refuse_without_timeshare(ts: &TimeshareArgs) -> Result<()> {
    let given = [
        (ts.mpl.is_some(), "--mpl"),
        (ts.timeslice.is_some(), "--timeslice"),
        (ts.compress.is_some(), "--compress"),
        (ts.launch_overhead.is_some(), "--launch-overhead"),
        (ts.q_local.is_some(), "--q-local"),
        (ts.imbalance.is_some(), "--imbalance"),
        (ts.admission.is_some(), "--admission"),
    ];
    let flags: Vec<&str> = given.iter().filter(|g| g.0).map(|g| g.1).collect();
    if !flags.is_empty() {
        bail!(
            "{} only go{} with --timeshare gs|fcs|ics|local|fcfs (the time-shared machine)",
            flags.join(", "),
            if flags.len() == 1 { "es" } else { "" }
        );
    }
    Ok(())
}

/// The settings the flags give for `alg`.
fn params(ts: &TimeshareArgs, alg: Algorithm, processors: u32) -> Result<Params> {
    let mut p = Params::thesis(alg);
    p.processors = processors;
    if let Some(m) = ts.mpl {
        if alg == Algorithm::Fcfs && m != 1 {
            bail!(
                "--mpl {m} does not go with --timeshare fcfs: FCFS is the time-shared machine \
                 with MPL 1 (thesis §4.4.4); use gs for gang scheduling with MPL {m}"
            );
        }
        p.mpl = m;
    }
    if let Some(t) = ts.timeslice {
        p.timeslice_s = t;
    }
    if let Some(l) = ts.launch_overhead {
        p.launch_overhead_s = l;
    }
    if let Some(q) = ts.q_local {
        p.q_local_s = q;
    }
    if let Some(i) = ts.imbalance {
        p.imbalance = match i {
            ImbalanceArg::Fitted => Imbalance::Fitted,
            ImbalanceArg::Analytic => Imbalance::Analytic,
        };
    }
    if let Some(a) = ts.admission {
        p.admission = match a {
            AdmissionArg::Fcfs => Admission::Fcfs,
            AdmissionArg::AnyFit => Admission::AnyFit,
        };
    }
    p.validate().map_err(anyhow::Error::msg)?;
    Ok(p)
}

/// Runs `qbets simulate --timeshare ALG`.
pub fn run(args: &Args, alg: TsAlgorithm) -> Result<()> {
    let ts = &args.timeshare;
    let Some(out) = args.out.as_deref() else {
        bail!("--out is required");
    };
    if args.model != Some(Model::Lublin) {
        super::simulate_mold::check_without_lublin(&args.mold, None)?;
    }
    let compress = ts
        .compress
        .unwrap_or(crate::sim::timeshare::params::THESIS_COMPRESSION);
    let alg = Algorithm::from(alg);
    let mut header = vec![
        "Version: 2.2".to_string(),
        "Computer: qbets time-shared simulator".to_string(),
    ];
    let (processors, jobs, trace, originals, left_out) = match (&args.trace, args.model) {
        (Some(path), _) => {
            let l = load_trace(path, args, &mut header)?;
            (l.processors, l.jobs, Some(l.trace), l.originals, l.left_out)
        }
        (None, Some(Model::Cirne)) => {
            let Some(p) = args.processors else {
                bail!("--processors is required with --model");
            };
            let n = args.jobs.unwrap_or(0) as usize;
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
            let mut jobs: Vec<SimJob> = model.by_ref().take(n).collect();
            let note = scale_to_load(&mut jobs, p, args.offered_load)?;
            header.push(format!(
                "Source: model cirne, {n} jobs, seed {}, arrival pattern {}, load scale {}{note}",
                args.seed,
                model.pattern().name(),
                args.load_scale.unwrap_or(1.0)
            ));
            header.push("UnixStartTime: 0".to_string());
            (p, jobs, None, Vec::new(), 0)
        }
        (None, Some(Model::Lublin)) => {
            let Some(p) = args.processors else {
                bail!("--processors is required with --model");
            };
            if args.mold.speedup.is_some() || args.mold.moldable.is_some() {
                bail!(
                    "--speedup and --moldable make moldable jobs; the time-shared machine \
                     runs rigid ones (give --model lublin without them)"
                );
            }
            let n = args.jobs.unwrap_or(0) as usize;
            let mut model = LublinModel::new(p, args.seed);
            if let Some(a) = args.mold.lublin_alpha {
                model.set_alpha(a);
            }
            if let Some(f) = args.load_scale {
                model.set_load_scale(f);
            }
            let mut jobs: Vec<SimJob> = model.by_ref().take(n).collect();
            let note = scale_to_load(&mut jobs, p, args.offered_load)?;
            header.push(format!(
                "Source: model lublin, {n} jobs, seed {}, alpha {}, load scale {}{note}",
                args.seed,
                model.params().aarr,
                args.load_scale.unwrap_or(1.0)
            ));
            header.push("UnixStartTime: 0".to_string());
            (p, jobs, None, Vec::new(), 0)
        }
        (None, None) => bail!("give --trace FILE or --model cirne|lublin"),
    };

    let p = params(ts, alg, processors)?;
    let (ts_jobs, skipped) = from_sim_jobs(
        &jobs,
        processors,
        compress,
        &WorkloadDraws::thesis(),
        args.seed,
    )
    .map_err(anyhow::Error::msg)?;
    report_skipped(&skipped);
    header.push(format!(
        "Note: time-shared simulation: {alg}, MPL {}, timeslice {} s, launch overhead {} s, \
         q_local {} s, imbalance {}, admission {}, applications drawn from seed {}",
        p.mpl,
        p.timeslice_s,
        p.launch_overhead_s,
        p.q_local_s,
        p.imbalance.name(),
        match p.admission {
            Admission::Fcfs => "fcfs",
            Admission::AnyFit => "any-fit",
        },
        args.seed
    ));
    header.push(format!(
        "Note: the simulator ran on a clock compressed {compress}-fold (thesis §4.6); the \
         times in this file are the workload's seconds (simulated seconds × {compress}, rounded)"
    ));
    header.push(format!("MaxProcs: {processors}"));
    header.push(format!("MaxJobs: {}", ts_jobs.len()));

    let total = ts_jobs.len();
    let pb = progress::bar(total as u64, "jobs");
    pb.set_message(format!("timeshare {alg}"));
    let outcomes = crate::sim::timeshare::run(&p, ts_jobs, |n| pb.set_position(n as u64))
        .map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();

    let by_id: HashMap<i64, &SimJob> = jobs.iter().map(|j| (j.id, j)).collect();
    write_schedule(
        out,
        &header,
        &outcomes,
        &by_id,
        &originals,
        trace.as_ref(),
        compress,
    )?;
    let m = ts_metrics(&outcomes, processors, SHORT_WORK_UNCOMPRESSED_S / compress);
    if args.json {
        #[derive(serde::Serialize)]
        struct Report<'a> {
            params: &'a Params,
            compression: f64,
            seed: u64,
            /// Jobs simulated.
            jobs: usize,
            /// The workload's jobs left out (reasons on stderr).
            left_out: usize,
            #[serde(flatten)]
            metrics: &'a TsMetrics,
        }
        let r = Report {
            params: &p,
            compression: compress,
            seed: args.seed,
            jobs: total,
            left_out: left_out + skipped.len(),
            metrics: &m,
        };
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_metrics(&m, &p, compress, total);
    }
    Ok(())
}

/// With `--offered-load`, stretches or squeezes a model's arrival times (offsets from
/// the first) so that its offered load (processor-seconds asked over capacity × the
/// arrivals' span; the thesis's pre-run estimate, §4.6 footnote 3) becomes the target.
/// Returns a note for the header.
fn scale_to_load(jobs: &mut [SimJob], processors: u32, target: Option<f64>) -> Result<String> {
    let Some(target) = target else {
        return Ok(String::new());
    };
    let load0 = offered_load(jobs, processors);
    if load0.is_nan() || load0 <= 0.0 {
        bail!("--offered-load {target}: the workload has no work to scale (offered load 0)");
    }
    let f = load0 / target;
    let first = jobs.first().map_or(0, |j| j.submit);
    for j in jobs.iter_mut() {
        let offset = ((j.submit - first) as f64 * f).round() as i64;
        let moved = first + offset;
        if let Some(c) = j.cancel_at.as_mut() {
            *c = moved + (*c - j.submit);
        }
        j.submit = moved;
    }
    Ok(format!(
        ", arrivals scaled by {f:.6} (offered load {load0:.3} -> {:.3})",
        offered_load(jobs, processors)
    ))
}

fn report_skipped(skipped: &[(i64, Skip)]) {
    let unknown = skipped
        .iter()
        .filter(|s| s.1 == Skip::UnknownRuntime)
        .count();
    let large = skipped.len() - unknown;
    if unknown > 0 {
        eprintln!(
            "{unknown} jobs left out: run time unknown (cancelled before they ran; the \
             time-shared machine needs each job's work)"
        );
    }
    if large > 0 {
        eprintln!("{large} jobs left out: larger than the machine");
    }
}

/// Writes the schedule as SWF in the workload's seconds: submit as given, wait and run
/// time from the simulation (× `compress`, rounded), the CPU time per process.
fn write_schedule(
    out: &Path,
    header: &[String],
    outcomes: &[TsOutcome],
    jobs: &HashMap<i64, &SimJob>,
    originals: &[(i64, usize)],
    trace: Option<&SwfTrace>,
    compress: f64,
) -> Result<()> {
    let orig: HashMap<i64, usize> = originals.iter().copied().collect();
    let secs = |s: f64| (s * compress).round() as i64;
    super::output::write_whole(out, |w| {
        swf::write_comments(&mut *w, header)?;
        for o in outcomes {
            let job = jobs[&o.id];
            let mut r = match trace.and_then(|t| orig.get(&o.id).map(|&i| &t.records[i])) {
                Some(r) => {
                    let mut r = r.clone();
                    r.line = 0;
                    r
                }
                None => {
                    let mut r = SwfRecord::unknown(o.id, job.submit);
                    r.queue = i64::from(job.queue);
                    r
                }
            };
            r.submit = job.submit;
            r.wait = secs(o.wait_s());
            r.run = secs(o.runtime_s());
            r.alloc_procs = i64::from(o.app.procs);
            r.req_procs = i64::from(o.app.procs);
            r.req_time = job.requested;
            r.avg_cpu = o.cpu_s * compress / f64::from(o.app.procs);
            r.status = 1;
            writeln!(w, "{r}")?;
        }
        Ok(())
    })
}

fn print_metrics(m: &TsMetrics, p: &Params, compress: f64, total: usize) {
    println!(
        "timeshare {} on {} PEs, MPL {}, timeslice {} s: {total} jobs (times on the clock \
         compressed {compress}-fold)",
        p.algorithm, p.processors, p.mpl, p.timeslice_s
    );
    println!(
        "  imbalance {}, q_local {} s, launch overhead {} s, admission {}",
        p.imbalance.name(),
        p.q_local_s,
        p.launch_overhead_s,
        match p.admission {
            Admission::Fcfs => "fcfs",
            Admission::AnyFit => "any-fit",
        }
    );
    println!(
        "  {:<22} {:>5} {:>10} {:>13} {:>10} {:>14} {:>13}",
        "jobs", "n", "mean work", "mean runtime", "mean wait", "mean response", "runtime/work"
    );
    let short = format!("short (< {} s work)", m.short_below_s);
    for (name, g) in [
        (short.as_str(), &m.short),
        ("long", &m.long),
        ("all", &m.all),
    ] {
        println!(
            "  {:<22} {:>5} {:>10.3} {:>13.3} {:>10.2} {:>14.2} {:>13.2}",
            name,
            g.jobs,
            g.mean_work_s,
            g.mean_runtime_s,
            g.mean_wait_s,
            g.mean_response_s,
            g.runtime_over_work
        );
    }
    println!(
        "  makespan {:.1} s; utilization {:.3} (work done); CPU busy {:.3}",
        m.makespan_s, m.utilization, m.cpu_busy
    );
    if !m.final_classes.is_empty() {
        let list = |c: &std::collections::BTreeMap<String, usize>| {
            c.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("  FCS classes at the end: {}", list(&m.final_classes));
        println!("  FCS classes ever taken: {}", list(&m.ever_classes));
    }
}
