//! The service's application layer: what the HTTP API and the command line share —
//! the application state ([`AppState`]) with the live predictors' seam, API tokens,
//! trace import, the clock and the metrics registry.
//!
//! May import: the store (generic over [`crate::store::Store`]), the trace reader,
//! tokio, tracing, prometheus-client, sha2/subtle/rand for tokens. No SQL and no HTTP
//! types: those stay in `src/store` and `src/http`.

pub mod clock;
pub mod import;
pub mod metrics;
pub mod predictors;
pub mod state;
pub mod tokens;

pub use clock::{Clock, FixedClock, SystemClock};
pub use predictors::Predictors;
pub use state::AppState;
