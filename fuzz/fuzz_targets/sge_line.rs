//! Grid Engine accounting lines, and the service's check of what they read to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qbets::sources::JobRecord;
use qbets::sources::sge::{parse_line, read_lines};

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
    let lines: Vec<(u64, String)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.to_string()))
        .collect();
    let _ = read_lines(&lines, 1_800_000_000);
});
