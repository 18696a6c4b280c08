//! Slurm's REST API (slurmrestd): the JSON model of its job records and an async client.
//!
//! - [`model`]: the one job type every API version is read into ([`SlurmJob`]), and the
//!   pure parsers of slurmrestd's responses (job list, single job, submit, cancel, error
//!   lists), for the v0.0.38 shapes (Slurm 22.05, Debian 12) and the v0.0.40–v0.0.42
//!   shapes (Slurm 23.11–24.x, numbers as `{"set", "infinite", "number"}` objects,
//!   `job_state` a list), and v0.0.43–v0.0.45 (Slurm 25.05–26.05, the same job shapes).
//!   Tested on responses captured from real slurmrestd daemons in
//!   `tests/fixtures/slurm/`.
//! - [`partitions`]: the partitions' limits (`GET …/partitions`), in both shapes.
//! - [`discovery`]: which versions a slurmrestd offers, read from its `/openapi/v3`
//!   document, for `api_version = "auto"`.
//! - [`wire`]: the raw serde shapes behind the parsers, and the request bodies.
//! - [`client`]: the HTTP client (list, get, submit, cancel), authenticated with a JWT
//!   that never appears in `Debug` output, logs or errors.
//!
//! May import: serde, serde_json and std in `model` and `wire` (pure: no I/O, no clock);
//! reqwest and rustls in `client` only.

pub mod client;
pub mod discovery;
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
/// 24.05 v0.0.39–v0.0.41; 24.11 v0.0.40–v0.0.42; 25.05 v0.0.41–v0.0.43; 25.11
/// v0.0.42–v0.0.44; 26.05 v0.0.42–v0.0.45 (its successor drops v0.0.42).
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
    /// v0.0.43 (Slurm 25.05+): as v0.0.42 for the fields read and sent here.
    V0_0_43,
    /// v0.0.44 (Slurm 25.11+): as v0.0.43 for the fields read and sent here.
    V0_0_44,
    /// v0.0.45 (Slurm 26.05+): as v0.0.44 for the fields read and sent here.
    V0_0_45,
}

impl ApiVersion {
    /// Every version this client speaks, oldest first.
    pub const ALL: [ApiVersion; 7] = [
        ApiVersion::V0_0_38,
        ApiVersion::V0_0_40,
        ApiVersion::V0_0_41,
        ApiVersion::V0_0_42,
        ApiVersion::V0_0_43,
        ApiVersion::V0_0_44,
        ApiVersion::V0_0_45,
    ];

    /// The newest version this client speaks.
    pub const NEWEST: ApiVersion = ApiVersion::V0_0_45;

    /// The version as it appears in URLs and configuration, e.g. `"v0.0.38"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V0_0_38 => "v0.0.38",
            ApiVersion::V0_0_40 => "v0.0.40",
            ApiVersion::V0_0_41 => "v0.0.41",
            ApiVersion::V0_0_42 => "v0.0.42",
            ApiVersion::V0_0_43 => "v0.0.43",
            ApiVersion::V0_0_44 => "v0.0.44",
            ApiVersion::V0_0_45 => "v0.0.45",
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
    "unsupported slurmrestd API version {given:?}; supported: v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, v0.0.44, v0.0.45 (or \"auto\")"
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

/// The `api_version` of a configuration: one version, or `"auto"` (the default): the
/// newest version both this client and the daemon speak, read from the daemon's
/// `/openapi/v3` document at the first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ApiVersionSetting {
    /// Ask the daemon which versions it serves and speak the newest known here.
    #[default]
    Auto,
    /// Speak this version.
    Fixed(ApiVersion),
}

impl ApiVersionSetting {
    /// The version when fixed; `None` for `auto`.
    pub fn fixed(self) -> Option<ApiVersion> {
        match self {
            ApiVersionSetting::Auto => None,
            ApiVersionSetting::Fixed(v) => Some(v),
        }
    }
}

impl From<ApiVersion> for ApiVersionSetting {
    fn from(v: ApiVersion) -> Self {
        ApiVersionSetting::Fixed(v)
    }
}

impl fmt::Display for ApiVersionSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiVersionSetting::Auto => f.write_str("auto"),
            ApiVersionSetting::Fixed(v) => v.fmt(f),
        }
    }
}

impl FromStr for ApiVersionSetting {
    type Err = UnsupportedApiVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("auto") {
            Ok(ApiVersionSetting::Auto)
        } else {
            s.parse().map(ApiVersionSetting::Fixed)
        }
    }
}

impl serde::Serialize for ApiVersionSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ApiVersionSetting {
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
        assert_eq!(ApiVersion::NEWEST, *ApiVersion::ALL.last().unwrap());
    }

    #[test]
    fn a_setting_is_auto_or_a_version() {
        assert_eq!("auto".parse(), Ok(ApiVersionSetting::Auto));
        assert_eq!(ApiVersionSetting::default(), ApiVersionSetting::Auto);
        assert_eq!(
            "v0.0.45".parse(),
            Ok(ApiVersionSetting::Fixed(ApiVersion::V0_0_45))
        );
        for s in [ApiVersionSetting::Auto, ApiVersion::V0_0_43.into()] {
            assert_eq!(s.to_string().parse(), Ok(s));
        }
        assert!("v0.0.46".parse::<ApiVersionSetting>().is_err());
    }

    #[test]
    fn an_unknown_version_names_the_supported_ones() {
        let err = "v0.0.39".parse::<ApiVersion>().unwrap_err();
        assert_eq!(err.given, "v0.0.39");
        assert!(
            err.to_string()
                .contains("v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, v0.0.44, v0.0.45"),
            "{err}"
        );
    }
}
