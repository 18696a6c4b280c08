//! Integration tests, one binary (STYLE.md): the store story on both backends, the
//! HTTP API in-process, the command-line import, the OpenAPI document.

mod http_api;
mod import_trace;
mod openapi;
mod predictors;
mod store_story;
mod support;
