//! Job records pushed by sites, the records kept aside, and the sources' health:
//! `POST /v1/sites/{site}/jobs`, `GET /v1/sites/{site}/rejects`,
//! `GET /v1/sites/{site}/ingest`.
//!
//! A push is a JSON array of records, an object `{"jobs": [...]}`, or NDJSON (one record
//! per line, `Content-Type: application/x-ndjson`). Each record is read and checked on
//! its own: a bad one is kept aside as a reject (raw text and reason, listed by
//! `…/rejects`) and named in the answer, and the others are stored. Only a body that is
//! not JSON at all is refused as a whole.

use axum::Router;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::routing::{get, post};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};

use super::auth::{Authorized, Ingest, ReadAccess};
use super::error::{ApiError, ApiResult, Problem};
use super::params::{
    ApiPath, ApiQuery, Fields, field_at_fault, format_time, object_only, positive, timestamp,
};
use super::sites::{DurationIn, find_site, job_state_schema};
use crate::service::AppState;
use crate::service::ingest::{future_reason, ingest};
use crate::sources::{JobRecord, RecordReject};
use crate::store::{JobState, SiteKind, SourceProgress, Store};

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/v1/sites/{site}/jobs", post(post_jobs::<S>))
        .route("/v1/sites/{site}/rejects", get(list_rejects::<S>))
        .route("/v1/sites/{site}/ingest", get(get_ingest::<S>))
}

/// The source name pushes are recorded under (in rejects and health).
pub const PUSH_SOURCE: &str = "push";

/// One job record from a scheduler.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct JobIn {
    /// The scheduler's job id (unique per site).
    #[schema(min_length = 1, max_length = 128)]
    pub job_id: String,
    /// The queue's name (created when new).
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: String,
    /// When the job was submitted.
    #[schema(format = DateTime)]
    pub submit: String,
    /// When it started; absent while pending.
    #[schema(format = DateTime)]
    pub start: Option<String>,
    /// When it ended; absent until then.
    #[schema(format = DateTime)]
    pub end: Option<String>,
    /// Requested nodes (or processors).
    #[schema(minimum = 1, maximum = 100000000)]
    pub nodes: Option<i64>,
    /// Requested walltime.
    pub walltime: Option<DurationIn>,
    /// Where the job is in its life.
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// The scheduler's user who owns the job (optional): lets the engine count a
    /// user's own jobs pending ahead of theirs. Stored as the site's configuration
    /// asks (the name, or a keyed hash of it) and never shown to other users.
    #[schema(min_length = 1, max_length = 256)]
    pub user: Option<String>,
}

/// A batch of job records, as an object (a bare JSON array of records, or NDJSON, is
/// accepted too).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct JobsIn {
    /// The records, in the order the scheduler reported them.
    pub jobs: Vec<JobIn>,
}

object_only!(JobIn, JobsIn);

/// A record kept aside.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecordRejectView {
    /// Its position in the request: index in the array, or line number (from 1) in
    /// NDJSON.
    pub record: usize,
    /// The offending field's path (e.g. `jobs[2].start`), when one is to blame.
    pub field: Option<String>,
    /// Why it was refused.
    pub reason: String,
}

/// What a push did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobsOut {
    /// Records in the request.
    pub received: usize,
    /// Records that were new or changed a stored job (the rest were already known).
    pub changed: usize,
    /// Records refused (kept aside, see `GET /v1/sites/{site}/rejects`, up to the
    /// bounds on rejects kept; the rest counted).
    pub rejected: usize,
    /// The first refused records' reasons (at most the server's
    /// `ingest.max_reasons_in_answer` records).
    pub rejects: Vec<RecordRejectView>,
    /// Records of a job that a later record of the same job in this request replaces:
    /// the last record of each job is the one stored, the earlier ones are named here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<SupersededView>,
    /// Refused records whose reasons the answer leaves out (past that bound).
    pub rejects_unlisted: usize,
    /// Refused records not kept aside (past the bounds per request and per site); only
    /// counted.
    pub rejects_unkept: usize,
}

/// A record replaced by a later one of the same job in the same request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SupersededView {
    /// Its position in the request (as in `rejects`).
    pub record: usize,
    /// The job it is a record of.
    pub job_id: String,
    /// The position of the later record that is stored instead.
    pub by: usize,
}

/// The documented shape of a push body, for the OpenAPI document ([`PushBody`] reads
/// it). The records themselves are any JSON values: one that is not a valid
/// [`JobIn`] is kept aside and named in the answer (issue 5: never refused whole,
/// never dropped), so the schema of a record must not promise a refusal the server
/// does not give. The body itself must be an array or `{"jobs": [...]}`.
pub struct PushSchema;

impl utoipa::PartialSchema for PushSchema {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{
            AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type,
        };
        let record = || {
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .description(Some(
                    "A job record, as the JobIn schema describes. A record that is not a \
                     valid JobIn is kept aside (see `…/rejects`) and named in the answer; \
                     the others are stored.",
                ))
        };
        let records = || ArrayBuilder::new().items(record());
        OneOfBuilder::new()
            .description(Some(
                "The records as a JSON array, or as an object `{\"jobs\": [...]}`; NDJSON \
                 (application/x-ndjson) holds one record per line.",
            ))
            .item(records())
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("jobs", records())
                    .required("jobs")
                    .additional_properties(Some(AdditionalProperties::<
                        utoipa::openapi::schema::Schema,
                    >::FreeForm(false))),
            )
            .into()
    }
}

impl utoipa::ToSchema for PushSchema {}

/// The body of a push: its text, and where each record lies in it, with its position.
/// Records are read from that text one by one ([`parse_record`]), not through a JSON
/// tree unless one is refused.
pub struct PushBody {
    text: String,
    /// Each record's position (index in the array, or line number in NDJSON) and its
    /// byte range in `text`.
    records: Vec<(usize, std::ops::Range<usize>)>,
    /// Whether the records sit in `{"jobs": [...]}` (their paths start with `jobs`).
    wrapped: bool,
    /// Whether the body is NDJSON (a record kept aside keeps its line as sent).
    ndjson: bool,
}

fn media_type(req: &Request) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Where `part`, a slice of `whole`, lies in it.
fn range_in(whole: &str, part: &str) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// A JSON object's members in order, repeated keys included (a map keeps the last).
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(member) = map.next_entry::<String, &'a RawValue>()? {
                    out.push(member);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// The records of a JSON body (an array, or `{"jobs": [...]}`), as slices of `text`,
/// and whether they were wrapped.
fn json_records(text: &str) -> Result<(Vec<&RawValue>, bool), ApiError> {
    let not_json = |e: serde_json::Error| {
        // The tree parser's message, which names the fault as it always has.
        let e = serde_json::from_str::<serde_json::Value>(text)
            .err()
            .unwrap_or(e);
        ApiError::BadRequest(format!("the body is not JSON: {e}"))
    };
    let top: &RawValue = serde_json::from_str(text).map_err(not_json)?;
    let top = top.get();
    match top.as_bytes().first() {
        Some(b'[') => Ok((serde_json::from_str(top).map_err(not_json)?, false)),
        Some(b'{') => {
            let Entries(entries) = serde_json::from_str(top).map_err(not_json)?;
            if let Some((extra, _)) = entries.iter().find(|(k, _)| k != "jobs") {
                return Err(ApiError::field(
                    extra.clone(),
                    "unknown field; expected `jobs`",
                ));
            }
            // A second `jobs` would silently replace the first's records.
            if entries.len() > 1 {
                return Err(ApiError::field("jobs", "is given more than once"));
            }
            match entries.first().map(|(_, v)| *v) {
                Some(jobs) if jobs.get().starts_with('[') => {
                    Ok((serde_json::from_str(jobs.get()).map_err(not_json)?, true))
                }
                Some(_) => Err(ApiError::field("jobs", "must be an array of records")),
                None => Err(ApiError::field("jobs", "is required")),
            }
        }
        _ => Err(ApiError::BadRequest(
            "the body must be an array of records, an object {\"jobs\": [...]}, or NDJSON".into(),
        )),
    }
}

impl<S: Send + Sync> FromRequest<S> for PushBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let kind = media_type(&req);
        let ndjson = matches!(
            kind.as_str(),
            "application/x-ndjson"
                | "application/ndjson"
                | "application/jsonl"
                | "application/x-jsonlines"
        );
        let json = kind == "application/json"
            || (kind.starts_with("application/") && kind.ends_with("+json"));
        if !ndjson && !json {
            return Err(ApiError::UnsupportedMediaType(
                "send JSON (Content-Type: application/json) or NDJSON (application/x-ndjson)"
                    .into(),
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(
                        "the request body is larger than this server accepts".into(),
                    )
                } else {
                    ApiError::BadRequest(rejection.body_text())
                }
            })?;
        let text = String::from_utf8(Vec::from(bytes)).map_err(|e| {
            ApiError::BadRequest(format!("the body is not UTF-8: {}", e.utf8_error()))
        })?;
        let (records, wrapped) = if ndjson {
            let records = text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| (i + 1, range_in(&text, l)))
                .collect();
            (records, false)
        } else {
            let (items, wrapped) = json_records(&text)?;
            let records = items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i, range_in(&text, v.get())))
                .collect();
            (records, wrapped)
        };
        Ok(PushBody {
            text,
            records,
            wrapped,
            ndjson,
        })
    }
}

/// Reads one record's text into a [`JobIn`]: straight from the text when it is one;
/// otherwise through a JSON tree, which decides as the push always has and names the
/// fault: `Err` holds the field at fault (relative to the record), when one is, and why.
fn parse_record(raw: &str) -> Result<JobIn, (Option<String>, String)> {
    if let Ok(j) = serde_json::from_str::<JobIn>(raw) {
        return Ok(j);
    }
    let value: serde_json::Value =
        serde_json::from_str(raw).map_err(|e| (None, format!("not JSON: {e}")))?;
    if !value.is_object() {
        return Err((None, "a record must be a JSON object".into()));
    }
    // The tree keeps the last of a repeated key, which would hide the first value (the
    // direct read above refuses it): named, as a repeated top-level `jobs` is.
    if let Ok(Entries(entries)) = serde_json::from_str::<Entries>(raw) {
        let mut seen = std::collections::HashSet::new();
        if let Some((key, _)) = entries.iter().find(|(k, _)| !seen.insert(k.as_str())) {
            return Err((Some(key.clone()), "is given more than once".into()));
        }
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let reason = e.inner().to_string();
        match field_at_fault(&e.path().to_string(), &reason) {
            Some((field, detail)) => (Some(field), detail),
            None => (None, reason),
        }
    })
}

/// The text a refused record is kept with: its NDJSON line as sent, or an array item
/// written compactly.
fn kept_text(raw: &str, ndjson: bool) -> String {
    if ndjson {
        return raw.to_string();
    }
    serde_json::from_str::<serde_json::Value>(raw)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| raw.to_string())
}

/// Checks one record; `Err` names the fields at fault.
fn read_record(
    at: &dyn Fn(&str) -> String,
    j: JobIn,
) -> Result<JobRecord, Vec<(Option<String>, String)>> {
    let mut errors = Vec::new();
    if j.job_id.trim().is_empty() || j.job_id.chars().count() > 128 {
        errors.push((
            Some(at("job_id")),
            "must be 1 to 128 characters".to_string(),
        ));
    } else if j.job_id.chars().any(char::is_control) {
        errors.push((
            Some(at("job_id")),
            "must not contain control characters".to_string(),
        ));
    }
    if let Err(e) = crate::service::check_name(&j.queue) {
        errors.push((Some(at("queue")), e));
    }
    // The fields' refusals, in the order a `Fields` collector would list them; their
    // paths are written only for a refused record.
    let mut refused: Vec<(&str, String)> = Vec::new();
    let mut time = |field: &'static str, text: &str| {
        timestamp(text).map_err(|e| refused.push((field, e))).ok()
    };
    let submit = time("submit", &j.submit);
    let start = j.start.as_deref().and_then(|t| time("start", t));
    let end = j.end.as_deref().and_then(|t| time("end", t));
    let nodes = j.nodes.and_then(|n| {
        if (1..=super::params::MAX_NODES).contains(&n) {
            Some(n)
        } else {
            let e = super::params::nodes(&n.to_string())
                .err()
                .unwrap_or_default();
            refused.push(("nodes", e));
            None
        }
    });
    let walltime_s = j
        .walltime
        .as_ref()
        .and_then(|w| w.seconds().map_err(|e| refused.push(("walltime", e))).ok());
    if let (Some(s), Some(st)) = (submit, start)
        && st < s
    {
        refused.push(("start", "must not be before submit".into()));
    }
    if let (Some(st), Some(e)) = (start, end)
        && e < st
    {
        refused.push(("end", "must not be before start".into()));
    }
    if let (Some(s), None, Some(e)) = (submit, start, end)
        && e < s
    {
        refused.push(("end", "must not be before submit".into()));
    }
    let user = match j.user {
        Some(u) if u.is_empty() || u.chars().count() > 256 => {
            refused.push(("user", "must be 1 to 256 characters".into()));
            None
        }
        Some(u) if u.chars().any(char::is_control) => {
            refused.push(("user", "must not contain control characters".into()));
            None
        }
        u => u,
    };
    errors.extend(refused.into_iter().map(|(f, d)| (Some(at(f)), d)));
    match submit {
        Some(submit) if errors.is_empty() => Ok(JobRecord {
            job_id: match j.job_id.trim() {
                t if t.len() == j.job_id.len() => j.job_id,
                t => t.to_string(),
            },
            queue: j.queue,
            submit_time: submit,
            start_time: start,
            end_time: end,
            nodes,
            walltime_s,
            state: j.state,
            user,
        }),
        _ => Err(errors),
    }
}

/// Job records from a live site's scheduler: new jobs, and news of known ones (a
/// start, an end). Records identical to what is stored change nothing; a bad record is
/// kept aside (see `…/rejects`) and named in the answer, and the others are stored.
#[utoipa::path(
    post, path = "/v1/sites/{site}/jobs", tag = "ingest", operation_id = "post_jobs",
    params(("site" = String, Path, description = "Site name (a live site)")),
    request_body(
        description = "A JSON array of records, an object `{\"jobs\": [...]}`, or NDJSON \
            (one record per line, Content-Type: application/x-ndjson)",
        content(
            (PushSchema = "application/json"),
            (PushSchema = "application/x-ndjson"),
        )
    ),
    responses(
        (status = 200, description = "What the records changed, and those kept aside", body = JobsOut),
        (status = 404, description = "No such site", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The site is an archive", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is too large", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn post_jobs<S: Store>(
    _caller: Authorized<Ingest>,
    State(state): State<AppState<S>>,
    ApiPath(site_name): ApiPath<String>,
    body: PushBody,
) -> ApiResult<axum::Json<JobsOut>> {
    let site = find_site(&state, &site_name).await?;
    if site.kind != SiteKind::Live {
        return Err(ApiError::Conflict(format!(
            "site {site_name:?} is an archive; records are ingested into live sites"
        )));
    }
    let received = body.records.len();
    let now = state.clock.now();
    let limits = &state.config.ingest;
    let mut records = Vec::with_capacity(received);
    let mut positions = Vec::with_capacity(received);
    let mut rejects = Vec::new();
    let mut views = Vec::new();
    // Refused records past the bounds: counted only, so that a body of bad records
    // costs no more memory (nor answer) than the bounds allow.
    let mut refused_unkept = 0u64;
    let mut listed_records = 0usize;
    for (n, range) in body.records {
        let at = |f: &str| {
            if body.wrapped {
                format!("jobs[{n}].{f}")
            } else {
                format!("[{n}].{f}")
            }
        };
        let raw = &body.text[range];
        let result = parse_record(raw)
            .map_err(|(field, detail)| vec![(field.map(|f| at(&f)), detail)])
            .and_then(|j| read_record(&at, j))
            .and_then(|r| match r.from_the_future(now) {
                Some((field, t)) => Err(vec![(Some(at(field)), future_reason(field, t, now))]),
                None => r.checked(now).map_err(|e| vec![(None, e)]),
            });
        match result {
            Ok(r) => {
                records.push(r);
                positions.push(n);
            }
            Err(errors) => {
                let reason = errors
                    .iter()
                    .map(|(f, d)| match f {
                        Some(f) => format!("{f}: {d}"),
                        None => d.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                if rejects.len() < limits.max_rejects_per_request {
                    rejects.push(RecordReject {
                        line: None,
                        raw: kept_text(raw, body.ndjson).chars().take(4096).collect(),
                        reason: format!("record {n}: {reason}"),
                    });
                } else {
                    refused_unkept += 1;
                }
                if listed_records < limits.max_reasons_in_answer {
                    listed_records += 1;
                    for (field, reason) in errors {
                        views.push(RecordRejectView {
                            record: n,
                            field,
                            reason,
                        });
                    }
                }
            }
        }
    }
    // The same job twice: the last record wins (the store keeps one row a job); the
    // earlier ones are reported, not dropped in silence.
    let mut last: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, r) in records.iter().enumerate() {
        last.insert(r.job_id.as_str(), i);
    }
    let superseded: Vec<SupersededView> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let l = last[r.job_id.as_str()];
            (l != i).then(|| SupersededView {
                record: positions[i],
                job_id: r.job_id.clone(),
                by: positions[l],
            })
        })
        .collect();
    let out = ingest(
        &state.store,
        &state.predictors,
        &site,
        PUSH_SOURCE,
        &records,
        &rejects,
        refused_unkept,
        limits,
        now,
    )
    .await?;
    // The pusher's news up to now is stored.
    state.predictors.heard_until(&site, now);
    state
        .store
        .source_succeeded(&SourceProgress {
            site_id: site.id,
            source: PUSH_SOURCE.into(),
            kind: PUSH_SOURCE.into(),
            cursor: None,
            at: now,
            accepted: out.changed as i64,
            rejected: (out.rejects_new + out.rejects_unkept) as i64,
            last_record_at: out.last_record_at,
            detail: None,
        })
        .await?;
    Ok(axum::Json(JobsOut {
        received,
        changed: out.changed as usize,
        rejected: out.rejected as usize,
        rejects: views,
        superseded,
        // Those past the bound, and those refused once read (a job the store refuses,
        // a queue past the site's bound), which the answer does not list.
        rejects_unlisted: out.rejected.saturating_sub(listed_records as u64) as usize,
        rejects_unkept: out.rejects_unkept as usize,
    }))
}

/// Parameters of `…/rejects`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RejectsQuery {
    /// Most records returned, 1 to 10000 (default 100).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    pub limit: Option<String>,
    /// Only records kept after the one with this id (the `next` of the page before).
    #[param(value_type = Option<i64>, minimum = 0)]
    pub after: Option<String>,
}

/// A record kept aside.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RejectView {
    /// The store's id (arrival order).
    pub id: i64,
    /// Where it came from: a file name, `push`, a source's name.
    pub source: String,
    /// Its line in `source`, when it has lines.
    pub line: Option<i64>,
    /// The record as received.
    pub raw: String,
    /// Why it was refused.
    pub reason: String,
    /// When it was received.
    #[schema(format = DateTime)]
    pub received: String,
}

/// A site's rejects.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RejectsResponse {
    /// The site's name.
    pub site: String,
    /// Oldest first.
    pub rejects: Vec<RejectView>,
    /// When the page is full: the `after` that asks for the next page (there may be
    /// none yet). Null when this page holds every record kept after `after`.
    pub next: Option<i64>,
}

/// Records of a site that could not be read or were refused, with the reason: kept,
/// never dropped silently.
#[utoipa::path(
    get, path = "/v1/sites/{site}/rejects", tag = "ingest", operation_id = "list_rejects",
    params(("site" = String, Path, description = "Site name"), RejectsQuery),
    responses(
        (status = 200, description = "The site's rejects, oldest first", body = RejectsResponse),
        (status = 400, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_rejects<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath(site_name): ApiPath<String>,
    ApiQuery(q): ApiQuery<RejectsQuery>,
) -> ApiResult<axum::Json<RejectsResponse>> {
    let mut fields = Fields::new();
    let limit = fields
        .opt("limit", q.limit.as_deref(), |t| positive(t, 10_000))
        .unwrap_or(100);
    let after = fields
        .opt("after", q.after.as_deref(), |t| {
            match t.trim().parse::<i64>() {
                Ok(n) if n >= 0 => Ok(n),
                _ => Err(format!("must be a record id, 0 or more, got {t:?}")),
            }
        })
        .unwrap_or(0);
    fields.finish()?;
    let site = find_site(&state, &site_name).await?;
    let rejects: Vec<RejectView> = state
        .store
        .rejects(site.id, after, limit)
        .await?
        .into_iter()
        .map(|r| RejectView {
            id: r.id,
            source: r.source,
            line: r.line,
            raw: r.raw,
            reason: r.reason,
            received: format_time(r.received_at),
        })
        .collect();
    let next = (rejects.len() as i64 == limit)
        .then(|| rejects.last().map(|r| r.id))
        .flatten();
    Ok(axum::Json(RejectsResponse {
        site: site.name,
        rejects,
        next,
    }))
}

/// How a source is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// The last poll succeeded.
    Ok,
    /// The last poll (or more) failed; the source retries with back-off.
    Failing,
}

/// One source's health.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SourceHealth {
    /// The source's name (`push` for pushed records).
    pub source: String,
    /// Its kind (`slurm_rest`, `sacct`, `pbs_accounting`, `sge_accounting`, `swf`, `push`).
    pub kind: String,
    /// Whether its last poll succeeded.
    pub status: SourceStatus,
    /// Last successful poll.
    #[schema(format = DateTime)]
    pub last_success: Option<String>,
    /// The last error (kept after a later success; compare the times).
    pub last_error: Option<String>,
    /// When it happened.
    #[schema(format = DateTime)]
    pub last_error_at: Option<String>,
    /// Failed polls since the last success.
    pub consecutive_failures: i64,
    /// Records stored (new, or news of a known job).
    pub accepted: i64,
    /// Records kept aside.
    pub rejected: i64,
    /// Latest event (submit, start or end) among the records read.
    #[schema(format = DateTime)]
    pub last_record: Option<String>,
    /// Seconds since the last successful poll (null before the first).
    pub lag_s: Option<i64>,
    /// What the source last said about itself, e.g. the slurmrestd API version a
    /// `slurm_rest` source speaks and how it was chosen (null when it said nothing).
    pub detail: Option<String>,
}

/// The ingest health of a site.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct IngestResponse {
    /// The site's name.
    pub site: String,
    /// When this was answered.
    #[schema(format = DateTime)]
    pub as_of: String,
    /// By name.
    pub sources: Vec<SourceHealth>,
}

/// Each source's health: last success, last error, records accepted and rejected, lag.
#[utoipa::path(
    get, path = "/v1/sites/{site}/ingest", tag = "ingest", operation_id = "get_ingest",
    params(("site" = String, Path, description = "Site name")),
    responses(
        (status = 200, description = "The site's sources, by name", body = IngestResponse),
        (status = 404, description = "No such site", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_ingest<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath(site_name): ApiPath<String>,
) -> ApiResult<axum::Json<IngestResponse>> {
    let site = find_site(&state, &site_name).await?;
    let now = state.clock.now();
    let sources = state
        .store
        .source_states(site.id)
        .await?
        .into_iter()
        .map(|s| SourceHealth {
            status: if s.consecutive_failures > 0 {
                SourceStatus::Failing
            } else {
                SourceStatus::Ok
            },
            lag_s: s.last_success_at.map(|t| (now - t).max(0)),
            last_success: s.last_success_at.map(format_time),
            last_error: s.last_error,
            last_error_at: s.last_error_at.map(format_time),
            consecutive_failures: s.consecutive_failures,
            accepted: s.accepted,
            rejected: s.rejected,
            last_record: s.last_record_at.map(format_time),
            detail: s.detail,
            source: s.source,
            kind: s.kind,
        })
        .collect();
    Ok(axum::Json(IngestResponse {
        site: site.name,
        as_of: format_time(now),
        sources,
    }))
}
