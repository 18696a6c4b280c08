//! Which API versions a slurmrestd serves, read from the OpenAPI document it generates
//! (`GET /openapi/v3`), and the one `api_version = "auto"` speaks: the newest that both
//! the daemon and this client know.
//!
//! slurmrestd documents every loaded plugin's paths (`/slurm/v0.0.45/jobs/`,
//! `/slurmdb/v0.0.45/jobs/`, ...); the versions of the `/slurm/` paths are the ones
//! offered for the job list and submission. Only the `paths` keys and `info.version` are
//! read; the rest of the (megabytes of) document is skipped without being built.
//!
//! May import: serde, serde_json, std, and [`super::ApiVersion`]. Pure: no I/O, no clock.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::ApiVersion;
use super::model::ParseError;

/// What a daemon's OpenAPI document offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    /// Every version named by a `/slurm/vX/...` path, known here or not, oldest first
    /// (e.g. `["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]`).
    pub slurm: Vec<String>,
    /// Every version named by a `/slurmdb/vX/...` path, oldest first.
    pub slurmdb: Vec<String>,
    /// The Slurm release the document names (`info.x-slurm.release`, or `info.version`
    /// `Slurm-26.05.5`); `None` for 22.05, whose document names only its API version.
    pub release: Option<String>,
}

impl Offered {
    /// The newest version this client speaks among those offered for `/slurm/`.
    pub fn newest_known(&self) -> Option<ApiVersion> {
        newest(&self.slurm)
    }

    /// The newest version this client speaks among those offered for `/slurmdb/`.
    pub fn newest_known_slurmdb(&self) -> Option<ApiVersion> {
        newest(&self.slurmdb)
    }
}

fn newest(names: &[String]) -> Option<ApiVersion> {
    names.iter().filter_map(|v| v.parse().ok()).max()
}

#[derive(Deserialize)]
struct RawDoc {
    #[serde(default)]
    paths: Option<BTreeMap<String, IgnoredAny>>,
    #[serde(default)]
    info: Option<RawInfo>,
}

#[derive(Deserialize)]
struct RawInfo {
    /// `Slurm-26.05.5` from 23.x on; 22.05 writes its API version here (`0.0.38`).
    #[serde(default)]
    version: Option<String>,
    #[serde(default, rename = "x-slurm")]
    x_slurm: Option<RawXSlurm>,
}

#[derive(Deserialize)]
struct RawXSlurm {
    #[serde(default)]
    release: Option<String>,
}

/// The `(major, minor, patch)` of a version segment such as `v0.0.45`.
fn version_key(segment: &str) -> Option<(u32, u32, u32)> {
    let mut parts = segment.strip_prefix('v')?.split('.');
    let key = (
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    );
    parts.next().is_none().then_some(key)
}

/// Reads the versions offered by an OpenAPI document; an error when the body is not
/// one, or offers no `/slurm/` version at all.
pub fn parse_openapi(body: &[u8]) -> Result<Offered, ParseError> {
    let doc: RawDoc = serde_json::from_slice(body).map_err(|e| ParseError {
        reason: format!("not an OpenAPI document: {e}"),
        snippet: super::model::snippet(body),
    })?;
    let paths = doc.paths.ok_or_else(|| ParseError {
        reason: "OpenAPI document without \"paths\"".into(),
        snippet: super::model::snippet(body),
    })?;
    let mut slurm = BTreeMap::new();
    let mut slurmdb = BTreeMap::new();
    for path in paths.keys() {
        let mut segs = path.split('/').filter(|s| !s.is_empty());
        let (Some(plugin), Some(version)) = (segs.next(), segs.next()) else {
            continue;
        };
        let Some(key) = version_key(version) else {
            continue;
        };
        match plugin {
            "slurm" => slurm.insert(key, version.to_owned()),
            "slurmdb" => slurmdb.insert(key, version.to_owned()),
            _ => None,
        };
    }
    if slurm.is_empty() {
        return Err(ParseError {
            reason: "the OpenAPI document names no /slurm/vX/ path (is the slurmctld plugin \
                     loaded?)"
                .into(),
            snippet: super::model::snippet(body),
        });
    }
    let release = doc
        .info
        .and_then(|i| {
            let from_version = i
                .version
                .and_then(|v| v.strip_prefix("Slurm-").map(str::to_owned));
            i.x_slurm.and_then(|x| x.release).or(from_version)
        })
        .filter(|v| !v.is_empty());
    Ok(Offered {
        slurm: slurm.into_values().collect(),
        slurmdb: slurmdb.into_values().collect(),
        release,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_known_version_is_chosen() {
        let body = br#"{"openapi":"3.0.2","info":{"version":"Slurm-26.05.5"},"paths":{
            "/slurm/v0.0.42/jobs/":{}, "/slurm/v0.0.45/jobs/":{}, "/slurm/v0.0.43/ping/":{},
            "/slurm/v0.0.46/jobs/":{}, "/slurmdb/v0.0.44/jobs/":{}, "/openapi/v3":{},
            "/slurm/vX/jobs":{}, "/":{}}}"#;
        let o = parse_openapi(body).unwrap();
        assert_eq!(o.slurm, ["v0.0.42", "v0.0.43", "v0.0.45", "v0.0.46"]);
        assert_eq!(o.slurmdb, ["v0.0.44"]);
        assert_eq!(o.release.as_deref(), Some("26.05.5"));
        assert_eq!(o.newest_known(), Some(ApiVersion::V0_0_45));
        assert_eq!(o.newest_known_slurmdb(), Some(ApiVersion::V0_0_44));
    }

    #[test]
    fn an_api_version_in_info_is_no_release() {
        let o =
            parse_openapi(br#"{"info":{"version":"0.0.38"},"paths":{"/slurm/v0.0.38/jobs":{}}}"#)
                .unwrap();
        assert_eq!(
            (o.newest_known(), o.release),
            (Some(ApiVersion::V0_0_38), None)
        );
    }

    #[test]
    fn versions_sort_by_number_not_by_text() {
        let o =
            parse_openapi(br#"{"paths":{"/slurm/v0.0.9/a":{},"/slurm/v0.0.10/a":{}}}"#).unwrap();
        assert_eq!(o.slurm, ["v0.0.9", "v0.0.10"]);
        assert_eq!(o.newest_known(), None, "neither is spoken here");
    }

    proptest::proptest! {
        /// Any path keys (versions of any shape, plugins no Slurm has, damaged text)
        /// give the offered versions or an error, never a panic; what auto chooses is
        /// always among what was offered.
        #[test]
        fn hostile_documents_never_panic(
            paths in proptest::collection::vec("(/[a-z]{0,8}){0,2}/v?[0-9.]{0,12}(/[a-z]{0,5})?", 0..8),
            cut in 0usize..400,
        ) {
            let keys: Vec<String> = paths.iter().map(|p| format!("{p:?}:{{}}")).collect();
            let body = format!(r#"{{"info":{{"version":"Slurm-x"}},"paths":{{{}}}}}"#, keys.join(","));
            for bytes in [body.as_bytes(), &body.as_bytes()[..body.len().min(cut)]] {
                if let Ok(o) = parse_openapi(bytes) {
                    proptest::prop_assert!(!o.slurm.is_empty());
                    if let Some(v) = o.newest_known() {
                        proptest::prop_assert!(o.slurm.iter().any(|s| s == v.as_str()));
                    }
                }
            }
        }
    }

    #[test]
    fn a_document_without_slurm_paths_is_an_error_that_says_so() {
        let e = parse_openapi(br#"{"paths":{"/slurmdb/v0.0.45/jobs/":{}}}"#).unwrap_err();
        assert!(e.reason.contains("no /slurm/vX/ path"), "{e}");
        let e = parse_openapi(b"<html>").unwrap_err();
        assert!(e.reason.starts_with("not an OpenAPI document"), "{e}");
        let e = parse_openapi(b"{}").unwrap_err();
        assert!(e.reason.contains("without \"paths\""), "{e}");
    }
}
