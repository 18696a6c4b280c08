//! Integration tests: one binary.

mod sim;
