//! SWF: a whole file (header comments, job lines, bad UTF-8) through the reader, and
//! each line through the line parser. A record that reads has its times in range and
//! prints to a line that reads back to it (reals to the two decimals the archive writes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use qbets::trace::swf::{MAX_TIME_S, SwfRecord, SwfTrace};

fn check(r: &SwfRecord) {
    assert!(r.submit >= 0, "{r:?}");
    for t in [r.submit, r.wait, r.run, r.req_time, r.think] {
        assert!(t <= MAX_TIME_S, "{r:?}");
    }
    let _ = (r.start(), r.procs(), r.requested_time());
    let back = SwfRecord::parse(&r.to_string(), r.line)
        .unwrap_or_else(|e| panic!("{r:?} printed as {r} does not read: {e}"));
    let near = |a: f64, b: f64| (a - b).abs() <= 0.005 + a.abs() * 1e-15;
    assert!(
        near(back.avg_cpu, r.avg_cpu)
            && near(back.used_mem, r.used_mem)
            && near(back.req_mem, r.req_mem),
        "{r:?} printed as {r}"
    );
    let ints = |r: &SwfRecord| {
        [
            r.job,
            r.submit,
            r.wait,
            r.run,
            r.alloc_procs,
            r.req_procs,
            r.req_time,
            r.status,
            r.user,
            r.group,
            r.executable,
            r.queue,
            r.partition,
            r.preceding,
            r.think,
        ]
    };
    assert_eq!(ints(&back), ints(r), "{r:?} printed as {r}");
}

fuzz_target!(|data: &[u8]| {
    let trace = SwfTrace::read(data).expect("reading from memory cannot fail");
    if let Some(start) = trace.header.unix_start_time {
        assert!((-MAX_TIME_S..=MAX_TIME_S).contains(&start));
    }
    let field = trace.queue_field();
    for r in &trace.records {
        check(r);
        let _ = trace.queue_name(field, trace.queue_of(field, r));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for (i, line) in text.lines().enumerate() {
            if let Ok(r) = SwfRecord::parse(line, i as u64 + 1) {
                check(&r);
            }
        }
    }
});
