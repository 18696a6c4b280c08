//! Authentication as extractors. `Authorization: Bearer qbets_…` is checked against the
//! stored hashes (in constant time, by [`crate::service::tokens::verify`]); the token
//! text is never logged.
//!
//! - [`ReadAccess`]: reads. Public when `http.public_reads` is on (a token presented
//!   anyway must still be valid), otherwise any valid token.
//! - [`Authorized<M>`]: writes, needing the scope `M` names (`admin` implies all).

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::service::{AppState, tokens};
use crate::store::{ApiToken, Scope, Store};

/// The caller of a read.
#[derive(Debug)]
pub struct ReadAccess {
    /// The token presented, if any.
    pub token: Option<ApiToken>,
}

/// A caller whose token grants the scope `M` names.
#[derive(Debug)]
pub struct Authorized<M> {
    /// The token presented (its hash, never its secret).
    pub token: ApiToken,
    _scope: PhantomData<M>,
}

/// Names the scope an [`Authorized`] extractor requires.
pub trait ScopeMarker: Send + Sync + 'static {
    /// The scope needed.
    const SCOPE: Scope;
}

/// Needs the `ingest` scope.
#[derive(Debug)]
pub struct Ingest;
impl ScopeMarker for Ingest {
    const SCOPE: Scope = Scope::Ingest;
}

/// Needs the `reserve` scope.
#[derive(Debug)]
pub struct Reserve;
impl ScopeMarker for Reserve {
    const SCOPE: Scope = Scope::Reserve;
}

/// Needs the `admin` scope.
#[derive(Debug)]
pub struct Admin;
impl ScopeMarker for Admin {
    const SCOPE: Scope = Scope::Admin;
}

/// The bearer token of a request: `None` without an `Authorization` header, an error
/// when the header is there but not a bearer token, or is there more than once (which
/// one counts would be a guess: a proxy may read the other).
fn bearer(parts: &Parts) -> Result<Option<&str>, ApiError> {
    let mut all = parts.headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(ApiError::BadRequest(
            "the request carries more than one Authorization header; send one".into(),
        ));
    }
    let text = value
        .to_str()
        .map_err(|_| ApiError::Unauthorized("the Authorization header is not text"))?;
    let (kind, token) = text.split_once(' ').ok_or(ApiError::Unauthorized(
        "expected Authorization: Bearer <token>",
    ))?;
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::Unauthorized(
            "expected Authorization: Bearer <token>",
        ));
    }
    Ok(Some(token.trim()))
}

/// The stored token a request presents, if it presents one. A presented token that
/// matches none is a 401, never silently ignored.
async fn presented<S: Store>(
    parts: &Parts,
    state: &AppState<S>,
) -> Result<Option<ApiToken>, ApiError> {
    let Some(text) = bearer(parts)? else {
        return Ok(None);
    };
    match tokens::verify(&state.store, text).await? {
        Some(token) => Ok(Some(token)),
        None => Err(ApiError::Unauthorized("the token is not valid")),
    }
}

impl<S: Store> FromRequestParts<AppState<S>> for ReadAccess {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState<S>,
    ) -> Result<Self, Self::Rejection> {
        let token = presented(parts, state).await?;
        if token.is_none() && !state.config.http.public_reads {
            return Err(ApiError::Unauthorized(
                "reads need a token on this server: Authorization: Bearer <token>",
            ));
        }
        Ok(ReadAccess { token })
    }
}

impl<S: Store, M: ScopeMarker> FromRequestParts<AppState<S>> for Authorized<M> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState<S>,
    ) -> Result<Self, Self::Rejection> {
        let token = presented(parts, state)
            .await?
            .ok_or(ApiError::Unauthorized(
                "this needs a token: Authorization: Bearer <token>",
            ))?;
        if !token.scope.grants(M::SCOPE) {
            return Err(ApiError::Forbidden(M::SCOPE));
        }
        Ok(Authorized {
            token,
            _scope: PhantomData,
        })
    }
}
