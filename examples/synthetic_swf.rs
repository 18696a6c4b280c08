//! Writes a synthetic SWF trace of N jobs on stdout, for scaling measurements of
//! `qbets replay` (BENCHMARKS.md): one queue, a job every 0–120 s, four walltime
//! classes, exponential waits whose scale changes every 50 000 jobs (so trimming and
//! re-clustering have work to do). Seeded: the same N gives the same file.
//!
//! `cargo run --release --example synthetic_swf -- 1000000 > /tmp/synth-1m.swf`

use qbets::engine::rare::Rng;
use qbets::trace::swf::SwfRecord;
use std::io::{BufWriter, Write};

fn main() -> std::io::Result<()> {
    let n: i64 = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().expect("N is an integer"));
    let mut rng = Rng::new(2024);
    let mut out = BufWriter::new(std::io::stdout().lock());
    writeln!(out, "; synthetic trace for qbets benchmarks ({n} jobs)")?;
    let mut t = 0i64;
    for job in 1..=n {
        t += (rng.uniform() * 120.0) as i64;
        let class = (rng.uniform() * 4.0) as usize;
        let walltime = [900, 3600, 14_400, 43_200][class];
        let regime = 1.0 + ((job / 50_000) % 3) as f64;
        let scale = 300.0 * regime * (1 + class) as f64;
        let mut r = SwfRecord::unknown(job, t);
        r.wait = (-(1.0 - rng.uniform()).ln() * scale) as i64;
        r.run = walltime / 2;
        r.req_procs = 1 + (rng.uniform() * 64.0) as i64;
        r.alloc_procs = r.req_procs;
        r.req_time = walltime;
        r.status = 1;
        r.queue = 1;
        writeln!(out, "{r}")?;
    }
    out.flush()
}
