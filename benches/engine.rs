//! Criterion benchmarks of the engine's hot path: one observation (a job start) plus
//! one bound query, on predictors holding histories of different sizes — the cost must
//! grow like log n, not n (no re-sorting per prediction).
//!
//! `cargo bench --bench engine`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use qbets::engine::rare::Rng;
use qbets::engine::{Config, Features, JobShape, QueuePredictor};

fn shape(rng: &mut Rng) -> JobShape {
    JobShape {
        nodes: 1 + (rng.uniform() * 128.0) as u64,
        walltime_s: [900, 3600, 14_400, 43_200][(rng.uniform() * 4.0) as usize],
    }
}

fn wait(rng: &mut Rng) -> i64 {
    (-(1.0 - rng.uniform()).ln() * 1800.0) as i64
}

/// A predictor that has seen `n` jobs.
fn warmed(config: Config, n: usize, rng: &mut Rng) -> (QueuePredictor, i64) {
    let mut p = QueuePredictor::new(config).expect("valid config");
    let mut t = 0i64;
    for _ in 0..n {
        t += 30;
        let s = shape(rng);
        p.observe_arrival(t, s);
        p.observe_start(t - wait(rng).min(t), t, s);
    }
    (p, t)
}

fn update_and_predict(c: &mut Criterion) {
    let mut group = c.benchmark_group("observe_start+bound");
    group.throughput(Throughput::Elements(1));
    for (label, config) in [
        (
            "plain",
            Config {
                features: Features::NONE,
                window_cap: usize::MAX,
                ..Config::default()
            },
        ),
        ("full", Config::default()),
    ] {
        for n in [10_000usize, 100_000, 1_000_000] {
            let mut rng = Rng::new(42);
            let (mut p, mut t) = warmed(config.clone(), n, &mut rng);
            group.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                b.iter(|| {
                    t += 30;
                    let s = shape(&mut rng);
                    let a = p.bound(t, s, 0.95, 0.95);
                    p.observe_arrival(t, s);
                    p.observe_start(t - wait(&mut rng).min(t), t, s);
                    a.bound_s
                })
            });
        }
    }
    group.finish();
}

fn deadline(c: &mut Criterion) {
    let mut rng = Rng::new(7);
    let (p, t) = warmed(Config::default(), 100_000, &mut rng);
    let s = shape(&mut rng);
    c.bench_function("probability (100k history)", |b| {
        b.iter(|| p.probability(t, s, 3600, 0.95).probability)
    });
}

/// The replay alone (trace already in memory): SDSC-BLUE's 243k jobs, every queue on
/// its own, plain and full, binomial method. Needs `$QBETS_TRACES`.
fn replay_blue(c: &mut Criterion) {
    use qbets::engine::JobRecord;
    use qbets::engine::replay::{ReplayOptions, replay};
    use std::collections::BTreeMap;
    let dir = std::env::var("QBETS_TRACES").expect("QBETS_TRACES names the traces directory");
    let t = qbets::trace::swf::read_file(
        std::path::Path::new(&dir)
            .join("SDSC-BLUE-2000-4.2-cln.swf.gz")
            .as_path(),
    )
    .expect("SDSC-BLUE trace");
    let mut queues: BTreeMap<i64, Vec<JobRecord>> = BTreeMap::new();
    for r in t.records.iter().filter(|r| r.wait().is_some()) {
        queues.entry(r.queue).or_default().push(JobRecord {
            submit: r.submit,
            start: r.start(),
            shape: JobShape {
                nodes: r.procs().unwrap_or(0) as u64,
                walltime_s: r.requested_time().unwrap_or(0) as u64,
            },
        });
    }
    let total: usize = queues.values().map(Vec::len).sum();
    let mut group = c.benchmark_group("replay SDSC-BLUE");
    group.throughput(Throughput::Elements(total as u64));
    group.sample_size(10);
    for (label, features) in [("plain", Features::NONE), ("full", Features::ALL)] {
        let opts = ReplayOptions {
            config: Config {
                features,
                ..Config::default()
            },
            ..ReplayOptions::default()
        };
        group.bench_function(label, |b| {
            b.iter(|| {
                queues
                    .values()
                    .map(|jobs| {
                        replay(jobs, &opts, &mut |_| {})
                            .expect("valid options")
                            .scores[0]
                            .correct
                    })
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, update_and_predict, deadline, replay_blue);
criterion_main!(benches);
