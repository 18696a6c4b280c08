//! `qbets simulate --model lublin`: the Lublin–Feitelson workload with moldable jobs
//! (Barsanti & Sodan's SCOJO-P experiments), under any space-shared policy: `easy` is
//! their "traditional" baseline (every job at N_opt, run-time-class priorities and
//! aging), `cirne-berman` and `scojo-p[:nonpredictive]` mold the jobs. Writes the
//! schedule as SWF and prints the standard metrics and the paper's (per class, 5%
//! head and tail cut, shrink/expand counts, scaling).
//!
//! May import: anything the subcommand needs; the simulation itself is `crate::sim`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, ValueEnum};
use serde::Serialize;

use crate::cli::progress;
use crate::sim::lublin::{ALPHA_W1, LublinModel};
use crate::sim::metrics::{Metrics, metrics};
use crate::sim::mold::{Molding, MoldingModel, RunClass, SpeedupModel};
use crate::sim::mold_metrics::{ClassMetrics, MoldMetrics, mold_metrics};
use crate::sim::run::{RunResult, run_moldable_jobs};
use crate::sim::scojo::ArrivalForecast;
use crate::sim::swf_jobs;
use crate::sim::{Policy, SimConfig, SimJob};
use crate::trace::swf;

/// Workloads the predictive forecast is measured on: as many as the paper's seeds per
/// configuration (four), each as long as the run (at most [`FORECAST_JOBS`]).
const FORECAST_WORKLOADS: u64 = 4;
/// Longest forecast workload: the paper's 10 000 jobs tenfold, enough for every
/// half-hour of the day many times over.
const FORECAST_JOBS: u64 = 100_000;

/// The flags of the Lublin model and its moldable jobs.
#[derive(Debug, ClapArgs)]
pub struct MoldArgs {
    /// With `--model lublin`: α, the shape of the rush-hour inter-arrival gamma (W1 of
    /// Barsanti & Sodan 10.2303, the reference parameters; W2 9.83). Smaller is
    /// heavier.
    #[arg(long, value_parser = alpha)]
    pub lublin_alpha: Option<f64>,
    /// With `--model lublin`: speedup model of the moldable jobs (default simple).
    #[arg(long, value_enum)]
    pub speedup: Option<SpeedupArg>,
    /// With `--model lublin`: fraction of jobs that are moldable, 0 to 1 (default 1);
    /// the others run at N_opt whatever the policy.
    #[arg(long, value_parser = fraction)]
    pub moldable: Option<f64>,
}

/// `--speedup` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpeedupArg {
    /// Barsanti & Sodan's Table 1: N_opt the generated size, efficiency 0.8 / 0.65 /
    /// 0.4 at N_opt/2, N_opt, 2·N_opt.
    Simple,
    /// Cirne–Berman's Downey curves (A and σ drawn), N_opt the processor working set.
    Downey,
}

fn alpha(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| v > 0.0 && v <= 1000.0, "above 0 and at most 1000")
}

fn fraction(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| (0.0..=1.0).contains(&v), "from 0 to 1")
}

/// Refuses the Lublin model's flags, and the molding policies, without the model.
pub fn check_without_lublin(args: &MoldArgs, policy: Option<Policy>) -> Result<()> {
    for (given, flag) in [
        (args.lublin_alpha.is_some(), "--lublin-alpha"),
        (args.speedup.is_some(), "--speedup"),
        (args.moldable.is_some(), "--moldable"),
    ] {
        if given {
            bail!("{flag} is a setting of the Lublin model: give --model lublin");
        }
    }
    if let Some(p) = policy
        && matches!(p, Policy::CirneBerman | Policy::ScojoP(_))
    {
        bail!(
            "--policy {p} sizes moldable jobs, which only --model lublin generates \
             (trace and Cirne-model jobs are rigid)"
        );
    }
    Ok(())
}

/// What `run` needs from `qbets simulate`'s arguments.
pub struct Setup<'a> {
    /// The policy.
    pub policy: Policy,
    /// Machine size.
    pub processors: u32,
    /// Jobs to generate.
    pub jobs: u64,
    /// Seed.
    pub seed: u64,
    /// Arrival-time multiplier.
    pub load_scale: Option<f64>,
    /// The model's flags.
    pub mold: &'a MoldArgs,
    /// Where the schedule goes.
    pub out: &'a Path,
    /// JSON instead of text.
    pub json: bool,
}

/// The workload of one seed: rigid Lublin jobs made moldable.
fn workload(s: &Setup<'_>, seed: u64, jobs: u64) -> Vec<(SimJob, Molding)> {
    let mut model = LublinModel::new(s.processors, seed);
    model.set_alpha(s.mold.lublin_alpha.unwrap_or(ALPHA_W1));
    if let Some(f) = s.load_scale {
        model.set_load_scale(f);
    }
    let mut mm = MoldingModel::new(
        s.processors,
        stream_seed(seed, 0x4D4F_4C44),
        speedup_model(s.mold),
        s.mold.moldable.unwrap_or(1.0),
    );
    model.take(jobs as usize).map(|j| mm.mold(&j)).collect()
}

fn speedup_model(m: &MoldArgs) -> SpeedupModel {
    match m.speedup {
        None | Some(SpeedupArg::Simple) => SpeedupModel::Simple,
        Some(SpeedupArg::Downey) => SpeedupModel::Downey,
    }
}

/// A seed for another random stream derived from `seed` (SplitMix64's finalizer).
fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The JSON `qbets simulate --model lublin --json` prints.
#[derive(Debug, Serialize)]
struct Report<'a> {
    policy: String,
    processors: u32,
    workload: WorkloadInfo,
    /// The standard metrics over every job (no cut).
    all_jobs: &'a Metrics,
    /// Barsanti & Sodan's metrics.
    measured: &'a MoldMetrics,
}

#[derive(Debug, Serialize)]
struct WorkloadInfo {
    model: &'static str,
    jobs: u64,
    seed: u64,
    alpha: f64,
    speedup: &'static str,
    moldable_fraction: f64,
    load_scale: f64,
    /// Workloads (other seeds) the forecast was measured on; 0 when not predictive.
    forecast_workloads: u64,
}

/// Runs the simulation of a Lublin workload.
pub fn run(s: &Setup<'_>) -> Result<()> {
    let alpha = s.mold.lublin_alpha.unwrap_or(ALPHA_W1);
    let fraction = s.mold.moldable.unwrap_or(1.0);
    let speedup = speedup_model(s.mold);
    let jobs = workload(s, s.seed, s.jobs);
    let predictive = matches!(s.policy, Policy::ScojoP(p) if p.predictive);
    let forecast_workloads = if predictive { FORECAST_WORKLOADS } else { 0 };
    let forecast = if predictive {
        // Other seeds than the run's: the statistics of the model, not of the
        // workload being scheduled.
        let n = s.jobs.min(FORECAST_JOBS);
        let f = ArrivalForecast::measure(
            (1..=FORECAST_WORKLOADS).map(|k| workload(s, stream_seed(s.seed, 0xF0CA_0000 + k), n)),
        );
        match f {
            Some(f) => Some(Arc::new(f)),
            None => bail!(
                "--policy {}: {} jobs per workload do not span two arrival times, so no \
                 forecast of arrivals can be measured; give more --jobs",
                s.policy,
                n
            ),
        }
    } else {
        None
    };
    let moldings: HashMap<i64, Molding> = jobs.iter().map(|(j, m)| (j.id, *m)).collect();
    let mut header = vec![
        "Version: 2.2".to_string(),
        "Computer: qbets scheduler simulator".to_string(),
        format!("Note: simulated schedule; policy {}", s.policy),
        format!(
            "Source: model lublin (typeless parameters of m_lublin99.c), {} jobs, seed {}, \
             alpha {alpha}, {} speedup, moldable fraction {fraction}, load scale {}",
            s.jobs,
            s.seed,
            speedup.name(),
            s.load_scale.unwrap_or(1.0)
        ),
        "Note: field 8 (requested processors) is N_opt, field 5 the processors given; \
         run times are exact (field 9 = field 4)"
            .to_string(),
    ];
    for c in RunClass::ALL {
        header.push(format!("Queue: {} {}", c.queue(), c.name()));
    }
    header.push("UnixStartTime: 0".to_string());
    header.push(format!("MaxProcs: {}", s.processors));
    header.push(format!("MaxJobs: {}", jobs.len()));
    let cfg = SimConfig::new(s.processors, s.policy);
    let start = jobs.first().map_or(0, |(j, _)| j.submit);
    let pb = progress::bar(jobs.len() as u64, "jobs");
    pb.set_message("simulating");
    let total = jobs.len();
    let result = run_moldable_jobs(cfg, start, jobs, forecast, |n| pb.set_position(n));
    pb.finish_and_clear();
    if !result.refused.is_empty() {
        bail!(
            "the simulator refused {} jobs (first: job {}: {})",
            result.refused.len(),
            result.refused[0].0.id,
            result.refused[0].1
        );
    }
    write_schedule(s.out, &header, &result, &moldings)?;
    let all = metrics(&result.outcomes, s.processors);
    let measured = mold_metrics(&result.outcomes, &moldings, s.processors);
    if s.json {
        let report = Report {
            policy: s.policy.to_string(),
            processors: s.processors,
            workload: WorkloadInfo {
                model: "lublin",
                jobs: s.jobs,
                seed: s.seed,
                alpha,
                speedup: speedup.name(),
                moldable_fraction: fraction,
                load_scale: s.load_scale.unwrap_or(1.0),
                forecast_workloads,
            },
            all_jobs: &all,
            measured: &measured,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    super::simulate::print_metrics(&all, &s.policy, s.processors, total);
    print_measured(&measured, alpha, speedup, fraction);
    Ok(())
}

fn write_schedule(
    out: &Path,
    header: &[String],
    result: &RunResult,
    moldings: &HashMap<i64, Molding>,
) -> Result<()> {
    let mut outcomes: Vec<_> = result.outcomes.iter().collect();
    outcomes.sort_by_key(|o| (o.job.submit, o.job.id));
    super::output::write_whole(out, |w| {
        swf::write_comments(&mut *w, header)?;
        for o in outcomes {
            let mut r = swf_jobs::outcome_record(o, None);
            if let Some(m) = moldings.get(&o.job.id) {
                r.req_procs = i64::from(m.n_opt);
            }
            writeln!(w, "{r}")?;
        }
        Ok(())
    })
}

fn print_measured(m: &MoldMetrics, alpha: f64, speedup: SpeedupModel, fraction: f64) {
    println!(
        "  Barsanti & Sodan's metrics (Lublin model, alpha {alpha}, {} speedup, {:.0}% moldable; \
         first and last {} jobs cut, {} measured):",
        speedup.name(),
        100.0 * fraction,
        m.cut_each,
        m.measured
    );
    println!(
        "    class   jobs  mean wait (h)  mean response (h)  mean BSl  shrunk  expanded  scaling  vs submitted"
    );
    let row = |name: &str, c: &ClassMetrics| {
        println!(
            "    {name:<6} {:>5}  {:>13.3}  {:>17.3}  {:>8.2}  {:>6}  {:>8}  {:>7.3}  {:>12.3}",
            c.jobs,
            c.mean_wait / 3600.0,
            c.mean_response / 3600.0,
            c.mean_bounded_slowdown,
            c.shrunk,
            c.expanded,
            c.mean_scaling,
            c.mean_scaling_submitted
        );
    };
    row("all", &m.overall);
    for c in RunClass::ALL {
        row(c.name(), m.class(c));
    }
    println!(
        "    utilization over the measured window ({:.1} days): {:.4}",
        m.window_s as f64 / 86_400.0,
        m.utilization
    );
}
