//! Reading what clients send: parameter parsers that name the field they refuse, a
//! collector that reports every bad field at once, and the JSON/query/path extractors
//! whose rejections become problem+json instead of axum's plain-text bodies.
//!
//! Query structs take every parameter as text (`Option<String>`) and parse it here, so
//! that an error says which parameter and why, in our words.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::error::{ApiError, FieldError};

/// Longest walltime or duration accepted: a year, far beyond any queue's limit, and far
/// from overflowing anything.
pub const MAX_DURATION_S: i64 = 366 * 86_400;

/// Parses a walltime: whole seconds (`3600`), or Slurm's forms `MM:SS`, `HH:MM:SS`,
/// `D-HH`, `D-HH:MM`, `D-HH:MM:SS`. A bare number is seconds here (every duration of
/// this API is), not Slurm's minutes. At least 1 s, at most [`MAX_DURATION_S`].
pub fn walltime(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let bad =
        || format!("expected seconds or [D-]HH:MM:SS (also MM:SS, D-HH, D-HH:MM), got {text:?}");
    let num = |s: &str| -> Result<i64, String> {
        if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<i64>().map_err(|_| bad())
    };
    let seconds = if let Some((days, rest)) = t.split_once('-') {
        let d = num(days)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (h, m, s) = match parts.as_slice() {
            [h] => (num(h)?, 0, 0),
            [h, m] => (num(h)?, num(m)?, 0),
            [h, m, s] => (num(h)?, num(m)?, num(s)?),
            _ => return Err(bad()),
        };
        if h > 23 || m > 59 || s > 59 {
            return Err(bad());
        }
        d * 86_400 + h * 3_600 + m * 60 + s
    } else {
        let parts: Vec<&str> = t.split(':').collect();
        match parts.as_slice() {
            [s] => num(s)?,
            [m, s] => {
                let (m, s) = (num(m)?, num(s)?);
                if s > 59 {
                    return Err(bad());
                }
                m * 60 + s
            }
            [h, m, s] => {
                let (h, m, s) = (num(h)?, num(m)?, num(s)?);
                if m > 59 || s > 59 {
                    return Err(bad());
                }
                h * 3_600 + m * 60 + s
            }
            _ => return Err(bad()),
        }
    };
    if seconds < 1 {
        return Err(format!("must be at least 1 second, got {text:?}"));
    }
    if seconds > MAX_DURATION_S {
        return Err(format!(
            "must be at most {MAX_DURATION_S} seconds (366 days), got {text:?}"
        ));
    }
    Ok(seconds)
}

/// Formats seconds as `[D-]HH:MM:SS` (Slurm's form).
pub fn format_walltime(seconds: i64) -> String {
    let s = seconds.max(0);
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3_600, s % 3_600 / 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// Whether `text` is written as a date and time (`YYYY-MM-DD` then `T`, `t` or a space,
/// RFC 3339 §5.6), not as a duration.
pub fn looks_like_a_time(text: &str) -> bool {
    let b = text.trim().as_bytes();
    b.len() > 10 && b[4] == b'-' && b[7] == b'-' && matches!(b[10], b'T' | b't' | b' ')
}

/// Parses an RFC 3339 time (e.g. `2000-04-25T21:20:03Z`; `t` or a space may stand for
/// the `T`) to Unix seconds.
pub fn timestamp(text: &str) -> Result<i64, String> {
    let bad = || format!("expected an RFC 3339 time such as 2024-05-01T12:00:00Z, got {text:?}");
    // The parser reads any byte between date and time as their separator.
    if !looks_like_a_time(text) {
        return Err(bad());
    }
    OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|_| bad())
}

/// Formats Unix seconds as RFC 3339 in UTC (`…Z`).
pub fn format_time(unix: i64) -> String {
    crate::service::format_unix(unix)
}

/// Parses a probability strictly between 0 and 1 (a quantile or a confidence level).
pub fn probability(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!(
            "must be a number strictly between 0 and 1, got {text:?}"
        )),
    }
}

/// Parses a positive whole number no larger than `max` (a node count, a limit).
pub fn positive(text: &str, max: i64) -> Result<i64, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {max}, got {text:?}"
        )),
    }
}

/// Parses a boolean flag: `true` or `false`.
pub fn flag(text: &str) -> Result<bool, String> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("must be true or false, got {text:?}")),
    }
}

/// Largest node count accepted (beyond any machine's size).
pub const MAX_NODES: i64 = 100_000_000;

/// Parses a node count (at least 1).
pub fn nodes(text: &str) -> Result<i64, String> {
    positive(text, MAX_NODES)
}

/// Collects field errors so that a request hears about every bad parameter at once.
#[derive(Debug, Default)]
pub struct Fields {
    errors: Vec<FieldError>,
}

impl Fields {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses an optional parameter; a refusal is recorded under `field`.
    pub fn opt<T>(
        &mut self,
        field: &str,
        value: Option<&str>,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let v = value?;
        match parse(v) {
            Ok(t) => Some(t),
            Err(e) => {
                self.errors.push(FieldError::new(field, e));
                None
            }
        }
    }

    /// Parses a required parameter.
    pub fn req<T>(
        &mut self,
        field: &str,
        value: Option<&str>,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        if value.is_none() {
            self.errors.push(FieldError::new(field, "is required"));
            return None;
        }
        self.opt(field, value, parse)
    }

    /// Records a refusal found by a check across fields.
    pub fn refuse(&mut self, field: &str, detail: impl Into<String>) {
        self.errors.push(FieldError::new(field, detail));
    }

    /// Whether nothing was refused so far.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Ok` when every field passed, else a 400 naming them all.
    pub fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Invalid(self.errors))
        }
    }
}

/// `axum::Json` whose rejections are problem+json.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "the body must be JSON, sent with Content-Type: application/json".into(),
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
        // Every body of this API is a JSON object. serde's derived structs would also
        // take an array of field values, which no schema of ours allows.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::BadRequest(
                "the body must be a JSON object".into(),
            ));
        }
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// Whether the request says its body is JSON (`application/json` or `…+json`).
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    let text = rejection.body_text();
    match rejection {
        JsonRejection::JsonDataError(_) => {
            // axum reports the path serde stopped at: "…target type: jobs[0].submit: why".
            let inner = text
                .split_once("target type: ")
                .map(|(_, rest)| rest)
                .unwrap_or(&text);
            let (path, why) = match inner.split_once(": ") {
                Some((path, why)) if !path.contains(' ') => (path, why),
                _ => ("", inner),
            };
            match field_at_fault(path, why) {
                Some((field, detail)) => ApiError::field(field, detail),
                None => ApiError::BadRequest(inner.to_string()),
            }
        }
        JsonRejection::JsonSyntaxError(_) => ApiError::BadRequest(text),
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
            "the body must be JSON, sent with Content-Type: application/json".into(),
        ),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge("the request body is larger than this server accepts".into())
        }
        other => ApiError::BadRequest(other.body_text()),
    }
}

/// The field a JSON data error is about, and what to say of it. serde stops at the value
/// it could not read (`path`; empty or `.` at the top), except for a missing field,
/// which it reports at the object that lacks it: that field's name is in the message,
/// and it "is required". `None` when the fault is the whole document.
pub fn field_at_fault(path: &str, message: &str) -> Option<(String, String)> {
    let path = if path == "." { "" } else { path };
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(name, _)| name);
    match (path, missing) {
        ("", None) => None,
        ("", Some(name)) => Some((name.to_string(), "is required".to_string())),
        (path, Some(name)) => Some((format!("{path}.{name}"), "is required".to_string())),
        (path, None) => Some((path.to_string(), message.to_string())),
    }
}

/// A deserializer that reads structs only from JSON objects. serde's derived structs
/// also accept an array of field values (`["7", "batch", …]`), which no schema of this
/// API allows; asking for a map instead of a struct makes such input an error, at any
/// depth. Request structs use it through [`object_only`].
pub struct MapOnly<D>(pub D);

impl<'de, D: serde::Deserializer<'de>> serde::Deserializer<'de> for MapOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// Implements `Deserialize` for a request struct declared with
/// `#[serde(remote = "Self")]`, reading it only from a JSON object ([`MapOnly`]).
macro_rules! object_only {
    ($($ty:ty),+ $(,)?) => {$(
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$ty>::deserialize($crate::http::params::MapOnly(d))
            }
        }
    )+};
}
pub(crate) use object_only;

/// Implements `Serialize` for a struct declared with `#[serde(remote = "Self")]` (the
/// OpenAPI schema shows request defaults by serialising them).
macro_rules! serialize_remote {
    ($($ty:ty),+ $(,)?) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$ty>::serialize(self, s)
            }
        }
    )+};
}
pub(crate) use serialize_remote;

/// `axum::extract::Query` whose rejections are problem+json.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    let text = rejection.body_text();
    // serde_urlencoded names the parameter in backticks: "duplicate field `since`".
    let field = text
        .split('`')
        .nth(1)
        .filter(|f| !f.is_empty() && !f.contains(' '))
        .map(str::to_string);
    let why = text
        .split_once("query string: ")
        .map(|(_, rest)| rest.to_string())
        .unwrap_or(text);
    match field {
        Some(f) => ApiError::field(f, why),
        None => ApiError::BadRequest(why),
    }
}

/// `axum::extract::Path` whose rejections are problem+json.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(ApiPath(v)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => {
                Err(ApiError::BadRequest(e.body_text()))
            }
            // A route declared without the parameters its handler reads: our fault.
            Err(other) => Err(ApiError::Internal(other.body_text())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walltimes_in_every_slurm_form() {
        for (text, s) in [
            ("3600", 3600),
            ("1", 1),
            ("30:00", 1800),
            ("90:30", 5430),
            ("01:30:00", 5400),
            ("36:00:00", 129_600),
            ("2-00", 172_800),
            ("1-12", 129_600),
            ("1-02:03", 93_780),
            ("1-02:03:04", 93_784),
            (" 12:00:00 ", 43_200),
        ] {
            assert_eq!(walltime(text), Ok(s), "{text}");
        }
        for bad in [
            "",
            "0",
            "00:00",
            "-1",
            "1h",
            "1:2:3:4",
            "1-",
            "-1:00",
            "1-24:00",
            "10:60",
            "1:60:00",
            "1.5",
            "2-3-4",
            "367-00",
            "99999999999",
        ] {
            assert!(walltime(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn walltimes_format_back() {
        assert_eq!(format_walltime(5400), "01:30:00");
        assert_eq!(format_walltime(93_784), "1-02:03:04");
        assert_eq!(format_walltime(59), "00:00:59");
        for s in [
            1,
            59,
            60,
            3599,
            3600,
            86_399,
            86_400,
            93_784,
            MAX_DURATION_S,
        ] {
            assert_eq!(walltime(&format_walltime(s)), Ok(s));
        }
    }

    proptest::proptest! {
        #[test]
        fn every_walltime_formats_and_parses_back(s in 1..=MAX_DURATION_S) {
            proptest::prop_assert_eq!(walltime(&format_walltime(s)), Ok(s));
            proptest::prop_assert_eq!(walltime(&s.to_string()), Ok(s));
        }

        #[test]
        fn every_time_formats_and_parses_back(t in 0i64..4_102_444_800) {
            proptest::prop_assert_eq!(timestamp(&format_time(t)), Ok(t));
        }

        #[test]
        fn no_text_panics_a_parser(text in "\\PC{0,24}") {
            let _ = walltime(&text);
            let _ = timestamp(&text);
            let _ = probability(&text);
            let _ = nodes(&text);
        }
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(timestamp("2000-04-25T21:20:03Z"), Ok(956_697_603));
        assert_eq!(timestamp("2000-04-25T14:20:03-07:00"), Ok(956_697_603));
        assert_eq!(format_time(956_697_603), "2000-04-25T21:20:03Z");
        assert!(timestamp("2000-04-25").is_err());
        assert!(timestamp("yesterday").is_err());
        // `t` or a space for the `T` (RFC 3339 §5.6); no other separator.
        assert_eq!(timestamp("2000-04-25t21:20:03Z"), Ok(956_697_603));
        assert_eq!(timestamp("2000-04-25 21:20:03Z"), Ok(956_697_603));
        for other in [
            "2000-04-25X21:20:03Z",
            "2000-04-25/21:20:03Z",
            "2000-04-25_21:20:03Z",
        ] {
            assert!(timestamp(other).is_err(), "{other}");
        }
        assert!(
            !looks_like_a_time("1000-00:00:00"),
            "a duration of 1000 days"
        );
    }

    #[test]
    fn probabilities_and_counts_are_bounded() {
        assert_eq!(probability("0.95"), Ok(0.95));
        for bad in ["0", "1", "1.5", "-0.1", "NaN", "inf", "x"] {
            assert!(probability(bad).is_err(), "{bad}");
        }
        assert_eq!(nodes("16"), Ok(16));
        for bad in ["0", "-3", "1.5", "", "many"] {
            assert!(nodes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_data_error_names_its_field_a_missing_one_included() {
        let f = |path: &str, message: &str| field_at_fault(path, message);
        assert_eq!(f(".", "invalid type: map, expected a string"), None);
        assert_eq!(f("", "trailing characters"), None);
        let named = |field: &str, detail: &str| Some((field.to_string(), detail.to_string()));
        assert_eq!(
            f("nodes", "invalid type: string \"x\", expected i64"),
            named("nodes", "invalid type: string \"x\", expected i64")
        );
        assert_eq!(
            f(".", "missing field `site` at line 1 column 2"),
            named("site", "is required")
        );
        assert_eq!(
            f("queues[1]", "missing field `name`"),
            named("queues[1].name", "is required")
        );
    }

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let mut f = Fields::new();
        assert_eq!(f.opt("nodes", Some("0"), nodes), None);
        assert_eq!(f.req("walltime", None, walltime), None);
        assert_eq!(f.opt("quantile", None, probability), None);
        match f.finish() {
            Err(ApiError::Invalid(errors)) => {
                let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
                assert_eq!(fields, ["nodes", "walltime"]);
            }
            other => panic!("{other:?}"),
        }
    }
}
