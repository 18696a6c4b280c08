//! Slurm- and PBS-style durations (`[D-]HH:MM:SS`, `MM:SS`, seconds).
#![no_main]

use libfuzzer_sys::fuzz_target;
use qbets::sources::parse_duration;

fuzz_target!(|text: &str| {
    if let Some(s) = parse_duration(text) {
        assert!(s >= 0, "{text:?} read as {s}");
    }
});
