//! Regenerates the rare-event table `qbets::engine::rare::RUN_LENGTH` (qbets.md §2):
//! for each lag-1 autocorrelation ρ = 0.00, 0.05, …, 0.95, the smallest run of
//! consecutive values above the 0.95 quantile of a stationary Gaussian AR(1) series
//! whose probability at a given position is ≤ 1/8000.
//!
//! `cargo run --release --example rare_event_table [SAMPLES] [SEED]`
//! (defaults 100000000 and 2009, the values the checked-in table was made with).

use qbets::engine::rare;

fn main() {
    let mut args = std::env::args().skip(1);
    let samples: u64 = args
        .next()
        .map_or(100_000_000, |s| s.parse().expect("SAMPLES is an integer"));
    let seed: u64 = args
        .next()
        .map_or(2009, |s| s.parse().expect("SEED is an integer"));
    println!(
        "# rho  r  P(r-1 in a row)  P(r in a row)   (threshold {:.3e})",
        rare::RARE
    );
    let table = rare::derive_table(samples, seed);
    for (rho, r, before, at) in &table {
        println!("{rho:5.2} {r:3}  {before:.4e}  {at:.4e}");
    }
    let entries: Vec<String> = table.iter().map(|t| t.1.to_string()).collect();
    println!(
        "pub const RUN_LENGTH: [u32; {}] = [{}];",
        table.len(),
        entries.join(", ")
    );
    let same = table.iter().zip(rare::RUN_LENGTH).all(|(t, r)| t.1 == r);
    println!("# matches the checked-in table: {same}");
}
