//! `sacct --parsable2` output, line by line and whole, and the service's check of what
//! it reads to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qbets::sources::sacct::{parse_line, read_output};

#[path = "common.rs"]
mod common;
use common::check;

fuzz_target!(|text: &str| {
    if let Ok(Some(r)) = parse_line(text) {
        check(&r, text);
    }
    let _ = read_output(text, 1_800_000_000);
});
