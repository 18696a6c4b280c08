//! Criterion benchmarks of the engine's hot path: one observation (a job start) plus
//! one bound query, on predictors holding histories of different sizes — the cost must
//! grow like log n, not n (no re-sorting per prediction).
//!
//! `cargo bench --bench engine`

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// A synthetic queue: a job every 30 s with an exponential wait (mean 30 min), fed to
/// the predictor as it would be live — arrival at submit, start at submit + wait — so
/// about 60 jobs are pending at any time.
struct Queue {
    p: QueuePredictor,
    t: i64,
    /// Pending jobs by start time: (start, submit, nodes, walltime).
    pending: BinaryHeap<Reverse<(i64, i64, u64, u64)>>,
}

impl Queue {
    fn new(config: Config) -> Self {
        Self {
            p: QueuePredictor::new(config).expect("valid config"),
            t: 0,
            pending: BinaryHeap::new(),
        }
    }

    /// One step: the starts due by now, then one arrival (after its bound query).
    fn step(&mut self, rng: &mut Rng) -> Option<u64> {
        self.t += 30;
        while let Some(&Reverse((start, submit, nodes, walltime_s))) = self.pending.peek() {
            if start > self.t {
                break;
            }
            self.pending.pop();
            self.p
                .observe_start(submit, start, JobShape { nodes, walltime_s });
        }
        let s = shape(rng);
        let a = self.p.bound(self.t, s, 0.95, 0.95);
        self.p.observe_arrival(self.t, s);
        self.pending
            .push(Reverse((self.t + wait(rng), self.t, s.nodes, s.walltime_s)));
        a.bound_s
    }
}

/// A queue whose predictor has seen `n` jobs.
fn warmed(config: Config, n: usize, rng: &mut Rng) -> Queue {
    let mut q = Queue::new(config);
    for _ in 0..n {
        q.step(rng);
    }
    q
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
            let mut q = warmed(config.clone(), n, &mut rng);
            group.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                b.iter(|| q.step(&mut rng))
            });
        }
    }
    group.finish();
}

/// The full system without availability inference, so that a query computes an
/// answer whatever the synthetic queue's state at its last instant.
fn always_up() -> Config {
    Config {
        features: Features {
            avail: false,
            ..Features::ALL
        },
        ..Config::default()
    }
}

fn deadline(c: &mut Criterion) {
    let mut rng = Rng::new(7);
    let q = warmed(always_up(), 100_000, &mut rng);
    let s = shape(&mut rng);
    assert!(q.p.probability(q.t, s, 3600, 0.95).probability.is_some());
    // Deadlines 60 s apart in turn: each counts a different m, so no answer is the
    // one computed just before (which a trajectory reuses).
    let mut k = 0u64;
    c.bench_function("probability (100k history)", |b| {
        b.iter(|| {
            k = (k + 1) % 64;
            q.p.probability(q.t, s, 600 + 60 * k, 0.95).probability
        })
    });
}

/// A VARQ plan at its largest (100,000 candidate submission times, 30 s apart: about
/// 35 days ahead) on a queue with a 100k-job history: the work one plan request does,
/// and, per point, what a CO-VARQ plan's budget of 10,000,000 points costs.
fn varq_plan(c: &mut Criterion) {
    use qbets::plan::varq::{self, MAX_POINTS, Mode, VarqRequest};
    use qbets::service::planning::PredictorOracle;
    let mut rng = Rng::new(11);
    let q = warmed(always_up(), 100_000, &mut rng);
    let oracle = PredictorOracle::new(q.p.clone(), q.t);
    let req = VarqRequest {
        nodes: 16,
        walltime_s: 3600,
        start_at: q.t + MAX_POINTS as i64 * 30,
        min_probability: 0.9,
        confidence: 0.95,
        mode: Mode::Latest,
        step_s: 30,
    };
    let points = varq::plan(&req, q.t, &oracle)
        .expect("a valid request")
        .trajectory
        .len();
    assert_eq!(points as u64, MAX_POINTS);
    let mut group = c.benchmark_group("varq plan");
    group.throughput(Throughput::Elements(points as u64));
    group.sample_size(20);
    group.bench_function("100k points (100k history)", |b| {
        b.iter(|| varq::plan(&req, q.t, &oracle).map(|r| r.trajectory.len()))
    });
    group.finish();
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
            user: None,
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

criterion_group!(
    benches,
    update_and_predict,
    deadline,
    varq_plan,
    replay_blue
);
criterion_main!(benches);
