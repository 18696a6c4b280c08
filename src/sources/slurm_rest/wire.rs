//! The raw JSON shapes slurmrestd speaks, for every supported API version, and the
//! request bodies the client sends.
//!
//! One set of raw types reads both generations: the v0.0.38 shapes (plain integers,
//! `null` or Slurm's `NO_VAL`/`INFINITE` sentinels for "unset", `job_state` a string) and
//! the v0.0.40+ shapes (`{"set", "infinite", "number"}` objects, `job_state` a list).
//! Only the fields the model needs are declared; serde skips the rest without building
//! them, which keeps a large job list cheap to read.
//!
//! May import: serde, serde_json, std. Pure: no I/O, no clock.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::ApiVersion;
use super::model::JobSubmission;

/// Slurm's "no value" for 32-bit fields (`NO_VAL`), as v0.0.38 prints it.
const NO_VAL: i64 = 0xffff_fffe;
/// Slurm's "infinite" for 32-bit fields (`INFINITE`).
const INFINITE: i64 = 0xffff_ffff;
/// The 64-bit sentinels (`NO_VAL64`, `INFINITE64`).
const NO_VAL64: u64 = 0xffff_ffff_ffff_fffe;
const INFINITE64: u64 = 0xffff_ffff_ffff_ffff;

/// A number as slurmrestd writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawNumber {
    /// `null`, `{"set": false}`, or a 64-bit `NO_VAL64`.
    Unset,
    /// `{"infinite": true}` or a 64-bit `INFINITE64`.
    Infinite,
    /// A value. 32-bit sentinels are kept here: only the field knows its width; see
    /// [`RawNumber::u32_field`].
    Value(i64),
}

impl RawNumber {
    /// The value of a 32-bit Slurm field (time limit, node and CPU counts), with v0.0.38's
    /// plain `NO_VAL` (4294967294) and `INFINITE` (4294967295) read as what they mean.
    pub fn u32_field(self) -> RawNumber {
        match self {
            RawNumber::Value(NO_VAL) => RawNumber::Unset,
            RawNumber::Value(INFINITE) => RawNumber::Infinite,
            other => other,
        }
    }

    /// The value when set and finite.
    pub fn value(self) -> Option<i64> {
        match self {
            RawNumber::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for RawNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawNumberVisitor)
    }
}

struct RawNumberVisitor;

impl<'de> Visitor<'de> for RawNumberVisitor {
    type Value = RawNumber;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer, null, or an object {\"set\", \"infinite\", \"number\"}")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawNumber, E> {
        Ok(RawNumber::Value(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawNumber, E> {
        match v {
            NO_VAL64 => Ok(RawNumber::Unset),
            INFINITE64 => Ok(RawNumber::Infinite),
            _ => i64::try_from(v)
                .map(RawNumber::Value)
                .map_err(|_| E::custom(format!("number {v} out of range"))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawNumber, E> {
        // Some fields are doubles on the wire (`"number": 1.0`); an integral one is fine.
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            // Integral and well inside i64's range (checked above): the cast is exact.
            Ok(RawNumber::Value(v as i64))
        } else {
            Err(E::custom(format!("expected an integer, got {v}")))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<RawNumber, E> {
        Ok(RawNumber::Unset)
    }

    fn visit_none<E: de::Error>(self) -> Result<RawNumber, E> {
        Ok(RawNumber::Unset)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawNumber, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNumber, A::Error> {
        let (mut set, mut infinite, mut number) = (None::<bool>, None::<bool>, None::<RawNumber>);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "set" => set = Some(map.next_value()?),
                "infinite" => infinite = Some(map.next_value()?),
                "number" => number = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if infinite == Some(true) {
            return Ok(RawNumber::Infinite);
        }
        if set == Some(false) {
            return Ok(RawNumber::Unset);
        }
        match number {
            Some(n) => Ok(n),
            None => Err(de::Error::custom("number object without \"number\"")),
        }
    }
}

/// `job_state`: a string in v0.0.38, a list of state names and flags from v0.0.40 on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawState(pub Vec<String>);

impl<'de> Deserialize<'de> for RawState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawState;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a job state name or a list of them")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawState, E> {
                Ok(RawState(vec![s.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawState, A::Error> {
                let mut v = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    v.push(s);
                }
                Ok(RawState(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// One job of a job list or single-job response: the fields the model reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawJob {
    pub job_id: Option<RawNumber>,
    pub name: Option<String>,
    pub partition: Option<String>,
    pub job_state: Option<RawState>,
    pub state_reason: Option<String>,
    pub user_name: Option<String>,
    pub user_id: Option<RawNumber>,
    pub submit_time: Option<RawNumber>,
    pub eligible_time: Option<RawNumber>,
    pub start_time: Option<RawNumber>,
    pub end_time: Option<RawNumber>,
    pub time_limit: Option<RawNumber>,
    pub node_count: Option<RawNumber>,
    pub cpus: Option<RawNumber>,
    /// The allocated node list; empty while pending and for jobs that never ran.
    pub nodes: Option<String>,
}

/// An entry of a response's `errors` list. v0.0.38 names the number `error_number` on
/// most endpoints and `error_code` on submit.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawErrorEntry {
    #[serde(alias = "error_code")]
    pub error_number: Option<RawNumber>,
    pub error: Option<String>,
    pub description: Option<String>,
    pub source: Option<String>,
}

/// An entry of a response's `warnings` list (v0.0.40+).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawWarning {
    pub description: Option<String>,
    pub source: Option<String>,
}

/// `meta.Slurm` (v0.0.38) or `meta.slurm` (v0.0.40+).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawMeta {
    #[serde(alias = "Slurm")]
    pub slurm: Option<RawSlurmMeta>,
}

/// The Slurm release that answered.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawSlurmMeta {
    pub release: Option<String>,
}

/// What every slurmrestd response carries besides its payload.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawEnvelope {
    pub errors: Vec<RawErrorEntry>,
    pub warnings: Vec<RawWarning>,
    pub meta: Option<RawMeta>,
}

/// `GET .../jobs` and `GET .../job/{id}`. Each job is kept as its raw text so that one
/// malformed job is set aside with its reason instead of failing the whole list.
#[derive(Debug, Deserialize)]
pub struct RawJobsResponse<'a> {
    #[serde(borrow, default)]
    pub jobs: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    pub last_update: Option<RawNumber>,
    #[serde(default)]
    pub warnings: Vec<RawWarning>,
    #[serde(default)]
    pub meta: Option<RawMeta>,
}

/// `POST .../job/submit`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawSubmitResponse {
    pub job_id: Option<RawNumber>,
    pub job_submit_user_msg: Option<String>,
}

/// `DELETE .../job/{id}`; v0.0.42 adds a per-job `status` list.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawCancelResponse {
    pub status: Vec<RawCancelStatus>,
}

/// One entry of v0.0.42's cancel `status`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawCancelStatus {
    pub error: Option<RawCancelError>,
    pub job_id: Option<RawNumber>,
    pub step_id: Option<String>,
}

/// The error of a v0.0.42 cancel status entry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RawCancelError {
    pub string: Option<String>,
    pub code: Option<RawNumber>,
    pub message: Option<String>,
}

/// The request body of `POST /slurm/{version}/job/submit` for `sub`, in the shape that
/// version expects. The time limit goes out in whole minutes, rounded up so the job is
/// never killed before the seconds asked for. An empty environment gets a minimal
/// `PATH`, because slurmrestd refuses batch jobs without one.
///
/// The node count goes out as `"nodes": "N"` in every version: Slurm 22.05's
/// slurmrestd (v0.0.38) ran jobs sent with `"nodes": [N, N]` or `"minimum_nodes": N` on
/// one node, and honoured only the string (`../shared/spec/slurm-local.md`, *Node counts
/// on submission*). v0.0.40–v0.0.42 document `nodes` as the same string (a count or a
/// range) beside `minimum_nodes`/`maximum_nodes`, so those carry all three, equal.
pub fn submit_body(version: ApiVersion, sub: &JobSubmission) -> Value {
    let minutes = sub.time_limit_s.div_ceil(60);
    let mut env: BTreeMap<&str, &str> = sub
        .environment
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if env.is_empty() {
        env.insert("PATH", "/usr/local/bin:/usr/bin:/bin");
    }
    let mut job = serde_json::Map::new();
    job.insert("name".into(), json!(sub.name));
    if let Some(p) = &sub.partition {
        job.insert("partition".into(), json!(p));
    }
    job.insert("current_working_directory".into(), json!(sub.working_dir));
    if let Some(c) = sub.cpus_per_task {
        job.insert("cpus_per_task".into(), json!(c));
    }
    match version {
        ApiVersion::V0_0_38 => {
            job.insert("time_limit".into(), json!(minutes));
            job.insert("nodes".into(), json!(sub.nodes.to_string()));
            job.insert("environment".into(), json!(env));
            json!({ "job": job, "script": sub.script })
        }
        ApiVersion::V0_0_40
        | ApiVersion::V0_0_41
        | ApiVersion::V0_0_42
        | ApiVersion::V0_0_43
        | ApiVersion::V0_0_44
        | ApiVersion::V0_0_45 => {
            job.insert(
                "time_limit".into(),
                json!({ "set": true, "infinite": false, "number": minutes }),
            );
            job.insert("nodes".into(), json!(sub.nodes.to_string()));
            job.insert("minimum_nodes".into(), json!(sub.nodes));
            job.insert("maximum_nodes".into(), json!(sub.nodes));
            let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            job.insert("environment".into(), json!(env));
            job.insert("script".into(), json!(sub.script));
            json!({ "job": job })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> RawNumber {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn numbers_read_in_every_shape() {
        assert_eq!(num("1795238823"), RawNumber::Value(1_795_238_823));
        assert_eq!(num("null"), RawNumber::Unset);
        assert_eq!(
            num(r#"{"set":true,"infinite":false,"number":5}"#),
            RawNumber::Value(5)
        );
        assert_eq!(
            num(r#"{"set":false,"infinite":false,"number":0}"#),
            RawNumber::Unset
        );
        assert_eq!(
            num(r#"{"set":false,"infinite":true,"number":0}"#),
            RawNumber::Infinite
        );
        assert_eq!(
            num(r#"{"set":true,"infinite":false,"number":1.0}"#),
            RawNumber::Value(1)
        );
        assert_eq!(num("18446744073709551614"), RawNumber::Unset);
        assert_eq!(num("18446744073709551615"), RawNumber::Infinite);
        assert_eq!(num("4294967294").u32_field(), RawNumber::Unset);
        assert_eq!(num("4294967295").u32_field(), RawNumber::Infinite);
        assert_eq!(num("4294967295").value(), Some(4_294_967_295));
    }

    #[test]
    fn malformed_numbers_are_errors_not_guesses() {
        assert!(serde_json::from_str::<RawNumber>("1.5").is_err());
        assert!(serde_json::from_str::<RawNumber>(r#""12""#).is_err());
        assert!(serde_json::from_str::<RawNumber>(r#"{"set":true}"#).is_err());
    }

    #[test]
    fn job_state_reads_as_string_or_list() {
        let s: RawState = serde_json::from_str(r#""PENDING""#).unwrap();
        assert_eq!(s.0, ["PENDING"]);
        let s: RawState = serde_json::from_str(r#"["COMPLETED","COMPLETING"]"#).unwrap();
        assert_eq!(s.0, ["COMPLETED", "COMPLETING"]);
    }

    fn submission() -> JobSubmission {
        JobSubmission {
            name: "qbets-r42".into(),
            partition: Some("long".into()),
            nodes: 2,
            time_limit_s: 6330,
            script: "#!/bin/sh\nsleep 1\n".into(),
            working_dir: "/tmp".into(),
            environment: vec![("QBETS_RESERVATION".into(), "r42".into())],
            cpus_per_task: None,
        }
    }

    #[test]
    fn v0_0_38_body_has_integers_a_node_count_string_and_an_environment_map() {
        let b = submit_body(ApiVersion::V0_0_38, &submission());
        assert_eq!(b["script"], "#!/bin/sh\nsleep 1\n");
        assert_eq!(
            b["job"]["time_limit"], 106,
            "6330 s is 105.5 min, rounded up"
        );
        // A string: Slurm 22.05 ran `[2, 2]` (and `minimum_nodes`) on one node.
        assert_eq!(b["job"]["nodes"], "2");
        assert!(b["job"].get("minimum_nodes").is_none());
        assert_eq!(b["job"]["partition"], "long");
        assert_eq!(b["job"]["environment"], json!({"QBETS_RESERVATION": "r42"}));
        assert!(b["job"].get("cpus_per_task").is_none());
    }

    #[test]
    fn newer_bodies_have_number_objects_node_bounds_and_an_environment_list() {
        for v in ApiVersion::ALL
            .into_iter()
            .filter(|v| v.structured_numbers())
        {
            let mut s = submission();
            s.environment.clear();
            s.cpus_per_task = Some(4);
            let b = submit_body(v, &s);
            assert!(b.get("script").is_none(), "{v}: the script goes inside job");
            assert_eq!(b["job"]["script"], "#!/bin/sh\nsleep 1\n");
            assert_eq!(
                b["job"]["time_limit"],
                json!({"set": true, "infinite": false, "number": 106})
            );
            assert_eq!(b["job"]["nodes"], "2");
            assert_eq!(b["job"]["minimum_nodes"], 2);
            assert_eq!(b["job"]["maximum_nodes"], 2);
            assert_eq!(b["job"]["cpus_per_task"], 4);
            assert_eq!(
                b["job"]["environment"],
                json!(["PATH=/usr/local/bin:/usr/bin:/bin"])
            );
        }
    }
}
