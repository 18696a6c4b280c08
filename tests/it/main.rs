//! Integration tests, one binary (STYLE.md): the store story on both backends, the
//! HTTP API in-process, the command-line import.

mod store_story;
mod support;
