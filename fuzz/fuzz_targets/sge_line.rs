//! Grid Engine accounting lines, and the service's check of what they read to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qbets::sources::sge::{parse_line, read_lines};

#[path = "common.rs"]
mod common;
use common::check;

fuzz_target!(|text: &str| {
    if let Ok(Some(r)) = parse_line(text) {
        check(&r, text);
    }
    let _ = read_lines(&common::numbered(text), 1_800_000_000);
});
