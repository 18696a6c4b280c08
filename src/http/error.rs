//! The one error type of the HTTP layer and its RFC 9457 `application/problem+json`
//! body. Every error a handler or extractor can meet becomes an [`ApiError`]; only
//! server faults are 5xx, and their detail is logged once here and hidden from the
//! client.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::store::{Scope, StoreError};

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem details object.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "urn:qbets:problem:invalid-parameters",
    "title": "Invalid parameters",
    "status": 400,
    "detail": "nodes: must be a whole number from 1 to 100000000, got \"0\"",
    "errors": [{"field": "nodes", "detail": "must be a whole number from 1 to 100000000, got \"0\""}]
}))]
pub struct Problem {
    /// A URI naming the kind of problem (`about:blank` for plain HTTP statuses).
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// For invalid input: each offending field or parameter and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// When no reservation plan meets the probability asked for: the best probability
    /// reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_probability: Option<f64>,
    /// And the submission time that reaches it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub best_submit_at: Option<String>,
    /// For a co-allocation: the index of the reservation that cannot be met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<usize>,
}

/// One offending field or parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct FieldError {
    /// The parameter's name, or the JSON path of a body field (e.g. `jobs[2].submit`).
    pub field: String,
    /// Why its value was refused.
    pub detail: String,
}

impl FieldError {
    /// A refusal of `field` for `detail`.
    pub fn new(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            detail: detail.into(),
        }
    }
}

/// Everything that can go wrong answering a request.
#[derive(Debug)]
pub enum ApiError {
    /// One or more parameters or body fields are invalid (400).
    Invalid(Vec<FieldError>),
    /// The request is malformed in a way no single field explains (400).
    BadRequest(String),
    /// No valid token was presented (401).
    Unauthorized(&'static str),
    /// The token lacks the scope this needs (403).
    Forbidden(Scope),
    /// No such site, queue or route (404).
    NotFound(String),
    /// The route exists but not for this method (405).
    MethodNotAllowed,
    /// The request conflicts with stored state (409).
    Conflict(String),
    /// No reservation plan meets the probability asked for (422): the best reachable,
    /// when anything was, and for a co-allocation the reservation at fault.
    NoPlan {
        /// What was refused and why.
        detail: String,
        /// The best probability reachable.
        best_probability: Option<f64>,
        /// When (Unix seconds).
        best_submit_at: Option<i64>,
        /// The co-allocation's reservation index at fault.
        reservation: Option<usize>,
    },
    /// The request asks for more than the queue or machine allows (422): each
    /// offending field with the limit named.
    ExceedsLimits(Vec<FieldError>),
    /// The request is well formed but this server cannot do what it asks (422): each
    /// field at fault with why (e.g. a webhook on a server with no signing secret, more
    /// candidates than one call takes).
    Unprocessable(Vec<FieldError>),
    /// The body did not arrive in time (408).
    RequestTimeout(String),
    /// The body is larger than the configured limit (413).
    PayloadTooLarge(String),
    /// The body is not JSON (415).
    UnsupportedMediaType(String),
    /// A dependency (the store) is unreachable (503); logged.
    Unavailable(String),
    /// A remote scheduler failed at what was asked of it (502); shown and logged.
    BadGateway(String),
    /// A fault of ours (500); logged, hidden from the client.
    Internal(String),
}

impl ApiError {
    /// A 400 naming one field.
    pub fn field(field: impl Into<String>, detail: impl Into<String>) -> Self {
        ApiError::Invalid(vec![FieldError::new(field, detail)])
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::Invalid(_) | ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::NoPlan { .. } | ApiError::ExceedsLimits(_) | ApiError::Unprocessable(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The problem body this error is shown as.
    pub fn problem(&self) -> Problem {
        let status = self.status();
        // A problem that lists the fields at fault, its detail their details joined.
        let listed = |kind: &str,
                      title: &str,
                      errors: &[FieldError],
                      line: fn(&FieldError) -> String| Problem {
            kind: kind.into(),
            title: title.into(),
            status: status.as_u16(),
            detail: errors.iter().map(line).collect::<Vec<_>>().join("; "),
            errors: errors.to_vec(),
            best_probability: None,
            best_submit_at: None,
            reservation: None,
        };
        let named: fn(&FieldError) -> String = |e| format!("{}: {}", e.field, e.detail);
        let plain = |detail: String| Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail,
            errors: Vec::new(),
            best_probability: None,
            best_submit_at: None,
            reservation: None,
        };
        match self {
            ApiError::NoPlan {
                detail,
                best_probability,
                best_submit_at,
                reservation,
            } => Problem {
                kind: "urn:qbets:problem:no-plan".into(),
                title: "No plan meets the probability".into(),
                status: status.as_u16(),
                detail: detail.clone(),
                errors: Vec::new(),
                best_probability: *best_probability,
                best_submit_at: best_submit_at.map(crate::service::format_unix),
                reservation: *reservation,
            },
            ApiError::ExceedsLimits(errors) => listed(
                "urn:qbets:problem:exceeds-limits",
                "Beyond the queue's limits",
                errors,
                // Each detail names its limit already.
                |e| e.detail.clone(),
            ),
            ApiError::Unprocessable(errors) => listed(
                "urn:qbets:problem:unprocessable",
                "Not possible on this server",
                errors,
                named,
            ),
            ApiError::Invalid(errors) => listed(
                "urn:qbets:problem:invalid-parameters",
                "Invalid parameters",
                errors,
                named,
            ),
            ApiError::BadRequest(d)
            | ApiError::NotFound(d)
            | ApiError::Conflict(d)
            | ApiError::PayloadTooLarge(d)
            | ApiError::RequestTimeout(d)
            | ApiError::UnsupportedMediaType(d)
            | ApiError::BadGateway(d) => plain(d.clone()),
            ApiError::Unauthorized(why) => plain((*why).to_string()),
            ApiError::Forbidden(Scope::Admin) => {
                plain("this needs a token with scope admin".into())
            }
            ApiError::Forbidden(scope) => {
                plain(format!("this needs a token with scope {scope} (or admin)"))
            }
            ApiError::MethodNotAllowed => plain("this route does not accept that method".into()),
            ApiError::Unavailable(_) => {
                plain("the store is busy or unreachable; try again shortly".into())
            }
            ApiError::Internal(_) => plain("internal error; it has been logged".into()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            // Logged once, here, where the fault turns into a response.
            ApiError::Internal(detail) => tracing::error!(error = %detail, "request failed"),
            ApiError::Unavailable(detail) => tracing::warn!(error = %detail, "store unavailable"),
            ApiError::BadGateway(detail) => {
                tracing::warn!(error = %detail, "remote scheduler failed")
            }
            _ => {}
        }
        let problem = self.problem();
        let mut response = (self.status(), Json(problem)).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if matches!(self, ApiError::Unavailable(_)) {
            // Busy or unreachable for a moment: a client may try again shortly.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            // For the store gate (`super::store_gate`): a check follows.
            response.extensions_mut().insert(StoreUnavailable);
        }
        if matches!(self, ApiError::Unauthorized(_)) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"qbets\""),
            );
        }
        response
    }
}

/// Marks a response the store's unavailability caused.
#[derive(Debug, Clone, Copy)]
pub struct StoreUnavailable;

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => ApiError::Conflict(m),
            StoreError::Invalid(m) => ApiError::BadRequest(m),
            StoreError::Unavailable(m) => ApiError::Unavailable(m),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_problems_name_every_field() {
        let p = ApiError::Invalid(vec![
            FieldError::new("nodes", "must be at least 1"),
            FieldError::new("walltime", "not a duration"),
        ])
        .problem();
        assert_eq!(p.status, 400);
        assert_eq!(
            p.detail,
            "nodes: must be at least 1; walltime: not a duration"
        );
        assert_eq!(p.errors.len(), 2);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["type"], "urn:qbets:problem:invalid-parameters");
    }

    #[test]
    fn server_faults_hide_their_detail() {
        let p = ApiError::Internal("password=hunter2 at db".into()).problem();
        assert_eq!(p.status, 500);
        assert!(!p.detail.contains("hunter2"));
        let json = serde_json::to_value(ApiError::NotFound("x".into()).problem()).unwrap();
        assert!(json.get("errors").is_none());
        assert_eq!(json["title"], "Not Found");
    }
}
