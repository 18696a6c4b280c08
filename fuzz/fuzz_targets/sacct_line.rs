//! `sacct --parsable2` output, line by line and whole, and the service's check of what
//! it reads to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qbets::sources::JobRecord;
use qbets::sources::sacct::{parse_line, read_output};

/// What every job read must hold, whatever the line.
fn check(j: &JobRecord, text: &str) {
    assert!(
        !j.job_id.is_empty() && !j.queue.is_empty(),
        "{text:?}: {j:?}"
    );
    assert!(j.submit_time > 0, "{text:?}: {j:?}");
    assert!(j.nodes.is_none_or(|n| n > 0), "{text:?}: {j:?}");
    assert!(j.walltime_s.is_none_or(|w| w > 0), "{text:?}: {j:?}");
}

fuzz_target!(|text: &str| {
    if let Ok(Some(r)) = parse_line(text) {
        check(&r, text);
        let _ = r.checked(1_800_000_000);
    }
    let _ = read_output(text, 1_800_000_000);
});
