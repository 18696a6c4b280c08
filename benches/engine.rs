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

criterion_group!(benches, update_and_predict, deadline);
criterion_main!(benches);
