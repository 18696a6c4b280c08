//! A partition's limits as slurmrestd's `GET /slurm/{v}/partitions` gives them: the
//! most nodes one job may ask for, the longest time limit, and the nodes it has in all
//! (issue 22: a job beyond them never runs there, so it gets no bound). Pure: parsed
//! from the body, in the v0.0.38 shape (plain integers, `-1` for unlimited;
//! `max_time_limit` in minutes) and the v0.0.40–v0.0.42 shape (`nodes.total`,
//! `maximums.nodes`, `maximums.time` as `{set, infinite, number}` objects).

use serde_json::Value;

use super::model::ParseError;

/// A limit as a partition reports it: `None` when the answer does not carry the field
/// (nothing is known: what was stored stays), `Some(None)` when Slurm sets no limit
/// (unlimited, infinite, or not set), `Some(Some(n))` for a limit of `n`.
pub type Reported = Option<Option<i64>>;

/// One partition's limits, each as [`Reported`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLimits {
    /// The partition's name.
    pub name: String,
    /// Most nodes one job may ask for (`MaxNodes`).
    pub max_nodes: Reported,
    /// Longest time limit a job may ask for, seconds (`MaxTime`).
    pub max_time_s: Reported,
    /// Nodes in the partition (`TotalNodes`).
    pub total_nodes: Reported,
}

/// A limit as slurmrestd writes it: a plain integer (negative, or one of the
/// "no value"/"infinite" sentinels 0xFFFFFFFE/0xFFFFFFFF, for none) or a
/// `{set, infinite, number}` object. Only a positive, set, finite number is a limit;
/// a field that is missing, or of a shape not known, reports nothing.
fn limit(v: Option<&Value>) -> Reported {
    let n = match v? {
        Value::Number(n) => n.as_i64()?,
        Value::Object(o) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(false);
            let infinite = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            if !set || infinite {
                return Some(None);
            }
            o.get("number")?.as_i64()?
        }
        _ => return None,
    };
    Some((n > 0 && n < 0xFFFF_FFFE).then_some(n))
}

/// Reads the partitions of a `GET …/partitions` body (any supported version).
pub fn parse_partitions(body: &[u8]) -> Result<Vec<PartitionLimits>, ParseError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ParseError::new(format!("not JSON: {e}"), body))?;
    let list = v
        .get("partitions")
        .and_then(Value::as_array)
        .ok_or_else(|| ParseError::new("no `partitions` list", body))?;
    let mut out = Vec::with_capacity(list.len());
    for p in list {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ParseError::new("a partition without a `name`", body))?
            .to_string();
        let (max_nodes, minutes, total_nodes) = match p.get("maximums") {
            // v0.0.40 and later.
            Some(max) => (
                limit(max.get("nodes")),
                limit(max.get("time")),
                limit(p.get("nodes").and_then(|n| n.get("total"))),
            ),
            // v0.0.38.
            None => (
                limit(p.get("maximum_nodes_per_job")),
                limit(p.get("max_time_limit")),
                limit(p.get("total_nodes")),
            ),
        };
        out.push(PartitionLimits {
            name,
            max_nodes,
            max_time_s: minutes.map(|m| m.map(|m| m.saturating_mul(60))),
            total_nodes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v0_0_38_partitions_read_from_a_captured_response() {
        let body = include_bytes!("../../../tests/fixtures/slurm/v0.0.38/partitions.json");
        let p = parse_partitions(body).unwrap();
        assert_eq!(
            p,
            [
                PartitionLimits {
                    name: "debug".into(),
                    max_nodes: Some(None),
                    max_time_s: Some(Some(3_600)),
                    total_nodes: Some(Some(1)),
                },
                PartitionLimits {
                    name: "long".into(),
                    max_nodes: Some(None),
                    max_time_s: Some(Some(86_400)),
                    total_nodes: Some(Some(1)),
                },
            ]
        );
    }

    /// The v0.0.40+ shape as Slurm's OpenAPI description gives it (written here, not
    /// captured: the local Slurm 22.05 serves v0.0.38 only).
    #[test]
    fn newer_partitions_read_numbers_as_objects() {
        let body = br#"{"partitions": [
            {"name": "gpu", "nodes": {"configured": "g[1-8]", "total": 8},
             "maximums": {"nodes": {"set": true, "infinite": false, "number": 4},
                          "time": {"set": true, "infinite": false, "number": 120}}},
            {"name": "any", "nodes": {"total": 16},
             "maximums": {"nodes": {"set": false, "infinite": true, "number": 0},
                          "time": {"set": false, "infinite": true, "number": 0}}}
        ]}"#;
        let p = parse_partitions(body).unwrap();
        assert_eq!(
            (p[0].max_nodes, p[0].max_time_s, p[0].total_nodes),
            (Some(Some(4)), Some(Some(7_200)), Some(Some(8)))
        );
        assert_eq!(
            (p[1].max_nodes, p[1].max_time_s, p[1].total_nodes),
            (Some(None), Some(None), Some(Some(16)))
        );
        // A field the answer does not carry reports nothing (the stored limit stays).
        let sparse =
            parse_partitions(br#"{"partitions": [{"name": "x", "maximums": {}}]}"#).unwrap();
        assert_eq!(
            (
                sparse[0].max_nodes,
                sparse[0].max_time_s,
                sparse[0].total_nodes
            ),
            (None, None, None)
        );
        assert!(parse_partitions(b"{}").is_err());
        assert!(parse_partitions(br#"{"partitions": [{}]}"#).is_err());
    }
}
