//! The service's application layer: what the HTTP API and the command line share —
//! the application state ([`AppState`]) with the live predictors' seam, API tokens,
//! trace import, the clock and the metrics registry.
//!
//! May import: the store (generic over [`crate::store::Store`]), the trace reader, the
//! engine and the simulator (pure), tokio, tracing, prometheus-client, sha2/subtle/rand for tokens and user keys. No SQL and no HTTP
//! types: those stay in `src/store` and `src/http`.

pub mod advice;
pub mod clock;
pub mod demo;
mod feed;
pub mod import;
pub mod ingest;
pub mod metrics;
pub mod planning;
pub mod predictors;
pub mod reservations;
pub mod state;
pub mod store_gate;
pub mod tokens;
pub mod users;

pub use clock::{Clock, Every, FixedClock, SystemClock};
pub use predictors::Predictors;
pub use state::AppState;

/// Checks a site or queue name given by a person or a scheduler: 1 to 64 characters,
/// letters, digits, `.`, `_` or `-`, so it reads well in a URL and a shell.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(ok_char) {
        return Err(format!(
            "must be 1 to 64 letters, digits, '.', '_' or '-', got {name:?}"
        ));
    }
    // A URL path segment "." or ".." is removed by every client before the request is
    // sent (RFC 3986 §5.2.4), so such a site or queue could never be addressed.
    if name == "." || name == ".." {
        return Err(format!("cannot be {name:?}: a URL cannot name it"));
    }
    Ok(())
}

pub use crate::plan::format_unix;

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn names_are_path_segments_a_url_can_carry() {
        for ok in ["normal", "a.b", "...", "x-1_2", &"q".repeat(64)] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "ü", &"q".repeat(65)] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
