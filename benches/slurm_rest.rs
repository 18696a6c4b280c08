//! How fast the Slurm REST model reads a big site's job list: the captured v0.0.38 and
//! v0.0.41 jobs of `tests/fixtures/slurm/`, repeated (with fresh job ids) to 10,000 jobs
//! per response, read through the same function the client uses.
//!
//! `cargo bench --bench slurm_rest`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use qbets::sources::slurm_rest::ApiVersion;
use qbets::sources::slurm_rest::client::interpret_jobs;
use serde_json::Value;

const JOBS: usize = 10_000;

/// A `GET /jobs` body of `JOBS` jobs, made from the version's captured jobs.
fn big_list(v: ApiVersion) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/slurm/{v}/jobs.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let captured = doc["jobs"].as_array().unwrap().clone();
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| {
            let mut j = captured[i % captured.len()].clone();
            j["job_id"] = Value::from(i + 1);
            j
        })
        .collect();
    doc["jobs"] = Value::Array(jobs);
    serde_json::to_vec_pretty(&doc).unwrap()
}

fn read_job_lists(c: &mut Criterion) {
    let mut g = c.benchmark_group("slurm_rest_job_list");
    g.sample_size(10);
    for v in [ApiVersion::V0_0_38, ApiVersion::V0_0_41] {
        let body = big_list(v);
        eprintln!("{v}: {JOBS} jobs, {:.1} MB", body.len() as f64 / 1e6);
        g.throughput(Throughput::Elements(JOBS as u64));
        g.bench_function(v.as_str(), |b| {
            b.iter(|| {
                let list = interpret_jobs("GET /jobs", "root", 200, black_box(&body)).unwrap();
                assert_eq!(list.jobs.len(), JOBS);
                list
            })
        });
    }
    g.finish();
}

criterion_group!(benches, read_job_lists);
criterion_main!(benches);
