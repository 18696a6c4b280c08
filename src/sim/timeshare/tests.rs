//! The thesis's single-job tables and classification vectors, and the simulator's
//! invariants.

use super::*;

fn job(id: i64, arrival_s: f64, procs: u32, work_s: f64, g: f64, v: f64, pattern: Pattern) -> TsJob {
    TsJob {
        id,
        arrival_s,
        app: AppSpec {
            procs,
            work_s,
            granularity: g,
            variance: v,
            pattern,
        },
    }
}

#[test]
fn scratch_classification() {
    let mut p = Params::thesis(Algorithm::Fcs);
    p.processors = 4;
    let jobs = vec![
        job(1, 0.0, 2, 100.0, 0.5, 0.0, Pattern::AllToAll),
        job(2, 0.0, 2, 100.0, 0.1, 0.0, Pattern::AllToAll),
        job(3, 0.0, 3, 100.0, 0.1, 0.0, Pattern::AllToAll),
        job(4, 0.0, 1, 100.0, 0.5, 0.0, Pattern::None),
        job(5, 0.0, 4, 100.0, 0.5, 0.75, Pattern::AllToAll),
        job(6, 0.0, 4, 100.0, 2.5, 0.10, Pattern::AllToAll),
    ];
    let mut sim = TimeShareSim::new(p, jobs).unwrap();
    sim.step();
    println!("{:?}", sim.occupancy());
    while sim.step() {}
    for o in sim.outcomes() {
        println!("{} start {:.2} end {:.2} run {:.2} classes {:?}", o.id, o.start_s, o.end_s, o.runtime_s(), o.class_history);
    }
}
