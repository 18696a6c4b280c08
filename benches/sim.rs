//! Simulator speed on the CTC-SP2 trace (77k jobs): a whole run per policy, and LOS
//! against its lookahead C. Reads the trace from `$QBETS_TRACES` (fails without it).
//!
//! `cargo bench --bench sim`; report jobs per second = 77 222 / median time.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use qbets::sim::los::LosVariant;
use qbets::sim::run::run_jobs;
use qbets::sim::swf_jobs::jobs_from_trace;
use qbets::sim::{Policy, SimConfig, SimJob};
use qbets::trace::swf;

fn ctc() -> (u32, Vec<SimJob>) {
    let dir = std::env::var("QBETS_TRACES").expect("set QBETS_TRACES to the traces directory");
    let path = PathBuf::from(dir).join("CTC-SP2-1996-3.1-cln.swf.gz");
    let trace = swf::read_file(&path).expect("CTC-SP2 trace");
    let procs = trace.header.max_procs.expect("MaxProcs") as u32;
    (procs, jobs_from_trace(&trace, procs, 1.0).jobs)
}

fn bench(c: &mut Criterion) {
    let (procs, jobs) = ctc();
    let mut g = c.benchmark_group("ctc_sp2_whole_trace");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(jobs.len() as u64));
    let los = |c| Policy::Los {
        lookahead: c,
        variant: LosVariant::BypassedFirst,
    };
    for policy in [
        Policy::Fcfs,
        Policy::Easy,
        Policy::Conservative,
        los(10),
        los(50),
        los(250),
    ] {
        g.bench_function(policy.to_string(), |b| {
            b.iter(|| {
                let r = run_jobs(
                    SimConfig::new(procs, policy),
                    0,
                    black_box(jobs.clone()),
                    |_| {},
                );
                black_box(r.outcomes.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
