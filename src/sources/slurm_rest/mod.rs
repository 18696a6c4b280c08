//! Slurm's REST API (slurmrestd): the JSON model of its job records and an async client.
//!
//! - [`model`]: the one job type every API version is read into ([`SlurmJob`]), and the
//!   pure parsers of slurmrestd's responses (job list, single job, submit, cancel, error
//!   lists), for the v0.0.38 shapes (Slurm 22.05, Debian 12) and the v0.0.40–v0.0.42
//!   shapes (Slurm 23.11–24.x, numbers as `{"set", "infinite", "number"}` objects,
//!   `job_state` a list). Tested on responses captured from real slurmrestd daemons in
//!   `tests/fixtures/slurm/`.
//! - [`partitions`]: the partitions' limits (`GET …/partitions`), in both shapes.
//! - [`wire`]: the raw serde shapes behind the parsers, and the request bodies.
//! - [`client`]: the HTTP client (list, get, submit, cancel), authenticated with a JWT
//!   that never appears in `Debug` output, logs or errors.
//!
//! May import: serde, serde_json and std in `model` and `wire` (pure: no I/O, no clock);
//! reqwest and rustls in `client` only.

pub mod client;
pub mod model;
pub mod partitions;
pub mod wire;

pub use partitions::PartitionLimits;

pub use client::{ClientConfig, SlurmRestClient, SlurmRestError, Token, TokenSource};
pub use model::{
    JobList, JobState, JobSubmission, ParseError, RejectedJob, SlurmErrorEntry, SlurmJob,
    SubmittedJob,
};

use std::fmt;
use std::str::FromStr;

/// The slurmrestd API version a client speaks; it names the URL prefix
/// (`/slurm/v0.0.41/...`) and selects the request shapes.
///
/// Slurm 22.05 serves v0.0.36–v0.0.38; 23.02 v0.0.37–v0.0.39; 23.11 v0.0.38–v0.0.40;
/// 24.05 v0.0.39–v0.0.41; 24.11 v0.0.40–v0.0.42.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiVersion {
    /// v0.0.38: plain integers, `job_state` a string, environment a map.
    V0_0_38,
    /// v0.0.40: numbers as `{set, infinite, number}`, `job_state` a list.
    V0_0_40,
    /// v0.0.41: as v0.0.40 (a top-level submit `script` is deprecated; ours is in `job`).
    V0_0_41,
    /// v0.0.42: as v0.0.41; cancel answers with a per-job `status` list.
    V0_0_42,
}

impl ApiVersion {
    /// Every version this client speaks, oldest first.
    pub const ALL: [ApiVersion; 4] = [
        ApiVersion::V0_0_38,
        ApiVersion::V0_0_40,
        ApiVersion::V0_0_41,
        ApiVersion::V0_0_42,
    ];

    /// The version as it appears in URLs and configuration, e.g. `"v0.0.38"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V0_0_38 => "v0.0.38",
            ApiVersion::V0_0_40 => "v0.0.40",
            ApiVersion::V0_0_41 => "v0.0.41",
            ApiVersion::V0_0_42 => "v0.0.42",
        }
    }

    /// True for the versions whose numbers come as `{set, infinite, number}` objects.
    pub const fn structured_numbers(self) -> bool {
        !matches!(self, ApiVersion::V0_0_38)
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version string this client does not speak.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unsupported slurmrestd API version {given:?}; supported: v0.0.38, v0.0.40, v0.0.41, v0.0.42"
)]
pub struct UnsupportedApiVersion {
    /// What was asked for.
    pub given: String,
}

impl FromStr for ApiVersion {
    type Err = UnsupportedApiVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        ApiVersion::ALL
            .into_iter()
            .find(|v| &v.as_str()[1..] == t)
            .ok_or_else(|| UnsupportedApiVersion {
                given: s.to_owned(),
            })
    }
}

impl serde::Serialize for ApiVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ApiVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_through_their_names() {
        for v in ApiVersion::ALL {
            assert_eq!(v.as_str().parse::<ApiVersion>(), Ok(v));
            assert_eq!(v.to_string(), v.as_str());
        }
        assert_eq!("0.0.41".parse::<ApiVersion>(), Ok(ApiVersion::V0_0_41));
    }

    #[test]
    fn an_unknown_version_names_the_supported_ones() {
        let err = "v0.0.39".parse::<ApiVersion>().unwrap_err();
        assert_eq!(err.given, "v0.0.39");
        assert!(
            err.to_string()
                .contains("v0.0.38, v0.0.40, v0.0.41, v0.0.42"),
            "{err}"
        );
    }
}
